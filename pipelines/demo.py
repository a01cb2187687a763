"""The main job: build, validate and publish every shipped release through Dagster, in process.

    python -m privfair.demo --store releases [--data-dir D]

Materialises every asset of ``privfair.dagster.definitions`` (raw table -> protected table -> blocking
contract checks -> release, for each spec) in one Dagster run recorded in ``$DAGSTER_HOME``
(default ``./.dagster_home``), so the run, its checks and metadata show up in the UI
afterwards (``python -m privfair.orchestrate dagster-dev``). Prints where each release and its
report are. Exit code 0 when every release is published (or already was), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _failure_reasons(result, spec: str) -> list[str]:
    """Why a spec's release was not materialised: failed checks first, then failed steps."""
    reasons = [
        f"{e.check_name}: {e.description or 'failed'}"
        for e in result.get_asset_check_evaluations()
        if not e.passed and e.asset_key.path[0] == spec and e.check_name != "contract"
    ]
    if reasons:
        return reasons
    for ev in result.get_step_failure_events():
        if ev.step_key and ev.step_key.startswith(f"{spec}__"):
            err = ev.event_specific_data.error if ev.event_specific_data else None
            msg = err.message.strip().splitlines()[0] if err is not None else "step failed"
            reasons.append(f"{ev.step_key}: {msg}")
    return reasons or ["not materialised"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Publish every shipped release (through Dagster).")
    p.add_argument("--store", default="releases", help="release store (default: %(default)s)")
    p.add_argument(
        "--data-dir", default=None, help="raw dataset files (default: $PRIVFAIR_DATA_DIR)"
    )
    args = p.parse_args(argv)

    from privfair.orchestrate import ensure_dagster_home

    home = ensure_dagster_home()
    import dagster as dg

    from privfair.dagster.definitions import build_defs
    from privfair.spec.catalogue import load_specs

    store = args.store if "://" in args.store else str(Path(args.store).resolve())
    data_dir = str(Path(args.data_dir).resolve()) if args.data_dir else None
    defs = build_defs(store=store, data_dir=data_dir)
    job = defs.resolve_job_def("privfair_releases")
    names = [spec.name for _, spec in load_specs()]
    print(f"materialising {len(names)} releases through Dagster: {', '.join(names)}", flush=True)
    result = job.execute_in_process(
        instance=dg.DagsterInstance.get(),
        raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
    )

    failed = 0
    for name in names:
        if result.is_node_success(f"{name}__release"):
            out = result.asset_value(dg.AssetKey([name, "release"]))
            print(f"{out['status']:<10} {name:<20} {out['version']}  {out['path']}")
            if out.get("report"):
                print(f"{'':<10} {'':<20} report:           {out['report']}")
            if out.get("shared"):
                print(f"{'':<10} {'':<20} shareable copy:   {out['shared']} (privfair export)")
            if out.get("manifest"):
                for w in json.loads(Path(out["manifest"]).read_text()).get("warnings", []):
                    print(f"{'':<10} {'':<20} warning:          {w}")
        else:
            failed += 1
            print(f"{'FAILED':<10} {name:<20} NOT published", file=sys.stderr)
            for reason in _failure_reasons(result, name):
                print(f"{'':<10}   {reason}", file=sys.stderr)
    print(f"releases in {store}")
    print(f"Dagster run {result.run_id} recorded in {home}")
    print("  open it with: python -m privfair.orchestrate dagster-dev -p 3000")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
