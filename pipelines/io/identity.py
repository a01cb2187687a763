"""Which private data a release reads, whatever the spec calls it: the ledger's key.

A release is accounted against its dataset's **identity**: a set of *atoms*, each naming one
place the rows live, written the same way for every spelling of that place. Two releases whose
atoms intersect may hold the same people, so the ledger composes their charges and judges a
re-publication across them (``privfair.budget.ledger``); nothing a caller can rename (the pipeline,
the store, the path as written) is part of it.

=====================  ==================================================================
what the spec reads    its atoms
=====================  ==================================================================
built-in ``name``      ``builtin:<name>``
``path`` / ``file``    ``file:<resolved absolute path>`` (``./x.csv``, ``x.csv``, an
                       absolute path, a ``file://`` URL and a symlink are one atom); a
                       Parquet dataset folder's, and each of its part files'; a
                       file whose bytes are a built-in dataset's raw file also
                       ``builtin:<dataset>``; a remote URL ``url:<scheme>://<host><path>``
                       (no credentials, no query, slashes collapsed)
``sql`` table          ``sql:<database>/<schema>.<table>`` (a SQLite file by its resolved
                       path, PostgreSQL by ``host:port/db`` without user; ``public.`` /
                       ``main.`` the default schema; names case-folded)
``sql`` query          the atom of every table it reads (``FROM`` / ``JOIN``), else
                       ``sql:<database>/query:<sha of its whitespace-normalised text>``
``iceberg``            ``iceberg:<catalog>/<table>`` and ``iceberg-uuid:<table uuid>``
``delta``              ``delta:<url>`` and ``delta-id:<table id>``
``memory``             ``source.dataset`` (an atom above, or a name: ``named:<name>``); a
                       spec turned in memory (``privfair.api.in_memory``) keeps the atoms
                       of the dataset it was written for
``budget.dataset``     adds ``named:<name>`` (an alias shared with in-memory frames)
=====================  ==================================================================

A frame in memory whose spec names no dataset has no identity (``Identity.anonymous``): the
ledger cannot tell which people it holds, so a DP release of it, and a release that is not DP
under ``republish: refuse``, is refused (``admission``). Atoms hold local paths and hosts: they
are kept in the owner's ledger only, never in a manifest or a message (``Identity.name`` is
what those show).

>>> from privfair.schemas.spec import DatasetSpec, SourceSpec
>>> identity_of(DatasetSpec(name="german")).atoms
('builtin:german',)
>>> sql = SourceSpec(kind="sql", url="postgresql://ann@DB.example:5432/raw", query="select a from  People join public.visits v on 1=1")
>>> identity_of(DatasetSpec(source=sql, columns={})).atoms
('sql:postgresql://db.example:5432/raw/public.people', 'sql:postgresql://db.example:5432/raw/public.visits')
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from privfair.io.urls import redact
from privfair.schemas.spec import DatasetSpec, PipelineSpec, SourceSpec

__all__ = ["Identity", "identity_of", "memory_atoms", "ANONYMOUS"]

#: The atom of a frame in memory that nothing names.
ANONYMOUS = "memory:anonymous"
_PREFIXES = (
    "builtin:",
    "file:",
    "url:",
    "sql:",
    "iceberg:",
    "iceberg-uuid:",
    "delta:",
    "delta-id:",
    "named:",
)


@dataclass(frozen=True)
class Identity:
    """A dataset's identity: its sorted ``atoms`` and the ``name`` messages show."""

    atoms: tuple[str, ...]
    name: str

    @property
    def anonymous(self) -> bool:
        return self.atoms == (ANONYMOUS,)


def identity_of(
    ds: DatasetSpec,
    *,
    base_dir: str | Path | None = None,
    data_dir: str | Path | None = None,
    input_record: Mapping[str, Any] | None = None,
    alias: str | None = None,
) -> Identity:
    """The identity of the data ``ds`` reads (module docstring); ``base_dir`` is the spec's
    folder, ``input_record`` the ingested input's record (it adds what only a read tells: a
    lakehouse table's uuid or id, a file that is a built-in dataset's), ``alias`` the spec's
    ``budget.dataset``."""
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    atoms: set[str] = set()
    src = ds.source
    if ds.name is not None:
        atoms.add(f"builtin:{ds.name}")
        name = ds.name
    elif ds.path is not None:
        atoms.update(_path_atoms(_located(ds.path, base, data_dir)))
        name = ds.path
    elif src is not None and src.kind == "memory":
        atoms.update(memory_atoms(src))
        name = alias or (src.dataset if isinstance(src.dataset, str) else None) or "memory"
    else:
        assert src is not None
        atoms.update(_source_atoms(src, base))
        name = _source_name(src)
    atoms.update(_read_atoms(input_record or {}))
    if alias:
        atoms.add(f"named:{alias}")
    if not atoms:
        return Identity((ANONYMOUS,), name)
    return Identity(tuple(sorted(atoms)), name)


def atoms_of(spec: PipelineSpec) -> tuple[str, ...]:
    """The atoms of ``spec``'s dataset that need no read of it (``privfair.api.in_memory``
    keeps them when a frame replaces the spec's own input)."""
    ident = identity_of(spec.dataset, base_dir=spec.spec_dir)
    return () if ident.anonymous else ident.atoms


def memory_atoms(src: SourceSpec) -> tuple[str, ...]:
    """The atoms a frame in memory declares through ``source.dataset``: each an atom as
    written (``file:...``, ``builtin:...``) or a name (``named:<name>``)."""
    given = src.dataset
    if given is None:
        return ()
    names = [given] if isinstance(given, str) else list(given)
    return tuple(n if n.startswith(_PREFIXES) else f"named:{n}" for n in names)


# --- files and URLs ------------------------------------------------------------------------------
def _located(written: str, base: Path, data_dir: str | Path | None) -> Path:
    """The file ``written`` names, as ingest finds it; where there is none (a YAML spec whose
    rows are handed over in memory), the place beside the spec it names."""
    from privfair.io.ingest import locate_file
    from privfair.schemas.errors import DataSourceError

    try:
        return locate_file(written, base, data_dir)
    except DataSourceError:
        return base / Path(written).expanduser()


def _file_atom(path: Path) -> str:
    return f"file:{os.path.realpath(path)}"


def _path_atoms(path: Path) -> set[str]:
    """A ``dataset.path``'s atoms: a file's; a Parquet dataset folder's own and each of its
    parts' (``privfair.io.files.parquet_parts``), so a release of the folder and one of a part
    file alone meet in the ledger, as do two releases of the folder whatever parts it held."""
    if not path.is_dir():
        return {_file_atom(path)}
    from privfair.io.files import parquet_parts
    from privfair.schemas.errors import InputError

    try:
        parts = parquet_parts(path)
    except InputError:
        parts = []  # ingest refuses the folder, naming why
    return {_file_atom(path), *(_file_atom(p) for p in parts)}


def _url_atom(url: str, base: Path) -> str:
    """A file's atom from a URL or a path: ``file:`` for a local one, ``url:`` otherwise."""
    if "://" not in url:
        return _file_atom(base / url)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "file":
        return _file_atom(Path(unquote(parts.path)))
    host = (parts.hostname or "").lower()
    port = f":{parts.port}" if parts.port else ""
    path = re.sub("/+", "/", unquote(parts.path)).rstrip("/")
    return f"url:{scheme}://{host}{port}{path}"


# --- databases and lakehouses --------------------------------------------------------------------
def _db(url: str, base: Path) -> tuple[str, str]:
    """(database atom, default schema) of a SQL or catalog URL."""
    if url.startswith("sqlite:///"):
        rest = url[len("sqlite:///") :].split("?", 1)[0]
        path = Path(rest) if Path(rest).is_absolute() else base / rest
        return f"sqlite:{os.path.realpath(path)}", "main"
    parts = urlsplit(re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql://", url))
    host = (parts.hostname or "localhost").lower()
    port = parts.port or 5432
    return f"{parts.scheme}://{host}:{port}/{parts.path.strip('/')}", "public"


def _table(name: str, schema: str) -> str:
    parts = [p.strip().strip('"').strip("`").lower() for p in name.split(".")]
    return ".".join(parts) if len(parts) > 1 else f"{schema}.{parts[0]}"


#: A table a query reads: after FROM or JOIN, a (possibly quoted, dotted) name.
_READS = re.compile(
    r"\b(?:from|join)\s+((?:\"[^\"]+\"|`[^`]+`|[A-Za-z_][\w$]*)(?:\s*\.\s*(?:\"[^\"]+\"|`[^`]+`|[A-Za-z_][\w$]*))*)",
    re.IGNORECASE,
)


def query_tables(query: str) -> list[str]:
    """The tables a ``SELECT`` reads (its string literals and comments removed first).

    >>> query_tables("SELECT * FROM a.b AS x JOIN \\"C\\" ON 1 -- from d")
    ['a.b', '"C"']
    """
    text = re.sub(r"'(?:[^']|'')*'", "''", query)
    text = re.sub(r"--[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    return [re.sub(r"\s+", "", m) for m in _READS.findall(text)]


def _source_atoms(src: SourceSpec, base: Path) -> set[str]:
    from privfair.io.urls import expand, resolve_url

    if src.kind == "file":
        return {_url_atom(expand(src.url or "", "dataset.source.url"), base)}
    if src.kind == "delta":
        url = expand(src.url or "", "dataset.source.url")
        return {"delta:" + _url_atom(url, base).split(":", 1)[1]}
    if src.kind == "iceberg":
        db, schema = _db(expand(src.catalog or "", "dataset.source.catalog"), base)
        return {f"iceberg:{db}/{_table(src.table or '', schema)}"}
    db, schema = _db(resolve_url(src), base)
    if src.table is not None:
        return {f"sql:{db}/{_table(src.table, schema)}"}
    tables = query_tables(src.query or "")
    if tables:
        return {f"sql:{db}/{_table(t, schema)}" for t in tables}
    text = " ".join((src.query or "").split()).lower()
    return {f"sql:{db}/query:{hashlib.sha256(text.encode()).hexdigest()[:16]}"}


def source_key(src) -> str:
    """A database or lakehouse source's ledger name: its kind and table (a query by its hash,
    a Delta table or file by its URL without credentials, or its connection's name). Two
    databases with a table of the same name share it: the safe direction for a budget.

    >>> from privfair.schemas.spec import SourceSpec
    >>> source_key(SourceSpec(kind="sql", url="postgresql://u:${PW}@db/raw", table="people"))
    'sql:people'
    >>> source_key(SourceSpec(kind="delta", url="s3://b/raw/people", version=3))
    'delta:s3://b/raw/people'
    """
    if src.table is not None:
        return f"{src.kind}:{src.table}"
    if src.query is not None:
        return f"{src.kind}:query:{hashlib.sha256(src.query.encode()).hexdigest()[:12]}"
    if src.url is not None:
        return f"{src.kind}:{redact(src.url)}"
    return f"{src.kind}:conn:{src.conn_id}"


def _source_name(src: SourceSpec) -> str:
    return source_key(src)


def _read_atoms(record: Mapping[str, Any]) -> set[str]:
    """What a read adds: a lakehouse table's own id, a file that is a built-in's raw file."""
    from privfair.schemas.datasets import DATASETS

    out: set[str] = set()
    pin = (record.get("source") or {}).get("pin") or {}
    if pin.get("table_uuid"):
        out.add(f"iceberg-uuid:{pin['table_uuid']}")
    if pin.get("table_id"):
        out.add(f"delta-id:{pin['table_id']}")
    shas = set((record.get("files") or {}).values()) | (
        {pin["sha256"]} if pin.get("sha256") else set()
    )
    for name, definition in DATASETS.items():
        if shas & {raw.sha256 for raw in definition.files}:
            out.add(f"builtin:{name}")
    return out
