"""AIM on UCI Adult against our MST, SmartNoise-synth's AIM and OpenDP's ``dp.mbi.AIM`` in one
run (issue 47, part 3): wall time, peak memory, mean 1-way and 2-way TVD against the input,
and the sex -> income parity gap, every method on the same code matrix (our public domain of
``adult_aim.yaml``: 13 attributes, ``education`` excluded), epsilon = 1, delta = 1e-9::

    PRIVFAIR_DATA_DIR=/work/shared/data .venv/bin/python benchmarks/bench_aim.py \
        --runs 3 --peer-timeout 900 --out benchmarks/results/bench_aim.json

Each of our runs is a fresh interpreter (``--child``), so its ``ru_maxrss`` is that run's peak
(imports included); its time is the component's own (encode to decode, the metrics
excluded). Each peer runs ``benchmarks/peers/run_synthesis_peers.py`` in its own isolated uv
environment (``uv run --isolated --no-project --with ...``), one run, under a time limit: a
run past it is killed and recorded as not finished, with the peak resident memory of its
process tree polled every second. TVD and parity are recomputed here for every method by the
same functions (``run_synthesis_peers.fidelity`` and ``parity_gap``) from the synthetic codes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / "peers"
sys.path.insert(0, str(PEERS))

import run_synthesis_peers as peers  # noqa: E402 (standalone: numpy and pyarrow only)

PEER_ENVS = {
    "smartnoise_aim": ("smartnoise", ["--with", "smartnoise-synth==1.0.8"]),
    "opendp_aim": ("opendp", ["--with", "opendp[mbi]==0.16.0", "--with", "polars==1.36.1"]),
}


def parity_gap(codes: np.ndarray, columns: list[str]) -> float:
    """|P(income = 1 | sex = 1) - P(income = 1 | sex = 0)| on the codes (Adult's ``sex`` and
    ``income`` are 0/1 on the public domain)."""
    s, y = codes[:, columns.index("sex")], codes[:, columns.index("income")]
    rates = [float(np.mean(y[s == v] == 1)) if np.any(s == v) else float("nan") for v in (0, 1)]
    return abs(rates[1] - rates[0])


def child(method: str, codes_path: Path, out: Path) -> None:
    """One run of our ``method`` (mst or aim) on Adult; its record to ``out``."""
    from privfair.components.synthesis.audit import published_codes
    from privfair.run.flow import ingest
    from privfair.spec.catalogue import algorithm_of, load_spec

    spec = load_spec(ROOT / "pipelines" / "specs" / f"adult_{method}.yaml")
    table = ingest(spec).table
    t0 = time.perf_counter()
    result = algorithm_of(spec)(table, spec.params)
    seconds = time.perf_counter() - t0 - result.timings.get("metrics", 0.0)
    real, columns, sizes, _ = peers.load_codes(codes_path)
    syn = published_codes(table, result.outputs["data"], spec.params)[columns].to_numpy()
    rec = {
        "status": "ok",
        "seconds": round(seconds, 2),
        "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        **peers.fidelity(real, syn.astype(np.int64), sizes),
        "parity_gap": parity_gap(syn, columns),
        "rho": result.metrics["privacy"]["rho"],
        "rho_budget": result.metrics["privacy"]["rho_budget"],
        "rounds": result.metrics.get("rounds"),
        "cliques": result.metrics.get("cliques"),
    }
    out.write_text(json.dumps(rec))


def _tree_rss_mb(pid: int) -> float:
    import psutil

    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0
    for q in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += q.memory_info().rss
    return total / 2**20


def run_peer(name: str, codes: Path, timeout: float, tmp: Path) -> dict:
    """One run of a peer in its own uv environment, killed after ``timeout`` seconds."""
    peer, withs = PEER_ENVS[name]
    out, syn = tmp / f"{name}.json", tmp / f"{name}.parquet"
    cmd = ["uv", "run", "--isolated", "--no-project", "--python", "3.11", *withs]
    cmd += ["--with", "pyarrow==26.0.1", "python", str(PEERS / "run_synthesis_peers.py")]
    cmd += ["--peer", peer, "--mechanism", "aim", "--codes", str(codes), "--runs", "1"]
    cmd += ["--save-synthetic", str(syn), "--out", str(out)]
    print(f"[{name}] {' '.join(cmd)}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, start_new_session=True, stderr=subprocess.PIPE, text=True
    )
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_mb(proc.pid))
        if time.perf_counter() - t0 > timeout:
            os.killpg(proc.pid, signal.SIGKILL)  # the peer's own process group only
            proc.wait()
            return {"status": "timeout", "limit_s": timeout, "tree_rss_peak_mb": round(peak)}
        time.sleep(1.0)
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0 or not out.exists():
        return {"status": "error", "error": err.strip().splitlines()[-5:]}
    res = json.loads(out.read_text())
    run = res["runs"][0]
    if run.get("status") != "ok":
        return {"status": "error", "error": run.get("error")}
    real, columns, sizes, _ = peers.load_codes(codes)
    synth, _, _, _ = peers.load_codes(syn)
    return {
        "status": "ok",
        "seconds": run["seconds"],
        "vm_hwm_mb": run.get("vm_hwm_mb"),
        "ru_maxrss_mb": run.get("ru_maxrss_mb"),
        "tree_rss_peak_mb": round(peak),
        **peers.fidelity(real, synth, sizes),
        "parity_gap": parity_gap(synth, columns),
        "versions": res["meta"].get("versions"),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of each of ours (fresh processes)")
    ap.add_argument("--peer-timeout", type=float, default=900.0)
    ap.add_argument("--peers", default="smartnoise_aim,opendp_aim", help="comma list, or none")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/bench_aim.json")
    ap.add_argument("--child", choices=["mst", "aim"], help=argparse.SUPPRESS)
    ap.add_argument("--codes", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.codes, args.child_out)
        return 0
    res: dict = {"command": " ".join(sys.argv), "loadavg_start": os.getloadavg(), "methods": {}}
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        codes = tmp / "adult_codes.parquet"
        spec = ROOT / "pipelines/specs/adult_aim.yaml"
        subprocess.run(
            [sys.executable, str(PEERS / "export_adult_codes.py"), str(codes), "--spec", str(spec)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        real, columns, sizes, _ = peers.load_codes(codes)
        res["input"] = {
            "rows": len(real),
            "columns": columns,
            "parity_gap": parity_gap(real, columns),
        }
        for method in ("mst", "aim") if args.runs else ():
            runs = []
            for i in range(args.runs):
                out = tmp / f"{method}{i}.json"
                cmd = [sys.executable, __file__, "--child", method, "--codes", str(codes)]
                subprocess.run([*cmd, "--child-out", str(out)], check=True)
                runs.append(json.loads(out.read_text()))
                print(f"[{method} {i}] {runs[-1]['seconds']} s", file=sys.stderr, flush=True)
            res["methods"][method] = {"runs": runs}
        for name in [p for p in args.peers.split(",") if p and p != "none"]:
            res["methods"][name] = {"runs": [run_peer(name, codes, args.peer_timeout, tmp)]}
    res["loadavg_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n")
    print(render(res))
    return 0


def _median(runs: list[dict], key: str):
    v = [r[key] for r in runs if r.get("status") == "ok" and r.get(key) is not None]
    return float(np.median(v)) if v else None


def render(res: dict) -> str:
    """The benchmark table (markdown)."""
    lines = [
        "| method | runs | time (s) | peak memory (MB) | 1-way TVD | 2-way TVD | parity gap |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, m in res["methods"].items():
        runs = m["runs"]
        ok = [r for r in runs if r.get("status") == "ok"]
        if not ok:
            r = runs[0]
            what = (
                f"did not finish in {r['limit_s']:.0f} s" if r["status"] == "timeout" else "error"
            )
            mem = r.get("tree_rss_peak_mb", "")
            lines.append(f"| {name} | {len(runs)} | {what} | {mem} | | | |")
            continue
        mem = max(r.get("tree_rss_peak_mb") or r.get("ru_maxrss_mb") or 0 for r in ok)
        lines.append(
            f"| {name} | {len(ok)} | {_median(ok, 'seconds'):.1f} | {mem:.0f} | "
            f"{_median(ok, 'one_way_tvd'):.4f} | {_median(ok, 'two_way_tvd'):.4f} | "
            f"{_median(ok, 'parity_gap'):.4f} |"
        )
    lines.append(f"| input | | | | | | {res['input']['parity_gap']:.4f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
