"""``privfair`` command line: run, validate, export, verify, list and promote releases;
describe the algorithms' parameters.

Exit codes: 0 success; 1 a guarantee failed (nothing published); 2 bad spec, input, data or
store (the store path is a file, a folder cannot be written, an unknown URI scheme...), an option
out of its range (``evaluate --folds 1``), a Spark master that is malformed or cannot be reached,
an optional package not installed (naming its ``pip install 'privfair[EXTRA]'``), and a checker
that raised instead of giving a verdict (nothing published or quarantined); 3 an internal error
(one line naming the phase and the log file with the traceback, ``privfair.crashlog``; nothing
published or quarantined).

``latest`` names the version the most recent run of a pipeline produced (a re-run moves it,
also to a version that already existed); ``privfair promote`` points it at any complete release.
``privfair releases`` on a store that does not exist prints "no releases" and exits 0 (it
creates nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import NoReturn

import yaml

from privfair.exits import leave
from privfair.schemas.contracts import SCHEMA_CHECK_ID
from privfair.schemas.errors import ContractViolation, PrivfairError, SpecError

DEFAULT_STORE = os.environ.get("PRIVFAIR_STORE", "releases")


def _overrides(pairs: list[str]) -> dict:
    from privfair.schemas.errors import SpecError

    out = {}
    for p in pairs:
        if "=" not in p:
            raise PrivfairError(f"--set expects key=value, got '{p}'")
        k, v = p.split("=", 1)
        try:
            out[k] = yaml.safe_load(v)
        except yaml.YAMLError as e:
            why = getattr(e, "problem", None) or type(e).__name__
            raise SpecError("--set", f"'{p}': the value is not YAML ({why})") from None
    return out


def _fmt(v) -> str:
    if isinstance(v, dict):
        sep = "; " if any(isinstance(x, dict) for x in v.values()) else ", "
        return sep.join(
            f"{k}: {_fmt(x)}" if isinstance(x, dict) else f"{k}={_fmt(x)}" for k, x in v.items()
        )
    if isinstance(v, float):
        return f"{v:+.4f}" if v < 0 else f"{v:.4f}"
    if v is None:
        return "n/a"
    return str(v)


def _spark_conf(pairs: list[str]) -> dict[str, str]:
    """``--conf k=v ...`` as Spark settings (the value is text, as Spark takes it)."""
    out = {}
    for p in pairs:
        k, eq, v = p.partition("=")
        if not eq or not k.strip():
            raise SpecError("--conf", f"expects a Spark setting key=value, got '{p}'")
        out[k.strip()] = v.strip()
    return out


def cmd_run(args: argparse.Namespace) -> int:
    from privfair.run.flow import run_release
    from privfair.spec.catalogue import load_spec, with_execution, with_params

    spec = load_spec(args.spec)
    if args.set:
        spec = with_params(spec, _overrides(args.set))
    conf = None
    if args.conf:
        conf = {**spec.execution.conf, **_spark_conf(args.conf)}
    elif args.engine == "local" and spec.execution.conf:
        conf = {}  # the spec's Spark settings do not apply to the local engine
    spec = with_execution(
        spec, engine=args.engine, master=args.master, workers=args.workers, conf=conf
    )
    table = None
    if args.input is not None:  # the rows come from the file, the roles from the spec
        import os

        from privfair.api import in_memory
        from privfair.io.files import read_table_file

        table = read_table_file(args.input, spec.dataset.csv)
        spec = in_memory(spec, f"file:{os.path.realpath(args.input)}")
    out = run_release(spec, args.store, args.data_dir, partition=args.partition, table=table)
    if out.message:
        print(f"privfair: {out.message}", file=sys.stderr)
    print(f"{out.status}: {out.pipeline} {out.version}")
    print(f"  release: {out.path}")
    print(f"  shareable copy: {out.path}/shared (privfair export {out.path} DEST)")
    if spec.target is not None:  # the lakehouse table, catalog and snapshot it published
        from privfair.release.manifest import Manifest
        from privfair.release.store import Store
        from privfair.release.targets import published_lines

        man = Manifest.read(Store.open(args.store), out.pipeline, out.version)
        print("\n".join(published_lines(dict(man.data))) or "  target: not recorded")
    if out.validation is not None:
        print(_tally(out.validation))
    for m in out.headline:
        line = _headline_line(m, m.get(out.metrics))
        if line is not None:
            print(line)
    if out.status == "exists":
        print("  ledger: exists, nothing charged (this version was published before)")
    elif out.ledger is not None:
        print(f"  ledger: {_ledger_line(out.ledger)}")
    for w in out.warnings:
        print(f"  warning: {w}")
    return 0


def _has_none(v) -> bool:
    return v is None or (isinstance(v, dict) and any(_has_none(x) for x in v.values()))


def _headline_line(m, value) -> str | None:
    """``  label: value`` of a headline metric; a value that is (or holds) None is printed
    with the reason the metric declares (``Metric.missing``), never as a bare ``None``; a
    metric absent with no declared reason is not printed (it does not apply to the run).

    >>> from privfair.components.core.descriptor import Metric
    >>> _headline_line(Metric("a", "fair tree", missing="n/a: no admissible"), None)
    '  fair tree: n/a: no admissible'
    >>> _headline_line(Metric("a", "dp", missing="n/a: empty group"), {"x": None, "y": 0.5})
    '  dp: x=n/a, y=0.5000 (n/a: empty group)'
    """
    if isinstance(value, list):
        return None
    if value is None:
        return f"  {m.label}: {m.missing}" if m.missing else None
    text = _fmt(value)
    if _has_none(value):
        text += f" ({m.missing})" if m.missing else ""
    return f"  {m.label}: {text}"


def _ledger_line(rec: dict) -> str:
    """One line of a release's ledger record: its charge, then spent and remaining."""
    blocks = ", ".join(rec.get("blocks") or [])
    if rec.get("charge") is None:
        return f"recorded on {rec.get('dataset')} [{blocks}] (republish: {rec.get('policy')})"
    c = rec["charge"]
    text = f"charged rho={c['rho']:.6g} (epsilon={c['epsilon']:.6g}) on {rec['dataset']} [{blocks}]"
    if rec.get("budget") is None:
        return text + f"; spent rho={rec['spent']['rho']:.6g}; no budget declared"
    left = rec.get("remaining") or {}
    rest = f"rho={left.get('rho', 0):.6g}"
    if left.get("epsilon") is not None:
        rest += f", epsilon={left['epsilon']:.6g}"
    return text + f"; spent rho={rec['spent']['rho']:.6g}, remaining {rest}"


def _set_cap(args: argparse.Namespace) -> int:
    """``privfair budget --set-cap SPEC``: record a new cap for the spec's dataset (the only
    way a cap changes; a spec's ``budget`` cannot raise it)."""
    from privfair.budget.admission import dataset_identity, ledger_for
    from privfair.run.flow import ReleasePlan
    from privfair.spec.catalogue import load_spec

    if (args.rho is None) == (args.epsilon is None) or (args.epsilon is None) != (
        args.delta is None
    ):
        raise SpecError("--set-cap", "give --rho R, or --epsilon E and --delta D")
    budget = (
        {"rho": args.rho}
        if args.rho is not None
        else {"epsilon": args.epsilon, "delta": args.delta}
    )
    from privfair.schemas.spec import BudgetSpec

    try:
        BudgetSpec.model_validate(budget)
    except ValueError as e:
        raise SpecError("--set-cap", str(e).splitlines()[-1]) from None
    plan = ReleasePlan.of(load_spec(args.set_cap), data_dir=args.data_dir)
    ident = dataset_identity(plan, plan.ingest())
    if ident.anonymous:
        raise SpecError("--set-cap", f"{args.set_cap} reads a table in memory: no dataset to cap")
    ledger = ledger_for(plan)
    assert ledger is not None
    ledger.set_cap(ident.atoms, budget, args.per, "privfair budget --set-cap")
    shown = ", ".join(f"{k}={v:g}" for k, v in budget.items())
    print(f"cap of dataset '{ident.name}' set to {shown} (per {args.per}) in ledger {ledger.url}")
    return 0


def cmd_budget(args: argparse.Namespace) -> int:
    """The ledger per dataset, unit and block: spent, entries by status, remaining."""
    from privfair.budget.summary import ledger_summary, open_ledger

    if args.set_cap is not None:
        return _set_cap(args)
    ledger = open_ledger(args.ledger, args.store)
    if ledger is None:
        print("no ledger yet: no release of this data owner was recorded")
        return 0
    rows = ledger_summary(ledger.entries(dataset=args.dataset))
    if args.json:
        print(json.dumps({"ledger": ledger.url, "blocks": rows}, indent=2))
        return 0
    print(f"ledger: {ledger.url}")
    if not rows:
        print("no entries" + (f" for dataset '{args.dataset}'" if args.dataset else ""))
        return 0
    print(
        f"{'dataset':<24} {'block':<12} {'spent rho':>12} {'epsilon':>10} {'budget':>22} "
        f"{'remaining':>22}  entries"
    )
    for r in rows:
        eps = f"{r['spent_epsilon']:.4g}" if r["spent_epsilon"] is not None else "-"
        budget = _fmt_budget(r["budget"])
        left = r["remaining"]
        rem = (
            "-"
            if left is None
            else f"rho={left['rho']:.4g}"
            + (f" eps={left['epsilon']:.4g}" if left.get("epsilon") is not None else "")
        )
        counts = ", ".join(f"{k} {v}" for k, v in sorted(r["statuses"].items()))
        print(
            f"{r['dataset']:<24} {r['block']:<12} {r['spent_rho']:>12.6g} {eps:>10} "
            f"{budget:>22} {rem:>22}  {counts}"
        )
    return 0


def _fmt_budget(b: dict | None) -> str:
    if not b:
        return "none declared"
    if b.get("rho") is not None:
        return f"rho={b['rho']:g}/{b.get('per')}"
    return f"eps={b['epsilon']:g},d={b['delta']:g}/{b.get('per')}"


def cmd_export(args: argparse.Namespace) -> int:
    """Write a release's shareable copy to a folder of its own."""
    from privfair.components.core.progress import phase
    from privfair.release.share import export

    with phase("export (copy, then check against the manifest)"):
        dest, man = export(args.release, args.dest)
    print(f"exported: {man.get('pipeline')} release {man.get('release')}")
    print(f"  to: {dest}")
    for name in sorted(man.get("checksums") or {}):
        print(f"  {name}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Check a shareable copy's files against its manifest and print the verdicts it carries."""
    from privfair.release.share import verify_copy
    from privfair.schemas.errors import StoreError

    folder = Path(args.copy)
    man, problem = verify_copy(folder)
    if problem is not None:
        raise StoreError(str(folder), f"not an intact shareable copy: {problem}")
    v = man.get("validation") or {}
    for r in v.get("results") or []:
        if r.get("id") != SCHEMA_CHECK_ID:
            print(f"{'PASS' if r.get('passed') else 'FAIL'}  {r.get('id', ''):<6} {r.get('kind')}")
    print(
        f"  {man.get('pipeline')} release {man.get('release')}: every file matches its manifest; "
        f"validation {v.get('status')} ({v.get('checked')} checks, recomputed by the data owner)"
    )
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from privfair.run.flow import revalidate

    v = revalidate(Path(args.release), args.data_dir)  # a `latest` pointer file is followed
    for r in v.guarantees:
        print(f"{'PASS' if r.passed else 'FAIL'}  {r.id:<6} {r.kind:<26} {r.message}")
    for r in v.schema_checks:
        if not r.passed:
            print(f"FAIL  schema {r.kind:<26} {r.message}")
    print(_tally(v).strip())
    return 0 if v.passed else 1


def _tally(v) -> str:
    g, s = v.guarantees, v.schema_checks
    text = f"  guarantees: {sum(r.passed for r in g)}/{len(g)} hold"
    if not s:  # new rows (a DP synthesis): its published schema is one of the guarantees
        return text + "; schema checks: none (new rows: the published schema is a guarantee)"
    return text + f"; schema checks: {sum(r.passed for r in s)}/{len(s)} pass"


def cmd_releases(args: argparse.Namespace) -> int:
    from privfair.release.store import Store, current_releases, list_releases

    store = Store.open(args.store)
    if args.current:  # each partition's current release (privfair.api.current reads them)
        cur = current_releases(store, args.pipeline)
        if args.json or not cur:
            print(json.dumps(cur, indent=2) if args.json else f"no releases in {args.store}")
            return 0
        print(f"{'pipeline':<24} {'partition':<14} {'version':<18} {'published_at':<22} rows")
        for r in cur:
            print(
                f"{r['pipeline']:<24} {r['partition'] or '(all rows)':<14} {r['version']:<18} "
                f"{r['published_at']:<22} {r['rows'] or 0}{'  (latest)' if r['latest'] else ''}"
            )
        return 0
    rows = list_releases(store, quarantined=True)
    rows = [r for r in rows if args.pipeline in (None, r["pipeline"])]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    published = [r for r in rows if not r["quarantined"]]
    held = [r for r in rows if r["quarantined"]]
    if not published:
        missing = "" if store.exists() else " (the store does not exist)"
        print(f"no releases in {args.store}{missing}")
        if not held:
            return 0
    print(f"{'pipeline':<24} {'version':<18} {'published_at':<22} {'rows':>8}  status")
    for r in published + held:
        if r["quarantined"]:
            mark = f"  (quarantined: .quarantine/{r['quarantined']})"
        else:
            mark = "  (latest)" if r["latest"] else ""
        print(
            f"{r['pipeline']:<24} {r['version']:<18} {r['published_at']:<22} "
            f"{r['rows'] or 0:>8}  {r['status']}{mark}"
        )
        if not r["quarantined"]:
            print(f"    {_differs(r)}")
    return 0


def _differs(r: dict) -> str:
    """One line: what a version changed against the previous one of its pipeline (and
    partition), and its budget charge.

    >>> _differs({"partition": "2024-01", "changes": {"params": {"k": {"from": 5, "to": 7}},
    ...     "input_changed": False, "code_changed": True}, "charge": None})
    'partition 2024-01; params k: 5 -> 7; input same; code changed'
    """
    parts = [f"partition {r['partition']}"] if r.get("partition") else []
    ch = r.get("changes")
    if ch is None:
        parts.append("first release")
    else:
        diffs = ", ".join(
            f"{k}: {_fmt_value(d['from'])} -> {_fmt_value(d['to'])}"
            for k, d in ch["params"].items()
        )
        parts.append(f"params {diffs}" if diffs else "params same")
        parts.append(f"input {'changed' if ch['input_changed'] else 'same'}")
        parts.append(f"code {'changed' if ch['code_changed'] else 'same'}")
    c = r.get("charge")
    if isinstance(c, dict) and c.get("rho") is not None:
        eps = f", epsilon={c['epsilon']:.6g}" if c.get("epsilon") is not None else ""
        parts.append(f"charged rho={c['rho']:.6g}{eps}")
    return "; ".join(parts)


def _fmt_value(v) -> str:
    return "unset" if v is None else json.dumps(v) if isinstance(v, dict | list) else str(v)


def cmd_promote(args: argparse.Namespace) -> int:
    """Point ``latest`` of a pipeline at an existing, complete release."""
    from privfair.release.store import Store, set_latest, verify_release
    from privfair.schemas.errors import StoreError

    if args.version is None:  # <store>/<pipeline>/<version>
        folder = Path(args.release)
        if folder.name in ("", ".", "..") or folder.parent.name in ("", ".", ".."):
            raise StoreError(args.release, "give <store>/<pipeline>/<version>")
        store_uri, pipeline, version = str(folder.parent.parent), folder.parent.name, folder.name
    else:  # PIPELINE VERSION --store S
        store_uri, pipeline, version = args.store, args.release, args.version
    store = Store.open(store_uri)
    store.check_pipeline(pipeline)
    if version.startswith(".") or version == "latest":
        raise StoreError(store.path(pipeline, version), "not a release version")
    problem = verify_release(store, pipeline, version)
    if problem is not None:
        raise StoreError(
            store.path(pipeline, version), f"not a complete release, cannot promote: {problem}"
        )
    moved = set_latest(store, pipeline, version)
    print(f"{'promoted' if moved else 'already latest'}: {pipeline} {version}")
    print(f"  latest: {store.path(pipeline, 'latest')}")
    return 0


def _writable_folder(folder: Path, what: str) -> None:
    """``StoreError`` unless ``folder`` is a folder this process can write, or can be created
    (checked before a long run, not after it)."""
    from privfair.schemas.errors import StoreError

    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        raise StoreError(str(probe), f"not a folder: {what} cannot be written there")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise StoreError(str(probe), f"this user cannot write there: {what}")


def cmd_evaluate(args: argparse.Namespace) -> int:
    from privfair.components.core.progress import phase
    from privfair.evaluation.evaluate import evaluate, write
    from privfair.evaluation.options import EvaluateOptions
    from privfair.run.flow import ingest
    from privfair.schemas.errors import StoreError
    from privfair.spec.catalogue import load_spec
    from privfair.spec.settings import resolve_evaluations

    options = EvaluateOptions.of(  # checked before the input is read
        {
            "grid": args.grid,
            "folds": args.folds,
            "seed": args.seed,
            "classifiers": args.classifiers,
            "drop_protected": args.drop_protected,
            "protect_test": args.protect_test,
        }
    )
    spec = load_spec(args.spec)
    folder = resolve_evaluations(args.out) / spec.name
    _writable_folder(folder, "the evaluation's folder (--out or $PRIVFAIR_EVALUATIONS)")
    with phase("ingest") as ph:
        ing = ingest(spec, args.data_dir)
        ph.note(f"{ing.table.num_rows} rows")
    table = ing.table
    with phase(f"evaluate ({args.folds} folds)"):
        ev = evaluate(
            spec, table, **options.arguments(), input_fingerprint=ing.input["fingerprint"]
        )
    try:
        paths = write(ev, folder)
    except OSError as e:
        raise StoreError(
            str(getattr(e, "filename", None) or folder),
            f"cannot write the evaluation: {e.strerror or e} (--out or $PRIVFAIR_EVALUATIONS)",
        ) from None
    for r in ev.summary.to_pylist():
        if r["metric"] in ("accuracy", "dpar"):
            print(
                f"{r['protection']:<12} {r['classifier']:<4} {r['grid']:<24} {r['metric']:<9}"
                f"{r['mean']:.4f}  [{r['ci_low']:.4f}, {r['ci_high']:.4f}]"
            )
        elif r["metric"] == "positive_rate" and r["mean"] in (0.0, 1.0):
            which = "positive" if r["mean"] == 1.0 else "negative"
            print(
                f"  degenerate: {r['protection']} {r['classifier']} {r['grid']}: predicts only "
                f"the {which} class in every fold (its accuracy is the base rate, its dPar 0)"
            )
    print(f"evaluation: {paths['evaluation.html']} ({ev.seconds:.1f} s)")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    """An algorithm's parameters (type, default, range, meaning), the list of algorithms, or
    the whole reference as Markdown (``privfair.components.core.reference``)."""
    from privfair.components.core import reference
    from privfair.components.core.registry import algorithms

    chosen = [reference.named(args.algorithm)] if args.algorithm else algorithms()
    if args.markdown:
        print(reference.markdown(chosen), end="")
    elif args.algorithm is None:
        print(reference.listing(chosen))
    else:
        print(reference.describe(chosen[0]))
    return 0


def _progress_flags() -> argparse.ArgumentParser:
    """``--progress`` / ``--quiet`` of the commands that may run long (``privfair.components.core.
    progress``): phases and bars on stderr, by default only when stderr is a terminal."""
    f = argparse.ArgumentParser(add_help=False)
    g = f.add_mutually_exclusive_group()
    g.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="show phases and bars on stderr also when it is not a terminal",
    )
    g.add_argument("--quiet", dest="progress", action="store_false", help="no progress on stderr")
    return f


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="privfair",
        description="Private and fair table releases.",
        epilog="run, evaluate, validate and export show their phases (ingest, protect, "
        "validate, publish...) with elapsed time and a bar for loops over groups, blocks or "
        "folds on stderr when it is a terminal (--quiet: never; --progress or "
        "PRIVFAIR_PROGRESS=1: also into a log); stdout stays what scripts parse.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    flags = [_progress_flags()]
    r = sub.add_parser(
        "run",
        parents=flags,
        help="ingest, protect, validate and publish one release",
        description="Ingest, protect, validate and publish one release of a spec. The version id "
        "covers the input, the spec and the code: a re-run reuses a complete existing version "
        "(an incomplete one is quarantined and rebuilt) and moves `latest` to the version it "
        "produced, also when that version already existed.",
    )
    r.add_argument(
        "spec",
        help="pipeline spec (YAML, UTF-8); a relative dataset.path is taken relative to the "
        "spec file's folder",
    )
    r.add_argument(
        "--store",
        default=DEFAULT_STORE,
        help="release store: folder or pyarrow.fs URI (default: %(default)s)",
    )
    r.add_argument(
        "--data-dir",
        default=None,
        help="folder with the raw dataset files, also searched for a file dataset not found "
        "beside the spec (default: $PRIVFAIR_DATA_DIR)",
    )
    r.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a component parameter",
    )
    r.add_argument(
        "--input",
        default=None,
        metavar="FILE",
        help="release the rows of this Parquet or CSV file instead of the spec's dataset (its "
        "roles still come from the spec's dataset.columns); the version is the one an "
        "upstream asset or task handing over the same rows gets",
    )
    r.add_argument(
        "--partition",
        default=None,
        metavar="KEY",
        help="release one partition of a spec with `partitions` (a time partitioning: the ISO "
        "date its period starts on, e.g. 2026-11-02; a key partitioning: the value)",
    )
    r.add_argument(
        "--engine",
        choices=("local", "spark"),
        default=None,
        help="where the component's blocks run (default: the spec's execution.engine, else "
        "local); the release is the same either way",
    )
    r.add_argument(
        "--master",
        default=None,
        help="Spark master URL with --engine spark (default: local[<cores>]): local[N], "
        "spark://HOST:PORT, yarn, k8s://...; a spark:// master must accept a connection "
        "within 5 s and register the run within $PRIVFAIR_SPARK_CONNECT_TIMEOUT seconds "
        "(default 30)",
    )
    r.add_argument(
        "--workers",
        type=int,
        default=None,
        help="local worker processes, or the cores of the default Spark master",
    )
    r.add_argument(
        "--conf",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="a Spark setting with --engine spark (repeatable; e.g. spark.executor.memory=8g): "
        "added to the spec's execution.conf, overriding privfair's defaults "
        "(spark.driver.memory=4g, spark.sql.shuffle.partitions=8)",
    )
    r.set_defaults(fn=cmd_run)
    ev = sub.add_parser(
        "evaluate",
        parents=flags,
        help="the cost of protection: classifiers on protected vs raw training folds",
        description="Stratified folds; the component runs on the training folds only; "
        "classifiers trained on the protected and on the raw training fold are scored on the "
        "untouched test fold (accuracy, precision, recall, dPar, eOdds; mean and 95% interval).",
    )
    ev.add_argument("spec", help="pipeline spec (YAML)")
    ev.add_argument(
        "--grid",
        nargs="*",
        default=[],
        metavar="KEY=V1,V2",
        help="parameter values to sweep (each combination is evaluated)",
    )
    ev.add_argument(
        "--folds",
        type=int,
        default=5,
        help="stratified folds: at least 2, at most the rows of the smaller label class "
        "(default: %(default)s)",
    )
    ev.add_argument("--seed", type=int, default=0, help="0 to 2147483647 (default: 0)")
    ev.add_argument(
        "--classifiers",
        default="lr,rf,sgd,gnb",
        help="comma-separated, at least one, each once: lr, rf, sgd (hinge), gnb, dt, ada, "
        "mlp (default: %(default)s)",
    )
    ev.add_argument(
        "--out",
        default=None,
        help="output folder, one sub-folder per spec; release reports show the trade-off plot "
        "of the evaluation found there (default: $PRIVFAIR_EVALUATIONS, else evaluations/)",
    )
    ev.add_argument(
        "--drop-protected",
        action="store_true",
        help="leave the protected attribute out of the classifiers' features",
    )
    ev.add_argument(
        "--protect-test",
        action="store_true",
        help="score the protected arm on the test fold as the component publishes it "
        "(row-level algorithms: rows mapped back through the lineage)",
    )
    ev.add_argument("--data-dir", default=None)
    ev.set_defaults(fn=cmd_evaluate)

    v = sub.add_parser(
        "validate", parents=flags, help="re-check a published release from its files"
    )
    v.add_argument(
        "release",
        help="release folder <store>/<pipeline>/<version>, or <store>/<pipeline>/latest",
    )
    v.add_argument("--data-dir", default=None)
    v.set_defaults(fn=cmd_validate)
    x = sub.add_parser(
        "export",
        parents=flags,
        help="write the shareable copy of a release (what may be handed out) to a folder",
        description="Copy a release's shareable copy (its public outputs, public manifest and "
        "public report; no sidecar, input fingerprint, input-side metric or check detail) to "
        "DEST, which must not exist or be empty. The copy is checked against its own manifest's "
        "checksums before and after; the owner's release is left as it is.",
    )
    x.add_argument("release", help="<store>/<pipeline>/<version>, or <store>/<pipeline>/latest")
    x.add_argument("dest", help="destination folder (created)")
    x.set_defaults(fn=cmd_export)
    vf = sub.add_parser(
        "verify",
        help="check an exported shareable copy against its manifest",
        description="Check that every file of a shareable copy matches its manifest's checksum "
        "(and no other file is there), then print the verdicts it carries. Exit 2 when it does "
        "not match.",
    )
    vf.add_argument("copy", help="the exported folder")
    vf.set_defaults(fn=cmd_verify)
    ls = sub.add_parser(
        "releases",
        help="list published releases and quarantined candidates",
        description="List the published releases (`latest` marked) and the quarantined "
        "candidates (marked as such). A store that does not exist has no releases: the "
        "command says so and exits 0, creating nothing.",
    )
    ls.add_argument("pipeline", nargs="?", default=None, help="only this pipeline's releases")
    ls.add_argument("--store", default=DEFAULT_STORE)
    ls.add_argument("--json", action="store_true")
    ls.add_argument(
        "--current",
        action="store_true",
        help="each partition's current release: the version `latest` names when it is of that "
        "partition, else its newest (privfair.api.current reads them as one table)",
    )
    ls.set_defaults(fn=cmd_releases)
    pr = sub.add_parser(
        "promote",
        help="point `latest` at an existing, complete release",
        description="Point a pipeline's `latest` at an existing release, after checking it is "
        "complete (manifest readable, every file present with its recorded checksum). Give "
        "<store>/<pipeline>/<version>, or PIPELINE VERSION with --store.",
    )
    pr.add_argument("release", help="<store>/<pipeline>/<version>, or a pipeline name")
    pr.add_argument("version", nargs="?", default=None, help="version (with a pipeline name)")
    pr.add_argument("--store", default=DEFAULT_STORE)
    pr.set_defaults(fn=cmd_promote)
    bu = sub.add_parser(
        "budget",
        help="show the privacy-budget ledger: spent and remaining per dataset and block",
        description="The ledger's entries per dataset, privacy unit and block: the composed "
        "zCDP rho spent (and its OpenDP epsilon at the declared budget's delta), the entries "
        "by status (reserved, published, quarantined and failed count; refused does not), and "
        "what remains of the dataset's cap. The ledger: --ledger, else $PRIVFAIR_LEDGER, "
        "else the data owner's own ($XDG_STATE_HOME/privfair/ledger.sqlite), whatever the "
        "store. --set-cap SPEC records a new cap for SPEC's dataset (a spec cannot raise it).",
    )
    bu.add_argument(
        "--store",
        default=DEFAULT_STORE,
        help="accepted for older scripts: one ledger spans every store",
    )
    bu.add_argument(
        "--set-cap", default=None, metavar="SPEC", help="record a new cap for SPEC's dataset"
    )
    bu.add_argument("--epsilon", type=float, default=None)
    bu.add_argument("--delta", type=float, default=None)
    bu.add_argument("--rho", type=float, default=None)
    bu.add_argument("--per", choices=("partition", "dataset"), default="partition")
    bu.add_argument("--data-dir", default=None)
    bu.add_argument("--ledger", default=None, help="ledger URL (sqlite:///PATH, postgresql://...)")
    bu.add_argument("--dataset", default=None, help="only this dataset's entries")
    bu.add_argument("--json", action="store_true")
    bu.set_defaults(fn=cmd_budget)
    de = sub.add_parser(
        "describe",
        help="an algorithm's parameters: type, default, range and meaning",
        description="Without ALGO, list the algorithms and their parameters; with ALGO, each "
        "parameter's type, default, range and meaning, from its Params model. --markdown "
        "prints the reference page (components/PARAMETERS.md).",
    )
    de.add_argument("algorithm", nargs="?", default=None, metavar="ALGO")
    de.add_argument("--markdown", action="store_true", help="the reference as Markdown")
    de.set_defaults(fn=cmd_describe)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one command: exit 0 done, 1 a guarantee failed, 2 bad input, spec, store or
    environment (an optional package not installed included), 3 an internal error: one line
    naming the phase and the log holding the traceback (``privfair.crashlog``)."""
    from privfair import crashlog
    from privfair.components.core.progress import reporting
    from privfair.extras import missing_extra

    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    trail = crashlog.Trail()
    try:
        with (
            reporting(sys.stderr, getattr(args, "progress", None)) as shown,
            trail.watching(shown),
        ):
            return args.fn(args)
    except ContractViolation as e:
        print(f"privfair: release not published: {e}", file=sys.stderr)
        return 1
    except PrivfairError as e:
        print(f"privfair: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001  (not raised on purpose: never a traceback, exit 1)
        missing = missing_extra(e)
        if missing is not None:
            print(f"privfair: error: {missing}", file=sys.stderr)
            return 2
        print(crashlog.report(e, trail, args.command, argv), file=sys.stderr)
        return 3


def entry() -> NoReturn:
    """The ``privfair`` command: ``main`` on ``sys.argv``, then ``leave``, in a process that is
    privfair's alone (``privfair.validation.gx_import.own_the_process``). Tests and scripts call
    ``main`` itself, which returns the exit code and leaves the collector and the imports
    alone."""
    from privfair.validation.gx_import import own_the_process

    own_the_process()
    leave(main())


if __name__ == "__main__":
    entry()
