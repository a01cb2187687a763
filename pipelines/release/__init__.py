"""A release as files: the store and its candidates (``store``), the shareable copy (``share``), reports, lakehouse targets and their catalogue metadata, the code version, and the work run beside the release in another process (``beside``)."""

from importlib import import_module

__all__ = [
    "Store",
    "Candidate",
    "verify_release",
    "list_releases",
    "current_releases",
    "Manifest",
    "ManifestError",
    "ReleasePlan",
    "Ingested",
    "export",
    "verify_copy",
    "code_version",
]

# each public name and the module that holds it, imported on first use: a room's name costs
# only its own module (the Airflow DAG processor imports privfair.spec on every parse)
_WHERE = {
    "Store": "store",
    "Candidate": "store",
    "verify_release": "store",
    "list_releases": "store",
    "current_releases": "store",
    "Manifest": "manifest",
    "ManifestError": "manifest",
    "ReleasePlan": "plan",
    "Ingested": "plan",
    "export": "share",
    "verify_copy": "share",
    "code_version": "version",
}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
