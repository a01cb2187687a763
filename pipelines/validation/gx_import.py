"""Great Expectations, imported for validation: what its import leaves out, and where.

Great Expectations probes, at its import, for the integrations it supports
(``great_expectations.compatibility``): it imports PySpark (whose ``pyspark.ml`` pulls in
SciPy's sparse matrices), SQLAlchemy and psycopg2 whenever they are installed, as they are
with privfair's ``spark`` and ``airflow`` extras. privfair hands Great Expectations pandas
evidence frames only, so in the ``privfair`` command's own process (``own_the_process``)
``import_great_expectations`` imports it as an installation without those integrations would
(``privfair.components.core.imports.unimportable``): ~0.3 s less, unless the process had already loaded
them (a Spark run), in which case nothing is hidden. A process privfair shares with its user's
code (a notebook, a Dagster code location, an Airflow worker) imports Great Expectations
whole: the user's own suites may read Spark or SQL there.

Three of Great Expectations' modules (distribution tests privfair's suites never run) import
``scipy.stats`` at their top, half a second of SciPy that they only use inside their
functions: in the command's own process it is imported lazily
(``privfair.components.core.imports.defer``), so its code runs where something first reads it, if
ever. Not in a shared process: Python 3.11's lazy loader does not guard that first read
against a second thread.

The import runs with the collector paused (``privfair.components.core.imports.collector_paused``).
"""

from __future__ import annotations

import sys
from types import ModuleType

from privfair.components.core.imports import collector_paused, defer, unimportable

__all__ = ["GX_DEFERRED", "GX_INTEGRATIONS", "import_great_expectations", "own_the_process"]

#: packages Great Expectations imports at its own import when they are installed, for data
#: sources privfair never gives it (Spark, SQL databases)
GX_INTEGRATIONS = ("pyspark", "py4j", "sqlalchemy", "psycopg2")
#: modules Great Expectations imports at its own import and reads only inside functions that
#: privfair's suites do not call
GX_DEFERRED = ("scipy.stats",)

_own_process = False  # set by ``own_the_process``


def own_the_process() -> None:
    """Declare this process the ``privfair`` command's own (``privfair.cli.entry``): no code
    but privfair's will use Great Expectations in it, and its helper threads (the reader of a
    second process's pipe, the progress ticker) import nothing."""
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
