"""Parameters of the synthesis family: MST (McKenna, Miklau & Sheldon 2021) and PreFair (Pujol,
Gilad & Machanavajjhala, PVLDB 2023), frozen, unknown keys refused."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from components.core.descriptor import Params

__all__ = ["Range", "MSTParams", "PreFairParams", "selector_of"]


class Range(BaseModel):
    """Equal-width public bins ``[start, start + step), ..., [stop - step, stop)``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    start: float
    stop: float
    step: float = Field(gt=0)

    @model_validator(mode="after")
    def _order(self) -> Range:
        if self.stop <= self.start:
            raise ValueError("stop must be greater than start")
        n = (self.stop - self.start) / self.step
        if abs(n - round(n)) > 1e-9:
            raise ValueError("(stop - start) must be a whole number of steps")
        if round(n) > 100_000:
            raise ValueError("at most 100,000 bins")
        return self

    def edges(self) -> tuple[float, ...]:
        n = round((self.stop - self.start) / self.step)
        return tuple(self.start + i * self.step for i in range(n + 1))


class MSTParams(Params):
    """MST: (epsilon, delta)-DP synthetic data from noisy 1-way marginals, a privately selected
    maximum spanning tree of attribute pairs, and noisy 2-way marginals on its edges (spec
    1.3), the privacy loss accounted by OpenDP under zCDP and converted with its
    zCDP-to-approximate-DP bound (Canonne, Kamath & Steinke 2020)."""

    epsilon: float = Field(gt=0, description="privacy loss epsilon of the whole release")
    delta: float = Field(1e-9, gt=0, lt=1, description="delta of (epsilon, delta)-DP")
    bins: dict[str, tuple[float, ...] | Range] = Field(
        default_factory=dict,
        description="public bins of each numeric column: edges [e0, e1, ..., ek] give the bins "
        "[e0, e1), ..., [e(k-1), ek); or {start, stop, step} for equal widths",
    )
    split: tuple[float, float, float] = Field(
        (1 / 3, 1 / 3, 1 / 3),
        description="shares of the zCDP budget: 1-way marginals, selection, 2-way marginals",
    )
    compress: bool = Field(True, description="merge values whose noisy count is below 3 sigma")
    iters: int = Field(1000, ge=1, le=100_000, description="estimation iterations (final model)")
    rows: int | None = Field(
        None,
        gt=0,
        description="rows to sample; None: the model's noisy total (the true row count is "
        "private under add/remove-one-record DP)",
    )
    out_of_domain: Literal["refuse", "clamp"] = Field(
        "refuse",
        description="a numeric value outside its bins: refuse the input, or clamp it into the "
        "first or last bin (counted in the report)",
    )
    seed: int | None = Field(
        None,
        description="seed of the post-processing only (sampling, uncompression); the privacy "
        "noise comes from OpenDP's cryptographic generator and is never seeded",
    )

    @field_validator("bins")
    @classmethod
    def _edges(cls, bins):
        for col, b in bins.items():
            if isinstance(b, Range):
                continue
            if len(b) < 2:
                raise ValueError(f"bins of '{col}': at least two edges (one bin)")
            if any(not math.isfinite(x) for x in b):
                raise ValueError(f"bins of '{col}': edges must be finite")
            if any(b2 <= b1 for b1, b2 in zip(b, b[1:], strict=False)):
                raise ValueError(f"bins of '{col}': edges must be strictly increasing")
        return bins

    @field_validator("split")
    @classmethod
    def _split(cls, split):
        if any(s <= 0 for s in split) or abs(sum(split) - 1) > 1e-9:
            raise ValueError("split: three positive shares summing to 1")
        return split

    def edges(self, column: str) -> tuple[float, ...] | None:
        """The bin edges declared for ``column`` (None if none)."""
        b = self.bins.get(column)
        if b is None:
            return None
        return b.edges() if isinstance(b, Range) else tuple(float(x) for x in b)


class PreFairParams(MSTParams):
    """PreFair: MST whose tree is *fair* (every path from a protected to an outcome attribute
    passes through an admissible one), so the generating model makes each outcome independent
    of the protected attributes given the admissible ones (justifiable fairness).

    ``selector``: ``greedy`` (Algorithm 2: MST's private Kruskal with the outcome's edges to
    inadmissible attributes removed) or ``exponential`` (Algorithm 1, corrected: Gaussian noisy
    edge scores, then the exact best fair tree of the noisy scores)."""

    selector: Literal["greedy", "exponential"] = Field(
        "greedy", description="tree selection (greedy: Alg. 2; exponential: Alg. 1, exact)"
    )
    max_forests: int = Field(
        5_000_000,
        ge=1,
        description="exponential: forests of the inadmissible attributes the exact search may "
        "enumerate before it falls back to the greedy tree (flagged non-exact)",
    )


def selector_of(params: MSTParams) -> str:
    """``mst`` for MST, else the PreFair selector (``greedy`` or ``exponential``)."""
    return getattr(params, "selector", "mst")
