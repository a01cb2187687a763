"""The canonical publication order on Spark (``privfair.components.core.spark_order``, issue 46),
on the suite's ``local[2]`` session, against the driver's rule (``core.order``).

- Reading the parts ``write_ordered_parts`` writes, in name order, gives exactly the table
  ``publish_in_order`` gives (values to the bit, -0.0 and NaN payloads apart, types, field
  and schema metadata, each unordered dictionary the whole table's ``_canonical_dictionaries``
  one), and the lineage parts its lineage, for tables of up to 300 rows of 1-3 columns of every
  supported type (a hypothesis property), with several parts (the last shorter) or none.
- ``sort_published`` orders as ``published_order`` does where Spark's own order does not:
  -0.0 before +0.0, NaNs by sign and payload, strings by UTF-8 bytes (not UTF-16), nulls last.
- A nested or map column, or a Spark column that does not hold the published type, is refused
  naming the column.
"""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfair.components.core.order import publish_in_order, published_order
from privfair.components.core.spark_order import (
    PARQUET_OPTIONS,
    float_sort_key,
    part_names,
    sort_published,
    write_ordered_parts,
)
from privfair.schemas.errors import InputError

NAN64 = [0x7FF8000000000000, 0x7FF8000000000001, 0x7FF0000000000001, 0xFFF8000000000000]
NAN32 = [0x7FC00000, 0x7FC00001, 0x7F800001, 0xFFC00000]
SPECIAL = [0.0, -0.0, float("inf"), float("-inf"), 1.5, -2.25]
TEXT = ["", "a", "B", "é", "e", "z", "\uffff", "\U0001f600", "日本", "a\x00"]

TYPES = {
    "bool": pa.bool_(),
    "int8": pa.int8(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "string": pa.string(),
    "large_string": pa.large_string(),
    "binary": pa.binary(),
    "date32": pa.date32(),
    "timestamp": pa.timestamp("us"),
    "timestamp_tz": pa.timestamp("ms", tz="UTC"),
    "decimal": pa.decimal128(12, 3),
    "dict_string": pa.dictionary(pa.int32(), pa.string()),
    "dict_int": pa.dictionary(pa.int8(), pa.int64()),
}


@pytest.fixture(scope="module", autouse=True)
def _few_shuffle_partitions(spark_engine):
    """Two shuffle partitions for this module's tiny tables (the session's 8 otherwise): a
    sort still spans both, and each example runs a few seconds less."""
    conf = spark_engine.spark.conf
    before = conf.get("spark.sql.shuffle.partitions")
    conf.set("spark.sql.shuffle.partitions", "2")
    yield
    conf.set("spark.sql.shuffle.partitions", before)


def _floats(width: int) -> st.SearchStrategy:
    """Bit patterns of floats of ``width`` bits: the special values, NaN payloads, any float."""
    kind, uint = (np.float64, np.uint64) if width == 64 else (np.float32, np.uint32)
    nans = NAN64 if width == 64 else NAN32
    special = [int(np.array(v, kind).view(uint)) for v in SPECIAL] + nans
    anything = st.floats(width=width, allow_nan=False).map(
        lambda v: int(np.array(v, kind).view(uint))
    )
    return st.one_of(st.sampled_from(special), anything)


def _values(name: str) -> st.SearchStrategy:
    """Python values of column type ``name`` (few distinct ones: rows repeat)."""
    small = st.integers(-3, 3)
    return {
        "bool": st.booleans(),
        "int8": st.sampled_from([-128, -1, 0, 1, 127]),
        "int64": st.one_of(small, st.sampled_from([-(2**63), 2**63 - 1])),
        "uint8": st.sampled_from([0, 1, 200, 255]),
        "uint32": st.sampled_from([0, 7, 2**31, 2**32 - 1]),
        "uint64": st.sampled_from([0, 1, 2**63, 2**64 - 1]),
        "float32": _floats(32),
        "float64": _floats(64),
        "string": st.sampled_from(TEXT),
        "large_string": st.sampled_from(TEXT),
        "binary": st.sampled_from([b"", b"\x00", b"\x7f", b"\x80", b"\xff", b"\xff\x00"]),
        "date32": st.integers(-800, 800),
        "timestamp": st.sampled_from([-(10**15), -1, 0, 1, 10**15]),
        "timestamp_tz": st.sampled_from([-(10**12), 0, 999, 10**12]),
        "decimal": st.sampled_from(["-1.500", "0.000", "0.001", "999999999.999"]),
        "dict_string": st.sampled_from(TEXT[:6]),
        "dict_int": st.sampled_from([5, -1, 3, 2**40]),
    }[name]


def _column(name: str, values: list) -> pa.Array:
    t = TYPES[name]
    if name.startswith("float"):
        uint, kind = (np.uint64, np.float64) if t.bit_width == 64 else (np.uint32, np.float32)
        bits = np.array([0 if v is None else v for v in values], dtype=uint)
        mask = np.array([v is None for v in values], dtype=bool)
        return pa.array(bits.view(kind), type=t, mask=mask)
    if name == "decimal":
        from decimal import Decimal

        values = [None if v is None else Decimal(v) for v in values]
    if name.startswith("dict"):
        return pa.array(values, t.value_type).dictionary_encode().cast(t)
    return pa.array(values, t)


@st.composite
def tables(draw) -> tuple[pa.Table, int]:
    """A published table of 0-300 rows and 1-3 columns (nulls, repeats), its row order being
    its prior order, and a part size."""
    n = draw(st.integers(0, 300))
    names = draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=3))
    columns, fields = [], []
    for i, name in enumerate(names):
        pool = draw(st.lists(_values(name), min_size=1, max_size=8))
        pool += [None] * draw(st.integers(0, 2))
        values = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
        columns.append(_column(name, values))
        fields.append(pa.field(f"c{i} {name}", TYPES[name], metadata={"role": f"r{i}"}))
    schema = pa.schema(fields, metadata={"release": "x"})
    rows = draw(st.integers(max(1, n // 12), n + 5))
    return pa.Table.from_arrays(columns, schema=schema), rows


def _exact(table: pa.Table) -> pa.Table:
    """``table`` in one chunk, each float column as its bits (a signed integer, nulls kept): its
    ``equals`` is then equality of every value to the bit (-0.0 is not 0.0, each NaN payload
    its own), of nulls and of each dictionary, whatever lies under a null."""
    table = table.combine_chunks()
    for i, f in enumerate(table.schema):
        if pa.types.is_floating(f.type):
            arr = table.column(i).chunk(0) if table.num_rows else pa.array([], f.type)
            kind = np.int64 if f.type.bit_width == 64 else np.int32
            bits = arr.fill_null(0).to_numpy(zero_copy_only=False).view(kind)
            mask = np.asarray(arr.is_null()) if arr.null_count else None
            table = table.set_column(i, f.name, pa.array(bits, mask=mask))
    return table


def _frame(spark, table: pa.Table, tmp_path):
    """``table`` on the cluster, as Spark reads it from Parquet (an unsigned column widened, a
    dictionary column its values), beside its prior position ``pos``."""
    path = tmp_path / f"input-{np.random.default_rng().integers(1 << 62)}.parquet"
    pq.write_table(table, path)
    return spark.read.parquet(str(path))


def _with_prior(table: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The rows with their prior position ``pos``, and a lineage (``row_id``, ``group``)."""
    n = table.num_rows
    lineage = pa.table(
        {
            "row_id": pa.array(np.arange(n, dtype=np.int64) * 7 + 3),
            "group": pa.array((np.arange(n) % 5).astype(np.uint16)),
        }
    )
    rows = table.append_column("pos", pa.array(np.arange(n, dtype=np.int64)))
    for f in lineage.schema:
        rows = rows.append_column(f.name, lineage.column(f.name))
    return rows.replace_schema_metadata(None), lineage


def _single_file(table: pa.Table) -> pa.Table:
    """``table`` as today's single published file reads back (``parquet_bytes``' options)."""
    buf = io.BytesIO()
    pq.write_table(table, buf, **PARQUET_OPTIONS)
    return pq.read_table(buf)


def _read_parts(folder, names) -> pa.Table:
    return pa.concat_tables([pq.read_table(folder / n) for n in names])


def _check_round_trip(spark, table: pa.Table, rows_per_part: int, tmp_path) -> None:
    rows, lineage = _with_prior(table)
    df = _frame(spark, rows, tmp_path)
    folder = tmp_path / f"out-{np.random.default_rng().integers(1 << 62)}"
    parts = write_ordered_parts(df, table.schema, str(folder), rows_per_part, "pos", lineage.schema)
    n = table.num_rows
    names = part_names(n, rows_per_part)
    sizes = [min(rows_per_part, n - j * rows_per_part) for j in range(len(names))] if n else [0]
    assert parts == list(zip(names, sizes, strict=True))
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        names + part_names(n, rows_per_part, "lineage")
    )  # no temporary file left
    published, published_lineage = publish_in_order(table, lineage)
    want, want_lineage = _single_file(published), _single_file(published_lineage)
    got = _read_parts(folder, names)
    got_lineage = _read_parts(folder, part_names(n, rows_per_part, "lineage"))
    assert got.schema.equals(want.schema, check_metadata=True)
    for name in got.column_names:
        # Parquet keeps a string dictionary (an integer one reads back plain, as today's file)
        if n and pa.types.is_dictionary(got.schema.field(name).type):
            dictionary = published.column(name).chunk(0).dictionary  # _canonical_dictionaries'
            assert all(c.dictionary.equals(dictionary) for c in got.column(name).chunks), name
    assert _exact(got).equals(_exact(want))
    assert got_lineage.equals(want_lineage, check_metadata=True)
    order = published_order(table)
    assert got_lineage.column("row_id").to_pylist() == (order * 7 + 3).tolist()


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=tables())
def test_the_parts_read_in_order_are_the_published_table(spark_engine, tmp_path, case):
    table, rows_per_part = case
    _check_round_trip(spark_engine.spark, table, rows_per_part, tmp_path)


def test_several_parts_the_last_shorter_and_no_row(spark_engine, tmp_path):
    table = pa.table(
        {
            "x": pa.array([2.0, -0.0, 0.0, float("nan"), None, 1.0, 2.0] * 3),
            "y": pa.array(list("bacbadb") * 3).dictionary_encode(),
        }
    )
    _check_round_trip(spark_engine.spark, table, 4, tmp_path)  # 6 parts, the last of 1 row
    _check_round_trip(spark_engine.spark, table.slice(0, 0), 4, tmp_path)


def test_sort_published_is_not_sparks_own_order(spark_engine, tmp_path):
    x = np.array([0.0, -0.0, 1.0, 0.0, -0.0], dtype=np.float64)
    nans = np.array(NAN64, dtype=np.uint64).view(np.float64)
    table = pa.table(
        {
            "x": pa.array(np.concatenate([x, nans, x[:2]])),
            "s": pa.array(
                ["\U0001f600", "\uffff", "z", "é", "e", "\uffff", "a", "", "B", "é", None]
            ),
        }
    )
    rows, _ = _with_prior(table)
    df = _frame(spark_engine.spark, rows, tmp_path)
    got = sort_published(df, table.schema, "pos").select("pos").toArrow()
    assert got.column("pos").to_numpy().tolist() == published_order(table).tolist()
    spark_own = df.orderBy("x", "s", "pos").select("pos").toArrow().column("pos").to_pylist()
    assert spark_own != got.column("pos").to_pylist()  # Spark's order is not the rule


def test_float_sort_key_is_the_bit_order():
    bits = np.array(NAN32 + [0x80000000, 0, 0x7F800000, 0xFF800000], dtype=np.uint32)
    arr = pa.array(bits.view(np.float32))
    key = float_sort_key(arr).to_numpy()
    assert key.dtype == np.int32
    assert np.argsort(key, kind="stable").tolist() == published_order(pa.table({"x": arr})).tolist()


@pytest.mark.parametrize(
    "field",
    [
        pa.field("band", pa.struct([("lo", pa.int64())])),
        pa.field("purpose", pa.list_(pa.string())),
        pa.field("attrs", pa.map_(pa.string(), pa.int64())),
    ],
)
def test_a_nested_or_map_column_is_refused_naming_it(spark_engine, field):
    df = spark_engine.spark.createDataFrame(pa.table({"pos": pa.array([0], pa.int64())}))
    with pytest.raises(InputError, match=f"column '{field.name}': a nested, map") as e:
        sort_published(df, pa.schema([field]), "pos")
    assert e.value.column == field.name


def test_a_spark_column_of_another_type_is_refused_naming_it(spark_engine):
    df = spark_engine.spark.createDataFrame(
        pa.table({"x": pa.array([1.0]), "pos": pa.array([0], pa.int64())})
    )
    with pytest.raises(InputError, match="column 'x': the Spark column does not hold"):
        sort_published(df, pa.schema([("x", pa.float32())]), "pos")
    with pytest.raises(InputError, match="column 'rows_per_part'"):
        write_ordered_parts(df, pa.schema([("x", pa.float64())]), "/nonexistent", 0, "pos")
