"""dMondrian (Ruggieri 2014, Alg. 1; spec section 2.2): Mondrian's top-down median cuts, on the
PND attributes only, each accepted when it is d-allowable.

A cut ``A <= v`` of a partition P is *d-allowable* (Def. 18) when both parts have at least
max(k, 1) rows and tau(P1) <= t, tau(P2) <= t, with tau the largest distance of a PD group's
(tokenism-extended) negative rate from the global rate p-. Of the d-allowable median cuts the
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

import numpy as np
import pyarrow as pa

from components.generalisation.contract import dmondrian_contract
from components.generalisation.inputs import prepare
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
    ranks: np.ndarray, cell: np.ndarray, t: float, k: int, p_minus: float
) -> np.ndarray:
    """Each row's equivalence class (leaves numbered in depth-first, left-first order).

    ``ranks``: (rows, PND attributes) integer ranks; ``cell``: each row's 4-fold cell
    (0..3 = a, b, c, d). Per node, the median cut of every attribute and its left part's
    4-fold counts are computed for all attributes at once.
    """
    n, m = ranks.shape
    classes = np.empty(n, dtype=np.int64)
    onehot = np.eye(4, dtype=np.int64)[cell]
    kmin = max(k, 1)
    leaf = 0
    stack = [np.arange(n)]
    while stack:
        idx = stack.pop()
        best_score, best_j, best_v = math.inf, -1, 0
        size = len(idx)
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
                score = max(_tau(a, b, c, d, p_minus), _tau(ra, rb, rc, rd, p_minus))
                if score <= t + TOL and score < best_score - TOL:
                    best_score, best_j, best_v = score, j, cuts[j]
        if best_j < 0:
            classes[idx] = leaf
            leaf += 1
            continue
        go_left = ranks[idx, best_j] <= best_v
        stack.append(idx[~go_left])
        stack.append(idx[go_left])
    return classes


def dmondrian(table: pa.Table, params: DMondrianParams):
    """Run dMondrian on ``table`` (roles in its field metadata); see the module docstring."""
    started = time.perf_counter()
    prep = prepare(table, params.t, params.k)
    classes = dmondrian_classes(prep.ranks, prep.cell, params.t, params.k, prep.p_minus)
    return release(prep, classes, params, "dmondrian", dmondrian_contract(params, table), started)
