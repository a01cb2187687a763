"""Generalisation: dMondrian and dSabre, t-closeness generalisation that provably bounds
discrimination (Ruggieri, "Using t-closeness anonymity to control for non-discrimination",
Transactions on Data Privacy 7(2), 2014).

A release of either algorithm keeps every row and its decision, replaces each PND value by its
class's label, and publishes the PD attribute at the granularity its bound covers: unchanged when
its two values are the two groups, otherwise as each row's group ("protected" / "unprotected").
Every q-block a reader forms from the published columns (PND labels and PD value) is then
t_eff-close (t_eff = max{t, tau(R)}), so the release is bd_f(t_eff)-protective for every
discrimination measure f (RD, ED, RR, ER, RC, EC, OR); with k, every such q-block has at least k
rows (``k_over: classes``: every class, the paper's k). A t below tau(R) (one class) is refused
unless the spec accepts it (``single_class: allow``).

>>> FAMILY.name, [a.name for a in FAMILY.algorithms]
('generalisation', ['dmondrian', 'dsabre'])
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
from privfair.components.generalisation import guarantees as G
from privfair.components.generalisation.params import DMondrianParams, DSabreParams

__all__ = ["FAMILY", "DMONDRIAN", "DSABRE", "DMondrianParams", "DSabreParams"]

_P = "privfair.components.generalisation"

_HEADLINE = (
    Metric("rows", "rows (all published)"),
    Metric("p_minus", "p- (global negative-decision rate)"),
    Metric("tau_r", "tau(R) (floor of t)"),
    Metric("t", "t requested"),
    Metric("t_eff", "t_eff = max(t, tau(R))"),
    Metric("bounds.RD.upper", "bound on |RD| and |ED|"),
    Metric("bounds.RR.upper", "upper bound on RR and ER"),
    Metric("bounds.RC.lower", "lower bound on RC and EC"),
    Metric("bounds.OR.upper", "upper bound on OR"),
    Metric("classes", "equivalence classes"),
    Metric("smallest_class", "smallest class"),
    Metric("generalised_cells", "generalised PND cells"),
    Metric("information_loss.lm_norm", "information loss LM of the published labels (norm.)"),
    Metric("information_loss.lm_sum", "information loss LM of the published labels (sum)"),
    Metric(
        "information_loss_active.lm_norm",
        "information loss LM over the input's active domains, the paper's (normalised, owner)",
    ),
    Metric("query_error.median_relative_error", "median relative error of count queries"),
    *RISK_HEADLINE,
)

_PAPER = (
    "Ruggieri, Using t-closeness anonymity to control for non-discrimination, "
    "Transactions on Data Privacy 7(2):99-129, 2014"
)

# The decision and the PD group are published and each class is a set of equal labels, so these
# follow from the published table and the parameters; LM (``information_loss``) is computed
# from the published labels and the declared domains (``publish.public_information_loss``).
# The paper's LM over the input's active domains (``information_loss_active``: how many
# distinct input values lie inside each label) and the count-query error are measured against
# the input and stay with the owner.
_PUBLIC_METRICS = (
    "rows",
    "p_minus",
    "tau_r",
    "t",
    "t_eff",
    "bounds",
    "classes",
    "smallest_class",
    "generalised_cells",
    "information_loss.lm_norm",
    "information_loss.lm_sum",
    "pd_published_as",
    *RISK_METRICS,
)


def _public(*extra: str) -> Disclosure:
    return Disclosure(
        metrics=(*_PUBLIC_METRICS, *extra),
        covers="Every q-block of the published columns (rows sharing the published PND labels and "
        "PD value) has a share of negative decisions within t_eff of the table's, so every "
        "discrimination measure (RD, ED, RR, ER, RC, EC, OR) between the two PD groups in every "
        "itemset of the published columns is bounded by bd_f(t_eff); the PD attribute is "
        "published at that granularity: its two values when they are the groups, else each "
        "row's group ('protected' / 'unprotected'); with k, every such q-block has at least k "
        "rows (every class, when the spec sets k_over: classes); rows are published in an order "
        "that is a function of the published values only.",
        does_not_cover="The decision and the PD group are published exactly, row by row: the "
        "bound is on decision rates within q-blocks, not on what a reader who knows a person's "
        "quasi-identifiers learns of that person's own decision (at most their q-block's "
        "decision mix); it says nothing of the PD attribute's values within a group (a many-"
        "valued one is published only as its groups), nor of groups other than the declared "
        "two; it is not k-anonymity unless the spec sets k.",
    )


DMONDRIAN = Algorithm(
    name="dmondrian",
    title="dMondrian",
    params=DMondrianParams,
    run=f"{_P}.dmondrian:dmondrian",
    contract=f"{_P}.contract:dmondrian_contract",
    evidence=f"{_P}.audit:evidence",
    example=f"{_P}.examples:dmondrian_example",
    headline=_HEADLINE,
    figures=f"{_P}.figures:figures",
    input_measures=f"{_P}.figures:input_measures",
    outputs=("data",),
    sidecars=("lineage",),
    paper=_PAPER,
    public=_public(),
)

DSABRE = Algorithm(
    name="dsabre",
    title="dSabre",
    params=DSabreParams,
    run=f"{_P}.dsabre:dsabre",
    contract=f"{_P}.contract:dsabre_contract",
    evidence=f"{_P}.audit:evidence",
    example=f"{_P}.examples:dsabre_example",
    headline=(*_HEADLINE, Metric("leaves", "Dichotomize leaves")),
    figures=f"{_P}.figures:figures",
    input_measures=f"{_P}.figures:input_measures",
    outputs=("data",),
    sidecars=("lineage",),
    paper=_PAPER,
    public=_public("leaves"),
)


def _kind(model, check: str) -> KindCheck:
    return KindCheck(
        model, f"{_P}.checks:check_{check}", "audit", f"{_P}.corruptions:break_{check}"
    )


# Spec section 4.1: German credit's PD attribute is personal_status A92 (the prepared table's
# sex = 0, "not-single women"), bad credit the negative decision; Adult's PD attribute is race
# (non-White protected), income <=50K negative, education in its natural order.
ADULT_EDUCATION = (
    "Preschool",
    "1st-4th",
    "5th-6th",
    "7th-8th",
    "9th",
    "10th",
    "11th",
    "12th",
    "HS-grad",
    "Some-college",
    "Assoc-voc",
    "Assoc-acdm",
    "Bachelors",
    "Masters",
    "Prof-school",
    "Doctorate",
)
GERMAN_EMPLOYMENT = ("A71", "A72", "A73", "A74", "A75")  # unemployed, <1, 1-4, 4-7, >=7 years

FAMILY = Family(
    name="generalisation",
    package=_P,
    algorithms=(DMONDRIAN, DSABRE),
    kinds=(
        _kind(G.PublishedGroups, "pd_groups"),
        _kind(G.TruthfulGeneralisation, "truthful_generalisation"),
        _kind(G.ClassLabels, "class_labels"),
        _kind(G.DecisionCloseness, "decision_closeness"),
        _kind(G.LeafCloseness, "leaf_closeness"),
        _kind(G.BoundedDiscrimination, "bounded_discrimination"),
        _kind(G.ClassSize, "class_size"),
        _kind(G.DisjointClasses, "disjoint_classes"),
        _kind(G.DichotomyLeaves, "dichotomy_leaves"),
    ),
    dataset_roles={
        "german": {
            "sex": {"role": "protected", "kind": "binary", "unfavoured": [0]},
            "employment": {
                "role": "quasi_identifier",
                "kind": "ordinal",
                "domain": list(GERMAN_EMPLOYMENT),
            },
        },
        "adult": {
            "race": {"role": "protected", "kind": "nominal", "favoured": ["White"]},
            "sex": {"role": "quasi_identifier", "kind": "binary"},
            "education": {
                "role": "quasi_identifier",
                "kind": "ordinal",
                "domain": list(ADULT_EDUCATION),
            },
        },
    },
)
