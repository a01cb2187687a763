"""Greedy fixed-size grouping: standard MDAV and Fair-MDAV's MakeFairlets.

Both repeat: centre c = mean of the remaining records; seed = the record farthest from c; group =
seed + its nearest remaining records. Costs O(N^2 p / k) overall, like the papers' versions. The
implementation keeps it vectorised and cheap:

- distances work on the mixed numeric/nominal form (``components.microaggregation.encoding``): one gather per
  nominal attribute instead of a dot product over every one-hot column;
- the mean of the remaining records is kept as running sums (nominal level counts are exact
  integers; numeric sums are accumulated in extended precision), not recomputed from scratch;
- removed records are marked dead (NaN squared norm, so every distance to them is NaN and no
  search can pick them) and the working arrays are compacted, in row order, once a sixteenth of
  them is dead;
- a distance pass over many rows runs in cache-sized chunks, shared by two threads (NumPy and
  BLAS release the GIL); BLAS itself is kept to one thread, its own threading only adds overhead
  on a (rows x 5) matrix-vector product.

Ties are broken by the smallest original row index, both for the farthest record and among the
nearest ones (distance first, then row index), so the result is deterministic. Squared distances
within ``TIE_TOL`` of each other count as ties: the expanded-form arithmetic above rounds two
equal distances of distinct records differently (~1e-14), which must not decide a tie.

Every distance is the same sequence of floating-point operations whatever the chunking, the
thread split or the compaction state: the numeric part is one BLAS ``gemv`` row product (a row's
result does not depend on its position in the matrix, as long as a product has at least two
rows; a single row goes through ``dot``, as it always did for single-row gathers), then the
squared norm, the nominal lookups in block order and the constant are added one by one.
"""

from __future__ import annotations

import contextlib
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from components.microaggregation.encoding import EncodedQIs

TIE_TOL = 1e-11  # squared scaled distances closer than this are equal (float noise is ~1e-14)

_CHUNK = 16_384  # rows per step of a distance pass: its temporaries stay in the L2 cache
_PAR_ROWS = 6144  # a pass over a set of fewer rows is one step (a hand-off costs ~20 us)
_NOMINAL_ROWS = 32_768  # nearest queries over fewer rows use full passes (see ``seek``)
_BLAS_ROWS = 2048  # from this many rows on, BLAS is held to one thread during the grouping


def first_max(d: np.ndarray) -> int:
    """Position of the first entry within ``TIE_TOL`` of the maximum (lowest row on a tie);
    NaN entries (dead rows) are ignored."""
    return int(np.flatnonzero(d >= np.fmax.reduce(d) - TIE_TOL)[0])


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

    def sizes(self) -> np.ndarray:
        return np.fromiter((len(m) for m in self.members), np.int64, len(self.members))

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
        self.level_spans = [(int(a), int(b)) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
        # Per-attribute centre tables side by side: slot 0 (missing) of attribute j sits at
        # offsets[j] + j, its levels right after.
        self.slot_zero = (offsets[:-1] + np.arange(len(self.sizes))).astype(np.intp)
        self.slot_levels = np.concatenate(
            [z + 1 + np.arange(size) for z, size in zip(self.slot_zero, self.sizes, strict=True)]
        ).astype(np.intp) if len(self.sizes) else np.zeros(0, np.intp)
        # Each row's slot in every attribute's table (0: missing), in ``flat`` indexing.
        self.slots = (self.slot_zero + (self.codes + 1)).astype(np.intp)
        self._point_cache: list[dict[int, np.ndarray]] = [{} for _ in self.blocks]
        self._cached_bytes = 0

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

    def centre_tables(
        self, counts: np.ndarray, n: int
    ) -> tuple[list[np.ndarray], float, np.ndarray]:
        """Per-slot term and constant for the distance to a centre with level shares c_j,
        ||c_j||^2 + [x present](1 - 2 c_j[x]), from the side-by-side level counts; and the
        shares."""
        shares = counts[: self.n_levels] / n
        const = 0.0
        for a, b in self.level_spans:
            c = shares[a:b]
            const += float(c @ c)
        flat = np.empty(self.n_levels + len(self.sizes))
        flat[self.slot_zero] = 0.0
        flat[self.slot_levels] = 1.0 - 2.0 * shares
        return self.tables_of(flat), const, shares

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

    def dist2_row(self, v: np.ndarray, tables: list[np.ndarray], c: float, row: int) -> float:
        """``dist2_rows`` of one row, with the same operations on Python floats."""
        out = float(self.num_m2[row] @ v) + float(self.sq[row])
        for col, table in zip(self.block_codes_t, tables, strict=True):
            out += float(table[col[row]])
        return out + c


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
    out = num_m2[idx] @ v
    out += sq[idx]
    for col, table in zip(codes_t, tables, strict=True):
        out += table[col[idx]]
    out += c
    return out


class _Scan:
    """A distance pass over a working set, and what it leaves: ``d`` over the working positions
    (the squared distances, or with ``nominal`` only their nominal part), the chunk
    ``bounds``, per chunk the candidate positions for a nearest query (``pools``) and the
    maximum (``peaks``)."""

    __slots__ = ("ws", "query", "nominal", "d", "bounds", "pools", "peaks", "tasks")

    def __init__(self, ws: _WorkingSet, query: tuple, nominal: bool = False) -> None:
        self.ws = ws
        self.query = query
        self.nominal = nominal
        self.d = np.empty(len(ws.rows))
        self.bounds = ws.chunks()
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
            values = self.ws.exact(self.query, pool)
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
    """Runs the chunks of a distance pass on the calling thread and one helper thread.

    Chunks are taken from a shared iterator, so a helper that starts late (a busy machine)
    simply takes fewer; a helper that has not started when the caller is done is cancelled.
    """

    def __init__(self, workers: int) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1) if workers > 1 else None
        self.parallel = self.pool is not None

    def run(self, tasks: list) -> None:
        if self.pool is None or len(tasks) < 2:
            for task in tasks:
                task()
            return
        it = iter(tasks)  # next() on a list iterator is atomic under the GIL

        def drain() -> None:
            for task in it:
                task()

        helper = self.pool.submit(drain)
        drain()
        if not helper.cancel():
            helper.result()

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
        self.nominal_off = 0  # full passes for nearest queries while > 0 (see ``checked``)

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

    def seek(self, row: int, k: int) -> _Scan:
        """A pass for the k nearest of input row ``row`` (itself included if it is here).

        Point queries have integer nominal parts, and the nominal part alone is a lower bound
        of a squared distance. So unless that prunes too little here, the pass computes only
        the nominal part, keeps the rows whose nominal part is within reach of an upper bound
        on the k-th smallest distance (taken from a sample of exact distances), and
        ``_Scan.nearest`` computes exact distances for those alone, with the operations of a
        full pass.
        """
        v = self.space.num[row]
        tables = self.space.point_tables(row)
        query = (v, tables, float(v @ v) + 0.0)
        n = len(self.rows)
        if not tables or n < _NOMINAL_ROWS or self.nominal_off > 0:
            self.nominal_off = max(0, self.nominal_off - 1)
            return self.scan(query, k)
        sample = self.exact(query, np.arange(0, n, max(1, n // (64 * k))))
        bound = np.partition(sample, k - 1)[k - 1] if len(sample) > k else np.nan
        if not bound < np.inf:
            return self.scan(query, k)
        # |error| of a computed distance: a few ulps of its largest term (1e-12 is ~4500 ulps)
        reach = bound + TIE_TOL + 1e-12 * (1.0 + self.sq_max + query[2] + abs(bound))
        out = _Scan(self, query, nominal=True)
        pairs = list(zip(self.codes_t, tables, strict=True))
        d = out.d

        def task(i: int) -> None:
            a, b = out.bounds[i]
            o = d[a:b]
            (col, table), *rest = pairs
            np.take(table, col[a:b], out=o, mode="clip")
            if rest:
                tmp = np.empty(b - a)
                for col, table in rest:
                    np.take(table, col[a:b], out=tmp, mode="clip")
                    np.add(o, tmp, out=o)
            out.pools[i] = np.flatnonzero(o <= reach) + a

        out.tasks = [partial(task, i) for i in range(len(out.bounds))]
        return out

    def checked(self, scan: _Scan) -> None:
        """After a nominal-bound pass: if it kept over half of the rows, use full passes for a
        while (numeric attributes dominate the distances here)."""
        if scan.nominal and sum(len(p) for p in scan.pools) * 2 > len(scan.d):
            self.nominal_off = 64

    def _dist2(
        self, v: np.ndarray, tables: list[np.ndarray], const: float, idx: np.ndarray | None = None
    ) -> np.ndarray:
        """||x_num - v||^2 (expanded: ||x||^2 - 2 x.v + ||v||^2) + nominal lookups + const, for
        every working position (dead ones: NaN) or the positions ``idx``."""
        c = float(v @ v) + const
        if idx is not None:
            return self.space.dist2_rows(v, tables, c, self.rows[idx])
        out = self.scan((v, tables, c))
        self.threads.run(out.tasks)
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
                    cand = order[:cut]
                    cand = np.sort(cand[alive[cand]])
                    d = self.space.num_m2.take(cand, axis=0) @ centre.num
                    d += self.space.sq[cand]
                    for b in self.space.nominal_rows(centre.flat, cand):
                        d += b
                    d += c
                    i = first_max(d)
                    return int(cand[i]), float(d[i])
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

    def maybe_compact(self) -> None:
        """Between groups: drop the anchor when the nominal set halves, and compact the working
        arrays once a sixteenth of them is dead. Invalidates positions."""
        if self.n_alive < self.nominal_len // 2 and self.nominal_len > 256:
            self.nominal_len = self.n_alive
            self.anchor = None
        if self.n_dead * self._COMPACT_SHARE > len(self.rows) and self.n_alive >= 2:
            self.rows = self.rows[self.alive]
            self._load()


class _Centre:
    """The mean of the alive rows of some working sets: numeric part ``num``, level shares,
    per-attribute lookup tables side by side (``flat``, see ``_Space.centre_tables``), their
    constant, and c = ||num||^2 + constant. Unpacks as (num, block tables, constant, shares)."""

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
    """``nearest(d, k)`` given ascending positions ``pool`` with their entries ``dp``, among
    them every entry within ``TIE_TOL`` of the k-th smallest (more do no harm; NaN entries are
    dropped)."""
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    keep = dp < np.inf
    if not keep.all():
        pool, dp = pool[keep], dp[keep]
    if len(pool) > k:
        keep = dp <= np.partition(dp, k - 1)[k - 1] + TIE_TOL  # every entry that may tie
        pool, dp = pool[keep], dp[keep]
    o = np.argsort(dp, kind="stable")  # (distance, position): the pool is ascending
    idx = pool[o]
    near = np.diff(dp[o]) <= TIE_TOL
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
        while sets[0].n_alive >= m and sets[1].n_alive >= n:
            for s in sets:
                s.maybe_compact()
            si, seed = _farthest(sets, space)
            # both sets' passes at once (the seed counts in its own set)
            scans = [s.seek(seed, need[sj]) for sj, s in enumerate(sets)]
            threads.run(scans[0].tasks + scans[1].tasks)
            parts = []
            for sj, (s, scan) in enumerate(zip(sets, scans, strict=True)):
                s.checked(scan)
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
            s.checked(scan)
            pos = s.position(row)
            chosen = np.concatenate([[pos], scan.nearest(k - 1, exclude=pos)]).astype(np.int64)
            rows = s.rows[chosen]
            s.remove(chosen)
            out.members.append(rows)
            out.seeds.append(row)
            return chosen

        def seek(row: int) -> _Scan:
            scan = s.seek(row, k)
            threads.run(scan.tasks)
            return scan

        while s.n_alive >= 3 * k:
            s.maybe_compact()
            _, xr = _farthest([s], space)
            # x_r's pass gives its group and x_s, the farthest record from x_r among those left
            v = space.num[xr]
            scan = s.scan((v, space.point_tables(xr), float(v @ v) + 0.0), k, peaks=True)
            threads.run(scan.tasks)
            d = scan.d
            own = float(d[s.position(xr)])
            chosen = grow(xr, scan)
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
    return out
