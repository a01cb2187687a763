"""Reading the data a release protects: built-in raw files and their checksums (``sources``), databases, lakehouse tables and URLs (``connectors``), the input table with its roles (``ingest``) and the dataset identity the privacy accounting keys on (``identity``)."""

from importlib import import_module

__all__ = [
    "load_dataset",
    "source_versions",
    "private_columns",
    "Read",
    "read_source",
    "Identity",
    "identity_of",
    "expand",
    "redact",
    "connections",
    "read_csv",
    "table_fingerprint",
]

# each public name and the module that holds it, imported on first use: a room's name costs
# only its own module (the Airflow DAG processor imports privfair.spec on every parse)
_WHERE = {
    "load_dataset": "ingest",
    "source_versions": "ingest",
    "private_columns": "ingest",
    "Read": "connectors",
    "read_source": "connectors",
    "Identity": "identity",
    "identity_of": "identity",
    "expand": "urls",
    "redact": "urls",
    "connections": "urls",
    "read_csv": "files",
    "table_fingerprint": "files",
}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
