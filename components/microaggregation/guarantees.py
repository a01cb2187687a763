"""The guarantee kinds only microaggregation declares (Fair-MDAV spec section 3, C1-C14).

Data only; their checkers are in ``privfair.components.microaggregation.checks``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from privfair.components.microaggregation.encoding import Scaling
from privfair.schemas.contracts import Guarantee

__all__ = [
    "GroupSizeRange",
    "GroupMeans",
    "GroupRepresentatives",
    "QIsUnchanged",
    "MeanPreservation",
    "FairletComposition",
    "FairletCount",
    "CorrectionDirection",
    "LocalFairness",
    "MinimalCorrection",
    "DemographicParityBound",
    "SeedNearest",
    "ParameterValidity",
]


class GroupSizeRange(Guarantee):
    """Every group (lineage group id) has between ``min_size`` and ``max_size`` rows (MDAV: [k, 2k-1])."""

    kind: Literal["group_size_range"] = "group_size_range"
    min_size: int = Field(ge=1)
    max_size: int | None = None


class GroupMeans(Guarantee):
    """Every group's published QI vector is identical across members and equals the mean of the
    members' input QI values (relative tolerance ``rtol``)."""

    kind: Literal["group_means"] = "group_means"
    quasi_identifiers: tuple[str, ...] = ()
    rtol: float = 1e-9


class GroupRepresentatives(Guarantee):
    """Every group's published QI values are identical across members and are the group's
    representative of its members' input values: for a numeric QI the mean rounded to
    ``decimals[column]`` decimals (``rtol`` for float noise), for an ``ordinal`` QI the lower
    median on its domain, for a nominal QI the mode of the members' non-null values (ties to
    the lowest level), a null only for a group whose members are all null: a row whose input
    has a value is never published with a null."""

    kind: Literal["group_representatives"] = "group_representatives"
    quasi_identifiers: tuple[str, ...] = ()
    decimals: dict[str, int] = Field(default_factory=dict)
    ordinal: tuple[str, ...] = ()
    rtol: float = 1e-9


class QIsUnchanged(Guarantee):
    """Published QI values equal the input values of the same rows exactly (no anonymity claim)."""

    kind: Literal["qis_unchanged"] = "qis_unchanged"
    quasi_identifiers: tuple[str, ...] = ()


class MeanPreservation(Guarantee):
    """For every listed QI column, the sum over published rows equals the sum over the retained
    input rows (relative tolerance ``rtol``); a column published rounded to ``decimals[c]``
    decimals may differ by at most half a unit of that decimal per published row."""

    kind: Literal["mean_preservation"] = "mean_preservation"
    quasi_identifiers: tuple[str, ...] = ()
    decimals: dict[str, int] = Field(default_factory=dict)
    rtol: float = 1e-9


class FairletComposition(Guarantee):
    """Every group holds exactly ``m`` unfavoured and ``n`` favoured rows of the protected attribute."""

    kind: Literal["fairlet_composition"] = "fairlet_composition"
    m: int = Field(ge=1)
    n: int = Field(ge=1)


class FairletCount(Guarantee):
    """#groups = min(floor(#U_in/m), floor(#F_in/n)), #out = #groups*(m+n), and at termination
    fewer than m unfavoured or fewer than n favoured input rows are left."""

    kind: Literal["fairlet_count"] = "fairlet_count"
    m: int = Field(ge=1)
    n: int = Field(ge=1)


class CorrectionDirection(Guarantee):
    """Labels change only 0->1 on unfavoured rows (positive), only 1->0 on favoured rows
    (negative), or not at all (none)."""

    kind: Literal["correction_direction"] = "correction_direction"
    direction: Literal["positive", "negative", "none"]


class LocalFairness(Guarantee):
    """In every group with both protected values: upr(g) >= tau * fpr(g), exactly (rationals)."""

    kind: Literal["local_fairness"] = "local_fairness"
    tau: float = Field(ge=0, le=1)


class MinimalCorrection(Guarantee):
    """Per group, the number of relabels equals the closed-form minimum that achieves local
    fairness: r* = min(m_g-a, max(0, ceil(tau*b*m_g/n_g) - a)) for positive correction,
    s* = min(b, max(0, b - floor(a*n_g/(tau*m_g)))) for negative correction."""

    kind: Literal["minimal_correction"] = "minimal_correction"
    tau: float = Field(ge=0, le=1)
    direction: Literal["positive", "negative"]


class DemographicParityBound(Guarantee):
    """On the published label: PR(unfavoured) >= ratio * PR(favoured), and, when ``max_difference``
    is set, |PR(unfavoured) - PR(favoured)| <= max_difference."""

    kind: Literal["demographic_parity_bound"] = "demographic_parity_bound"
    ratio: float = Field(ge=0, le=1)
    max_difference: float | None = Field(default=None, ge=0, le=1)


class SeedNearest(Guarantee):
    """Replaying the greedy trace in the ``scaling`` QI space: each group's seed is a farthest
    record from the mean of the rows remaining at its creation, and its members are the seed's
    nearest remaining rows. ``sample``: replay that many groups, drawn with ``seed``
    (None: every group). With ``block_rows``, the grouping ran per block of
    ``privfair.components.microaggregation.blocking.split_blocks`` (``block_m`` unfavoured and
    ``block_n`` favoured rows per group; MDAV: k and 0): the split is recomputed from the input
    and "remaining" means remaining in the row's block."""

    kind: Literal["seed_nearest"] = "seed_nearest"
    grouping: Literal["fairlet", "mdav"] = "fairlet"
    scaling: Scaling = "minmax"
    sample: int | None = Field(default=None, ge=1)
    seed: int = 0
    block_rows: int | None = Field(default=None, ge=2)
    block_m: int = Field(default=0, ge=0)
    block_n: int = Field(default=0, ge=0)


class ParameterValidity(Guarantee):
    """1 <= m <= k-1, tau in [0, 1], binary protected attribute and label, and
    m = floor(k * #U_in/#In + 1/2) when m was derived from k."""

    kind: Literal["parameter_validity"] = "parameter_validity"
    k: int
    m: int | None = None
    n: int | None = None
    tau: float = 0.0
    derived_from_k: bool = True
