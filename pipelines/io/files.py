"""Tables as bytes: the fingerprint of a table's values, and CSV files read as privfair reads
them (one place for both, used by ``ingest`` for files and ``connectors`` for remote sources).
"""

from __future__ import annotations

import contextvars
import hashlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from privfair.components.core import memory
from privfair.schemas.errors import InputError, SpecError
from privfair.schemas.spec import CsvSpec

__all__ = [
    "SOURCE_CSV",
    "csv_frame",
    "parquet_parts",
    "parts_schema",
    "read_csv",
    "read_parquet_folder",
    "spark_uri",
    "table_fingerprint",
]


def table_fingerprint(table: pa.Table) -> str:
    """sha256 of a table's schema and values: its Arrow IPC stream in batches of
    ``memory.CHUNK_ROWS`` rows, each copied into fresh buffers from whatever chunks the rows
    came in (how the table was read, or cut, does not matter).

    The stream goes straight into the hash, a batch at a time: a 10M-row table is neither
    combined nor serialised whole.

    >>> a = pa.table({"x": pa.chunked_array([[1, 2], [3]])})
    >>> table_fingerprint(a) == table_fingerprint(pa.table({"x": [1, 2, 3]}))
    True
    """
    digest = hashlib.sha256()
    with (
        pa.PythonFile(_HashSink(digest), mode="w") as sink,
        pa.ipc.new_stream(sink, table.schema) as w,
    ):
        for start in range(0, table.num_rows, memory.CHUNK_ROWS):
            rows = table.slice(start, memory.CHUNK_ROWS)
            # concat_arrays copies even one chunk: the IPC writer writes a zero-offset slice
            # of a longer array with other padding than the same values in their own buffers
            w.write_batch(
                pa.record_batch(
                    [pa.concat_arrays(c.chunks) for c in rows.columns], schema=table.schema
                )
            )
    return digest.hexdigest()


class _HashSink:
    """A writable file that feeds what is written to ``digest`` and keeps nothing."""

    closed = False

    def __init__(self, digest) -> None:
        self.digest = digest

    def write(self, data) -> int:
        self.digest.update(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


#: the ``dataset.csv`` options of the source being read (``privfair.io.ingest``): a ``source: {kind:
#: file}`` CSV is parsed by ``read_csv`` inside ``privfair.io.connectors``, which takes them here
SOURCE_CSV: contextvars.ContextVar[CsvSpec | None] = contextvars.ContextVar(
    "privfair_source_csv", default=None
)


def read_csv(source: Path | pa.Buffer, options: CsvSpec | None = None) -> pa.Table:
    """The CSV file at ``source`` (a path, or the bytes of a remote file) as
    ``pyarrow.csv.read_csv`` reads it (empty cells are nulls), streamed into a memory map when
    it is large (``memory.mapped_batches``): a 10M-row input is never decoded whole in the
    process's memory. ``options`` (``dataset.csv``): the delimiter, quote character and text
    encoding, passed to pyarrow's parse and read options (default: ``,``, ``"``, UTF-8).

    A streaming reader takes each column's type from the file's first block; ``read_csv``
    widens it over the whole file (an integer column with a decimal value further down is a
    float column). When a later block does not fit the first block's types, the file is read
    again whole with ``read_csv``, so the table is always the one ``read_csv`` reads.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "t.csv"
    >>> _ = p.write_text("x,s\\n1,a\\n2,\\n")
    >>> read_csv(p).to_pydict()
    {'x': [1, 2], 's': ['a', None]}
    """
    convert = pacsv.ConvertOptions(strings_can_be_null=True)
    o = options or SOURCE_CSV.get() or CsvSpec()
    parse = pacsv.ParseOptions(delimiter=o.delimiter, quote_char=o.quote)
    read = pacsv.ReadOptions(encoding=o.encoding)
    kw = {"convert_options": convert, "parse_options": parse, "read_options": read}

    def opened():  # a buffer is read from its start each time
        return pa.BufferReader(source) if isinstance(source, pa.Buffer) else source

    def whole() -> pa.Table:
        return pacsv.read_csv(opened(), **kw)

    try:
        with pacsv.open_csv(opened(), **kw) as reader:
            return memory.mapped_batches(reader.schema, iter(reader), whole)
    except pa.ArrowInvalid:
        return whole()  # a malformed file raises here again, with read_csv's message


def parquet_parts(folder: Path) -> list[Path]:
    """The part files of a Parquet dataset folder, sorted by name: every file in it except
    those Spark's and pyarrow's dataset readers skip (a name starting with ``_`` or ``.``,
    ``_SUCCESS`` or ``.crc`` checksums among them, or ending in ``._COPYING_``). A subfolder (a
    Hive partition ``key=value``, whose key would become a column) or a folder without a part
    is an ``InputError`` naming it: the folder read is then not one table both engines read.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> for n in ("part-1.parquet", "part-0.parquet", "_SUCCESS", ".part-0.parquet.crc"):
    ...     _ = (d / n).write_bytes(b"")
    >>> [p.name for p in parquet_parts(d)]
    ['part-0.parquet', 'part-1.parquet']
    """
    parts, folders = [], []
    for entry in folder.iterdir():
        name = entry.name
        if name.startswith(("_", ".")) or name.endswith("._COPYING_"):
            continue
        (folders if entry.is_dir() else parts).append(entry)
    if folders:
        raise InputError(
            None,
            f"the Parquet dataset folder '{folder.name}' has subfolders "
            f"({', '.join(sorted(f.name for f in folders))})",
            "give a folder of Parquet part files only (no Hive partitions), or one file",
        )
    if not parts:
        raise InputError(None, f"the Parquet dataset folder '{folder.name}' has no part file")
    return sorted(parts, key=lambda p: p.name)


def read_parquet_folder(folder: Path) -> pa.Table:
    """The table of a Parquet dataset folder: its ``parquet_parts``, in name order, each read
    by ``memory.mapped_parquet`` and its rows in their order, concatenated (no copy). Every
    part must have the first part's columns and types (``InputError`` naming the first one
    that does not: a table whose parts disagree is not one table); nullability and the
    writer's metadata may differ, as Spark reads every column as nullable.

    >>> import tempfile, pyarrow.parquet as pq
    >>> d = Path(tempfile.mkdtemp())
    >>> pq.write_table(pa.table({"x": [3]}), d / "b.parquet")
    >>> pq.write_table(pa.table({"x": [1, 2]}), d / "a.parquet")
    >>> read_parquet_folder(d).column("x").to_pylist()
    [1, 2, 3]
    """
    parts = parquet_parts(folder)
    tables = [memory.mapped_parquet(str(p)) for p in parts]
    schema = parts_schema(
        folder.name, [(p.name, t.schema) for p, t in zip(parts, tables, strict=True)]
    )
    return pa.concat_tables([t.cast(schema) for t in tables])


def parts_schema(folder: str, schemas: list[tuple[str, pa.Schema]]) -> pa.Schema:
    """The schema of a Parquet dataset folder named ``folder`` whose parts, in name order,
    have ``schemas`` (``(part name, schema)``): the first part's columns and types, nullable
    and without metadata. ``InputError`` naming the first part whose columns or types differ:
    parts that disagree are not one table (Spark would read them in one part's schema).

    >>> a = pa.schema([("x", pa.int64())])
    >>> parts_schema("d", [("a", a), ("b", pa.schema([pa.field("x", pa.int64(), False)]))])
    x: int64
    >>> parts_schema("d", [("a", a), ("b", pa.schema([("x", pa.float64())]))])
    Traceback (most recent call last):
    ...
    privfair.schemas.errors.InputError: table: the part files of 'd' do not share their columns (part 'b' has x: double, part 'a' x: int64)
    """

    def columns(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
        return [(f.name, f.type) for f in schema]

    first_name, first = schemas[0]
    for name, schema in schemas[1:]:
        if columns(schema) != columns(first):
            raise InputError(
                None,
                f"the part files of '{folder}' do not share their columns",
                f"part '{name}' has {_columns_text(schema)}, part '{first_name}' "
                f"{_columns_text(first)}",
            )
    return pa.schema([pa.field(n, t) for n, t in columns(first)])


def _columns_text(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in schema)


# --- a CSV file the Spark executors read, typed as ``read_csv`` types it -------------------------
#: ``read_csv``'s conversion: pyarrow's defaults, empty cells (and its other null spellings)
#: null in every column, string ones included. ``csv_frame`` applies the same lists.
_CONVERT = pacsv.ConvertOptions(strings_can_be_null=True)
#: A cell that is certainly an int64 for pyarrow (18 digits fit; 19 may not).
_INT = r"^-?[0-9]{1,18}$"
#: 19 digits: an int64 or a double, by its value (pyarrow's rule that ``csv_frame`` refuses).
_INT19 = r"^-?[0-9]{19}$"
#: A cell pyarrow certainly reads as a double, as Spark's cast to double reads it (both round
#: correctly, to 0 or an infinity past the double's range).
_FLOAT = r"^-?([0-9]{1,200}(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]{1,3})?$"
#: A cell another of pyarrow's types may take (a '+' sign, hex, padded numbers, inf, dates,
#: times, timestamps...): a column of such cells (and no certain string) is refused.
_AMBIGUOUS = r"(?i)^\s*[-+]?(\.?[0-9]|inf|nan)"


def spark_uri(path: Path) -> str:
    """``path`` as the URI Spark reads it by: ``file://`` and the path as it is. Spark does not
    decode a URI's escapes in a path, so ``Path.as_uri()``'s ``%20`` for a space (or its
    escapes of a non-ASCII name) names a file that does not exist.

    >>> spark_uri(Path("/data/a b é.parquet"))
    'file:///data/a b é.parquet'
    """
    return "file://" + str(path.resolve())


def csv_frame(spark, uri: str, name: str, options: CsvSpec | None = None):
    """The CSV file at ``uri`` read by Spark's executors into the table ``read_csv`` reads
    from it: ``(DataFrame, Arrow schema)``, the columns named by the header and typed by
    pyarrow's inference, decided in one aggregate on the executors.

    Every cell is read as text (the delimiter and quote of ``options``, a doubled quote inside
    a quoted cell a quote); a cell in pyarrow's null spellings (``''``, ``NA``, ``null``...) is
    null. A column's type is the first of pyarrow's that takes every other cell: ``null``
    (none), int64 (``-?[0-9]{1,18}``), bool (``true``/``false`` in pyarrow's spellings, ``0``,
    ``1``), float64 (decimal or exponent notation, ints included), else string. A column
    whose type cannot be told that surely (a cell like ``+1``, ``0x1A``, `` 7``, ``inf``, a
    19-digit integer, a date or a time, and no cell that only a string takes) is refused
    (``SpecError``), as is a line holding an odd number of quotes (a value with a line break,
    which Spark's line-split reading would cut) and a line of blanks only (which Spark's reader
    skips and ``read_csv`` does not): the cluster never reads another table than
    this process would. ``InputError`` as ``read_csv``'s failures: an empty file, a row with
    another number of fields than the header.

    Examples
    --------
    A column's type from the counts of its cells' classes (``_class_column``), here two
    ``0``/``1`` cells and a ``true``: pyarrow's bool.

    >>> _decided("t.csv", "x", {"int": 2, "float": 0, "bool": 1, "ambiguous": 0, "str": 0, "01": 2})
    DataType(bool)
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    o = options or CsvSpec()
    quote = o.quote if o.quote is not False else "\u0000"

    def reader():
        return (
            spark.read.option("sep", o.delimiter)
            .option("quote", quote)
            .option("escape", quote)
            .option("encoding", "UTF-8")
            .option("mode", "FAILFAST")
            .option("multiLine", False)
        )

    header = reader().option("header", False).csv(uri).first()
    if header is None:
        raise InputError(None, f"cannot read {name} as csv", "Empty CSV file")
    names = ["" if v is None else v for v in header]
    names[0] = names[0].removeprefix("\ufeff")  # pyarrow skips a UTF-8 byte order mark
    cells = T.StructType([T.StructField(f"c{i}", T.StringType()) for i in range(len(names))])
    raw = reader().option("header", True).schema(cells).csv(uri)
    value = F.col("value")
    # Spark's CSV reader drops a line of blanks (all characters <= U+0020, as Scala's trim);
    # read_csv reads it as a row (of one column) or refuses it (a row of another width)
    checks = [F.count(F.when(value.rlike(r"^[\x00-\x20]+$"), 1)).alias("blank")]
    if o.quote is not False:
        quotes = F.length(value) - F.length(F.regexp_replace(value, _java_quoted(quote), ""))
        checks.append(F.count(F.when(quotes % 2 == 1, 1)).alias("odd"))
    found = spark.read.text(uri).agg(*checks).first()
    if o.quote is not False and found["odd"]:
        raise SpecError(
            "dataset.path",
            f"{name} has a line with an odd number of quote characters (a quoted value "
            "holding a line break, or a stray quote): the Spark engine reads a CSV line by "
            "line and would not read the table this process reads; convert it to Parquet "
            "or run on the local engine",
        )
    if found["blank"]:
        raise SpecError(
            "dataset.path",
            f"{name} has {found['blank']} line(s) of blanks only, which Spark's CSV reader "
            "skips and read_csv reads as a row: convert it to Parquet or run on the local "
            "engine",
        )
    nulls = list(_CONVERT.null_values)
    bools = list(_CONVERT.true_values) + list(_CONVERT.false_values)
    kinds = ("int", "float", "bool", "ambiguous", "str", "01")
    aggs = []
    for i in range(len(names)):
        v = F.col(f"c{i}")
        k = _class_column(v, nulls, bools)
        aggs += [F.count(F.when(k == kind, 1)).alias(f"{kind}{i}") for kind in kinds[:5]]
        aggs.append(F.count(F.when(v.isin("0", "1"), 1)).alias(f"01{i}"))
    try:
        counts = raw.agg(*aggs).first()
    except Exception as e:  # FAILFAST: a row of another width than the header
        if "MALFORMED" in str(e).upper():
            raise InputError(
                None,
                f"cannot read {name} as csv",
                f"a row has another number of fields than the header's {len(names)}",
            ) from None
        raise
    types = [
        _decided(name, names[i], {k: int(counts[f"{k}{i}"]) for k in kinds})
        for i in range(len(names))
    ]
    cast = {pa.int64(): "long", pa.float64(): "double"}
    out = []
    for i, (n, t) in enumerate(zip(names, types, strict=True)):
        v = F.col(f"c{i}")
        null = v.isNull() | v.isin(nulls)
        if t == pa.null():
            col = F.lit(None).cast(T.NullType())
        elif t == pa.bool_():
            col = F.when(null, None).otherwise(v.isin(list(_CONVERT.true_values)))
        elif t in cast:
            col = F.when(null, None).otherwise(v.try_cast(cast[t]))
        else:
            col = F.when(null, None).otherwise(v)
        out.append(col.alias(n))
    return raw.select(*out), pa.schema([pa.field(n, t) for n, t in zip(names, types, strict=True)])


def _java_quoted(ch: str) -> str:
    """A regex (Java's) matching the character ``ch`` literally."""
    return "\\Q" + ch + "\\E" if ch != "\\" else "\\\\"


def _class_column(v, nulls: list[str], bools: list[str]):
    """The class of each cell of column ``v``, a Spark SQL expression: ``null`` (a null
    spelling), ``int``, ``float``, ``bool``, ``ambiguous`` (a type pyarrow may give it that
    the executors do not decide) or ``str`` (a cell no other type of pyarrow's takes)."""
    from pyspark.sql import functions as F

    return (
        F.when(v.isNull() | v.isin(nulls), "null")
        .when(v.rlike(_INT), "int")
        .when(v.rlike(_INT19), "ambiguous")
        .when(v.rlike(_FLOAT), "float")
        .when(v.isin(bools), "bool")
        .when(v.rlike(_AMBIGUOUS), "ambiguous")
        .otherwise("str")
    )


def _decided(name: str, column: str, n: dict[str, int]) -> pa.DataType:
    """A CSV column's pyarrow type from the counts of its cells' classes (``n``: int, float,
    bool, ambiguous, str, and ``01`` the int cells that are ``0`` or ``1``)."""
    if n["str"]:
        return pa.string()
    if n["ambiguous"]:
        raise SpecError(
            f"dataset.columns.{column}",
            f"the type pyarrow gives column '{column}' of {name} cannot be decided on the Spark "
            "cluster (cells like '+1', '0x1A', ' 7', 'inf', a 19-digit integer, a date or a "
            "time); convert the file to Parquet or run on the local engine",
        )
    if not (n["int"] or n["float"] or n["bool"]):
        return pa.null()
    if not n["bool"]:
        return pa.int64() if not n["float"] else pa.float64()
    if not n["float"] and n["int"] == n["01"]:
        return pa.bool_()
    return pa.string()


def read_table_file(path: str | Path, options: CsvSpec | None = None) -> pa.Table:
    """The table in the Parquet or CSV file ``path`` that a caller hands over for a spec
    whose rows come from elsewhere (``privfair run --input``, an upstream Airflow task's
    file): Parquet by ``.parquet``/``.pq``, else CSV (``read_csv`` with ``options``). A
    missing or unreadable file is a ``DataSourceError`` naming it.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "t.csv"
    >>> _ = p.write_text("x\\n1\\n")
    >>> read_table_file(p).num_rows
    1
    >>> read_table_file(p.with_name("absent.parquet"))
    Traceback (most recent call last):
    ...
    privfair.schemas.errors.DataSourceError: input file '...absent.parquet': not found
    """
    import pyarrow.parquet as pq

    from privfair.schemas.errors import DataSourceError

    p = Path(path).expanduser()
    if not p.is_file():
        raise DataSourceError(f"input file '{p}': not found")
    try:
        if p.suffix.lower() in (".parquet", ".pq"):
            return pq.read_table(p)
        return read_csv(p, options)
    except (pa.ArrowInvalid, OSError) as e:
        raise DataSourceError(f"input file '{p}': not a readable table ({e})") from None


def as_table(data: Any) -> pa.Table:
    """``data`` as an Arrow table: a ``pyarrow.Table`` or ``RecordBatch``, a pandas DataFrame
    (its index is not read), a polars DataFrame (``to_arrow``), a Spark DataFrame
    (``toArrow``: its rows are collected into this process, the Spark driver; a release that
    the driver never holds is the Spark engine's, ``execution: {engine: spark}``), or any
    object exporting the Arrow C stream (``__arrow_c_stream__``).

    >>> as_table({"a": [1]})
    Traceback (most recent call last):
    ...
    privfair.schemas.errors.InputError: table: not a table privfair can read (dict; give an Arrow table, a pandas or a polars DataFrame)
    """
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    mod = type(data).__module__.split(".")[0]
    if mod == "pandas" and hasattr(data, "columns"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if mod == "polars" and hasattr(data, "to_arrow"):
        return data.to_arrow()
    if mod == "pyspark" and hasattr(data, "toArrow"):
        return data.toArrow()
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    raise InputError(
        None,
        "not a table privfair can read",
        f"{type(data).__name__}; give an Arrow table, a pandas or a polars DataFrame",
    )
