"""One release end to end (``flow``: ingest, protect, validate, publish) and the same steps as orchestrator tasks (``tasks``), shared by the Dagster and Airflow faces."""

from privfair import lazy_names

# each public name and the module that holds it, imported on first use (``lazy_names``)
_WHERE = {
    "Outcome": "flow",
    "run_release": "flow",
    "revalidate": "flow",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
