"""Transparency: privacy for algorithmic transparency reports (Chen, Golubchik & Pal,
"Achieving Transparency Report Privacy in Linear Time", ACM JDIQ 14(2), 2022), with the
corrections of the spec (``shared/specs/atr-privacy.md`` 3.6-3.7: Theorem 1's missing beta_min
term, the ALLOCATION residual, the 0/0 quotients).

The report's decision rules and fairness measures are computed from an announced mapping D~
within a fidelity budget of the true mapping D, chosen so that the largest confidence an
adversary who reads D~ as the true mapping gets about a data subject's private attributes is
the smallest the budget allows, QID group by QID group, in time linear in the cells.

Records are aggregated into cells through the current execution engine (one
``current_engine().group_counts`` call: Arrow's hash aggregation locally, a distributed
group-by on Spark); everything after the cell counts runs on the driver, as does the classifier
of ``decisions: model``, which is fitted on the records themselves (``cells`` module).

>>> FAMILY.name, [a.name for a in FAMILY.algorithms]
('transparency', ['atr'])
"""

from components.core.descriptor import Algorithm, Family, KindCheck, Metric
from components.transparency import guarantees as G
from components.transparency.params import ATRParams

__all__ = ["FAMILY", "ATR", "ATRParams"]

_P = "components.transparency"

ATR = Algorithm(
    name="atr",
    title="ATR privacy scheme",
    params=ATRParams,
    run=f"{_P}.atr:atr",
    contract=f"{_P}.contract:contract",
    evidence=f"{_P}.audit:evidence",
    example=f"{_P}.examples:atr_example",
    headline=(
        Metric("records", "input rows (records or cells)"),
        Metric("cells", "decision cells"),
        Metric("groups", "QID groups"),
        Metric("fidelity_mode", "fidelity mode"),
        Metric("fidelity", "fidelity level"),
        Metric("c_star_global", "max adversary confidence, true rules"),
        Metric("beta_global", "max adversary confidence, announced report (beta*)"),
        Metric("beta_min_global", "floor beta_min (largest cell share of its group)"),
        Metric("unprotectable_groups", "groups with one populated cell (beta* = 1)"),
        Metric("max_abs_change", "largest change of an announced rule"),
        Metric("cases", "groups per optimum case"),
        Metric("fairness", "fairness measures (announced, interval of the true value)"),
        Metric("model", "model that made the decisions"),
    ),
    figures=f"{_P}.figures:figures",
    outputs=("decision_rules", "fairness", "privacy_summary"),
    sidecars=("audit_cells", "audit_groups", "audit_fairness", "training"),
    paper="Chen, Golubchik, Pal, Achieving Transparency Report Privacy in Linear Time, "
    "ACM JDIQ 14(2), 2022",
    row_level=False,
)


def _kind(model, check: str, frame: str, corrupt: str | None) -> KindCheck:
    return KindCheck(
        model,
        f"{_P}.checks:check_{check}",
        frame,
        f"{_P}.corruptions:{corrupt}" if corrupt else None,
        "" if corrupt else "it reads only the cells rebuilt from the input and the params",
    )


FAMILY = Family(
    name="transparency",
    package=_P,
    algorithms=(ATR,),
    kinds=(
        _kind(G.InputValidity, "atr_input_validity", "cells", None),
        _kind(G.ValidDistribution, "atr_valid_distribution", "cells", "break_announced"),
        _kind(G.Fidelity, "atr_fidelity", "cells", "break_fidelity"),
        _kind(G.GroupOptimum, "atr_group_optimum", "cells", "break_optimum"),
        _kind(G.GlobalPrivacy, "atr_global_privacy", "cells", "break_global"),
        _kind(G.Sandwich, "atr_sandwich", "cells", "break_sandwich"),
        _kind(G.SolutionStructure, "atr_solution_structure", "cells", "break_structure"),
        _kind(G.MassConservation, "atr_mass_conservation", "cells", "break_mass"),
        _kind(G.FairnessBounds, "atr_fairness_bounds", "fairness", "break_fairness"),
        _kind(G.MonotoneTradeoff, "atr_monotone_tradeoff", "cells", None),
        _kind(G.PublicFields, "atr_public_fields", "public", "break_public_fields"),
    ),
    dataset_roles={
        "adult": {
            "sex": {"role": "public", "kind": "nominal"},
            "education-num": {"role": "sensitive", "kind": "numeric"},
            "income": {"role": "label", "kind": "binary", "positive": [1]},
        },
        "australian": {
            "A1": {"role": "public", "kind": "nominal"},
            "A8": {"role": "sensitive", "kind": "nominal"},
            "A10": {"role": "sensitive", "kind": "numeric"},
        },
    },
)
