"""Checking a release: every guarantee recomputed from the published outputs, the sidecars and the input (``validate``), with the generated Great Expectations suites (``expectations``, ``gx_import``)."""

from importlib import import_module

__all__ = [
    "Validation",
    "validate_release",
]

# each public name and the module that holds it, imported on first use: a room's name costs
# only its own module (the Airflow DAG processor imports privfair.spec on every parse)
_WHERE = {
    "Validation": "validate",
    "validate_release": "validate",
}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
