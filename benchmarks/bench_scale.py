"""Scale: blocked Fair-MDAV and dMondrian on 1M and 10M Adult-like rows, through Spark and
through a plain multiprocessing pool over the same blocks (issue 14).

Usage (from the repository root; the Adult files in ``PRIVFAIR_DATA_DIR``)::

    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/bench_scale.py
    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/bench_scale.py --sizes 1000000 \
        --blocks 50000 --unblocked-up-to 0

What runs
---------
- Tables: ``benchmarks/adult_like.py`` (Adult's rows drawn with replacement, seed 0, numeric
  QIs jittered), with the roles of ``adult_fair_mdav`` (12 QIs, sex protected, income label)
  and of ``adult_dmondrian``.
- Fair-MDAV, k = 10 (m = 3, n = 7 on Adult), ``block_rows`` in ``--blocks``: through
  ``SparkEngine("local[2]")`` (``groupBy(block).applyInArrow`` over Parquet) and
  ``LocalEngine(2)`` (a 2-process ``concurrent.futures`` pool over the same blocks); the
  published bytes of both must be equal, or the script fails. Unblocked Fair-MDAV (the paper's
  algorithm, one process) runs up to ``--unblocked-up-to`` rows, for the information loss IL
  of blocking against it.
- dMondrian, t = 0.15, ``block_rows`` 50,000, on the sizes up to ``--dmondrian-up-to``:
  unblocked, Spark and the pool; all three must publish the same bytes (blocking does not
  change dMondrian's classes).
- Each measurement is one component call in a fresh interpreter (the table generated there
  first, not timed); wall clock of the call including the engine's start-up (Spark's JVM),
  the grouping phase alone, and the peak of the summed RSS of the whole process tree (the
  interpreter, pool workers, the JVM and Spark's Python workers), sampled every 0.2 s.

The report goes to stdout and to ``benchmarks/results/results_scale.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import sys
import time
from pathlib import Path

from harness import ROOT, result, tracked


def _digest(table) -> str:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema.remove_metadata()) as w:
        w.write_table(table.replace_schema_metadata(None).combine_chunks())
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()[:16]


def one(cfg: dict) -> dict:
    """One measurement (in this fresh interpreter): see the module docstring."""
    from adult_like import adult_like

    from privfair.components.core.engine import LocalEngine, SparkEngine, using
    from privfair.run.flow import ingest
    from privfair.spec.catalogue import load_spec
    from privfair.spec.settings import specs_dir

    spec = load_spec(specs_dir() / f"adult_{cfg['algo']}.yaml")
    table = adult_like(ingest(spec).table, cfg["rows"], seed=0)
    if cfg["algo"] == "fair_mdav":
        from privfair.components.microaggregation.fair_mdav import fair_mdav as run
        from privfair.components.microaggregation.params import FairMDAVParams

        params = FairMDAVParams(k=10, tau=1.0, block_rows=cfg["block_rows"], publish="schema")
    else:
        from privfair.components.generalisation.dmondrian import dmondrian as run
        from privfair.components.generalisation.params import DMondrianParams

        params = DMondrianParams(t=0.15, utility_queries=0, block_rows=cfg["block_rows"])
    t0 = time.perf_counter()
    if cfg["engine"] == "spark":
        engine = SparkEngine(f"local[{cfg['workers']}]")
        engine.spark  # noqa: B018 - the session starts on first use: time it apart
    else:
        engine = LocalEngine(cfg["workers"])
    started = time.perf_counter() - t0
    with using(engine):
        result = run(table, params)
    seconds = time.perf_counter() - t0
    engine.close()
    m = result.metrics
    il = (m.get("information_loss") or {}).get("il")
    return {
        **cfg,
        "seconds": seconds,
        "engine_start_s": started,
        "group_s": result.timings.get("group_s"),
        "il": il,
        "groups": m.get("groups") or m.get("classes"),
        "digest": _digest(result.outputs["data"]),
    }


def measure(cfg: dict) -> dict:
    """``one(cfg)`` in a fresh interpreter, with the process tree's peak RSS."""
    run = tracked([sys.executable, __file__, "--one", json.dumps(cfg)], ROOT, dict(os.environ))
    if run["rc"] != 0:
        raise SystemExit(f"{cfg} failed:\n{run['stderr'][-3000:]}")
    out = run["stdout"]
    got = json.loads(out.strip().splitlines()[-1])
    got["peak_gb"] = run["peak_gb"]
    print(json.dumps(got), flush=True)
    return got


def _fmt_rows(n: int) -> str:
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1e3:g}k"


def report(results: list[dict], args) -> str:
    lines = [
        "# Scale: blocked Fair-MDAV and dMondrian through Spark and a process pool",
        "",
        f"Recorded {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}.",
        "",
        "Command: `PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/bench_scale.py "
        + " ".join(args.argv)
        + "`",
        "",
        "| algorithm | rows | engine | workers | block rows | wall s | of which engine start s "
        "| grouping s | µs / row | peak RSS (tree) GB | IL | groups | output digest |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['algo']} | {_fmt_rows(r['rows'])} | {r['engine']} | {r['workers']} "
            f"| {r['block_rows'] or 'none'} | {r['seconds']:.1f} | {r['engine_start_s']:.1f} "
            f"| {r['group_s'] if r['group_s'] is None else round(r['group_s'], 1)} "
            f"| {r['seconds'] / r['rows'] * 1e6:.1f} | {r['peak_gb']:.2f} "
            f"| {'' if r['il'] is None else round(r['il'], 4)} | {r['groups']} | `{r['digest']}` |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Blocked Fair-MDAV and dMondrian at scale")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--blocks", default="50000", help="Fair-MDAV block_rows values")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--engines", default="spark,local")
    ap.add_argument("--unblocked-up-to", type=int, default=1_000_000)
    ap.add_argument("--dmondrian-up-to", type=int, default=1_000_000)
    ap.add_argument("--out", type=Path, default=result("results_scale.md"))
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(json.loads(args.one))))
        return 0
    args.argv = argv if argv is not None else sys.argv[1:]
    sizes = [int(s) for s in args.sizes.split(",")]
    blocks = [int(b) for b in args.blocks.split(",")]
    engines = args.engines.split(",")
    results = []
    for n in sizes:
        digests = {}
        for b in blocks:
            for e in engines:
                r = measure(
                    {
                        "algo": "fair_mdav",
                        "rows": n,
                        "engine": e,
                        "workers": args.workers,
                        "block_rows": b,
                    }
                )
                results.append(r)
                digests.setdefault(b, set()).add(r["digest"])
        for b, ds in digests.items():
            if len(ds) != 1:
                raise SystemExit(f"Fair-MDAV {n} rows, blocks {b}: engines disagree {ds}")
        if n <= args.unblocked_up_to:
            results.append(
                measure(
                    {
                        "algo": "fair_mdav",
                        "rows": n,
                        "engine": "local",
                        "workers": 1,
                        "block_rows": None,
                    }
                )
            )
        if n <= args.dmondrian_up_to:
            ds = set()
            for e, w, b in [("local", 1, None)] + [(e, args.workers, 50_000) for e in engines]:
                r = measure(
                    {"algo": "dmondrian", "rows": n, "engine": e, "workers": w, "block_rows": b}
                )
                results.append(r)
                ds.add(r["digest"])
            if len(ds) != 1:
                raise SystemExit(f"dMondrian {n} rows: blocked and unblocked disagree {ds}")
        args.out.write_text(report(results, args))
    text = report(results, args)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
