"""The driver's memory of Fair-MDAV's blocked release on a real Spark standalone cluster (issue 46,
"driver peak flat in the row count"): the release made on the executors, the driver holding no
row (``privfair.components.microaggregation.spark_release.protect_on_spark``: NEW), against the
current Spark engine (``fair_mdav`` under ``using(SparkEngine(master=...))`` on the table the
driver reads with pyarrow, the blocks shipped to the executors and their results back: what
``privfair run --engine spark`` does today for a row-level family: CURRENT), in the same run, on
Adult-like tables (``benchmarks/adult_like.py``, seed 0) through adult_fair_mdav's params with
``block_rows`` 50,000 (as ``bench_release_scale.py`` and ``bench_spark_cluster.py``).

Usage (from the repository root, as root: the cluster's worker runs as another OS user)::

    PRIVFAIR_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_spark_protect.py
    PRIVFAIR_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_spark_protect.py \\
        --rows 1000000,3000000 --variants new

What runs
---------
- The cluster: the tests' own (``tests/_spark_cluster.py``): a master and one worker (2 cores,
  ``--worker-memory``), the worker as the OS user ``privfair-spark``, on 127.0.0.1. The input
  file (0644, in 0755 folders) is read by the executors; NEW's output folder belongs to
  ``privfair-spark`` (the executors write the parts there).
- Each measurement is this script run again as a fresh driver interpreter (``--child``),
  sampled by ``harness.tracked``: wall clock (interpreter, JVM and application start included),
  the driver's peak RSS and its private peak (RSS less file-backed and shared pages), and the
  peak of the driver's process tree (the Python driver and its JVM; the executors are the
  worker's children, another user's, not counted). GiB. The child also times the protection
  call alone (``protect s``).
  - NEW: ``spark.read.parquet`` of the file, the spec's roles on its schema (as
    ``privfair.io.ingest.load_frame`` gives them, without its file digest and its
    ``validate_frame``, which refuses numeric quasi-identifiers), each row's input position (``privfair.io.positions.with_positions``), then
    ``protect_on_spark`` writing the parts (``rows_per_part``) into a folder the worker writes.
  - CURRENT: ``privfair.run.flow.ingest`` (the driver reads the Parquet file with pyarrow, as
    ``privfair run`` does), then ``fair_mdav`` under ``using(SparkEngine(master=...))``; its
    ``data`` and ``lineage`` are written as Arrow IPC files (streamed from the table it holds)
    for the check.
- The check, after both measured runs, in another (unmeasured) interpreter: the NEW parts read
  in order and concatenated equal CURRENT's ``data`` (``Table.equals``, field metadata
  included, as ``tests/microaggregation/test_spark_release.py``), likewise the lineage; the
  sha256 of each table's Arrow IPC stream (metadata dropped, dictionaries decoded, one batch)
  is printed; the metrics are the same (the information loss to within 1e-9 relative: a sum of
  per-block sums), and the warnings. The script fails if any differs.

The report goes to stdout and to ``benchmarks/results/results_spark_protect.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import math
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from adult_like import write
from harness import ROOT, child_env, machine, result, tracked

sys.path.insert(0, str(ROOT / "tests"))
from _spark_cluster import USER, Cluster  # noqa: E402 - the tests' cluster, on this machine

SPEC = "adult_fair_mdav"
#: the block size the benchmarks use for 1M-row Fair-MDAV (bench_release_scale.py)
BLOCK_ROWS = 50_000
VARIANTS = {
    "new": "NEW: protect_on_spark (executors read, protect, write)",
    "current": "CURRENT: fair_mdav on SparkEngine (driver holds the table)",
}


# --- the children: one measured driver each --------------------------------------------------------
def _params(spec):
    from privfair.components.microaggregation.params import FairMDAVParams

    return FairMDAVParams(**spec.component.params)


def _engine(master: str, executor_memory: str):
    from privfair.components.core.engine import SparkEngine

    return SparkEngine(master=master, conf={"spark.executor.memory": executor_memory})


def child_new(spec_path: Path, master: str, executor_memory: str, out: Path, args) -> dict:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    from privfair.components.core.engine import SparkFrame, using
    from privfair.components.microaggregation.spark_release import protect_on_spark
    from privfair.io.ingest import file_label, file_names, frame_file, label_columns, select_columns
    from privfair.io.positions import with_positions
    from privfair.spec.catalogue import load_spec

    spec = load_spec(spec_path)
    params = _params(spec)
    ds = spec.dataset
    engine = _engine(master, executor_memory)
    try:
        with using(engine):
            t0 = time.perf_counter()
            # the frame load_frame makes (its schema typed and given the spec's roles), without
            # its validate_frame, which refuses a numeric quasi-identifier (a count-based
            # family's check) and the file's digest
            path = frame_file(ds, spec.spec_dir)
            df = engine.spark.read.parquet(path.resolve().as_uri())
            read = to_arrow_schema(df.schema, timezone="UTC")
            empty = pa.schema([pa.field(f.name, f.type) for f in read]).empty_table()
            schema = select_columns(
                label_columns(empty, ds.columns, path.name), ds, file_label(ds)
            )[0].schema
            frame = SparkFrame(with_positions(df, path, file_names(path)), schema)
            t1 = time.perf_counter()
            got = protect_on_spark(
                frame,
                params,
                out.resolve().as_uri(),
                rows_per_part=args.rows_per_part,
                local_rows=args.local_rows,
            )
            t2 = time.perf_counter()
    finally:
        engine.close()
    return {
        "read_s": t1 - t0,
        "protect_s": t2 - t1,
        "parts": got.parts,
        "metrics": got.metrics,
        "warnings": got.warnings,
    }


def child_current(spec_path: Path, master: str, executor_memory: str, out: Path, args) -> dict:
    import pyarrow as pa

    from privfair.components.core.engine import using
    from privfair.components.microaggregation.fair_mdav import fair_mdav
    from privfair.run.flow import ingest
    from privfair.spec.catalogue import load_spec

    spec = load_spec(spec_path)
    params = _params(spec)
    t0 = time.perf_counter()
    table = ingest(spec).table
    t1 = time.perf_counter()
    engine = _engine(master, executor_memory)
    try:
        with using(engine):
            got = fair_mdav(table, params)
        t2 = time.perf_counter()
    finally:
        engine.close()
    for name, t in (("data", got.outputs["data"]), ("lineage", got.sidecars["lineage"])):
        with pa.OSFile(str(out / f"{name}.arrow"), "wb") as f, pa.ipc.new_file(f, t.schema) as w:
            w.write_table(t)
    return {
        "read_s": t1 - t0,
        "protect_s": t2 - t1,
        "metrics": got.metrics,
        "warnings": got.warnings,
    }


# --- the check (unmeasured) ------------------------------------------------------------------------
def digest(t) -> str:
    """sha256 of ``t``'s Arrow IPC stream: no metadata, dictionaries decoded, one batch."""
    import pyarrow as pa

    fields = [
        pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
        for f in t.schema
    ]
    plain = t.cast(pa.schema(fields)).combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, plain.schema) as w:
        w.write_table(plain)
    return hashlib.sha256(sink.getvalue()).hexdigest()


def _close(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300)
    return a == b


def child_check(new_dir: Path, new_json: Path, current_dir: Path) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    new = json.loads(new_json.read_text())
    cur = json.loads((current_dir / "result.json").read_text())
    out: dict = {}
    for name, prefix in (("data", "part-"), ("lineage", "lineage-")):
        parts = [pq.read_table(new_dir / f.replace("part-", prefix)) for f, _ in new["parts"]]
        a = pa.concat_tables(parts)
        b = pa.ipc.open_file(str(current_dir / f"{name}.arrow")).read_all()
        b = b.replace_schema_metadata(None)
        out[name] = {
            "rows": a.num_rows,
            "equal": a.equals(b, check_metadata=True),
            "sha256_new": digest(a),
            "sha256_current": digest(b),
        }
    il_new = new["metrics"].pop("information_loss")
    il_cur = cur["metrics"].pop("information_loss")
    out["metrics_equal"] = new["metrics"] == cur["metrics"] or _close(
        new["metrics"], cur["metrics"]
    )
    out["information_loss_close"] = _close(il_new, il_cur)
    out["warnings_equal"] = new["warnings"] == cur["warnings"]
    return out


def child(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", choices=["new", "current", "check"], required=True)
    ap.add_argument("--spec", type=Path)
    ap.add_argument("--master")
    ap.add_argument("--executor-memory")
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--current-dir", type=Path)
    ap.add_argument("--new-json", type=Path)
    ap.add_argument("--rows-per-part", type=int, default=1 << 20)
    ap.add_argument("--local-rows", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    if args.child == "check":
        print(json.dumps(child_check(args.dir, args.new_json, args.current_dir)))
        return 0
    run = child_new if args.child == "new" else child_current
    got = run(args.spec, args.master, args.executor_memory, args.dir, args)
    _result_file(args.dir, args.child).write_text(json.dumps(got, default=str))
    return 0


# --- the benchmark ---------------------------------------------------------------------------------
def _result_file(folder: Path, variant: str) -> Path:
    """Where a child leaves what it reports: beside NEW's parts (a folder the executors write,
    holding parts only), inside CURRENT's folder."""
    return folder / "result.json" if variant == "current" else folder.with_suffix(".json")


def _readable(folder: Path) -> None:
    for p in (folder, *folder.rglob("*")):
        p.chmod(0o755 if p.is_dir() else 0o644)


def _run(cmd: list[str], env: dict, what: str) -> dict:
    r = tracked(cmd, ROOT, env)
    if r["rc"] != 0:
        raise SystemExit(f"{what} failed (exit {r['rc']}):\n{r['stderr'][-6000:]}")
    return r


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a == "--child" or a.startswith("--child=") for a in argv):
        return child(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="1000000", help="comma-separated row counts")
    ap.add_argument("--variants", default="new,current", help="new, current")
    ap.add_argument("--worker-memory", default="6g")
    ap.add_argument("--executor-memory", default="4g")
    ap.add_argument("--rows-per-part", type=int, default=1 << 20)
    ap.add_argument("--local-rows", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, help="make the work folder here and keep it")
    ap.add_argument("--out", type=Path, default=result("results_spark_protect.md"))
    args = ap.parse_args(argv)
    variants = args.variants.split(",")
    if args.keep:
        args.keep.mkdir(parents=True)
        work = args.keep.resolve()
    else:
        work = Path(tempfile.mkdtemp(prefix="privfair-bench-protect-"))
    work.chmod(0o755)  # the worker's user reads its Python, the cluster's folder and the input
    me = Path(__file__).resolve()
    rows_out: list[str] = []
    checks: list[str] = []
    try:
        cluster = Cluster.start(work / "cluster", memory=args.worker_memory)
        try:
            env = child_env(
                PYSPARK_PYTHON=cluster.python,
                SPARK_LOCAL_IP="127.0.0.1",
                PRIVFAIR_SPARK_CONNECT_TIMEOUT="180",
            )
            spark_user = pwd.getpwnam(USER)
            for rows in (int(x) for x in args.rows.split(",")):
                data = work / f"data-{rows}"
                t0 = time.perf_counter()
                spec = write(SPEC, rows, data, 0, {"block_rows": BLOCK_ROWS})
                _readable(data)
                print(f"{rows:,} rows written in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
                dirs = {}
                for variant in variants:
                    folder = work / f"{variant}-{rows}"
                    folder.mkdir()
                    if variant == "new":  # the executors write the parts
                        os.chown(folder, spark_user.pw_uid, spark_user.pw_gid)
                    folder.chmod(0o755)
                    cmd = [sys.executable, str(me), "--child", variant, "--spec", str(spec)]
                    cmd += ["--master", cluster.url, "--executor-memory", args.executor_memory]
                    cmd += ["--dir", str(folder), "--rows-per-part", str(args.rows_per_part)]
                    cmd += ["--local-rows", str(args.local_rows)]
                    r = _run(cmd, env, f"{variant} at {rows:,} rows")
                    inner = _result_file(folder, variant)
                    got = json.loads(inner.read_text())
                    dirs[variant] = (folder, inner)
                    line = (
                        f"| {rows:,} | {VARIANTS[variant]} | {r['wall_s']:.1f} | "
                        f"{got['protect_s']:.1f} | {r['driver_gb']:.2f} | "
                        f"{r['driver_private_gb']:.2f} | {r['peak_gb']:.2f} |"
                    )
                    rows_out.append(line)
                    print(line, file=sys.stderr, flush=True)
                if {"new", "current"} <= dirs.keys():
                    (new_dir, new_json), (cur_dir, _) = dirs["new"], dirs["current"]
                    got = subprocess.run(
                        [sys.executable, str(me), "--child", "check", "--dir", str(new_dir)]
                        + ["--new-json", str(new_json), "--current-dir", str(cur_dir)],
                        cwd=ROOT,
                        env=env,
                        capture_output=True,
                        text=True,
                    )
                    if got.returncode != 0:
                        raise SystemExit(
                            f"the check at {rows:,} rows failed:\n{got.stderr[-4000:]}"
                        )
                    c = json.loads(got.stdout.strip().splitlines()[-1])
                    text = (
                        f"{rows:,} rows: data equal {c['data']['equal']} "
                        f"(sha256 NEW {c['data']['sha256_new'][:16]}…, CURRENT "
                        f"{c['data']['sha256_current'][:16]}…, {c['data']['rows']:,} rows), "
                        f"lineage equal {c['lineage']['equal']} (sha256 NEW "
                        f"{c['lineage']['sha256_new'][:16]}…, CURRENT "
                        f"{c['lineage']['sha256_current'][:16]}…), metrics equal "
                        f"{c['metrics_equal']}, information loss within 1e-9 "
                        f"{c['information_loss_close']}, warnings equal {c['warnings_equal']}"
                    )
                    print(text, file=sys.stderr, flush=True)
                    checks.append(f"- {text}")
                    same = (
                        c["data"]["equal"]
                        and c["lineage"]["equal"]
                        and c["data"]["sha256_new"] == c["data"]["sha256_current"]
                        and c["lineage"]["sha256_new"] == c["lineage"]["sha256_current"]
                        and c["metrics_equal"]
                        and c["information_loss_close"]
                        and c["warnings_equal"]
                    )
                    if not same:
                        raise SystemExit(f"{rows:,} rows: NEW does not publish CURRENT's release")
                for folder in (data, *(d for d, _ in dirs.values())):
                    if not args.keep:
                        shutil.rmtree(folder, ignore_errors=True)
        finally:
            cluster.stop()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    m = machine()
    text = "\n".join(
        [
            "# Fair-MDAV on a standalone Spark cluster: the release made on the executors "
            "(protect_on_spark) or by the current engine (driver holds the table)",
            "",
            f"{dt.date.today().isoformat()}, `python benchmarks/bench_spark_protect.py "
            f"--rows {args.rows} --variants {args.variants}`; {SPEC} params, block_rows "
            f"{BLOCK_ROWS:,}; worker {args.worker_memory}, executor {args.executor_memory}; "
            f"{', '.join(f'{k} {v}' for k, v in m.items())}. Seconds; GiB.",
            "",
            "| rows | variant | wall s | protect s | driver peak RSS GiB "
            "| driver private peak GiB | driver + JVM peak GiB |",
            "|---|---|---|---|---|---|---|",
            *rows_out,
            "",
            *checks,
            "",
        ]
    )
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
