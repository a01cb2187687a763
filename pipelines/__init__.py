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


def lazy_names(package: str, where: dict[str, str]):
    """``(__getattr__, __dir__)`` of a room's ``__init__`` (PEP 562): each public name in
    ``where`` is imported on first use from the module of ``package`` it names, so a room's
    name costs only its own module (the Airflow DAG processor imports ``privfair.spec`` on
    every parse).

    >>> getattr_, dir_ = lazy_names("privfair.spec", {"load_spec": "catalogue"})
    >>> getattr_("load_spec").__module__
    'privfair.spec.catalogue'
    """

    def __getattr__(name: str):
        if name in where:
            return getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
