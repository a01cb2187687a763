"""Reading the data a release protects: built-in raw files and their checksums (``sources``), databases, lakehouse tables and URLs (``connectors``), the input table with its roles (``ingest``) and the dataset identity the privacy accounting keys on (``identity``)."""

from privfair import lazy_names

# each public name and the module that holds it, imported on first use (``lazy_names``)
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
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
