"""How privfair imports the large packages its validation and measurements load.

Importing Great Expectations or scikit-learn makes millions of objects (classes, pydantic
models, registries) that live as long as the process. Their allocations trigger collections,
and each older-generation collection walks every one of them again, finding almost nothing to
free. With the collector paused during the import (``collector_paused``), measured after
pandas, NumPy and pyarrow are loaded: Great Expectations and ``pipelines.expectations`` in
~2.0 s instead of ~2.7 s, scikit-learn's classifiers in ~0.7 s instead of ~0.85 s. The few
cycles an import leaves behind are collected after it, by the next collection the process
makes.

Great Expectations also probes, at its import, for the integrations it supports
(``great_expectations.compatibility``): it imports PySpark (whose ``pyspark.ml`` pulls in
SciPy's sparse matrices), SQLAlchemy and psycopg2 whenever they are installed, as they are
with privfair's ``spark`` and ``airflow`` extras. privfair hands Great Expectations pandas
evidence frames only, so ``import_great_expectations`` imports it as an installation without
those integrations would (``unimportable``): ~0.3 s less, unless the process had already
loaded them (a Spark run, an Airflow task), in which case nothing is hidden.

Only for imports: work that makes garbage must run with the collector on.

>>> import gc
>>> with collector_paused():
...     import json
...     gc.isenabled()
False
>>> gc.isenabled()
True
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterable, Iterator
from types import ModuleType

__all__ = ["GX_INTEGRATIONS", "collector_paused", "import_great_expectations", "unimportable"]

#: packages Great Expectations imports at its own import when they are installed, for data
#: sources privfair never gives it (Spark, SQL databases)
GX_INTEGRATIONS = ("pyspark", "py4j", "sqlalchemy", "psycopg2")


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off while the block runs, then as it was (a caller that had turned
    it off keeps it off)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextlib.contextmanager
def unimportable(names: Iterable[str]) -> Iterator[None]:
    """While the block runs, ``import name`` (and of its submodules) raises ``ImportError`` for
    each of ``names`` not imported yet, as if it were not installed; afterwards it imports as
    usual. A module already in ``sys.modules`` is left alone.

    >>> with unimportable(["a_module_nobody_has_imported"]):
    ...     try:
    ...         import a_module_nobody_has_imported
    ...     except ImportError:
    ...         print("hidden")
    hidden
    >>> "a_module_nobody_has_imported" in sys.modules
    False
    """
    hidden = [name for name in names if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # the import system's "absent"
    try:
        yield
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def import_great_expectations() -> ModuleType:
    """``great_expectations``, imported (the first time) with the collector paused and without
    the integrations of ``GX_INTEGRATIONS`` that the process has not loaded itself."""
    if "great_expectations" not in sys.modules:
        with collector_paused(), unimportable(GX_INTEGRATIONS):
            import great_expectations  # noqa: F401
    return sys.modules["great_expectations"]
