"""A release on a real Spark standalone cluster of this machine against the local process pool,
in the same run: 1M Adult-like rows (``benchmarks/adult_like.py``) through blocked Fair-MDAV
(``block_rows`` 50,000, as ``bench_release_scale.py``).

Usage (from the repository root, as root: the cluster's worker runs as another OS user)::

    PRIVFAIR_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_spark_cluster.py
    PRIVFAIR_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_spark_cluster.py \\
        --rows 100000 --algorithms fair_mdav,dmondrian

What runs
---------
- The cluster: the tests' own (``tests/_spark_cluster.py``): a master and one worker (2 cores,
  ``--worker-memory``) started with pyspark's ``spark-class``, the worker as the OS user
  ``privfair-spark``, everything on 127.0.0.1; the driver (``privfair run``) reaches it as
  ``spark://127.0.0.1:PORT``, the blocks going to the executors as Arrow batches
  (``SparkEngine.exchange == "arrow"``), their results back by ``toArrow``.
- Each release is one ``python -m privfair.cli run SPEC --progress`` in a fresh interpreter on
  a fresh store: ``--engine local --workers 2`` and ``--engine spark --master spark://...``.
  Wall clock, the phases, the driver's peak RSS and its private peak (``harness.tracked``), and
  the peak of the driver's process tree (the driver and its JVM; the executors are the
  worker's children, another user's processes, not counted). GiB.
- Both releases must publish the same version with byte-identical ``shared/data.parquet``; the
  script fails otherwise, or if a guarantee or schema check fails.

The report goes to stdout and to ``benchmarks/results/results_spark_cluster.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
from pathlib import Path

from _cluster import line, on_cluster, release
from bench_release_scale import make_spec
from harness import child_env, machine, result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--algorithms", default="fair_mdav", help="fair_mdav, dmondrian")
    ap.add_argument("--worker-memory", default="6g")
    ap.add_argument("--executor-memory", default="4g")
    ap.add_argument("--out", type=Path, default=result("results_spark_cluster.md"))
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="privfair-bench-cluster-"))
    work.chmod(0o755)  # the worker's user reads its Python and the cluster's folder under it
    rows_out: list[str] = []
    try:
        with on_cluster(work / "cluster", args.worker_memory, args.executor_memory) as (
            cluster_engine,
            cluster_env,
        ):
            local_env = child_env(PRIVFAIR_PROGRESS="1")
            for algorithm in args.algorithms.split(","):
                spec = make_spec(algorithm, args.rows, work / f"specs-{algorithm}")
                got = {}
                for name, engine, env in (
                    (
                        "local pool (2 processes)",
                        ["--engine", "local", "--workers", "2"],
                        local_env,
                    ),
                    ("standalone cluster (1 worker, 2 cores)", cluster_engine, cluster_env),
                ):
                    one = work / f"{algorithm}-{len(got)}"
                    got[name] = r = release(
                        spec, engine, env, one / "store", published="shared/data.parquet"
                    )
                    shutil.rmtree(one, ignore_errors=True)
                    print(line(f"{algorithm} {args.rows:,} {name}", r), file=sys.stderr)
                a, b = got.values()
                if (a["version"], a["data"]) != (b["version"], b["data"]):
                    raise SystemExit(f"{algorithm}: the cluster's release is not the local one")
                for name, r in got.items():
                    ph = r["phases"]
                    rows_out.append(
                        f"| {algorithm} | {args.rows:,} | {name} | {r['wall_s']:.1f} | "
                        f"{ph.get('protect', 0):.1f} | {ph.get('validate', 0):.1f} | "
                        f"{ph.get('cost of protection', 0):.1f} | {r['driver_gb']:.2f} | "
                        f"{r['driver_private_gb']:.2f} | {r['peak_gb']:.2f} | {r['checks']} |"
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    m = machine()
    text = "\n".join(
        [
            "# A release on a standalone Spark cluster against the local pool",
            "",
            f"{dt.date.today().isoformat()}, `python benchmarks/bench_spark_cluster.py --rows "
            f"{args.rows} --algorithms {args.algorithms}`; {', '.join(f'{k} {v}' for k, v in m.items())}. Same version and byte-identical "
            "`shared/data.parquet` on both engines (checked). Seconds; GiB.",
            "",
            "| algorithm | rows | engine | wall | protect | validate | cost of protection "
            "| driver peak | driver private peak | driver tree peak | checks |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            *rows_out,
            "",
        ]
    )
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
