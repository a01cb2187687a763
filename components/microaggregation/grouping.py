"""Greedy fixed-size grouping: standard MDAV and Fair-MDAV's MakeFairlets.

Both repeat: centre c = mean of the remaining records; seed = the record farthest from c; group =
seed + its nearest remaining records. A direct implementation costs O(N^2 p / k): N/k rounds,
each a few distance passes over the remaining records. This one keeps the same decisions and
avoids most of the passes:

- distances work on the mixed numeric/nominal form (``components.microaggregation.encoding``):
  one gather per block of nominal attributes instead of a dot product over every one-hot
  column;
- the mean of the remaining records is kept as running sums (nominal level counts are exact
  integers; numeric sums are accumulated in extended precision), not recomputed from scratch;
- the farthest record from the centre is searched among the rows an anchor's triangle bound
  leaves (``_WorkingSet.farthest_from``);
- nearest records of a row, and MDAV's farthest record from x_r, are searched by *signature*
  (the row's nominal values): a point query's nominal part is a small integer shared by a
  signature's rows, so it bounds the distances of whole signatures, with their numeric boxes;
  exact distances are computed for the rows of the signatures the bounds cannot exclude only
  (``_WorkingSet.seek``, ``_WorkingSet.farthest_from_row``). Where rows share few signatures,
  a full pass;
- removed records are marked dead (NaN squared norm, so every distance to them is NaN and no
  search can pick them) and the working arrays are compacted, in row order, once a sixteenth
  of them is dead;
- a full distance pass over many rows runs in chunks, on two threads when that is faster
  (NumPy and BLAS release the GIL); BLAS itself is kept to one thread, its own threading only
  adds overhead on a (rows x 5) matrix-vector product.

Ties are broken by the smallest original row index, both for the farthest record and among the
nearest ones (distance first, then row index), so the result is deterministic. Squared distances
within ``TIE_TOL`` of each other count as ties: the expanded-form arithmetic above rounds two
equal distances of distinct records differently (~1e-14), which must not decide a tie.

The result is the one of the engine this replaced, bit for bit: every distance that takes part
in a decision is the same sequence of floating-point operations, whatever the chunking, the
thread split, the compaction state or the search (the numeric part is one BLAS ``gemv`` row
product, whose result for a row does not depend on the other rows of the product as long as it
has two or more -- a single row goes through ``dot``, and is computed beside itself where the
old engine had a full pass; then the squared norm, the nominal lookups in block order and the
constant are added one by one); every pruning bound keeps all rows that could take part in a
decision; and the anchor of the centre search lives exactly as long as it used to.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from components.core import progress
from components.microaggregation.encoding import EncodedQIs

TIE_TOL = 1e-11  # squared scaled distances closer than this are equal (float noise is ~1e-14)

_CHUNK = 16_384  # rows per step of a distance pass: its temporaries stay in the L2 cache
_PAR_ROWS = 6144  # a pass over a set of fewer rows is one step (a hand-off costs ~20 us)
_SIG_ROWS = 4096  # nearest queries in sets of fewer rows use full passes (see ``seek``)
_FAR_ROWS = 4096  # farthest-from-a-row queries too (see ``farthest_from_row``)
_BLAS_ROWS = 2048  # from this many rows on, BLAS is held to one thread during the grouping


def first_max(d: np.ndarray) -> int:
    """Position of the first entry within ``TIE_TOL`` of the maximum (lowest row on a tie);
    NaN entries (dead rows) are ignored."""
    return int(np.flatnonzero(d >= np.fmax.reduce(d) - TIE_TOL)[0])


@dataclass
class Grouping:
    """Groups in creation order. ``members[g]`` lists row positions in the order the group
    took them (their ``rank`` in the lineage; the release itself is published sorted by its
    values, ``components.core.order``); ``seeds[g]`` is the row the group was built around."""

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


class _Space:
    """Scaled numeric block + nominal codes shared by every working set.

    Nominal attributes are packed into *blocks* whose joint code spaces have at most
    ``_BLOCK_LIMIT`` slots; a per-query lookup table over each block (the outer sum of its
    attributes' tables) turns the nominal part of a distance into one gather per block.
    """

    _BLOCK_LIMIT = 2048
    _CACHE_BYTES = 64 << 20  # point lookup tables kept for reuse, at most

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
        n = self.num.shape[0]
        self.block_codes = np.column_stack(cols) if cols else np.zeros((n, 0), dtype=np.int64)
        # Row-indexed arrays every working set gathers from (a row's values never change).
        self.num_m2 = -2.0 * self.num
        self.num_ld = self.num.astype(np.longdouble)  # running sums are kept in extended precision
        self.sq = np.einsum("ij,ij->i", self.num, self.num)
        self.block_codes_t = np.ascontiguousarray(self.block_codes.T.astype(np.intp))
        # Level counts of all nominal attributes side by side, plus one last bin where missing
        # values are counted (and ignored).
        offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.n_levels = int(offsets[-1])
        self.flat_codes = np.where(self.codes >= 0, self.codes + offsets[:-1], self.n_levels)
        self.level_spans = [
            (int(a), int(b)) for a, b in zip(offsets[:-1], offsets[1:], strict=True)
        ]
        # Per-attribute centre tables side by side: slot 0 (missing) of attribute j sits at
        # offsets[j] + j, its levels right after.
        self.slot_zero = (offsets[:-1] + np.arange(len(self.sizes))).astype(np.intp)
        self.slot_levels = (
            np.concatenate(
                [
                    z + 1 + np.arange(size)
                    for z, size in zip(self.slot_zero, self.sizes, strict=True)
                ]
            ).astype(np.intp)
            if len(self.sizes)
            else np.zeros(0, np.intp)
        )
        self._signatures: tuple[np.ndarray, np.ndarray] | None = None
        # Each row's slot in every attribute's table (0: missing), in ``flat`` indexing.
        self.slots = (self.slot_zero + (self.codes + 1)).astype(np.intp)
        self._point_cache: list[dict[int, np.ndarray]] = [{} for _ in self.blocks]
        self._cached_bytes = 0

    def signatures(self) -> tuple[np.ndarray, np.ndarray]:
        """(signature id of every row, block codes of every signature (blocks x signatures)): a
        row's signature is its nominal values, so its nominal distance to any query is its
        signature's."""
        if self._signatures is None:
            codes = self.block_codes
            spans = codes.max(axis=0) + 1 if len(codes) else np.ones(codes.shape[1], np.int64)
            if float(np.prod(spans.astype(float))) < 2.0**62:
                key = np.zeros(len(codes), dtype=np.int64)
                for j, span in enumerate(spans):
                    key = key * int(span) + codes[:, j]
                _, first, sig = np.unique(key, return_index=True, return_inverse=True)
            else:
                _, first, sig = np.unique(codes, axis=0, return_index=True, return_inverse=True)
            self._signatures = (
                sig.reshape(-1).astype(np.intp),
                np.ascontiguousarray(self.block_codes_t[:, first]),
            )
        return self._signatures

    def level_counts(self, rows: np.ndarray) -> np.ndarray:
        """Counts of every level of every nominal attribute among ``rows`` (concatenated; the
        last entry counts missing values)."""
        return np.bincount(self.flat_codes[rows].ravel(), minlength=self.n_levels + 1)

    def _block_tables(self, per_attribute: list[np.ndarray]) -> list[np.ndarray]:
        """Joint lookup tables: slot (c_1+1, ..., c_b+1) -> sum of the attributes' entries."""
        out = []
        for block in self.blocks:
            t = per_attribute[block[0]]
            for j in block[1:]:
                t = (t[:, None] + per_attribute[j][None, :]).ravel()
            out.append(t)
        return out

    def _point_tables(self, row: int) -> list[np.ndarray]:
        per = []
        for j, size in enumerate(self.sizes):
            s = self.codes[row, j]
            s_present = 1.0 if s >= 0 else 0.0
            t = np.full(size + 1, 1.0 + s_present)
            t[0] = s_present  # x missing
            t[s + 1] = 0.0  # same level (or both missing)
            per.append(t)
        return self._block_tables(per)

    def point_tables(self, row: int) -> list[np.ndarray]:
        """Per-slot squared distance to ``row`` on the nominal part: [x != s]([x present]+[s present]).
        A block's table depends only on the row's slot in that block, so tables are kept for
        reuse (up to ``_CACHE_BYTES``)."""
        slots = self.block_codes[row]
        got = [cache.get(int(s)) for cache, s in zip(self._point_cache, slots, strict=True)]
        if all(t is not None for t in got):
            return got  # type: ignore[return-value]
        tables = self._point_tables(row)
        for cache, s, t in zip(self._point_cache, slots, tables, strict=True):
            if int(s) not in cache and self._cached_bytes + t.nbytes <= self._CACHE_BYTES:
                cache[int(s)] = t
                self._cached_bytes += t.nbytes
        return tables

    def tables_of(self, flat: np.ndarray) -> list[np.ndarray]:
        """Block lookup tables from the per-attribute tables side by side."""
        return self._block_tables(
            [flat[z : z + size + 1] for z, size in zip(self.slot_zero, self.sizes, strict=True)]
        )

    def nominal_rows(self, flat: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
        """Per block, the entries of the block tables of ``flat`` (``tables_of``) at ``rows``,
        summed from the attributes' entries in the order the tables are built."""
        vals = flat.take(self.slots.take(rows, axis=0))
        out = []
        for block in self.blocks:
            b = vals[:, block[0]]
            for j in block[1:]:
                b = b + vals[:, j]
            out.append(b)
        return out

    def nominal_row(self, flat: list[float], row: int) -> list[float]:
        """``nominal_rows`` of one row on Python floats."""
        slots = self.slots[row].tolist()
        out = []
        for block in self.blocks:
            b = flat[slots[block[0]]]
            for j in block[1:]:
                b += flat[slots[j]]
            out.append(b)
        return out

    def dist2_rows(
        self, v: np.ndarray, tables: list[np.ndarray], c: float, rows: np.ndarray
    ) -> np.ndarray:
        """Squared distances of ``rows`` (gathered) to the query; ``c`` = ||v||^2 + constant."""
        return _gathered(self.num_m2, self.sq, self.block_codes_t, v, tables, c, rows)


def _gathered(
    num_m2: np.ndarray,
    sq: np.ndarray,
    codes_t: np.ndarray,
    v: np.ndarray,
    tables: list[np.ndarray],
    c: float,
    idx: np.ndarray,
) -> np.ndarray:
    """Squared distances of the rows ``idx`` of (num_m2, sq, codes_t) to the query (v, tables,
    c = ||v||^2 + constant): the operations of a distance pass, on gathered rows."""
    out = num_m2.take(idx, axis=0) @ v
    out += sq.take(idx)
    codes = codes_t.take(idx, axis=1)  # every block's codes in one gather
    for col, table in zip(codes, tables, strict=True):
        out += table.take(col)
    out += c
    return out


class _Scan:
    """A distance pass over a working set, and what it leaves: ``d``, the squared distances of
    the working positions (with ``nominal``: of the positions ``pools[0]`` only, see
    ``_WorkingSet.seek``), the chunk ``bounds``, per chunk the candidate positions for a
    nearest query (``pools``) and the maximum (``peaks``)."""

    __slots__ = ("ws", "query", "nominal", "d", "bounds", "pools", "peaks", "tasks", "part")

    def __init__(self, ws: _WorkingSet, query: tuple, nominal: bool = False) -> None:
        self.ws = ws
        self.query = query
        self.nominal = nominal
        self.bounds = [] if nominal else ws.chunks()
        self.d = np.empty(0 if nominal else len(ws.rows))
        self.pools: list = [None] * len(self.bounds)
        self.peaks: list = [np.nan] * len(self.bounds)
        self.tasks: list = []

    def pool(self) -> np.ndarray:
        return self.pools[0] if len(self.pools) == 1 else np.concatenate(self.pools)

    def nearest(self, k: int, exclude: int = -1) -> np.ndarray:
        """``nearest(d, k)`` over the working positions, position ``exclude`` left out."""
        if k <= 0:
            return np.zeros(0, dtype=np.int64)
        pool = self.pool()
        if self.nominal:
            values = self.d  # the pool's exact distances
            if exclude >= 0:
                values[pool == exclude] = np.nan
        else:
            if exclude >= 0:
                self.d[exclude] = np.nan
            values = self.d[pool]
        return nearest_in(pool, values, k)

    def first_max(self, excluded_max: float) -> int:
        """``first_max(d)`` after some entries were set to NaN (the largest of their values:
        ``excluded_max``), from the chunk maxima taken before: only chunks that reach the
        maximum are scanned, unless an excluded entry may have been the maximum."""
        top = max((p for p in self.peaks if not math.isnan(p)), default=math.nan)
        if math.isnan(top) or excluded_max >= top - TIE_TOL:
            return first_max(self.d)
        thr = top - TIE_TOL
        for (a, b), peak in zip(self.bounds, self.peaks, strict=True):
            if peak >= thr:
                hit = np.flatnonzero(self.d[a:b] >= thr)
                if len(hit):
                    return a + int(hit[0])
        raise AssertionError("the maximum is in no chunk")  # pragma: no cover


def _candidates(d: np.ndarray, k: int) -> np.ndarray:
    """Positions of ``d`` that may be among its k smallest or tie with the k-th (NaN and +inf
    entries excluded): those within ``TIE_TOL`` of an upper bound on the k-th smallest, the
    k-th smallest of a sample (its entries are entries of ``d``)."""
    sample = d[:: max(1, len(d) // (64 * k))]
    if len(sample) > k:
        bound = np.partition(sample, k - 1)[k - 1]
        if bound < np.inf:  # False for NaN: too few alive rows in the sample
            return np.flatnonzero(d <= bound + TIE_TOL)
    return np.flatnonzero(d < np.inf)


class _Threads:
    """Runs the chunks of a distance pass on the calling thread, or on it and one helper.

    Chunks are taken from a shared iterator, so a helper that starts late simply takes fewer;
    a helper that has not started when the caller is done is cancelled. A helper that is
    preempted in the middle of a chunk (a machine busy with other work) makes the caller wait,
    so both ways are timed (wall clock per row, moving average; the other way is timed again
    every ``_PROBE`` runs) and the faster one is used. The results do not depend on it.
    """

    _PROBE = 16

    def __init__(self, workers: int) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1) if workers > 1 else None
        self.parallel = self.pool is not None
        self.cost: list[float | None] = [None, None]  # seconds per row: serial, parallel
        self.runs = 0

    def run(self, tasks: list, rows: int = 0) -> None:
        if self.pool is None or len(tasks) < 2:
            for task in tasks:
                task()
            return
        serial, parallel = self.cost
        if serial is None or parallel is None:
            mode = 0 if serial is None else 1
        else:
            mode = int(parallel < serial)
            self.runs += 1
            if self.runs % self._PROBE == 0:
                mode = 1 - mode
        start = time.perf_counter()
        if mode:
            it = iter(tasks)  # next() on a list iterator is atomic under the GIL

            def drain() -> None:
                for task in it:
                    task()

            helper = self.pool.submit(drain)
            drain()
            if not helper.cancel():
                helper.result()
        else:
            for task in tasks:
                task()
        took = (time.perf_counter() - start) / max(rows, 1)
        old = self.cost[mode]
        self.cost[mode] = took if old is None else 0.8 * old + 0.2 * took

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def _engine(n_rows: int):
    """Thread helper for the distance passes; BLAS held to one thread for large inputs."""
    threads = _Threads(2 if n_rows >= 2 * _PAR_ROWS and _cores() > 1 else 1)
    limits = contextlib.nullcontext()
    if n_rows >= _BLAS_ROWS:
        try:
            from threadpoolctl import threadpool_limits

            limits = threadpool_limits(limits=1, user_api="blas")
        except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
            pass
    try:
        with limits:
            yield threads
    finally:
        threads.close()


_SERIAL = _Threads(1)


class _WorkingSet:
    """A set of rows still to be grouped; the working arrays keep the rows in ascending order,
    so "lowest position" is "lowest row" (ties). Dead rows stay in the arrays, with a NaN
    squared norm, until the next compaction.

    The farthest-from-centre query is pruned with a cached *anchor*: distances D_a(x) to an
    earlier centre c_a. For the current centre c and delta = ||c - c_a||, the triangle inequality
    gives |d(x, c) - D_a(x)| <= delta, so only rows with D_a(x) >= L - 2 delta (L = the exact
    distance of the row with the largest D_a) can be farthest. Those are a prefix of the rows
    sorted by D_a; the anchor is refreshed when that prefix grows large. Only the head of that
    order that can ever be used (``limit`` + 1 entries, ties included) is sorted.

    The anchor's life cycle (when it is dropped, how long a prefix may get) follows the
    set's *nominal* length: the rows of the set when it was last halved, dead ones included,
    as in the original engine that compacted at half; the working arrays themselves are
    compacted more often, which changes no decision.
    """

    _SLACK = 1e-6
    _COMPACT_SHARE = 16  # compact the working arrays once 1/16 of them is dead

    def __init__(self, space: _Space, rows: np.ndarray, threads: _Threads = _SERIAL) -> None:
        self.space = space
        self.threads = threads
        self.rows = np.asarray(rows, dtype=np.int64)
        self.alive_row = np.zeros(len(space.sq), dtype=bool)
        self.alive_row[self.rows] = True
        self.num_sum = space.num_ld[self.rows].sum(axis=0)
        self.counts = space.level_counts(self.rows)
        self.n_alive = len(self.rows)
        self.nominal_len = len(self.rows)
        self._load()
        self.anchor: tuple | None = None
        self.anchor_top = 0
        self.by_sig: np.ndarray | None = None  # see ``_index``
        if len(space.blocks) and len(self.rows) >= _SIG_ROWS:
            self._index()

    def _load(self) -> None:
        rows = self.rows
        self.num_m2 = self.space.num_m2[rows]
        self.sq = self.space.sq[rows]
        self.codes_t = np.ascontiguousarray(self.space.block_codes_t[:, rows])
        self.sq_max = float(self.sq.max()) if len(rows) else 0.0
        self.n_dead = 0

    @property
    def alive(self) -> np.ndarray:
        """Alive mask over the working positions."""
        return self.alive_row[self.rows]

    def alive_positions(self) -> np.ndarray:
        return np.flatnonzero(self.alive)

    def position(self, row: int) -> int:
        return int(np.searchsorted(self.rows, row))

    # --- distance passes ------------------------------------------------------------------

    def chunks(self) -> list[tuple[int, int]]:
        """[start, stop) steps of a pass over the working arrays, at most ``_CHUNK`` rows each;
        with two threads, an even number of steps once there are ``_PAR_ROWS`` rows. Never a
        step of one row unless there is one row (a one-row product goes through ``dot``, whose
        rounding differs from ``gemv``)."""
        n = len(self.rows)
        parts = -(-n // _CHUNK)
        if self.threads.parallel and n >= _PAR_ROWS:
            parts += parts % 2
        if parts <= 1:
            return [(0, n)]
        parts = min(parts, n // 2)
        bounds = [n * i // parts for i in range(parts + 1)]
        return list(zip(bounds[:-1], bounds[1:], strict=True))

    def exact(self, query: tuple, idx: np.ndarray) -> np.ndarray:
        """Squared distances of the working positions ``idx`` (dead: NaN), as a full pass
        computes them: a single row is computed beside itself (``gemv``, not ``dot``)."""
        v, tables, c = query
        if len(idx) == 1:
            return _gathered(self.num_m2, self.sq, self.codes_t, v, tables, c, idx[[0, 0]])[:1]
        return _gathered(self.num_m2, self.sq, self.codes_t, v, tables, c, idx)

    def scan(self, query: tuple, k: int = 0, peaks: bool = False) -> _Scan:
        """A distance pass to ``query`` = (v, tables, c = ||v||^2 + constant), as tasks for
        ``_Threads.run`` (``scan.tasks``): every working position's squared distance (dead:
        NaN), with ``k`` > 0 the positions that may be among the k smallest (``_candidates``,
        per chunk), with ``peaks`` the maximum of every chunk."""
        out = _Scan(self, query)
        v, tables, c = query
        pairs = list(zip(self.codes_t, tables, strict=True))
        num_m2, sq, d = self.num_m2, self.sq, out.d

        def task(i: int) -> None:
            a, b = out.bounds[i]
            o = d[a:b]
            np.matmul(num_m2[a:b], v, out=o)
            np.add(o, sq[a:b], out=o)
            if pairs:
                tmp = np.empty(b - a)
                for col, table in pairs:
                    np.take(table, col[a:b], out=tmp, mode="clip")
                    np.add(o, tmp, out=o)
            np.add(o, c, out=o)
            if k:
                out.pools[i] = _candidates(o, k) + a
            if peaks:
                out.peaks[i] = float(np.fmax.reduce(o))

        out.tasks = [partial(task, i) for i in range(len(out.bounds))]
        return out

    # --- nearest queries by signature -----------------------------------------------------

    def _index(self) -> None:
        """The rows grouped by signature (``_Space.signatures``): ``lsig`` (each working
        position's signature, numbered within the set), ``by_sig`` (the positions sorted by
        signature, then position), ``sig_start`` (each signature's first entry in ``by_sig``),
        ``sig_alive`` (alive rows per signature) and ``sig_codes_t`` (block codes)."""
        sig, codes_t = self.space.signatures()
        g = sig[self.rows]
        present = np.bincount(g, minlength=codes_t.shape[1]) > 0
        self.lsig = (np.cumsum(present) - 1)[g]
        self.sig_codes_t = np.ascontiguousarray(codes_t[:, present])
        self.by_sig = np.argsort(self.lsig, kind="stable")
        sizes = np.bincount(self.lsig, minlength=self.sig_codes_t.shape[1])
        self.sig_start = np.concatenate([[0], np.cumsum(sizes)])
        self.sig_alive = sizes.astype(np.float64)  # bincount weights
        self._boxes()

    _PART_BYTES = 64 << 20  # per set: per-signature nominal parts kept for reuse, at most

    def _part(self, row: int, tables: list[np.ndarray]) -> np.ndarray:
        """Nominal part of the distance from every signature to input row ``row`` (its point
        tables ``tables``): small integers, as the smallest unsigned type that holds them. A
        block's share depends only on the row's slot in the block, so it is kept for reuse
        until the signatures are renumbered."""
        slots = self.space.block_codes[row].tolist()
        part = None
        for cache, slot, table, codes in zip(
            self._part_cache, slots, tables, self.sig_codes_t, strict=True
        ):
            share = cache.get(slot)
            if share is None:
                share = table.take(codes).astype(self._part_dtype)
                if self._part_bytes + share.nbytes <= self._PART_BYTES:
                    share.flags.writeable = False
                    cache[slot] = share
                    self._part_bytes += share.nbytes
            part = share if part is None else part + share
        return part

    def _boxes(self) -> None:
        """Per signature and numeric attribute, the smallest and largest scaled value of its
        rows (``box_lo``, ``box_hi``: attributes x signatures); rows that die later stay in
        the box, which remains a bound. Also empties the ``_part`` cache."""
        self._part_cache: list[dict[int, np.ndarray]] = [{} for _ in self.space.blocks]
        self._part_bytes = 0
        self._level_guess = 0
        # a point table entry is at most 2 per attribute
        self._part_dtype = np.uint8 if 2 * len(self.space.sizes) < 256 else np.uint16
        num = self.space.num.take(self.rows[self.by_sig], axis=0)
        starts = self.sig_start[:-1]
        if len(starts) and num.shape[1]:
            lo = np.minimum.reduceat(num, starts, axis=0).T
            hi = np.maximum.reduceat(num, starts, axis=0).T
            # float32, rounded outwards: the boxes only bound distances, at half the cost
            self.box_lo = np.ascontiguousarray(np.nextafter(lo.astype(np.float32), -np.inf))
            self.box_hi = np.ascontiguousarray(np.nextafter(hi.astype(np.float32), np.inf))
            self.box_abs = np.maximum(np.abs(lo).max(axis=1), np.abs(hi).max(axis=1))
        else:
            self.box_lo = self.box_hi = np.zeros((num.shape[1], len(starts)), np.float32)
            self.box_abs = np.zeros(num.shape[1])

    def _reindex(self, keep: np.ndarray) -> None:
        """``_index`` after a compaction that kept the working positions ``keep`` (a mask): the
        position renumbering keeps the order, so no sorting."""
        newpos = np.cumsum(keep) - 1
        self.by_sig = newpos[self.by_sig[keep[self.by_sig]]]
        present = self.sig_alive > 0
        self.lsig = (np.cumsum(present) - 1)[self.lsig[keep]]
        self.sig_codes_t = np.ascontiguousarray(self.sig_codes_t[:, present])
        self.sig_alive = self.sig_alive[present]
        self.sig_start = np.concatenate([[0], np.cumsum(self.sig_alive.astype(np.int64))])
        self._boxes()

    def _members(self, sigs: np.ndarray) -> np.ndarray:
        """Working positions (dead ones too) of the signatures ``sigs`` (read only: with one
        signature, a view)."""
        if len(sigs) == 1:  # the common case of a nearest query: one slice
            s = int(sigs[0])
            return self.by_sig[self.sig_start[s] : self.sig_start[s + 1]]
        starts = self.sig_start[sigs]
        lens = self.sig_start[sigs + 1] - starts
        ends = np.cumsum(lens)
        return self.by_sig[np.repeat(starts - (ends - lens), lens) + np.arange(int(ends[-1]))]

    def query_of(self, row: int) -> tuple:
        """The point query of input row ``row``: (v, its nominal lookup tables, ||v||^2)."""
        v = self.space.num[row]
        return (v, self.space.point_tables(row), float(v @ v) + 0.0)

    def seek(self, row: int, k: int, peaks: bool = False, query: tuple | None = None) -> _Scan:
        """The k nearest of input row ``row`` (itself included if it is here), as a ``_Scan``;
        ``query``: ``query_of(row)``, when the caller already built it.

        A point query's nominal part is an integer, the same for every row of a signature,
        and a lower bound of the squared distance. So, where rows share signatures, the
        nominal parts are computed per signature; the signatures whose nominal part is at most
        the smallest level t that holds k alive rows give exact distances whose k-th smallest
        bounds the k-th nearest; then every row of a signature within reach of that bound gets
        its exact distance (the operations of a full pass) and ``_Scan.nearest`` selects among
        those. Elsewhere: a full pass (``scan``).
        """
        query = self.query_of(row) if query is None else query
        tables = query[1]
        if (
            self.by_sig is None
            or self.sig_codes_t.shape[1] * 2 > len(self.rows)
            or (peaks and len(self.rows) < _FAR_ROWS)
        ):
            return self.scan(query, k, peaks)
        part = level = self._part(row, tables)  # small integers, exactly
        live = self.sig_alive > 0
        # the smallest level t holding k alive rows, starting from the last query's t
        guess = self._level_guess
        while True:
            sel = np.flatnonzero(live & (level <= guess))
            held = self.sig_alive[sel]
            if held.sum() >= k or guess > 2 * len(self.space.sizes):  # all levels: every row
                break
            guess = 2 * guess + 2
        levels = level[sel]
        t = int(np.searchsorted(np.cumsum(np.bincount(levels, weights=held)), k - 0.5))
        self._level_guess = t
        pool = self._members(sel[levels <= t])
        values = self.exact(query, pool)
        bound = float(np.partition(values, k - 1)[k - 1])
        # |error| of a computed distance: a few ulps of its largest term (1e-12 is ~4500 ulps)
        reach = bound + TIE_TOL + 1e-12 * (1.0 + self.sq_max + query[2] + abs(bound))
        if reach >= t + 1:  # levels are integers
            more = np.flatnonzero(live & (level > t) & (level <= int(reach)))
            if len(more):
                extra = self._members(more)
                pool = np.concatenate([pool, extra])
                values = np.concatenate([values, self.exact(query, extra)])
        out = _Scan(self, query, nominal=True)
        out.pools = [pool]
        out.d = values
        out.part = part
        return out

    def farthest_from_row(self, scan: _Scan) -> int:
        """``first_max`` of the distances to the query of ``scan`` (a ``seek`` by signature) over
        the alive working positions, now: the position of the lowest row within ``TIE_TOL`` of
        the largest distance.

        A signature's distances are at most its nominal part plus the largest squared
        distance from the query to its numeric box. The signature with the largest such bound
        gives a lower bound m on the maximum (an alive row's distance); exact distances are
        computed for the rows of the signatures whose bound reaches m - ``TIE_TOL`` only."""
        v, _, c = scan.query
        v32 = v.astype(np.float32)[:, None]
        reach = np.subtract(v32, self.box_lo)
        np.maximum(reach, self.box_hi - v32, out=reach)
        reach *= reach
        # summed in float32 (a float64 sum of float32 terms goes through a slow buffered
        # cast): at most ~4 ulps of the sum more, inside the margin below
        upper = np.add.reduce(reach, axis=0).astype(np.float64)
        upper += scan.part
        upper[self.sig_alive <= 0] = -np.inf
        best = self._members(np.argmax(upper).reshape(1))
        m = float(np.fmax.reduce(self.exact(scan.query, best)))  # a row's distance: <= max
        # float32 arithmetic on the boxes: a squared term r^2 (r <= |v| + |box|) may come out
        # low by about 2^-21 r^2 and their float32 sum by 2^-22 of it, together under 1e-6 of
        # ``spread`` (float64 distances: a few ulps of their largest term)
        spread = float(((np.abs(v) + self.box_abs) ** 2).sum())
        margin = TIE_TOL + 1e-12 * (1.0 + self.sq_max + c + abs(m)) + 1e-6 * spread
        pool = self._members(np.flatnonzero(upper >= m - margin))
        d = self.exact(scan.query, pool)
        hits = np.flatnonzero(d >= np.fmax.reduce(d) - TIE_TOL)
        return int(pool[hits].min())  # the lowest position: ``first_max`` in position order

    def _dist2(
        self, v: np.ndarray, tables: list[np.ndarray], const: float, idx: np.ndarray | None = None
    ) -> np.ndarray:
        """||x_num - v||^2 (expanded: ||x||^2 - 2 x.v + ||v||^2) + nominal lookups + const, for
        every working position (dead ones: NaN) or the positions ``idx``."""
        c = float(v @ v) + const
        if idx is not None:
            return self.space.dist2_rows(v, tables, c, self.rows[idx])
        out = self.scan((v, tables, c))
        self.threads.run(out.tasks, len(out.d))
        return out.d

    def dist2_to_row(self, row: int, tables: list[np.ndarray] | None = None) -> np.ndarray:
        """Squared distance of every working position to input row ``row`` (dead: NaN).
        ``tables``: the row's nominal lookup tables, when the caller already built them."""
        tables = self.space.point_tables(row) if tables is None else tables
        return self._dist2(self.space.num[row], tables, 0.0)

    # --- farthest from the centre -----------------------------------------------------------

    def farthest_from(self, centre: _Centre) -> tuple[int, float]:
        """(row, squared distance) of the alive row farthest from ``centre``; ties -> lowest row."""
        c = centre.c
        limit = max(64, self.nominal_len // 20)
        if self.anchor is not None:
            a_vec, order, neg_sorted, complete, n_dead0 = self.anchor
            delta = centre.distance_to(a_vec)
            top = self.anchor_top
            alive = self.alive_row
            while top < len(order) and not alive[order[top]]:
                top += 1  # dead rows never revive, so the pointer only moves forward
            self.anchor_top = top
            if top < len(order):
                row = int(order[top])
                d_top = float(self.space.num_m2[row] @ centre.num) + float(self.space.sq[row])
                for b in self.space.nominal_row(centre.flat_list, row):
                    d_top += b
                d_top += c
                lower = math.sqrt(max(d_top, 0.0))
                bound = -(lower - 2.0 * delta - self._SLACK)
                cut = int(np.searchsorted(neg_sorted, bound, side="right"))
                # The original order also held the rows dead when the anchor was made, at
                # distance 0 (their -inf clipped), so they counted once the bound reached 0.
                if (cut < len(order) or complete) and cut + (n_dead0 if bound >= 0 else 0) <= limit:
                    return self._farthest_among(centre, order[:cut], neg_sorted[:cut], delta)
        d = self._dist2(centre.num, centre.tables, centre.const)
        neg = -np.sqrt(np.maximum(d, 0.0))  # dead rows: NaN, sorted last by partition/lexsort
        head = limit + 1
        if self.n_alive > head:
            sel = np.flatnonzero(neg <= np.partition(neg, head - 1)[head - 1])
        else:
            sel = np.flatnonzero(~np.isnan(neg))
        sel = sel[np.lexsort((sel, neg[sel]))]
        self.anchor = (
            centre.vec,
            self.rows[sel],
            neg[sel],
            len(sel) == self.n_alive,
            self.nominal_len - self.n_alive,
        )
        self.anchor_top = 0
        i = first_max(d)
        return int(self.rows[i]), float(d[i])

    _FIRST = 128

    def _farthest_among(
        self, centre: _Centre, cand: np.ndarray, neg: np.ndarray, delta: float
    ) -> tuple[int, float]:
        """``first_max`` over the alive rows of ``cand`` (rows in anchor order, ``neg`` their
        -D_a): the lowest row within ``TIE_TOL`` of the largest distance, and that distance.

        The first ``_FIRST`` alive candidates (the largest D_a) give a maximum M; a row with
        D_a(x) < sqrt(M - TIE_TOL) - delta - slack cannot come within ``TIE_TOL`` of the
        maximum (d(x, c) <= D_a(x) + delta), so only the candidates before it are computed."""
        keep = self.alive_row[cand]
        cand = cand[keep]
        if len(cand) <= self._FIRST:
            rows = np.sort(cand)  # one row: a ``dot``, as a single gathered row always was
            d = self._centre_dist(centre, rows)
            i = first_max(d)
            return int(rows[i]), float(d[i])
        d = self._centre_dist(centre, cand[: self._FIRST])
        reach = math.sqrt(max(float(d.max()) - TIE_TOL, 0.0)) - delta - self._SLACK
        cut = int(np.searchsorted(neg[keep], -reach, side="right"))
        if cut > self._FIRST:  # (a single further row is computed beside itself: ``gemv``)
            more = cand[self._FIRST : cut] if cut > self._FIRST + 1 else cand[[cut - 1, cut - 1]]
            d = np.concatenate([d, self._centre_dist(centre, more)[: cut - self._FIRST]])
        rows = cand[: len(d)]
        hits = np.flatnonzero(d >= d.max() - TIE_TOL)
        i = int(hits[np.argmin(rows[hits])])
        return int(rows[i]), float(d[i])

    def _centre_dist(self, centre: _Centre, rows: np.ndarray) -> np.ndarray:
        """Squared distances of input ``rows`` to the centre, as ``_Space.dist2_rows``."""
        d = self.space.num_m2.take(rows, axis=0) @ centre.num
        d += self.space.sq[rows]
        for b in self.space.nominal_rows(centre.flat, rows):
            d += b
        d += centre.c
        return d

    # --- bookkeeping --------------------------------------------------------------------------

    def remove(self, positions: np.ndarray) -> None:
        """Mark the working positions ``positions`` dead (in this order for the running sums)."""
        positions = np.asarray(positions, dtype=np.int64)
        rows = self.rows[positions]
        self.alive_row[rows] = False
        self.sq[positions] = np.nan
        self.n_dead += len(positions)
        self.n_alive -= len(positions)
        self.num_sum -= self.space.num_ld[rows].sum(axis=0)
        self.counts -= self.space.level_counts(rows)
        if self.by_sig is not None:
            np.subtract.at(self.sig_alive, self.lsig[positions], 1)

    def maybe_compact(self) -> None:
        """Between groups: drop the anchor when the nominal set halves, and compact the working
        arrays once a sixteenth of them is dead. Invalidates positions."""
        if self.n_alive < self.nominal_len // 2 and self.nominal_len > 256:
            self.nominal_len = self.n_alive
            self.anchor = None
        if self.n_dead * self._COMPACT_SHARE > len(self.rows) and self.n_alive >= 2:
            keep = self.alive
            self.rows = self.rows[keep]
            self._load()
            if self.by_sig is not None:
                self._reindex(keep)


class _Centre:
    """The mean of the alive rows of some working sets: numeric part ``num``, level shares,
    per-attribute lookup tables side by side (``flat``: attribute j's missing slot at
    ``_Space.slot_zero[j]``, its levels after it), their constant, and c = ||num||^2 +
    constant. Unpacks as (num, block tables, constant, shares)."""

    def __init__(self, sets: list[_WorkingSet], space: _Space) -> None:
        n = sum(s.n_alive for s in sets)
        self.space = space
        self.num = (sum(s.num_sum for s in sets) / n).astype(np.float64)
        counts = sets[0].counts if len(sets) == 1 else sum(s.counts for s in sets)
        self.shares = counts[: space.n_levels] / n
        const = 0.0
        for a, b in space.level_spans:
            c = self.shares[a:b]
            const += float(c @ c)
        self.const = const
        self.c = float(self.num @ self.num) + const
        flat = np.empty(space.n_levels + len(space.sizes))
        flat[space.slot_zero] = 0.0
        flat[space.slot_levels] = 1.0 - 2.0 * self.shares
        self.flat = flat
        self.flat_list = flat.tolist()
        self.vec = np.concatenate([self.num, self.shares])  # for anchor distances
        self._tables: list[np.ndarray] | None = None

    @property
    def tables(self) -> list[np.ndarray]:
        if self._tables is None:
            self._tables = self.space.tables_of(self.flat)
        return self._tables

    def distance_to(self, vec: np.ndarray) -> float:
        """Euclidean distance to an earlier centre's ``vec``: numeric and nominal parts summed
        separately, then added."""
        q = len(self.num)
        d = self.vec - vec
        d *= d
        return math.sqrt(float(d[:q].sum()) + float(d[q:].sum()))

    def __iter__(self):
        return iter((self.num, self.tables, self.const, self.shares))


def _centre(sets: list[_WorkingSet], space: _Space) -> _Centre:
    """Mean of the alive rows of ``sets`` (see ``_Centre``)."""
    return _Centre(sets, space)


def _farthest(sets: list[_WorkingSet], space: _Space) -> tuple[int, int]:
    """(set index, row) of the alive record farthest from the centre; ties -> lowest row."""
    centre = _centre(sets, space)
    found = []
    for si, s in enumerate(sets):
        if s.n_alive == 0:
            continue
        row, d = s.farthest_from(centre)
        found.append((d, row, si))
    assert found
    d_max = max(f[0] for f in found)
    best = min((f for f in found if f[0] >= d_max - TIE_TOL), key=lambda f: f[1])
    return best[2], best[1]


def nearest(d: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k smallest entries of ``d``, ordered by (distance, position); distances
    within ``TIE_TOL`` of each other (chained in sorted order) are ties, ordered by position.
    NaN and +inf entries (dead or excluded rows) are never chosen."""
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    pool = _candidates(d, k)
    return nearest_in(pool, d[pool], k)


def nearest_in(pool: np.ndarray, dp: np.ndarray, k: int) -> np.ndarray:
    """``nearest(d, k)`` given distinct positions ``pool`` with their entries ``dp``, among
    them every entry within ``TIE_TOL`` of the k-th smallest (more do no harm; NaN entries are
    dropped)."""
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    kth = np.partition(dp, k - 1)[k - 1] if len(dp) > k else np.inf
    # NaN and +inf sort after every finite entry, so a finite k-th smallest is the one among
    # the finite entries, and the comparison with it (every entry that may tie) drops NaN and
    # +inf too; with at most k finite entries, all of them
    keep = dp <= kth + TIE_TOL if kth < np.inf else dp < np.inf
    if not keep.all():
        pool, dp = pool[keep], dp[keep]
    o = np.lexsort((pool, dp))  # (distance, position)
    idx = pool[o]
    dp = dp[o]
    near = dp[1:] - dp[:-1] <= TIE_TOL
    if not near.any():
        return idx[:k]
    tie_block = np.concatenate([[0], np.cumsum(~near)])
    return idx[np.lexsort((idx, tie_block))][:k]


def make_fairlets(enc: EncodedQIs, pa01: np.ndarray, m: int, n: int) -> Grouping:
    """MakeFairlets (Fair-MDAV Alg. 2): each group = seed + nearest same-PA records, exactly m
    unfavoured (pa=0) and n favoured (pa=1). Stops when fewer than m unfavoured or n favoured
    records remain; those are left over (dropped)."""
    space = _Space(enc)
    out = Grouping(n_rows=len(pa01))
    need = (m, n)
    with _engine(len(pa01)) as threads:
        sets = [
            _WorkingSet(space, np.flatnonzero(pa01 == 0), threads),
            _WorkingSet(space, np.flatnonzero(pa01 == 1), threads),
        ]
        rows_bar = progress.bar(len(pa01), "rows in fairlets")
        while sets[0].n_alive >= m and sets[1].n_alive >= n:
            rows_bar.update(len(pa01) - sets[0].n_alive - sets[1].n_alive)  # one call per group
            for s in sets:
                s.maybe_compact()
            si, seed = _farthest(sets, space)
            # both sets' passes at once (the seed counts in its own set), one query for both
            query = sets[si].query_of(seed)
            scans = [s.seek(seed, need[sj], query=query) for sj, s in enumerate(sets)]
            threads.run(
                scans[0].tasks + scans[1].tasks, sum(len(sc.d) * (not sc.nominal) for sc in scans)
            )
            parts = []
            for sj, (s, scan) in enumerate(zip(sets, scans, strict=True)):
                if sj == si:
                    pos = s.position(seed)
                    near = scan.nearest(need[sj] - 1, exclude=pos)
                    chosen = np.concatenate([[pos], near]).astype(np.int64)
                else:
                    chosen = scan.nearest(need[sj])
                parts.append(s.rows[chosen])
                s.remove(chosen)
            out.members.append(np.concatenate(parts))  # unfavoured first, then favoured
            out.seeds.append(seed)
        rows_bar.close()
    return out


def mdav(enc: EncodedQIs, k: int) -> Grouping:
    """Standard MDAV (Domingo-Ferrer & Torra 2005): every record is assigned; group sizes in
    [k, 2k-1]. While >= 3k remain: x_r = farthest from the centre, x_s = farthest from x_r; groups
    around both. Then one more group if >= 2k remain, and the rest form the last group."""
    space = _Space(enc)
    n_rows = enc.codes.shape[0] if enc.codes.size else enc.numeric.shape[0]
    out = Grouping(n_rows=n_rows)
    with _engine(n_rows) as threads:
        s = _WorkingSet(space, np.arange(n_rows), threads)

        def grow(row: int, scan: _Scan) -> np.ndarray:
            """Group of ``row`` and its k - 1 nearest, from ``scan`` (a pass to ``row``, run);
            returns their working positions."""
            pos = s.position(row)
            chosen = np.concatenate([[pos], scan.nearest(k - 1, exclude=pos)]).astype(np.int64)
            rows = s.rows[chosen]
            s.remove(chosen)
            out.members.append(rows)
            out.seeds.append(row)
            return chosen

        def seek(row: int, peaks: bool = False) -> _Scan:
            scan = s.seek(row, k, peaks)
            threads.run(scan.tasks, len(scan.d))
            return scan

        rows_bar = progress.bar(n_rows, "rows grouped")
        while s.n_alive >= 3 * k:
            rows_bar.update(n_rows - s.n_alive)  # one call per two groups (each a full pass)
            s.maybe_compact()
            _, xr = _farthest([s], space)
            # x_r's pass gives its group and x_s, the farthest record from x_r among those left
            scan = seek(xr, peaks=True)
            d = scan.d
            own = np.nan if scan.nominal else float(d[s.position(xr)])
            chosen = grow(xr, scan)
            if scan.nominal:
                xs = int(s.rows[s.farthest_from_row(scan)])
            else:
                excluded = max(own, float(np.fmax.reduce(d[chosen])))
                d[chosen] = np.nan
                xs = int(s.rows[scan.first_max(excluded)])  # first maximum = lowest row
            grow(xs, seek(xs))
        if s.n_alive >= 2 * k:
            _, row = _farthest([s], space)
            grow(row, seek(row))
        if s.n_alive > 0:
            rest = s.alive_positions()
            rows = s.rows[rest]
            s.remove(rest)
            out.members.append(rows)
            out.seeds.append(int(rows[0]))
        rows_bar.update(n_rows)
        rows_bar.close()
    return out
