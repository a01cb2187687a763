"""Straightforward dense NumPy MakeFairlets and MDAV: the baseline for the benchmark.

Written directly from the pseudocode in the Fair-MDAV spec (section 1.4 MakeFairlets, section 1.8
standard MDAV) over the dense, min-max-scaled one-hot matrix ``X``
(``EncodedQIs.dense(scaled=True)``). Every iteration is vectorised, but nothing is carried over
between iterations:

- the remaining rows ``rem`` (the spec's R) are gathered again (``X[rem]``) and their mean is
  recomputed from scratch;
- distances are full vectors ``((X[rem] - c) ** 2).sum(1)`` over every remaining row;
- the nearest records are taken from a full stable sort of the distances.

Tie rules are the spec's: the argmax takes the lowest row (``rem`` is kept in ascending row order
and ``np.argmax`` returns the first maximum); the nearest records are ordered by (distance, row)
with a stable sort over rows in ascending order. Squared distances are used throughout; they order
rows exactly as the distances do.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pyarrow as pa

from privfair.components.microaggregation.encoding import encode_qis, label_01, protected_01
from privfair.schemas.roles import Role, read_roles


def dense_inputs(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(X, pa01): the dense min-max-scaled one-hot QI matrix and the protected attribute as 0/1
    with 1 = favoured (the value with the higher positive ratio), as the spec (sections 1.2-1.3)
    defines them."""
    roles = read_roles(table)
    enc = encode_qis(table, roles, "minmax")
    y = label_01(table, roles.single(Role.LABEL))
    pa01, _, _ = protected_01(table, roles.single(Role.PROTECTED), y)
    return np.ascontiguousarray(enc.dense(scaled=True)), pa01.astype(np.int8)


def fairlet_sizes(k: int, pa01: np.ndarray) -> tuple[int, int]:
    """m = floor(k * |U| / |D| + 1/2) (exact arithmetic), clamped to [1, k-1]; n = k - m."""
    n_u = int((pa01 == 0).sum())
    m = int(Fraction(k * n_u, len(pa01)) + Fraction(1, 2))
    m = min(max(m, 1), k - 1)
    return m, k - m


def _nearest(d: np.ndarray, candidates: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` candidate positions nearest by ``d``, ordered by (distance, position).

    ``candidates`` is ascending, so a stable sort on the distance breaks ties by position, i.e. by
    original row (``rem`` is ascending too)."""
    order = np.argsort(d[candidates], kind="stable")
    return candidates[order[:count]]


def make_fairlets(X: np.ndarray, pa01: np.ndarray, m: int, n: int) -> list[np.ndarray]:
    """MakeFairlets (spec 1.4). Returns the groups (row indices: m unfavoured, then n favoured);
    leftover rows belong to no group."""
    alive = np.ones(len(X), dtype=bool)
    need = (m, n)
    left = [int((pa01 == 0).sum()), int((pa01 == 1).sum())]
    groups: list[np.ndarray] = []
    while left[0] >= m and left[1] >= n:
        rem = np.flatnonzero(alive)
        Xrem = X[rem]
        c = Xrem.mean(axis=0)
        i = int(np.argmax(((Xrem - c) ** 2).sum(axis=1)))
        seed_pa = int(pa01[rem[i]])
        d = ((Xrem - X[rem[i]]) ** 2).sum(axis=1)
        pa_r = pa01[rem]
        parts = []
        for v in (0, 1):
            cand = np.flatnonzero(pa_r == v)
            if v == seed_pa:
                cand = cand[cand != i]
                parts.append(np.concatenate([[i], _nearest(d, cand, need[v] - 1)]))
            else:
                parts.append(_nearest(d, cand, need[v]))
        rows = rem[np.concatenate(parts).astype(np.int64)]
        alive[rows] = False
        left[0] -= m
        left[1] -= n
        groups.append(rows)
    return groups


def _group_around(X: np.ndarray, alive: np.ndarray, seed: int, k: int) -> np.ndarray:
    """``seed`` + its k-1 nearest alive rows (by (distance, row)); marks them removed."""
    rem = np.flatnonzero(alive)
    d = ((X[rem] - X[seed]) ** 2).sum(axis=1)
    cand = np.flatnonzero(rem != seed)
    rows = np.concatenate([[seed], rem[_nearest(d, cand, k - 1)]]).astype(np.int64)
    alive[rows] = False
    return rows


def _farthest_from_mean(X: np.ndarray, alive: np.ndarray) -> int:
    """Alive row farthest from the mean of the alive rows (ties: lowest row)."""
    rem = np.flatnonzero(alive)
    Xrem = X[rem]
    c = Xrem.mean(axis=0)
    return int(rem[np.argmax(((Xrem - c) ** 2).sum(axis=1))])


def mdav(X: np.ndarray, k: int) -> list[np.ndarray]:
    """Standard MDAV (spec 1.8): every row assigned, group sizes in [k, 2k-1].

    x_s is the row farthest from x_r among the rows left after x_r's group is removed; this equals
    the pseudocode's argmax over R unless ties make x_r's group contain the farthest row."""
    alive = np.ones(len(X), dtype=bool)
    groups: list[np.ndarray] = []
    while alive.sum() >= 3 * k:
        xr = _farthest_from_mean(X, alive)
        groups.append(_group_around(X, alive, xr, k))
        rem = np.flatnonzero(alive)
        xs = int(rem[np.argmax(((X[rem] - X[xr]) ** 2).sum(axis=1))])
        groups.append(_group_around(X, alive, xs, k))
    if alive.sum() >= 2 * k:
        groups.append(_group_around(X, alive, _farthest_from_mean(X, alive), k))
    if alive.any():
        groups.append(np.flatnonzero(alive))
    return groups


def information_loss(X: np.ndarray, groups: list[np.ndarray]) -> float:
    """IL = sqrt(SSE / N_g): SSE = sum over groups of squared distances of the members to the group
    mean, in the scaled space; N_g = number of grouped rows (the definition the components use)."""
    if not groups:
        return 0.0
    order = np.concatenate(groups)
    sizes = np.array([len(g) for g in groups])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    Xo = X[order]
    means = np.add.reduceat(Xo, starts, axis=0) / sizes[:, None]
    sse = float(((Xo - np.repeat(means, sizes, axis=0)) ** 2).sum())
    return float(np.sqrt(sse / len(order)))


# --- replay check: is another implementation's grouping a valid run of the same pseudocode? ------
#
# Exact ties are common on Adult (integer-valued attributes, one-hot columns), and two correct
# implementations break them by floating-point rounding in different ways; after the first such
# difference the remaining sets differ and the runs drift apart. The replay therefore walks through
# the *other* implementation's groups in creation order and, at every step, recomputes the spec's
# quantities with the baseline's own distances over the records that implementation had left:
#
#   seed gap    = max_x d(x, c) - d(seed, c)              (0 if the seed is a farthest record)
#   nearest gap = max d(chosen) - min d(not chosen)        (per PA class; 0 if they are nearest)
#
# A group's gap is the larger of the two (squared-distance units); +inf if its composition, size or
# the number of groups breaks the algorithm. Gaps of ~1e-15 are rounding-level ties.


def _nearest_gap(d: np.ndarray, chosen: np.ndarray, other: np.ndarray) -> float:
    if not chosen.any() or not other.any():
        return 0.0
    return float(d[chosen].max() - d[other].min())


def fairlet_gaps(
    X: np.ndarray, pa01: np.ndarray, m: int, n: int, groups: list[np.ndarray], seeds: list[int]
) -> np.ndarray:
    """Per-group gap of a MakeFairlets result (see above); the last entry is +inf when the number
    of groups differs from min(|U| // m, |F| // n)."""
    alive = np.ones(len(X), dtype=bool)
    gaps = []
    for g, s in zip(groups, seeds, strict=True):
        rem = np.flatnonzero(alive)
        Xrem = X[rem]
        dc = ((Xrem - Xrem.mean(axis=0)) ** 2).sum(axis=1)
        # a seed already grouped is not a choice the pseudocode could make
        gap = float(dc.max() - dc[np.searchsorted(rem, s)]) if alive[s] else np.inf
        d = ((Xrem - X[s]) ** 2).sum(axis=1)
        in_g = np.isin(rem, g)
        pa_r = pa01[rem]
        for v, need in ((0, m), (1, n)):
            cls = pa_r == v
            if int((in_g & cls).sum()) != need or not alive[g].all():
                gap = np.inf
            gap = max(gap, _nearest_gap(d, in_g & cls & (rem != s), ~in_g & cls))
        alive[g] = False
        gaps.append(max(gap, 0.0))
    expected = min(int((pa01 == 0).sum()) // m, int((pa01 == 1).sum()) // n)
    if len(groups) != expected:
        gaps.append(np.inf)
    return np.array(gaps)


def mdav_gaps(X: np.ndarray, k: int, groups: list[np.ndarray], seeds: list[int]) -> np.ndarray:
    """Per-group gap of an MDAV result (see above); +inf entries for structural mismatches."""
    alive = np.ones(len(X), dtype=bool)
    gaps: list[float] = []

    def around(seed: int, g: np.ndarray, seed_gap: float) -> None:
        rem = np.flatnonzero(alive)
        d = ((X[rem] - X[seed]) ** 2).sum(axis=1)
        in_g = np.isin(rem, g)
        ok = len(g) == k and seed in set(g.tolist()) and alive[g].all()
        gap = _nearest_gap(d, in_g & (rem != seed), ~in_g) if ok else np.inf
        alive[g] = False
        gaps.append(max(seed_gap, gap, 0.0))

    def from_mean(seed: int) -> float:
        if not alive[seed]:  # a seed already grouped: not a choice the pseudocode could make
            return np.inf
        rem = np.flatnonzero(alive)
        Xrem = X[rem]
        dc = ((Xrem - Xrem.mean(axis=0)) ** 2).sum(axis=1)
        return float(dc.max() - dc[np.searchsorted(rem, seed)])

    i = 0
    while alive.sum() >= 3 * k and i + 1 < len(groups):
        xr, xs = seeds[i], seeds[i + 1]
        around(xr, groups[i], from_mean(xr))
        rem = np.flatnonzero(alive)
        d = ((X[rem] - X[xr]) ** 2).sum(axis=1)
        gap_s = float(d.max() - d[np.searchsorted(rem, xs)]) if alive[xs] else np.inf
        around(xs, groups[i + 1], gap_s)
        i += 2
    ran_out = alive.sum() >= 3 * k  # the other run has fewer groups than the loop makes
    if alive.sum() >= 2 * k and i < len(groups):
        around(seeds[i], groups[i], from_mean(seeds[i]))
        i += 1
    if alive.any():
        rest = set(np.flatnonzero(alive).tolist())
        rest_ok = i == len(groups) - 1 and set(groups[i].tolist()) == rest
        gaps.append(0.0 if rest_ok else np.inf)
        i += 1
    if ran_out or i != len(groups):
        gaps.append(np.inf)
    return np.array(gaps)
