"""The optimal ATR protection scheme, corrected and vectorised across QID groups.

Chen, Golubchik & Pal, "Achieving Transparency Report Privacy in Linear Time" (ACM JDIQ 14(2),
2022), as corrected by the spec ``shared/specs/atr-privacy.md`` (section 3.7, errata E1-E3).

**Setting.** A *cell* ``x`` is one element of the finite input domain (a public record ``x_U``
plus a sensitive value ``x_S``), with prior mass ``P(x) >= 0`` and true decision rule
``D_1(x) = P(A = 1 | x)``. Its *QID group* ``T`` is the set of cells sharing ``x_U``. The report
announces a perturbed rule ``D~_1(x)`` (and ``D~_0 = 1 - D~_1``) within a fidelity interval
``L(x) <= D~_1(x) <= H(x)`` (``privfair.components.transparency.fidelity``).

**Privacy metric** (Definition 3, eq. 37). An adversary who knows ``P`` and reads the announced
``D~`` *as if it were the true mapping* has posterior confidence

``conf(x_U, a -> x_S) = P(x) D~_a(x) / sum_{x' in T} P(x') D~_a(x')``

and the scheme minimises ``max_{x, a} conf`` group by group (Lemma 3: the global optimum is the
maximum over groups). The guarantee covers exactly this adversary; one who also knows the
mechanism and could invert ``D~`` back to ``D`` is out of scope (spec section 8, L1).

**Theorem 1, corrected (E1).** Per group, with ``N = sum P``, ``m1(x) = P(x) L(x)``,
``m0(x) = P(x) (1 - H(x))``, ``x^1 = argmax m1`` (``pi``), ``x^0 = argmax m0`` (``theta``),
``M1 = m1(x^1)``, ``M0 = m0(x^0)``:

- ``beta_1 = M1 / sum_x min(P(x) H(x), M1)``        (0 when ``M1 = 0``, E3)
- ``beta_0 = M0 / sum_x min(P(x) (1 - L(x)), M0)``  (0 when ``M0 = 0``, E3)
- ``beta_p = (M1 + M0) / N``
- ``beta_min = max_x P(x) / N``                     (Lemma 5; missing from the printed theorem)

and the optimum is ``beta*_g = max{beta_0, beta_1, beta_p, beta_min}``. The case is the first of
``beta0, beta1, betap, betamin`` within ``tau`` of the maximum.

**Construction.** Write ``S = sum_x P(x) D~_1(x)`` (the group's announced positive mass). At
``beta = beta*`` a mapping is feasible iff each cell's joint mass lies in
``[lo_x(S), hi_x(S)]`` with ``lo_x(S) = max(P L, P - beta (N - S))`` and
``hi_x(S) = min(P H, beta S)`` and the masses add up to ``S``. ``S`` is ``S_hi = N - M0/beta``
(case beta0), ``S_lo = M1/beta`` (cases beta1 and betap), or the flat level's mass (case
betamin, below). ALLOCATE starts every cell at ``lo_x(S)`` (``alloc="paper"``, the paper's
ALLOCATION; in the betamin case at the flat level) or at its true mass clamped into
``[lo_x(S), hi_x(S)]`` (``alloc="nearest"``), then fills (or drains) the residual greedily in
input order. The residual is computed from masses, so a cell that is both ``x^1`` and ``x^0``
is not counted twice (E2).

**The betamin case: S from the bounds, never from D_1** (the paper does not reach this case;
spec A6 leaves its choice open). When ``beta_min`` strictly dominates, a whole range
``[g_l, f_r]`` of ``S`` is feasible (the ends found by bisection, ``SELECT_S``). The spec's
reference takes the true mass ``sum P D_1`` clamped into it, which announces the group's true
positive rate whenever that is feasible: a reader who sees a group's beta* equal its floor
``max P / N`` reads the true rate off the report, and with any other true total (a model
card's overall positive rate) the other groups' true rates and the true parity too. Here ``S``
is ``clamp(c N, g_l, f_r)`` with the group's *flat level* ``c``: the level at which announcing
every cell at ``clamp(c, L, H)`` gives the group the mass ``c N``. When the intervals have no
common point, ``c`` is unique, a weighted mean of the ends at which cells are clamped; when
they share ``[max L, min H]``, every level of it qualifies and ``c`` is the number with the
fewest decimals in it (``_round_level``: it stays put when the bounds move a little). ALLOCATE
starts every cell at ``clamp(P S / N, lo_x(S), hi_x(S))``. When ``c N`` is feasible that is the
solution (residual 0), announced exactly as ``clamp(c, L, H)``: the P-maximal cells announce
``S / N = c`` (Corollary 1), every cell whose interval holds the level announces the level, the
others the end of their interval nearest to it; with a common part the whole group announces
``c`` and every posterior equals its prior. When ``c N`` is not feasible (the level misses a
P-maximal cell's interval, or a privacy cap binds), ``S`` is the nearer end of ``[g_l, f_r]``
and the fill moves cells off the level.

**What a reader who knows the mechanism learns** (spec section 8, L1; outside the guarantee,
which bounds the confidence of a reader who takes ``D~`` for ``D``). The announced mapping is
a function of ``(P, L, H)`` only. In delta mode ``L`` and ``H`` are ``D_1 -+ (1 - delta)``
clipped to [0, 1], so a cell announced at an unclipped end of its interval gives its true rule
away (``D~ +- (1 - delta)``). The paper's optimum forces such cells: case beta0 announces every
cell at ``max(L, 1 - M0/P)`` and ``x^0`` at ``H``, case beta1 every cell at ``min(H, M1/P)``
and ``x^1`` at ``L`` (both solutions are unique), case betap ``x^1`` at ``L`` and ``x^0`` at
``H``. In the betamin case only the cells whose interval misses the flat level sit at an end.
A cell announced at the level strictly inside its interval is announced the same for every
true rule that keeps the level inside: its rule, and the group's true rate, are known only to
within ``1 - delta`` of the level. ``alloc="nearest"`` announces the true rule of every cell it
does not move: it buys fidelity with exactly this exposure.

**Vectorisation.** Cells are stably sorted by group (skipped when ``group`` is already sorted),
so the cell order within a group is the input order. Every per-group quantity is a segment
reduction (``np.add.reduceat``, ``np.maximum.reduceat``; the first argmax is a
``np.minimum.reduceat`` over positions), ALLOCATE's greedy fill is a segment cumulative sum
(in input order, in exact fixed-point arithmetic, reset at every group),
and the bisections of the betamin case (the flat level, ``SELECT_S``'s ``f_r`` and ``g_l``)
each run for all the groups that need them at once, for at most
``BISECTION_ITERATIONS`` steps (it stops early only at a fixed point, which does not change the
result). Cost: O(number of cells) plus the sort, and a bounded number of extra passes over the
cells of ``beta_min`` groups.

Cells with ``P(x) = 0`` are excluded (they enter no confidence) and announced at ``D_1``
clamped into ``[L, H]`` (``L`` when ``D_1`` is not given), spec A4. A group whose cells all have
``P = 0`` is reported with case ``"empty"`` and ``beta = nan``.

Example: the paper's Section-8 worked example at delta = 0.9 (spec section 4); the adversary's
maximum confidence drops from 100 % to 67.5 %.

>>> import numpy as np
>>> group = np.array([0, 0, 0, 1, 1, 1])                # F, F, F, M, M, M
>>> p = np.array([12, 5, 3, 9, 7, 4]) / 40              # <100k, 100k-200k, >200k per group
>>> d1 = np.array([0, 0, 1, 0, 0.5, 1])
>>> L, H = fidelity_bounds(d1, "delta", 0.9)
>>> sol = solve(group, p, L, H, d1)
>>> sol.case.tolist(), np.round(sol.beta, 6).tolist(), round(sol.beta_global, 6)
(['betap', 'beta0'], [0.675, 0.637795], 0.675)
>>> np.round(sol.d1_tilde, 6).tolist()
[0.1, 0.02, 0.9, 0.1, 0.4, 0.9]
>>> np.round(adversary_confidence(group, p, d1), 6).tolist()        # before: the true rule
[1.0, 0.72]
>>> np.round(adversary_confidence(group, p, sol.d1_tilde), 6).tolist()
[0.675, 0.637795]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from privfair.components.transparency.fidelity import as_unit_vector, fidelity_bounds
from privfair.schemas.errors import InputError

__all__ = [
    "BISECTION_ITERATIONS",
    "CASES",
    "Solution",
    "adversary_confidence",
    "fidelity_bounds",
    "solve",
]

CASES = ("beta0", "beta1", "betap", "betamin")
"""Case labels in tie-break priority order (spec A5); code ``i`` is ``CASES[i]``."""
EMPTY = "empty"
"""Case label of a group whose cells all have ``P = 0`` (nothing to optimise)."""
BISECTION_ITERATIONS = 100
"""Bisection steps of ``SELECT_S`` (spec section 3.7)."""
RESIDUAL_TOL = 1e-9
"""ALLOCATE's residual must stay within ``RESIDUAL_TOL * N_g`` (contract C7)."""

Alloc = Literal["paper", "nearest"]


@dataclass(frozen=True, eq=False)
class Solution:
    """Output of :func:`solve`. Per-cell arrays follow the input order; per-group arrays follow
    ``groups`` (the distinct group labels, ascending).

    Attributes
    ----------
    d1_tilde
        Announced rule ``D~_1(x)`` per cell (``D~_0 = 1 - D~_1``, see ``d0_tilde``).
    cell_group
        Per cell, the index of its group in ``groups``.
    groups
        Distinct group labels, ascending.
    m
        Number of populated cells (``P > 0``) per group.
    mass
        ``N_g = sum_{x in g} P(x)``.
    beta
        ``beta*_g = max(beta0, beta1, betap, betamin)``; ``nan`` for an empty group.
    case
        ``"beta0"``, ``"beta1"``, ``"betap"``, ``"betamin"`` (first within ``tau`` of the
        maximum, in that order) or ``"empty"``.
    beta0, beta1, betap, betamin
        The four candidates of the corrected Theorem 1.
    M1, M0
        ``P(x^1) L(x^1)`` and ``P(x^0) (1 - H(x^0))``, the largest lower-bound joint masses.
    pi, theta
        Cell indices (into the input) of ``x^1`` and ``x^0``, the first maximisers in input
        order; ``-1`` for an empty group.
    S, S_lo, S_hi
        Announced positive mass ``sum P D~_1`` the allocation targets, and its admissible range
        ``[M1/beta, N - M0/beta]``.
    residual
        ALLOCATE's residual (``|residual| <= RESIDUAL_TOL * mass``, contract C7).
    beta_global
        ``max_g beta*_g`` over the non-empty groups (Lemma 3).
    """

    d1_tilde: np.ndarray
    cell_group: np.ndarray
    groups: np.ndarray
    m: np.ndarray
    mass: np.ndarray
    beta: np.ndarray
    case: np.ndarray
    beta0: np.ndarray
    beta1: np.ndarray
    betap: np.ndarray
    betamin: np.ndarray
    M1: np.ndarray
    M0: np.ndarray
    pi: np.ndarray
    theta: np.ndarray
    S: np.ndarray
    S_lo: np.ndarray
    S_hi: np.ndarray
    residual: np.ndarray
    beta_global: float

    @property
    def d0_tilde(self) -> np.ndarray:
        """Announced ``D~_0(x) = 1 - D~_1(x)`` per cell."""
        return 1.0 - self.d1_tilde

    @property
    def n_groups(self) -> int:
        return int(self.groups.shape[0])


# ----------------------------------------------------------------------------------- grouping


@dataclass(frozen=True)
class _Groups:
    """Cells sorted stably by group: ``order`` (``None`` = already sorted), the group labels and
    the start of each group's run in the sorted order."""

    order: np.ndarray | None
    labels: np.ndarray
    starts: np.ndarray
    counts: np.ndarray

    def take(self, a: np.ndarray) -> np.ndarray:
        return a if self.order is None else a[self.order]


def _stable_order(g: np.ndarray) -> np.ndarray:
    """``np.argsort(g, kind="stable")``, faster: when the label range allows it, each label is
    packed with its cell index into one int64 key and the keys are sorted by value (unique keys:
    the result is the stable order)."""
    n = g.shape[0]
    lo, hi = int(g.min()), int(g.max())
    bits = max(n - 1, 1).bit_length()
    if (hi - lo) >= (1 << (62 - bits)):
        return np.argsort(g, kind="stable")
    if g.dtype == np.uint64:  # labels above 2**63 must not wrap around
        key = (g - np.uint64(lo)).astype(np.int64) << bits
    else:
        key = (g.astype(np.int64) - lo) << bits
    key |= np.arange(n, dtype=np.int64)
    key.sort()
    return key & ((1 << bits) - 1)


def _group_cells(g: np.ndarray) -> _Groups:
    n = g.shape[0]
    order = None if n < 2 or bool(np.all(g[1:] >= g[:-1])) else _stable_order(g)
    gs = g if order is None else g[order]
    starts = np.concatenate(([0], np.flatnonzero(gs[1:] != gs[:-1]) + 1))
    counts = np.diff(np.append(starts, n))
    return _Groups(order, gs[starts], starts, counts)


_FIXED_POINT = float(2**52)


def _segment_exclusive_cumsum(
    x: np.ndarray, starts: np.ndarray, counts: np.ndarray, scale: np.ndarray
) -> np.ndarray:
    """``out[k] = sum of x[j]`` over the earlier cells ``j`` of ``k``'s segment, in order.

    ``x >= 0`` with a total of at most about ``scale`` per segment (``scale``: the group's mass).
    The sum runs in fixed point: ``x / scale`` rounded to a multiple of ``2**-52`` (an error of
    the order of one float rounding) and added up exactly in int64, as one cumulative sum over
    all cells that is reset to exactly zero at every segment start. So a segment's prefixes do
    not depend on the other segments at all (bit for bit), and the cost is a few contiguous
    passes over the cells, whatever the segment sizes.
    """
    if x.shape[0] == 0:
        return x.copy()
    scale_c = np.repeat(scale, counts)
    q = np.rint(x / scale_c * _FIXED_POINT).astype(np.int64)
    y = q.copy()
    y[starts[1:]] -= np.add.reduceat(q, starts)[:-1]
    run = np.cumsum(y)
    run -= q
    return run / _FIXED_POINT * scale_c


class _Cells:
    """Populated cells of a set of groups, contiguous per group, with the group's ``beta``."""

    def __init__(self, P, L, H, beta, N, starts, counts):
        self.PH, self.PU0 = P * H, P * (1.0 - L)
        self.starts, self.counts = starts, counts
        self.beta_c = np.repeat(beta, counts)
        self.N = N

    def F(self, S: np.ndarray) -> np.ndarray:
        """``F(S) = sum_x min(P H, beta S) - S``; ``F(S)/S`` is non-increasing in ``S``."""
        hi = np.minimum(self.PH, self.beta_c * np.repeat(S, self.counts))
        return np.add.reduceat(hi, self.starts) - S

    def G(self, S: np.ndarray) -> np.ndarray:
        """``G(S) = S - sum_x max(P L, P - beta (N - S))``; ``G(S)/(N - S)`` is non-decreasing.

        Evaluated in the equal form ``sum_x min(P (1 - L), beta T) - T`` with ``T = N - S`` (the
        outcome-0 mirror of ``F``): ``P - beta (N - S)`` cancels badly when ``beta`` is close
        to 1, and the bisection's sign decisions would then be decided by rounding noise.
        """
        T = self.N - S
        u0 = np.minimum(self.PU0, self.beta_c * np.repeat(T, self.counts))
        return np.add.reduceat(u0, self.starts) - T


def _segments(sel: np.ndarray, counts: np.ndarray):
    """(positions of the cells of the groups ``sel``, their segment starts, their counts), the
    groups ``sel`` (ascending indices into the populated groups) compacted in their order."""
    keep = np.zeros(counts.shape[0], dtype=bool)
    keep[sel] = True
    cells = np.flatnonzero(np.repeat(keep, counts))
    sub_counts = counts[sel]
    sub_starts = np.concatenate(([0], np.cumsum(sub_counts)[:-1]))
    return cells, sub_starts, sub_counts


def _subset(sel: np.ndarray, P, L, H, beta, N, counts) -> _Cells:
    """The cells of the groups ``sel`` (indices into the populated groups), compacted."""
    cells, sub_starts, sub_counts = _segments(sel, counts)
    return _Cells(P[cells], L[cells], H[cells], beta[sel], N[sel], sub_starts, sub_counts)


def _bisect(low: Callable[[np.ndarray], np.ndarray], a: np.ndarray, b: np.ndarray):
    """Vectorised bisection of ``[a, b]``: where ``low(c)`` holds at the midpoint ``c`` the
    lower end moves up to ``c``, elsewhere the upper end moves down; stops at a fixed point
    (the remaining iterations would not change anything). Returns the final ``(a, b)``."""
    for _ in range(BISECTION_ITERATIONS):
        c = (a + b) / 2
        ok = low(c)
        na, nb = np.where(ok, c, a), np.where(ok, b, c)
        if np.array_equal(na, a) and np.array_equal(nb, b):
            break
        a, b = na, nb
    return a, b


def _bisect_right_end(cells: _Cells, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Largest ``S`` in ``[a, b]`` with ``F(S) >= 0`` (``F(a) >= 0 > F(b)``)."""
    return _bisect(lambda c: cells.F(c) >= 0, a, b)[0]


def _bisect_left_end(cells: _Cells, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Smallest ``S`` in ``[a, b]`` with ``G(S) >= 0`` (``G(a) < 0 <= G(b)``)."""
    return _bisect(lambda c: ~(cells.G(c) >= 0), a, b)[1]


def _round_level(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per pair, a level in ``[a, b]`` chosen from the interval alone: the number with the
    fewest decimals in it and strictly inside (0, 1), the one nearest the interval's midpoint
    when several have as few; ``a`` when ``a = b``; the midpoint when no decimal of up to 17
    digits fits. It does not move when ``a`` and ``b`` move a little (unless an end crosses
    the chosen number), so it tells a reader no more than that it lies in ``[a, b]``.

    >>> _round_level(np.array([0.0, 0.0, 0.9, 0.23, 0.4]), np.array([1.0, 0.1, 1.0, 0.27, 0.4]))
    array([0.5 , 0.1 , 0.9 , 0.25, 0.4 ])
    """
    mid = (a + b) / 2
    out = np.where(a < b, mid, a)
    todo = np.flatnonzero(a < b)
    for k in range(1, 18):
        if not todo.shape[0]:
            break
        scale = 10.0**k
        x = mid[todo] * scale
        near = np.rint(x)
        pick = np.full(todo.shape[0], np.nan)
        for n in (near + np.where(x >= near, 1.0, -1.0), near):  # the nearest is tried last
            q = n / scale
            ok = (q >= a[todo]) & (q <= b[todo]) & (q > 0.0) & (q < 1.0)
            pick = np.where(ok, q, pick)
        found = ~np.isnan(pick)
        out[todo[found]] = pick[found]
        todo = todo[~found]
    return out


def _flat_level(P, L, H, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per group (contiguous populated cells), the level ``c`` at which announcing every cell
    at ``clamp(c, L, H)`` puts the group's announced positive mass at ``c N``.

    ``phi(c) = sum_x P (clamp(c, L, H) - c)`` is non-increasing, positive below ``min H`` when
    ``max L > min H`` and negative above ``max L``. When ``max L <= min H`` every level of
    ``[max L, min H]`` is a root (every cell's interval holds it): the level is then
    ``_round_level`` of that interval. Otherwise the root is unique and found by bisection on
    ``[min H, max L]``; it is a weighted mean of the ends at which the other cells are clamped
    (``sum_clamped P bound / sum_clamped P``), so it depends on no rule of a cell announced at
    the level itself.
    """
    a = np.maximum.reduceat(L, starts)
    b = np.minimum.reduceat(H, starts)
    level = np.empty(a.shape[0])
    flat = a <= b
    level[flat] = _round_level(a[flat], b[flat])
    rest = np.flatnonzero(~flat)
    if rest.shape[0]:
        cells, s2, c2 = _segments(rest, counts)
        Pr, Lr, Hr = P[cells], L[cells], H[cells]

        def above(c: np.ndarray) -> np.ndarray:  # phi(c) > 0: the root lies above c
            cc = np.repeat(c, c2)
            up = np.add.reduceat(Pr * np.maximum(Lr - cc, 0.0), s2)
            down = np.add.reduceat(Pr * np.maximum(cc - Hr, 0.0), s2)
            return up > down

        level[rest] = _bisect(above, b[rest], a[rest])[1]
    return level


def _select_s(
    sel: np.ndarray, target: np.ndarray, S_lo: np.ndarray, S_hi: np.ndarray, cells_of
) -> np.ndarray:
    """``S`` for the groups ``sel`` (where ``beta_min`` strictly dominates): ``target`` (one
    per group of ``sel``) clamped into the feasible range ``[g_l, f_r]``.

    ``f_r`` is ``S_hi`` if ``F(S_hi) >= 0``, else the bisection end on ``[S_lo, S_hi]``; ``g_l``
    likewise with ``G`` from the left. ``f_r`` (``g_l``) is only computed for the groups whose
    target lies above it (below it), which gives the same clamp.
    """
    lo, hi = S_lo[sel], S_hi[sel]
    t = target
    need_fr, need_gl = t >= hi, t <= lo
    inner = np.flatnonzero(~need_fr & ~need_gl)
    if inner.shape[0]:
        cells = cells_of(sel[inner])
        need_fr[inner] = cells.F(t[inner]) < 0
        need_gl[inner] = cells.G(t[inner]) < 0
    fr = np.full(sel.shape[0], np.inf)
    gl = np.full(sel.shape[0], -np.inf)
    for need, is_right in ((need_fr, True), (need_gl, False)):
        idx = np.flatnonzero(need)
        if not idx.shape[0]:
            continue
        cells = cells_of(sel[idx])
        a, b = lo[idx], hi[idx]
        if is_right:
            end = b.copy()
            bis = np.flatnonzero(cells.F(b) < 0)
            if bis.shape[0]:
                end[bis] = _bisect_right_end(cells_of(sel[idx[bis]]), a[bis], b[bis])
            fr[idx] = end
        else:
            end = a.copy()
            bis = np.flatnonzero(cells.G(a) < 0)
            if bis.shape[0]:
                end[bis] = _bisect_left_end(cells_of(sel[idx[bis]]), a[bis], b[bis])
            gl[idx] = end
    return np.minimum(np.maximum(t, gl), fr)


# ------------------------------------------------------------------------------------ solver


def _validate(group, p, lo, hi, d1, alloc, tau):
    g = np.asarray(group)
    if g.ndim != 1:
        raise InputError("group", "must be a 1-D array", f"got shape {g.shape}")
    if g.dtype.kind not in "iu":
        raise InputError("group", "must hold integer group labels", f"got dtype {g.dtype}")
    n = g.shape[0]
    if n == 0:
        raise InputError("group", "must hold at least one cell")
    P = np.asarray(p, dtype=np.float64)
    if P.ndim != 1 or P.shape[0] != n:
        raise InputError("p", "must have one entry per cell", f"shape {P.shape} vs {n} cells")
    bad = ~np.isfinite(P) | (P < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            "p", "must be finite and >= 0 (P < 0 is an input error)", f"cell {i} is {P[i]!r}"
        )
    if not P.sum() > 0:
        raise InputError("p", "must have a positive total mass")
    arrays = {}
    for name, v in (("lo", lo), ("hi", hi), ("d1", d1)):
        if v is None:
            if name != "d1":
                raise InputError(name, "is required (the fidelity bound per cell)")
            arrays[name] = None
            continue
        a = as_unit_vector(name, v)
        if a.shape[0] != n:
            raise InputError(name, "must have one entry per cell", f"{a.shape[0]} != {n}")
        arrays[name] = a
    L, H, D = arrays["lo"], arrays["hi"], arrays["d1"]
    bad = L > H
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            "lo/hi",
            "fidelity bounds must satisfy L <= H",
            f"cell {i}: L = {L[i]!r} > H = {H[i]!r}, {int(bad.sum())} bad",
        )
    if alloc not in ("paper", "nearest"):
        raise InputError("alloc", "must be 'paper' or 'nearest'", f"got {alloc!r}")
    if not (np.isfinite(tau) and tau >= 0):
        raise InputError("tau", "must be a finite number >= 0", f"got {tau!r}")
    return g, P, L, H, D


def solve(
    group: ArrayLike,
    p: ArrayLike,
    lo: ArrayLike,
    hi: ArrayLike,
    d1: ArrayLike | None = None,
    alloc: Alloc = "paper",
    tau: float = 1e-12,
) -> Solution:
    """Announced mapping with the smallest worst-case adversary confidence, per QID group.

    Implements spec section 3.7 (``SOLVE_GROUP`` for every group at once), the betamin case
    excepted:
    ``beta*_g = max{beta_0, beta_1, beta_p, beta_min}`` (Theorem 1 with the ``beta_min`` term,
    E1; ``beta_a = 0`` when ``M_a = 0``, E3), ``S = S_hi``, ``S_lo`` or ``SELECT_S()`` by case,
    then ``ALLOCATE(S)`` with the mass-based residual (E2); in the betamin case ``S`` is the
    flat level's mass, never the true mass. See the module docstring for the formulas.

    Parameters
    ----------
    group
        Integer QID-group label per cell. Cells of a group keep their input order, which fixes
        the tie-breaks (first argmax) and the fill order. Duplicate cells are the caller's job.
    p
        Prior mass ``P(x) >= 0`` per cell, on any scale (counts or probabilities; the result is
        invariant to scaling a group's masses). Cells with ``P = 0`` are excluded.
    lo, hi
        Fidelity interval ``L(x) <= D~_1(x) <= H(x)`` per cell, ``0 <= L <= H <= 1``
        (``privfair.components.transparency.fidelity.fidelity_bounds``).
    d1
        True rule ``D_1(x)`` per cell, optional: it sets the ``"nearest"`` allocation and what
        ``P = 0`` cells announce. Nothing else reads it: with ``alloc="paper"`` the populated
        cells' announcement is a function of ``(p, lo, hi)`` alone (the betamin case included).
    alloc
        ``"paper"`` (start every cell at its lower bound, the paper's ALLOCATION; default) or
        ``"nearest"`` (start at the true mass clamped into the cell's range; needs ``d1``,
        falls back to ``"paper"`` without it).
    tau
        Tie tolerance when choosing the case.

    Returns
    -------
    Solution
        The announced rule per cell and the per-group optimum and diagnostics.

    Raises
    ------
    InputError
        (a ``ValueError``) naming the field and the rule: non-integer or empty ``group``,
        length mismatches, ``P < 0`` or non-finite, a zero total mass, ``L``, ``H`` or ``D_1``
        outside [0, 1], ``L > H``, an unknown ``alloc`` or a bad ``tau``.
    RuntimeError
        If ALLOCATE's residual exceeds ``RESIDUAL_TOL * N_g`` (contract C7; a numerical bug).
    """
    g, P, L, H, D = _validate(group, p, lo, hi, d1, alloc, tau)
    n = g.shape[0]
    grp = _group_cells(g)
    n_groups = grp.labels.shape[0]
    seg_sorted = np.repeat(np.arange(n_groups), grp.counts)
    if grp.order is None:
        cell_group = seg_sorted
    else:
        cell_group = np.empty(n, dtype=np.int64)
        cell_group[grp.order] = seg_sorted

    # populated cells, sorted by group, input order within a group
    Ps = grp.take(P)
    populated = Ps > 0
    if populated.all():
        idx = grp.order  # None: identity
        gi, Pc, Lc, Hc = seg_sorted, Ps, grp.take(L), grp.take(H)
        Dc = None if D is None else grp.take(D)
    else:
        keep = np.flatnonzero(populated)
        idx = keep if grp.order is None else grp.order[keep]
        gi, Pc, Lc, Hc = seg_sorted[keep], P[idx], L[idx], H[idx]
        Dc = None if D is None else D[idx]
    nc = Pc.shape[0]
    s = np.concatenate(([0], np.flatnonzero(gi[1:] != gi[:-1]) + 1))
    cnt = np.diff(np.append(s, nc))
    gpop = gi[s]  # index (into groups) of each populated group

    # ---- the four candidates (Theorem 1 corrected)
    N = np.add.reduceat(Pc, s)
    PL, PH = Pc * Lc, Pc * Hc
    m0 = Pc * (1.0 - Hc)
    mx1 = np.maximum.reduceat(PL, s)
    mx0 = np.maximum.reduceat(m0, s)
    positions = np.arange(nc)
    mx1_c, mx0_c = np.repeat(mx1, cnt), np.repeat(mx0, cnt)
    pi_pos = np.minimum.reduceat(np.where(mx1_c == PL, positions, nc), s)
    theta_pos = np.minimum.reduceat(np.where(m0 == mx0_c, positions, nc), s)
    sum_u1 = np.add.reduceat(np.minimum(PH, mx1_c), s)
    sum_u0 = np.add.reduceat(np.minimum(Pc * (1.0 - Lc), mx0_c), s)
    del mx1_c, mx0_c, m0
    with np.errstate(divide="ignore", invalid="ignore"):
        b1 = np.where(mx1 > 0, mx1 / sum_u1, 0.0)
        b0 = np.where(mx0 > 0, mx0 / sum_u0, 0.0)
    bp = (mx1 + mx0) / N
    pmax = np.maximum.reduceat(Pc, s)
    bmin = pmax / N
    beta = np.maximum(np.maximum(b0, b1), np.maximum(bp, bmin))
    floor = beta - tau
    code = np.full(beta.shape[0], 3, dtype=np.int8)  # first within tau of the max, in order
    code[bp >= floor] = 2
    code[b1 >= floor] = 1
    code[b0 >= floor] = 0

    # ---- the announced positive mass S per group
    S_lo = mx1 / beta
    S_hi = N - mx0 / beta
    S = np.where(code == 0, S_hi, S_lo)
    sel = np.flatnonzero(code == 3)
    if sel.shape[0]:  # beta_min: the flat level, never the true mass (module docstring)
        cells, s_sel, c_sel = _segments(sel, cnt)
        level = _flat_level(Pc[cells], Lc[cells], Hc[cells], s_sel, c_sel)
        del cells

        def cells_of(groups_idx: np.ndarray) -> _Cells:
            return _subset(groups_idx, Pc, Lc, Hc, beta, N, cnt)

        S[sel] = _select_s(sel, N[sel] * level, S_lo, S_hi, cells_of)

    # ---- ALLOCATE(S): start at lo (or the clamped true mass), greedy fill/drain in input order
    # lo_k(S) = max(P L, b_k + beta S) with Theorem 1's slack b_k = P_k - beta N. When beta is
    # beta_min, b_k = 0 exactly for the P-maximal cells (their share is then exactly S / N);
    # computing it as a difference of nearly equal numbers would cost the precision of that
    # share, which matters when an outcome's total is small against the group's mass.
    beta_c = np.repeat(beta, cnt)
    beta_s = beta_c * np.repeat(S, cnt)
    lk = Pc - beta_c * np.repeat(N, cnt)  # the slack b_k
    del beta_c
    at_min = beta == bmin
    if at_min.any():
        lk[np.repeat(at_min, cnt) & (Pc == np.repeat(pmax, cnt))] = 0.0
    lk += beta_s
    np.maximum(lk, PL, out=lk)  # lo_k(S)
    hk = np.minimum(PH, beta_s, out=beta_s)  # hi_k(S), never below lo_k(S) (rounding guard)
    np.maximum(hk, lk, out=hk)
    nearest = alloc == "nearest" and Dc is not None
    if nearest:
        mass = np.minimum(np.maximum(Pc * Dc, lk), hk)
    elif sel.shape[0]:  # beta_min groups start flat: every cell at the group's level S / N
        flat_start = np.minimum(np.maximum(Pc * np.repeat(S / N, cnt), lk), hk)
        mass = np.where(np.repeat(code == 3, cnt), flat_start, lk)
        del flat_start
    else:
        mass = lk
    r = S - np.add.reduceat(mass, s)
    # fill (r > 0) up to hk or drain (r < 0) down to lk, cell by cell in input order: cell k
    # moves by min(cap_k, max(0, |r| - sum of the caps before it)); r = 0 moves nothing
    fill = np.repeat(r > 0, cnt)
    cap = np.where(fill, hk - mass, mass - lk)
    amount = np.repeat(np.abs(r), cnt)
    amount -= _segment_exclusive_cumsum(cap, s, cnt, N)
    np.maximum(amount, 0.0, out=amount)
    np.minimum(amount, cap, out=amount)
    moved = np.where(fill, mass + amount, mass - amount)
    full = amount >= cap  # a cell moved all the way ends exactly on its bound
    mass = np.where(full, np.where(fill, hk, lk), moved)
    del cap, moved, full, fill
    residual = r - np.sign(r) * np.add.reduceat(amount, s)
    if np.any(np.abs(residual) > RESIDUAL_TOL * N):
        worst = int(np.argmax(np.abs(residual) / N))
        raise RuntimeError(
            f"ALLOCATE left a residual of {residual[worst]!r} in group "
            f"{grp.labels[gpop[worst]]!r} (mass {N[worst]!r}): contract C7 broken"
        )
    d1_pop = np.minimum(np.maximum(mass / Pc, Lc), Hc)
    if sel.shape[0] and not nearest:
        # where S = c N was feasible (not clamped), the flat mapping clamp(c, L, H) is the
        # solution: announce it exactly, without the rounding residue of S / N and of the fill
        flat = np.zeros(N.shape[0], dtype=bool)
        flat[sel[S[sel] == N[sel] * level]] = True
        if flat.any():
            lv = np.zeros(N.shape[0])
            lv[sel] = level
            fc = np.repeat(flat, cnt)
            d1_pop[fc] = np.minimum(np.maximum(np.repeat(lv, cnt)[fc], Lc[fc]), Hc[fc])

    # ---- per-cell output in input order
    d1_tilde = L.copy() if D is None else np.minimum(np.maximum(D, L), H)
    if idx is None:
        d1_tilde = d1_pop
    else:
        d1_tilde[idx] = d1_pop
    cell_index = positions if idx is None else idx

    # ---- per-group output (empty groups: nan / "empty" / -1)
    def per_group(values: np.ndarray, fill_value, dtype=np.float64) -> np.ndarray:
        out = np.full(n_groups, fill_value, dtype=dtype)
        out[gpop] = values
        return out

    case_code = per_group(code, -1, np.int8)
    case = np.array((*CASES, EMPTY))[case_code]
    m_out = np.zeros(n_groups, dtype=np.int64)
    m_out[gpop] = cnt
    mass_out = np.zeros(n_groups)
    mass_out[gpop] = N
    nan = np.nan
    return Solution(
        d1_tilde=d1_tilde,
        cell_group=cell_group,
        groups=grp.labels,
        m=m_out,
        mass=mass_out,
        beta=per_group(beta, nan),
        case=case,
        beta0=per_group(b0, nan),
        beta1=per_group(b1, nan),
        betap=per_group(bp, nan),
        betamin=per_group(bmin, nan),
        M1=per_group(mx1, 0.0),
        M0=per_group(mx0, 0.0),
        pi=per_group(cell_index[pi_pos], -1, np.int64),
        theta=per_group(cell_index[theta_pos], -1, np.int64),
        S=per_group(S, 0.0),
        S_lo=per_group(S_lo, nan),
        S_hi=per_group(S_hi, nan),
        residual=per_group(residual, 0.0),
        beta_global=float(beta.max()),
    )


def adversary_confidence(
    group: ArrayLike, p: ArrayLike, d1_tilde: ArrayLike, *, tol: float = 0.0
) -> np.ndarray:
    """Worst-case posterior confidence per group, recomputed from an announced mapping.

    ``max_{a in {0,1}} max_{x in g} P(x) D~_a(x) / sum_{x' in g} P(x') D~_a(x')`` (Definition 3,
    eq. 37), with ``D~_0 = 1 - D~_1``. An outcome whose group mass
    ``S_a(g) = sum P D~_a`` is at most ``tol * N_g`` never occurs under ``D~`` and is left out
    (spec A9; contract C3 uses ``tol = 1e-9``). Independent of :func:`solve`: pass the true
    rule to get the pre-release confidence ``C*_g`` (Definition 7).

    Parameters
    ----------
    group, p, d1_tilde
        Group label, prior mass and announced ``D~_1`` per cell.
    tol
        Relative mass below which an outcome is treated as absent.

    Returns
    -------
    np.ndarray
        One confidence per group, groups in ascending label order (as ``Solution.groups``);
        ``nan`` for a group without mass.
    """
    g, P, _, _, _ = _validate(group, p, np.zeros(len(p)), np.zeros(len(p)), None, "paper", 0.0)
    Dt = as_unit_vector("d1_tilde", d1_tilde)
    if Dt.shape[0] != g.shape[0]:
        raise InputError(
            "d1_tilde", "must have one entry per cell", f"{Dt.shape[0]} != {g.shape[0]}"
        )
    grp = _group_cells(g)
    Ps, Ds = grp.take(P), grp.take(Dt)
    a1, a0 = Ps * Ds, Ps * (1.0 - Ds)
    N = np.add.reduceat(Ps, grp.starts)
    out = np.full(grp.labels.shape[0], -np.inf)
    for masses in (a1, a0):
        total = np.add.reduceat(masses, grp.starts)
        top = np.maximum.reduceat(masses, grp.starts)
        present = (total > tol * N) & (total > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(present, np.maximum(out, top / total), out)
    return np.where(np.isfinite(out), out, np.nan)
