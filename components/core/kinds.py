"""The guarantee kinds every family shares: each kind's model, its checker, the evidence frame
it reads and its corruption, named by reference (``module:function``) so that this table is
read without importing a checker.

The checkers are in ``privfair.components.core.checks`` and the corruptions in
``privfair.components.core.corruptions``; a family's own kinds are in its ``FAMILY.kinds``.
Discovery (``privfair.components.core.registry``) reads this table beside the families'.
"""

from __future__ import annotations

from privfair.components.core.descriptor import KindCheck
from privfair.schemas import contracts as C

__all__ = ["SHARED_KINDS"]

SHARED_KINDS: tuple[KindCheck, ...] = (
    KindCheck(
        C.KAnonymity,
        "privfair.components.core.checks:check_k_anonymity",
        "published",
        "privfair.components.core.corruptions:break_k_anonymity",
    ),
    KindCheck(
        C.ColumnsAbsent,
        "privfair.components.core.checks:check_columns_absent",
        "published",
        "privfair.components.core.corruptions:break_columns_absent",
    ),
    KindCheck(
        C.Partition,
        "privfair.components.core.checks:check_partition",
        "audit",
        "privfair.components.core.corruptions:break_partition",
        summarise="privfair.components.core.checks:summarise_partition",
        decide="privfair.components.core.checks:decide_partition",
    ),
    KindCheck(
        C.TCloseness,
        "privfair.components.core.checks:check_t_closeness",
        "audit",
        "privfair.components.core.corruptions:break_t_closeness",
        summarise="privfair.components.core.checks:summarise_t_closeness",
        decide="privfair.components.core.checks:decide_t_closeness",
    ),
    KindCheck(
        C.AttributesPreserved,
        "privfair.components.core.checks:check_attributes_preserved",
        "audit",
        "privfair.components.core.corruptions:break_attributes_preserved",
        by_group=True,  # a rule per published row
    ),
    KindCheck(
        C.ParityGap,
        "privfair.components.core.checks:check_parity_gap",
        "published",
        "privfair.components.core.corruptions:break_parity_gap",
    ),
    KindCheck(
        C.ReidentificationRisk,
        "privfair.components.core.checks:check_reidentification_risk",
        "published",
        "privfair.components.core.corruptions:break_reidentification_risk",
    ),
    KindCheck(
        C.LDiversity,
        "privfair.components.core.checks:check_l_diversity",
        "published",
        "privfair.components.core.corruptions:break_l_diversity",
    ),
    KindCheck(
        C.Retention,
        "privfair.components.core.checks:check_retention",
        "audit",
        "privfair.components.core.corruptions:break_retention",
        summarise="privfair.components.core.checks:summarise_retention",
        decide="privfair.components.core.checks:decide_retention",
    ),
)
