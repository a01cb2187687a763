"""The cost of protection: an evaluation protocol against a holdout, its runs over a grid and the page of results (``evaluate``)."""

from importlib import import_module

__all__ = [
    "Evaluation",
    "write",
    "EvaluateOptions",
    "parse_grid",
]

# (the protocol itself is ``privfair.evaluation.evaluate.evaluate``: the module has its name)
# each public name and the module that holds it, imported on first use: a room's name costs
# only its own module (the Airflow DAG processor imports privfair.spec on every parse)
_WHERE = {
    "Evaluation": "evaluate",
    "write": "evaluate",
    "EvaluateOptions": "options",
    "parse_grid": "options",
}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
