"""Optional parts of privfair and the extra that installs each: one table for the error a
missing driver gives (exit 2, naming the extra) and for the orchestrator faces.

>>> extra_hint("pyiceberg.catalog")
"pip install 'privfair[iceberg]'"
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

__all__ = ["EXTRAS", "installed", "extra_hint", "missing_extra", "require"]

#: top-level module -> (the extra that installs it, what needs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "adbc_driver_sqlite": ("sql", "a SQLite source (source: {kind: sql, url: sqlite:///...})"),
    "adbc_driver_postgresql": (
        "postgres",
        "PostgreSQL (a source: {kind: sql, url: postgresql://...}, or a PostgreSQL ledger)",
    ),
    "adbc_driver_manager": ("sql", "a database source (ADBC)"),
    "pyiceberg": ("iceberg", "an Iceberg source or target"),
    "deltalake": ("delta", "a Delta source or target"),
    "pyspark": ("spark", "the Spark engine (--engine spark)"),
    "dagster": ("dagster", "the Dagster face (privfair.dagster)"),
    "airflow": ("airflow", "the Airflow face (privfair.airflow)"),
}


def installed(module: str) -> bool:
    """Whether the top-level ``module`` can be imported (an entry None in ``sys.modules``, a
    module that is hidden, counts as absent)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def extra_hint(module: str) -> str | None:
    """``"pip install 'privfair[EXTRA]'"`` for a missing optional module, else None.

    >>> extra_hint("deltalake.table"), extra_hint("numpy")
    ("pip install 'privfair[delta]'", None)
    """
    known = EXTRAS.get(module.split(".")[0])
    return None if known is None else f"pip install 'privfair[{known[0]}]'"


def missing_extra(e: BaseException) -> str | None:
    """The message of an error that is an optional package not installed (``e`` or an error it
    was raised from), else None: an import of a module that is installed but fails (a broken
    installation, a submodule privfair hides) is not one."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        name = getattr(e, "name", None)
        if isinstance(e, ModuleNotFoundError) and name:
            root = name.split(".")[0]
            if root in EXTRAS and not installed(root):
                extra, what = EXTRAS[root]
                return (
                    f"{what} needs the '{extra}' extra, which is not installed (no module "
                    f"named '{name}'): pip install 'privfair[{extra}]'"
                )
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    return None


def require(module: str) -> ModuleType:
    """``module`` imported, or an ``ImportError`` naming the extra that installs it (a face's
    first line: ``import privfair.dagster`` without ``privfair[dagster]`` says so)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        message = missing_extra(e)
        if message is None:
            raise
        raise ImportError(message, name=e.name) from e
