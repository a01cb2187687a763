"""Releases end to end at scale: ``privfair run`` (ingest -> protect -> validate -> cost of
protection -> report -> publish) then ``privfair export``, on Adult-like tables of 1M (or more)
rows, blocked Fair-MDAV and dMondrian, through the local process pool and Spark ``local[2]``,
with the previous code measured in the same run.

Usage (from the repository root; the Adult files in ``PRIVFAIR_DATA_DIR``)::

    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/bench_release_scale.py
    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/bench_release_scale.py \\
        --sizes 1000000 --engines local --baseline 8d24a4c

What runs
---------
- Tables and specs: ``benchmarks/adult_like.py`` (Adult's rows drawn with replacement, seed 0,
  numeric QIs jittered) with the roles and guarantees of the shipped ``adult_fair_mdav``
  (``block_rows`` 50,000, C11 replayed on 2,000 sampled fairlets), ``adult_dmondrian``
  (``block_rows`` 50,000) and (``--algorithms ...,dsabre``) ``adult_dsabre``, which has no
  blocked form and runs in the driver whatever the engine.
- Each release is one ``python -m privfair.cli run SPEC --engine E --progress`` in a fresh
  interpreter, on a fresh store, from a copy of the code under test (``git archive`` of
  ``--baseline`` for the previous code, made importable by ``harness.prepare_tree``: a tree from
  before the rename runs as ``python -m pipelines.cli``; the working tree for the current one;
  both on this environment's packages; the child checks that the command's module comes from
  the tree), then ``python -m privfair.cli export``. Wall clock of each, the
  phases ``privfair run`` reports on stderr, and the peak of the summed RSS of the process tree
  (the driver, pool workers, Spark's JVM and its Python workers) sampled every 0.2 s, with the
  driver's own peak (``VmHWM``-like: the largest RSS of the top process) apart, and the
  driver's private peak: its RSS less file-backed pages, which is what it holds itself (the
  tables a run keeps between phases are memory-mapped files, ``memory.mapped``: their pages
  are the kernel's to drop under pressure and read again). Sizes in GiB.
- A release counts only if every guarantee holds and every schema check passes (the run's
  ``guarantees: a/b hold; schema checks: c/d pass`` line); the script fails otherwise.

The report goes to stdout and to ``benchmarks/results/results_release_scale.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import HERE, HOLD, ROOT, Tree, export_code, prepare_tree, result, tracked

#: what of the previous revision is exported: its code, and pyproject.toml (its layout)
CODE = ("components", "pipelines", "schemas", "dags", "pyproject.toml")
PHASES = ("ingest", "protect", "validate", "cost of protection", "report", "publish")
_PHASE = re.compile(
    r"✓ (ingest|protect|validate|cost of protection|report|publish)\b[^0-9]*"
    r"(?:(\d+) min )?([\d.]+) s"
)


def phases(stderr: str) -> dict[str, float]:
    """The seconds of each top-level phase ``privfair run --progress`` reported."""
    got: dict[str, float] = {}
    for line in stderr.replace("\r", "\n").splitlines():
        m = _PHASE.search(line)
        if m and line.startswith(("  ✓", "    ✓")) and m.group(1) not in got:
            got[m.group(1)] = 60 * int(m.group(2) or 0) + float(m.group(3))
    return got


#: the checks line of a release without schema checks (a synthesis one, a report: its published
#: schema is a guarantee)
NO_SCHEMA_CHECKS = re.compile(r"guarantees: (\d+)/(\d+) hold; schema checks: ()()none")


def checked_run(
    cmd: list[str], cwd: Path, env: dict, what: str, checks: tuple[re.Pattern, ...] = (HOLD,)
) -> dict:
    """``harness.tracked`` of one ``privfair run --progress``, ended (``SystemExit``) unless it
    exits 0 with a checks line of ``checks`` in which every check held: its wall clock, peaks
    (GiB), phases, that ``checks`` line, its ``version`` (None if it printed none) and its
    ``stdout`` and ``stderr``."""
    run = tracked(cmd, cwd, env)
    if run["rc"] != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({run['rc']}):\n{run['stderr'][-3000:]}")
    held = next((m for m in (c.search(run["stdout"]) for c in checks) if m), None)
    if not held or held.group(1) != held.group(2) or held.group(3) != held.group(4):
        raise SystemExit(f"{what}: not every check passed:\n{run['stdout']}")
    version = re.search(r"^published: \S+ (\w+)", run["stdout"], re.M)
    return {
        "wall_s": run["wall_s"],
        "peak_gb": run["peak_gb"],
        "driver_gb": run["driver_gb"],
        "driver_private_gb": run["driver_private_gb"],
        "phases": phases(run["stderr"]),
        "checks": held.group(0),
        "version": version.group(1) if version else None,
        "stdout": run["stdout"],
        "stderr": run["stderr"],
    }


def release(code: Tree, spec: Path, engine: str, work: Path) -> dict:
    """One ``privfair run`` and ``privfair export`` of ``spec`` with the code of ``code``
    (``python -m privfair.cli``, ``pipelines.cli`` in a tree from before the rename; the child
    checks that it comes from the tree)."""
    env = code.env(PRIVFAIR_PROGRESS="1")
    store = work / "store"
    cmd = code.command("privfair.cli", "run", str(spec), "--store", str(store), "--progress")
    if engine == "spark":
        cmd += ["--engine", "spark", "--master", "local[2]"]
    else:
        cmd += ["--engine", "local", "--workers", "2"]
    run = checked_run(cmd, code.root, env, f"{spec.name} on {engine}")
    for line in run["stderr"].splitlines()[:5]:
        if line.startswith("imported: "):
            print(line, file=sys.stderr)
    folder = store / spec.stem / (run["version"] or "latest")
    exp = tracked(
        code.command("privfair.cli", "export", str(folder), str(work / "export")), code.root, env
    )
    if exp["rc"] != 0:
        raise SystemExit(f"export of {folder} failed:\n{exp['stderr'][-2000:]}")
    keep = ("wall_s", "peak_gb", "driver_gb", "driver_private_gb", "phases", "checks")
    return {k: run[k] for k in keep} | {"export_s": exp["wall_s"]}


def make_spec(algorithm: str, rows: int, out: Path) -> Path:
    spec = {
        "fair_mdav": "adult_fair_mdav",
        "dmondrian": "adult_dmondrian",
        "dsabre": "adult_dsabre",
    }[algorithm]
    # dSabre has no blocked form: its leaves fill from buckets over the whole table
    sets = [] if algorithm == "dsabre" else ["--set", "block_rows=50000"]
    if algorithm == "fair_mdav":
        sets += ["--set", "trace_sample=2000"]
    subprocess.run(
        [sys.executable, str(HERE / "adult_like.py"), "--rows", str(rows)]
        + ["--spec", spec, *sets, "--out", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return next(out.glob(f"{spec}_*.yaml"))


def _rows(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k"


def report(results: list[dict], args, commits: dict[str, str]) -> str:
    load = os.getloadavg()
    lines = [
        "# Releases end to end at scale: the current code against the previous code",
        "",
        f"Recorded {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}; load average at the end "
        f"{load[0]:.2f}.",
        "",
        "Command: `PRIVFAIR_DATA_DIR=../shared/data uv run python "
        + " ".join(["benchmarks/bench_release_scale.py", *args.argv])
        + "`",
        "",
        "Code: "
        + "; ".join(f"{k} = `{v[:12] if len(v) == 40 else v}`" for k, v in commits.items())
        + ".",
        "",
        "| algorithm | rows | engine | code | run s | "
        + " | ".join(PHASES)
        + " | export s | peak RSS tree GB | driver peak GB | driver private peak GB | checks |",
        "|---" * (10 + len(PHASES)) + "|",
    ]
    for r in results:
        ph = r["phases"]
        lines.append(
            f"| {r['algorithm']} | {_rows(r['rows'])} | {r['engine']} | {r['code']} | "
            f"{r['wall_s']:.1f} | "
            + " | ".join(f"{ph[p]:.1f}" if p in ph else "" for p in PHASES)
            + f" | {r['export_s']:.1f} | {r['peak_gb']:.2f} | {r['driver_gb']:.2f} | "
            f"{r['driver_private_gb']:.2f} | {r['checks']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000000", help="comma-separated row counts")
    ap.add_argument("--algorithms", default="fair_mdav,dmondrian")
    ap.add_argument("--engines", default="local,spark", help="local (2 workers), spark")
    ap.add_argument(
        "--baseline",
        default="8d24a4c",
        help="git ref of the previous code, measured on the local engine ('' for none)",
    )
    ap.add_argument("--out", default=str(result("results_release_scale.md")))
    args = ap.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    if not os.environ.get("PRIVFAIR_DATA_DIR"):
        raise SystemExit("PRIVFAIR_DATA_DIR: set it to the folder holding the Adult files")
    results = []
    with tempfile.TemporaryDirectory(prefix="privfair-release-scale-") as tmp:
        base = Path(tmp)
        codes = {"current": prepare_tree(ROOT)}
        commits = {
            "current": subprocess.run(
                ["git", "describe", "--always", "--dirty"],
                cwd=ROOT,
                capture_output=True,
                text=True,
            ).stdout.strip()
        }
        if args.baseline:
            commits["previous"] = export_code(args.baseline, base / "previous", CODE)
            codes["previous"] = prepare_tree(base / "previous")
        for rows in (int(x) for x in args.sizes.split(",")):
            for algorithm in args.algorithms.split(","):
                data = base / f"data-{algorithm}-{rows}"
                spec = make_spec(algorithm, rows, data)
                plan = [(e, "current") for e in args.engines.split(",")]
                if args.baseline:
                    plan.append(("local", "previous"))
                for engine, code in plan:
                    work = base / f"work-{algorithm}-{rows}-{engine}-{code}"
                    work.mkdir()
                    got = release(codes[code], spec, engine, work)
                    got |= {"algorithm": algorithm, "rows": rows, "engine": engine, "code": code}
                    print(json.dumps(got), flush=True)
                    results.append(got)
                    shutil.rmtree(work, ignore_errors=True)
    text = report(results, args, commits)
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
