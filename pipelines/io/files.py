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
from privfair.schemas.errors import InputError
from privfair.schemas.spec import CsvSpec

__all__ = [
    "SOURCE_CSV",
    "parquet_parts",
    "parts_schema",
    "read_csv",
    "read_parquet_folder",
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
