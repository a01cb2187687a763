"""``privfair`` command line: run, validate and list releases.

Exit codes: 0 success; 1 a guarantee failed (nothing published); 2 bad spec, input or data.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import yaml

from schemas.errors import ContractViolation, PrivfairError

DEFAULT_STORE = os.environ.get("PRIVFAIR_STORE", "releases")


def _overrides(pairs: list[str]) -> dict:
    out = {}
    for p in pairs:
        if "=" not in p:
            raise PrivfairError(f"--set expects key=value, got '{p}'")
        k, v = p.split("=", 1)
        out[k] = yaml.safe_load(v)
    return out


def _fmt(v) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def cmd_run(args: argparse.Namespace) -> int:
    from pipelines.catalogue import load_spec, with_params
    from pipelines.flow import run_release

    spec = load_spec(args.spec)
    if args.set:
        spec = with_params(spec, _overrides(args.set))
    out = run_release(spec, args.store, args.data_dir)
    print(f"{out.status}: {out.pipeline} {out.version}")
    print(f"  release: {out.path}")
    if out.validation is not None:
        print(_tally(out.validation))
    shown = [(m.label, m.get(out.metrics)) for m in out.headline]
    for label, value in shown:
        if value is not None and not isinstance(value, dict | list):
            print(f"  {label}: {_fmt(value)}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from pipelines.flow import revalidate

    v = revalidate(Path(args.release), args.data_dir)
    for r in v.guarantees:
        print(f"{'PASS' if r.passed else 'FAIL'}  {r.id:<6} {r.kind:<26} {r.message}")
    for r in v.schema_checks:
        if not r.passed:
            print(f"FAIL  schema {r.kind:<26} {r.message}")
    print(_tally(v).strip())
    return 0 if v.passed else 1


def _tally(v) -> str:
    g, s = v.guarantees, v.schema_checks
    g_ok = sum(r.passed for r in g)
    s_ok = sum(r.passed for r in s)
    return f"  guarantees: {g_ok}/{len(g)} hold; schema checks: {s_ok}/{len(s)} pass"


def cmd_releases(args: argparse.Namespace) -> int:
    from pipelines.release import Store, list_releases

    rows = list_releases(Store.open(args.store))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no releases in {args.store}")
        return 0
    print(f"{'pipeline':<24} {'version':<18} {'published_at':<22} {'rows':>8}  status")
    for r in rows:
        mark = "  (latest)" if r["latest"] else ""
        print(
            f"{r['pipeline']:<24} {r['version']:<18} {r['published_at']:<22} {r['rows'] or 0:>8}  {r['status']}{mark}"
        )
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="privfair", description="Private and fair table releases.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="ingest, protect, validate and publish one release")
    r.add_argument("spec", help="pipeline spec (YAML)")
    r.add_argument(
        "--store",
        default=DEFAULT_STORE,
        help="release store: folder or pyarrow.fs URI (default: %(default)s)",
    )
    r.add_argument(
        "--data-dir",
        default=None,
        help="folder with the raw dataset files (default: $PRIVFAIR_DATA_DIR)",
    )
    r.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a component parameter",
    )
    r.set_defaults(fn=cmd_run)
    v = sub.add_parser("validate", help="re-check a published release from its files")
    v.add_argument("release", help="release folder <store>/<pipeline>/<version>")
    v.add_argument("--data-dir", default=None)
    v.set_defaults(fn=cmd_validate)
    ls = sub.add_parser("releases", help="list published releases")
    ls.add_argument("--store", default=DEFAULT_STORE)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(fn=cmd_releases)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except ContractViolation as e:
        print(f"privfair: release not published: {e}", file=sys.stderr)
        return 1
    except PrivfairError as e:
        print(f"privfair: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
