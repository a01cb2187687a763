"""What the cluster benchmarks share: the tests' standalone cluster started for a run, the
environment a driver needs to reach it, and one timed ``privfair run`` in a fresh interpreter.

The cluster is ``tests/_spark_cluster.py``'s: a master and one worker started with pyspark's
``spark-class``, the worker as the OS user ``privfair-spark``, all on 127.0.0.1 (the scripts
run as root). A release is measured by ``harness.tracked``: wall clock, the driver's peak RSS
and private peak (RSS less file-backed pages), and the peak of its process tree (the driver
and its JVM; the executors are the worker's children, another user's, not counted).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench_release_scale import NO_SCHEMA_CHECKS, checked_run
from harness import HOLD, ROOT, child_env

sys.path.insert(0, str(ROOT / "tests"))
from _spark_cluster import Cluster  # noqa: E402 - the tests' cluster, on this machine

__all__ = ["CLI", "Cluster", "on_cluster", "release"]

#: ``privfair``'s command line in a fresh interpreter
CLI = ["-m", "privfair.cli"]
#: the checks line of a row-level release, or of one without schema checks (a synthesis one)
CHECKS = (HOLD, NO_SCHEMA_CHECKS)


@contextmanager
def on_cluster(
    folder: Path, worker_memory: str, executor_memory: str
) -> Iterator[tuple[list[str], dict]]:
    """Start the cluster in ``folder`` for the ``with`` block, stopped after it; yields the
    ``privfair run`` arguments that reach it and the driver's environment."""
    cluster = Cluster.start(folder, memory=worker_memory)
    try:
        env = child_env(
            **{k: v for k, v in cluster.env().items() if k in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP")},
            PRIVFAIR_PROGRESS="1",
            PRIVFAIR_SPARK_CONNECT_TIMEOUT="180",
        )
        engine = ["--engine", "spark", "--master", cluster.url]
        yield engine + ["--conf", f"spark.executor.memory={executor_memory}"], env
    finally:
        cluster.stop()


def release(
    spec: Path,
    engine: list[str],
    env: dict,
    store: Path,
    launcher: list[str] = CLI,
    published: str | None = None,
) -> dict:
    """One ``privfair run spec --progress`` (``launcher`` after the interpreter) into a fresh
    ``store``; fails unless it exits 0 with every check held. With ``published``, the bytes of
    that file of the release (``shared/data.parquet``) are in ``data``."""
    cmd = [sys.executable, *launcher, "run", str(spec), "--store", str(store)]
    run = checked_run([*cmd, "--progress", *engine], ROOT, env, spec.name, CHECKS)
    keep = ("wall_s", "peak_gb", "driver_gb", "driver_private_gb", "phases", "checks", "version")
    got = {k: run[k] for k in keep}
    got["data"] = (
        (store / spec.stem / run["version"] / published).read_bytes() if published else None
    )
    return got


def line(what: str, r: dict) -> str:
    """The progress line of one measured release, for stderr."""
    return (
        f"{what}: {r['wall_s']:.1f} s, driver {r['driver_gb']:.2f} GiB (private "
        f"{r['driver_private_gb']:.2f}), tree {r['peak_gb']:.2f} GiB, {r['phases']}"
    )
