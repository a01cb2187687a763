"""dMondrian (Ruggieri 2014, Alg. 1; spec section 2.2): Mondrian's top-down median cuts, on the
PND attributes only, each accepted when it is d-allowable.

A cut ``A <= v`` of a partition P is *d-allowable* (Def. 18) when both parts have at least
max(k, 1) rows and tau(P1) <= t, tau(P2) <= t, with tau the largest distance of a PD group's
(tokenism-extended) negative rate from the global rate p-. With k over q-blocks (the default
``k_over``) each PD group of a part must also be empty or hold at least k rows, so that every
q-block of the release (PND labels and PD group) has at least k rows. Of the d-allowable median cuts the
one with the smallest max{tau(P1), tau(P2)} is taken (ties: the first PND attribute, AMB-7);
a partition with none becomes an equivalence class. Theorem 20: the release is
bd_f(max{t, tau(R)})-protective for every measure f.

>>> from privfair.components.generalisation.examples import toy_table
>>> result = dmondrian(toy_table(), DMondrianParams(t=0.25, utility_queries=0))
>>> result.metrics["classes"], result.table.column("purpose").to_pylist()[0]
(2, {'lo': 'housing', 'hi': 'car'})
"""

from __future__ import annotations

import math
import time
from functools import partial

import numpy as np
import pyarrow as pa

from privfair.components.generalisation.contract import dmondrian_contract
from privfair.components.generalisation.inputs import prepare_for
from privfair.components.generalisation.params import DMondrianParams
from privfair.components.generalisation.publish import release

__all__ = ["dmondrian", "dmondrian_classes", "find_median"]

TOL = 1e-12  # AMB-5: tau <= t inclusive, up to float noise


def find_median(values: np.ndarray) -> int | None:
    """The cut value of AMB-6: the lower median of ``values``; when that is their maximum (the
    right part would be empty), the largest smaller value; None when the values are constant.

    >>> find_median(np.array([0] * 8 + [1] * 9)), find_median(np.array([2, 2])), find_median(np.array([1, 2, 3, 4]))
    (0, None, 2)
    """
    n = len(values)
    kth = math.ceil(n / 2) - 1
    v = np.partition(values, kth)[kth]
    top = values.max()
    if v == top:
        smaller = values[values < v]
        if smaller.size == 0:
            return None
        v = smaller.max()
    return int(v)


def _tau(a: int, b: int, c: int, d: int, p_minus: float) -> float:
    p1 = a / (a + b) if a + b else p_minus
    p2 = c / (c + d) if c + d else p_minus
    return max(abs(p1 - p_minus), abs(p2 - p_minus))


def k_allows(a: int, b: int, c: int, d: int, k: int, k_over: str) -> bool:
    """Whether a part with 4-fold counts (a, b, c, d) may be a class, or be cut further, under
    k: at least max(k, 1) rows and, over q-blocks, each PD group empty or of at least k rows.

    >>> k_allows(1, 0, 2, 2, 2, "classes"), k_allows(1, 0, 2, 2, 2, "q_blocks")
    (True, False)
    >>> k_allows(0, 0, 2, 2, 2, "q_blocks")
    True
    """
    n1, n2 = a + b, c + d
    if n1 + n2 < max(k, 1):
        return False
    return k_over != "q_blocks" or ((n1 == 0 or n1 >= k) and (n2 == 0 or n2 >= k))


def dmondrian_classes(
    ranks: np.ndarray,
    cell: np.ndarray,
    t: float,
    k: int,
    p_minus: float,
    block_rows: int | None = None,
    k_over: str = "classes",
) -> np.ndarray:
    """Each row's equivalence class (leaves numbered in depth-first, left-first order).

    ``ranks``: (rows, PND attributes) integer ranks; ``cell``: each row's 4-fold cell
    (0..3 = a, b, c, d). Per node, the median cut of every attribute and its left part's
    4-fold counts are computed for all attributes at once. ``k_over``: what k covers
    (``k_allows``).

    With ``block_rows``, the top of the tree is cut here until the parts have at most
    ``block_rows`` rows; each part's subtree is then grown on the current engine
    (``privfair.components.core.engine``), one block per part. A node's cut depends only on its own
    rows and the *global* p- (every class is still measured against the whole table), so the
    classes are exactly the unblocked ones, numbered the same way.
    """
    items = _grow(ranks, cell, t, k, p_minus, np.arange(len(cell)), block_rows, k_over)
    classes = np.empty(len(cell), dtype=np.int64)
    blocks = [idx for kind, idx in items if kind == "block"]
    sub = _grow_blocks(ranks, cell, t, k, p_minus, blocks, k_over) if blocks else []
    leaf, b = 0, 0
    for kind, idx in items:
        if kind == "leaf":
            classes[idx] = leaf
            leaf += 1
        else:
            local = sub[b]
            classes[idx] = leaf + local
            leaf += int(local.max()) + 1
            b += 1
    return classes


#: a part of at most this many rows is grown a level at a time (``_grow_levels``); a larger
#: one is cut node by node, where the cost is in its rows, not in the nodes' number
LEVEL_ROWS = 1 << 16


def _grow(
    ranks: np.ndarray,
    cell: np.ndarray,
    t: float,
    k: int,
    p_minus: float,
    root: np.ndarray,
    block_rows: int | None,
    k_over: str = "classes",
) -> list[tuple[str, np.ndarray]]:
    """The tree below ``root`` in depth-first, left-first order: ("leaf", rows) for a class,
    ("block", rows) for a part of at most ``block_rows`` rows left to grow elsewhere; each
    part's rows in ``root``'s order.

    A part of more than ``LEVEL_ROWS`` rows is cut here (``_node_cut``); below that, its
    subtree is grown a level at a time (``_grow_levels``). Both take Alg. 1's decisions: the
    median cut of every PND attribute, the d-allowable one with the smallest max tau, ties to
    the first attribute. With ``block_rows`` the parts are cut here until they are blocks,
    each then grown a level at a time where the engine runs it (``_grow_block``)."""
    kmin = max(k, 1)
    out: list[tuple[str, np.ndarray]] = []
    stack = [np.asarray(root)]
    onehot = None
    while stack:
        idx = stack.pop()
        if block_rows is not None and len(idx) <= block_rows:
            out.append(("block", idx))
            continue
        if block_rows is None and len(idx) <= LEVEL_ROWS:
            out += _grow_levels(ranks, cell, t, k, p_minus, idx, k_over)
            continue
        if onehot is None:
            onehot = np.eye(4, dtype=np.int64)[cell]
        best_j, best_v = _node_cut(ranks, onehot, t, k, kmin, p_minus, idx, k_over)
        if best_j < 0:
            out.append(("leaf", idx))
            continue
        go_left = ranks[idx, best_j] <= best_v
        stack.append(idx[~go_left])
        stack.append(idx[go_left])
    return out


def _node_cut(ranks, onehot, t, k, kmin, p_minus, idx, k_over) -> tuple[int, int]:
    """(attribute, value) of the cut of the part ``idx`` (-1: none, a class): per attribute the
    median cut of all of them at once, then Alg. 1's choice (``_Choice``, as for a level)."""
    m, size = ranks.shape[1], len(idx)
    if size < 2 * kmin or not m:
        return -1, 0
    vals = ranks[idx]
    cuts, ok = _median_cuts(vals)  # its sorted copy goes before the left parts are made
    left = vals <= cuts[None, :]
    oh = onehot[idx]
    lc = left.T.astype(np.int64) @ oh  # (m, 4) left counts
    choice = _Choice(oh.sum(axis=0)[None, :], np.array([size]), np.array([True]))
    for j in range(m):
        choice.offer(j, cuts[j : j + 1], ok[j : j + 1], lc[j : j + 1], t, k, kmin, p_minus, k_over)
    return int(choice.j[0]), int(choice.v[0])


def _median_cuts(vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``find_median`` for every column of ``vals`` at once: (cut values, has-a-cut mask)."""
    n = len(vals)
    ordered = np.sort(vals, axis=0)
    v = ordered[math.ceil(n / 2) - 1]
    top = ordered[-1]
    first_top = (ordered == top).argmax(axis=0)  # position of the first maximum
    fallback = ordered[np.maximum(first_top - 1, 0), np.arange(vals.shape[1])]
    at_top = v == top
    return np.where(at_top, fallback, v), ~(at_top & (first_top == 0))


_SPLIT, _LEAF = 0, 1


def _grow_levels(
    ranks: np.ndarray, cell: np.ndarray, t: float, k: int, p_minus: float, root, k_over: str
) -> list[tuple[str, np.ndarray]]:
    """``_grow`` of a part that is not cut into blocks, a level at a time: a node's cut depends
    on its own rows alone, so every node of a level is decided at once (``_Level``), with NumPy
    over all their rows, instead of one node after another in Python; the classes are then put
    in depth-first order. On Adult's deep trees (17,278 classes at t = 0.75) three times as
    fast as node by node."""
    m = ranks.shape[1]
    kmin = max(k, 1)
    root = np.asarray(root)
    # the subtree's own rows, numbered 0..n-1: every array of a level is the subtree's size,
    # not the table's (a 10M-row table is grown as many 65,536-row subtrees)
    level = _Level.root(ranks[root], cell[root], np.arange(len(root)))
    levels: list[tuple[np.ndarray, list[np.ndarray]]] = []  # per level: kind, classes' rows
    while level.n_nodes:
        can = (level.sizes >= 2 * kmin) & (m > 0)
        best_j, best_v = level.best_cuts(t, k, kmin, p_minus, k_over, can)
        kind = np.where(best_j < 0, _LEAF, _SPLIT).astype(np.int8)
        leaf = kind == _LEAF
        starts, ends = level.starts[leaf].tolist(), (level.starts + level.sizes)[leaf].tolist()
        # copies: a view would keep the level's whole array alive
        levels.append((kind, [level.rows[a:b].copy() for a, b in zip(starts, ends, strict=True)]))
        level = level.split(~leaf, best_j, best_v)
    return [("leaf", root[rows]) for rows in _depth_first(levels)]


def _depth_first(levels: list[tuple[np.ndarray, list[np.ndarray]]]) -> list[np.ndarray]:
    """The leaves of a tree grown level by level, in depth-first, left-first order. A split
    node's children are the next level's nodes 2r and 2r + 1 (r: its rank among the level's
    split nodes); a node's first leaf comes after every leaf below the left siblings of it and
    of its ancestors."""
    counts: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(levels)
    below = np.zeros(0, dtype=np.int64)
    for depth in range(len(levels) - 1, -1, -1):  # leaves under each node, bottom up
        kind = levels[depth][0]
        n = np.ones(len(kind), dtype=np.int64)
        split = np.flatnonzero(kind == _SPLIT)
        n[split] = below[0::2] + below[1::2]
        counts[depth] = below = n
    found: list[tuple[int, np.ndarray]] = []
    first = np.zeros(1, dtype=np.int64)  # each node's first leaf, top down
    for depth, (kind, leaves) in enumerate(levels):
        split = kind == _SPLIT
        found += zip(first[~split].tolist(), leaves, strict=True)
        if depth + 1 < len(levels):
            child = np.empty(2 * int(split.sum()), dtype=np.int64)
            child[0::2] = first[split]
            child[1::2] = first[split] + counts[depth + 1][0::2]
            first = child
    found.sort(key=lambda item: item[0])
    return [rows for _, rows in found]


class _Level:
    """The nodes of one level of the tree, side by side: ``rows`` (each node's rows in the
    root's order), ``starts`` and ``sizes``; per PND attribute j, ``values[j]``, ``rows_by[j]``
    and ``cells[j]``: each node's values of j sorted, with their rows and 4-fold cells. Every
    array has the same layout (node i at ``starts[i]``), so one node index serves them all."""

    def __init__(self, ranks, cell, rows, starts, sizes, values, rows_by, cells) -> None:
        self.ranks, self.cell = ranks, cell
        self.rows, self.starts, self.sizes = rows, starts, sizes
        self.values, self.rows_by, self.cells = values, rows_by, cells
        self.node = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)

    @classmethod
    def root(cls, ranks: np.ndarray, cell: np.ndarray, rows: np.ndarray) -> _Level:
        values, rows_by, cells = [], [], []
        for j in range(ranks.shape[1]):
            by = rows[np.argsort(ranks[rows, j], kind="stable")]
            v = ranks[by, j]
            if len(v):  # moved at every level: the smallest type that holds them (Adult: bytes)
                v = v.astype(
                    np.result_type(np.min_scalar_type(v.min()), np.min_scalar_type(v.max()))
                )
            values.append(v)
            rows_by.append(by)
            cells.append(cell[by].astype(np.int8))
        sizes = np.array([len(rows)], dtype=np.int64)
        return cls(ranks, cell, rows, np.zeros(1, np.int64), sizes, values, rows_by, cells)

    @property
    def n_nodes(self) -> int:
        return len(self.sizes)

    def best_cuts(
        self, t: float, k: int, kmin: int, p_minus: float, k_over: str, can: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per node, the attribute and value of its cut (-1 where it has none; only nodes in
        ``can`` are cut): per attribute the lower median of the node's values (their largest
        smaller value when that is their maximum, ``find_median``), kept when both parts have
        at least ``kmin`` rows, pass ``k_allows`` (k > 1) and have max tau <= t; the smallest
        max tau, an attribute taking it from an earlier one only when smaller by more than
        ``TOL`` (Alg. 1's loop over the attributes, for every node at once)."""
        n = self.n_nodes
        s, z, node = self.starts, self.sizes, self.node
        if not can.any():
            return np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64)
        last = s + z - 1
        kth = s + (z + 1) // 2 - 1  # math.ceil(z / 2) - 1 rows before the lower median
        choice = _Choice(_fourfold(node * 4 + self.cell[self.rows], n), z, can)
        for j, (v, c) in enumerate(zip(self.values, self.cells, strict=True)):
            median, top = v[kth], v[last]
            # the largest value below the maximum: the one before the maximum's first row
            below_top = np.bincount(node, weights=v < top[node], minlength=n).astype(np.int64)
            fallback = v[np.maximum(s + below_top - 1, s)]
            at_top = median == top
            has_cut = ~(at_top & (below_top == 0))
            cuts = np.where(at_top, fallback, median)
            left = _fourfold((node * 4 + c)[v <= cuts[node]], n)
            choice.offer(j, cuts, has_cut, left, t, k, kmin, p_minus, k_over)
        return choice.j, choice.v

    def split(self, split: np.ndarray, best_j: np.ndarray, best_v: np.ndarray) -> _Level:
        """The next level: each node of ``split`` cut into its rows at most ``best_v`` on
        attribute ``best_j`` (the left child, first) and the rest; every array partitioned
        stably, so each child's values stay sorted."""
        if not split.any():
            none = np.zeros(0, dtype=np.int64)
            return _Level(self.ranks, self.cell, self.rows[:0], none, none, [], [], [])
        node = self.node
        keep = split[node]
        col = np.where(split, best_j, 0)[node]
        goes_left = self.ranks[self.rows, col] <= best_v[node]
        sizes_l = np.bincount(node, weights=goes_left & keep, minlength=self.n_nodes)
        sizes_l = sizes_l.astype(np.int64)[split]
        sizes = np.empty(2 * len(sizes_l), dtype=np.int64)
        sizes[0::2], sizes[1::2] = sizes_l, self.sizes[split] - sizes_l
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        left_start = np.zeros(self.n_nodes, dtype=np.int64)
        left_start[split] = starts[0::2]
        right_start = np.zeros(self.n_nodes, dtype=np.int64)
        right_start[split] = starts[1::2]
        at = _Moves(node, keep, self.starts, left_start, right_start)
        rows = at.moved(goes_left, self.rows)[0]
        went_left = np.zeros(len(self.ranks), dtype=bool)
        went_left[self.rows] = goes_left
        values, rows_by, cells = [], [], []
        for v, r, c in zip(self.values, self.rows_by, self.cells, strict=True):
            v, r, c = at.moved(went_left[r], v, r, c)
            values.append(v)
            rows_by.append(r)
            cells.append(c)
        return _Level(self.ranks, self.cell, rows, starts, sizes, values, rows_by, cells)


class _Choice:
    """Alg. 1's choice among the attributes' median cuts, for several parts at once: the parts
    with 4-fold counts ``total``, ``sizes`` rows, and ``can`` be cut. ``offer`` gives attribute
    j's turn; a cut is kept when both sides have at least ``kmin`` rows, pass ``k_allows``
    (k > 1) and have max tau <= t, and it replaces an earlier attribute's only when its max tau
    is smaller by more than ``TOL`` (ties to the first attribute, AMB-7). ``j`` is -1 for a part
    with no such cut (a class)."""

    def __init__(self, total: np.ndarray, sizes: np.ndarray, can: np.ndarray) -> None:
        self.total, self.sizes, self.can = total, sizes, can
        self.j = np.full(len(sizes), -1, dtype=np.int64)
        self.v = np.zeros(len(sizes), dtype=np.int64)
        self.score = np.full(len(sizes), np.inf)

    def offer(self, j, cuts, has_cut, left, t, k, kmin, p_minus, k_over) -> None:
        """Attribute ``j``'s cut of each part at ``cuts`` (``has_cut``: the values are not
        constant), with the 4-fold counts ``left`` of the rows at most the cut."""
        a, b, c, d = (left[:, i] for i in range(4))
        ra, rb, rc, rd = (self.total[:, i] - left[:, i] for i in range(4))
        nl = a + b + c + d
        ok = self.can & has_cut & (nl >= kmin) & (self.sizes - nl >= kmin)
        if k > 1:
            ok &= _k_allows(a, b, c, d, k, k_over) & _k_allows(ra, rb, rc, rd, k, k_over)
        score = np.maximum(_tau_of(a, b, c, d, p_minus), _tau_of(ra, rb, rc, rd, p_minus))
        take = ok & (score <= t + TOL) & (score < self.score - TOL)
        self.score[take] = score[take]
        self.j[take] = j
        self.v[take] = cuts[take]


class _Moves:
    """Where the elements of a level's arrays go in the next level: an element of a node that
    is cut (``keep``) goes to its left child's rows if it ``goes left``, else to its right
    child's, in its present order."""

    def __init__(self, node, keep, starts, left_start, right_start) -> None:
        self.keep = keep
        self.offset = np.arange(len(node), dtype=np.int64) - starts[node]  # within its node
        self.first = starts[node]
        self.left_start = left_start[node]
        self.right_start = right_start[node]

    def moved(self, goes_left: np.ndarray, *arrays: np.ndarray) -> list[np.ndarray]:
        lk = goes_left.astype(np.int64)
        before = np.cumsum(lk) - lk  # elements going left before this one, in the level
        before -= before[self.first]  # ... in its node
        dest = np.where(
            goes_left, self.left_start + before, self.right_start + self.offset - before
        )[self.keep]
        out = []
        for a in arrays:
            moved = np.empty(len(dest), dtype=a.dtype)
            moved[dest] = a[self.keep]
            out.append(moved)
        return out


def _fourfold(key: np.ndarray, n: int) -> np.ndarray:
    """(n, 4) counts of ``key`` = node * 4 + cell."""
    return np.bincount(key, minlength=4 * n).reshape(n, 4)


def _tau_of(a, b, c, d, p_minus: float) -> np.ndarray:
    """``_tau`` of arrays of 4-fold counts (the same floating-point operations)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        p1 = np.where(a + b > 0, a / np.maximum(a + b, 1), p_minus)
        p2 = np.where(c + d > 0, c / np.maximum(c + d, 1), p_minus)
    return np.maximum(np.abs(p1 - p_minus), np.abs(p2 - p_minus))


def _k_allows(a, b, c, d, k: int, k_over: str) -> np.ndarray:
    """``k_allows`` of arrays of 4-fold counts."""
    n1, n2 = a + b, c + d
    ok = n1 + n2 >= max(k, 1)
    if k_over == "q_blocks":
        ok &= ((n1 == 0) | (n1 >= k)) & ((n2 == 0) | (n2 >= k))
    return ok


def _grow_block(t: float, k: int, p_minus: float, m: int, k_over: str, block: pa.Table) -> pa.Table:
    """One block's subtree (runs on an engine's worker): each row's class within the block."""
    ranks = (
        np.column_stack([block.column(f"r{j}").to_numpy() for j in range(m)])
        if m
        else np.zeros((block.num_rows, 0), dtype=np.int64)
    )
    cell = block.column("cell").to_numpy()
    classes = np.empty(block.num_rows, dtype=np.int64)
    leaves = [
        idx for _, idx in _grow(ranks, cell, t, k, p_minus, np.arange(len(cell)), None, k_over)
    ]
    for i, idx in enumerate(leaves):
        classes[idx] = i
    return pa.table(
        {
            "block": block.column("block"),
            "row": block.column("row"),
            "class": pa.array(classes, pa.int64()),
        }
    )


def _grow_blocks(
    ranks, cell, t, k, p_minus, blocks: list[np.ndarray], k_over: str = "classes"
) -> list[np.ndarray]:
    """The classes of each block's rows (in the block's row order), grown on the current
    engine."""
    from privfair.components.core.engine import current_engine

    order = np.concatenate(blocks)
    ids = np.repeat(np.arange(len(blocks)), [len(b) for b in blocks])
    m = ranks.shape[1]
    cols = {"block": pa.array(ids, pa.int64()), "row": pa.array(order, pa.int64())}
    for j in range(m):
        cols[f"r{j}"] = pa.array(ranks[order, j].astype(np.int64))
    cols["cell"] = pa.array(cell[order].astype(np.int8))
    schema = pa.schema([("block", pa.int64()), ("row", pa.int64()), ("class", pa.int64())])
    done = current_engine().map_blocks(
        pa.table(cols), "block", partial(_grow_block, t, k, p_minus, m, k_over), schema
    )
    got = done.column("block").to_numpy()
    rows = done.column("row").to_numpy()
    classes = done.column("class").to_numpy()
    out = []
    for b, idx in enumerate(blocks):
        mine = got == b
        local = np.empty(len(idx), dtype=np.int64)
        # an engine may hand a block's rows over in another order: map them back by row id
        sorter = np.argsort(idx)
        local[sorter[np.searchsorted(idx, rows[mine], sorter=sorter)]] = classes[mine]
        out.append(local)
    return out


def dmondrian(table: pa.Table, params: DMondrianParams):
    """Run dMondrian on ``table`` (roles in its field metadata); see the module docstring."""
    started = time.perf_counter()
    prep = prepare_for(table, params)
    classes = dmondrian_classes(
        prep.ranks, prep.cell, params.t, params.k, prep.p_minus, params.block_rows, params.k_over
    )
    return release(prep, classes, params, "dmondrian", dmondrian_contract(params, table), started)
