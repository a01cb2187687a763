"""Synthetic numeric values at the precision of the public bins (not 17 digits), each in the
bin its code names; the precision comes from the bins the spec declares, never from the input."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from privfair.components.synthesis.domain import ColumnDomain, edge_decimals


def test_float_bins_decode_on_the_grid_of_their_edges_and_inside_their_bin():
    edges = (0.0, 2.5, 5.0, 10.0, 17.5)
    dom = ColumnDomain("x", pa.float64(), edges=edges)
    codes = np.arange(20_000) % 4
    vals = dom.decode(codes, np.random.default_rng(0)).to_numpy()
    assert np.all(np.abs(vals * 10 - np.rint(vals * 10)) < 1e-9)  # one decimal, as the edges
    assert all(len(repr(float(v)).split(".")[1]) == 1 for v in vals[:200])
    lo, hi = np.asarray(edges[:-1])[codes], np.asarray(edges[1:])[codes]
    assert np.all((vals >= lo) & (vals < hi))
    # every step of the grid of a bin is drawn (uniform over [lo, hi) at that precision)
    assert set(np.round(vals[codes == 0], 1)) == {i / 10 for i in range(25)}


def test_integer_edges_of_a_float_column_give_one_decimal_and_an_infinite_edge_none():
    assert edge_decimals((0, 10, 20)) == 1
    assert edge_decimals((0, 0.125, 1)) == 3
    assert edge_decimals((0, float("inf"))) is None
    dom = ColumnDomain("x", pa.float64(), edges=(0.0, 1.0, float("inf")))
    assert len(dom.decode(np.array([0, 1]), np.random.default_rng(0))) == 2
