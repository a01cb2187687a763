"""Benchmark: MDAV and Fair-MDAV on UCI Adult against a straightforward NumPy baseline.

Usage (from the repository root; PRIVFAIR_DATA_DIR must point at the Adult files, or pass
``--data-dir``)::

    .venv/bin/python benchmarks/bench_microaggregation.py           # full run, ~12 min
    .venv/bin/python benchmarks/bench_microaggregation.py --quick   # skips the full-Adult baseline

What runs (each measurement in a fresh subprocess, so its peak RSS is its own):

- ours: ``privfair.components.microaggregation.fair_mdav.fair_mdav`` / ``privfair.components.microaggregation.mdav.mdav`` on the prepared Arrow table,
  k = 10 and 100, on full Adult (48,842 rows), a seeded 10,000-row subsample, and Adult replicated
  4x with jittered numeric QIs (195,368 rows); wall clock of the component call, best of N;
- the baseline (``benchmarks/naive.py``): dense one-hot NumPy, mean and distance vectors
  recomputed every iteration; Fair-MDAV k=10 on full Adult (one run, unless ``--quick``), and all
  four configurations on the 10k subsample. It is not run at 195k rows: its time there is only
  estimated from its quadratic scaling;
- cross-checks against the baseline: the fraction of identical groups, the information loss of
  both groupings, and a replay of our grouping through the baseline's own distances (the largest
  amount by which any of our seed or nearest-neighbour choices is worse than the best choice).

Results: a Markdown report on stdout and in ``benchmarks/results/results.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median

import numpy as np
import pyarrow as pa
from harness import ROOT, child_env, machine, result, tree_module

SUB_ROWS = 10_000
REPLICAS = 4
JITTER = 0.01  # replicated data: Gaussian noise with sd = JITTER x column sd, clipped at 0
SEED = 0
TOL = 1e-9  # replay: a choice within TOL (squared-distance units) of the best one is a tie
TARGET_TIME_S = 3.0
TARGET_SPEEDUP = 10.0
TARGET_PEAK_MB = 2048.0
DATA_LABELS = {
    "adult": "Adult",
    "sub": f"Adult, {SUB_ROWS:,}-row sample",
    "rep": f"Adult x{REPLICAS}, jittered",
}
ALGO_LABELS = {"fair": "Fair-MDAV", "mdav": "MDAV"}


# --- tasks (run in a child process) -----------------------------------------------------------


@dataclass
class Task:
    """One measurement: an implementation, an algorithm, k and a data set."""

    impl: str  # "ours" | "naive"
    algo: str  # "fair" | "mdav"
    k: int
    data: str  # "adult" | "sub" | "rep"
    repeats: int = 1
    groups_path: str = ""  # where the child writes its grouping (npz)
    replay_path: str = ""  # naive only: our grouping to replay through the baseline


@dataclass
class Result:
    """What a child reports back."""

    task: Task
    rows: int = 0
    times: list[float] = field(default_factory=list)
    rss_before_mb: float = 0.0
    peak_mb: float = 0.0
    groups: int = 0
    dropped: int = 0
    il: float = float("nan")  # information loss, recomputed on the dense scaled matrix
    il_reported: float = float("nan")  # ours: the component's own metric
    m: int | None = None
    n: int | None = None
    replay_max_gap: float = float("nan")
    replay_valid: float = float("nan")
    load_before: float = 0.0

    @property
    def best(self) -> float:
        return min(self.times)


def _status_mb(key: str) -> float:
    """A memory field of /proc/self/status (VmHWM = peak RSS, VmRSS = current RSS) in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"{key} not in /proc/self/status")


def load_adult(data_dir: str | None) -> pa.Table:
    """Full UCI Adult (adult.data + adult.test) with its column roles, read by the code of the
    tree this interpreter runs (``harness.tree_module``: the working tree's, unless it is a
    child of another tree)."""
    load_dataset = tree_module("privfair.io.ingest").load_dataset
    dataset_spec = tree_module("privfair.schemas.spec").DatasetSpec

    table, _ = load_dataset(dataset_spec(name="adult"), data_dir)
    return table


def subsample(table: pa.Table, rows: int, seed: int = SEED) -> pa.Table:
    """A seeded random sample of ``rows`` rows, in original row order."""
    idx = np.sort(np.random.default_rng(seed).choice(table.num_rows, rows, replace=False))
    return table.take(pa.array(idx))


def replicate(table: pa.Table, copies: int, seed: int = SEED) -> pa.Table:
    """``copies`` stacked copies; every numeric QI gets Gaussian noise (sd = JITTER x the
    column's sd, seeded), clipped at 0, so that copies are near-duplicates, not duplicates."""
    roles_module = tree_module("privfair.schemas.roles")
    Kind, Role = roles_module.Kind, roles_module.Role
    attach_roles, read_roles = roles_module.attach_roles, roles_module.read_roles

    roles = read_roles(table)
    stacked = pa.concat_tables([table] * copies)
    rng = np.random.default_rng(seed)
    for c in roles:
        if c.role is Role.QUASI_IDENTIFIER and c.kind is Kind.NUMERIC:
            x = stacked.column(c.name).to_numpy().astype(np.float64)
            x = np.clip(x + rng.normal(0.0, JITTER * x.std(), len(x)), 0.0, None)
            i = stacked.schema.get_field_index(c.name)
            stacked = stacked.set_column(i, c.name, pa.array(x, pa.float64()))
    return attach_roles(stacked, roles)


def build_data(name: str, data_dir: str | None) -> pa.Table:
    adult = load_adult(data_dir)
    if name == "adult":
        return adult
    if name == "sub":
        return subsample(adult, SUB_ROWS)
    if name == "rep":
        return replicate(adult, REPLICAS)
    raise ValueError(name)


def save_groups(path: str, groups: list[np.ndarray], seeds: list[int]) -> None:
    sizes = np.array([len(g) for g in groups], dtype=np.int64)
    order = np.concatenate(groups) if groups else np.zeros(0, dtype=np.int64)
    np.savez(path, order=order, sizes=sizes, seeds=np.array(seeds, dtype=np.int64))


def load_groups(path: str) -> tuple[list[np.ndarray], list[int]]:
    z = np.load(path)
    bounds = np.cumsum(z["sizes"])[:-1]
    return list(np.split(z["order"], bounds)), [int(s) for s in z["seeds"]]


def groups_from_lineage(lineage: pa.Table) -> tuple[list[np.ndarray], list[int]]:
    """Groups (row ids, creation order) and their seeds from a component's lineage table.

    The lineage's rows follow the published rows, whose order carries nothing of the grouping
    (issue 21, 19e2b8e): the grouping order is ``group`` (creation order), then ``rank``
    (position in the group), so the rows are put in that order first."""
    order = np.lexsort((lineage.column("rank").to_numpy(), lineage.column("group").to_numpy()))
    rid = lineage.column("row_id").to_numpy()[order]
    gid = lineage.column("group").to_numpy()[order]
    is_seed = lineage.column("is_seed").to_numpy(zero_copy_only=False)[order]
    bounds = np.flatnonzero(np.diff(gid)) + 1
    seeds = rid[is_seed][np.argsort(gid[is_seed], kind="stable")]
    return list(np.split(rid, bounds)), [int(s) for s in seeds]


def run_ours(task: Task, table: pa.Table, res: Result) -> None:
    """Time the component call ``task.repeats`` times; keep the last grouping."""
    from privfair.components.microaggregation.fair_mdav import fair_mdav
    from privfair.components.microaggregation.mdav import mdav
    from privfair.components.microaggregation.params import FairMDAVParams, MDAVParams

    out = None
    for _ in range(task.repeats):
        out = None  # free the previous result before the next run
        t0 = time.perf_counter()
        if task.algo == "fair":
            out = fair_mdav(table, FairMDAVParams(k=task.k))
        else:
            out = mdav(table, MDAVParams(k=task.k))
        res.times.append(time.perf_counter() - t0)
    res.peak_mb = _status_mb("VmHWM")
    assert out is not None
    groups, seeds = groups_from_lineage(out.sidecars["lineage"])
    res.groups, res.dropped = len(groups), int(out.metrics["dropped_rows"])
    res.il_reported = float(out.metrics["information_loss"]["il"])
    res.m, res.n = out.metrics.get("m"), out.metrics.get("n")
    save_groups(task.groups_path, groups, seeds)
    del out
    import naive

    X, _ = naive.dense_inputs(table)
    res.il = naive.information_loss(X, groups)


def run_naive(task: Task, table: pa.Table, res: Result) -> None:
    """Time one baseline run (dense encoding + grouping), then replay our grouping through it."""
    import naive

    t0 = time.perf_counter()
    X, pa01 = naive.dense_inputs(table)
    if task.algo == "fair":
        m, n = naive.fairlet_sizes(task.k, pa01)
        groups = naive.make_fairlets(X, pa01, m, n)
        res.m, res.n = m, n
    else:
        groups = naive.mdav(X, task.k)
    res.times.append(time.perf_counter() - t0)
    res.peak_mb = _status_mb("VmHWM")
    res.groups = len(groups)
    res.dropped = table.num_rows - int(sum(len(g) for g in groups))
    res.il = naive.information_loss(X, groups)
    save_groups(task.groups_path, groups, [-1] * len(groups))
    if task.replay_path:
        ours, seeds = load_groups(task.replay_path)
        if task.algo == "fair":
            gaps = naive.fairlet_gaps(X, pa01, res.m, res.n, ours, seeds)
        else:
            gaps = naive.mdav_gaps(X, task.k, ours, seeds)
        res.replay_max_gap = float(gaps.max()) if len(gaps) else 0.0
        res.replay_valid = float((gaps <= TOL).mean()) if len(gaps) else 1.0


def child_main(task_json: str, out_path: str, data_dir: str | None) -> None:
    """Entry point of a measurement subprocess: build the data, run, write the Result as JSON."""
    task = Task(**json.loads(task_json))
    table = build_data(task.data, data_dir)
    res = Result(task=task, rows=table.num_rows, rss_before_mb=_status_mb("VmRSS"))
    res.load_before = os.getloadavg()[0]
    (run_ours if task.impl == "ours" else run_naive)(task, table, res)
    Path(out_path).write_text(json.dumps(asdict(res)))


# --- parent: orchestration --------------------------------------------------------------------


def run_child(task: Task, data_dir: str | None, workdir: Path) -> Result:
    """Run ``task`` in a fresh interpreter and return its Result."""
    out = workdir / f"{task.impl}-{task.algo}-{task.k}-{task.data}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(asdict(task))]
    cmd += ["--child-out", str(out)] + (["--data-dir", data_dir] if data_dir else [])
    subprocess.run(cmd, check=True, cwd=ROOT, env=child_env())
    raw = json.loads(out.read_text())
    raw["task"] = Task(**raw["task"])
    return Result(**raw)


def wait_for_quiet(max_load: float, max_wait_s: float, step_s: float = 60.0) -> float:
    """Sleep in ``step_s`` steps while the 1-minute load exceeds ``max_load`` (at most
    ``max_wait_s`` in total); return the load when measuring starts."""
    waited = 0.0
    load = os.getloadavg()[0]
    while load > max_load and waited < max_wait_s:
        print(f"load {load:.2f} > {max_load}: waiting {step_s:.0f} s", file=sys.stderr, flush=True)
        time.sleep(step_s)
        waited += step_s
        load = os.getloadavg()[0]
    return load


def group_agreement(a_path: str, b_path: str) -> tuple[float, int]:
    """(fraction of b's groups that are also groups of a, as sets; length of the common prefix
    of identical groups in creation order)."""
    a, _ = load_groups(a_path)
    b, _ = load_groups(b_path)
    sa = {frozenset(g.tolist()) for g in a}
    sb = [frozenset(g.tolist()) for g in b]
    same = sum(g in sa for g in sb) / max(len(sb), 1)
    prefix = 0
    for ga, gb in zip(a, b, strict=False):
        if set(ga.tolist()) != set(gb.tolist()):
            break
        prefix += 1
    return same, prefix


# --- report -----------------------------------------------------------------------------------


def _fmt_s(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def _config(r: Result) -> list[str]:
    return [ALGO_LABELS[r.task.algo], str(r.task.k), DATA_LABELS[r.task.data], f"{r.rows:,}"]


def report(
    results: list[Result],
    pairs: list[tuple[Result, Result, float, int]],
    info: dict[str, str],
    loads: dict[str, float],
    args: argparse.Namespace,
) -> str:
    """The Markdown report."""
    lines = [
        "# Microaggregation benchmark: MDAV and Fair-MDAV",
        "",
        f"- Date: {info['date']}; host {info['host']}",
        f"- Machine: {info['cpus']} CPUs (`nproc`), {info['cpu']}",
        f"- Python {info['python']}, numpy {info['numpy']}, pyarrow {info['pyarrow']}",
        f"- Command: `.venv/bin/python benchmarks/bench_microaggregation.py"
        f"{' --quick' if args.quick else ''}` (repeats = {args.repeats})",
        f"- 1-minute load average: {loads['start']:.2f} when measuring started, "
        f"{loads['end']:.2f} at the end (2-core machine shared with other work); the load just "
        "before each measurement is in the table",
        "",
        "## Timings and peak memory",
        "",
        "Ours: wall clock of the `fair_mdav` / `mdav` component call on the prepared Arrow table "
        "(encoding, grouping, label correction, output assembly), best of the runs. Baseline: "
        "`benchmarks/naive.py`, dense encoding + grouping only, one run. Peak RSS = `VmHWM` of "
        "the measuring subprocess (a fresh interpreter per row) right after the timed calls; "
        "'RSS before' is the same process before the first call (interpreter, libraries, data).",
        "",
    ]
    rows = []
    for r in results:
        rows.append(
            _config(r)
            + [
                "ours" if r.task.impl == "ours" else "baseline",
                str(len(r.times)),
                _fmt_s(r.best),
                _fmt_s(median(r.times)),
                f"{r.rss_before_mb:.0f}",
                f"{r.peak_mb:.0f}",
                f"{r.groups:,}",
                f"{r.dropped:,}",
                f"{r.il:.5f}",
                f"{r.load_before:.2f}",
            ]
        )
    lines += _table(
        [
            "Algorithm",
            "k",
            "Data",
            "Rows",
            "Impl.",
            "Runs",
            "Best (s)",
            "Median (s)",
            "RSS before (MB)",
            "Peak RSS (MB)",
            "Groups",
            "Dropped",
            "IL",
            "Load",
        ],
        rows,
    )
    lines += [
        "",
        "## Ours against the baseline (same run, same data)",
        "",
        "- *Identical groups*: share of the baseline's groups that ours also produced (as row "
        "sets); *prefix*: identical groups, in creation order, before the first difference.",
        "- *Replay*: our groups fed in creation order through the baseline's own distances; for "
        "every group, gap = (farthest distance - our seed's distance) and (our farthest chosen "
        "neighbour - the nearest unchosen record), in squared scaled units. *Max gap* is the "
        f"largest over all groups; *valid* is the share of groups with gap <= {TOL:g}, i.e. "
        "choices the spec's pseudocode could have made up to a floating-point tie.",
        "- IL = sqrt(SSE / grouped rows) in the min-max-scaled one-hot space, recomputed the same "
        "way for both groupings.",
        "",
    ]
    rows = []
    for ours, base, same, prefix in pairs:
        rows.append(
            _config(ours)
            + [
                _fmt_s(ours.best),
                _fmt_s(base.best),
                f"{base.best / ours.best:.1f}x",
                f"{same:.1%} ({prefix:,} of {base.groups:,})",
                f"{ours.replay_valid:.1%}",
                f"{ours.replay_max_gap:.1e}",
                f"{ours.il:.5f}",
                f"{base.il:.5f}",
                f"{(ours.il - base.il) / base.il:+.2%}",
            ]
        )
    lines += _table(
        [
            "Algorithm",
            "k",
            "Data",
            "Rows",
            "Ours (s)",
            "Baseline (s)",
            "Speed-up",
            "Identical groups (prefix)",
            "Replay valid",
            "Max gap",
            "IL ours",
            "IL baseline",
            "IL diff.",
        ],
        rows,
    )
    lines += ["", *estimates(results), "", *targets(results, pairs), ""]
    return "\n".join(lines)


def estimates(results: list[Result]) -> list[str]:
    """Baseline time at 195k rows, ESTIMATED as t(N) = t(N0) (N / N0)^2 from the largest
    baseline run of the same configuration (the baseline is not run at 195k)."""
    lines = [
        "## Baseline at 195k rows: estimate only (not run)",
        "",
        "The baseline is not run on the replicated data. Its cost is O(N^2 p / k), so its time is "
        "**estimated** as t(N0) x (N / N0)^2 from the largest baseline run of the same "
        "configuration. Estimates from the 10k sample are rough (its working set fits in cache).",
        "",
    ]
    rows = []
    for r in results:
        if r.task.impl != "ours" or r.task.data != "rep":
            continue
        base = [
            b
            for b in results
            if b.task.impl == "naive" and (b.task.algo, b.task.k) == (r.task.algo, r.task.k)
        ]
        if not base:
            continue
        b = max(base, key=lambda x: x.rows)
        est = b.best * (r.rows / b.rows) ** 2
        rows.append(
            _config(r)
            + [
                _fmt_s(r.best),
                f"~{est / 60:.0f} min (from {b.rows:,} rows, {_fmt_s(b.best)} s)",
                f"~{est / r.best:.0f}x",
            ]
        )
    return lines + _table(
        ["Algorithm", "k", "Data", "Rows", "Ours (s)", "Baseline ESTIMATE", "Speed-up ESTIMATE"],
        rows,
    )


def targets(results: list[Result], pairs: list[tuple[Result, Result, float, int]]) -> list[str]:
    """The issue's targets with pass/fail."""
    fair10 = next(
        r
        for r in results
        if (r.task.impl, r.task.algo, r.task.k, r.task.data) == ("ours", "fair", 10, "adult")
    )
    full_pair = next(
        (
            p
            for p in pairs
            if (p[0].task.algo, p[0].task.k, p[0].task.data) == ("fair", 10, "adult")
        ),
        None,
    )
    rep = [r for r in results if r.task.impl == "ours" and r.task.data == "rep"]
    peak = max(r.peak_mb for r in rep)

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    rows = [
        [
            "Fair-MDAV, full Adult, k=10: time",
            f"< {TARGET_TIME_S:g} s",
            f"{fair10.best:.2f} s (best of {len(fair10.times)})",
            verdict(fair10.best < TARGET_TIME_S),
        ]
    ]
    if full_pair is None:
        rows.append(
            [
                "Fair-MDAV, full Adult, k=10: speed-up over the baseline",
                f">= {TARGET_SPEEDUP:g}x",
                "not measured (--quick)",
                "n/a",
            ]
        )
    else:
        speedup = full_pair[1].best / full_pair[0].best
        rows.append(
            [
                "Fair-MDAV, full Adult, k=10: speed-up over the baseline",
                f">= {TARGET_SPEEDUP:g}x",
                f"{speedup:.1f}x ({full_pair[1].best:.1f} s / {full_pair[0].best:.2f} s)",
                verdict(speedup >= TARGET_SPEEDUP),
            ]
        )
    rows.append(
        [
            f"Peak memory at {rep[0].rows:,} rows (max over {len(rep)} configurations)",
            f"< {TARGET_PEAK_MB:.0f} MB",
            f"{peak:.0f} MB",
            verdict(peak < TARGET_PEAK_MB),
        ]
    )
    return ["## Targets", "", *_table(["Target", "Goal", "Measured", "Result"], rows)]


def plan(args: argparse.Namespace, workdir: Path) -> list[Task]:
    """Every measurement, in run order (ours before the baseline it is compared with)."""
    tasks: list[Task] = []
    configs = [(a, k) for a in ("fair", "mdav") for k in (10, 100)]
    for data in ("adult", "sub", "rep"):
        for algo, k in configs:
            tasks.append(Task("ours", algo, k, data, args.repeats))
    for algo, k in configs:
        tasks.append(Task("naive", algo, k, "sub"))
    if not args.quick:
        tasks.append(Task("naive", "fair", 10, "adult"))
    for t in tasks:
        t.groups_path = str(workdir / f"{t.impl}-{t.algo}-{t.k}-{t.data}.npz")
        if t.impl == "naive":
            t.replay_path = str(workdir / f"ours-{t.algo}-{t.k}-{t.data}.npz")
    return tasks


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--quick", action="store_true", help="skip the full-Adult baseline run")
    p.add_argument("--repeats", type=int, default=3, help="runs of ours per configuration")
    p.add_argument("--out", type=Path, default=result("results.md"), help="Markdown report")
    p.add_argument("--data-dir", default=None, help="Adult files (default: PRIVFAIR_DATA_DIR)")
    p.add_argument("--max-load", type=float, default=1.5, help="wait while the load is higher")
    p.add_argument("--max-wait", type=float, default=600.0, help="longest wait for that, s")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--child-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child_main(args.child, args.child_out, args.data_dir)
        return
    loads = {"start": wait_for_quiet(args.max_load, args.max_wait)}
    info = machine()
    with tempfile.TemporaryDirectory(prefix="privfair-bench-") as tmp:
        workdir = Path(tmp)
        results: list[Result] = []
        for task in plan(args, workdir):
            print(
                f"[{time.strftime('%H:%M:%S')}] {task.impl} {ALGO_LABELS[task.algo]} k={task.k} "
                f"on {DATA_LABELS[task.data]} ...",
                file=sys.stderr,
                flush=True,
            )
            results.append(run_child(task, args.data_dir, workdir))
        pairs = []
        for base in (r for r in results if r.task.impl == "naive"):
            ours = next(
                r
                for r in results
                if r.task.impl == "ours"
                and (r.task.algo, r.task.k, r.task.data)
                == (base.task.algo, base.task.k, base.task.data)
            )
            ours.replay_max_gap, ours.replay_valid = base.replay_max_gap, base.replay_valid
            same, prefix = group_agreement(ours.task.groups_path, base.task.groups_path)
            pairs.append((ours, base, same, prefix))
        pairs.sort(key=lambda q: list(DATA_LABELS).index(q[0].task.data))
    loads["end"] = os.getloadavg()[0]
    text = report(results, pairs, info, loads, args)
    print(text)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
