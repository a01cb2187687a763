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
evidence frames only, so in the ``privfair`` command's own process (``own_the_process``)
``import_great_expectations`` imports it as an installation without those integrations would
(``unimportable``): ~0.3 s less, unless the process had already loaded them (a Spark run), in
which case nothing is hidden. A process privfair shares with its user's code (a notebook, a
Dagster code location, an Airflow worker) imports Great Expectations whole: the user's own
suites may read Spark or SQL there.

Three of Great Expectations' modules (distribution tests privfair's suites never run) import
``scipy.stats`` at their top, half a second of SciPy that they only use inside their
functions: in the command's own process it is imported lazily (``defer``), so its code runs
where something first reads it, if ever. Not in a shared process: Python 3.11's lazy loader
does not guard that first read against a second thread.

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
import importlib.util
import sys
from collections.abc import Iterable, Iterator
from types import ModuleType

__all__ = [
    "GX_DEFERRED",
    "GX_INTEGRATIONS",
    "collector_paused",
    "defer",
    "import_great_expectations",
    "own_the_process",
    "unimportable",
]

#: packages Great Expectations imports at its own import when they are installed, for data
#: sources privfair never gives it (Spark, SQL databases)
GX_INTEGRATIONS = ("pyspark", "py4j", "sqlalchemy", "psycopg2")
#: modules Great Expectations imports at its own import and reads only inside functions that
#: privfair's suites do not call
GX_DEFERRED = ("scipy.stats",)

_own_process = False  # set by ``own_the_process``


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


def defer(names: Iterable[str]) -> None:
    """Register each of ``names`` that is installed and not imported yet as a lazy module
    (``importlib.util.LazyLoader``): ``import name`` returns it at once, and its code runs
    when one of its attributes is first read, which an import that only binds the name never
    does. A submodule is also bound on its package, as an import would. Python 3.11's loader
    takes no lock for that first read (later versions do): only for a process whose threads
    do not import.

    >>> defer(["json.tool"])
    >>> import json.tool
    >>> callable(json.tool.main)  # the first read runs the module
    True
    """
    for name in names:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)  # imports the packages above it
        if spec is None or spec.loader is None:
            continue
        spec.loader = importlib.util.LazyLoader(spec.loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)


def own_the_process() -> None:
    """Declare this process the ``privfair`` command's own (``pipelines.cli.entry``): no code
    but privfair's will use Great Expectations in it, and its helper threads (distance
    passes, a second process's pipe) import nothing."""
    global _own_process
    _own_process = True


def import_great_expectations() -> ModuleType:
    """``great_expectations``, imported (the first time) with the collector paused; in the
    command's own process (``own_the_process``), without the integrations of
    ``GX_INTEGRATIONS`` that it has not loaded itself and with ``GX_DEFERRED`` imported
    lazily."""
    if "great_expectations" not in sys.modules:
        hidden = GX_INTEGRATIONS if _own_process else ()
        with collector_paused(), unimportable(hidden):
            defer(GX_DEFERRED if _own_process else ())
            import great_expectations  # noqa: F401
    return sys.modules["great_expectations"]
