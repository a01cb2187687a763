"""The greedy grouping's steps, compiled (numba): MDAV and Fair-MDAV's MakeFairlets.

Every decision is the one ``privfair.components.microaggregation.grouping`` documents: the centre is
the mean of the remaining records (numeric sums kept compensated, nominal level counts exact);
the seed is the record farthest from it, the lowest row among those within ``TIE_TOL`` of the
largest distance (per working set, then across the sets); a group takes its seed and the
nearest records, ordered by (distance, row) with distances within ``TIE_TOL`` of each other
chained into ties; MDAV's second seed is the record farthest from the first one among those
left. Squared distances are those of the one-hot space (``encoding``): numeric differences
squared, plus per nominal attribute 0 (same level, or both missing), 1 (one missing) or 2.

The searches visit few records, and every bound keeps all records that can take part in a
decision (so pruning never changes a result):

- the farthest record from the centre: an *anchor*, an earlier centre a, and the head of the
  remaining records sorted by their distance D_a(x) to it, largest first (``WALK_LIMIT``
  records, or 1/20 of those remaining if more; the rest are no farther). For the current centre
  c and delta = ||c - a||, d(x, c) <= D_a(x) + delta, so the walk down that head stops at the
  first record with D_a(x) + delta below the square root of (largest distance found - 2
  ``TIE_TOL``) (two tolerances: a set whose maximum is within one of the overall maximum needs
  its own ties). A walk that runs out of a head that is not the whole set renews the anchor at
  the current centre (one pass);
- the nearest records of a row, and the farthest one: records are grouped into *cells*, the
  records of one signature (their nominal values, whose nominal part of the distance to a row
  is one small integer) cut down to a few records (``grouping.CELL``), each with the box of its
  records' numeric values. Nominal part plus the box's nearest (farthest) point bound every
  record's distance from below (above); exact distances are computed for the records of the
  cells those bounds cannot rule out (the nearest: the cells of the smallest nominal levels
  that hold k records, then every cell whose lower bound reaches the k-th distance found; the
  farthest: cells best bound first, until no bound reaches the largest distance found).

The loops run a given number of groups per call and return, so the caller can report
progress; their whole state is in the arrays the caller holds. They release the GIL while they
run.
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

import numba
import numpy as np
from numba import njit

TIE_TOL = 1e-11  # squared scaled distances closer than this are equal (float noise is ~1e-14)
WALK_LIMIT = 256  # an anchor's head holds at least this many records (and 1/20 of them)
_SLACK = 1e-6  # on distances (not squared): rounding of D_a and delta

# state[...] of a grouping between calls
HAVE_ANCHOR, TOP, ORDER_LEN, COMPLETE, N_GROUPS, N_OUT = range(6)

_CACHE = True  # compiled code kept for the next process (``_cache_outside_the_installation``)


def _cache_outside_the_installation() -> None:
    """numba keeps compiled code beside this module (``__pycache__``), which suits a checkout;
    an installed privfair (site-packages) is not the user's to write in, so there the cache
    goes to ``$NUMBA_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/privfair/numba`` (else
    ``~/.cache/privfair/numba``)."""
    if numba.config.CACHE_DIR:
        return
    here = Path(__file__).resolve()
    installed = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    if not any(here.is_relative_to(Path(p).resolve()) for p in installed):
        return
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    numba.config.CACHE_DIR = str(Path(base) / "privfair" / "numba")


_cache_outside_the_installation()


@njit(cache=_CACHE, inline="always")
def _centre_d2(r, x, codes, offsets, centre, table, const):
    acc = const
    for j in range(x.shape[1]):
        t = x[r, j] - centre[j]
        acc += t * t
    for a in range(codes.shape[1]):
        c = codes[r, a]
        if c >= 0:
            acc += table[offsets[a] + c]
    return acc


@njit(cache=_CACHE, inline="always")
def _point_d2(r, s, x, codes):
    acc = 0.0
    for j in range(x.shape[1]):
        t = x[r, j] - x[s, j]
        acc += t * t
    for a in range(codes.shape[1]):
        c = codes[r, a]
        cs = codes[s, a]
        if c != cs:
            acc += (1.0 if c >= 0 else 0.0) + (1.0 if cs >= 0 else 0.0)
    return acc


@njit(cache=_CACHE)
def _ordered_nearest(d, rows, n, k, tie):
    """Positions into ``d[:n]`` (candidates, ``rows[:n]`` their rows) of the k nearest: the
    k-th smallest distance, every entry within ``tie`` of it, ordered by (distance, row) with
    ties chained, the first k."""
    if k <= 0 or n == 0:
        return np.empty(0, np.int64)
    kth = np.inf
    if n > k:
        kth = np.partition(d[:n].copy(), k - 1)[k - 1]
    pos = np.empty(n, np.int64)
    c = 0
    for i in range(n):
        if (d[i] <= kth + tie) if kth < np.inf else (d[i] < np.inf):
            pos[c] = i
            c += 1
    pos = pos[:c]
    o = pos[np.argsort(rows[pos], kind="mergesort")]
    o = o[np.argsort(d[o], kind="mergesort")]
    block = np.zeros(c, np.int64)
    for t in range(1, c):
        block[t] = block[t - 1] + (0 if d[o[t]] - d[o[t - 1]] <= tie else 1)
    top_row = 0
    for t in range(c):
        top_row = max(top_row, rows[o[t]])
    key = block * (top_row + 1) + rows[o]
    return o[np.argsort(key, kind="mergesort")][: min(k, c)]


@njit(cache=_CACHE)
def _nominal_levels(seed, codes, scodes_t, salive, nu):
    """The nominal part of the distance from row ``seed`` to each cell (``nu``; -1 for a cell
    with no remaining record). ``scodes_t``: the cells' nominal codes, attribute by attribute
    (a loop over cells per attribute, which the compiler vectorises)."""
    n_sig = scodes_t.shape[1]
    nu[:] = 0
    for a in range(scodes_t.shape[0]):
        cs = codes[seed, a]
        present = 1 if cs >= 0 else 0
        for g in range(n_sig):
            c = scodes_t[a, g]
            nu[g] += (c != cs) * ((c >= 0) + present)
    for g in range(n_sig):
        if salive[g] <= 0:
            nu[g] = -1


@njit(cache=_CACHE)
def _gather(seed, g, by, start, alive, x, codes, d, rows, n):
    """Exact distances to ``seed`` of cell g's remaining records (``seed`` left out),
    appended at ``n``; the new count."""
    for i in range(start[g], start[g + 1]):
        r = by[i]
        if alive[r] and r != seed:
            d[n] = _point_d2(r, seed, x, codes)
            rows[n] = r
            n += 1
    return n


@njit(cache=_CACHE)
def _nearest(seed, k, x, codes, alive, by, start, scodes_t, lo, hi, salive, d, rows, tie, nu):
    """The k nearest remaining records of one set to row ``seed`` (itself left out), in
    order; ``nu`` a buffer of one entry per cell."""
    if k <= 0:
        return np.empty(0, np.int64)
    n_sig = scodes_t.shape[1]
    top = 2 * codes.shape[1]
    _nominal_levels(seed, codes, scodes_t, salive, nu)
    held = np.zeros(top + 1, np.int64)
    for g in range(n_sig):
        if nu[g] >= 0:
            held[nu[g]] += salive[g]
    # the smallest level t whose cells hold k records besides the seed
    t, acc = top, 0
    for level in range(top + 1):
        acc += held[level]
        if acc >= k + 1:
            t = level
            break
    n = 0
    for g in range(n_sig):
        if 0 <= nu[g] <= t:
            n = _gather(seed, g, by, start, alive, x, codes, d, rows, n)
    if n >= k:  # a k-th smallest of real records bounds the k-th nearest from above
        bound = np.partition(d[:n].copy(), k - 1)[k - 1]
        reach = bound + tie + 1e-12 * (1.0 + abs(bound))
        for g in range(n_sig):
            if nu[g] > t and nu[g] <= reach:
                low = float(nu[g])
                for j in range(x.shape[1]):
                    v = x[seed, j]
                    gap = 0.0
                    if v < lo[g, j]:
                        gap = lo[g, j] - v
                    elif v > hi[g, j]:
                        gap = v - hi[g, j]
                    low += gap * gap
                if low * (1.0 - 1e-12) <= reach:
                    n = _gather(seed, g, by, start, alive, x, codes, d, rows, n)
    chosen = _ordered_nearest(d, rows, n, k, tie)
    out = np.empty(len(chosen), np.int64)
    for i in range(len(chosen)):
        out[i] = rows[chosen[i]]
    return out


@njit(cache=_CACHE)
def _farthest_from_row(seed, x, codes, alive, by, start, scodes_t, lo, hi, salive, d, rows, tie,
                       nu):  # fmt: skip
    """The remaining record farthest from row ``seed`` (the lowest row within ``tie`` of the
    largest distance); -1 if none is left. ``nu``: ``_nominal_levels`` of ``seed``, as the
    last ``_nearest`` of ``seed`` left it (records removed since then: a cell that lost its last
    one is marked -1 here)."""
    n_sig = scodes_t.shape[1]
    for g in range(n_sig):
        if salive[g] <= 0:
            nu[g] = -1
    upper = np.full(n_sig, -np.inf)
    best_g = -1
    for g in range(n_sig):
        if nu[g] < 0:
            continue
        u = float(nu[g])
        for j in range(x.shape[1]):
            v = x[seed, j]
            far = max(v - lo[g, j], hi[g, j] - v)
            u += far * far
        upper[g] = u
        if best_g < 0 or u > upper[best_g]:
            best_g = g
    if best_g < 0:
        return -1
    n = _gather(seed, best_g, by, start, alive, x, codes, d, rows, 0)
    m = -np.inf
    for i in range(n):
        m = max(m, d[i])
    # cells best first (largest bound), until no bound reaches the largest distance found
    margin = tie + 1e-12 * (1.0 + abs(m))
    cand = np.flatnonzero(upper * (1.0 + 1e-12) >= m - margin)
    cand = cand[np.argsort(-upper[cand], kind="mergesort")]
    n = 0
    top = m
    for g in cand:
        if upper[g] * (1.0 + 1e-12) < top - margin:
            break
        start_n = n
        n = _gather(seed, g, by, start, alive, x, codes, d, rows, n)
        for i in range(start_n, n):
            top = max(top, d[i])
    far = -1
    for i in range(n):
        if d[i] >= top - tie and (far < 0 or rows[i] < far):
            far = rows[i]
    return far


@njit(cache=_CACHE)
def _two_sum_add(sums, comp, j, v):
    """sums[j] += v, its rounding error kept in comp[j] (Neumaier)."""
    s = sums[j]
    t = s + v
    if abs(s) >= abs(v):
        comp[j] += (s - t) + v
    else:
        comp[j] += (v - t) + s
    sums[j] = t


@njit(cache=_CACHE)
def _take_out(r, x, codes, offsets, sums, comp, counts):
    for j in range(x.shape[1]):
        _two_sum_add(sums, comp, j, -x[r, j])
    for a in range(codes.shape[1]):
        if codes[r, a] >= 0:
            counts[offsets[a] + codes[r, a]] -= 1


@njit(cache=_CACHE)
def init_sums(x, codes, offsets, rows, sums, comp, counts):
    """The centre's running sums over ``rows``."""
    for r in rows:
        for j in range(x.shape[1]):
            _two_sum_add(sums, comp, j, x[r, j])
        for a in range(codes.shape[1]):
            if codes[r, a] >= 0:
                counts[offsets[a] + codes[r, a]] += 1


@njit(cache=_CACHE)
def _centre(sums, comp, counts, n_alive):
    """The mean of the remaining records: (numeric centre, level shares, each present level's
    term 1 - 2 share, and the constant: the sum of the squared shares)."""
    q = sums.shape[0]
    centre = np.empty(q)
    for j in range(q):
        centre[j] = (sums[j] + comp[j]) / n_alive
    n_levels = counts.shape[0]
    shares = np.empty(n_levels)
    table = np.empty(n_levels)
    const = 0.0
    for lv in range(n_levels):
        share = counts[lv] / n_alive
        shares[lv] = share
        table[lv] = 1.0 - 2.0 * share
        const += share * share
    return centre, shares, table, const


@njit(cache=_CACHE)
def _farthest_from_centre(
    x, codes, offsets, setof, n_sets, alive, n_alive, sums, comp, counts,
    a_vec, order, dlen, state, d, rows, tie,
):  # fmt: skip
    """The seed: per set the lowest row within ``tie`` of the set's farthest distance from the
    centre, then across sets the lowest of those within ``tie`` of the largest."""
    q = x.shape[1]
    n_levels = counts.shape[0]
    centre, shares, table, const = _centre(sums, comp, counts, n_alive)
    n = 0
    done = False
    if state[HAVE_ANCHOR]:
        gap = 0.0
        for j in range(q):
            t = centre[j] - a_vec[j]
            gap += t * t
        for lv in range(n_levels):
            t = shares[lv] - a_vec[q + lv]
            gap += t * t
        delta = np.sqrt(gap)
        top = state[TOP]
        while top < state[ORDER_LEN] and not alive[order[top]]:
            top += 1
        state[TOP] = top
        best = -np.inf
        i = top
        done = state[COMPLETE] == 1  # unless the walk stops inside the head
        while i < state[ORDER_LEN]:
            r = order[i]
            if alive[r]:
                if best > -np.inf and dlen[i] + delta < np.sqrt(max(best - 2 * tie, 0.0)) - _SLACK:
                    done = True
                    break
                v = _centre_d2(r, x, codes, offsets, centre, table, const)
                d[n] = v
                rows[n] = r
                n += 1
                best = max(best, v)
            i += 1
    if not done:  # a new anchor at this centre, over every remaining record
        n = 0
        for r in range(x.shape[0]):
            if alive[r]:
                d[n] = _centre_d2(r, x, codes, offsets, centre, table, const)
                rows[n] = r
                n += 1
        # only the head of the order a walk may use is kept (the rest are no farther)
        head = min(n, max(WALK_LIMIT, n_alive // 20) + 1)
        neg = -d[:n]
        part = np.argpartition(neg, head - 1)[:head] if head < n else np.arange(n)
        o = part[np.argsort(neg[part], kind="mergesort")]
        for i in range(head):
            order[i] = rows[o[i]]
            dlen[i] = np.sqrt(max(d[o[i]], 0.0))
        for j in range(q):
            a_vec[j] = centre[j]
        for lv in range(n_levels):
            a_vec[q + lv] = shares[lv]
        state[HAVE_ANCHOR] = 1
        state[TOP] = 0
        state[ORDER_LEN] = head
        state[COMPLETE] = 1 if head == n else 0
    set_best = np.full(n_sets, -np.inf)
    for i in range(n):
        s = setof[rows[i]]
        set_best[s] = max(set_best[s], d[i])
    set_rep = np.full(n_sets, -1)
    for i in range(n):
        s = setof[rows[i]]
        if d[i] >= set_best[s] - tie and (set_rep[s] < 0 or rows[i] < set_rep[s]):
            set_rep[s] = rows[i]
    top_d = -np.inf
    for s in range(n_sets):
        top_d = max(top_d, set_best[s])
    seed = -1
    for s in range(n_sets):
        if set_rep[s] >= 0 and set_best[s] >= top_d - tie and (seed < 0 or set_rep[s] < seed):
            seed = set_rep[s]
    return seed


@njit(cache=_CACHE)
def _emit(group, n_group, out_rows, out_sizes, out_seeds, state, seed):
    g = state[N_GROUPS]
    for i in range(n_group):
        out_rows[state[N_OUT] + i] = group[i]
    state[N_OUT] += n_group
    out_sizes[g] = n_group
    out_seeds[g] = seed
    state[N_GROUPS] = g + 1


@njit(cache=_CACHE)
def _remove(rows_, n, x, codes, offsets, setof, alive, sizes, cell_of, salive0, salive1, sums, comp,
            counts):  # fmt: skip
    for i in range(n):
        r = rows_[i]
        alive[r] = False
        s = setof[r]
        sizes[s] -= 1
        if s == 0:
            salive0[cell_of[r]] -= 1
        else:
            salive1[cell_of[r]] -= 1
        _take_out(r, x, codes, offsets, sums, comp, counts)


@njit(cache=_CACHE, nogil=True)  # other threads (progress, a pipe's reader) run meanwhile
def fairlet_steps(
    x, codes, offsets, setof, need0, need1, cell_of,
    by0, st0, sc0, lo0, hi0, sa0, by1, st1, sc1, lo1, hi1, sa1,
    alive, sizes, sums, comp, counts, a_vec, order, dlen, state,
    out_rows, out_sizes, out_seeds, max_steps,
):  # fmt: skip
    """Up to ``max_steps`` fairlets of MakeFairlets (``grouping.make_fairlets``): each the
    seed and its nearest records, ``need0`` of set 0 and ``need1`` of set 1, set 0's first
    (the seed first in its own set's). Returns whether the grouping is done."""
    n_rows = x.shape[0]
    d = np.empty(n_rows)
    rows = np.empty(n_rows, np.int64)
    group = np.empty(need0 + need1, np.int64)
    nu0 = np.empty(sc0.shape[1], np.int64)
    nu1 = np.empty(sc1.shape[1], np.int64)
    for _ in range(max_steps):
        if sizes[0] < need0 or sizes[1] < need1:
            return True
        seed = _farthest_from_centre(
            x, codes, offsets, setof, 2, alive, sizes[0] + sizes[1], sums, comp, counts,
            a_vec, order, dlen, state, d, rows, TIE_TOL,
        )  # fmt: skip
        own = setof[seed]
        near0 = _nearest(seed, need0 - (own == 0), x, codes, alive, by0, st0, sc0, lo0, hi0,
                         sa0, d, rows, TIE_TOL, nu0)  # fmt: skip
        near1 = _nearest(seed, need1 - (own == 1), x, codes, alive, by1, st1, sc1, lo1, hi1,
                         sa1, d, rows, TIE_TOL, nu1)  # fmt: skip
        n = 0
        for s in range(2):
            if own == s:
                group[n] = seed
                n += 1
            near = near0 if s == 0 else near1
            for r in near:
                group[n] = r
                n += 1
        _remove(group, n, x, codes, offsets, setof, alive, sizes, cell_of, sa0, sa1, sums, comp,
                counts)  # fmt: skip
        _emit(group, n, out_rows, out_sizes, out_seeds, state, seed)
    return sizes[0] < need0 or sizes[1] < need1


@njit(cache=_CACHE)
def _grow(
    seed, k, x, codes, offsets, setof, cell_of, by, st, sc, lo, hi, sa, alive, sizes, sums, comp,
    counts, state, out_rows, out_sizes, out_seeds, d, rows, nu, group, empty,
):  # fmt: skip
    """MDAV's group of ``seed``: it and its k - 1 nearest, removed and emitted."""
    near = _nearest(seed, k - 1, x, codes, alive, by, st, sc, lo, hi, sa, d, rows, TIE_TOL, nu)
    group[0] = seed
    for i in range(len(near)):
        group[1 + i] = near[i]
    n = 1 + len(near)
    _remove(group, n, x, codes, offsets, setof, alive, sizes, cell_of, sa, empty, sums, comp,
            counts)  # fmt: skip
    _emit(group, n, out_rows, out_sizes, out_seeds, state, seed)


@njit(cache=_CACHE, nogil=True)  # other threads (progress, a pipe's reader) run meanwhile
def mdav_steps(
    x, codes, offsets, setof, k, cell_of, by, st, sc, lo, hi, sa,
    alive, sizes, sums, comp, counts, a_vec, order, dlen, state,
    out_rows, out_sizes, out_seeds, max_steps,
):  # fmt: skip
    """Up to ``max_steps`` rounds of MDAV (``grouping.mdav``): while 3k or more records
    remain, x_r (farthest from the centre) and its k - 1 nearest, then x_s (farthest from x_r
    among those left) and its k - 1 nearest; then one more group if 2k or more remain, and the
    rest, in row order, as the last group (seeded by its lowest row). Returns whether the
    grouping is done."""
    n_rows = x.shape[0]
    d = np.empty(n_rows)
    rows = np.empty(n_rows, np.int64)
    group = np.empty(max(k, 1), np.int64)
    empty = np.zeros(0, np.int64)
    nu = np.empty(sc.shape[1], np.int64)
    for _ in range(max_steps):
        if sizes[0] < 3 * k:
            break
        xr = _farthest_from_centre(
            x, codes, offsets, setof, 1, alive, sizes[0], sums, comp, counts,
            a_vec, order, dlen, state, d, rows, TIE_TOL,
        )  # fmt: skip
        _grow(xr, k, x, codes, offsets, setof, cell_of, by, st, sc, lo, hi, sa, alive, sizes,
              sums, comp, counts, state, out_rows, out_sizes, out_seeds, d, rows, nu, group,
              empty)  # fmt: skip
        # ``nu`` holds x_r's nominal levels, as its group's search left them
        xs = _farthest_from_row(xr, x, codes, alive, by, st, sc, lo, hi, sa, d, rows, TIE_TOL,
                                nu)  # fmt: skip
        _grow(xs, k, x, codes, offsets, setof, cell_of, by, st, sc, lo, hi, sa, alive, sizes,
              sums, comp, counts, state, out_rows, out_sizes, out_seeds, d, rows, nu, group,
              empty)  # fmt: skip
    if sizes[0] >= 3 * k:
        return False
    if sizes[0] >= 2 * k:
        seed = _farthest_from_centre(
            x, codes, offsets, setof, 1, alive, sizes[0], sums, comp, counts,
            a_vec, order, dlen, state, d, rows, TIE_TOL,
        )  # fmt: skip
        _grow(seed, k, x, codes, offsets, setof, cell_of, by, st, sc, lo, hi, sa, alive, sizes,
              sums, comp, counts, state, out_rows, out_sizes, out_seeds, d, rows, nu, group,
              empty)  # fmt: skip
    if sizes[0] > 0:
        rest = np.flatnonzero(alive)
        _remove(rest, len(rest), x, codes, offsets, setof, alive, sizes, cell_of, sa, empty, sums,
                comp, counts)  # fmt: skip
        _emit(rest, len(rest), out_rows, out_sizes, out_seeds, state, rest[0])
    return True


@njit(cache=_CACHE)
def distances_to_row(x, codes, s):
    """Squared distance of every row to row ``s`` (the form every decision uses)."""
    out = np.empty(x.shape[0])
    for r in range(x.shape[0]):
        out[r] = _point_d2(r, s, x, codes)
    return out


@njit(cache=_CACHE)
def distances_to_centre(x, codes, offsets, n_levels, alive):
    """Squared distance of every row to the mean of the ``alive`` rows (the one-hot mean for
    the nominal attributes), computed as the farthest-record search computes it."""
    q = x.shape[1]
    sums = np.zeros(q)
    comp = np.zeros(q)
    counts = np.zeros(n_levels)
    init_sums(x, codes, offsets, np.flatnonzero(alive), sums, comp, counts)
    centre, _, table, const = _centre(sums, comp, counts, alive.sum())
    out = np.empty(x.shape[0])
    for r in range(x.shape[0]):
        out[r] = _centre_d2(r, x, codes, offsets, centre, table, const)
    return out
