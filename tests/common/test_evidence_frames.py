"""The frames checkers read, built without a Python object per row where they can be: the
published frame keeps generalised labels (struct, list columns) Arrow-backed, and grouping on
them (k-anonymity) partitions the rows as grouping on the frozen Python cells does; the audit's
raw-value columns hold the values ``to_pylist`` gives."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from privfair.components.core.checks import check_k_anonymity, hashable, published_frame
from privfair.components.generalisation.dmondrian import dmondrian
from privfair.components.generalisation.examples import dmondrian_example
from privfair.schemas.contracts import KAnonymity

_interval = st.none() | st.fixed_dictionaries(
    {"lo": st.none() | st.integers(0, 2), "hi": st.none() | st.integers(0, 2)}
)
_value_set = st.none() | st.lists(st.sampled_from(["a", "b", None]), max_size=3)


def _partition(frame: pd.DataFrame, columns: list[str]) -> set[frozenset[int]]:
    group = hashable(frame, columns).groupby(columns, dropna=False, sort=False).ngroup()
    return {frozenset(ix) for ix in group.groupby(group).groups.values()}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_interval, _value_set, st.integers(0, 1)), min_size=1, max_size=40))
def test_grouping_on_arrow_labels_equals_grouping_on_python_cells(rows):
    table = pa.table(
        {
            "age": pa.array([r[0] for r in rows], pa.struct({"lo": pa.int64(), "hi": pa.int64()})),
            "job": pa.array([r[1] for r in rows], pa.list_(pa.string())),
            "y": pa.array([r[2] for r in rows], pa.int8()),
        }
    )
    cols = ["age", "job", "y"]
    for t in (table, table.slice(len(rows) // 2)):  # a slice's children start at its offset
        assert _partition(published_frame(t), cols) == _partition(t.to_pandas(), cols)


def test_a_generalised_release_is_read_without_a_python_object_per_row():
    table, params = dmondrian_example(0)
    data = dmondrian(table, params).outputs["data"]
    frame = published_frame(data)
    nested = [f.name for f in data.schema if pa.types.is_nested(f.type)]
    assert nested  # intervals and value sets
    for c in nested:
        assert isinstance(frame[c].dtype, pd.ArrowDtype)
        assert pa.array(frame[c].array).equals(data.column(c).combine_chunks())
    flat = [f.name for f in data.schema if f.name not in nested]
    pd.testing.assert_frame_equal(frame[flat], data.select(flat).to_pandas())

    qis = [f.name for f in data.schema if f.metadata[b"privfair.role"] == b"quasi_identifier"]
    for k in (1, 2, 5, 1000):
        g = KAnonymity(k=k, quasi_identifiers=tuple(qis))
        new, old = check_k_anonymity(g, frame), check_k_anonymity(g, data.to_pandas())
        assert (new.passed, new.observed, new.message) == (old.passed, old.observed, old.message)


_COLUMNS = st.one_of(
    st.lists(st.none() | st.text(max_size=3)).map(lambda v: pa.chunked_array([v], pa.string())),
    st.lists(st.none() | st.text(max_size=3)).map(
        lambda v: pa.chunked_array([v], pa.large_string())
    ),
    st.lists(st.none() | st.integers(-(2**40), 2**40)).map(
        lambda v: pa.chunked_array([v], pa.int64())
    ),
    st.lists(st.none() | st.integers(-128, 127)).map(lambda v: pa.chunked_array([v], pa.int8())),
    st.lists(st.none() | st.floats()).map(lambda v: pa.chunked_array([v], pa.float64())),
    st.lists(st.none() | st.booleans()).map(lambda v: pa.chunked_array([v], pa.bool_())),
)


@settings(max_examples=300, deadline=None)
@given(_COLUMNS)
def test_the_audit_s_column_objects_are_the_python_values(col):
    """``lineage_audit``'s ``__in_col__`` / ``__out_col__`` arrays hold what ``to_pylist``
    gives (same values, same Python types, None for a null), however they are built."""
    from privfair.components.core.evidence import _objects

    got, want = _objects(col).tolist(), col.to_pylist()
    assert [type(x) for x in got] == [type(x) for x in want]
    assert [repr(x) for x in got] == [repr(x) for x in want]


_FLAT = {
    "f": st.none() | st.sampled_from([0.0, -0.0, 1.5, float("nan"), float("inf")]),
    "i": st.integers(-2, 2),
    "s": st.none() | st.sampled_from(["a", "b", ""]),
    "b": st.booleans(),
    "big": st.integers(0, 2**40),  # many distinct values: the ids are renumbered on the way
}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.fixed_dictionaries(_FLAT), min_size=1, max_size=40),
    st.lists(st.sampled_from(sorted(_FLAT) * 3), min_size=1, max_size=8),
)
def test_class_sizes_are_pandas_groups(rows, columns):
    """The classes combined a column at a time are pandas' ``groupby(dropna=False)``'s, in its
    order, over numbers with NaN, -0.0 and missing values, strings with missing values and
    booleans, a column named more than once included, on the frame as pandas reads a published
    table."""
    from privfair.components.core.checks import class_sizes

    table = pa.table(
        {
            "f": pa.array([r["f"] for r in rows], pa.float64(), from_pandas=False),
            "i": pa.array([r["i"] for r in rows], pa.int64()),
            "s": pa.array([r["s"] for r in rows], pa.string()),
            "b": pa.array([r["b"] for r in rows], pa.bool_()),
            "big": pa.array([r["big"] for r in rows], pa.int64()),
        }
    )
    frame = published_frame(table)
    names = list(dict.fromkeys(columns))
    want = frame.groupby(names, dropna=False, sort=False).size().tolist()
    assert class_sizes(frame, columns).tolist() == want
