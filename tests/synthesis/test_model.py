"""The tree model (spec 1.3, 3.6): fitted to exact marginals of a tree distribution it
recovers them; fitted to noisy ones it is a consistent tree distribution; sampling keeps the
model's marginals up to rounding and the independences the tree implies."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfair.components.synthesis.checks import conditional_mi, g_test
from privfair.components.synthesis.model import (
    Measurement,
    fit_independent,
    fit_tree,
    noisy_total,
    sample,
)


def tree_distribution(rng, sizes, edges):
    """A random distribution factorising over the oriented tree ``edges`` (parent, child)."""
    root = rng.dirichlet(np.ones(sizes[edges[0][0]]))
    conds = {e: rng.dirichlet(np.ones(sizes[e[1]]), size=sizes[e[0]]) for e in edges}
    d = len(sizes)
    joint = np.zeros(sizes)
    for idx in np.ndindex(*sizes):
        p = root[idx[edges[0][0]]]
        for a, b in edges:
            p *= conds[(a, b)][idx[a], idx[b]]
        joint[idx] = p
    return joint, d


def marg(joint, axes):
    other = tuple(i for i in range(joint.ndim) if i not in axes)
    return joint.sum(axis=other)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_exact_marginals_are_recovered(seed):
    rng = np.random.default_rng(seed)
    sizes = [2, 3, 4, 2]
    edges = [(0, 1), (1, 2), (1, 3)]
    joint, d = tree_distribution(rng, sizes, edges)
    n = 1000.0
    ms = [Measurement((i,), n * marg(joint, (i,)), np.ones(sizes[i])) for i in range(d)]
    ms += [
        Measurement(e, n * marg(joint, e).ravel(), np.ones(sizes[e[0]] * sizes[e[1]]))
        for e in edges
    ]
    model = fit_tree(ms, sizes, edges, iters=3000)
    assert noisy_total(ms) == pytest.approx(n)
    for e in edges:
        # mirror descent from the uniform model: within 0.03% of n after 3,000 iterations
        assert model.edge[e] == pytest.approx(n * marg(joint, e), abs=0.3)


def test_noisy_fit_is_a_consistent_tree_distribution():
    rng = np.random.default_rng(1)
    sizes, edges = [3, 4, 2], [(0, 1), (1, 2)]
    joint, d = tree_distribution(rng, sizes, edges)
    ms = [
        Measurement(
            (i,), 500 * marg(joint, (i,)) + rng.normal(0, 20, sizes[i]), np.full(sizes[i], 400.0)
        )
        for i in range(d)
    ]
    ms += [
        Measurement(
            e,
            (500 * marg(joint, e)).ravel() + rng.normal(0, 20, sizes[e[0]] * sizes[e[1]]),
            np.full(sizes[e[0]] * sizes[e[1]], 400.0),
        )
        for e in edges
    ]
    model = fit_tree(ms, sizes, edges, iters=500)
    a, b = model.edge[(0, 1)], model.edge[(1, 2)]
    assert (a >= 0).all() and (b >= 0).all()
    assert a.sum(axis=0) == pytest.approx(b.sum(axis=1))  # the shared node agrees
    assert a.sum() == pytest.approx(model.total)


def test_independent_fit_is_the_weighted_projection():
    m = Measurement((0,), np.array([60.0, -5.0, 45.0]), np.ones(3))
    (x,) = fit_independent([m], 100.0)
    assert x.sum() == pytest.approx(100.0) and (x >= 0).all()
    assert x == pytest.approx([57.5, 0.0, 42.5])


def test_sampling_keeps_marginals_and_the_tree_independences():
    rng = np.random.default_rng(3)
    sizes, edges = [2, 3, 2], [(0, 1), (1, 2)]
    joint, d = tree_distribution(rng, sizes, edges)
    n = 20_000
    ms = [Measurement((i,), n * marg(joint, (i,)), np.ones(sizes[i])) for i in range(d)]
    ms += [
        Measurement(e, n * marg(joint, e).ravel(), np.ones(sizes[e[0]] * sizes[e[1]]))
        for e in edges
    ]
    model = fit_tree(ms, sizes, edges, iters=2000)
    data = sample(model, n, rng)
    assert np.bincount(data[:, 0], minlength=2) == pytest.approx(n * marg(joint, (0,)), abs=1)
    counts = np.zeros(sizes)
    np.add.at(counts, tuple(data.T), 1)
    assert conditional_mi(np.transpose(counts, (0, 1, 2))) < 1e-3  # I(x0; x2 | x1) ~ 0
    assert g_test(data[:, 0], data[:, 2], data[:, 1])[2] > 1e-4
