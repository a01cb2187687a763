"""The cost of protection: an evaluation protocol against a holdout, its runs over a grid and the page of results (``evaluate``)."""

from privfair import lazy_names

# (the protocol itself is ``privfair.evaluation.evaluate.evaluate``: the module has its name)
# each public name and the module that holds it, imported on first use (``lazy_names``)
_WHERE = {
    "Evaluation": "evaluate",
    "write": "evaluate",
    "EvaluateOptions": "options",
    "parse_grid": "options",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
