"""The local frame's contract (``privfair.components.core.frames``): on random tables, a
``TableFrame``'s counts through ``LocalEngine.group_counts`` are Arrow's whole-table
``group_by`` count itself (the same rows, nulls and NaN included, the same schema) whatever the batch size, every batch a function sees holds at most ``batch_rows``
rows, the batch functions run lazily and in order, its row, null and column sums need no
whole-table copy, and a column's values are refused."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfair.components.core.engine import LocalEngine, RowsOnCluster, SparkFrame, null_count
from privfair.components.core.frames import RowsNotRead, TableFrame, as_frame, batch_counts

SCHEMA = pa.schema([("i", pa.int64()), ("s", pa.string()), ("f", pa.float64()), ("b", pa.bool_())])

_ints = st.one_of(st.none(), st.integers(-3, 3))
_strs = st.one_of(st.none(), st.sampled_from(["a", "b", "", "é"]))
_floats = st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, math.nan, math.inf]))
_bools = st.one_of(st.none(), st.booleans())


@st.composite
def tables(draw) -> pa.Table:
    """A table of 0 to 300 rows over few values of four types (nulls in every column), cut
    into random chunks, as an ingest's memory-mapped table may be."""
    n = draw(st.integers(0, 300))
    cols = [
        draw(st.lists(strategy, min_size=n, max_size=n))
        for strategy in (_ints, _strs, _floats, _bools)
    ]
    table = pa.table([pa.array(c, f.type) for c, f in zip(cols, SCHEMA, strict=True)], SCHEMA)
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=4)))
    chunks = [table.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
    return pa.concat_tables(chunks) if chunks else table


KEYS = [("i",), ("s", "f"), ("b", "i", "s"), ("f",), ("i", "s", "f", "b")]


def _same(got: pa.Table, want: pa.Table) -> bool:
    """The same schema and the same rows, a float compared by its bits' text (NaN equals
    NaN, -0.0 is not 0.0); in any order: Arrow's own group-by of several keys lists its
    groups in no set order (the consumers sort them)."""

    def rows(t: pa.Table) -> list:
        return [
            tuple(v.hex() if isinstance(v, float) else v for v in r.values()) for r in t.to_pylist()
        ]

    def key(row: tuple) -> str:
        return repr(row)

    return got.schema == want.schema and sorted(rows(got), key=key) == sorted(rows(want), key=key)


def _whole(table: pa.Table, cols) -> pa.Table:
    g = table.select(list(cols)).group_by(list(cols), use_threads=False)
    return g.aggregate([([], "count_all")]).rename_columns([*cols, "count"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=tables(), batch_rows=st.integers(1, 70), hold=st.integers(1, 200))
def test_counts_are_the_whole_tables_group_by(table, batch_rows, hold):
    frame = TableFrame(table, batch_rows=batch_rows)
    engine = LocalEngine()
    got = engine.group_counts(frame, KEYS)
    assert engine.calls == 1
    for cols, g in zip(KEYS, got, strict=True):
        assert _same(g, _whole(table, cols))
    # summing the per-batch counts early (a small ``hold``) changes nothing either
    for cols, g in zip(KEYS, batch_counts(frame, KEYS, hold=hold), strict=True):
        assert _same(g, _whole(table, cols))
    assert sum(g.column("count").to_numpy().sum() for g in got[:1]) == table.num_rows


@settings(max_examples=30, deadline=None)
@given(table=tables(), batch_rows=st.integers(1, 70))
def test_batches_are_bounded_and_functions_lazy(table, batch_rows):
    seen: list[int] = []

    def doubled(t: pa.Table) -> pa.Table:
        seen.append(t.num_rows)
        assert t.schema.metadata is None and all(f.metadata is None for f in t.schema)
        return pa.table({"j": pc.multiply(t.column("i"), 2), "i": t.column("i")})

    roled = table.replace_schema_metadata({"roles": "x"})
    frame = TableFrame(roled, batch_rows=batch_rows)
    out_schema = pa.schema([("j", pa.int64()), ("i", pa.int64())])
    mapped = frame.map_batches(doubled, out_schema).map_batches(
        lambda t: t.select(["j"]), pa.schema([("j", pa.int64())])
    )
    assert seen == []  # nothing runs until the frame is read
    assert mapped.num_rows == table.num_rows and mapped.column_names == ["j"]
    total = mapped.sums(["j"])["j"]
    assert all(0 < r <= batch_rows for r in seen) and sum(seen) == table.num_rows
    assert total == 2 * int(pc.sum(table.column("i")).as_py() or 0)
    assert mapped.null_counts() == {"j": table.column("i").null_count}
    assert frame.null_counts() == {n: table.column(n).null_count for n in table.column_names}
    assert null_count(frame, "s") == table.column("s").null_count


def test_a_column_is_refused_and_frames_are_one_type():
    table = pa.table({"a": [1, 2]})
    frame = as_frame(table)
    assert as_frame(frame) is frame and frame.persist() is frame
    for ask in (lambda: frame.column("a"), lambda: frame["a"]):
        with pytest.raises(RowsNotRead, match="column 'a'"):
            ask()
    # the cluster's frame is the same kind of frame, refusing with its own message
    spark = SparkFrame(None, table.schema, rows=2)
    assert isinstance(spark, type(frame).__mro__[1])
    with pytest.raises(RowsOnCluster, match="stay on the Spark cluster"):
        spark.column("a")
    assert issubclass(RowsOnCluster, RowsNotRead)


def test_an_empty_table_counts_as_arrow_does():
    table = SCHEMA.empty_table()
    frame = TableFrame(table)
    assert list(frame.batches()) == []
    for cols, g in zip(KEYS, LocalEngine().group_counts(frame, KEYS), strict=True):
        assert _same(g, _whole(table, cols))
    assert frame.sums(["i"]) == {"i": 0}


def test_a_spark_frame_is_refused_by_the_local_engine():
    with pytest.raises(Exception, match="count them with the spark engine"):
        LocalEngine().group_counts(SparkFrame(None, SCHEMA), [("i",)])


def test_a_memory_mapped_table_is_read_in_slices():
    """The batches of a table are zero-copy slices of its chunks: a 200,000-row table of one
    chunk gives 4 batches of at most 65,536 rows that share its buffer."""
    table = pa.table({"i": np.arange(200_000, dtype=np.int64) % 7})
    frame = TableFrame(table)
    batches = list(frame.batches())
    assert [b.num_rows for b in batches] == [65_536, 65_536, 65_536, 3_392]
    base = table.column("i").chunk(0).buffers()[1].address
    second = batches[1].column("i").chunk(0)
    assert second.buffers()[1].address == base and second.offset == 65_536
    (got,) = LocalEngine().group_counts(frame, [("i",)])
    assert _same(got, _whole(table, ("i",)))
