"""The algorithms and the checks they are judged by: pure functions over Arrow/NumPy.

``privfair.components.core`` holds what every family shares (descriptors, discovery, results, shared
guarantee checkers, evidence, metrics, plots); each other sub-package is one family that
exports a ``FAMILY``. A component never imports an orchestrator or Great Expectations.
"""

from privfair.components.core.descriptor import Algorithm, Family, KindCheck, Metric, Params
from privfair.components.core.registry import algorithm, algorithms, families

__all__ = [
    "Algorithm",
    "Family",
    "KindCheck",
    "Metric",
    "Params",
    "algorithm",
    "algorithms",
    "families",
]
