"""The canonical publication order (``privfair.components.core.order``) on a Spark cluster.

A row-level release publishes its table in ``published_order``: a stable lexicographic sort
over every column, in column order; a float by its bits (-0.0 before +0.0, a NaN with the sign
bit set before -inf, one without it after +inf, each payload apart), a dictionary column by its
values, nulls last; rows equal in every column keep their prior relative order. On a cluster
(issue 46) the rows never come to the driver: ``sort_published`` is that order as a
distributed ``orderBy`` (Spark range-partitions the rows), and ``write_ordered_parts`` has the
executors write the sorted rows as Parquet parts whose concatenation, read in name order, is
exactly the table ``publish_in_order`` gives today, and the sidecar (``lineage``) permuted the
same way, in parts of the same row ranges.

Spark's own order is not the canonical one and is not relied upon: it sorts -0.0 and +0.0 as
equal and every NaN (whatever its sign or payload) as one value after +inf. A float column is
sorted by a key computed on the executors in Arrow batches (``mapInArrow``), its bits as a
signed integer (``float_sort_key``, the rule of ``order._float_key``). The other flat types
Spark orders as Arrow does: a string by its UTF-8 bytes (Spark's default ``UTF8_BINARY``
collation; not Java's UTF-16 order), a binary by its unsigned bytes, a bool false first,
integers, dates, timestamps and decimals by value. An unsigned column reaches Spark widened
(``uint8`` a short, ``uint16`` an int, ``uint32`` a long, ``uint64`` a ``decimal(20,0)``:
what Spark's Parquet reader makes of them; ``from_arrow_schema`` refuses them) and is written
back in its own type. Nested and map columns are refused (``InputError`` naming the column):
their canonical order is the driver's (``published_order``).

>>> import numpy as np
>>> x = pa.array(np.array([0x7FF8000000000001, 0xFFF8000000000000], np.uint64).view(np.float64))
>>> key = float_sort_key(pa.concat_arrays([pa.array([1.0, -0.0, 0.0, None, -np.inf]), x]))
>>> np.argsort(key.fill_null(2**63 - 1).to_numpy(), kind="stable").tolist()  # nulls last
[6, 4, 1, 2, 0, 5, 3]
>>> part_names(25, 10), part_names(0, 10)
(['part-00000.parquet', 'part-00001.parquet', 'part-00002.parquet'], ['part-00000.parquet'])
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from privfair.components.core.engine import cluster_job
from privfair.components.core.order import canonical_chunks
from privfair.schemas.errors import InputError

if TYPE_CHECKING:  # pragma: no cover - pyspark is the 'spark' extra
    from pyspark.sql import DataFrame

__all__ = [
    "PARQUET_OPTIONS",
    "float_sort_key",
    "part_names",
    "sort_published",
    "write_ordered_parts",
]

PARQUET_OPTIONS: dict = {"compression": "zstd"}
"""The ``pyarrow.parquet.write_table`` options of a published Parquet output (those of
``privfair.release.layout.parquet_bytes``); its row groups are the table's
``canonical_chunks``."""

_SIGNED = {4: np.int32, 8: np.int64}
_PREFIX = "__privfair_order_"
_PID, _IDX, _POS, _PART = (f"{_PREFIX}{n}" for n in ("pid", "idx", "pos", "part"))
_NESTED = (
    pa.types.is_struct,
    pa.types.is_list,
    pa.types.is_large_list,
    pa.types.is_fixed_size_list,
    pa.types.is_list_view,
    pa.types.is_large_list_view,
    pa.types.is_map,
    pa.types.is_union,
)


def float_sort_key(arr: pa.Array) -> pa.Array:
    """The sort key of a float32/float64 array: its bits as a signed integer of its width, every
    bit but the sign flipped for a negative sign, so that the keys' order is the floats' order
    with -0.0 just before +0.0, NaNs with the sign bit before -inf and the others after +inf,
    and each bit pattern (NaN payloads too) a key of its own. Nulls stay null.

    Always the bits (``order._float_key`` gives the column itself where that orders it the same
    way): one key type for every batch of a Spark column.

    Parameters
    ----------
    arr : pyarrow.Array
        A float32 or float64 array.

    Returns
    -------
    pyarrow.Array
        int32 for float32, int64 for float64; ``key = bits ^ ((bits >> (w - 1)) & (2**(w-1) - 1))``
        with ``w`` the bit width.
    """
    width = arr.type.bit_width // 8
    signed = _SIGNED[width]
    bits = arr.fill_null(0).to_numpy(zero_copy_only=False).view(signed)
    top = np.array(np.iinfo(signed).max, dtype=signed)
    key = bits ^ ((bits >> (8 * width - 1)) & top)
    mask = np.asarray(arr.is_null()) if arr.null_count else None
    return pa.array(key, mask=mask)


def part_names(rows: int, rows_per_part: int, prefix: str = "part") -> list[str]:
    """The file names of ``write_ordered_parts`` for ``rows`` rows: ``{prefix}-00000.parquet``,
    ... one per ``rows_per_part`` rows (one for no row), all of one width (five digits, more
    for more than 100000 parts), so that their name order is their row order."""
    n = max(1, -(-rows // rows_per_part))
    width = max(5, len(str(n - 1)))
    return [f"{prefix}-{j:0{width}d}.parquet" for j in range(n)]


def _q(name: str) -> str:
    """A column name as Spark reads it literally (a dot or a space in it is no path)."""
    return "`" + name.replace("`", "``") + "`"


def _plain(t: pa.DataType) -> bool:
    """A flat type whose Spark order is Arrow's (floats aside)."""
    return (
        pa.types.is_boolean(t)
        or pa.types.is_integer(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_date32(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_decimal128(t)
    )


def _kind(field: pa.Field) -> str:
    """How column ``field`` is sorted on Spark: ``'plain'`` (by the column), ``'float'`` (by
    ``float_sort_key``) or ``'none'`` (a null-typed column: no key, as in ``published_order``);
    an ``InputError`` for a type with no Spark twin of its canonical order."""
    t = field.type
    if pa.types.is_dictionary(t):
        v = t.value_type
        if _plain(v):
            return "plain"
        raise InputError(
            field.name,
            "a dictionary column is published on Spark for string, integer, bool, binary, "
            "date, timestamp or decimal values only",
            f"its values are {v}",
        )
    if pa.types.is_null(t):
        return "none"
    if pa.types.is_float32(t) or pa.types.is_float64(t):
        return "float"
    if _plain(t):
        return "plain"
    if any(test(t) for test in _NESTED) or isinstance(t, pa.ExtensionType):
        raise InputError(
            field.name,
            "a nested, map or extension column has no canonical order on Spark: only flat "
            "columns are published from the cluster (the driver's published_order sorts the "
            "others)",
            f"type {t}",
        )
    raise InputError(
        field.name,
        "this type has no canonical order on Spark (bool, integers, float32/64, strings, "
        "binary, date32, timestamps, decimal128 and dictionaries of them are published)",
        f"type {t}",
    )


def _holds(dt, t: pa.DataType) -> bool:
    """Whether a Spark column of type ``dt`` holds the values of Arrow type ``t`` exactly and
    orders them as Arrow does."""
    from pyspark.sql import types as T

    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_null(t):
        return isinstance(dt, T.NullType)
    if pa.types.is_boolean(t):
        return isinstance(dt, T.BooleanType)
    if pa.types.is_integer(t):
        integral = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
        return isinstance(dt, integral) or (isinstance(dt, T.DecimalType) and dt.scale == 0)
    if pa.types.is_float32(t):
        return isinstance(dt, T.FloatType)
    if pa.types.is_float64(t):
        return isinstance(dt, T.DoubleType)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return isinstance(dt, T.StringType) and getattr(dt, "collation", None) in (
            None,
            "UTF8_BINARY",
        )
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return isinstance(dt, T.BinaryType)
    if pa.types.is_date32(t):
        return isinstance(dt, T.DateType)
    if pa.types.is_timestamp(t):
        return isinstance(dt, (T.TimestampType, T.TimestampNTZType))
    if pa.types.is_decimal(t):
        return isinstance(dt, T.DecimalType) and dt.scale == t.scale
    return False


def _check_frame(df: DataFrame, schema: pa.Schema, tie: str, carried: pa.Schema | None) -> None:
    """Every published (and carried) column is a column of ``df`` of a Spark type that holds it;
    ``tie`` is an integer column of its own; no name is one of this module's own."""
    from pyspark.sql import types as T

    spark = {f.name: f.dataType for f in df.schema.fields}
    names = list(schema.names) + (list(carried.names) if carried is not None else []) + [tie]
    if len(set(names)) != len(names):
        raise InputError(None, "the published columns, the lineage columns and tie must differ")
    for name in names:
        if name.startswith(_PREFIX):
            raise InputError(name, f"a column name starting {_PREFIX!r} is this module's own")
        if name not in spark:
            raise InputError(name, "no such column in the Spark frame", f"it has {list(spark)}")
    if not isinstance(spark[tie], T.LongType):
        raise InputError(tie, "the tie column is the rows' prior position, an int64 (long)")
    for f in schema:
        if not _holds(spark[f.name], f.type):
            raise InputError(
                f.name,
                "the Spark column does not hold the published type exactly",
                f"Spark has {spark[f.name].simpleString()} for {f.type}",
            )


def _with_float_keys(columns: list[str], keys: list[str]):
    """What the executors run for ``sort_published``: each Arrow batch with one key column per
    float column (``float_sort_key``) appended."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            added = [float_sort_key(b.column(c)) for c in columns]
            yield pa.RecordBatch.from_arrays([*b.columns, *added], names=[*b.schema.names, *keys])

    return run


def sort_published(df: DataFrame, schema: pa.Schema, tie: str) -> DataFrame:
    """``df`` sorted in the canonical publication order of its columns ``schema``: the order
    ``published_order`` gives the Arrow table of those columns, as a distributed sort.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        The rows, on the cluster. Each column of ``schema`` is a column of ``df`` holding its
        values exactly (a dictionary column as its values; an unsigned one widened, as Spark
        reads it from Parquet; a timestamp as ``timestamp`` or ``timestamp_ntz``); other columns
        ride along.
    schema : pyarrow.Schema
        The published columns, in the order they are compared.
    tie : str
        A long column of ``df``, each row's prior position (distinct, not null): rows equal in
        every published column keep its order, as the stable sort keeps the prior order.

    Returns
    -------
    pyspark.sql.DataFrame
        ``df.orderBy(k_1, ..., k_m, tie)`` (Spark range-partitions it: partition ``p`` holds
        rows before those of ``p + 1``), with ``k_i`` the ``i``-th column of ``schema``, nulls
        last; a float column by ``float_sort_key`` (computed in a ``mapInArrow`` and dropped
        after the sort); a null-typed column none. The rows read in partition order are
        ``T.take(published_order(T))`` for ``T`` the rows of ``schema``'s columns in ``tie``
        order. Its columns are ``df``'s.

    Raises
    ------
    privfair.schemas.errors.InputError
        A nested, map, extension or otherwise unsupported column of ``schema`` (naming it and
        the rule); a column missing from ``df``, or held in a Spark type that does not keep its
        values (a double for a float32, a collated string...); ``tie`` not a long.

    Examples
    --------
    >>> frame = sort_published(df, pa.schema([("x", pa.float64())]), "pos")  # doctest: +SKIP
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    kinds = {f.name: _kind(f) for f in schema}
    _check_frame(df, schema, tie, None)
    floats = [n for n in schema.names if kinds[n] == "float"]
    keys = {n: f"{_PREFIX}key{i}" for i, n in enumerate(floats)}
    keyed = df
    if floats:
        width = {n: schema.field(n).type.bit_width for n in floats}
        out = T.StructType(
            [
                *df.schema.fields,
                *(
                    T.StructField(keys[n], T.IntegerType() if width[n] == 32 else T.LongType())
                    for n in floats
                ),
            ]
        )
        keyed = df.mapInArrow(_with_float_keys(floats, [keys[n] for n in floats]), out)
    order = [F.col(_q(keys.get(n, n))).asc_nulls_last() for n in schema.names if kinds[n] != "none"]
    ordered = keyed.orderBy(*order, F.col(_q(tie)).asc())
    return ordered.drop(*keys.values()) if keys else ordered


def _local_index(pid: str, idx: str):
    """What the executors run on the sorted rows: each row's index among the rows of its
    partition (``pid``), in the order they come, appended as column ``idx``. A loop over the
    partitions a batch holds (one), not over its rows."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        seen: dict[int, int] = {}
        for b in batches:
            p = b.column(pid).to_numpy(zero_copy_only=False)
            out = np.empty(len(p), dtype=np.int64)
            for v in np.unique(p):
                at = p == v
                k = int(at.sum())
                start = seen.get(int(v), 0)
                out[at] = np.arange(start, start + k, dtype=np.int64)
                seen[int(v)] = start + k
            yield pa.RecordBatch.from_arrays([*b.columns, pa.array(out)], [*b.schema.names, idx])

    return run


def _as_schema(table: pa.Table, schema: pa.Schema, dictionaries: Mapping[str, pa.Array]):
    """The columns ``schema`` of ``table`` (Spark's Arrow types) in ``schema``'s own types, field
    and schema metadata: an exact cast (a value out of range raises); a dictionary column
    encoded with the dictionary ``dictionaries`` gives it."""
    n = table.num_rows
    columns = []
    for f in schema:
        col = table.column(f.name)
        if pa.types.is_null(f.type):
            columns.append(pa.nulls(n))
        elif pa.types.is_dictionary(f.type):
            values = col.cast(f.type.value_type).combine_chunks()
            dictionary = dictionaries[f.name]
            indices = pc.index_in(values, value_set=dictionary)
            if indices.null_count != values.null_count:
                raise ValueError(f"column '{f.name}': a value is not in the part's dictionary")
            columns.append(
                pa.DictionaryArray.from_arrays(
                    indices.cast(f.type.index_type), dictionary, ordered=f.type.ordered
                )
            )
        else:
            columns.append(col.cast(f.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _write_atomic(fs: pafs.FileSystem, root: str, name: str, table: pa.Table) -> None:
    """``table`` written to ``root/name`` under a hidden temporary name, then renamed: no reader
    sees a half-written file (a rename within a local folder is atomic); an attempt that
    fails leaves no file behind. Two attempts of one part write the same bytes."""
    tmp = f"{root}/.{name}.{uuid.uuid4().hex}.tmp"
    try:
        pq.write_table(canonical_chunks(table), tmp, filesystem=fs, **PARQUET_OPTIONS)
        fs.move(tmp, f"{root}/{name}")
    except BaseException:
        with contextlib.suppress(OSError):
            fs.delete_file(tmp)
        raise


def _part_writer(
    uri: str,
    rows_per_part: int,
    schema: pa.Schema,
    lineage: pa.Schema | None,
    dictionaries: dict[str, pa.Array],
    names: list[str],
    lineage_names: list[str],
):
    """What the executors run for each part (``applyInArrow`` over the part number): its rows
    in position order, checked to be the part's whole range, written as ``names[j]`` (and the
    lineage columns as ``lineage_names[j]``); one row back, (part, rows)."""

    def run(table: pa.Table) -> pa.Table:
        pos = table.column(_POS).to_numpy()
        order = np.argsort(pos, kind="stable")
        pos = pos[order]
        part = int(pos[0]) // rows_per_part
        if not np.array_equal(pos, np.arange(len(pos)) + part * rows_per_part):
            raise RuntimeError(f"part {part}: its positions are not one range")
        table = table.take(pa.array(order))
        fs, root = pafs.FileSystem.from_uri(uri)
        _write_atomic(fs, root, names[part], _as_schema(table, schema, dictionaries))
        if lineage is not None:
            _write_atomic(fs, root, lineage_names[part], _as_schema(table, lineage, {}))
        return pa.table({"part": [part], "rows": [len(pos)]})

    return run


def _folder_uri(folder: str) -> str:
    """``folder`` as a URI every node resolves the same way (a local path made absolute here)."""
    return folder if "://" in folder else Path(folder).resolve().as_uri()


def _summarise(pid: str, idx: str, columns: list[str]):
    """What the executors run on the indexed rows, once each: per Spark partition (``pid``) met
    in a batch, one row: the partition, the batch's first index in it, its rows, and for each
    of ``columns`` its distinct non-null values in order of first appearance (a list). A loop
    over the partitions a batch holds (one), not over its rows."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            p = b.column(pid).to_numpy(zero_copy_only=False)
            i = b.column(idx).to_numpy(zero_copy_only=False)
            for v in np.unique(p):
                at = p == v
                part = b.filter(pa.array(at))
                out = [pa.array([v], pa.int32()), pa.array([i[at].min()]), pa.array([at.sum()])]
                for c in columns:
                    seen = pc.unique(part.column(c).drop_null())
                    out.append(pa.ListArray.from_arrays(pa.array([0, len(seen)], pa.int32()), seen))
                yield pa.RecordBatch.from_arrays(
                    out, [_PID, "first", "rows", *(f"d{k}" for k in range(len(columns)))]
                )

    return run


def _summary(indexed: DataFrame, schema: pa.Schema) -> pa.Table:
    """The rows of each Spark partition and the distinct values of each dictionary column in
    order of first appearance within it (``_summarise``), collected in partition order: a row
    per partition (per batch), never the rows. One job, which also fills ``indexed``'s cache."""
    from pyspark.sql import types as T

    columns = [f.name for f in schema if pa.types.is_dictionary(f.type)]
    spark = {f.name: f.dataType for f in indexed.schema.fields}
    out = T.StructType(
        [
            T.StructField(_PID, T.IntegerType(), False),
            T.StructField("first", T.LongType(), False),
            T.StructField("rows", T.LongType(), False),
            *(T.StructField(f"d{k}", T.ArrayType(spark[c])) for k, c in enumerate(columns)),
        ]
    )
    with cluster_job("counting the published rows of each partition"):
        got = indexed.mapInArrow(_summarise(_PID, _IDX, columns), out).toArrow()
    return got.sort_by([(_PID, "ascending"), ("first", "ascending")])


def _dictionaries(
    summary: pa.Table, schema: pa.Schema, given: Mapping[str, pa.Array]
) -> dict[str, pa.Array]:
    """Each dictionary column's dictionary, as ``order._canonical_dictionaries`` gives the
    whole published table: an unordered one its distinct values in order of first appearance
    (the partitions' own, in partition order, a value kept where it first appears); an ordered
    one the declared one ``given``, every value checked to be in it."""
    out = {}
    k = 0
    for f in schema:
        if not pa.types.is_dictionary(f.type):
            continue
        if f.type.ordered and f.name not in given:
            raise InputError(
                f.name,
                "an ordered dictionary keeps its declared category order: pass it "
                "(dictionaries={name: values})",
            )
        lists = summary.column(f"d{k}")
        k += 1
        flat = pa.chunked_array([c.flatten() for c in lists.chunks], lists.type.value_type)
        values = pc.unique(flat.combine_chunks()).cast(f.type.value_type)
        if f.type.ordered:
            declared = pa.array(given[f.name]).cast(f.type.value_type)
            if len(values) and not pc.all(pc.is_in(values, value_set=declared)).as_py():
                raise InputError(f.name, "a value is not in its declared dictionary")
            values = declared
        out[f.name] = values
    return out


def write_ordered_parts(
    df: DataFrame,
    schema: pa.Schema,
    folder: str,
    rows_per_part: int,
    tie: str,
    lineage: pa.Schema | None = None,
    dictionaries: Mapping[str, pa.Array] | None = None,
) -> list[tuple[str, int]]:
    """The published table ``schema`` of ``df``, in canonical order, written by the executors
    as Parquet parts of ``rows_per_part`` rows: ``part-00000.parquet``, ... in ``folder``.

    The rows are sorted (``sort_published``); each row's published position is its index in its
    Spark partition plus the rows of the partitions before (one count per partition, collected:
    a row per partition, never the rows); part ``j`` holds positions ``[j * rows_per_part,
    (j + 1) * rows_per_part)``, gathered by part number and written by one executor task with
    pyarrow (``PARQUET_OPTIONS``, row groups of ``canonical_chunks``) under a hidden temporary
    name, then renamed. The driver holds no row: what it collects is one row per partition, per
    part and per distinct value of a dictionary column.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        The rows (see ``sort_published``).
    schema : pyarrow.Schema
        The published columns: the parts' schema, field and schema metadata (roles) kept.
    folder : str
        A local path or URI (``file://``...) every node reaches: created if missing; it must
        hold no part of an earlier write (``part-*``/``lineage-*`` files).
    rows_per_part : int
        Rows of each part (the last one shorter); at least 1.
    tie : str
        The rows' prior position (a long column of ``df``), which orders rows equal in every
        published column.
    lineage : pyarrow.Schema, optional
        The sidecar's columns (columns of ``df``, not published) and types: written as
        ``lineage-00000.parquet``, ... of the parts' row ranges, so that lineage row ``i``
        still describes published row ``i``.
    dictionaries : mapping of str to pyarrow.Array, optional
        The declared dictionary of each *ordered* dictionary column (kept, as
        ``publish_in_order`` keeps it); an unordered one needs none.

    Returns
    -------
    list of (str, int)
        Each part's file name and rows, in order (one empty part for no row, written by the
        driver). Reading the parts in that order and concatenating them gives exactly
        ``publish_in_order(T, L)[0]``, ``T`` the rows of ``schema`` in ``tie`` order: the rows
        of ``T.take(published_order(T))``, its types and metadata, every unordered dictionary
        column in each part with the dictionary ``_canonical_dictionaries`` gives the whole
        table (its distinct values in order of first appearance); the lineage parts give
        ``L.take(published_order(T))``.

    Raises
    ------
    privfair.schemas.errors.InputError
        What ``sort_published`` refuses; ``rows_per_part`` below 1; a lineage column that is
        a dictionary (its dictionary is the input's) or also published; a folder holding
        parts; an ordered dictionary column without its dictionary, or with a value outside it.
    privfair.schemas.errors.ClusterError
        A Spark job failed.

    Examples
    --------
    >>> write_ordered_parts(df, schema, "/shared/out", 1_000_000, "pos")  # doctest: +SKIP
    [('part-00000.parquet', 1000000), ('part-00001.parquet', 234567)]
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if not isinstance(rows_per_part, int) or rows_per_part < 1:
        raise InputError("rows_per_part", "a part holds at least one row", repr(rows_per_part))
    given = dict(dictionaries or {})
    for name in given:
        if name not in schema.names or not schema.field(name).type.ordered:
            raise InputError(name, "dictionaries= gives the dictionary of an ordered one only")
    for f in lineage or ():
        if pa.types.is_dictionary(f.type):
            raise InputError(f.name, "a lineage column is written plain, not as a dictionary")
    _check_frame(df, schema, tie, lineage)
    uri = _folder_uri(folder)
    fs, root = pafs.FileSystem.from_uri(uri)
    fs.create_dir(root, recursive=True)
    old = [
        i.base_name
        for i in fs.get_file_info(pafs.FileSelector(root))
        if i.base_name.startswith(("part-", "lineage-"))
    ]
    if old:
        raise InputError("folder", "the folder holds parts of an earlier write", ", ".join(old))

    carried = list(lineage.names) if lineage is not None else []
    ordered = sort_published(
        df.select(*(_q(n) for n in [*schema.names, *carried, tie])), schema, tie
    )
    with_pid = ordered.withColumn(_PID, F.spark_partition_id())
    out = T.StructType([*with_pid.schema.fields, T.StructField(_IDX, T.LongType(), False)])
    indexed = with_pid.mapInArrow(_local_index(_PID, _IDX), out).persist()
    try:
        summary = _summary(indexed, schema)
        dicts = _dictionaries(summary, schema, given)
        by = summary.group_by(_PID).aggregate([("rows", "sum")]).sort_by(_PID)
        pids = by.column(_PID).to_numpy()
        sizes = by.column("rows_sum").to_numpy()
        n = int(sizes.sum())
        names = part_names(n, rows_per_part)
        lineage_names = part_names(n, rows_per_part, "lineage")
        if n == 0:
            _write_atomic(fs, root, names[0], _as_schema(schema.empty_table(), schema, dicts))
            if lineage is not None:
                _write_atomic(fs, root, lineage_names[0], lineage.empty_table())
            return [(names[0], 0)]
        offsets = np.zeros(int(pids.max()) + 1, dtype=np.int64)
        offsets[pids] = np.cumsum(sizes) - sizes
        start = F.array(*(F.lit(int(o)) for o in offsets))[F.col(_PID)]
        positioned = indexed.withColumn(_POS, start + F.col(_IDX)).withColumn(
            _PART, F.expr(f"{_POS} div {rows_per_part}")
        )
        writer = _part_writer(uri, rows_per_part, schema, lineage, dicts, names, lineage_names)
        with cluster_job("writing the published parts"):
            written = (
                positioned.drop(_PID, _IDX)
                .groupBy(_PART)
                .applyInArrow(writer, "part long, rows long")
                .toArrow()
                .sort_by("part")
            )
    finally:
        indexed.unpersist()
    want = [min(rows_per_part, n - j * rows_per_part) for j in range(len(names))]
    got = written.column("rows").to_pylist()
    if written.column("part").to_pylist() != list(range(len(names))) or got != want:
        raise RuntimeError(f"the parts written hold {got} rows, not {want}")
    return list(zip(names, want, strict=True))
