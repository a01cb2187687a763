"""Typed, validated parameters of each component (scikit-learn style: small and explicit)."""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MDAVParams(_Params):
    """Plain MDAV microaggregation (Domingo-Ferrer & Torra 2005): groups of size in [k, 2k-1]."""

    k: int = Field(ge=2, description="minimum group size (k-anonymity level)")
    scaling: Literal["minmax", "zscore"] = "minmax"


class FairMDAVParams(_Params):
    """Fair-MDAV (Gonzalez-Zelaya et al., TKDD 2023): fairlets, microaggregation, label correction.

    Give either ``k`` (then m = floor(k*|U|/|D| + 1/2), n = k - m) or both ``m`` and ``n``.
    ``tau`` is the correction level: relabel while upr < tau*fpr in a group (0 = none, 1 = full).
    """

    k: int | None = Field(default=None, ge=2, description="fairlet size m + n")
    m: int | None = Field(default=None, ge=1, description="unfavoured records per fairlet")
    n: int | None = Field(default=None, ge=1, description="favoured records per fairlet")
    tau: float = Field(default=1.0, ge=0.0, le=1.0)
    microaggregate: bool = True
    correction: Literal["positive", "negative"] = "positive"
    grouping: Literal["fairlet", "mdav"] = "fairlet"
    scaling: Literal["minmax", "zscore"] = "minmax"
    relabel_order: Literal["nearest", "random"] = "nearest"
    seed: int = 0

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


COMPONENT_PARAMS: dict[str, type[_Params]] = {
    "mdav": MDAVParams,
    "fair_mdav": FairMDAVParams,
}
