"""dSabre's take-out with seeds drawn ahead gives the classes of the plain leaf-by-leaf run.

``take_out`` draws the seeds of the next leaves on a copy of the generator and batch-queries
neighbour lists for them, winding the generator back when a nearest-neighbour step took a seed
drawn ahead; a generator that is not a ``numpy.random.Generator`` (a stand-in that only draws)
runs every leaf on its own. Both must put every row in the same class.
"""

from __future__ import annotations

import numpy as np
import pytest

from privfair.components.generalisation.dsabre import _distinct_rows, dichotomize, take_out
from privfair.components.generalisation.measures import t_max


class _Plain:
    """A generator that only draws (no bit generator to copy): no seed is drawn ahead."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def integers(self, *args, **kwargs):
        return self.rng.integers(*args, **kwargs)


def _table(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cell, ranks, sizes) of a random table with few distinct points (ties in distance)."""
    rng = np.random.default_rng(seed)
    sizes = np.array([7, 3, 5, 2])
    ranks = np.column_stack([rng.integers(1, s + 1, n) for s in sizes])
    prot = rng.random(n) < 0.3
    neg = rng.random(n) < np.where(prot, 0.8, 0.6)
    cell = np.where(prot, np.where(neg, 0, 1), np.where(neg, 2, 3))
    return cell, ranks, sizes


@pytest.mark.parametrize("rule", ["min_ratio", "random"])
@pytest.mark.parametrize("seed", [0, 1])
def test_drawn_ahead_equals_leaf_by_leaf(rule: str, seed: int) -> None:
    cell, ranks, sizes = _table(3000, seed)
    counts = tuple(int(c) for c in np.bincount(cell, minlength=4))
    p_minus = (counts[0] + counts[2]) / len(cell)
    for t in np.linspace(0.05, t_max(p_minus), 6):
        leaves = dichotomize(counts, float(t), 1, p_minus)
        ahead = take_out(leaves, cell, ranks, sizes, np.random.default_rng(seed), rule)
        plain = take_out(leaves, cell, ranks, sizes, _Plain(seed), rule)
        assert (ahead >= 0).all()
        assert np.array_equal(ahead, plain), (rule, seed, t)


def test_distinct_rows_is_numpy_unique() -> None:
    rng = np.random.default_rng(5)
    for shape, hi in (((0, 3), 4), ((500, 1), 3), ((2000, 6), 9), ((300, 4), 2**20)):
        a = rng.integers(0, hi, shape)
        pts, inv = np.unique(a, axis=0, return_inverse=True)
        got_pts, got_inv = _distinct_rows(a)
        assert np.array_equal(pts, got_pts) and np.array_equal(inv.ravel(), got_inv)
