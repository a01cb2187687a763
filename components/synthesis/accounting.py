"""Privacy accounting and noise, all through OpenDP: the budget, the plan of every release step
and the one compositor every access to the records goes through.

- **Privacy unit**: adding or removing one record (spec 1.2, A3). A count vector then has L2
  sensitivity 1 and an edge score (an L1 distance between count tables) sensitivity 1.
- **Budget**: rho = the largest zCDP rho whose (epsilon, delta)-DP conversion by OpenDP's
  ``make_zCDP_to_approxDP`` (the Canonne-Kamath-Steinke bound, the conversion the authors'
  ``cdp_rho`` implements) stays within epsilon (spec table C1).
- **Steps** (spec PRIV-1), the budget split ``split`` = (1-way, selection, 2-way):

  ========== ========================== ========= ============================
  phase      mechanism                  count     per-call rho
  ========== ========================== ========= ============================
  one_way    Gaussian, L2 sensitivity 1 d         split[0] rho / d
  select     noisy max (Gumbel, EM)     d - 1     split[1] rho / (d - 1)
  select     Gaussian on one score      d(d-1)/2  split[1] rho / (d(d-1)/2)
  two_way    Gaussian, L2 sensitivity 1 d - 1     split[2] rho / (d - 1)
  ========== ========================== ========= ============================

  (the exponential selector uses the third row instead of the second). The noisy max with
  Gumbel scale s is the exponential mechanism with epsilon = 2/s, and OpenDP charges it
  1/(2 s^2) = epsilon^2/8 under zCDP (bounded range).
- **Composition**: one OpenDP adaptive compositor over the record table, its per-query budgets
  (``d_mids``) set to what OpenDP's own privacy map says each planned measurement costs, so a
  query can never be refused by a rounding error, and the scales nudged up by a few ulps
  until OpenDP's total is within the budget. OpenDP 0.16's own ``extras.mbi`` MST cuts its
  selection budget into per-edge slices whose float sum rounds just above the budget they were
  cut from, so it is refused before any selection runs on a 14-attribute Adult at epsilon = 1
  ("insufficient budget for query: 0.0007486528836794258 > 0.0007486528836794252"; which
  attribute counts fail depends only on rounding; opendp#2789).

The transformations that turn the records into count vectors or scores are ours (OpenDP's
"honest-but-curious" user transformations): their stability maps state the sensitivities
above; everything random and every privacy number is OpenDP's.

>>> round(rho_budget(1.0, 1e-9), 9)
0.014973058
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from privfair.components.core import noise
from privfair.components.core.accounting import (
    _dp,
    _gaussian,
    composed_total,
    epsilon_of,
    rho_budget,
)
from privfair.schemas.errors import InputError

if TYPE_CHECKING:
    from privfair.components.core.frames import Frame

__all__ = [
    "rho_budget",
    "epsilon_of",
    "Step",
    "plan",
    "Compositor",
    "FilterCompositor",
    "step_rho",
    "ledger_table",
    "NEIGHBOURING",
    "composed_total",
    "calls",
    "aim_cost",
]

NEIGHBOURING = "add/remove one record"


@functools.lru_cache(maxsize=64)
def _noisy_max(scale: float):
    dp = _dp()
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
    return dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(), scale=scale)


def step_rho(mechanism: str, scale: float, sensitivity: float = 1.0) -> float:
    """The zCDP rho OpenDP's privacy map gives a ``gaussian`` or ``noisy_max`` measurement of
    ``scale`` at sensitivity ``sensitivity``."""
    m = _gaussian(float(scale)) if mechanism == "gaussian" else _noisy_max(float(scale))
    return float(m.map(float(sensitivity)))


@dataclass(frozen=True)
class Step:
    """One planned release step: ``phase`` (one_way, select, two_way), ``mechanism``
    (gaussian or noisy_max), the noise ``scale`` (Gaussian std, or Gumbel scale), the
    ``sensitivity`` of its query and the ``rho`` OpenDP's map charges for it."""

    phase: str
    mechanism: str
    scale: float
    sensitivity: float
    rho: float


def plan(epsilon: float, delta: float, d: int, selector: str, split=(1 / 3, 1 / 3, 1 / 3)):
    """The steps of a release over ``d`` attributes, in the order they run, and the budget.

    Returns ``(budget_rho, {phase: Step})`` with one representative step per phase (every call
    of a phase has the same scale) and the phase's call count in ``calls(phase, d, selector)``.

    >>> rho, steps = plan(1.0, 1e-9, 14, "greedy")
    >>> round(float(steps["one_way"].scale), 2), round(float(2 / steps["select"].scale), 5)
    (37.45, 0.05542)
    """
    if d < 2:
        raise ValueError("synthesis needs at least two attributes")
    rho = rho_budget(float(epsilon), float(delta))
    n1, n2, n3 = (calls(p, d, selector) for p in ("one_way", "select", "two_way"))
    mech2 = "gaussian" if selector == "exponential" else "noisy_max"
    shares = [split[0] * rho / n1, split[1] * rho / n2, split[2] * rho / n3]
    # Gaussian: rho = 1/(2 s^2); noisy max (zCDP, bounded range): rho = 1/(2 s^2) as well
    if not all(math.isfinite(r) and r > 0 for r in shares):
        raise InputError("epsilon", "every step needs a positive, finite share of the budget")
    scales = [math.sqrt(1.0 / (2.0 * r)) for r in shares]
    if not all(math.isfinite(s) and s > 0 for s in scales):
        raise InputError("epsilon", "every step's noise scale must be finite and positive")
    bump = 1.0
    for _ in range(64):
        s = [x * bump for x in scales]
        steps = {
            "one_way": Step("one_way", "gaussian", s[0], 1.0, step_rho("gaussian", s[0])),
            "select": Step("select", mech2, s[1], 1.0, step_rho(mech2, s[1])),
            "two_way": Step("two_way", "gaussian", s[2], 1.0, step_rho("gaussian", s[2])),
        }
        total = composed_total(
            [steps[p].rho for p, n in zip(PHASES, (n1, n2, n3), strict=True) for _ in range(n)]
        )
        if total <= rho:
            return rho, steps
        bump *= 1.0 + 4 * np.finfo(float).eps
    raise RuntimeError("could not fit the steps in the budget")  # pragma: no cover


PHASES = ("one_way", "select", "two_way")


def calls(phase: str, d: int, selector: str) -> int:
    """How many calls ``phase`` makes over ``d`` attributes (spec PRIV-1)."""
    if phase == "one_way":
        return d
    if phase == "select":
        return d * (d - 1) // 2 if selector == "exponential" else d - 1
    return d - 1


def _records_domain(dp):
    """The compositors' input domain: the record-code matrix, or a frame of it (a run's
    input, counted through the engine batch by batch or where its rows stay on a cluster)."""
    from privfair.components.core.frames import Frame

    return dp.user_domain(
        "privfair.RecordCodes", member=lambda x: isinstance(x, np.ndarray | Frame)
    )


class Compositor:
    """The one door to the records: an OpenDP adaptive compositor over the record-code matrix
    (privacy unit: one record added or removed), with budgets ``[step.rho for each call]``.

    ``gaussian(query, fn, scale)`` and ``noisy_max(query, fn, scale)`` run one planned step
    whose query ``fn(records)`` returns a float vector (counts or scores of sensitivity 1);
    every call is recorded in ``ledger``.
    """

    def __init__(self, records: np.ndarray | Frame, steps: Sequence[Step]):
        dp = _dp()
        self._dp = dp
        self.steps = list(steps)
        self.domain = _records_domain(dp)
        self.metric = dp.symmetric_distance()
        self.measurement = dp.c.make_adaptive_composition(
            self.domain,
            self.metric,
            dp.zero_concentrated_divergence(),
            d_in=1,
            d_mids=[s.rho for s in self.steps],
        )
        self.total = float(self.measurement.map(1))
        noise.opened()  # from here on the charge stays, whatever happens (privfair.components.core.noise)
        self._queryable = self.measurement(records)
        self.ledger: list[dict] = []

    def _transformation(self, fn: Callable, metric):
        dp = self._dp
        out = dp.vector_domain(dp.atom_domain(T=float, nan=False))

        def function(records):
            return [float(v) for v in np.asarray(fn(records), dtype=float).ravel()]

        return dp.t.make_user_transformation(
            self.domain, self.metric, out, metric, function=function, stability_map=float
        )

    def _check(self, step: Step) -> None:
        i = len(self.ledger)
        if i >= len(self.steps):
            raise RuntimeError(f"step {i} does not follow the plan: the plan has {i} steps")
        planned = self.steps[i]
        if (planned.mechanism, planned.scale) != (step.mechanism, step.scale):
            raise RuntimeError(f"step {i} does not follow the plan")

    def gaussian(self, phase: str, query: str, fn: Callable, scale: float) -> np.ndarray:
        """Noisy ``fn(records)`` (each coordinate of sensitivity 1, the vector of L2
        sensitivity 1): OpenDP's Gaussian mechanism of std ``scale``."""
        dp = self._dp
        step = Step(phase, "gaussian", scale, 1.0, step_rho("gaussian", scale))
        self._check(step)
        t = self._transformation(fn, dp.l2_distance(T=float))
        m = t >> dp.m.then_gaussian(scale=scale)
        out = np.asarray(self._queryable(m), dtype=float)
        self._record(step, query, float(m.map(1)), len(out))
        return out

    def noisy_max(self, phase: str, query: str, fn: Callable, scale: float) -> int:
        """The index of the largest ``fn(records)`` score (sensitivity 1) after Gumbel noise of
        ``scale``: OpenDP's report-noisy-max, the exponential mechanism with epsilon = 2/scale."""
        dp = self._dp
        step = Step(phase, "noisy_max", scale, 1.0, step_rho("noisy_max", scale))
        self._check(step)
        t = self._transformation(fn, dp.linf_distance(T=float))
        m = t >> dp.m.then_noisy_max(dp.zero_concentrated_divergence(), scale=scale)
        out = int(self._queryable(m))
        self._record(step, query, float(m.map(1)), 1)
        return out

    def _record(self, step: Step, query: str, rho: float, size: int) -> None:
        self.ledger.append(
            {
                "step": len(self.ledger),
                "phase": step.phase,
                "mechanism": step.mechanism,
                "query": query,
                "cells": size,
                "sensitivity": step.sensitivity,
                "scale": step.scale,
                "rho": rho,
            }
        )


class FilterCompositor(Compositor):
    """The door to the records for a mechanism that chooses each step's noise from the noisy
    answers before it (AIM's annealing): OpenDP's fully adaptive composition under a privacy
    filter of ``budget`` (rho), which refuses any query whose privacy loss would take the
    total past the budget (Rogers, Roth, Ullman & Vadhan 2016; zCDP filters: Whitehouse,
    Ramdas, Rogers & Wu 2023). Steps are not planned; each is recorded in ``ledger`` with the
    rho OpenDP's map charges, and ``spent`` is OpenDP's composition of them."""

    def __init__(self, records: np.ndarray | Frame, budget: float):
        dp = _dp()
        self._dp = dp
        self.steps = []
        self.domain = _records_domain(dp)
        self.metric = dp.symmetric_distance()
        odometer = dp.c.make_fully_adaptive_composition(
            self.domain, self.metric, dp.zero_concentrated_divergence()
        )
        self.measurement = dp.c.make_privacy_filter(odometer, d_in=1, d_out=float(budget))
        self.total = float(self.measurement.map(1))
        noise.opened()  # from here on the charge stays, whatever happens
        self._queryable = self.measurement(records)
        self.ledger: list[dict] = []

    def _check(self, step: Step) -> None:
        if not (math.isfinite(step.scale) and step.scale > 0):
            raise RuntimeError(f"step {len(self.ledger)}: the noise scale must be positive")

    @property
    def spent(self) -> float:
        """The filter's own privacy loss of the steps run so far (OpenDP's odometer)."""
        return float(self._queryable.privacy_loss(1)) if self.ledger else 0.0

    def fits(self, rhos: Sequence[float]) -> bool:
        """Whether steps charged ``rhos``, run next one after the other, stay within the
        budget: each added to the filter's loss and rounded up by an ulp, at least as much as
        OpenDP's filter rounds (a sum that merely equals the budget in another order was
        refused at the last step: "pending privacy loss (0.7328332873824535) would exceed
        privacy budget (0.732833287382453)")."""
        loss = self.spent
        for r in rhos:
            loss = float(np.nextafter(loss + float(r), math.inf))
        return loss <= self.total and (
            composed_total([r["rho"] for r in self.ledger] + list(rhos)) <= self.total
        )


def ledger_table(rows: list[dict]) -> pa.Table:
    """The ledger sidecar: one row per step, in order."""
    schema = pa.schema(
        [
            ("step", pa.int64()),
            ("phase", pa.string()),
            ("mechanism", pa.string()),
            ("query", pa.string()),
            ("cells", pa.int64()),
            ("sensitivity", pa.float64()),
            ("scale", pa.float64()),
            ("rho", pa.float64()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def release_cost(params, table=None):
    """The privacy cost of one MST or PreFair release with ``params`` on ``table`` (its roles
    are checked, ``InputError`` as the run would raise, and its column count read: every
    column is an attribute; no value is read), before any noise: OpenDP's composed
    rho of the planned steps, exactly the ``privacy.rho`` the run reports, and its (epsilon,
    delta) conversion. Without a table, the budget rho the plan fits within (an upper bound).

    >>> from privfair.components.synthesis.params import MSTParams
    >>> c = release_cost(MSTParams(epsilon=1.0))
    >>> round(c.rho, 9), c.delta
    (0.014973058, 1e-09)
    """
    from privfair.components.core.descriptor import Cost
    from privfair.components.synthesis.params import selector_of

    if table is None:
        rho = rho_budget(float(params.epsilon), float(params.delta))
    else:
        from privfair.components.synthesis.inputs import synthesis_roles

        selector = selector_of(params)
        # the roles are checked first: a table the run would refuse is refused before any charge
        synthesis_roles(table, fair=selector != "mst")
        d = table.num_columns
        _, steps = plan(params.epsilon, params.delta, d, selector, params.split)
        rho = composed_total([steps[p].rho for p in PHASES for _ in range(calls(p, d, selector))])
    return Cost(rho=rho, epsilon=epsilon_of(rho, float(params.delta)), delta=float(params.delta))


def aim_cost(params, table=None):
    """The privacy cost of one AIM release with ``params`` on ``table`` (its roles checked as
    the run checks them; no value read): the budget rho of (epsilon, delta), which AIM's last
    round spends to the end (its privacy filter refuses more), and its (epsilon, delta).

    >>> from privfair.components.synthesis.params import AIMParams
    >>> round(aim_cost(AIMParams(epsilon=1.0)).rho, 9)
    0.014973058
    """
    from privfair.components.core.descriptor import Cost

    if table is not None:
        from privfair.components.synthesis.inputs import synthesis_roles

        synthesis_roles(table, fair=False)
    rho = rho_budget(float(params.epsilon), float(params.delta))
    return Cost(rho=rho, epsilon=epsilon_of(rho, float(params.delta)), delta=float(params.delta))
