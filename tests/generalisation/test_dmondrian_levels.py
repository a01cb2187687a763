"""dMondrian's tree (``dmondrian._grow``: parts of more than ``LEVEL_ROWS`` rows cut node by
node, smaller ones grown a level at a time) is Alg. 1 taken node by node: the same parts, in the
same depth-first order, with the same rows, whatever the ties in the values, k, what k covers,
the block size and where the tree switches from nodes to levels."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from privfair.components.generalisation import dmondrian
from privfair.components.generalisation.dmondrian import TOL, _grow, _tau, find_median, k_allows


def grow_node_by_node(ranks, cell, t, k, p_minus, root, block_rows, k_over):
    """Alg. 1 as the spec states it (section 2.2, AMB-5 to AMB-7): a stack of parts; per part,
    ``find_median`` of each PND attribute; the d-allowable cut with the smallest max tau, ties
    to the first attribute; a part without one is a class."""
    kmin = max(k, 1)
    out, stack = [], [root]
    while stack:
        idx = stack.pop()
        if block_rows is not None and len(idx) <= block_rows:
            out.append(("block", idx))
            continue
        best, best_j, best_v = math.inf, -1, 0
        if len(idx) >= 2 * kmin:
            for j in range(ranks.shape[1]):
                v = find_median(ranks[idx, j])
                if v is None:
                    continue
                left = ranks[idx, j] <= v
                lc = np.bincount(cell[idx][left], minlength=4).tolist()
                rc = np.bincount(cell[idx][~left], minlength=4).tolist()
                if sum(lc) < kmin or sum(rc) < kmin:
                    continue
                if k > 1 and not (k_allows(*lc, k, k_over) and k_allows(*rc, k, k_over)):
                    continue
                score = max(_tau(*lc, p_minus), _tau(*rc, p_minus))
                if score <= t + TOL and score < best - TOL:
                    best, best_j, best_v = score, j, v
        if best_j < 0:
            out.append(("leaf", idx))
            continue
        go_left = ranks[idx, best_j] <= best_v
        stack.append(idx[~go_left])
        stack.append(idx[go_left])
    return out


def assert_same_parts(got, want):
    assert [kind for kind, _ in got] == [kind for kind, _ in want]
    for (_, a), (_, b) in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(0, 120),
    m=st.integers(0, 4),
    levels=st.integers(1, 8),
    t=st.sampled_from([0.0, 0.02, 0.1, 0.25, 0.5, 1.0]),
    k=st.integers(0, 5),
    k_over=st.sampled_from(["classes", "q_blocks"]),
    block_rows=st.one_of(st.none(), st.integers(0, 60)),
    top_heavy=st.floats(0.0, 0.8),
    level_rows=st.sampled_from([0, 16, 40, dmondrian.LEVEL_ROWS]),
    seed=st.integers(0, 2**16),
)
def test_levels_grow_the_tree_of_alg_1(
    n, m, levels, t, k, k_over, block_rows, top_heavy, level_rows, seed
):
    rng = np.random.default_rng(seed)
    ranks = rng.integers(0, levels, (n, m))
    # a share of the values at the maximum: medians that are the maximum (AMB-6's fallback)
    ranks[rng.random((n, m)) < top_heavy] = levels - 1
    cell = rng.integers(0, 4, n)
    p_minus = float(np.isin(cell, (0, 2)).mean()) if n else 0.5
    root = np.arange(n)
    default, dmondrian.LEVEL_ROWS = dmondrian.LEVEL_ROWS, level_rows
    try:
        got = _grow(ranks, cell, t, k, p_minus, root, block_rows, k_over)
    finally:
        dmondrian.LEVEL_ROWS = default
    want = grow_node_by_node(ranks, cell, t, k, p_minus, root, block_rows, k_over)
    assert_same_parts(got, want)


def test_a_root_in_any_order_keeps_its_order_in_every_part():
    """A block's subtree is grown from its rows as the engine handed them over."""
    rng = np.random.default_rng(7)
    ranks = rng.integers(0, 5, (200, 3))
    cell = rng.integers(0, 4, 200)
    root = rng.permutation(200)[:150]
    got = _grow(ranks, cell, 0.3, 2, 0.4, root, None, "classes")
    assert_same_parts(got, grow_node_by_node(ranks, cell, 0.3, 2, 0.4, root, None, "classes"))
    assert len(got) > 5
