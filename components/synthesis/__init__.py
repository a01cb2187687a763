"""Synthesis: differentially private synthetic tables, with MST (McKenna, Miklau & Sheldon,
"Winning the NIST Contest", JPC 2021) as the baseline and PreFair (Pujol, Gilad &
Machanavajjhala, "PreFair: Privately Generating Justifiably Fair Synthetic Data", PVLDB 2023)
whose generating model is justifiably fair, with the corrections of the spec
(``shared/specs/prefair.md`` A1, A6, A7: the Exponential-PreFair noise scale and exact search,
the greedy candidate filter).

Roles: ``protected`` (P, one or more), ``admissible`` (A, at least one), ``label`` (O, the
outcomes, one or more), ``ignored`` (unlabelled, kept). Every column declares a public domain,
and a null is a level of it only where declared (a null in the ``domain``, or
``params.nulls``; the presets declare one only for Adult's three columns with documented
unknowns, ``public_domains.ADULT_NULLS``): the synthetic table has no null anywhere else.

The 1-way and 2-way marginals the three algorithms measure and score are counted by the
current execution engine (``privfair.components.core.engine.current_engine().group_counts``,
in this process or on Spark; ``marginals``): MST and PreFair make one call for the 1-way
marginals and one for every pair the selection scores, AIM one call for all of them; the
noise, the selection, the model and the sampling run in this process, so an input whose rows
stay on a Spark cluster (a ``SparkFrame``) is never read here.

Disclosure (``PUBLIC``): a release's shareable copy is the synthetic table plus what follows
from the noisy measurements, the synthetic table and public parameters alone (the plan, the
tree, the model, fidelity and the quality report against the noisy measurements, fairness of
the synthetic table).
Fidelity and fairness against the input, clamped counts and timings are for the data owner.

AIM (McKenna, Mullins, Sheldon & Miklau, PVLDB 2022; ``aim``) runs on the same domains,
compression and ledger, its rounds of private selection and measurement under an OpenDP
privacy filter, its model a junction tree of the selected pairs (kept chordal: ``aim``'s
docstring lists the deviations from the paper).

>>> FAMILY.name, [a.name for a in FAMILY.algorithms]
('synthesis', ['mst', 'prefair', 'aim'])
"""

from privfair.components.core.descriptor import Algorithm, Disclosure, Family, KindCheck, Metric
from privfair.components.synthesis import guarantees as G
from privfair.components.synthesis import public_domains as D
from privfair.components.synthesis.params import AIMParams, MSTParams, PreFairParams
from privfair.schemas.spec import ColumnSpec

__all__ = ["FAMILY", "MST", "PREFAIR", "AIM", "MSTParams", "PreFairParams", "AIMParams", "PUBLIC"]

_P = "privfair.components.synthesis"

# "(owner)": computed on the private input, kept in the owner part of a release; every other
# headline metric is public (``PUBLIC``).
_FAIR_MISSING = (
    "n/a: a pair is n/a when one of its two groups has no row in the table (a protected "
    "column declaring neither favoured nor unfavoured values has only the value 0 as its "
    "protected group: see the warnings); cdp and cdp_reference alone are n/a when the spec "
    "declares no admissible attribute"
)
_HEADLINE = (
    Metric("rows", "synthetic rows"),
    Metric("privacy.epsilon", "epsilon (OpenDP conversion of the ledger)"),
    Metric("privacy.rho", "zCDP rho spent (ledger total)"),
    Metric("tree", "selected tree (edges)"),
    Metric(
        "fair_tree",
        "tree separates protected from outcomes by admissible attributes",
        missing="n/a: the spec declares no admissible attribute",
    ),
    Metric("model.total", "model's noisy total (rows estimated from the noisy marginals)"),
    Metric("measured_fidelity.one_way_tvd", "mean 1-way TVD vs the noisy measurements"),
    Metric("measured_fidelity.two_way_tvd", "mean 2-way TVD vs the noisy measurements (tree)"),
    Metric("measured_fidelity.acd", "mean Cramer's V difference vs the noisy measurements"),
    Metric("quality.score", "quality score vs the noisy measurements (SDMetrics' definitions)"),
    Metric(
        "fairness.synthetic",
        "demographic parity of each outcome in the synthetic table",
        missing=_FAIR_MISSING,
    ),
    Metric("fidelity.one_way_tvd", "mean 1-way TVD vs input (owner)"),
    Metric("fidelity.two_way_tvd", "mean 2-way TVD vs input (owner)"),
    Metric("fidelity.acd", "mean Cramer's V difference vs input, ACD (owner)"),
    Metric(
        "fairness.input",
        "demographic parity of each outcome in the input (owner)",
        missing=_FAIR_MISSING,
    ),
    Metric("clamped", "input values clamped into the first or last bin (owner)"),
    Metric("timings_s", "seconds per phase (owner)"),
)

# What a release's shareable copy holds besides the synthetic table: the metrics and figures
# computed from the public parameters and roles, the noisy measurements and the synthetic
# table only (each metric's reason in ``synthesize._metrics``, each figure's in ``figures``);
# fidelity and fairness against the input, clamped counts and timings stay with the owner.
PUBLIC = Disclosure(
    metrics=(
        "rows",
        "attributes",
        "selector",
        "privacy",
        "tree",
        "fair_tree",
        "exact_search",
        "compressed_sizes",
        "model",
        "measured_fidelity",
        "quality",
        "fairness.synthetic",
    ),
    figures=("tree", "ledger", "tvd_measured", "fairness_synthetic", "quality"),
    covers=(
        "(epsilon, delta)-differential privacy for each person in the input (one record added "
        "or removed): the synthetic table and every number shared with it are computed from "
        "the noisy measurements, the synthetic table and public parameters only."
    ),
    does_not_cover=(
        "It bounds what anyone learns about one person, not about groups: the synthetic "
        "table reproduces the input's aggregate patterns, and its fidelity is measured "
        "against the noisy measurements, not against the input."
    ),
)


def _algorithm(name: str, title: str, params, paper: str, **own) -> Algorithm:
    return Algorithm(
        name=name,
        title=title,
        params=params,
        run=own.get("run", f"{_P}.synthesize:{name}"),
        contract=own.get("contract", f"{_P}.contract:contract"),
        evidence=own.get("evidence", f"{_P}.audit:evidence"),
        example=f"{_P}.examples:{name}_example",
        headline=own.get("headline", _HEADLINE),
        figures=f"{_P}.figures:figures",
        outputs=("data",),
        sidecars=own.get("sidecars", ("ledger", "measurements", "compression", "tree", "model")),
        paper=paper,
        row_level=False,  # a new table, not the input's rows
        replayable=False,  # OpenDP's noise takes no seed
        public=PUBLIC,
        cost=own.get("cost", f"{_P}.accounting:release_cost"),
        # every marginal a group-by (AIM's candidates' too), the domains checked on null
        # counts: the input may stay on a cluster
        counts_input=True,
    )


MST = _algorithm(
    "mst",
    "MST",
    MSTParams,
    "McKenna, Miklau, Sheldon, Winning the NIST Contest: A scalable and general approach to "
    "differentially private synthetic data, JPC 11(3), 2021",
)
PREFAIR = _algorithm(
    "prefair",
    "PreFair",
    PreFairParams,
    "Pujol, Gilad, Machanavajjhala, PreFair: Privately Generating Justifiably Fair Synthetic "
    "Data, PVLDB 16(6), 2023",
)

AIM = _algorithm(
    "aim",
    "AIM",
    AIMParams,
    "McKenna, Mullins, Sheldon, Miklau, AIM: An Adaptive and Iterative Mechanism for "
    "Differentially Private Synthetic Data, PVLDB 15(11), 2022",
    run=f"{_P}.aim:aim",
    contract=f"{_P}.contract:aim_contract",
    evidence=f"{_P}.audit:aim_evidence",
    sidecars=("ledger", "measurements", "compression", "cliques", "model"),
    cost=f"{_P}.accounting:aim_cost",
    headline=(
        *_HEADLINE,
        Metric("rounds.run", "rounds run (a private selection, then a measurement)"),
    ),
)


def _kind(model, check: str, frame: str, corrupt: str) -> KindCheck:
    return KindCheck(model, f"{_P}.checks:check_{check}", frame, f"{_P}.corruptions:{corrupt}")


def _col(role: str, kind: str, **extra) -> dict:
    return {"role": role, "kind": kind, **extra}


def _with_null(column: dict) -> ColumnSpec:
    """``column``'s preset with a null level declared: a null at the end of its ``domain``.
    The spec key ``dataset.columns.<col>.domain`` takes no null yet (``privfair.schemas.spec``), so the
    preset is the validated ``ColumnSpec`` with the null added after validation; ingest takes
    a ``ColumnSpec`` as it is and the null travels in the column's role."""
    spec = ColumnSpec.model_validate(column)
    return spec.model_copy(update={"domain": [*spec.domain, None]})


def _adult(name: str, role: str, kind: str, **extra) -> dict | ColumnSpec:
    column = _col(role, kind, **extra)
    return _with_null(column) if name in D.ADULT_NULLS else column


FAMILY = Family(
    name="synthesis",
    package=_P,
    algorithms=(MST, PREFAIR, AIM),
    kinds=(
        _kind(G.PrivacyLedger, "privacy_ledger", "ledger", "break_ledger"),
        _kind(G.PublicCompression, "public_compression", "compression", "break_compression"),
        _kind(G.TreeStructure, "tree_structure", "structure", "break_structure"),
        _kind(G.FairTree, "fair_tree", "structure", "break_fair_tree"),
        _kind(G.ModelIndependence, "model_independence", "model", "break_model"),
        _kind(G.SyntheticIndependence, "synthetic_independence", "synthetic", "break_synthetic"),
        _kind(G.SyntheticSchema, "synthetic_schema", "schema", "break_schema"),
        _kind(G.SyntheticNulls, "synthetic_nulls", "schema", "break_nulls"),
        _kind(G.AdaptiveLedger, "adaptive_ledger", "ledger", "break_adaptive_ledger"),
        _kind(G.ChordalStructure, "chordal_structure", "structure", "break_chordal_structure"),
    ),
    dataset_roles={
        "adult": {
            "age": _col("ignored", "numeric"),
            "workclass": _adult("workclass", "admissible", "nominal", domain=list(D.WORKCLASS)),
            "education": _col("ignored", "nominal", domain=list(D.EDUCATION)),
            "education-num": _col("admissible", "numeric"),
            "marital-status": _col("ignored", "nominal", domain=list(D.MARITAL_STATUS)),
            "occupation": _adult("occupation", "admissible", "nominal", domain=list(D.OCCUPATION)),
            "relationship": _col("ignored", "nominal", domain=list(D.RELATIONSHIP)),
            "race": _col("protected", "nominal", domain=list(D.RACE), favoured="White"),
            "sex": _col("protected", "binary", favoured=1),
            "capital-gain": _col("admissible", "numeric"),
            "capital-loss": _col("admissible", "numeric"),
            "hours-per-week": _col("admissible", "numeric"),
            "native-country": _adult(
                "native-country",
                "protected",
                "nominal",
                domain=list(D.NATIVE_COUNTRY),
                favoured="United-States",
            ),
            "income": _col("label", "binary", positive=1),
        },
        "compas": {
            "sex": _col("protected", "binary", favoured=1),
            "age": _col("ignored", "numeric"),
            "priors_count": _col("admissible", "numeric"),
            "days_b_screening_arrest": _col("ignored", "numeric"),
            "jailtime": _col("ignored", "numeric"),
            "c_charge_degree": _col("admissible", "binary"),
            "race": _col("protected", "binary", favoured=1),
            "no_recid": _col("label", "binary", positive=1),
        },
    },
)
