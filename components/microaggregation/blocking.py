"""Blocked grouping: MDAV and MakeFairlets run on blocks of the table, on any engine.

MDAV-style grouping costs O(N^2 p / k). Past a few hundred thousand rows, the table is split into
blocks of at most ``block_rows`` rows and the greedy grouping runs in each block independently
(``privfair.components.core.engine``: in this process, a process pool or Spark); everything else (the
encoding and its scaling, m and n, label correction, the published QIs, the metrics) is still
computed on the whole table, so only the grouping differs from the unblocked run.

The split is a k-d tree of median cuts in QI space that keeps the protected attribute's ratio:

    a block with u unfavoured and f favoured rows holds c = min(floor(u/m), floor(f/n))
    fairlets' worth (c = floor(rows/k) for MDAV). While it has more than ``block_rows`` rows and
    c >= 2, cut it along its widest numeric QI (range within the block over range in the table;
    ties: the first QI; no spread: the nominal QI with most values; none: row order): the left
    child takes the floor(c/2) * m unfavoured and floor(c/2) * n favoured rows lowest on that QI
    (ties by row position), the right child the rest.

So every block but the last one at each cut holds whole fairlets' worth, and the leftover rows
(fewer than m unfavoured or n favoured in all) stay together: blocking keeps the number of
fairlets, their exact composition (C1, C2), t-closeness and every label-correction guarantee.
What it changes is the greedy trace: each group is the nearest rows to its seed *within its
block*, which is what C11 (``SeedNearest`` with ``block_rows``) replays, after recomputing the
split from the input.

>>> import numpy as np
>>> x = np.array([[0.0], [1.0], [2.0], [3.0], [10.0], [11.0], [12.0], [13.0]])
>>> pa01 = np.array([0, 1, 0, 1, 0, 1, 0, 1])
>>> split_blocks(x, np.zeros((8, 0), dtype=np.int64), pa01, 1, 1, 4).tolist()
[0, 0, 0, 0, 1, 1, 1, 1]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from functools import partial

import numpy as np
import pyarrow as pa

from privfair.components.core.engine import current_engine
from privfair.components.microaggregation.encoding import EncodedQIs
from privfair.components.microaggregation.grouping import Grouping, make_fairlets, mdav

__all__ = ["split_blocks", "group_rows", "block_sizes"]


def block_sizes(grouping: str, k: int, m: int | None, n: int | None) -> tuple[int, int]:
    """(unfavoured, favoured) rows per group the split keeps whole: (m, n) for fairlets, (k, 0)
    for MDAV groups (every row counts as 'unfavoured')."""
    return (int(m), int(n)) if grouping == "fairlet" else (int(k), 0)


def _widest(
    x: np.ndarray, codes: np.ndarray, rows: np.ndarray, span: np.ndarray, ids: np.ndarray
) -> np.ndarray:
    """The sort key of a cut of ``rows``: the widest numeric QI relative to its table range,
    else the nominal QI with most distinct values, else row order (``ids``: each row's
    position in the whole table)."""
    if x.shape[1]:
        sub = x[rows]
        spread = (sub.max(axis=0) - sub.min(axis=0)) / span
        j = int(np.argmax(spread))
        if spread[j] > 0:
            return sub[:, j]
    if codes.shape[1]:
        sub = codes[rows]
        distinct = [len(np.unique(sub[:, j])) for j in range(sub.shape[1])]
        j = int(np.argmax(distinct))
        if distinct[j] > 1:
            return sub[:, j].astype(np.float64)
    return ids[rows].astype(np.float64)


def split_blocks(
    x: np.ndarray, codes: np.ndarray, pa01: np.ndarray, m: int, n: int, block_rows: int
) -> np.ndarray:
    """Block id of every row (blocks numbered depth-first, left before right).

    Parameters
    ----------
    x : (N, q) float array
        Numeric QIs in their original units (ordinal QIs as positions in their domain).
    codes : (N, r) int array
        Nominal QI codes (-1 missing).
    pa01 : (N,) int array
        Protected attribute, 0 unfavoured / 1 favoured (all 0 for MDAV).
    m, n : int
        Unfavoured and favoured rows per group (``block_sizes``).
    block_rows : int
        Largest block size wanted; a block is cut only if it holds two groups' worth or more.
    """
    n_rows = len(pa01)
    if n_rows == 0:
        return np.zeros(0, dtype=np.int64)
    span = np.ptp(x, axis=0) if x.shape[1] else np.zeros(0)
    span = np.where(span > 0, span, 1.0)
    return _split(x, codes, pa01, m, n, block_rows, span, np.arange(n_rows, dtype=np.int64))


def _split(
    x: np.ndarray,
    codes: np.ndarray,
    pa01: np.ndarray,
    m: int,
    n: int,
    block_rows: int,
    span: np.ndarray,
    ids: np.ndarray,
) -> np.ndarray:
    """``split_blocks`` of some rows of a table: ``span`` is the whole table's range of each
    numeric QI (zeros replaced by 1), ``ids`` each row's position in it (ties and the
    row-order cut follow it). ``privfair.components.microaggregation.spark_split`` finishes
    each small block of a split on the cluster with it."""
    n_rows = len(pa01)
    out = np.zeros(n_rows, dtype=np.int64)
    pa01 = np.asarray(pa01)
    stack = [np.arange(n_rows, dtype=np.int64)]
    leaves: list[np.ndarray] = []
    while stack:
        rows = stack.pop()
        p = pa01[rows]
        u_rows, f_rows = rows[p == 0], rows[p == 1]
        c = len(u_rows) // m if n == 0 else min(len(u_rows) // m, len(f_rows) // n)
        if len(rows) <= block_rows or c < 2:
            leaves.append(rows)
            continue
        key = _widest(x, codes, rows, span, ids)
        half = c // 2
        left, right = [], []
        for part, size in ((p == 0, half * m), (p == 1, half * n)):
            members = rows[part]
            order = np.lexsort((ids[members], key[part]))
            left.append(members[order[:size]])
            right.append(members[order[size:]])
        # right pushed first so that the left child is numbered first
        stack.append(np.sort(np.concatenate(right)))
        stack.append(np.sort(np.concatenate(left)))
    for b, rows in enumerate(leaves):
        out[rows] = b
    return out


_OUT = pa.schema(
    [
        ("block", pa.int64()),
        ("row", pa.int64()),
        ("group", pa.int64()),
        ("seed", pa.bool_()),
    ]
)


def _group_block(
    template: EncodedQIs, grouping: str, k: int, m: int, n: int, block: pa.Table
) -> pa.Table:
    """Group one block (runs on an engine's worker): the rows of each group in creation order."""
    q, r = len(template.numeric_names), len(template.nominal)
    # ties go to the lowest row: the block must be in row order whatever order an engine used
    block = block.sort_by("row")
    rows = block.column("row").to_numpy()
    num = (
        np.column_stack([block.column(f"x{j}").to_numpy() for j in range(q)])
        if q
        else np.zeros((len(rows), 0))
    )
    codes = (
        np.column_stack([block.column(f"c{j}").to_numpy() for j in range(r)]).astype(np.int32)
        if r
        else np.zeros((len(rows), 0), dtype=np.int32)
    )
    enc = replace(template, numeric=num, codes=codes)
    pa01 = block.column("pa").to_numpy()
    g = make_fairlets(enc, pa01, m, n) if grouping == "fairlet" else mdav(enc, k)
    local = g.row_order()
    seeds = np.isin(local, np.asarray(g.seeds, dtype=np.int64))
    return pa.table(
        {
            "block": pa.array(np.full(len(local), block.column("block")[0].as_py()), pa.int64()),
            "row": pa.array(rows[local], pa.int64()),
            "group": pa.array(g.group_ids(), pa.int64()),
            "seed": pa.array(seeds),
        },
        schema=_OUT,
    )


def _block_tables(
    enc: EncodedQIs, pa01: np.ndarray, blocks: np.ndarray, keys: np.ndarray
) -> Iterator[pa.Table]:
    """The table ``_group_block`` reads for each block in ``keys`` (its rows in row order), made
    one block at a time: a table of every encoded row would be a copy of the encoding."""
    order = np.argsort(blocks, kind="stable")
    cuts = np.searchsorted(blocks[order], keys, side="right")[:-1]
    for b, rows in zip(keys, np.split(order, cuts), strict=True):
        cols = {
            "block": pa.array(np.full(len(rows), b, dtype=np.int64)),
            "row": pa.array(rows, pa.int64()),
            "pa": pa.array(pa01[rows]),
        }
        num, codes = enc.numeric[rows], enc.codes[rows].astype(np.int32)
        cols |= {f"x{j}": pa.array(num[:, j]) for j in range(num.shape[1])}
        cols |= {f"c{j}": pa.array(codes[:, j]) for j in range(codes.shape[1])}
        yield pa.table(cols)


def group_rows(
    enc: EncodedQIs,
    pa01: np.ndarray,
    grouping: str,
    k: int,
    m: int | None,
    n: int | None,
    block_rows: int | None,
) -> Grouping:
    """Fairlets (``grouping="fairlet"``) or MDAV groups of the encoded table; with
    ``block_rows``, per block of ``split_blocks`` on the current engine, concatenated in block
    order (group ids follow)."""
    if block_rows is None or enc.n_rows <= block_rows:
        return make_fairlets(enc, pa01, m, n) if grouping == "fairlet" else mdav(enc, k)
    bu, bf = block_sizes(grouping, k, m, n)
    part = pa01 if grouping == "fairlet" else np.zeros(enc.n_rows, dtype=np.int8)
    blocks = split_blocks(enc.numeric, enc.codes, part, bu, bf, block_rows)
    template = replace(
        enc, numeric=np.zeros((0, enc.numeric.shape[1])), codes=np.zeros((0, enc.codes.shape[1]))
    )
    fn = partial(_group_block, template, grouping, k, m or 0, n or 0)
    keys = np.unique(blocks)
    done = current_engine().map_parts(
        _block_tables(enc, np.asarray(pa01, dtype=np.int8), blocks, keys),
        len(keys),
        "block",
        fn,
        _OUT,
    )
    rows = done.column("row").to_numpy()
    block = done.column("block").to_numpy()
    group = done.column("group").to_numpy()
    # global group id: a new group wherever the (block, local group) pair changes
    new = np.ones(len(rows), dtype=bool)
    new[1:] = (block[1:] != block[:-1]) | (group[1:] != group[:-1])
    starts = np.flatnonzero(new)
    out = Grouping(n_rows=enc.n_rows)
    out.members = np.split(rows, starts[1:]) if len(rows) else []
    out.seeds = rows[done.column("seed").to_numpy(zero_copy_only=False)].tolist()
    return out
