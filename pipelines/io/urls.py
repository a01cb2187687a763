"""URLs and credentials: ``${VAR}`` in a spec's URL, what a URL may show (``redact``), and the
connections a run names (its own, the orchestrator's, the environment's): one rule for each,
read by the sources, the targets, the ledger and the crash log.

>>> redact("postgresql://owner:s3cret@db:5432/raw")
'postgresql://owner:***@db:5432/raw'
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from urllib.parse import urlsplit, urlunsplit

from privfair.schemas.errors import SpecError
from privfair.schemas.spec import SourceSpec

__all__ = ["connection_uri", "connections", "expand", "redact", "resolve_url", "where_of"]

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

_CONNECTIONS: ContextVar[Mapping[str, str]] = ContextVar(
    "privfair_connections", default=MappingProxyType({})
)


@contextmanager
def connections(uris: Mapping[str, str]) -> Iterator[None]:
    """Within the block, a source's ``conn_id`` is looked up in ``uris`` first (a Dagster
    resource's connections: their values come from its configuration, e.g. ``EnvVar``, never
    from the spec).

    >>> with connections({"raw": "sqlite:///raw.db"}):
    ...     resolve_url(SourceSpec(kind="sql", conn_id="raw", table="t"))
    'sqlite:///raw.db'
    """
    token = _CONNECTIONS.set(MappingProxyType({**_CONNECTIONS.get(), **uris}))
    try:
        yield
    finally:
        _CONNECTIONS.reset(token)


# --- URLs ----------------------------------------------------------------------------------------
def expand(text: str, key: str) -> str:
    """``text`` with every ``${VAR}`` replaced from the environment (``SpecError`` naming
    ``key`` and the variable when it is not set)."""

    def value(m: re.Match) -> str:
        name = m.group(1)
        if name not in os.environ:
            raise SpecError(key, f"environment variable {name} is not set (used as ${{{name}}})")
        return os.environ[name]

    return _ENV.sub(value, text)


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***`` and without its query (which may hold
    one): the only form of a URL a message, a manifest or a report shows.

    >>> redact("sqlite:///lake/catalog.db")
    'sqlite:///lake/catalog.db'
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if "@" not in parts.netloc:
        return url.split("?", 1)[0]
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    secret = ":***" if parts.password is not None else ""
    return urlunsplit((parts.scheme, f"{user}{secret}@{host}{port}", parts.path, "", ""))


def where_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 5432}"


def resolve_url(src: SourceSpec, key: str = "dataset.source") -> str:
    """The source's URL with ``${VAR}`` expanded: ``url``, or the URI of connection
    ``conn_id`` (from the run's ``connections``, else ``$AIRFLOW_CONN_<ID>``, else the Airflow
    Connection when Airflow is configured here)."""
    if src.url is not None:
        return expand(src.url, f"{key}.url")
    return connection_uri(src.conn_id or "", f"{key}.conn_id")


def connection_uri(conn: str, key: str) -> str:
    """The URI of connection ``conn`` (``key`` names it in errors): the run's
    ``connections``, else ``$AIRFLOW_CONN_<ID>``, else the Airflow Connection when Airflow is
    configured here; ``${VAR}`` in it expanded."""
    env = f"AIRFLOW_CONN_{conn.upper()}"
    if conn in _CONNECTIONS.get():
        uri = _CONNECTIONS.get()[conn]
    elif env in os.environ:
        uri = os.environ[env]
    else:
        uri = _airflow_connection(conn)
        if uri is None:
            raise SpecError(
                key, f"no connection '{conn}': set ${env} to its URI or define it in Airflow"
            )
    # Airflow writes postgres:// for its Postgres connections
    return re.sub(r"^postgres://", "postgresql://", expand(uri, key))


def _airflow_connection(conn_id: str) -> str | None:
    if "AIRFLOW_HOME" not in os.environ:
        return None
    try:
        from airflow.sdk import BaseHook
    except ImportError:  # pragma: no cover - Airflow is a dependency
        return None
    try:
        return BaseHook.get_connection(conn_id).get_uri()
    except Exception:  # Airflow raises its own AirflowNotFoundException
        return None
