"""The driver's memory of a count-based release (MST, AIM, ATR) on a real Spark standalone
cluster: the input ingested by the driver and sent to the executors (the path before issue 46's
count-based part), against the input left on the cluster (``privfair.io.ingest.load_frame``: the
executors read, encode or project, and count the Parquet file), in the same run: 1M Adult-like
rows (``benchmarks/adult_like.py``) through adult_mst (``--specs adult_mst,adult_aim,adult_atr``
for the others; adult_atr with the label deciding, as its input then stays on the cluster).

Usage (from the repository root, as root: the cluster's worker runs as another OS user)::

    PRIVFAIR_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_spark_frames.py
    PRIVFAIR_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_spark_frames.py --rows 200000
    PRIVFAIR_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_spark_frames.py \\
        --specs adult_atr,adult_aim

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
  every check; their noisy bytes differ (OpenDP's noise takes no seed; ATR's is seeded, and
  its two releases must publish the same bytes).

The report goes to stdout and to ``benchmarks/results/results_spark_frames.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
from pathlib import Path

import yaml
from _cluster import CLI, line, on_cluster, release
from adult_like import write
from harness import machine, result

#: ``privfair`` with the input read by the driver, as before: ``on_cluster`` false
DRIVER_HOLDS = [
    "-c",
    "import sys; import privfair.run.flow as f; f.on_cluster = lambda plan: False; "
    "from privfair.cli import main; sys.exit(main(sys.argv[1:]))",
]

#: the releases whose published bytes do not depend on an unseeded noise: both paths publish them
SAME_BYTES = {"adult_atr": "shared/decision_rules.parquet"}


def prepared(name: str, rows: int, data: Path) -> Path:
    """``name``'s spec on ``rows`` Adult-like rows written to ``data``: the synthesisers keep
    their ignored columns (as their shipped specs do: they are synthesised), ATR decides by the
    label (a model fitted on the records keeps the input on the driver) and reads the report's
    three columns."""
    spec = write(name, rows, data, 0, {})
    doc = yaml.safe_load(spec.read_text())
    if name == "adult_atr":
        params = doc["component"]["params"]
        for key in ("model", "train_fraction", "model_seed"):
            params.pop(key, None)
        params["decisions"] = "label"
        # the report's columns; the others have no role and are not released
        keep = ("sex", "education-num", "income")
        doc["dataset"]["columns"] = {c: doc["dataset"]["columns"][c] for c in keep}
        doc["dataset"]["unlabelled"] = "drop"
    else:
        doc["dataset"]["unlabelled"] = "keep"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    return spec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--specs", default="adult_mst", help="adult_mst, adult_aim, adult_atr")
    ap.add_argument("--worker-memory", default="6g")
    ap.add_argument("--executor-memory", default="4g")
    ap.add_argument("--out", type=Path, default=result("results_spark_frames.md"))
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="privfair-bench-frames-"))
    work.chmod(0o755)  # the worker's user reads its Python, the cluster's folder and the input
    data = work / "data"
    specs = {name: prepared(name, args.rows, data) for name in args.specs.split(",")}
    for p in (data, *data.iterdir()):
        p.chmod(0o755 if p.is_dir() else 0o644)
    rows_out: list[str] = []
    try:
        with on_cluster(work / "cluster", args.worker_memory, args.executor_memory) as (
            engine,
            env,
        ):
            for name, spec in specs.items():
                got = {}
                for path, launcher in (
                    ("input on the cluster (load_frame)", CLI),
                    ("driver holds the input (before)", DRIVER_HOLDS),
                ):
                    one = work / f"{name}-{len(got)}"
                    got[path] = r = release(
                        spec, engine, env, one / "store", launcher, published=SAME_BYTES.get(name)
                    )
                    shutil.rmtree(one, ignore_errors=True)
                    print(line(f"{name} {args.rows:,} {path}", r), file=sys.stderr)
                a, b = got.values()
                if (a["version"], a["data"]) != (b["version"], b["data"]):
                    raise SystemExit(f"{name}: the two releases are not the same release")
                for path, r in got.items():
                    ph = r["phases"]
                    rows_out.append(
                        f"| {name} | {args.rows:,} | {path} | {r['wall_s']:.1f} | "
                        f"{ph.get('ingest', 0):.1f} | {ph.get('protect', 0):.1f} | "
                        f"{ph.get('validate', 0):.1f} | {r['driver_gb']:.2f} | "
                        f"{r['driver_private_gb']:.2f} | {r['peak_gb']:.2f} | {r['checks']} |"
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    m = machine()
    text = "\n".join(
        [
            "# Count-based releases on a standalone Spark cluster: the input held by the driver "
            "or left on the cluster",
            "",
            f"{dt.date.today().isoformat()}, `python benchmarks/bench_spark_frames.py --rows "
            f"{args.rows} --specs {args.specs}`; {', '.join(f'{k} {v}' for k, v in m.items())}. Same version on both "
            "paths, every check passed (checked). Seconds; GiB.",
            "",
            "| spec | rows | path | wall | ingest | protect | validate | driver peak "
            "| driver private peak | driver tree peak | checks |",
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
