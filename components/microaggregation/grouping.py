"""Greedy fixed-size grouping: standard MDAV and Fair-MDAV's MakeFairlets.

Both repeat: centre c = mean of the remaining records; seed = the record farthest from c; group =
seed + its nearest remaining records. A direct implementation costs O(N^2 p / k): N/k rounds,
each a few distance passes over the remaining records. The rounds run compiled
(``privfair.components.microaggregation.kernel``, numba), with searches that visit few records:

- distances work on the mixed numeric/nominal form (``privfair.components.microaggregation.encoding``):
  one subtraction per numeric column and one comparison per nominal attribute, never the
  one-hot matrix;
- the mean of the remaining records is kept as running sums (numeric sums compensated, nominal
  level counts exact), not recomputed;
- the farthest record from the centre is searched among the head of an anchor's order that
  the triangle inequality leaves;
- the records are grouped into *cells*: the records of one signature (their nominal values,
  so one small integer is the nominal part of their distance to any row), cut at the median
  of their widest numeric attribute down to ``CELL`` records, each with its numeric box. The
  nominal part plus the box bound a cell's distances from below and above, so the nearest
  records of a row, and MDAV's farthest record from x_r, are searched in the cells those
  bounds cannot rule out.

Every bound keeps all records that can take part in a decision, so the result does not depend
on them. Ties are broken by the smallest original row index, both for the farthest record (per
working set, then across the sets) and among the nearest ones (distance first, then row index),
so the result is deterministic. Squared distances within ``kernel.TIE_TOL`` of each other
count as ties: two equal distances of distinct records may be computed ~1e-14 apart, which
must not decide a tie.

``tests/microaggregation/test_mdav.py`` holds the groups, seeds and member order to a plain
reference of the pseudocode (exact rational distances, lowest-row ties) on random tables with
duplicate rows and with distinct equidistant ones, with cells of the default size and of one
and three rows. The groups are also those of the NumPy engine this replaced (whose
expanded-form distances and extended-precision sums round differently, below ``TIE_TOL``):
compared seed by seed and member by member on Adult at k = 3, 5, 10, 12 and 25, on a
10,000-row sample at the same k and on Adult x4 with jittered numeric values (k = 10).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from privfair.components.core import progress
from privfair.components.microaggregation.encoding import EncodedQIs

CELL = 32  # records per cell at most (see the module's docstring)
_STEPS = 64  # groups per compiled call: the progress bar moves after each call


@dataclass
class Grouping:
    """Groups in creation order. ``members[g]`` lists row positions in the order the group
    took them (their ``rank`` in the lineage; the release itself is published sorted by its
    values, ``privfair.components.core.order``); ``seeds[g]`` is the row the group was built around."""

    n_rows: int
    members: list[np.ndarray] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def n_groups(self) -> int:
        return len(self.members)

    def _cached(self, key: str, make):
        """``make()``, kept while no group is added."""
        got = self._memo.get(key)
        if got is None or got[0] != len(self.members):
            got = (len(self.members), make())
            self._memo[key] = got
        return got[1]

    def row_order(self) -> np.ndarray:
        return self._cached(
            "order",
            lambda: np.concatenate(self.members) if self.members else np.zeros(0, dtype=np.int64),
        ).copy()

    def sizes(self) -> np.ndarray:
        """Size of every group."""
        return self._cached(
            "sizes",
            lambda: np.fromiter((len(m) for m in self.members), np.int64, len(self.members)),
        ).copy()

    def group_ids(self) -> np.ndarray:
        """Group id of each row in ``row_order()``."""
        sizes = self.sizes()
        return np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)

    def ranks(self) -> np.ndarray:
        if not self.members:
            return np.zeros(0, dtype=np.int64)
        sizes = self.sizes()
        starts = np.cumsum(sizes) - sizes
        return np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(starts, sizes)


def _signatures(codes: np.ndarray) -> np.ndarray:
    """Each row's signature: a number per distinct tuple of nominal codes."""
    n, a = codes.shape
    if a == 0:
        return np.zeros(n, np.int64)
    spans = codes.max(axis=0).astype(np.int64) + 2
    if float(np.prod(spans.astype(float))) < 2.0**62:
        key = np.zeros(n, np.int64)
        for j in range(a):
            key = key * int(spans[j]) + (codes[:, j].astype(np.int64) + 1)
        _, sig = np.unique(key, return_inverse=True)
    else:
        _, sig = np.unique(codes, axis=0, return_inverse=True)
    return sig.reshape(-1).astype(np.int64)


def _cells(rows: np.ndarray, x: np.ndarray) -> list[np.ndarray]:
    """``rows`` (one signature's) cut at the median of their widest numeric attribute until each
    part holds at most ``CELL`` rows."""
    if len(rows) <= CELL or x.shape[1] == 0:
        return [rows]
    vals = x[rows]
    j = int(np.argmax(vals.max(axis=0) - vals.min(axis=0)))
    o = np.argsort(vals[:, j], kind="stable")
    half = len(rows) // 2
    return _cells(rows[o[:half]], x) + _cells(rows[o[half:]], x)


def _set_cells(
    rows: np.ndarray, x: np.ndarray, codes: np.ndarray, sig: np.ndarray, cell_of: np.ndarray
) -> tuple:
    """The cells of one working set (``rows``): (rows by cell, cell starts, nominal codes
    attribute by attribute, numeric lower and upper corners, rows per cell); ``cell_of[row]``
    is set to its cell."""
    local, inv = np.unique(sig[rows], return_inverse=True)
    inv = inv.reshape(-1)
    by = rows[np.lexsort((rows, inv))].astype(np.int64)
    counts = np.bincount(inv, minlength=len(local)).astype(np.int64)
    bounds = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    parts = []
    for g in range(len(local)):
        members = by[bounds[g] : bounds[g + 1]]
        parts += _cells(members, x) if len(members) > CELL else [members]
    sizes = np.array([len(p) for p in parts], dtype=np.int64)
    by = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    cell_of[by] = np.repeat(np.arange(len(parts)), sizes)
    firsts = by[start[:-1]]
    sc = np.ascontiguousarray(codes[firsts].T)
    if x.shape[1] and len(by):
        num = x[by]
        lo = np.ascontiguousarray(np.minimum.reduceat(num, start[:-1], axis=0))
        hi = np.ascontiguousarray(np.maximum.reduceat(num, start[:-1], axis=0))
    else:
        lo = hi = np.zeros((len(parts), x.shape[1]))
    return by, start, sc, lo, hi, sizes


def compiled():
    """The compiled rounds (``kernel``), imported when a grouping first runs, not with this
    module: an input the algorithm refuses (``inputs``) never loads numba or its cache."""
    from privfair.components.microaggregation import kernel

    return kernel


class _Sets:
    """What the compiled rounds read and update, for working sets ``setof`` (each row's set):
    the encoding, per set its cells (rows by cell, cell starts, nominal codes attribute by
    attribute, numeric boxes, remaining rows per cell), the running sums, the anchor and the
    groups made so far."""

    def __init__(self, enc: EncodedQIs, setof: np.ndarray, n_sets: int) -> None:
        self.x = np.ascontiguousarray(enc.scaled, dtype=np.float64)
        self.codes = np.ascontiguousarray(enc.codes, dtype=np.int32)  # one compiled signature
        n = self.x.shape[0]
        levels = np.array([len(a.levels) for a in enc.nominal], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(levels)[:-1]]).astype(np.int64)
        n_levels = int(levels.sum())
        self.setof = np.ascontiguousarray(setof, dtype=np.int64)
        sig = _signatures(self.codes)
        self.cell_of = np.zeros(n, np.int64)
        self.cells = [
            _set_cells(np.flatnonzero(self.setof == s), self.x, self.codes, sig, self.cell_of)
            for s in range(n_sets)
        ]
        self.alive = np.ones(n, dtype=bool)
        self.sizes = np.bincount(self.setof, minlength=2).astype(np.int64)
        q = self.x.shape[1]
        self.sums, self.comp, self.counts = np.zeros(q), np.zeros(q), np.zeros(n_levels)
        kernel = compiled()
        kernel.init_sums(
            self.x, self.codes, self.offsets, np.arange(n), self.sums, self.comp, self.counts
        )
        self.anchor = (np.zeros(q + n_levels), np.zeros(n, np.int64), np.zeros(n))
        self.state = np.zeros(6, np.int64)
        self.out = (np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64))

    def common(self) -> tuple:
        """The arguments every compiled call takes after the cells."""
        return (self.alive, self.sizes, self.sums, self.comp, self.counts, *self.anchor,
                self.state, *self.out)  # fmt: skip

    def grouping(self, n_rows: int) -> Grouping:
        g = int(self.state[compiled().N_GROUPS])
        rows, sizes, seeds = self.out
        sizes = sizes[:g]
        out = Grouping(n_rows=n_rows)
        out.members = np.split(rows[: int(sizes.sum())], np.cumsum(sizes)[:-1]) if g else []
        out.seeds = [int(s) for s in seeds[:g]]
        return out


def make_fairlets(enc: EncodedQIs, pa01: np.ndarray, m: int, n: int) -> Grouping:
    """MakeFairlets (Fair-MDAV Alg. 2): each group = seed + nearest same-PA records, exactly m
    unfavoured (pa=0) and n favoured (pa=1), the unfavoured first (the seed first among its
    own). Stops when fewer than m unfavoured or n favoured records remain; those are left over
    (dropped).

    >>> from privfair.components.microaggregation.encoding import EncodedQIs
    >>> enc = EncodedQIs(["x"], np.array([[0.0], [1.0], [2.0], [10.0]]), [],
    ...                  np.zeros((4, 0), np.int32), np.zeros(1), np.full(1, 10.0), [])
    >>> g = make_fairlets(enc, np.array([0, 1, 0, 1]), 1, 1)
    >>> [m.tolist() for m in g.members], g.seeds
    ([[2, 3], [0, 1]], [3, 0])
    """
    sets, kernel = _Sets(enc, np.asarray(pa01), 2), compiled()
    with progress.bar(len(pa01), "rows in fairlets") as rows_bar:
        done = False
        while not done:
            done = kernel.fairlet_steps(
                sets.x, sets.codes, sets.offsets, sets.setof, m, n, sets.cell_of,
                *sets.cells[0], *sets.cells[1], *sets.common(), _STEPS,
            )  # fmt: skip
            rows_bar.update(len(pa01) - int(sets.sizes.sum()))
    return sets.grouping(len(pa01))


def mdav(enc: EncodedQIs, k: int) -> Grouping:
    """Standard MDAV (Domingo-Ferrer & Torra 2005): every record is assigned; group sizes in
    [k, 2k-1]. While >= 3k remain: x_r = farthest from the centre, x_s = farthest from x_r; groups
    around both. Then one more group if >= 2k remain, and the rest form the last group.

    >>> from privfair.components.microaggregation.encoding import EncodedQIs
    >>> enc = EncodedQIs(["x"], np.arange(7.0)[:, None], [], np.zeros((7, 0), np.int32),
    ...                  np.zeros(1), np.full(1, 6.0), [])
    >>> [m.tolist() for m in mdav(enc, 2).members]
    [[0, 1], [6, 5], [2, 3, 4]]
    """
    n_rows = enc.codes.shape[0] if enc.codes.size else enc.numeric.shape[0]
    sets, kernel = _Sets(enc, np.zeros(n_rows, np.int64), 1), compiled()
    with progress.bar(n_rows, "rows grouped") as rows_bar:
        done = False
        while not done:
            done = kernel.mdav_steps(
                sets.x, sets.codes, sets.offsets, sets.setof, k, sets.cell_of, *sets.cells[0],
                *sets.common(), _STEPS,
            )  # fmt: skip
            rows_bar.update(n_rows - int(sets.sizes[0]))
    return sets.grouping(n_rows)


def warm() -> None:
    """Compile the rounds, or load them from numba's cache (``__pycache__`` beside
    ``kernel``): a few seconds per installation the first time, ~0.3 s per process after.
    ``make install`` runs it (``python -m privfair.components.microaggregation.grouping``), so that no
    first release pays for the compilation.

    >>> warm()
    """
    from privfair.components.microaggregation.encoding import NominalAttribute

    codes = np.array([[0], [1], [-1], [0], [1], [0]], dtype=np.int32)
    enc = EncodedQIs(
        ["x"], np.arange(6.0)[:, None], [NominalAttribute("c", ("a", "b"))], codes,
        np.zeros(1), np.full(1, 5.0), [],
    )  # fmt: skip
    make_fairlets(enc, np.array([0, 1, 0, 1, 0, 1]), 1, 1)
    mdav(enc, 2)


if __name__ == "__main__":
    warm()
