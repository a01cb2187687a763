"""Single-machine targets on UCI Adult, the working tree against a baseline commit, one run.

Usage (from the repository root; the raw files must be in ``PRIVFAIR_DATA_DIR`` or
``--data-dir``)::

    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/bench_single_machine.py
    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/bench_single_machine.py --baseline main

What runs
---------
Two trees: *baseline*, the commit ``--baseline`` (default ``BASELINE_REF``, the code before
issue 25's single-machine and validation work), exported whole with ``git archive`` into a temporary
directory (as ``bench_microaggregation_speed.py`` exports its old revision; the repository's
worktrees and index are left alone), and *new*, the working tree. Both run with this
environment's interpreter and packages; every measurement is a fresh interpreter whose
working directory is the tree under test and which imports that tree's code under the tree's
own module names (``harness.prepare_tree``: ``pipelines.*`` and ``components.*`` in a tree from
before the rename, else ``privfair.*`` through a shim first on ``PYTHONPATH``); the child checks
that its top package and ``components`` come from the tree, and that a tree from before the
rename did not import ``privfair``.

- Fair-MDAV and MDAV, k = 10, on Adult (48,842 rows, ``bench_microaggregation.build_data``):
  wall clock of one component call.
- dSabre and dMondrian on Adult as the shipped specs ingest it, at every t of the grid of
  ``bench_generalisation.py`` (tau(R) to max(p-, 1 - p-), step 0.05), the count-query workload
  off: wall clock of the component call at each t (one interpreter runs the grid once); the
  table reports the slowest t.
- ``privfair run`` of ``pipelines/specs/adult_fair_mdav.yaml`` and ``adult_dmondrian.yaml``
  into a fresh store in a temporary directory: wall clock of the whole process (interpreter
  start to exit, as a shell sees it without ``uv run``) minus the component call it makes
  (the first call of an algorithm in the process, timed inside it); the call and the wall are
  reported too. The child runs as the tree's ``privfair`` command does: its process declared
  the command's own (``privfair.validation.gx_import.own_the_process``) and ended by
  ``privfair.cli.leave``, where the tree has them, else a plain exit. The report also
  breaks each run's wall time down (best round of each tree): its progress phases, Great
  Expectations' import and every checker inside validation, and the time outside them.
- ``--repeats`` rounds (default 3); in every round each measurement runs for both trees, the
  order alternating between rounds; best of the rounds. The 1-minute load average is read at
  the start of every measurement and reported.
- Every component call's outputs are digested (SHA-256 of the Arrow IPC stream of each output
  and sidecar, and of the metrics without timings, their floats to 12 significant digits); the
  script says whether baseline and new agree at every t.

Bytecode: a child runs with ``PYTHONDONTWRITEBYTECODE`` unset and each tree is byte-compiled
before the rounds (plus one unmeasured import of the heavy packages, and its microaggregation
rounds compiled where it has them), so that no measurement pays for compiling what an
installation (``make install``) has compiled.

The targets: each component call <= 1 s; ``privfair run`` <= 2 s beyond the component call.
The report goes to stdout and to ``benchmarks/results/results_single_machine.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import (
    ROOT,
    Tree,
    export_code,
    imported_from,
    machine,
    prepare_tree,
    result,
    tree_module,
)

#: ``main`` when this script was first added: the previous code, measured in the same run
BASELINE_REF = "8d24a4c"  # the code before issue 25's single-machine and validation work
K = 10
CALL_TARGET_S = 1.0
OVERHEAD_TARGET_S = 2.0
SPECS = {"adult_fair_mdav": "Fair-MDAV", "adult_dmondrian": "dMondrian"}
COMPONENTS = {"fair_mdav": "Fair-MDAV", "mdav": "MDAV"}
GRIDS = {"dsabre": "dSabre", "dmondrian": "dMondrian"}
TREES = ("baseline", "new")
#: imported once in each tree before the rounds (``warm``; the tree's names of the first four)
WARM_IMPORTS = (
    "privfair.cli",
    "privfair.run.flow",
    "privfair.evaluation.evaluate",
    "privfair.release.report",
    "great_expectations",
    "sklearn.linear_model",
    "scipy.spatial",
)


# --- children: one measurement each, in the tree under test --------------------------------------


def _rounded(obj):
    """``obj`` with every float to 12 significant digits: a metric summed in another order
    (the information loss over chunks) differs in its last bits, not in what it says."""
    if isinstance(obj, float):
        return float(f"{obj:.12g}")
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_rounded(v) for v in obj]
    return obj


def _digest_result(result) -> str:
    """SHA-256 of a ``ComponentResult``'s outputs and sidecars (their Arrow IPC bytes) and
    metrics (``_rounded``; timings left out)."""
    import pyarrow as pa

    h = hashlib.sha256()
    for group in (result.outputs, result.sidecars):
        for name in sorted(group):
            sink = io.BytesIO()
            with pa.ipc.new_stream(sink, group[name].schema) as writer:
                writer.write_table(group[name])
            h.update(name.encode() + sink.getvalue())
    h.update(json.dumps(_rounded(result.metrics), sort_keys=True, default=str).encode())
    return h.hexdigest()


def _child_component(task: dict) -> dict:
    """One Fair-MDAV or MDAV call on Adult, k = 10."""
    from bench_microaggregation import build_data

    table = build_data("adult", task["data_dir"])
    params = tree_module("privfair.components.microaggregation.params")
    if task["algo"] == "fair_mdav":
        call = tree_module("privfair.components.microaggregation.fair_mdav").fair_mdav
        P = params.FairMDAVParams
    else:
        call = tree_module("privfair.components.microaggregation.mdav").mdav
        P = params.MDAVParams
    start = time.perf_counter()
    result = call(table, P(k=K))
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "digest": _digest_result(result)}


def _child_grid(task: dict) -> dict:
    """dSabre or dMondrian on Adult (as the specs ingest it) at every t of the grid, once."""
    from bench_generalisation import grid, load

    prepare = tree_module("privfair.components.generalisation.inputs").prepare
    t_max = tree_module("privfair.components.generalisation.measures").t_max
    params = tree_module("privfair.components.generalisation.params")
    if task["algo"] == "dsabre":
        call = tree_module("privfair.components.generalisation.dsabre").dsabre
        P = params.DSabreParams
    else:
        call = tree_module("privfair.components.generalisation.dmondrian").dmondrian
        P = params.DMondrianParams
    table = load("adult")
    prep = prepare(table, None)
    out: dict = {"t": {}}
    for t in grid(prep.tau_r, t_max(prep.p_minus), 0.05):
        start = time.perf_counter()
        result = call(table, P(t=t, utility_queries=0))
        out["t"][str(t)] = {
            "seconds": time.perf_counter() - start,
            "digest": _digest_result(result),
            "classes": int(result.metrics["classes"]),
        }
    return out


def _timed(owner, name: str, into: list) -> None:
    """Wrap ``owner.name`` so that each call appends (its first argument, seconds) to ``into``."""
    inner = getattr(owner, name)

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            into.append((args[0] if args else None, time.perf_counter() - start))

    setattr(owner, name, timed)


def _phases(record: list) -> bool:
    """Record every progress phase of the run as (order begun, path, seconds), its lines written
    nowhere (the reporter's ``stream`` made ``os.devnull`` before its first phase); False in a
    tree without ``privfair.components.core.progress``."""
    try:
        progress = tree_module("privfair.components.core.progress")
    except ImportError:
        return False
    nowhere = open(os.devnull, "w")  # noqa: SIM115  (open until the process ends)
    begin, end = progress.Reporter.begin, progress.Reporter.end

    starts: dict[int, tuple[int, float]] = {}

    def began(self, name):
        self.stream = nowhere
        ph = begin(self, name)
        starts[id(ph)] = (len(starts) + len(record), time.perf_counter())
        return ph

    def ended(self, ph, failed):
        path = " > ".join([p.name for p in self.stack[: self.stack.index(ph)]] + [ph.name])
        order, start = starts.pop(id(ph))
        record.append((order, path, time.perf_counter() - start))
        end(self, ph, failed)

    progress.Reporter.begin, progress.Reporter.end = began, ended
    return True


def _child_run(task: dict) -> dict:
    """``privfair run SPEC`` into ``task['store']``, the first algorithm call timed; with the
    time of each progress phase, of Great Expectations' import and of each checker (where the
    tree has them), for the breakdown of the time beyond the call."""
    started = time.perf_counter()
    descriptor = tree_module("privfair.components.core.descriptor")

    calls: list[tuple] = []
    _timed(descriptor.Algorithm, "__call__", calls)
    phases: list[tuple[int, str, float]] = []
    progress_flag = ["--progress"] if _phases(phases) else []
    gx: list[tuple] | None = []
    checks: list[tuple] = []
    try:
        gx_import = tree_module("privfair.validation.gx_import")
    except ImportError:  # a tree from before it: the import is not timed apart
        gx_import, gx = None, None
    else:
        _timed(gx_import, "import_great_expectations", gx)
    core_checks = tree_module("privfair.components.core.checks")

    _timed(core_checks, "check_guarantee", checks)
    # the process is the command's own, as the tree's ``privfair.cli.entry`` declares it (a
    # tree from before ``own_the_process``: a plain process)
    if hasattr(gx_import, "own_the_process"):
        gx_import.own_the_process()
    main = tree_module("privfair.cli").main

    spec = str(Path("pipelines/specs") / f"{task['spec']}.yaml")
    code = main(["run", spec, "--store", task["store"], *progress_flag])
    if code not in (0, None):
        raise SystemExit(f"privfair run {spec} exited {code}")
    by_check: dict[str, float] = {}
    for g, seconds in checks:
        key = f"{g.id} {g.kind}"
        by_check[key] = by_check.get(key, 0.0) + seconds
    return {
        "component_s": calls[0][1],
        "calls": len(calls),
        "in_main_s": time.perf_counter() - started,
        "phases": [[path, seconds] for _, path, seconds in sorted(phases)],
        "gx_import_s": None if gx is None else sum(s for _, s in gx),
        "checks": by_check,
    }


def child_main(task: dict) -> dict:
    """Measure ``task`` in the tree that is the working directory, under its own module names
    (``harness.prepare_tree``, ``_env``): its top package and ``components`` are checked to
    come from it, and a tree from before the rename not to have imported ``privfair``."""
    load = os.getloadavg()[0]
    tree = Path.cwd().resolve()
    components = tree_module("privfair.components")
    top = components.__name__.split(".")[0]
    imported_from(tree, top, components.__name__)
    kind = task["kind"]
    if kind == "component":
        out = _child_component(task)
    elif kind == "grid":
        out = _child_grid(task)
    else:
        out = _child_run(task)
    if top != "privfair":
        assert "privfair" not in sys.modules, f"{tree}: the child imported privfair"
    tops = ("privfair", "privfair.components", "pipelines", "components", "schemas")
    out["load"] = load
    out["imported"] = imported_from(tree, *(m for m in tops if m in sys.modules))
    return out


# --- parent ----------------------------------------------------------------------------------------


def _env(tree: Tree, data_dir: str | None) -> dict[str, str]:
    """A child's environment: ``tree.env`` (its code first on ``PYTHONPATH``, its layout),
    ``PYTHONDONTWRITEBYTECODE`` unset."""
    env = {k: v for k, v in tree.env().items() if k != "PYTHONDONTWRITEBYTECODE"}
    if data_dir:
        env["PRIVFAIR_DATA_DIR"] = data_dir
    return env


def warm(tree: Tree, data_dir: str | None) -> None:
    """Byte-compile ``tree``, import the heavy packages once and compile the microaggregation
    rounds where the tree has them compiled (numba's cache, as ``make install`` leaves it); not
    measured."""
    for part in ("components", "pipelines", "schemas", "benchmarks"):
        compileall.compile_dir(str(tree.root / part), quiet=1)
    imports = "import " + ", ".join(tree.module(m) for m in WARM_IMPORTS)
    subprocess.run(
        [sys.executable, "-c", imports], cwd=tree.root, env=_env(tree, data_dir), check=True
    )
    if (tree.root / "components" / "microaggregation" / "kernel.py").exists():
        subprocess.run(
            tree.command("privfair.components.microaggregation.grouping"),
            cwd=tree.root,
            env=_env(tree, data_dir),
            check=True,
        )


def run_child(tree: Tree, task: dict, data_dir: str | None) -> dict:
    """One measurement in a fresh interpreter in ``tree``; a run's wall clock is the parent's."""
    with tempfile.TemporaryDirectory(prefix="pf_bench_") as tmp:
        out = Path(tmp) / "out.json"
        if task["kind"] == "run":
            task = dict(task, store=str(Path(tmp) / "store"))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(task)]
        cmd += ["--child-out", str(out)]
        start = time.perf_counter()
        subprocess.run(
            cmd, check=True, cwd=tree.root, env=_env(tree, data_dir), stdout=subprocess.DEVNULL
        )
        wall = time.perf_counter() - start
        res = json.loads(out.read_text())
    if task["kind"] == "run":
        res["wall_s"] = wall
        res["seconds"] = wall - res["component_s"]  # the overhead
    return res


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def measurements() -> list[tuple[str, dict]]:
    """(key, task) of every measurement, in the order they run."""
    out = [(f"component/{a}", {"kind": "component", "algo": a}) for a in COMPONENTS]
    out += [(f"grid/{a}", {"kind": "grid", "algo": a}) for a in GRIDS]
    out += [(f"run/{s}", {"kind": "run", "spec": s}) for s in SPECS]
    return out


def best_of(runs: list[dict], key: str) -> dict:
    """Per key: the best (lowest) seconds over the rounds; a grid: per t, then its slowest t."""
    if key.startswith("grid/"):
        per_t = {t: min(r["t"][t]["seconds"] for r in runs) for t in runs[0]["t"]}
        worst = max(per_t, key=per_t.get)
        return {"seconds": per_t[worst], "t": worst, "per_t": per_t}
    best = min(runs, key=lambda r: r["seconds"])
    return dict(best)


def same_outputs(runs: dict, key: str) -> str:
    """Whether every run of both trees gave the same digests ("-" for a ``privfair run``)."""
    if key.startswith("run/"):
        return "-"
    if key.startswith("grid/"):
        digests = {
            json.dumps({t: v["digest"] for t, v in r["t"].items()}, sort_keys=True)
            for tree in TREES
            for r in runs[tree]
        }
    else:
        digests = {r["digest"] for tree in TREES for r in runs[tree]}
    return "yes" if len(digests) == 1 else "NO"


def label(key: str) -> str:
    kind, name = key.split("/")
    if kind == "component":
        return f"{COMPONENTS[name]} Adult k={K}, component call"
    if kind == "grid":
        return f"{GRIDS[name]} Adult, slowest t of the grid, component call"
    return f"`privfair run {name}.yaml`: wall minus the component call"


def _steps(run: dict) -> dict[str, str]:
    """Seconds of each step of one ``privfair run`` (``_child_run``), keyed by its label: the
    time outside the command's code, its progress phases (with what is inside *validate* but
    not a phase of its own right after it) and the rest of the command."""
    out = {
        "start-up and exit (interpreter, imports before the command, its end)": (
            f"{run['wall_s'] - run['in_main_s']:.2f}"
        )
    }
    phases = run.get("phases", [])
    checks = run.get("checks", {})
    top = 0.0
    for path, seconds in phases:
        out[path] = f"{seconds:.2f}"
        top += seconds if " > " not in path else 0.0
        if path.endswith("> validate"):
            inside = sum(v for p, v in phases if p.startswith(path + " > "))
            gx = run.get("gx_import_s")
            if gx is None:  # a tree from before ``privfair.validation.gx_import``: not timed apart
                gx = 0.0
                rest = "Great Expectations' import and its running the suites"
            else:
                out["… Great Expectations' import"] = f"{gx:.2f}"
                rest = "Great Expectations running the suites"
            out["… the checkers, every guarantee"] = f"{sum(checks.values()):.2f}"
            if checks:
                name, slowest = max(checks.items(), key=lambda kv: kv[1])
                out["… of which the slowest checker"] = f"{slowest:.2f} ({name})"
            rest_s = seconds - inside - gx - sum(checks.values())
            out["… the rest of validate"] = f"{rest_s:.2f} ({rest})"
    if phases:
        out["the command outside its phases (spec, store, ledger, first-use imports)"] = (
            f"{run['in_main_s'] - top:.2f}"
        )
    return out


def _merged(*orders: list[str]) -> list[str]:
    """The labels of every order, each where its own order puts it (after its predecessor).

    >>> _merged(["a", "c"], ["a", "b", "c", "d"])
    ['a', 'b', 'c', 'd']
    """
    out: list[str] = []
    for order in orders:
        after = -1
        for name in order:
            if name in out:
                after = out.index(name)
            else:
                after += 1
                out.insert(after, name)
    return out


def breakdown(results: dict) -> list[str]:
    """Where each ``privfair run``'s wall time goes, phase by phase, in its best round."""
    lines = [
        "## Where a run's time goes (best round of each tree, seconds)",
        "",
        "The progress phases of the run (a nested phase is inside its parent's time; the rows "
        "marked … are inside *validate*, beside its own phases), and the time outside them: "
        "the interpreter's start, the imports before the command and its end, and the "
        "command's own code between its phases. The protect phase is the component call.",
        "",
    ]
    for key, runs in results.items():
        if not key.startswith("run/"):
            continue
        steps = {t: _steps(best_of(runs[t], key)) for t in TREES}
        names = _merged(*(list(steps[t]) for t in reversed(TREES)))
        rows = [[n.replace(" > ", " › "), *(steps[t].get(n, "-") for t in TREES)] for n in names]
        lines += [f"**{label(key).split(':')[0]}**", ""]
        lines += _table(["step", *TREES], rows) + [""]
    return lines


def report(results: dict, info: dict, args, commit: str, loads: list[float]) -> str:
    lines = [
        "# Single-machine targets on Adult: baseline against the working tree",
        "",
        f"- Command: `PRIVFAIR_DATA_DIR=../shared/data uv run python "
        f"benchmarks/bench_single_machine.py"
        f"{f' --baseline {args.baseline}' if args.baseline != BASELINE_REF else ''}"
        f"{f' --repeats {args.repeats}' if args.repeats != 3 else ''}`",
        f"- Baseline: {commit[:12]} (`git archive` of the whole tree); new: the working tree",
        f"- Date {info['date']}; {info['cpus']} cores ({info['cpu']}); Python {info['python']}, "
        f"numpy {info['numpy']}, pyarrow {info['pyarrow']}",
        f"- 1-minute load average at the start of the measurements: {min(loads):.2f} to "
        f"{max(loads):.2f}",
        f"- Best of {args.repeats} rounds, each measurement a fresh interpreter; the trees "
        "measured in turn in every round",
        "",
        "| Measurement | Target | Baseline (s) | New (s) | Target (new) | Same outputs |",
        "|---|---|---|---|---|---|",
    ]
    for key, runs in results.items():
        b, n = best_of(runs["baseline"], key), best_of(runs["new"], key)
        target = OVERHEAD_TARGET_S if key.startswith("run/") else CALL_TARGET_S
        cells = []
        for x in (b, n):
            text = f"{x['seconds']:.2f}"
            if key.startswith("grid/"):
                text += f" (t = {x['t']})"
            if key.startswith("run/"):
                text += f" (wall {x['wall_s']:.1f}, call {x['component_s']:.2f})"
            cells.append(text)
        met = "met" if n["seconds"] <= target else "NOT met"
        lines.append(
            f"| {label(key)} | <= {target:g} s | {cells[0]} | {cells[1]} | {met} | "
            f"{same_outputs(runs, key)} |"
        )
    lines += ["", "## Every t of the grids (best of the rounds, seconds)", ""]
    for key, runs in results.items():
        if not key.startswith("grid/"):
            continue
        b, n = best_of(runs["baseline"], key), best_of(runs["new"], key)
        classes = runs["new"][0]["t"]
        rows = [
            [t, f"{classes[t]['classes']:,}", f"{b['per_t'][t]:.2f}", f"{n['per_t'][t]:.2f}"]
            for t in n["per_t"]
        ]
        lines += [f"**{label(key).split(',')[0]}**", ""]
        lines += _table(["t", "classes", "baseline", "new"], rows) + [""]
    lines += breakdown(results)
    lines += ["## All runs (seconds, load at the start)", ""]
    rows = []
    for key, runs in results.items():
        for tree in TREES:
            vals = []
            for r in runs[tree]:
                s = max(v["seconds"] for v in r["t"].values()) if "t" in r else r["seconds"]
                vals.append(f"{s:.2f} ({r['load']:.1f})")
            rows.append([label(key), tree, ", ".join(vals)])
    lines += _table(["Measurement", "Tree", "Runs"], rows)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--baseline", default=BASELINE_REF, help="git ref of the previous code")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(result("results_single_machine.md")))
    parser.add_argument("--json", default=None, help="also write the raw measurements here")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        Path(args.child_out).write_text(json.dumps(child_main(json.loads(args.child))))
        cli = sys.modules.get("privfair.cli") or sys.modules.get("pipelines.cli")  # an old tree's
        if cli is not None:  # a run ends as the ``privfair`` command of its tree
            getattr(cli, "leave", sys.exit)(0)
        return
    data_dir = args.data_dir or os.environ.get("PRIVFAIR_DATA_DIR")
    if data_dir:
        data_dir = str(Path(data_dir).resolve())
    info = machine()
    results: dict = {key: {t: [] for t in TREES} for key, _ in measurements()}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="pf_baseline_") as tmp:
        commit = export_code(args.baseline, Path(tmp))
        trees = {"baseline": prepare_tree(Path(tmp)), "new": prepare_tree(ROOT)}
        for tree in TREES:
            warm(trees[tree], data_dir)
        print(f"baseline {commit[:12]}: {trees['baseline'].layout} layout, in {tmp}", flush=True)
        for r in range(args.repeats):
            for key, task in measurements():
                order = TREES if r % 2 == 0 else TREES[::-1]
                for tree in order:
                    res = run_child(trees[tree], dict(task, data_dir=data_dir), data_dir)
                    results[key][tree].append(res)
                    loads.append(res["load"])
                    if "t" in res:
                        worst = max(res["t"].items(), key=lambda kv: kv[1]["seconds"])
                        shown = f"slowest t = {worst[0]}: {worst[1]['seconds']:.2f} s"
                    elif key.startswith("run/"):
                        shown = (
                            f"overhead {res['seconds']:.2f} s (wall {res['wall_s']:.2f}, "
                            f"call {res['component_s']:.2f})"
                        )
                    else:
                        shown = f"{res['seconds']:.2f} s"
                    print(
                        f"round {r + 1}: {key:24s} {tree:8s}: {shown}, load {res['load']:.2f}",
                        flush=True,
                    )
                    if r == 0:
                        print(f"  imported from: {res['imported']}", flush=True)
    text = report(results, info, args, commit, loads)
    Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print(text)


if __name__ == "__main__":
    main()
