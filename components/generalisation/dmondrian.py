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

>>> from components.generalisation.examples import toy_table
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

from components.generalisation.contract import dmondrian_contract
from components.generalisation.inputs import prepare_for
from components.generalisation.params import DMondrianParams
from components.generalisation.publish import release

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
    (``components.core.engine``), one block per part. A node's cut depends only on its own
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
    ("block", rows) for a part of at most ``block_rows`` rows left to grow elsewhere."""
    m = ranks.shape[1]
    onehot = np.eye(4, dtype=np.int64)[cell]
    kmin = max(k, 1)
    out: list[tuple[str, np.ndarray]] = []
    stack = [root]
    while stack:
        idx = stack.pop()
        size = len(idx)
        if block_rows is not None and size <= block_rows:
            out.append(("block", idx))
            continue
        best_score, best_j, best_v = math.inf, -1, 0
        if size >= 2 * kmin and m:
            vals = ranks[idx]
            cuts, ok = _median_cuts(vals)
            left = vals <= cuts[None, :]
            oh = onehot[idx]
            lc = (left.T.astype(np.int64) @ oh).tolist()  # (m, 4) left counts
            total = oh.sum(axis=0).tolist()
            for j in range(m):
                if not ok[j]:
                    continue
                a, b, c, d = lc[j]
                nl = a + b + c + d
                if nl < kmin or size - nl < kmin:
                    continue
                ra, rb, rc, rd = total[0] - a, total[1] - b, total[2] - c, total[3] - d
                if k > 1 and not (
                    k_allows(a, b, c, d, k, k_over) and k_allows(ra, rb, rc, rd, k, k_over)
                ):
                    continue
                score = max(_tau(a, b, c, d, p_minus), _tau(ra, rb, rc, rd, p_minus))
                if score <= t + TOL and score < best_score - TOL:
                    best_score, best_j, best_v = score, j, cuts[j]
        if best_j < 0:
            out.append(("leaf", idx))
            continue
        go_left = ranks[idx, best_j] <= best_v
        stack.append(idx[~go_left])
        stack.append(idx[go_left])
    return out


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
    from components.core.engine import current_engine

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
