"""A model of a blocked release's time against workers, fitted on two small runs and checked
on a larger one, then used to say what 100M rows would take on a Spark cluster.

Usage (from the repository root; the Adult files in ``PRIVFAIR_DATA_DIR``)::

    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/time_model.py
    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/time_model.py \\
        --fit-rows 1000000 --mid-rows 3000000 --check-rows 10000000 --engine spark

The model
---------
A blocked ``fair_mdav`` release (``block_rows`` 50,000, C11 on 2,000 sampled fairlets, the
spec ``bench_release_scale.py`` uses) has two kinds of work:

- **per block** (``c`` seconds each, run by the engine's workers): the grouping of a block
  (``protect``) and the by-group checks of its part (``by-group guarantees checked``);
- **on the driver** (``s`` seconds per row, whatever the workers): ingest, encoding and cutting,
  merging, writing, the whole-table evidence, Great Expectations, the cost of protection on its
  100,000-row sample, the report.

``T(N, w) = a + s N + c B(N) / min(w, B(N))`` with ``B(N)`` blocks. The runs with one and two
workers at ``--fit-rows`` give the per-block cost of each engine phase, ``c = 2 (T1 - T2) / B``
(the work the second worker shared), and the driver's time there, ``T1 - c B``; a run with two
workers at ``--mid-rows`` gives the driver's time at a second size, ``T - c B / 2``, hence its
fixed cost ``a`` (start-up, Spark's session, the cost of protection's bounded sample, compiling
the suites) and its cost per row ``s``. The model is then checked on ``--check-rows`` with two
workers, a size it was not fitted on (its block count read from that run), and evaluated at
100M rows for 8 to 512 workers, with the blocks per row of the largest run (a block holds at
most ``block_rows`` rows, so ``B`` grows with ``N``).

What it leaves out: Spark's scheduling and shuffle cost per block on a real cluster (here the
blocks travel as local Parquet), the driver's memory (linear in ``N``; see
``benchmarks/README.md``), and stragglers. Each run is one ``privfair run --progress`` in a
fresh interpreter; every check of every run must pass.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from bench_release_scale import make_spec
from harness import HOLD, ROOT, prepare_tree, result, tracked

_LINE = re.compile(r"✓ (.+?)\s{2,}(?:(\d+) min )?([\d.]+) s")
_PARTS = re.compile(r"by-group guarantees checked in (\d+) parts")
ENGINE_PHASES = ("protect", "parts")


def timed_run(spec: Path, engine: str, workers: int, work: Path) -> dict:
    """One ``privfair run`` of ``spec``: wall clock, engine phases, block count."""
    tree = prepare_tree(ROOT)  # the working tree: the command checked to come from it
    cmd = tree.command("privfair.cli", "run", str(spec), "--store", str(work), "--progress")
    cmd += ["--engine", engine]
    cmd += ["--master", f"local[{workers}]"] if engine == "spark" else ["--workers", str(workers)]
    run = tracked(cmd, tree.root, tree.env())
    held = HOLD.search(run["stdout"])
    if run["rc"] != 0 or not held or held.group(1) != held.group(2):
        raise SystemExit(f"{' '.join(cmd)}: not every check passed\n{run['stderr'][-2000:]}")
    got = {"wall": run["wall_s"], "driver_gb": run["driver_gb"]}
    for line in run["stderr"].replace("\r", "\n").splitlines():
        m = _LINE.search(line)
        if not m:
            continue
        seconds = 60 * int(m.group(2) or 0) + float(m.group(3))
        name = m.group(1)
        if name.startswith("protect"):
            got["protect"] = seconds
        elif parts := _PARTS.search(name):
            got["parts"], got["blocks"] = seconds, int(parts.group(1))
    if "blocks" not in got:
        raise SystemExit(f"{spec}: the release was not checked in parts")
    return got


def fit(one: dict, two: dict, mid: dict, rows: int, mid_rows: int) -> dict:
    """Per-block cost ``c`` of each engine phase; the driver's fixed ``a`` and per-row ``s``."""
    c = {p: max(0.0, 2 * (one[p] - two[p])) / one["blocks"] for p in ENGINE_PHASES}
    per_block = sum(c.values())
    driver_fit = one["wall"] - per_block * one["blocks"]
    driver_mid = mid["wall"] - per_block * mid["blocks"] / min(2, mid["blocks"])
    s = (driver_mid - driver_fit) / (mid_rows - rows)
    return {"c": c, "s": s, "a": driver_fit - s * rows}


def predict(model: dict, rows: int, workers: int, blocks: int) -> float:
    return model["a"] + model["s"] * rows + sum(model["c"].values()) * blocks / min(workers, blocks)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fit-rows", type=int, default=1_000_000)
    ap.add_argument("--mid-rows", type=int, default=3_000_000)
    ap.add_argument("--check-rows", type=int, default=10_000_000)
    ap.add_argument("--engine", choices=("spark", "local"), default="spark")
    ap.add_argument("--out", default=str(result("results_time_model.md")))
    args = ap.parse_args(argv)
    if not os.environ.get("PRIVFAIR_DATA_DIR"):
        raise SystemExit("PRIVFAIR_DATA_DIR: set it to the folder holding the Adult files")
    with tempfile.TemporaryDirectory(prefix="privfair-time-model-") as tmp:
        base = Path(tmp)
        runs = {}
        plan = [(args.fit_rows, 1), (args.fit_rows, 2), (args.mid_rows, 2), (args.check_rows, 2)]
        for rows, workers in plan:
            data = base / f"data-{rows}"
            spec = next(data.glob("*.yaml"), None) or make_spec("fair_mdav", rows, data)
            runs[(rows, workers)] = timed_run(
                spec, args.engine, workers, base / f"s{rows}{workers}"
            )
            print(json.dumps({"rows": rows, "workers": workers, **runs[(rows, workers)]}))
    one, two, mid = runs[(args.fit_rows, 1)], runs[(args.fit_rows, 2)], runs[(args.mid_rows, 2)]
    model = fit(one, two, mid, args.fit_rows, args.mid_rows)
    check = runs[(args.check_rows, 2)]
    predicted = predict(model, args.check_rows, 2, check["blocks"])
    where = "Spark local[w]" if args.engine == "spark" else "process pool of w workers"
    lines = [
        "# A blocked release's time against workers (benchmarks/time_model.py)",
        "",
        f"`{' '.join(['python benchmarks/time_model.py', *(argv or sys.argv[1:])])}`; "
        f"{where}; adult_fair_mdav, block_rows 50,000.",
        "",
        "| rows | workers | blocks | wall s | protect s | by-group checks s | driver peak GB |",
        "|---|---|---|---|---|---|---|",
    ]
    for (rows, workers), r in runs.items():
        lines.append(
            f"| {rows:,} | {workers} | {r['blocks']} | {r['wall']:.1f} | {r['protect']:.1f} | "
            f"{r['parts']:.1f} | {r['driver_gb']:.2f} |"
        )
    c = model["c"]
    lines += [
        "",
        f"Fitted at {args.fit_rows:,} rows: per block, grouping {c['protect']:.3f} s and by-group "
        f"checks {c['parts']:.3f} s; on the driver {model['a']:.1f} s fixed and "
        f"{model['s'] * 1e6:.2f} s per million rows (from {args.mid_rows:,} rows).",
        "",
        f"Check at {args.check_rows:,} rows, 2 workers: predicted {predicted:.1f} s, measured "
        f"{check['wall']:.1f} s ({100 * (predicted - check['wall']) / check['wall']:+.0f}%).",
        "",
        "| 100M rows (~{b:,} blocks): workers | predicted wall | of which on the driver |".format(
            b=round(check["blocks"] * 100_000_000 / args.check_rows)
        ),
        "|---|---|---|",
    ]
    blocks = round(check["blocks"] * 100_000_000 / args.check_rows)
    driver = model["a"] + model["s"] * 1e8
    for w in (8, 32, 128, 512):
        t = predict(model, 100_000_000, w, blocks)
        lines.append(f"| {w} | {t / 60:.0f} min | {driver / 60:.0f} min |")
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
