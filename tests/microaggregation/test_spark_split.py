"""The k-d split of a blocked release on Spark (``privfair.components.microaggregation.spark_split``,
issue 46): ``spark_blocks`` gives every row the block ``blocking.split_blocks`` gives it, on the
suite's ``local[2]`` session, whether the blocks are cut by DataFrame levels, finished on the
executors by the NumPy rule, or both.

- Random small tables (ties, constant and missing-coded columns, no numeric or no nominal QI,
  the rows in shuffled order, MDAV's n = 0): the same block ids, with the table's span given or
  read from the first level.
- UCI Adult encoded as a Fair-MDAV run encodes it (fairlets of 12) and as MDAV (k = 12): the
  same block ids with ``block_rows=2000`` and ``local_rows=8000``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from privfair.components.microaggregation.blocking import block_sizes, split_blocks
from privfair.components.microaggregation.encoding import encode_qis, label_01, protected_01
from privfair.components.microaggregation.fair_mdav import fairlet_sizes
from privfair.components.microaggregation.inputs import binary_roles, prepare
from privfair.components.microaggregation.spark_split import spark_blocks


@pytest.fixture(scope="module", autouse=True)
def _few_partitions(spark_engine):
    """Two shuffle partitions while this module runs (tables of a few hundred rows: Spark's
    cost is its tasks), the session's setting restored after."""
    conf = spark_engine.spark.conf
    before = conf.get("spark.sql.shuffle.partitions")
    conf.set("spark.sql.shuffle.partitions", "2")
    yield
    conf.set("spark.sql.shuffle.partitions", before)


def _frame(spark, x: np.ndarray, codes: np.ndarray, pa01: np.ndarray, seed: int = 0):
    """The arrays as a DataFrame of columns x0.., c0.., pa and row, its rows shuffled."""
    n_rows = len(pa01)
    order = np.random.default_rng(seed).permutation(n_rows)
    cols = {"row": pa.array(order.astype(np.int64))}
    cols |= {f"x{j}": pa.array(x[order, j]) for j in range(x.shape[1])}
    cols |= {f"c{j}": pa.array(codes[order, j]) for j in range(codes.shape[1])}
    cols["pa"] = pa.array(pa01[order])
    return spark.createDataFrame(pa.table(cols))


def _blocks(spark, x, codes, pa01, m, n, block_rows, local_rows, span=None) -> np.ndarray:
    """``spark_blocks``'s ids, in row order."""
    df = _frame(spark, x, codes, pa01)
    out = spark_blocks(
        df,
        [f"x{j}" for j in range(x.shape[1])],
        [f"c{j}" for j in range(codes.shape[1])],
        "pa",
        "row",
        m,
        n,
        block_rows,
        span=span,
        local_rows=local_rows,
    )
    assert out.columns == [*df.columns, "block"]
    got = out.select("row", "block").toArrow().sort_by("row")
    assert got.column("row").to_pylist() == list(range(len(pa01)))
    assert got.schema.field("block").type == pa.int64()
    return got.column("block").to_numpy()


@st.composite
def tables(draw):
    n_rows = draw(st.integers(0, 400))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = np.zeros((n_rows, draw(st.integers(0, 2))))
    for j in range(x.shape[1]):
        # few distinct values (1: a constant column), or continuous
        levels = draw(st.integers(0, 5))
        x[:, j] = rng.integers(0, levels, n_rows) if levels else rng.normal(size=n_rows).round(2)
    dtype = draw(st.sampled_from([np.int32, np.int64]))
    codes = np.zeros((n_rows, draw(st.integers(0, 2))), dtype=dtype)
    for j in range(codes.shape[1]):
        codes[:, j] = rng.integers(-1, draw(st.integers(0, 4)), n_rows)  # 0: all missing
    m, n = draw(st.integers(1, 4)), draw(st.integers(0, 3))
    share = draw(st.floats(0.1, 0.9)) if n else 0.0  # n = 0: MDAV, every row unfavoured
    pa01 = (rng.random(n_rows) < share).astype(np.int8)
    block_rows = draw(st.integers(2, 60))
    # a share of the table: levels on Spark then a local finish, down to local only
    local_rows = max(1, int(n_rows * draw(st.sampled_from([0.3, 0.6, 1.0, 2.0]))))
    return x, codes, pa01, m, n, block_rows, local_rows, draw(st.booleans())


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=tables())
@example(
    case=(
        np.arange(300.0)[:, None] % 7,
        np.zeros((300, 1), dtype=np.int64) - 1,
        np.tile(np.array([0, 1, 1], dtype=np.int8), 100),
        2,
        1,
        10,
        40,
        False,
    )
)
def test_spark_blocks_are_split_blocks(spark_engine, case):
    x, codes, pa01, m, n, block_rows, local_rows, given_span = case
    want = split_blocks(x, codes, pa01, m, n, block_rows)
    span = None
    if given_span and len(pa01):
        span = np.ptp(x, axis=0) if x.shape[1] else np.zeros(0)
        span = np.where(span > 0, span, 1.0)
    got = _blocks(spark_engine.spark, x, codes, pa01, m, n, block_rows, local_rows, span)
    np.testing.assert_array_equal(got, want)


@pytest.fixture(scope="module")
def adult_encoded(builtin_table):
    """Adult's QIs as a Fair-MDAV run encodes them, and its protected attribute as 0/1."""
    table, roles, _ = prepare(builtin_table("adult"))
    prot, lab = binary_roles(table, roles)
    pa01, _, _ = protected_01(table, prot, label_01(table, lab))
    return encode_qis(table, roles), pa01


@pytest.mark.parametrize("grouping", ["fairlet", "mdav"])
def test_adult_blocks(spark_engine, adult_encoded, grouping):
    enc, pa01 = adult_encoded
    if grouping == "fairlet":
        m, n, _ = fairlet_sizes(12, int((pa01 == 0).sum()), len(pa01))
    else:
        m, n = None, None
        pa01 = np.zeros(len(pa01), dtype=np.int8)  # MDAV: every row 'unfavoured'
    bu, bf = block_sizes(grouping, 12, m, n)
    want = split_blocks(enc.numeric, enc.codes, pa01, bu, bf, 2000)
    assert want.max() >= 15  # cut by DataFrame levels (> 8000 rows) and locally
    got = _blocks(spark_engine.spark, enc.numeric, enc.codes, pa01, bu, bf, 2000, 8000)
    np.testing.assert_array_equal(got, want)
