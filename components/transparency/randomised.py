"""Randomised announcements (``announce: randomised``, beyond the paper): an announced mapping
drawn at random from those within the fidelity whose confidence stays within ``slack`` of the
optimum, so that the true rule is not a function of the announced one.

**Why.** The paper's optimum is a function of the fidelity intervals ``[L, H]``, which in delta
mode are ``D_1 -+ (1 - delta)``: its cases put cells at an end of their interval (spec L1), and a
reader who knows delta and the mechanism reads those cells' true rules back as
``D~ +- (1 - delta)`` (4 of adult_atr's 6 cells). The bound beta* then does not describe what
that reader knows.

**The set.** Per QID group ``g`` with cap ``c_g = min(beta*_g + slack, 1)``, the announcements allowed
are

``F_g = {D~ : L <= D~ <= H, and P(x) D~_a(x) <= c_g sum_{x' in g} P(x') D~_a(x') for every
populated x and a in {0, 1}}``,

exactly the mappings within the fidelity whose adversary confidence (Definition 3) is at most
``c_g``: for a fixed cap the confidence bound is linear in ``D~``, so ``F_g`` is a convex
polytope, and it holds the optimum (whose confidence is ``beta*_g``).

**The draw.** A Gibbs sampler (coordinate hit-and-run) started at the optimum: a sweep visits
the group's populated cells in input order and draws each cell's rule uniformly from the
values that keep the group in ``F_g`` given the other cells' rules (an interval: one bound per
constraint, ``lower``/``upper`` below). Its stationary law is the uniform law on ``F_g``; after
``SWEEPS`` sweeps the announced mapping is, up to the chain's mixing, a uniform draw from
``F_g``, and almost surely no populated cell sits at an end of its interval. Cells of zero
population enter no confidence and are drawn uniformly from ``[L, H]`` (the optimum announces
their true rule, spec A4). With cell ``i``'s rule ``t``, ``R_a`` the other cells' mass of
outcome ``a`` and ``M_a`` the largest of them, the interval is

``max(L, (M_1/c - R_1)/P_i, 1 - c R_0 / ((1 - c) P_i)) <= t <=
min(H, c R_1 / ((1 - c) P_i), 1 - (M_0/c - R_0)/P_i)``

(a bound with ``c >= 1`` is no bound). The sampler uses ``c_g`` shrunk by ``1e-6 slack`` so
that rounding never carries a group past ``beta*_g + slack``.

**What a reader learns.** Whoever knows delta, the mechanism and the announced mapping knows
that the true rule ``D`` is one whose set ``F(D)`` holds the announced mapping, with likelihood
``1 / vol F(D)``: an interval of width up to ``2 (1 - delta)`` per cell, not a point
(``tests/transparency/test_attack_inversion.py`` counts what the end-reading attack recovers in
each mode). The seed: ``None`` draws fresh entropy from the operating system, recorded nowhere;
a given seed is published with the params and lets its holder replay the draw for every
candidate ``D``, which gives the inversion back.

**Cost.** ``SWEEPS`` times the largest group's number of cells passes over the cells (all
groups' k-th cells are drawn at once): linear in the cells for a bounded group size.

Example: the paper's Section-8 cells at delta = 0.9 with slack 0.05; each group's confidence
stays within [beta*_g, beta*_g + 0.05] and every rule within its interval.

>>> import numpy as np
>>> from privfair.components.transparency.scheme import adversary_confidence, fidelity_bounds, solve
>>> group = np.array([0, 0, 0, 1, 1, 1])
>>> p = np.array([12, 5, 3, 9, 7, 4]) / 40
>>> L, H = fidelity_bounds(np.array([0, 0, 1, 0, 0.5, 1]), "delta", 0.9)
>>> sol = solve(group, p, L, H)
>>> d = draw(sol.cell_group, p, L, H, sol.d1_tilde, sol.beta, 0.05, np.random.default_rng(1))
>>> conf = adversary_confidence(group, p, d)
>>> bool(np.all((conf >= sol.beta - 1e-12) & (conf <= sol.beta + 0.05)))
True
>>> bool(np.all((L <= d) & (d <= H))), bool(np.any(np.isclose(d, L) | np.isclose(d, H)))
(True, False)
"""

from __future__ import annotations

import numpy as np

__all__ = ["SWEEPS", "draw"]

SWEEPS = 200
"""Gibbs sweeps per draw (each visits every populated cell once)."""

_SHRINK = 1e-6
"""The sampler's cap is ``beta* + (1 - _SHRINK) slack``: a margin for rounding."""


def draw(
    cell_group: np.ndarray,
    p: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    start: np.ndarray,
    beta: np.ndarray,
    slack: float,
    rng: np.random.Generator,
    sweeps: int = SWEEPS,
) -> np.ndarray:
    """An announced mapping drawn (approximately) uniformly from ``F_g`` in every group.

    Parameters
    ----------
    cell_group
        Per cell, its group's index ``0 .. G-1`` (``Solution.cell_group``).
    p, lo, hi
        Prior mass and fidelity interval per cell.
    start
        A mapping inside every ``F_g`` (the optimum, ``Solution.d1_tilde``).
    beta, slack
        Per group, the optimum ``beta*_g`` (``nan`` for a group without mass), and how far
        above it a group's confidence may go.
    rng
        The generator of the draw.
    sweeps
        Gibbs sweeps.

    Returns
    -------
    np.ndarray
        The announced ``D~_1`` per cell, in input order.
    """
    p = np.asarray(p, dtype=np.float64)
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    d = np.array(start, dtype=np.float64)
    empty = p <= 0
    if empty.any():  # no confidence reads them: anywhere in their interval
        d[empty] = lo[empty] + rng.random(int(empty.sum())) * (hi[empty] - lo[empty])
    cells = np.flatnonzero(~empty)
    if cells.shape[0] == 0:
        return d
    order = cells[np.argsort(cell_group[cells], kind="stable")]
    g = np.asarray(cell_group)[order]
    starts = np.concatenate(([0], np.flatnonzero(g[1:] != g[:-1]) + 1))
    counts = np.diff(np.append(starts, g.shape[0]))
    seg = np.repeat(np.arange(starts.shape[0]), counts)
    rank = np.arange(g.shape[0]) - np.repeat(starts, counts)
    P, Lo, Hi, D = p[order], lo[order], hi[order], d[order]
    c = np.minimum(np.asarray(beta, dtype=np.float64)[g[starts]] + (1 - _SHRINK) * slack, 1.0)
    by_rank = [np.flatnonzero(rank == k) for k in range(int(counts.max()))]
    for _ in range(sweeps):
        for at in by_rank:
            m1, m0 = P * D, P * (1.0 - D)
            s1, s0 = np.add.reduceat(m1, starts), np.add.reduceat(m0, starts)
            o1, o0 = m1.copy(), m0.copy()
            o1[at] = 0.0
            o0[at] = 0.0
            x1, x0 = np.maximum.reduceat(o1, starts), np.maximum.reduceat(o0, starts)
            k = seg[at]
            Pi, ck = P[at], c[k]
            r1, r0 = s1[k] - m1[at], s0[k] - m0[at]
            bound = ck < 1.0  # a cap of 1 bounds no cell's own confidence
            own = np.where(bound, ck / np.where(bound, (1.0 - ck) * Pi, 1.0), 0.0)
            lower = np.maximum.reduce(
                [Lo[at], (x1[k] / ck - r1) / Pi, np.where(bound, 1.0 - own * r0, -np.inf)]
            )
            upper = np.minimum.reduce(
                [Hi[at], np.where(bound, own * r1, np.inf), 1.0 - (x0[k] / ck - r0) / Pi]
            )
            # the current rule is allowed: rounding must not shut it out of its own interval
            lower, upper = np.minimum(lower, D[at]), np.maximum(upper, D[at])
            D[at] = lower + rng.random(at.shape[0]) * (upper - lower)
    d[order] = np.minimum(np.maximum(D, Lo), Hi)
    return d
