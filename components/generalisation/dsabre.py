"""dSabre (Ruggieri 2014, Algs. 2-3; spec section 2.3): bucketise by (PD group, decision), halve
the bucket counts while both halves stay t-close, then fill each leaf from a seed tuple and its
nearest neighbours.

- ``dichotomize``: the leaves' 4-fold count vectors, depth-first and left-first. A split halves
  (a, b, c, d) into (floor(a/2), floor(b/2), ceil(c/2), ceil(d/2)) and the rest, and is taken
  when both halves have tau <= t and at least max(k, 1) rows (AMB-9, AMB-10: non-empty halves,
  so the recursion ends) and, with k over q-blocks (the default ``k_over``), each PD group of a
  half is empty or holds at least k rows. It depends on the counts, t and k only (I7).
- ``take_out``: each leaf, in that order, takes its counts from the buckets: a seed tuple drawn
  uniformly (seeded) from the bucket with the lowest size/requested ratio (footnote 4; or a
  random bucket, AMB-12), then from every bucket the requested number of tuples nearest to the
  seed, by Euclidean distance over normalised PND ranks (footnote 5), ties to the lowest row id
  (AMB-11). Exact nearest neighbours come from scipy's KD-tree over the bucket's distinct points.

- ``split_pairs`` (``DSabreParams``, off by default): a documented deviation that splits a
  two-row leaf the halving cannot split, when t allows (``dichotomize``).

Theorem 23: the release is bd_f(max{t, tau(R)})-protective for every measure f.

>>> from components.generalisation.examples import toy_table
>>> dichotomize((4, 4, 4, 5), 0.25, 1, 8 / 17)
[(1, 1, 1, 2), (0, 0, 1, 1), (1, 1, 0, 0), (0, 0, 1, 1), (1, 1, 0, 0), (0, 0, 1, 1), (1, 1, 0, 0)]
>>> result = dsabre(toy_table(), DSabreParams(t=0.25, utility_queries=0))
>>> result.metrics["classes"]
7
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
from scipy.spatial import cKDTree

from components.generalisation.contract import dsabre_contract
from components.generalisation.dmondrian import TOL, _tau, k_allows
from components.generalisation.inputs import prepare_for
from components.generalisation.params import DSabreParams
from components.generalisation.publish import release

__all__ = ["dsabre", "dichotomize", "take_out", "normalised_ranks"]

Counts = tuple[int, int, int, int]


def _pair_split(a: int, b: int, c: int, d: int) -> tuple[Counts, Counts] | None:
    """The two single rows of a two-row leaf that halving cannot split into non-empty halves,
    (1, 1, 0, 0) or (0, 0, 1, 1) (the cells differ in decision only); None for any other."""
    if (a, b, c, d) == (1, 1, 0, 0):
        return (1, 0, 0, 0), (0, 1, 0, 0)
    if (a, b, c, d) == (0, 0, 1, 1):
        return (0, 0, 1, 0), (0, 0, 0, 1)
    return None


def dichotomize(
    root: Counts,
    t: float,
    k: int,
    p_minus: float,
    k_over: str = "classes",
    split_pairs: bool = False,
) -> list[Counts]:
    """The leaf count vectors of Dichotomize(root, t) (Alg. 3 with AMB-9/AMB-10), in
    depth-first, left-first order; ``k_over``: what k covers (``dmondrian.k_allows``).

    Halving never splits (1, 1, 0, 0) or (0, 0, 1, 1): one half would be empty. So the
    paper's algorithm makes at most |R| - min(a, b) - min(c, d) classes, whatever t (a
    ceiling, reached from t of about 0.3 on German and Adult). ``split_pairs`` (a deviation,
    off by default) splits such a leaf into its two rows when both pass the same test as a
    halving: a single row has tau = p- or 1 - p-, so this needs t >= max(p-, 1 - p-) and k = 1.

    >>> dichotomize((2, 2, 6, 6), 0.5, 3, 0.5, "classes")
    [(0, 0, 2, 2), (1, 1, 1, 1), (0, 0, 2, 2), (1, 1, 1, 1)]
    >>> dichotomize((2, 2, 6, 6), 0.5, 3, 0.5, "q_blocks")  # halves hold 2 protected rows
    [(2, 2, 6, 6)]
    >>> dichotomize((1, 1, 0, 0), 0.7, 1, 0.7)  # the paper's: a two-row class
    [(1, 1, 0, 0)]
    >>> dichotomize((1, 1, 0, 0), 0.7, 1, 0.7, split_pairs=True)  # tau 0.3 and 0.7 <= t
    [(1, 0, 0, 0), (0, 1, 0, 0)]
    """
    kmin = max(k, 1)

    def allowed(h: Counts) -> bool:
        return (
            sum(h) >= kmin and _tau(*h, p_minus) <= t + TOL and (k <= 1 or k_allows(*h, k, k_over))
        )

    leaves: list[Counts] = []
    stack = [tuple(int(x) for x in root)]
    while stack:
        a, b, c, d = stack.pop()
        a1, b1 = a // 2, b // 2
        c1, d1 = c - c // 2, d - d // 2  # ceil for the unprotected cells
        halves: tuple[Counts, Counts] | None = ((a1, b1, c1, d1), (a - a1, b - b1, c - c1, d - d1))
        if not (allowed(halves[0]) and allowed(halves[1])):
            halves = _pair_split(a, b, c, d) if split_pairs else None
            if halves is not None and not (allowed(halves[0]) and allowed(halves[1])):
                halves = None
        if halves is None:
            leaves.append((a, b, c, d))
        else:
            stack.append(halves[1])
            stack.append(halves[0])
    return leaves


def normalised_ranks(ranks: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """(r - 1)/(|dom| - 1) for 1-based ranks (0 for a one-value domain), footnote 5."""
    denom = np.where(sizes > 1, sizes - 1, 1).astype(np.float64)
    return ranks / denom


class _Bucket:
    """One bucket's tuples, their distinct PND points in a KD-tree, and which are taken."""

    def __init__(self, rows: np.ndarray, ranks: np.ndarray, sizes: np.ndarray) -> None:
        self.rows = rows  # input row ids, ascending
        self.alive = np.ones(len(rows), dtype=bool)
        self.left = len(rows)
        if len(rows):
            pts, point_of = np.unique(ranks[rows], axis=0, return_inverse=True)
        else:
            pts, point_of = np.zeros((0, ranks.shape[1]), dtype=np.int64), np.zeros(0, np.int64)
        point_of = point_of.ravel()
        self.coords = normalised_ranks(pts, sizes)
        # positions grouped by point, row order kept inside a point (rows are ascending)
        self.perm = np.argsort(point_of, kind="stable")
        counts = np.bincount(point_of, minlength=len(pts))
        self.start = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        self.end = self.start + counts
        self.count = counts.astype(np.int64)
        self.point_of = point_of
        self._alive_list = np.arange(len(rows))
        self._build()

    def _build(self) -> None:
        self.tree_points = np.flatnonzero(self.count > 0)
        self._tree_list = self.tree_points.tolist()
        self.tree_alive = len(self.tree_points)  # tree points with tuples left
        self.tree = cKDTree(self.coords[self.tree_points]) if len(self.tree_points) else None

    def draw(self, rng: np.random.Generator) -> int:
        """A uniformly random remaining position (rejection sampling, compacted when sparse)."""
        if self.left * 2 < len(self._alive_list):
            self._alive_list = np.flatnonzero(self.alive)
        while True:
            pos = int(self._alive_list[rng.integers(len(self._alive_list))])
            if self.alive[pos]:
                return pos

    def _take(self, positions: np.ndarray) -> np.ndarray:
        self.alive[positions] = False
        points = self.point_of[positions]
        np.subtract.at(self.count, points, 1)
        self.tree_alive -= int(np.count_nonzero(self.count[np.unique(points)] == 0))
        self.left -= len(positions)
        return self.rows[positions]

    def take_one(self, pos: int) -> int:
        """Take one position; its row id."""
        self.alive[pos] = False
        q = self.point_of[pos]
        self.count[q] -= 1
        if self.count[q] == 0:
            self.tree_alive -= 1
        self.left -= 1
        return int(self.rows[pos])

    def _first_alive(self, point: int) -> int:
        """The point's remaining position with the lowest row id (its taken prefix skipped
        for good: over a run, each position is skipped at most once)."""
        s = int(self.start[point])
        perm, alive = self.perm, self.alive
        while not alive[perm[s]]:
            s += 1
        self.start[point] = s
        return int(perm[s])

    def _nearest_one(self, centre: np.ndarray) -> np.ndarray:
        """``nearest(centre, 1)`` with scalar steps: most leaves take one tuple per bucket."""
        n_tree = len(self._tree_list)
        count, tree_list = self.count, self._tree_list
        kk = min(n_tree, 8)
        while True:
            dist, idx = self.tree.query(centre, k=kk)
            if kk == 1:
                dist, idx = [float(dist)], [int(idx)]
            else:
                dist, idx = dist.tolist(), idx.tolist()
            edge, tied, beyond = None, [], False
            for dd, ii in zip(dist, idx, strict=True):
                if edge is not None and dd > edge:
                    beyond = True
                    break
                q = tree_list[ii]
                if count[q] > 0:
                    if edge is None:
                        edge = dd * (1 + 1e-9) + 1e-12
                    tied.append(q)
            if edge is not None and (beyond or kk >= n_tree):
                break
            if kk >= n_tree:
                raise RuntimeError(f"bucket has {int(self.left)} tuples left, 1 requested")
            kk = min(n_tree, kk * 2)
        if len(tied) == 1:
            pos = self._first_alive(tied[0])
        else:
            pos = min((self._first_alive(q) for q in tied), key=lambda p: self.rows[p])
        return np.array([self.take_one(pos)], dtype=np.int64)

    def _alive_of(self, point: int) -> np.ndarray:
        """The point's remaining positions, lowest row id first (its taken prefix skipped)."""
        s, e = self.start[point], self.end[point]
        seg = self.perm[s:e]
        alive = self.alive[seg]
        if len(seg) and not alive[0]:
            first = int(np.argmax(alive)) if alive.any() else len(seg)
            self.start[point] = s + first
            seg, alive = seg[first:], alive[first:]
        return seg[alive]

    def nearest(self, centre: np.ndarray, x: int) -> np.ndarray:
        """Take the ``x`` remaining tuples nearest to ``centre`` (ties: lowest row id).

        The KD-tree holds the bucket's distinct points; a query returns them by distance, and
        points with no tuple left are skipped. The answer is the points strictly closer than
        the x-th tuple's distance, whole, plus the lowest row ids among the points at exactly
        that distance (float noise of 1e-9 relative counts as a tie)."""
        if x <= 0:
            return np.zeros(0, dtype=np.int64)
        dead = len(self.tree_points) - self.tree_alive
        # taken points cluster around the seeds, so queries there wade through them: rebuild
        # once a sixteenth of the tree is dead (measured best on Adult: 2.7 s -> 1.3 s at t=0.25)
        if self.tree is None or (dead >= 32 and dead * 16 > len(self.tree_points)):
            self._build()
        if x == 1:
            return self._nearest_one(centre)
        n_tree = len(self.tree_points)
        kk = min(n_tree, x + 8)
        while True:
            dist, idx = self.tree.query(centre, k=kk)
            dist, idx = np.atleast_1d(dist), np.atleast_1d(idx)
            pts = self.tree_points[idx]
            cnt = self.count[pts]
            keep = cnt > 0  # points with tuples left (taken ones stay in the tree until rebuilt)
            found: list[tuple[float, int]] = []
            got, edge = 0, None
            for dd, q, c in zip(
                dist[keep].tolist(), pts[keep].tolist(), cnt[keep].tolist(), strict=True
            ):
                if edge is not None and dd > edge:
                    break
                found.append((dd, q))
                got += c
                if edge is None and got >= x:
                    boundary = dd  # the x-th tuple's distance
                    edge = dd * (1 + 1e-9) + 1e-12
            # every point within the edge was seen when a farther one came back (or all did)
            if kk >= n_tree or (edge is not None and dist[-1] > edge):
                break
            kk = min(n_tree, kk * 2)
        if edge is None:
            raise RuntimeError(f"bucket has {int(self.left)} tuples left, {x} requested")
        floor = boundary * (1 - 1e-9) - 1e-12
        whole = [self._alive_of(q) for dd, q in found if dd < floor]
        tied = [self._alive_of(q) for dd, q in found if dd >= floor]
        need = x - sum(len(w) for w in whole)
        if len(tied) == 1:
            pool = tied[0][:need]  # one point: its lowest row ids
        else:
            pool = np.concatenate(tied)
            pool = pool[np.argsort(self.rows[pool], kind="stable")][:need]
        positions = np.concatenate([*whole, pool]) if whole else pool
        return self._take(positions.astype(np.int64, copy=False))


def take_out(
    leaves: list[Counts],
    cell: np.ndarray,
    ranks: np.ndarray,
    sizes: np.ndarray,
    rng: np.random.Generator,
    rule: str = "min_ratio",
) -> np.ndarray:
    """Each row's class: leaf i takes ``leaves[i]`` tuples from the buckets a, b, c, d."""
    n = len(cell)
    buckets = [_Bucket(np.flatnonzero(cell == j), ranks, sizes) for j in range(4)]
    coords_all = normalised_ranks(ranks, sizes)
    parts: list[np.ndarray] = []
    lengths: list[int] = []
    for req in leaves:
        wanted = [j for j in range(4) if req[j] > 0]
        if rule == "min_ratio":
            star = min(wanted, key=lambda j: buckets[j].left / req[j])
        else:
            star = wanted[int(rng.integers(len(wanted)))]
        bs = buckets[star]
        seed_row = bs.take_one(bs.draw(rng))
        centre = coords_all[seed_row]
        size = 1
        parts.append(np.array([seed_row], dtype=np.int64))
        for j in wanted:
            got = buckets[j].nearest(centre, req[j] - (1 if j == star else 0))
            if len(got):
                parts.append(got)
                size += len(got)
        lengths.append(size)
    classes = np.full(n, -1, dtype=np.int64)
    if parts:
        classes[np.concatenate(parts)] = np.repeat(np.arange(len(leaves)), lengths)
    return classes


def dsabre(table: pa.Table, params: DSabreParams):
    """Run dSabre on ``table`` (roles in its field metadata); see the module docstring."""
    started = time.perf_counter()
    prep = prepare_for(table, params)
    leaves = dichotomize(
        prep.counts, params.t, params.k, prep.p_minus, params.k_over, params.split_pairs
    )
    sizes = np.array([d.size for d in prep.domains], dtype=np.int64)
    rng = np.random.default_rng(params.seed)
    classes = take_out(leaves, prep.cell, prep.ranks, sizes, rng, params.seed_bucket_rule)
    return release(
        prep,
        classes,
        params,
        "dsabre",
        dsabre_contract(params, table),
        started,
        {"leaves": len(leaves)},
    )
