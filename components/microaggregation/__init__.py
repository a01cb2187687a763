"""Microaggregation: plain MDAV and Fair-MDAV (fairlets, microaggregation, label correction).

The family's descriptors (``MDAV``, ``FAIR_MDAV``) and ``FAMILY`` are all the rest of privfair
knows about it; the algorithms themselves are imported when first run.

>>> FAMILY.name, [a.name for a in FAMILY.algorithms]
('microaggregation', ['mdav', 'fair_mdav'])
"""

from privfair.components.core.descriptor import (
    RISK_HEADLINE,
    RISK_METRICS,
    Algorithm,
    Disclosure,
    Family,
    KindCheck,
    Metric,
)
from privfair.components.microaggregation import guarantees as G
from privfair.components.microaggregation.params import FairMDAVParams, MDAVParams

__all__ = ["FAMILY", "MDAV", "FAIR_MDAV", "MDAVParams", "FairMDAVParams"]

_P = "privfair.components.microaggregation"

_HEADLINE = (
    Metric("input_rows", "input rows"),
    Metric("output_rows", "published rows"),
    Metric("dropped_rows", "dropped rows"),
    Metric("groups", "groups"),
    Metric("k", "k (group size)"),
    Metric("m", "m (unfavoured rows per fairlet)"),
    Metric("n", "n (favoured rows per fairlet)"),
    Metric("relabelled", "labels relabelled"),
    Metric("dpar_before", "demographic parity difference, input"),
    Metric("dpar_after", "demographic parity difference, published"),
    Metric("parity_before", "signed parity PR(unfavoured) - PR(favoured), input"),
    Metric("parity_after", "signed parity PR(unfavoured) - PR(favoured), published"),
    Metric("favoured_after", "group the published labels favour"),
    Metric("dropped_by_group", "rows dropped per protected group"),
    Metric("relabelled_by_group", "labels changed per protected group"),
    Metric("t_pa_exact", "t of the protected attribute (max over groups)"),
    Metric("t_pa_bound", "t bound 1/(2k)"),
    Metric("information_loss.il", "information loss IL"),
    Metric("information_loss.il_attr", "IL per attribute (IL_attr)"),
    *RISK_HEADLINE,
)

# Computed from the published table and the parameters alone (the published protected attribute
# and label give the parity and the fairlet ratio m:n; identical QI tuples give the groups).
# Everything measured against the input (its rows, drops, relabelling, parity, information
# loss) stays with the owner.
_PUBLIC_METRICS = (
    "output_rows",
    "groups",
    "k",
    "dpar_after",
    "positive_ratio_after",
    *RISK_METRICS,
)
_FAIR_METRICS = ("m", "n", "parity_after", "favoured_after", "t_pa_exact", "t_pa_bound")
_DOES_NOT_COVER = (
    "k counts the rows sharing one published quasi-identifier tuple, not the rows sharing a "
    "quasi-identifier tuple and a value of the pass-through columns: a reader who knows a "
    "person's quasi-identifiers learns their group's label and protected-attribute mix, and an "
    "attribute every member of a group shares is learnt exactly (k-anonymity is not "
    "l-diversity): the metrics reidentification_risk and l_diversity measure both over the "
    "quasi-identifiers, the protected attribute and the columns marked known. The label is corrected, not the truth, for relabelled rows. Two releases "
    "of overlapping rows under different groupings (the table again after one person joined "
    "or left) differenced give that person's pass-through values exactly and their "
    "quasi-identifiers approximately: the owner's ledger refuses such a re-publication "
    "(republish: refuse, the default, whatever the pipeline, store or path)."
)


def _public(covers: str, *extra: str) -> Disclosure:
    return Disclosure(
        metrics=(*_PUBLIC_METRICS, *extra), covers=covers, does_not_cover=_DOES_NOT_COVER
    )


MDAV = Algorithm(
    name="mdav",
    title="MDAV microaggregation",
    params=MDAVParams,
    run=f"{_P}.mdav:mdav",
    contract=f"{_P}.mdav:contract",
    evidence=f"{_P}.audit:evidence",
    evidence_parts=f"{_P}.audit:evidence_parts",
    example=f"{_P}.examples:mdav_example",
    headline=_HEADLINE,
    figures=f"{_P}.figures:figures",
    outputs=("data",),
    sidecars=("lineage",),
    paper="Domingo-Ferrer & Torra, Ordinal, continuous and heterogeneous k-anonymity through "
    "microaggregation, DMKD 2005",
    public=_public(
        "Every published row shares its quasi-identifier values with at least k - 1 others "
        "(groups of k to 2k - 1 rows, each replaced by its group's representative); rows are "
        "published in an order that is a function of the published values only."
    ),
)

FAIR_MDAV = Algorithm(
    name="fair_mdav",
    title="Fair-MDAV",
    params=FairMDAVParams,
    run=f"{_P}.fair_mdav:fair_mdav",
    contract=f"{_P}.fair_mdav:contract",
    evidence=f"{_P}.audit:evidence",
    evidence_parts=f"{_P}.audit:evidence_parts",
    example=f"{_P}.examples:fair_mdav_example",
    headline=_HEADLINE,
    figures=f"{_P}.figures:figures",
    outputs=("data",),
    sidecars=("lineage",),
    paper="González-Zelaya, Salas, Megías, Missier, Fair and Private Data Preprocessing through "
    "Microaggregation, ACM TKDD 18(3), 2023",
    public=_public(
        "Every published row shares its quasi-identifier values with at least k - 1 others, "
        "each group made of whole (m, n)-fairlets, so the protected attribute's share in every "
        "group is the table's (t-closeness), and the label corrected towards parity; rows are "
        "published in an order that is a function of the published values only.",
        *_FAIR_METRICS,
    ),
)


def _kind(
    model, check: str, corrupt: str | None, by_group: bool = False, summarised: bool = False
) -> KindCheck:
    """``summarised``: a whole-table rule with ``summarise_<rule>`` and ``decide_<rule>`` beside
    its ``check_<rule>`` (checked in parts from the parts' summaries)."""
    rule = check.removeprefix("check_")
    return KindCheck(
        model,
        f"{_P}.checks:{check}",
        "audit",
        f"{_P}.corruptions:{corrupt}" if corrupt else None,
        "" if corrupt else "it reads only the parameters and the input",
        by_group,
        f"{_P}.checks:summarise_{rule}" if summarised else None,
        f"{_P}.checks:decide_{rule}" if summarised else None,
    )


FAMILY = Family(
    name="microaggregation",
    package=_P,
    algorithms=(MDAV, FAIR_MDAV),
    kinds=(
        _kind(G.GroupSizeRange, "check_group_size_range", "break_group_size_range", by_group=True),
        _kind(G.GroupMeans, "check_group_means", "break_qi_values", by_group=True),
        _kind(
            G.GroupRepresentatives,
            "check_group_representatives",
            "break_representatives",
            by_group=True,
        ),
        _kind(G.QIsUnchanged, "check_qis_unchanged", "break_qi_values", by_group=True),
        _kind(G.MeanPreservation, "check_mean_preservation", "break_sums", summarised=True),
        _kind(
            G.FairletComposition,
            "check_fairlet_composition",
            "break_fairlet_composition",
            by_group=True,
        ),
        _kind(G.FairletCount, "check_fairlet_count", "break_fairlet_count", summarised=True),
        _kind(
            G.CorrectionDirection,
            "check_correction_direction",
            "break_labels_direction",
            by_group=True,
        ),
        _kind(G.LocalFairness, "check_local_fairness", "break_local_fairness", by_group=True),
        _kind(
            G.MinimalCorrection,
            "check_minimal_correction",
            "break_minimal_correction",
            by_group=True,
        ),
        _kind(
            G.DemographicParityBound,
            "check_demographic_parity_bound",
            "break_parity",
            summarised=True,
        ),
        _kind(G.SeedNearest, "check_seed_nearest", "break_seed_nearest", by_group=True),
        _kind(G.ParameterValidity, "check_parameter_validity", None, summarised=True),
    ),
)
