"""Greedy fixed-size grouping: standard MDAV and Fair-MDAV's MakeFairlets.

Both repeat: centre c = mean of the remaining records; seed = the record farthest from c; group =
seed + its nearest remaining records. Costs O(N^2 p / k) overall, like the papers' versions. The
implementation keeps it vectorised and cheap:

- distances work on the mixed numeric/nominal form (``components.microaggregation.encoding``): one gather per
  nominal attribute instead of a dot product over every one-hot column;
- the mean of the remaining records is kept as running sums (nominal level counts are exact
  integers; numeric sums are accumulated in extended precision), not recomputed from scratch;
- removed records are masked and the working arrays compacted when half of them are dead.

Ties are broken by the smallest original row index, both for the farthest record and among the
nearest ones (distance first, then row index), so the result is deterministic. Squared distances
within ``TIE_TOL`` of each other count as ties: the expanded-form arithmetic above rounds two
equal distances of distinct records differently (~1e-14), which must not decide a tie.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from components.microaggregation.encoding import EncodedQIs

TIE_TOL = 1e-11  # squared scaled distances closer than this are equal (float noise is ~1e-14)


def first_max(d: np.ndarray) -> int:
    """Position of the first entry within ``TIE_TOL`` of the maximum (lowest row on a tie)."""
    return int(np.flatnonzero(d >= d.max() - TIE_TOL)[0])


@dataclass
class Grouping:
    """Groups in creation order. ``members[g]`` lists row positions in output order;
    ``seeds[g]`` is the row the group was built around."""

    n_rows: int
    members: list[np.ndarray] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)

    @property
    def n_groups(self) -> int:
        return len(self.members)

    def row_order(self) -> np.ndarray:
        return np.concatenate(self.members) if self.members else np.zeros(0, dtype=np.int64)

    def group_ids(self) -> np.ndarray:
        """Group id of each row in ``row_order()``."""
        sizes = [len(m) for m in self.members]
        return np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)

    def ranks(self) -> np.ndarray:
        return (
            np.concatenate([np.arange(len(m)) for m in self.members])
            if self.members
            else np.zeros(0, dtype=np.int64)
        )


class _Space:
    """Scaled numeric block + nominal codes shared by every working set.

    Nominal attributes are packed into *blocks* whose joint code spaces have at most
    ``_BLOCK_LIMIT`` slots; a per-query lookup table over each block (the outer sum of its
    attributes' tables) turns the nominal part of a distance into one gather per block.
    """

    _BLOCK_LIMIT = 2048

    def __init__(self, enc: EncodedQIs) -> None:
        self.num = np.ascontiguousarray(enc.scaled)
        self.codes = enc.codes
        self.sizes = np.array([len(a.levels) for a in enc.nominal], dtype=np.int64)
        self.blocks: list[list[int]] = []
        for j, size in enumerate(self.sizes):
            if (
                self.blocks
                and np.prod([self.sizes[i] + 1 for i in self.blocks[-1]]) * (size + 1)
                <= self._BLOCK_LIMIT
            ):
                self.blocks[-1].append(j)
            else:
                self.blocks.append([j])
        cols = []
        for block in self.blocks:
            code = np.zeros(self.codes.shape[0], dtype=np.int64)
            for j in block:
                code = code * (self.sizes[j] + 1) + (self.codes[:, j] + 1)
            cols.append(code)
        self.block_codes = (
            np.column_stack(cols) if cols else np.zeros((self.codes.shape[0], 0), dtype=np.int64)
        )

    def _block_tables(self, per_attribute: list[np.ndarray]) -> list[np.ndarray]:
        """Joint lookup tables: slot (c_1+1, ..., c_b+1) -> sum of the attributes' entries."""
        out = []
        for block in self.blocks:
            t = per_attribute[block[0]]
            for j in block[1:]:
                t = (t[:, None] + per_attribute[j][None, :]).ravel()
            out.append(t)
        return out

    def point_tables(self, row: int) -> list[np.ndarray]:
        """Per-slot squared distance to ``row`` on the nominal part: [x != s]([x present]+[s present])."""
        per = []
        for j, size in enumerate(self.sizes):
            s = self.codes[row, j]
            s_present = 1.0 if s >= 0 else 0.0
            t = np.full(size + 1, 1.0 + s_present)
            t[0] = s_present  # x missing
            t[s + 1] = 0.0  # same level (or both missing)
            per.append(t)
        return self._block_tables(per)

    def mean_tables(self, counts: list[np.ndarray], n: int) -> tuple[list[np.ndarray], float]:
        """Per-slot term and constant for the distance to a centre with level shares c_j:
        ||c_j||^2 + [x present](1 - 2 c_j[x])."""
        per = []
        const = 0.0
        for cnt in counts:
            c = cnt / n
            const += float(c @ c)
            per.append(np.concatenate([[0.0], 1.0 - 2.0 * c]))
        return self._block_tables(per), const


class _WorkingSet:
    """A set of rows still to be grouped; rows are kept in ascending row order.

    The farthest-from-centre query is pruned with a cached *anchor*: distances D_a(x) to an
    earlier centre c_a. For the current centre c and delta = ||c - c_a||, the triangle inequality
    gives |d(x, c) - D_a(x)| <= delta, so only rows with D_a(x) >= L - 2 delta (L = the exact
    distance of the row with the largest D_a) can be farthest. Those are a prefix of the rows
    sorted by D_a; the anchor is refreshed when that prefix grows large.
    """

    _SLACK = 1e-6

    def __init__(self, space: _Space, rows: np.ndarray) -> None:
        self.space = space
        self.rows = np.asarray(rows, dtype=np.int64)
        self._load()
        self.num_sum = self.num.astype(np.longdouble).sum(axis=0)
        self.counts = [
            np.bincount(
                space.codes[self.rows, j][space.codes[self.rows, j] >= 0], minlength=int(size)
            ).astype(np.int64)
            for j, size in enumerate(space.sizes)
        ]
        self.n_alive = len(self.rows)

    def _load(self) -> None:
        self.num = np.ascontiguousarray(self.space.num[self.rows])
        self.sq = np.einsum("ij,ij->i", self.num, self.num)
        self.num_m2 = -2.0 * self.num
        self.codes_t = np.ascontiguousarray(self.space.block_codes[self.rows].T)
        self.alive = np.ones(len(self.rows), dtype=bool)
        self.dead = np.empty(len(self.rows), dtype=np.int64)
        self.n_dead = 0
        self.anchor: tuple | None = None

    def _dist2(
        self, v: np.ndarray, tables: list[np.ndarray], const: float, idx: np.ndarray | None = None
    ) -> np.ndarray:
        """||x_num - v||^2 (expanded: ||x||^2 - 2 x.v + ||v||^2) + nominal lookups + const."""
        if idx is None:
            out = self.num_m2 @ v
            out += self.sq
            for col, table in zip(self.codes_t, tables, strict=True):
                out += table[col]
        else:
            out = self.num_m2[idx] @ v
            out += self.sq[idx]
            for col, table in zip(self.codes_t, tables, strict=True):
                out += table[col[idx]]
        out += float(v @ v) + const
        return out

    def _mark_dead(self, d: np.ndarray, value: float) -> np.ndarray:
        d[self.dead[: self.n_dead]] = value
        return d

    def dist2_to_row(self, row: int, tables: list[np.ndarray] | None = None) -> np.ndarray:
        """Squared distance of every position to input row ``row`` (dead positions: +inf).
        ``tables``: the row's nominal lookup tables, when the caller already built them."""
        tables = self.space.point_tables(row) if tables is None else tables
        d = self._dist2(self.space.num[row], tables, 0.0)
        return self._mark_dead(d, np.inf)

    def farthest_from(
        self, centre: tuple[np.ndarray, np.ndarray, float, np.ndarray]
    ) -> tuple[int, float]:
        """(position, squared distance) of the alive row farthest from ``centre``; ties -> lowest row."""
        num_c, table, const, shares = centre
        if self.anchor is not None:
            a_num, a_shares, order, neg_sorted = self.anchor
            delta = float(np.sqrt(((num_c - a_num) ** 2).sum() + ((shares - a_shares) ** 2).sum()))
            while not self.alive[order[self.anchor_top]]:
                self.anchor_top += 1  # dead rows never revive, so the pointer only moves forward
            top = order[self.anchor_top : self.anchor_top + 1]
            d_top = self._dist2(num_c, table, const, top)
            lower = float(np.sqrt(max(d_top[0], 0.0)))
            cut = np.searchsorted(neg_sorted, -(lower - 2.0 * delta - self._SLACK), side="right")
            if cut <= max(64, len(self.rows) // 20):
                cand = order[:cut]
                cand = np.sort(cand[self.alive[cand]])
                d = self._dist2(num_c, table, const, cand)
                i = first_max(d)
                return int(cand[i]), float(d[i])
        d = self._dist2(num_c, table, const)
        self._mark_dead(d, -np.inf)
        dist = np.sqrt(np.maximum(d, 0.0))
        order = np.lexsort((np.arange(len(d)), -dist))
        self.anchor = (num_c.copy(), shares.copy(), order, -dist[order])
        self.anchor_top = 0
        i = first_max(d)
        return i, float(d[i])

    def remove(self, positions: np.ndarray) -> None:
        positions = np.asarray(positions, dtype=np.int64)
        self.alive[positions] = False
        self.dead[self.n_dead : self.n_dead + len(positions)] = positions
        self.n_dead += len(positions)
        self.n_alive -= len(positions)
        self.num_sum -= self.num[positions].astype(np.longdouble).sum(axis=0)
        codes = self.space.codes[self.rows[positions]]
        for j, cnt in enumerate(self.counts):
            cj = codes[:, j]
            np.subtract.at(cnt, cj[cj >= 0], 1)

    def maybe_compact(self) -> None:
        """Drop dead rows from the working arrays once half are dead. Invalidates positions."""
        if self.n_alive >= len(self.rows) // 2 or len(self.rows) <= 256:
            return
        self.rows = self.rows[self.alive]
        self._load()

    def alive_positions(self) -> np.ndarray:
        return np.flatnonzero(self.alive)


def _centre(
    sets: list[_WorkingSet], space: _Space
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """Mean of the alive rows of ``sets``: numeric part, nominal lookup table and constant, and the
    concatenated level shares (for anchor distances)."""
    n = sum(s.n_alive for s in sets)
    num = (sum(s.num_sum for s in sets) / n).astype(np.float64)
    counts = [sum(s.counts[j] for s in sets) for j in range(len(space.sizes))]
    table, const = space.mean_tables(counts, n)
    shares = np.concatenate(counts) / n if counts else np.zeros(0)
    return num, table, const, shares


def _farthest(sets: list[_WorkingSet], space: _Space) -> tuple[int, int]:
    """(set index, position) of the alive record farthest from the centre; ties -> lowest row."""
    centre = _centre(sets, space)
    found = []
    for si, s in enumerate(sets):
        if s.n_alive == 0:
            continue
        pos, d = s.farthest_from(centre)
        found.append((d, int(s.rows[pos]), si, pos))
    assert found
    d_max = max(f[0] for f in found)
    best = min((f for f in found if f[0] >= d_max - TIE_TOL), key=lambda f: f[1])
    return best[2], best[3]


def nearest(d: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k smallest entries of ``d``, ordered by (distance, position); distances
    within ``TIE_TOL`` of each other (chained in sorted order) are ties, ordered by position."""
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k >= len(d):
        pool = np.arange(len(d))
    else:
        # An upper bound on the k-th smallest from a sample narrows the exact selection.
        sample = d[:: max(1, len(d) // (64 * k))]
        if len(sample) > k:
            bound = np.partition(sample, k - 1)[k - 1]
            pool = np.flatnonzero(d <= bound + TIE_TOL)
        else:
            pool = np.arange(len(d))
        dp = d[pool]
        kth = np.partition(dp, k - 1)[k - 1]
        pool = pool[dp <= kth + TIE_TOL]  # every entry that may tie with the k-th
    idx = pool[np.lexsort((pool, d[pool]))]
    tie_block = np.concatenate([[0], np.cumsum(np.diff(d[idx]) > TIE_TOL)])
    return idx[np.lexsort((idx, tie_block))][:k]


def make_fairlets(enc: EncodedQIs, pa01: np.ndarray, m: int, n: int) -> Grouping:
    """MakeFairlets (Fair-MDAV Alg. 2): each group = seed + nearest same-PA records, exactly m
    unfavoured (pa=0) and n favoured (pa=1). Stops when fewer than m unfavoured or n favoured
    records remain; those are left over (dropped)."""
    space = _Space(enc)
    sets = [
        _WorkingSet(space, np.flatnonzero(pa01 == 0)),
        _WorkingSet(space, np.flatnonzero(pa01 == 1)),
    ]
    need = (m, n)
    out = Grouping(n_rows=len(pa01))
    while sets[0].n_alive >= m and sets[1].n_alive >= n:
        for s in sets:
            s.maybe_compact()
        si, pos = _farthest(sets, space)
        seed = int(sets[si].rows[pos])
        tables = space.point_tables(seed)
        parts = []
        for sj, s in enumerate(sets):
            d = s.dist2_to_row(seed, tables)
            if sj == si:
                d[pos] = np.inf
                chosen = np.concatenate([[pos], nearest(d, need[sj] - 1)]).astype(np.int64)
            else:
                chosen = nearest(d, need[sj])
            parts.append(s.rows[chosen])
            s.remove(chosen)
        out.members.append(np.concatenate(parts))  # unfavoured first, then favoured
        out.seeds.append(seed)
    return out


def mdav(enc: EncodedQIs, k: int) -> Grouping:
    """Standard MDAV (Domingo-Ferrer & Torra 2005): every record is assigned; group sizes in
    [k, 2k-1]. While >= 3k remain: x_r = farthest from the centre, x_s = farthest from x_r; groups
    around both. Then one more group if >= 2k remain, and the rest form the last group."""
    space = _Space(enc)
    s = _WorkingSet(
        space, np.arange(enc.codes.shape[0] if enc.codes.size else enc.numeric.shape[0])
    )
    out = Grouping(n_rows=len(s.rows))

    def grow(pos: int, d: np.ndarray) -> np.ndarray:
        d = d.copy()
        d[pos] = np.inf
        chosen = np.concatenate([[pos], nearest(d, k - 1)]).astype(np.int64)
        rows = s.rows[chosen]
        s.remove(chosen)
        out.members.append(rows)
        out.seeds.append(int(rows[0]))
        return rows

    while s.n_alive >= 3 * k:
        s.maybe_compact()
        _, pos = _farthest([s], space)
        xr = int(s.rows[pos])
        d = s.dist2_to_row(xr)
        grow(pos, d)
        # x_s: farthest from x_r among the records left after the first group.
        d[~s.alive] = -np.inf
        pos_s = first_max(d)  # first maximum = lowest row
        grow(pos_s, s.dist2_to_row(int(s.rows[pos_s])))
    if s.n_alive >= 2 * k:
        _, pos = _farthest([s], space)
        grow(pos, s.dist2_to_row(int(s.rows[pos])))
    if s.n_alive > 0:
        rest = s.alive_positions()
        rows = s.rows[rest]
        s.remove(rest)
        out.members.append(rows)
        out.seeds.append(int(rows[0]))
    return out
