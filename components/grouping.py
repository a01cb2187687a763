"""Greedy fixed-size grouping: standard MDAV and Fair-MDAV's MakeFairlets.

Both repeat: centre c = mean of the remaining records; seed = the record farthest from c; group =
seed + its nearest remaining records. Costs O(N^2 p / k) overall, like the papers' versions. The
implementation keeps it vectorised and cheap:

- distances work on the mixed numeric/nominal form (``components.encoding``): one gather per
  nominal attribute instead of a dot product over every one-hot column;
- the mean of the remaining records is kept as running sums (nominal level counts are exact
  integers; numeric sums are accumulated in extended precision), not recomputed from scratch;
- removed records are masked and the working arrays compacted when half of them are dead.

Ties are broken by the smallest original row index, both for the farthest record and among the
nearest ones (distance first, then row index), so the result is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from components.encoding import EncodedQIs


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
        return np.concatenate([np.arange(len(m)) for m in self.members]) if self.members else np.zeros(0, dtype=np.int64)

    def dropped(self) -> np.ndarray:
        keep = np.zeros(self.n_rows, dtype=bool)
        keep[self.row_order()] = True
        return np.flatnonzero(~keep)


class _Space:
    """Scaled numeric block + flattened nominal codes shared by every working set."""

    def __init__(self, enc: EncodedQIs) -> None:
        self.num = np.ascontiguousarray(enc.scaled)
        self.codes = enc.codes
        self.sizes = np.array([len(a.levels) for a in enc.nominal], dtype=np.int64)
        # Lookup slot of (attribute j, code) in a flat table: slot 0 of each block = missing.
        self.offsets = (np.cumsum(self.sizes + 1) - (self.sizes + 1)).astype(np.int64)
        self.flat = (self.codes + 1 + self.offsets).astype(np.int64)
        self.table_size = int((self.sizes + 1).sum())
        self.present = (self.codes >= 0).astype(np.float64)

    def point_table(self, row: int) -> np.ndarray:
        """Per-slot squared distance to ``row`` on the nominal part: [x != s]([x present]+[s present])."""
        t = np.zeros(self.table_size)
        for j, (off, size) in enumerate(zip(self.offsets, self.sizes, strict=True)):
            s = self.codes[row, j]
            s_present = 1.0 if s >= 0 else 0.0
            block = np.full(size + 1, 1.0 + s_present)
            block[0] = s_present  # x missing
            block[s + 1] = 0.0  # same level (or both missing)
            t[off : off + size + 1] = block
        return t

    def mean_table(self, counts: list[np.ndarray], n: int) -> tuple[np.ndarray, float]:
        """Per-slot term and constant for the distance to a centre with level shares c_j:
        ||c_j||^2 + [x present](1 - 2 c_j[x])."""
        t = np.zeros(self.table_size)
        const = 0.0
        for off, size, cnt in zip(self.offsets, self.sizes, counts, strict=True):
            c = cnt / n
            const += float(c @ c)
            t[off + 1 : off + size + 1] = 1.0 - 2.0 * c
        return t, const


class _WorkingSet:
    """A set of rows still to be grouped; rows are kept in ascending row order."""

    def __init__(self, space: _Space, rows: np.ndarray) -> None:
        self.space = space
        self.rows = np.asarray(rows, dtype=np.int64)
        self.num = space.num[self.rows]
        self.flat = space.flat[self.rows]
        self.alive = np.ones(len(self.rows), dtype=bool)
        self.n_alive = len(self.rows)
        self.num_sum = self.num.astype(np.longdouble).sum(axis=0)
        self.counts = [
            np.bincount(space.codes[self.rows, j][space.codes[self.rows, j] >= 0], minlength=int(size)).astype(np.int64)
            for j, size in enumerate(space.sizes)
        ]

    def _nominal(self, table: np.ndarray) -> np.ndarray:
        if self.flat.shape[1] == 0:
            return np.zeros(len(self.rows))
        return table[self.flat].sum(axis=1)

    def dist2_to_row(self, row: int) -> np.ndarray:
        v = self.space.num[row]
        d = np.einsum("ij,ij->i", self.num - v, self.num - v) + self._nominal(self.space.point_table(row))
        d[~self.alive] = np.inf
        return d

    def dist2_to_centre(self, centre: np.ndarray, table: np.ndarray, const: float) -> np.ndarray:
        diff = self.num - centre
        d = np.einsum("ij,ij->i", diff, diff) + self._nominal(table) + const
        d[~self.alive] = -np.inf
        return d

    def remove(self, positions: np.ndarray) -> None:
        self.alive[positions] = False
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
        keep = self.alive
        self.rows, self.num, self.flat = self.rows[keep], self.num[keep], self.flat[keep]
        self.alive = np.ones(len(self.rows), dtype=bool)

    def alive_positions(self) -> np.ndarray:
        return np.flatnonzero(self.alive)


def _centre(sets: list[_WorkingSet], space: _Space) -> tuple[np.ndarray, np.ndarray, float]:
    n = sum(s.n_alive for s in sets)
    num = (sum(s.num_sum for s in sets) / n).astype(np.float64)
    counts = [sum(s.counts[j] for s in sets) for j in range(len(space.sizes))]
    table, const = space.mean_table(counts, n)
    return num, table, const


def _farthest(sets: list[_WorkingSet], space: _Space) -> tuple[int, int]:
    """(set index, position) of the alive record farthest from the centre; ties -> lowest row."""
    centre, table, const = _centre(sets, space)
    best: tuple[float, int, int, int] | None = None
    for si, s in enumerate(sets):
        if s.n_alive == 0:
            continue
        d = s.dist2_to_centre(centre, table, const)
        pos = int(np.argmax(d))
        cand = (-float(d[pos]), int(s.rows[pos]), si, pos)
        if best is None or cand[:2] < best[:2]:
            best = cand
    assert best is not None
    return best[2], best[3]


def nearest(d: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k smallest entries of ``d``, ordered by (distance, position)."""
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k >= len(d):
        idx = np.arange(len(d))
    else:
        kth = np.partition(d, k - 1)[k - 1]
        less = np.flatnonzero(d < kth)
        equal = np.flatnonzero(d == kth)[: k - len(less)]
        idx = np.concatenate([less, equal])
    return idx[np.lexsort((idx, d[idx]))]


def make_fairlets(enc: EncodedQIs, pa01: np.ndarray, m: int, n: int) -> Grouping:
    """MakeFairlets (Fair-MDAV Alg. 2): each group = seed + nearest same-PA records, exactly m
    unfavoured (pa=0) and n favoured (pa=1). Stops when fewer than m unfavoured or n favoured
    records remain; those are left over (dropped)."""
    space = _Space(enc)
    sets = [_WorkingSet(space, np.flatnonzero(pa01 == 0)), _WorkingSet(space, np.flatnonzero(pa01 == 1))]
    need = (m, n)
    out = Grouping(n_rows=len(pa01))
    while sets[0].n_alive >= m and sets[1].n_alive >= n:
        for s in sets:
            s.maybe_compact()
        si, pos = _farthest(sets, space)
        seed = int(sets[si].rows[pos])
        parts = []
        for sj, s in enumerate(sets):
            d = s.dist2_to_row(seed)
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
    s = _WorkingSet(space, np.arange(enc.codes.shape[0] if enc.codes.size else enc.numeric.shape[0]))
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
        pos_s = int(np.argmax(d))
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
