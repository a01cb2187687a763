"""dMondrian grown in blocks (``block_rows``) on any engine gives exactly the unblocked classes:
each cut is measured against the global p-, so where a subtree is grown does not matter."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfair.components.core.engine import LocalEngine, using
from privfair.components.generalisation.dmondrian import dmondrian, dmondrian_classes
from privfair.components.generalisation.params import DMondrianParams


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 300),
    m=st.integers(1, 4),
    t=st.floats(0.0, 0.5),
    k=st.integers(1, 6),
    block_rows=st.integers(2, 200),
    seed=st.integers(0, 2**16),
)
def test_blocked_classes_equal_unblocked(n, m, t, k, block_rows, seed):
    rng = np.random.default_rng(seed)
    ranks = rng.integers(0, 6, (n, m))
    cell = rng.integers(0, 4, n)
    p_minus = float(np.isin(cell, (0, 2)).mean())
    plain = dmondrian_classes(ranks, cell, t, k, p_minus)
    blocked = dmondrian_classes(ranks, cell, t, k, p_minus, block_rows)
    assert (plain == blocked).all()


@pytest.mark.parametrize("workers", [1, 2])
def test_adult_release_is_the_same_in_blocks(builtin_table, workers):
    from privfair.run.flow import ingest
    from privfair.spec.catalogue import load_spec
    from privfair.spec.settings import specs_dir

    spec = load_spec(specs_dir() / "adult_dmondrian.yaml")
    table = ingest(spec).table
    plain = dmondrian(table, DMondrianParams(t=0.15, utility_queries=0))
    with using(LocalEngine(workers)):
        blocked = dmondrian(table, DMondrianParams(t=0.15, utility_queries=0, block_rows=5000))
    assert blocked.outputs["data"].equals(plain.outputs["data"])
    assert blocked.sidecars["lineage"].equals(plain.sidecars["lineage"])
