"""Transparency: privacy for algorithmic transparency reports (Chen, Golubchik & Pal,
"Achieving Transparency Report Privacy in Linear Time", ACM JDIQ 14(2), 2022), with the
corrections of the spec (``shared/specs/atr-privacy.md`` 3.6-3.7: Theorem 1's missing beta_min
term, the ALLOCATION residual, the 0/0 quotients).

The report's decision rules and fairness measures are computed from an announced mapping D~
within a fidelity budget of the true mapping D, chosen so that the largest confidence an
adversary who reads D~ as the true mapping gets about a data subject's private attributes is
the smallest the budget allows, QID group by QID group, in time linear in the cells.

Records are aggregated into cells through the current execution engine (one
``current_engine().group_counts`` call: Arrow's hash aggregation locally, batch by batch over
the input's batches, so the local process never projects the whole table; a distributed
group-by on Spark); everything after the cell counts runs on the driver (``cells`` module). The
run, its evidence, its checks, its metrics and the owner's trade-off figure read the input only
through those counts and its row count, so on the Spark engine a Parquet input stays on the
cluster (``counts_input``): the executors project and count it, and the driver holds no record.
The classifier of ``decisions: model`` is fitted on the records themselves, here: it is
refused on such an input.

>>> FAMILY.name, [a.name for a in FAMILY.algorithms]
('transparency', ['atr'])
"""

from privfair.components.core.descriptor import Algorithm, Disclosure, Family, KindCheck, Metric
from privfair.components.transparency import guarantees as G
from privfair.components.transparency.params import ATRParams

__all__ = ["FAMILY", "ATR", "ATRParams"]

_P = "privfair.components.transparency"

# What a report's shareable copy holds besides its three tables: only what follows from the
# announced mapping (the published tables) and the public parameters. The count of cells and
# groups, the fidelity, beta*_global and the fairness rows are read off the published tables;
# ``decisions`` says what made the decisions (its source, and a model's kind, target, features
# and training share: parameters and column roles). With the owner stay everything computed
# from the true rule D or the input: C* (the confidence under D), beta_min (a function of the
# cell masses, which the tables do not publish), the solver's cases, the largest change of a
# rule, the record count and the model card's sizes, accuracies and exact positive rate, and the
# trade-off figure (beta*_g swept over the fidelity on D). Published together, C*, a sweep on D
# and an exact positive rate give a group's true rules and the true parity back (issue 21;
# tests/transparency/test_attack_true_rules.py).
PUBLIC = Disclosure(
    metrics=("cells", "groups", "fidelity_mode", "fidelity", "beta_global", "fairness",
             "decisions"),
    figures=("privacy_by_group", "fairness_intervals"),
    covers=(
        "For every data subject, decision and private value, an adversary who knows the "
        "distribution of the cells and reads the announced rules as the true ones is at most "
        "beta* confident about the subject's private attributes (per QID group, the smallest "
        "confidence the stated fidelity allows; with announce: randomised, at most slack "
        "above it); every announced rule is within that fidelity of the true rule, and every "
        "fairness interval, computed from the announced rates and "
        "the fidelity alone, holds the true value."
    ),
    does_not_cover=(
        "A reader who also knows the mechanism reads the true rule of a cell announced at an "
        "end of its fidelity interval (announced -+ (1 - delta)), which the optimum forces "
        "in the beta_0, beta_1 and beta_p cases (spec L1; announce: randomised draws the "
        "mapping instead, and a published announce_seed gives the draw back); confidence "
        "about one of several private attributes on its own (A3); several reports on the "
        "same data (L5): two "
        "reports of overlapping records differenced tell what the records added or removed "
        "between them do, which the owner's ledger refuses to publish (republish: refuse)."
    ),
)  # fmt: skip

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
        Metric("cells_at_end", "cells announced at an end of their interval (rule readable)"),
        Metric("cases", "groups per optimum case"),
        Metric("fairness", "fairness measures (announced, interval of the true value)"),
        Metric("decisions", "what made the decisions"),
        Metric("model", "model card (owner only: sizes, accuracies, positive rate)"),
    ),
    figures=f"{_P}.figures:figures",
    outputs=("decision_rules", "fairness", "privacy_summary"),
    sidecars=("audit_cells", "audit_groups", "audit_fairness", "training"),
    paper="Chen, Golubchik, Pal, Achieving Transparency Report Privacy in Linear Time, "
    "ACM JDIQ 14(2), 2022",
    row_level=False,
    public=PUBLIC,
    # the cells are one count of each row's projection (cells.count_cells); a classifier
    # (decisions: model) is fitted on the records, so its input is ingested here
    counts_input=f"{_P}.cells:counts_only",
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
        _kind(G.GroupBound, "atr_group_bound", "cells", "break_bound"),
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
