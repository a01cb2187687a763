"""One machine's memory of a count-based release on the local engine (issue 46, item 4): the
previous code, which encodes the whole input into a ``rows x d`` code matrix and counts it,
against the current code, which reads the input as a ``TableFrame`` (encoded and counted batch
by batch, ``privfair.components.core.frames``), in the same run: an MST release with the
settings of ``adult_mst`` of 1M and 3M Adult-like rows (``benchmarks/adult_like.py``).

Usage (from the repository root)::

    PRIVFAIR_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_streaming_counts.py
    PRIVFAIR_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_streaming_counts.py \\
        --sizes 200000 --baseline f9e93eb

What runs
---------
- The data: ``adult_like.write("adult_mst", rows, ...)`` (Adult's rows drawn with replacement,
  seed 0, its numeric columns jittered), with its unlabelled columns kept (as the shipped spec
  synthesises them), one Parquet file per size, shared by both codes; each spec twice
  (``--synthetic-rows``): as shipped, sampling the model's noisy total (as many synthetic rows
  as input rows, so the output's memory grows with the input), and with ``rows: 100000``
  (the output fixed: what is left growing is the input's).
- The codes: ``--baseline`` (default the commit before the streaming counts) exported with
  ``git archive`` (``harness.export_code``) and made importable by ``harness.prepare_tree``;
  the current code is the working tree (or ``--current``, exported the same way).
- Each release is one ``privfair run SPEC --engine local --workers 2 --progress`` in a fresh
  interpreter on a fresh store, measured by ``harness.tracked``: wall clock, the driver's peak
  RSS and its private peak (RSS less file-backed pages: the ingest's memory-mapped table is
  the kernel's to drop and read again), the peak of its process tree. GiB.
- Both releases of a size must pass every check and publish the same columns; their
  versions differ (a release's version digests its family's code) and so do their noisy
  bytes (OpenDP's noise takes no seed).

The report goes to stdout and to ``benchmarks/results/results_streaming_counts.md``
(``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import yaml
from adult_like import label, write
from bench_release_scale import CODE, NO_SCHEMA_CHECKS, PHASES, checked_run
from harness import HOLD, ROOT, Tree, export_code, machine, prepare_tree, result

#: the commit before the streaming counts: the local engine's whole-table code matrix
BASELINE = "55dfbf8"


def prepared(rows: int, data: Path, out_rows: list[int | None]) -> dict[int | None, Path]:
    """``adult_mst``'s spec on ``rows`` Adult-like rows written to ``data``, its unlabelled
    columns kept (the shipped spec synthesises them), one spec per number of synthetic rows
    of ``out_rows`` (``None``: the spec's own, the model's noisy total), on one file."""
    spec = write("adult_mst", rows, data, 0, {})
    doc = yaml.safe_load(spec.read_text())
    doc["dataset"]["unlabelled"] = "keep"
    out = {}
    for n in out_rows:
        path = spec if n is None else spec.with_name(f"{spec.stem}_out{n}.yaml")
        if n is not None:
            doc = {**doc, "component": {**doc["component"]}}
            doc["component"]["params"] = {**doc["component"]["params"], "rows": n}
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        out[n] = path
    return out


def release(code: Tree, spec: Path, work: Path, workers: int) -> dict:
    """One ``privfair run`` of ``spec`` with ``code``'s tree in a fresh interpreter."""
    store = work / "store"
    cmd = code.command("privfair.cli", "run", str(spec), "--store", str(store), "--progress")
    cmd += ["--engine", "local", "--workers", str(workers)]
    run = checked_run(
        cmd, code.root, code.env(PRIVFAIR_PROGRESS="1"), spec.name, (HOLD, NO_SCHEMA_CHECKS)
    )
    data = next(store.rglob("data.parquet"))
    keep = ("wall_s", "peak_gb", "driver_gb", "driver_private_gb", "phases", "checks", "version")
    return {"columns": tuple(pq.read_schema(data).names)} | {k: run[k] for k in keep}


def report(results: list[dict], commits: dict[str, str], argv: list[str]) -> str:
    info = machine()
    load = os.getloadavg()
    lines = [
        "# Streaming counts on the local engine: MST of Adult-like rows, previous code against "
        "current",
        "",
        f"Recorded {info['date']} on {platform.machine()} ({info['cpu']}), {info['cpus']} "
        f"usable CPUs, Python {info['python']}, numpy {info['numpy']}, pyarrow "
        f"{info['pyarrow']}; load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
        "(the machine is shared).",
        "",
        "Command: `PRIVFAIR_DATA_DIR=... .venv/bin/python benchmarks/bench_streaming_counts.py "
        + " ".join(argv)
        + "`",
        "",
        "Codes: " + ", ".join(f"{k} `{v}`" for k, v in commits.items()) + ".",
        "",
        "previous: the whole input encoded into a rows x d int64 code matrix, then counted; "
        "current: the input read as a `TableFrame`, encoded and counted batch by batch "
        "(65,536 rows). Each release a fresh `privfair run --engine local --workers 2` interpreter; driver = the run's "
        "own process, private = its RSS less file-backed pages; tree = the peak of its "
        "process tree. GiB, seconds.",
        "",
        "| rows | synthetic rows | code | wall s | "
        + " | ".join(PHASES)
        + " | driver peak | driver private "
        "| tree peak | version | checks |",
        "|---" * (9 + len(PHASES)) + "|",
    ]
    for r in results:
        ph = r["phases"]
        lines.append(
            f"| {r['rows']:,} | {_shown(r['synthetic'])} | {r['code']} | {r['wall_s']:.1f} | "
            + " | ".join(f"{ph[p]:.1f}" if p in ph else "" for p in PHASES)
            + f" | {r['driver_gb']:.2f} | {r['driver_private_gb']:.2f} | {r['peak_gb']:.2f} "
            f"| {r['version']} | {r['checks']} |"
        )
    return "\n".join(lines) + "\n"


def _shown(rows: int | None) -> str:
    return "noisy total" if rows is None else f"{rows:,}"


def _commit(ref: str) -> str:
    return subprocess.run(
        ["git", "describe", "--always", "--dirty", *([ref] if ref else [])],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000000,3000000", help="comma-separated row counts")
    ap.add_argument("--baseline", default=BASELINE, help="git ref of the previous code")
    ap.add_argument("--current", default="", help="git ref of the current code (default: the working tree)")  # fmt: skip
    ap.add_argument("--workers", type=int, default=2, help="the local engine's processes")
    ap.add_argument(
        "--synthetic-rows",
        default="spec,100000",
        help="comma-separated synthetic row counts: 'spec' (the noisy total, as many as the "
        "input) or a number (params.rows: the output's memory then stays fixed)",
    )
    ap.add_argument("--out", default=str(result("results_streaming_counts.md")))
    args = ap.parse_args(argv)
    given = list(argv if argv is not None else sys.argv[1:])
    if not os.environ.get("PRIVFAIR_DATA_DIR"):
        raise SystemExit("PRIVFAIR_DATA_DIR: set it to the folder holding the Adult files")
    synthetic = [None if x == "spec" else int(x) for x in args.synthetic_rows.split(",")]
    results = []
    with tempfile.TemporaryDirectory(prefix="privfair-streaming-counts-") as tmp:
        base = Path(tmp)
        commits = {"previous": export_code(args.baseline, base / "previous", CODE)}
        codes = {"previous": prepare_tree(base / "previous")}
        if args.current:
            commits["current"] = export_code(args.current, base / "current", CODE)
            codes["current"] = prepare_tree(base / "current")
        else:
            commits["current"] = _commit("")
            codes["current"] = prepare_tree(ROOT)
        for rows in (int(x) for x in args.sizes.split(",")):
            data = base / f"data-{label(rows)}"
            for out_rows, spec in prepared(rows, data, synthetic).items():
                columns = set()
                for code in ("previous", "current"):
                    work = base / f"work-{rows}-{out_rows}-{code}"
                    work.mkdir()
                    got = release(codes[code], spec, work, args.workers)
                    got |= {"rows": rows, "synthetic": out_rows, "code": code}
                    print(json.dumps(got), flush=True)
                    results.append(got)
                    columns.add(got.pop("columns"))
                    shutil.rmtree(work, ignore_errors=True)
                if len(columns) != 1:
                    raise SystemExit(f"{rows} rows: the codes published other columns {columns}")
            shutil.rmtree(data, ignore_errors=True)
    text = report(results, commits, given)
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
