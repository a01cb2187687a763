"""One release end to end (``flow``: ingest, protect, validate, publish) and the same steps as orchestrator tasks (``tasks``), shared by the Dagster and Airflow faces."""

from importlib import import_module

__all__ = [
    "Outcome",
    "run_release",
    "revalidate",
]

# each public name and the module that holds it, imported on first use: a room's name costs
# only its own module (the Airflow DAG processor imports privfair.spec on every parse)
_WHERE = {
    "Outcome": "flow",
    "run_release": "flow",
    "revalidate": "flow",
}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
