"""Reading a spec's ``dataset.source``: a database table or query, an Iceberg or Delta table, or
a file on any pyarrow filesystem, into Arrow, with what pins it.

``read_source`` returns the table as the source typed it (the rows of a database or lakehouse
table in the order of their values: such a table has no row order), a label that names the table but no
host, user or password (it goes into the owner's manifest and the report), and the source's
``fingerprint``: of the pin when there is one (an Iceberg table's uuid and snapshot id, a Delta
table's id and version: the same pin reads the same rows), else of the content (a query or a
table without a pin, a file). A ``${VAR}`` in a URL is read from the environment here, and
nowhere is the expanded URL recorded: ``redact`` is what messages show.

Errors name the source and the rule: ``SpecError`` for a missing ``${VAR}`` or connection,
``DataSourceError`` for a source that cannot be reached or read (host and port named, no
password), ``InputError`` for a result with no rows.

>>> redact("postgresql://ana:s3cret@db.example:5432/sales?sslmode=require")
'postgresql://ana:***@db.example:5432/sales'
>>> quote_name("sales.people")
'"sales"."people"'
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np
import pyarrow as pa

from privfair.components.core import memory
from privfair.io.urls import connection_uri, connections, expand, redact, resolve_url, where_of
from privfair.schemas.errors import DataSourceError, InputError, SpecError
from privfair.schemas.spec import SourceSpec

__all__ = [
    "Read",
    "connection_uri",
    "connections",
    "expand",
    "quote_name",
    "read_source",
    "redact",
    "resolve_url",
]

#: seconds a database gets to accept a connection before the run stops (exit 2)
CONNECT_TIMEOUT_S = 5
#: the name a SQL catalog keeps its tables under when a spec gives none (``catalog_name``)
ICEBERG_CATALOG = "privfair"


@dataclass(frozen=True)
class Read:
    """What ``read_source`` read: the table, its label, fingerprint and pin (None: unpinned)."""

    table: pa.Table
    label: str
    fingerprint: str
    pin: dict | None = None
    docs: Mapping[str, str] | None = (
        None  # column -> its comment or doc, where the source keeps them
    )


#: connection URIs an orchestrator resource provides for this run (``connections``)
def quote_name(name: str) -> str:
    """A dotted table name as quoted SQL identifiers (a quote inside is doubled)."""
    return ".".join('"' + p.replace('"', '""') + '"' for p in name.split("."))


def _sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


# --- roles kept by the source -------------------------------------------------------------------
_ROLE_DOC = re.compile(r"privfair role:\s*(?P<role>[a-z_]+)\s*\((?P<kind>[a-z]+)\)(?P<rest>.*)")


def roles_from_docs(docs: Mapping[str, str] | None) -> dict[str, dict]:
    """The column roles a source's comments or docs declare, as ``dataset.columns`` entries.

    A doc declares a role as ``privfair role: ROLE (KIND)``, optionally followed by
    ``; favoured: V, W``, ``; unfavoured: V``, ``; positive: V`` (the form of
    ``privfair.release.catalog_metadata.Column.description``, which ``privfair.release.targets`` writes into
    an Iceberg table's column docs, so a published release reads back with its roles). Values
    are text; a numeric-looking one is read as a number.

    >>> roles_from_docs({"sex": "privfair role: protected (binary); favoured: 1; guarantees: C6"})
    {'sex': {'role': 'protected', 'kind': 'binary', 'favoured': [1]}}
    """
    out: dict[str, dict] = {}
    for col, doc in (docs or {}).items():
        m = _ROLE_DOC.search(doc or "")
        if m is None:
            continue
        entry: dict = {"role": m["role"], "kind": m["kind"]}
        for part in m["rest"].split(";"):
            key, _, values = part.partition(":")
            key = key.strip()
            if key in {"favoured", "unfavoured", "positive"} and values.strip():
                entry[key] = [_value(v.strip()) for v in values.split(",")]
        out[col] = entry
    return out


def _value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


# --- the kinds -----------------------------------------------------------------------------------
def read_source(src: SourceSpec, base_dir: str | Path | None = None) -> Read:
    """Read ``src`` (module docstring); a relative ``sqlite:///`` path or file URL is taken
    relative to ``base_dir`` (the spec's folder)."""
    from privfair.io.files import table_fingerprint

    reader = {"sql": _read_sql, "iceberg": _read_iceberg, "delta": _read_delta, "file": _read_file}
    out = reader[src.kind](src, Path(base_dir) if base_dir is not None else Path.cwd())
    if out.table.num_rows == 0:
        raise InputError(None, f"the {src.kind} source {out.label} has no rows")
    # A database or lakehouse table has no row order (an engine returns rows in whatever order
    # its files, threads or plan give), and the algorithms' groupings depend on input order:
    # rows are taken in the order of their values, so the release and the content
    # fingerprint depend only on what the rows hold.
    table = _in_value_order(out.table) if src.kind != "file" else out.table
    fingerprint = out.fingerprint if out.pin is not None else table_fingerprint(table)
    return Read(table, out.label, fingerprint, out.pin, out.docs)


def _in_value_order(table: pa.Table) -> pa.Table:
    """``table``'s rows in the order of their values (``order.published_order``), taken
    ``memory.CHUNK_ROWS`` rows at a time into a map when the table is large: the reordered
    copy is never whole in the process's memory."""
    from privfair.components.core.order import published_order

    rows = published_order(table)
    if np.array_equal(rows, np.arange(len(rows))):
        return table  # in order already
    return memory.mapped_take(table, rows)


def _sqlite_path(url: str, base: Path) -> Path:
    """``sqlite:///rel/x.db`` (beside the spec) or ``sqlite:////abs/x.db`` (SQLAlchemy's form)."""
    path = Path(url[len("sqlite:///") :])
    return path if path.is_absolute() else (base / path)


def _read_sql(src: SourceSpec, base: Path) -> Read:
    url = resolve_url(src)
    what = src.table if src.table is not None else "query"
    sql = src.query if src.query is not None else f"SELECT * FROM {quote_name(src.table)}"
    if url.startswith("sqlite:///"):
        path = _sqlite_path(url, base)
        if not path.is_file():
            raise DataSourceError(f"dataset.source.url: no SQLite database at {path.name}")
        driver = optional("adbc_driver_sqlite.dbapi", "dataset.source")

        connect, shown = (
            (lambda: driver.connect(f"file:{path}?mode=ro", autocommit=True)),
            path.name,
        )
        label = f"sqlite:{path.name}:{what}"
    elif url.startswith(("postgresql://", "postgres://")):
        driver = optional("adbc_driver_postgresql.dbapi", "dataset.source")

        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        query.setdefault("connect_timeout", str(CONNECT_TIMEOUT_S))
        full = urlunsplit(parts._replace(query=urlencode(query)))
        connect, shown = (lambda: driver.connect(full, autocommit=True)), redact(url)
        label = f"postgresql:{(parts.path or '/').lstrip('/')}:{what}"
    else:
        raise SpecError(
            "dataset.source.url",
            f"'{redact(url)}' is not a postgresql:// or sqlite:/// URL",
        )
    try:
        conn = connect()
    except Exception as e:
        where = where_of(url) if url.startswith("postgres") else shown
        raise DataSourceError(
            f"cannot connect to the database at {where} ({redact(url)}): {_first_line(e)}"
        ) from None

    def again() -> pa.Table:  # the map could not be written: the result, whole, in memory
        with connect() as c, c.cursor() as cur:
            cur.execute(sql)
            return cur.fetch_arrow_table()

    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            reader = cur.fetch_record_batch()
            table = memory.mapped_batches(reader.schema, iter(reader), again)
            docs = _pg_comments(cur, src.table) if src.table and "postgresql" in label else None
    except Exception as e:
        raise DataSourceError(
            f"the {what if src.table else 'query'} of {shown} cannot be read: {_first_line(e)}"
        ) from None
    finally:
        conn.close()
    return Read(table, label, "", None, docs)


def _pg_comments(cur, table: str) -> dict[str, str]:
    """The column comments of a PostgreSQL table (``COMMENT ON COLUMN``)."""
    cur.execute(
        "SELECT a.attname, col_description(a.attrelid, a.attnum) FROM pg_attribute a "
        "WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped",
        parameters=(quote_name(table),),
    )
    rows = cur.fetch_arrow_table().to_pylist()
    return {r["attname"]: r["col_description"] for r in rows if r["col_description"]}


def optional(module: str, key: str):
    """Import ``module``, a package of one of privfair's extras (an ADBC driver, pyiceberg,
    deltalake); ``DataSourceError`` naming ``key`` and the ``pip install 'privfair[EXTRA]'``
    that installs it when it (or a package it needs) is not installed."""
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        from privfair.extras import EXTRAS

        extra, what = EXTRAS[module.split(".")[0]]
        raise DataSourceError(
            f"{key}: {what} needs the '{extra}' extra, which is not installed (no module named "
            f"'{e.name or module}'): pip install 'privfair[{extra}]'"
        ) from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _iceberg_catalog(uri: str, warehouse: str | None, base: Path, name: str | None = None):
    SqlCatalog = optional("pyiceberg.catalog.sql", "target").SqlCatalog  # noqa: N806

    # SQLAlchemy 2.1 takes postgresql:// as psycopg 3; the iceberg extra installs psycopg2
    props = {"uri": re.sub(r"^postgres(ql)?://", "postgresql+psycopg2://", uri)}
    if uri.startswith("sqlite:///"):
        props["uri"] = f"sqlite:///{_sqlite_path(uri, base).resolve()}"
    if warehouse is not None:
        props["warehouse"] = warehouse
    return SqlCatalog(name or ICEBERG_CATALOG, **props)


def open_iceberg(
    catalog: str,
    warehouse: str | None,
    name: str,
    base: Path,
    key: str,
    catalog_name: str | None = None,
):
    """The Iceberg table ``name`` of the SQL catalog at ``catalog`` (``DataSourceError``
    naming the table when it is missing, the catalog when it cannot be opened)."""
    NoSuchTableError = optional("pyiceberg.exceptions", key).NoSuchTableError  # noqa: N806
    optional("pyiceberg.catalog.sql", key)  # before the catalog is opened: not its error

    uri = expand(catalog, f"{key}.catalog")
    wh = expand(warehouse, f"{key}.warehouse") if warehouse is not None else None
    try:
        cat = _iceberg_catalog(uri, wh, base, catalog_name)
        return cat.load_table(name)
    except NoSuchTableError:
        raise DataSourceError(f"no Iceberg table '{name}' in catalog {redact(uri)}") from None
    except Exception as e:
        raise DataSourceError(
            f"the Iceberg catalog {redact(uri)} cannot be opened: {_first_line(e)}"
        ) from None


def _read_iceberg(src: SourceSpec, base: Path) -> Read:
    tbl = open_iceberg(
        src.catalog, src.warehouse, src.table, base, "dataset.source", src.catalog_name
    )
    if src.tag is not None:
        snap = tbl.snapshot_by_name(src.tag)
        if snap is None:
            raise DataSourceError(f"Iceberg table '{src.table}' has no tag '{src.tag}'")
    elif src.snapshot is not None:
        snap = tbl.snapshot_by_id(src.snapshot)
        if snap is None:
            raise DataSourceError(f"Iceberg table '{src.table}' has no snapshot {src.snapshot}")
    else:
        snap = tbl.current_snapshot()
    label = f"iceberg:{src.table}"
    if snap is None:
        raise InputError(None, f"the iceberg source {label} has no rows (no snapshot)")
    scan = tbl.scan(snapshot_id=snap.snapshot_id)
    reader = scan.to_arrow_batch_reader()
    table = memory.mapped_batches(reader.schema, iter(reader), scan.to_arrow)
    pin = {"table_uuid": str(tbl.metadata.table_uuid), "snapshot": snap.snapshot_id}
    docs = {f.name: f.doc for f in tbl.schema().fields if f.doc}
    return Read(table, label, _sha(pin), pin, docs)


def _read_delta(src: SourceSpec, base: Path) -> Read:
    DeltaTable = optional("deltalake", "dataset.source").DeltaTable  # noqa: N806

    url = expand(src.url, "dataset.source.url")
    if "://" not in url and not Path(url).is_absolute():
        url = str((base / url).resolve())
    try:
        dt = DeltaTable(url, version=src.version)
    except Exception as e:
        raise DataSourceError(
            f"the Delta table at {redact(url)} cannot be read"
            f"{f' at version {src.version}' if src.version is not None else ''}: {_first_line(e)}"
        ) from None
    pin = {"table_id": dt.metadata().id, "version": dt.version()}
    ds = dt.to_pyarrow_dataset()  # what to_pyarrow_table reads, a batch at a time
    table = memory.mapped_batches(ds.schema, iter(ds.to_batches()), ds.to_table)
    return Read(table, f"delta:{Path(urlsplit(url).path).name}", _sha(pin), pin)


def _read_file(src: SourceSpec, base: Path) -> Read:
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    from privfair.io.files import read_csv

    url = expand(src.url, "dataset.source.url")
    if "://" not in url:
        url = (base / url).resolve().as_uri()
    try:
        fs, path = pafs.FileSystem.from_uri(url)
    except (pa.ArrowInvalid, ValueError) as e:
        raise SpecError("dataset.source.url", f"'{redact(url)}': {_first_line(e)}") from None
    name = Path(path).name
    fmt = src.format or {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}.get(
        Path(path).suffix.lower()
    )
    if fmt is None:
        raise SpecError("dataset.source.format", f"cannot tell the format of '{name}'")
    try:
        with fs.open_input_file(path) as f:
            data = f.read()
    except (OSError, pa.ArrowInvalid) as e:
        raise DataSourceError(f"cannot read {redact(url)}: {_first_line(e)}") from None
    try:
        if fmt == "csv":
            table = read_csv(pa.py_buffer(data))
        else:
            table = pq.read_table(pa.BufferReader(data))
    except pa.ArrowInvalid as e:
        raise InputError(None, f"cannot read {name} as {fmt}", _first_line(e)) from None
    digest = hashlib.sha256(data).hexdigest()
    return Read(table, f"file:{name}", _sha({"sha256": digest}), {"sha256": digest})
