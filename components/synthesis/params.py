"""Parameters of the synthesis family: MST (McKenna, Miklau & Sheldon 2021) and PreFair (Pujol,
Gilad & Machanavajjhala, PVLDB 2023), frozen, unknown keys refused.

Every number is finite and within the range the run can honour, checked here, before any
record is read: a budget of ``epsilon: .inf`` (or ``1e308``) would make the calibration of the
noise search forever or overflow, ``delta: 0`` is pure DP, which the Gaussian mechanism does not
give, and a bin edge or row count past what a float or the sampler holds would publish garbage
or exhaust memory. Each refusal names the parameter and its range:

>>> try:
...     MSTParams(epsilon=float("inf"))
... except ValueError as e:
...     print("epsilon" in str(e), "finite number" in str(e))
True True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from privfair.components.core.descriptor import OptIn, Params

__all__ = [
    "Range",
    "MSTParams",
    "PreFairParams",
    "AIMParams",
    "selector_of",
    "noisy_rows",
    "EPSILON_RANGE",
    "DELTA_RANGE",
    "MAX_ROWS",
    "MAX_EDGE",
]

EPSILON_RANGE = (1e-3, 1e3)
"""Budgets a release can be calibrated for. Below 0.001 the noise of every count is in the
tens of thousands and the noisy row total with it (the sampler would draw millions of rows of
noise); above 1000 OpenDP's (epsilon, delta) conversion overflows (it fails at 1e5) and the
likelihood ratio e^epsilon bounds nothing."""

DELTA_RANGE = (1e-300, 0.1)
"""delta of (epsilon, delta)-DP: positive (the Gaussian mechanism gives no pure DP), at most
0.1 (a release that may fail with probability above 1/10 protects no one)."""

MAX_ROWS = 100_000_000
"""The most synthetic rows one run samples (``rows``, and the noisy total when ``rows`` is
unset: a public cap on post-processing); more does not fit the sampler's memory."""

MAX_EDGE = 1e15
"""The largest bin edge magnitude: every bin's width and every value drawn in it stays a float
that an int64 or a float64 column holds exactly enough (2^53 ~ 9e15)."""


def _finite_in(name: str, x: float, lo: float, hi: float, why: str = "") -> float:
    if not (isinstance(x, int | float) and math.isfinite(x) and lo <= x <= hi):
        raise ValueError(f"{name} must be a finite number in [{lo:g}, {hi:g}], not {x}{why}")
    return float(x)


class Range(BaseModel):
    """Equal-width public bins ``[start, start + step), ..., [stop - step, stop)``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    start: float = Field(description="the first bin's lower edge")
    stop: float = Field(description="the last bin's upper edge (start + a whole number of steps)")
    step: float = Field(gt=0, description="the width of every bin")

    @model_validator(mode="after")
    def _order(self) -> Range:
        for name in ("start", "stop", "step"):
            _finite_in(name, getattr(self, name), -MAX_EDGE, MAX_EDGE)
        if self.stop <= self.start:
            raise ValueError("stop must be greater than start")
        n = (self.stop - self.start) / self.step
        if not n <= 100_000.5:  # also a step so small that n is not finite
            raise ValueError("at most 100,000 bins")
        if abs(n - round(n)) > 1e-9:
            raise ValueError("(stop - start) must be a whole number of steps")
        return self

    def edges(self) -> tuple[float, ...]:
        n = round((self.stop - self.start) / self.step)
        return tuple(self.start + i * self.step for i in range(n + 1))


class MSTParams(Params):
    """MST: (epsilon, delta)-DP synthetic data from noisy 1-way marginals, a privately selected
    maximum spanning tree of attribute pairs, and noisy 2-way marginals on its edges (spec
    1.3), the privacy loss accounted by OpenDP under zCDP and converted with its
    zCDP-to-approximate-DP bound (Canonne, Kamath & Steinke 2020)."""

    epsilon: float = Field(
        description="privacy loss epsilon of the whole release, in [0.001, 1000]"
    )
    delta: float = Field(1e-9, description="delta of (epsilon, delta)-DP, in [1e-300, 0.1]")
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
        le=MAX_ROWS,
        description="rows to sample (at most 100,000,000); None: the model's noisy total, "
        "capped at the same bound (the true row count is private under add/remove-one-record "
        "DP)",
    )
    nulls: tuple[str, ...] = Field(
        (),
        description="columns whose public domain holds a null level (a synthetic value may be "
        "null there); a nominal column may instead list null in its declared domain. A column "
        "declares none otherwise: whether the input has nulls is never read off the data",
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

    @field_validator("epsilon")
    @classmethod
    def _epsilon(cls, epsilon):
        return _finite_in("epsilon", epsilon, *EPSILON_RANGE)

    @field_validator("delta")
    @classmethod
    def _delta(cls, delta):
        if delta == 0:
            raise ValueError(
                "delta must be positive: MST and PreFair add Gaussian noise, which gives "
                "(epsilon, delta)-DP with delta > 0, never pure DP (try 1e-9)"
            )
        return _finite_in("delta", delta, *DELTA_RANGE)

    @field_validator("bins", mode="before")
    @classmethod
    def _ranges(cls, bins):
        """A mapping is a ``Range``, its error named after the column (not a union's
        "Input should be a valid tuple")."""
        if not isinstance(bins, Mapping):
            return bins
        out = {}
        for col, b in bins.items():
            if isinstance(b, Mapping):
                try:
                    b = Range.model_validate(b)
                except ValidationError as e:
                    err = e.errors()[0]
                    key = ".".join(map(str, err["loc"]))
                    msg = err["msg"].removeprefix("Value error, ")
                    raise ValueError(f"bins of '{col}'{' ' + key if key else ''}: {msg}") from None
            out[col] = b
        return out

    @field_validator("bins")
    @classmethod
    def _edges(cls, bins):
        for col, b in bins.items():
            if isinstance(b, Range):
                continue
            if len(b) < 2:
                raise ValueError(f"bins of '{col}': at least two edges (one bin)")
            if len(b) > 100_001:
                raise ValueError(f"bins of '{col}': at most 100,000 bins")
            if any(not math.isfinite(x) or abs(x) > MAX_EDGE for x in b):
                raise ValueError(
                    f"bins of '{col}': edges must be finite numbers in [-{MAX_EDGE:g}, "
                    f"{MAX_EDGE:g}]"
                )
            if any(b2 <= b1 for b1, b2 in zip(b, b[1:], strict=False)):
                raise ValueError(f"bins of '{col}': edges must be strictly increasing")
        return bins

    @field_validator("split")
    @classmethod
    def _split(cls, split):
        if not all(math.isfinite(s) and s >= 1e-6 for s in split) or abs(sum(split) - 1) > 1e-9:
            raise ValueError("split: three finite shares, each at least 1e-6, summing to 1")
        return split

    @field_validator("nulls")
    @classmethod
    def _nulls(cls, nulls):
        if len(set(nulls)) != len(nulls):
            raise ValueError("nulls: a column is named twice")
        return nulls

    def edges(self, column: str) -> tuple[float, ...] | None:
        """The bin edges declared for ``column`` (None if none)."""
        b = self.bins.get(column)
        if b is None:
            return None
        return b.edges() if isinstance(b, Range) else tuple(float(x) for x in b)


class PreFairParams(OptIn, MSTParams):
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
    opt_in: ClassVar[tuple[str, ...]] = ("independence_alpha",)  # added after releases existed
    independence_alpha: float = Field(
        1e-4,
        gt=0,
        lt=1,
        description="FAIR-4's false-alarm rate: the level of the G-tests of outcome against "
        "protected attribute on the synthetic table (Bonferroni over the pairs); a fair release "
        "fails the gate by chance with about this probability",
    )


class AIMParams(MSTParams):
    """AIM (McKenna, Mullins, Sheldon & Miklau, PVLDB 15(11), 2022): every 1-way marginal
    measured, then rounds of select (exponential mechanism on the estimated model's error,
    less the noise it expects) and measure (Gaussian) over the attribute pairs, the model
    re-fitted after each, the noise halved when a round improved the model by less than its
    noise, until the budget is spent; the privacy loss accounted by an OpenDP privacy filter
    under zCDP. ``split`` is MST's and unused here (AIM's shares are ``select_share`` of each
    round, and its rounds ``rounds``).

    >>> AIMParams(epsilon=1.0).select_share, AIMParams(epsilon=1.0).rounds is None
    (0.1, True)
    """

    split: tuple[float, float, float] = Field(
        (1 / 3, 1 / 3, 1 / 3),
        description="MST's budget split; not used by AIM (see select_share and rounds)",
    )
    rounds: int | None = Field(
        None,
        ge=1,
        le=10_000,
        description="the rounds the budget is first cut into (AIM's T; None: 16 d, the "
        "paper's); annealing ends the run in fewer",
    )
    select_share: float = Field(
        0.1, gt=0, lt=1, description="share of each round's rho spent on the selection"
    )
    max_cells: int = Field(
        250_000,
        ge=1,
        le=50_000_000,
        description="the model's size cap (cells over its cliques; AIM's max_model_size): a "
        "pair is a candidate only if the model with it stays within max_cells times the "
        "share of the budget spent",
    )
    round_iters: int = Field(
        100, ge=1, le=100_000, description="estimation iterations after each round (warm start)"
    )


def noisy_rows(total: float) -> int:
    """The rows a release samples when ``rows`` is unset: the model's noisy total, rounded, at
    least 1 and at most ``MAX_ROWS`` (post-processing of the noisy measurements).

    >>> noisy_rows(-3.2), noisy_rows(799.6), noisy_rows(1e12) == MAX_ROWS
    (1, 800, True)
    """
    return int(round(min(MAX_ROWS, max(1.0, total))))  # a NaN total gives 1


def selector_of(params: MSTParams) -> str:
    """``mst`` for MST, else the PreFair selector (``greedy`` or ``exponential``)."""
    return getattr(params, "selector", "mst")
