"""What a privfair release costs inside a user's Dagster project (issue 45), against the code
location privfair shipped before (``privfair.dagster.definitions``) and ``privfair run``.

1. **Loading**: a fresh interpreter imports the face and builds definitions for the shipped
   specs: the old way (``import privfair.dagster.definitions``: every spec's six assets, jobs,
   schedules and sensors) against ``release_assets`` per spec merged into one ``Definitions``;
   wall time and peak memory of the process.
2. **One release**: the same spec released by ``privfair run`` (the CLI) and by a
   ``release_assets`` asset materialised in process (``dagster.materialize``), on the same
   input into fresh stores: wall time of each and the version each publishes (they must be
   equal: one release either way).

    uv run --no-sync python benchmarks/bench_orchestrator_faces.py [--spec german_fair_mdav]

Writes ``results/results_orchestrator_faces.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import textwrap
from pathlib import Path

import harness

LOAD_OLD = "import privfair.dagster.definitions as d; print(len(list(d.defs.assets or [])))"
LOAD_NEW = """
import dagster as dg
from privfair.dagster import release_assets
from privfair.spec.catalogue import load_specs
parts = [release_assets(path) for path, _ in load_specs()]
defs = dg.Definitions.merge(*parts)
print(len(list(defs.assets or [])))
"""
RELEASE_DAGSTER = """
import json, sys, time
import dagster as dg
from privfair.dagster import release_assets
defs = release_assets(sys.argv[1], store=sys.argv[2])
start = time.perf_counter()
with dg.instance_for_test(temp_dir=sys.argv[3]) as instance:
    res = dg.materialize(list(defs.assets), resources=defs.resources, instance=instance)
m = [e.event_specific_data.materialization for e in res.all_events
     if e.event_type_value == "ASSET_MATERIALIZATION"][0]
print(json.dumps({"version": m.metadata["privfair/version"].value,
                  "seconds": time.perf_counter() - start}))
"""


def _tracked(code: str, *args: str, cwd: Path) -> dict:
    out = harness.tracked(
        [sys.executable, "-c", textwrap.dedent(code), *args], cwd, harness.child_env()
    )
    if out["rc"] != 0:
        raise SystemExit(f"failed ({out['rc']}):\n{out['stderr'][-3000:]}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="german_fair_mdav")
    ap.add_argument("--out", default=str(harness.result("results_orchestrator_faces")))
    args = ap.parse_args()
    rows: dict = {"machine": harness.machine(), "spec": args.spec}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        old = _tracked(LOAD_OLD, cwd=work)
        new = _tracked(LOAD_NEW, cwd=work)
        rows["load"] = {
            "old": {
                "assets": int(old["stdout"].split()[-1]),
                "s": old["wall_s"],
                "gb": old["peak_gb"],
            },
            "new": {
                "assets": int(new["stdout"].split()[-1]),
                "s": new["wall_s"],
                "gb": new["peak_gb"],
            },
        }
        spec = str(harness.spec_file(args.spec))
        cli = harness.tracked(
            [
                str(Path(sys.executable).parent / "privfair"),
                "run",
                spec,
                "--store",
                str(work / "cli"),
            ],
            work,
            harness.child_env(XDG_STATE_HOME=str(work / "state-cli")),
        )
        if cli["rc"] != 0:
            raise SystemExit(cli["stderr"][-3000:])
        cli_version = cli["stdout"].split()[2]
        (work / "dh").mkdir()
        dag = harness.tracked(
            [
                sys.executable,
                "-c",
                textwrap.dedent(RELEASE_DAGSTER),
                spec,
                str(work / "dg"),
                str(work / "dh"),
            ],
            work,
            harness.child_env(XDG_STATE_HOME=str(work / "state-dg")),
        )
        if dag["rc"] != 0:
            raise SystemExit(dag["stderr"][-3000:])
        got = json.loads(dag["stdout"].strip().splitlines()[-1])
        rows["release"] = {
            "cli": {"s": cli["wall_s"], "gb": cli["peak_gb"], "version": cli_version},
            "dagster": {
                "s": dag["wall_s"],
                "materialise_s": got["seconds"],
                "gb": dag["peak_gb"],
                "version": got["version"],
            },
        }
    assert rows["release"]["cli"]["version"] == rows["release"]["dagster"]["version"], rows
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(rows, indent=2))
    ld, rl = rows["load"], rows["release"]
    md = f"""# privfair in a user's Dagster project (issue 45)

`uv run --no-sync python benchmarks/bench_orchestrator_faces.py --spec {args.spec}` on
{rows["machine"].get("cpu", "?")} ({rows["machine"].get("cpus", "?")} CPUs).

| loading the face (fresh process) | assets | wall s | peak GiB |
|---|---:|---:|---:|
| before: `import privfair.dagster.definitions` (every shipped spec's code location) | {ld["old"]["assets"]} | {ld["old"]["s"]:.1f} | {ld["old"]["gb"]:.2f} |
| `release_assets` for every shipped spec, merged | {ld["new"]["assets"]} | {ld["new"]["s"]:.1f} | {ld["new"]["gb"]:.2f} |

| one release of `{args.spec}` | wall s (process) | peak GiB | version |
|---|---:|---:|---|
| `privfair run` | {rl["cli"]["s"]:.1f} | {rl["cli"]["gb"]:.2f} | `{rl["cli"]["version"]}` |
| `release_assets` asset, `dagster.materialize` in process | {rl["dagster"]["s"]:.1f} (materialise {rl["dagster"]["materialise_s"]:.1f}) | {rl["dagster"]["gb"]:.2f} | `{rl["dagster"]["version"]}` |
"""
    out.with_suffix(".md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
