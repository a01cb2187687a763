"""Parameters of the microaggregation algorithms (frozen, unknown keys refused)."""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

from pydantic import Field, field_validator, model_validator

from privfair.components.core.descriptor import OptIn, Params
from privfair.components.microaggregation.encoding import Scaling

__all__ = ["MDAVParams", "FairMDAVParams", "DEFAULT_FLOAT_DECIMALS"]

Publish = Field(
    "schema",
    description="published QI form: 'schema' keeps the input's columns and types (group means "
    "rounded to `decimals`, modes of nominal QIs, medians of ordinal ones); "
    "'onehot' publishes exact means, nominal QIs as one-hot level shares (for model training)",
)

BlockRows = Field(
    default=None,
    ge=2,
    description="group within blocks of at most this many rows (QI median cuts that keep the "
    "protected attribute's ratio, privfair.components.microaggregation.blocking), run on the spec's "
    "execution engine; None: one block (the paper's algorithm)",
)

ScalingField = Field(
    "minmax",
    description="scaling of the numeric QIs in the distance: 'minmax' onto [0, 1] (spec A7), "
    "'zscore' onto mean 0 and sd 1, 'none' raw units (the Fair-MDAV authors' cleanup, which "
    "their Table 3 k = 100 and Table 5 LR rows need; wide-range columns such as capital-gain "
    "then dominate the grouping, and the information loss is in raw units too)",
)

# the decimals a float QI is published with when the spec names none (publish: schema)
DEFAULT_FLOAT_DECIMALS = 2
MAX_DECIMALS = 9

DecimalsField = Field(
    default=None,
    description="decimals of each numeric quasi-identifier published as its group's rounded "
    "mean (publish: 'schema'): one number for every float QI, or {column: decimals}; a QI not "
    f"named gets 0 if its column is an integer type (it stays integers), else "
    f"{DEFAULT_FLOAT_DECIMALS}. A public setting, never read off the input: the finest "
    "precision found in the data would tell something about one person's value",
)


def _check_decimals(decimals: int | dict[str, int] | None) -> int | dict[str, int] | None:
    """Each number of ``decimals`` in [0, MAX_DECIMALS]."""
    values = decimals.values() if isinstance(decimals, dict) else [decimals]
    for v in values:
        if v is not None and not 0 <= v <= MAX_DECIMALS:
            raise ValueError(f"decimals must lie in [0, {MAX_DECIMALS}], got {v}")
    return decimals


TraceSample = Field(
    default=None,
    ge=1,
    description="greedy-trace check (C11): replay this many seeded, randomly chosen groups "
    "instead of all of them (None: every group)",
)


class MDAVParams(OptIn, Params):
    """Plain MDAV microaggregation (Domingo-Ferrer & Torra 2005): groups of size in [k, 2k-1]."""

    opt_in = ("decimals",)  # left at its default, not written: shipped releases keep their bytes

    k: int = Field(ge=2, description="minimum group size (k-anonymity level)")
    scaling: Scaling = ScalingField
    publish: Literal["schema", "onehot"] = Publish
    decimals: int | dict[str, int] | None = DecimalsField
    trace_sample: int | None = TraceSample
    seed: int = Field(0, description="seed of the greedy-trace sample")
    block_rows: int | None = BlockRows

    @field_validator("decimals")
    @classmethod
    def _decimals(cls, decimals):
        return _check_decimals(decimals)


class FairMDAVParams(OptIn, Params):
    """Fair-MDAV (Gonzalez-Zelaya et al., TKDD 2023): fairlets, microaggregation, label correction.

    Give either ``k`` (then m = floor(k*|U|/|D| + 1/2), n = k - m) or both ``m`` and ``n``.
    ``tau`` is the correction level: relabel while upr < tau*fpr in a group (0 = none, 1 = full).
    """

    opt_in = ("decimals",)

    k: int | None = Field(default=None, ge=2, description="fairlet size m + n")
    m: int | None = Field(default=None, ge=1, description="unfavoured records per fairlet")
    n: int | None = Field(default=None, ge=1, description="favoured records per fairlet")
    tau: float = Field(default=1.0, ge=0.0, le=1.0, description="correction level in [0, 1]")
    microaggregate: bool = Field(True, description="replace QIs by their group's representative")
    publish: Literal["schema", "onehot"] = Publish
    decimals: int | dict[str, int] | None = DecimalsField
    correction: Literal["positive", "negative"] = Field("positive", description="relabel direction")
    grouping: Literal["fairlet", "mdav"] = Field("fairlet", description="fairlets or MDAV groups")
    scaling: Scaling = ScalingField
    relabel_order: Literal["nearest", "random"] = Field(
        "nearest", description="which candidates are relabelled first"
    )
    seed: int = Field(0, description="seed of random relabelling and of the trace sample")
    trace_sample: int | None = TraceSample
    block_rows: int | None = BlockRows
    max_drop_share: float = Field(
        0.05,
        ge=0.0,
        le=1.0,
        description="warn when more than this share of a protected group is dropped",
    )

    @field_validator("decimals")
    @classmethod
    def _decimals(cls, decimals):
        return _check_decimals(decimals)

    @model_validator(mode="after")
    def _sizes(self) -> FairMDAVParams:
        if self.grouping == "mdav":
            if self.k is None:
                raise ValueError("grouping 'mdav' needs k")
            if self.m is not None or self.n is not None:
                raise ValueError("grouping 'mdav' takes k only, not m and n")
            return self
        explicit = self.m is not None or self.n is not None
        if explicit:
            if self.m is None or self.n is None:
                raise ValueError("give both m and n, or k alone")
            if self.k is not None and self.k != self.m + self.n:
                raise ValueError(f"k ({self.k}) must equal m + n ({self.m + self.n})")
        elif self.k is None:
            raise ValueError("give k, or both m and n")
        return self

    @property
    def tau_fraction(self) -> Fraction:
        """tau as an exact rational: 0.7 is 7/10, not the nearest binary double."""
        return Fraction(str(self.tau)).limit_denominator(10**9)
