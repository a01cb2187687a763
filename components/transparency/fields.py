"""The fields of the report's public tables that are the report's own (not the input's
attributes): what the contract allows in a public table (``contract.public_fields``), what the
report writes (``atr``) and the names an input attribute may not take (``cells.RESERVED``).
"""

from __future__ import annotations

__all__ = ["RULE_FIELDS", "SUMMARY_FIELDS", "PUBLIC_FAIRNESS"]

#: ``decision_rules``: after the cell's public and private values, the announced rule
RULE_FIELDS = ("announced_d1", "announced_d0")
#: ``privacy_summary``: ``scope``, then the group's public values, then the rest
SUMMARY_FIELDS = ("scope", "max_adversary_confidence", "fidelity_mode", "fidelity_value", "notice")
#: ``fairness``: every column, in order
PUBLIC_FAIRNESS = (
    "measure", "protected_attribute", "group_1", "group_2", "condition_attribute",
    "condition_value", "rate_group_1", "rate_group_2", "value", "fidelity_mode", "fidelity",
    "distortion_bound", "rate_bound", "true_value_lower", "true_value_upper", "pr_threshold_p",
    "pr_satisfied_announced",
)  # fmt: skip
