"""Typed guarantees a component declares for its output, and a spec may demand.

Each guarantee is data only. Its checking function lives in ``components.checks`` and its Great
Expectations expectation in ``pipelines.expectations``; both recompute the guarantee from the
published table (and the input, where the guarantee is relative to it). ``id`` ties a guarantee
to the paper's numbered contract (e.g. Fair-MDAV C1-C14).
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Guarantee(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = ""

    @property
    def title(self) -> str:
        return f"{self.id} {self.kind}".strip()  # type: ignore[attr-defined]


# --- privacy ---------------------------------------------------------------------------------
class KAnonymity(_Guarantee):
    """Every equivalence class over ``quasi_identifiers`` (rows with equal QI tuples) has >= k rows."""

    kind: Literal["k_anonymity"] = "k_anonymity"
    k: int = Field(ge=1)
    quasi_identifiers: tuple[str, ...] = ()


class GroupSizeRange(_Guarantee):
    """Every group (sidecar group id) has between ``min_size`` and ``max_size`` rows (MDAV: [k, 2k-1])."""

    kind: Literal["group_size_range"] = "group_size_range"
    min_size: int = Field(ge=1)
    max_size: int | None = None


class GroupMeans(_Guarantee):
    """Every group's published QI vector is identical across members and equals the mean of the
    members' original QI values (relative tolerance ``rtol``)."""

    kind: Literal["group_means"] = "group_means"
    quasi_identifiers: tuple[str, ...] = ()
    rtol: float = 1e-9


class QIsUnchanged(_Guarantee):
    """Published QI values equal the input values of the same rows exactly (no anonymity claim)."""

    kind: Literal["qis_unchanged"] = "qis_unchanged"
    quasi_identifiers: tuple[str, ...] = ()


class MeanPreservation(_Guarantee):
    """For every QI column, sum over published rows == sum over the retained input rows."""

    kind: Literal["mean_preservation"] = "mean_preservation"
    quasi_identifiers: tuple[str, ...] = ()
    rtol: float = 1e-9


class TCloseness(_Guarantee):
    """Per group, |share of each value of ``attribute`` - reference share| <= t.

    ``reference`` is ``output`` (the published table) or ``input`` (the table before protection).
    For a binary attribute any standard distance (EMD with equal ground distance, total
    variation) reduces to the difference of one value's shares.
    """

    kind: Literal["t_closeness"] = "t_closeness"
    attribute: str
    t: float = Field(ge=0)
    reference: Literal["input", "output"] = "output"


class Partition(_Guarantee):
    """Each published row maps to exactly one input row, no input row twice, and
    published ids and dropped ids partition the input ids."""

    kind: Literal["partition"] = "partition"
    allow_drops: bool = True


class AttributesPreserved(_Guarantee):
    """The listed sensitive columns equal their input values row by row."""

    kind: Literal["attributes_preserved"] = "attributes_preserved"
    columns: tuple[str, ...]


class DifferentialPrivacy(_Guarantee):
    """(epsilon, delta)-DP, certified by a ledger of OpenDP-measured mechanisms whose
    composed cost (zCDP rho) converts to at most the declared epsilon."""

    kind: Literal["differential_privacy"] = "differential_privacy"
    epsilon: float = Field(gt=0)
    delta: float = Field(ge=0, lt=1)


class ReportFidelity(_Guarantee):
    """Transparency report: every announced rule is within fidelity ``delta`` of the true rule, and
    each group's adversary confidence equals the optimum beta* allowed by that fidelity."""

    kind: Literal["report_fidelity"] = "report_fidelity"
    delta: float = Field(ge=0, le=1)


# --- fairness --------------------------------------------------------------------------------
class FairletComposition(_Guarantee):
    """Every group holds exactly ``m`` unfavoured and ``n`` favoured rows of the protected attribute."""

    kind: Literal["fairlet_composition"] = "fairlet_composition"
    m: int = Field(ge=1)
    n: int = Field(ge=1)


class FairletCount(_Guarantee):
    """#groups = min(floor(#U_in/m), floor(#F_in/n)), #out = #groups*(m+n), and at termination
    fewer than m unfavoured or fewer than n favoured input rows are left."""

    kind: Literal["fairlet_count"] = "fairlet_count"
    m: int = Field(ge=1)
    n: int = Field(ge=1)


class CorrectionDirection(_Guarantee):
    """Labels change only 0->1 on unfavoured rows (positive), only 1->0 on favoured rows
    (negative), or not at all (none)."""

    kind: Literal["correction_direction"] = "correction_direction"
    direction: Literal["positive", "negative", "none"]


class LocalFairness(_Guarantee):
    """In every group with both protected values: upr(g) >= tau * fpr(g), exactly (rationals)."""

    kind: Literal["local_fairness"] = "local_fairness"
    tau: float = Field(ge=0, le=1)


class MinimalCorrection(_Guarantee):
    """Per group, the number of relabels equals the closed-form minimum that achieves local
    fairness: r* = min(m_g-a, max(0, ceil(tau*b*m_g/n_g) - a)) for positive correction,
    s* = min(b, max(0, b - floor(a*n_g/(tau*m_g)))) for negative correction."""

    kind: Literal["minimal_correction"] = "minimal_correction"
    tau: float = Field(ge=0, le=1)
    direction: Literal["positive", "negative"]


class DemographicParityBound(_Guarantee):
    """On the published label: PR(unfavoured) >= ratio * PR(favoured), and, when ``max_difference``
    is set, |PR(unfavoured) - PR(favoured)| <= max_difference."""

    kind: Literal["demographic_parity_bound"] = "demographic_parity_bound"
    ratio: float = Field(ge=0, le=1)
    max_difference: float | None = Field(default=None, ge=0, le=1)


class SeedNearest(_Guarantee):
    """Replaying the trace: each group's seed is a farthest record from the mean of the rows
    remaining at its creation, and its members are the seed's nearest remaining rows."""

    kind: Literal["seed_nearest"] = "seed_nearest"
    grouping: Literal["fairlet", "mdav"] = "fairlet"


class ParameterValidity(_Guarantee):
    """1 <= m <= k-1, tau in [0, 1], binary protected attribute and label, and
    m = floor(k * #U_in/#In + 1/2) when m was derived from k."""

    kind: Literal["parameter_validity"] = "parameter_validity"
    k: int
    m: int | None = None
    n: int | None = None
    tau: float = 0.0
    derived_from_k: bool = True


class AlphaProtection(_Guarantee):
    """Generalised table: every PND context B has measure(B) within bd_f(t) (alpha-protection via t-closeness)."""

    kind: Literal["alpha_protection"] = "alpha_protection"
    measure: Literal["RD", "RR", "RC", "OR"]
    alpha: float


class JustifiableFairness(_Guarantee):
    """Synthetic data: the generating tree separates every protected attribute from every outcome
    by an admissible attribute (P independent of O given A)."""

    kind: Literal["justifiable_fairness"] = "justifiable_fairness"
    protected: tuple[str, ...]
    admissible: tuple[str, ...]
    outcome: tuple[str, ...]


Guarantee = Annotated[
    KAnonymity
    | GroupSizeRange
    | GroupMeans
    | QIsUnchanged
    | MeanPreservation
    | TCloseness
    | Partition
    | AttributesPreserved
    | DifferentialPrivacy
    | ReportFidelity
    | FairletComposition
    | FairletCount
    | CorrectionDirection
    | LocalFairness
    | MinimalCorrection
    | DemographicParityBound
    | SeedNearest
    | ParameterValidity
    | AlphaProtection
    | JustifiableFairness,
    Field(discriminator="kind"),
]

GUARANTEE_LIST = TypeAdapter(list[Guarantee])


def contract_to_json(guarantees: list) -> str:
    """Serialise a contract (list of guarantees) to compact, sorted JSON."""
    return json.dumps(GUARANTEE_LIST.dump_python(guarantees, mode="json"), sort_keys=True)


def contract_from_json(text: str | bytes) -> list:
    return GUARANTEE_LIST.validate_python(json.loads(text))
