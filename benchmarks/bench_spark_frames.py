"""The driver's memory of an MST release on a real Spark standalone cluster: the input ingested
by the driver and sent to the executors (the path before issue 46's count-based part), against
the input left on the cluster (``privfair.io.ingest.load_frame``: the executors read, encode and
count the Parquet file), in the same run: 1M Adult-like rows (``benchmarks/adult_like.py``)
through adult_mst.

Usage (from the repository root, as root: the cluster's worker runs as another OS user)::

    PRIVFAIR_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_spark_frames.py
    PRIVFAIR_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_spark_frames.py --rows 200000

What runs
---------
- The cluster: the tests' own (``tests/_spark_cluster.py``): a master and one worker (2 cores,
  ``--worker-memory``), the worker as the OS user ``privfair-spark``, on 127.0.0.1.
- Each release is one ``privfair run SPEC --progress --engine spark --master spark://...`` in a
  fresh interpreter on a fresh store. "driver holds the input": ``privfair.run.flow.on_cluster``
  made false (the driver memory-maps the file, encodes it and sends the codes to the executors
  as Arrow batches for every count); "input on the cluster": as shipped.
- Measured: wall clock, the phases, the driver's peak RSS and its private peak
  (``harness.tracked``: RSS less file-backed pages), the peak of the driver's process tree (the
  driver and its JVM; the executors are the worker's, another user's, not counted). GiB.
- Both releases must have the same version (same input fingerprint, spec and code) and pass
  every check; their noisy bytes differ (OpenDP's noise takes no seed).

The report goes to stdout and to ``benchmarks/results/results_spark_frames.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import shutil
import sys
import tempfile
from pathlib import Path

import yaml
from adult_like import write
from bench_release_scale import phases
from harness import HOLD, ROOT, child_env, machine, result, tracked

sys.path.insert(0, str(ROOT / "tests"))
from _spark_cluster import Cluster  # noqa: E402 - the tests' cluster, on this machine

#: ``privfair`` with the input read by the driver, as before: ``on_cluster`` false
DRIVER_HOLDS = (
    "import sys; import privfair.run.flow as f; f.on_cluster = lambda plan: False; "
    "from privfair.cli import main; sys.exit(main(sys.argv[1:]))"
)
ON_CLUSTER = "import sys; from privfair.cli import main; sys.exit(main(sys.argv[1:]))"
GUARANTEES = re.compile(r"guarantees: (\d+)/(\d+) hold; schema checks: ()()none")


def release(spec: Path, code: str, engine: list[str], env: dict, work: Path) -> dict:
    store = work / "store"
    cmd = [sys.executable, "-c", code, "run", str(spec), "--store", str(store)]
    run = tracked([*cmd, "--progress", *engine], ROOT, env)
    if run["rc"] != 0:
        raise SystemExit(f"{spec.name} failed ({run['rc']}):\n{run['stderr'][-3000:]}")
    # a synthesis release has no schema checks ("none": its published schema is a guarantee)
    held = HOLD.search(run["stdout"]) or GUARANTEES.search(run["stdout"])
    if not held or held.group(1) != held.group(2) or held.group(3) != held.group(4):
        raise SystemExit(f"{spec.name}: not every check passed:\n{run['stdout']}")
    version = re.search(r"^published: \S+ (\w+)", run["stdout"], re.M).group(1)
    return {
        "wall_s": run["wall_s"],
        "peak_gb": run["peak_gb"],
        "driver_gb": run["driver_gb"],
        "driver_private_gb": run["driver_private_gb"],
        "phases": phases(run["stderr"]),
        "checks": held.group(0),
        "version": version,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--worker-memory", default="6g")
    ap.add_argument("--executor-memory", default="4g")
    ap.add_argument("--out", type=Path, default=result("results_spark_frames.md"))
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="privfair-bench-frames-"))
    work.chmod(0o755)  # the worker's user reads its Python, the cluster's folder and the input
    data = work / "data"
    spec = write("adult_mst", args.rows, data, 0, {})
    doc = yaml.safe_load(spec.read_text())
    doc["dataset"]["unlabelled"] = "keep"  # as adult_mst: its ignored columns are synthesised
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    for p in (data, *data.iterdir()):
        p.chmod(0o755 if p.is_dir() else 0o644)
    rows_out: list[str] = []
    cluster = Cluster.start(work / "cluster", memory=args.worker_memory)
    try:
        env = child_env(
            **{k: v for k, v in cluster.env().items() if k in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP")},
            PRIVFAIR_PROGRESS="1",
            PRIVFAIR_SPARK_CONNECT_TIMEOUT="180",
        )
        engine = ["--engine", "spark", "--master", cluster.url]
        engine += ["--conf", f"spark.executor.memory={args.executor_memory}"]
        got = {}
        for name, code in (
            ("input on the cluster (load_frame)", ON_CLUSTER),
            ("driver holds the input (before)", DRIVER_HOLDS),
        ):
            one = work / f"run-{len(got)}"
            got[name] = r = release(spec, code, engine, env, one)
            shutil.rmtree(one, ignore_errors=True)
            print(
                f"adult_mst {args.rows:,} {name}: {r['wall_s']:.1f} s, driver "
                f"{r['driver_gb']:.2f} GiB (private {r['driver_private_gb']:.2f}), "
                f"tree {r['peak_gb']:.2f} GiB, {r['phases']}",
                file=sys.stderr,
            )
        a, b = got.values()
        if a["version"] != b["version"]:
            raise SystemExit("the two releases do not share their version")
        for name, r in got.items():
            ph = r["phases"]
            rows_out.append(
                f"| {args.rows:,} | {name} | {r['wall_s']:.1f} | {ph.get('ingest', 0):.1f} | "
                f"{ph.get('protect', 0):.1f} | {ph.get('validate', 0):.1f} | "
                f"{r['driver_gb']:.2f} | {r['driver_private_gb']:.2f} | {r['peak_gb']:.2f} | "
                f"{r['checks']} |"
            )
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    m = machine()
    text = "\n".join(
        [
            "# MST on a standalone Spark cluster: the input held by the driver or left on the "
            "cluster",
            "",
            f"{dt.date.today().isoformat()}, `python benchmarks/bench_spark_frames.py --rows "
            f"{args.rows}`; {', '.join(f'{k} {v}' for k, v in m.items())}. Same version on both "
            "paths, every check passed (checked). Seconds; GiB.",
            "",
            "| rows | path | wall | ingest | protect | validate | driver peak "
            "| driver private peak | driver tree peak | checks |",
            "|---|---|---|---|---|---|---|---|---|---|",
            *rows_out,
            "",
        ]
    )
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
