"""privfair: private and fair table releases.

The Python API (``from privfair import api``), the command line (``privfair``), the algorithm
families (``privfair.components``) and the spec envelope (``privfair.schemas``); the release
code in rooms (``spec``, ``io``, ``validation``, ``evaluation``, ``release``, ``budget``,
``run``) and the orchestrator faces ``privfair.dagster`` and ``privfair.airflow`` (extras
``dagster`` and ``airflow``). README "Layout" gives the floors."""

import importlib.util
import sys

__version__ = "0.1.0"


def _hide_spark_connect() -> None:
    """Great Expectations imports ``pyspark.sql.connect`` whenever pyspark is installed (our
    ``spark`` extra). Without Spark Connect's own dependencies (grpc), that package *exits the
    process* when the main module has no file (``python -c``, some orchestrator workers), taking
    it for a doctest run. privfair's Spark engine is classic Spark, so it is hidden then."""
    if "pyspark.sql.connect" in sys.modules or importlib.util.find_spec("pyspark") is None:
        return
    if importlib.util.find_spec("grpc_status") is None:
        sys.modules["pyspark.sql.connect"] = None  # an import of it raises ImportError


_hide_spark_connect()
