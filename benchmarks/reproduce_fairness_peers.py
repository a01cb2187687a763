"""Fair-MDAV beside fairlearn and AIF360 fairness interventions, all on the same folds.

Usage (from the repository root)::

    PRIVFAIR_DATA_DIR=../shared/data nice -n 10 uv run python \
        benchmarks/reproduce_fairness_peers.py [--datasets adult,compas,german] [--quick]

Per dataset (the spec ``pipelines/specs/<dataset>_fair_mdav.yaml``, ingested as privfair
ingests it):

1. The folds of ``privfair.evaluation.evaluate.evaluate`` (``_folds``: stratified on label x protected
   group, 5 folds, seed 0). Per fold, the features are ``Features.fit(raw training fold)``
   applied to both folds, protected attribute included (its columns are recorded, and the
   "PA dropped" matrix is the same matrix without them, checked equal to an encoding fitted
   without it). Written as ``<tmp>/<dataset>/fold<k>.npz`` (``X_train``, ``y_train``,
   ``s_train``, ``X_test``, ``y_test``, ``s_test``, ``pa_cols``, ``test_idx``).
2. ``benchmarks/peers/run_fairness_peers.py`` run on that folder in its OWN throwaway
   environment (``uv run --isolated --no-project`` with pinned fairlearn, aif360,
   scikit-learn, pandas, numpy; never this project's lock): LR alone ("none"), fairlearn
   ``CorrelationRemover`` + LR, fairlearn ``ThresholdOptimizer`` (demographic parity) over LR,
   AIF360 ``Reweighing`` weights + LR.
3. Our Fair-MDAV through ``evaluate`` on the same folds, LR, k=10, tau=1: microaggregated
   (raw test fold, and ``protect_test=True``) and ``microaggregate: false`` (the paper's
   fairness-only mode), each with the protected attribute in and dropped.
4. The peers' "none" arm cross-checked against ``evaluate``'s "none" arm fold by fold.

``--quick`` skips step 3 (the expensive one; the "none" cross-check then uses ``evaluate``
with an identity component) and writes its results to the temporary folder instead of
``benchmarks/results/results_fairness_peers.{md,json}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from harness import HERE, RESULTS, ROOT, spec_file

from privfair.components.core.inputs import group_indicator, outcome_indicator
from privfair.evaluation.evaluate import (
    Features,
    evaluate,
    label_and_protected,
    mean_interval,
    stratified_folds,
)
from privfair.run.flow import ingest
from privfair.spec.catalogue import load_spec, with_params

FOLDS = 5
SEED = 0
PEER_PYTHON = "3.11"
PEER_PACKAGES = {
    "fairlearn": "0.15.0",
    "aif360": "0.6.1",
    "scikit-learn": "1.9.1",
    "pandas": "3.1.1",
    "numpy": "2.4.6",
}
# evaluate's _score has more measures (TPRB, TNRB, ...); the peers compute these five
METRICS = ("dpar", "eodds", "accuracy", "precision", "recall")
PEER_SCRIPT = HERE / "peers" / "run_fairness_peers.py"
# (row name, Fair-MDAV overrides, protect_test)
FAIR_MDAV = [
    ("fair_mdav (ma on)", {"k": 10, "tau": 1.0, "microaggregate": True}, False),
    ("fair_mdav (ma on)", {"k": 10, "tau": 1.0, "microaggregate": True}, True),
    ("fair_mdav (ma off)", {"k": 10, "tau": 1.0, "microaggregate": False}, False),
]
PEER_NAMES = {
    "none": "none",
    "correlation_remover": "CorrelationRemover + LR",
    "threshold_optimizer": "ThresholdOptimizer (DP) + LR",
    "reweighing": "Reweighing + LR",
}
LABELS = {"dpar": "dPar", "eodds": "eOdds"}


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def export(name: str, table: pa.Table, out: Path) -> dict:
    """Write the folds of ``evaluate`` with their ``Features`` encoding to ``out/name``."""
    label, prot = label_and_protected(table)
    y = outcome_indicator(table.column(label.name), label)
    s = group_indicator(table.column(prot.name), prot)
    features = [c for c in table.column_names if c != label.name]
    dropped = [c for c in features if c != prot.name]
    (out / name).mkdir(parents=True, exist_ok=True)
    widths: list[int] = []
    for k, (train_idx, test_idx) in enumerate(stratified_folds(y, s, FOLDS, SEED)):
        train = table.take(pa.array(train_idx))
        test = table.take(pa.array(test_idx))
        enc = Features.fit(train, features)
        widths = [1 if c in enc.numeric else len(enc.levels[c]) for c in features]
        start = int(np.sum(widths[: features.index(prot.name)]))
        pa_cols = np.arange(start, start + widths[features.index(prot.name)])
        x_train, x_test = enc.transform(train), enc.transform(test)
        enc_dropped = Features.fit(train, dropped)
        for raw, x in ((train, x_train), (test, x_test)):
            if not np.array_equal(enc_dropped.transform(raw), np.delete(x, pa_cols, axis=1)):
                raise AssertionError(f"{name} fold {k}: PA-dropped encoding differs")
        np.savez(
            out / name / f"fold{k}.npz",
            X_train=x_train,
            y_train=y[train_idx],
            s_train=s[train_idx],
            X_test=x_test,
            y_test=y[test_idx],
            s_test=s[test_idx],
            pa_cols=pa_cols,
            test_idx=test_idx,
        )
    return {
        "name": name,
        "folds": FOLDS,
        "rows": table.num_rows,
        "label": label.name,
        "protected": prot.name,
        "protected_share": float(s.mean()),
        "positive_share": float(y.mean()),
        "encoded_columns": int(sum(widths)),
        "pa_columns": int(len(pa_cols)),
    }


def run_peers(work: Path) -> tuple[dict, float, list[str]]:
    """Run the peer script in its own isolated uv environment; (its JSON, wall s, command)."""
    uv = shutil.which("uv") or "uv"
    cmd = [uv, "run", "--isolated", "--no-project", "--python", PEER_PYTHON]
    for package, v in PEER_PACKAGES.items():
        cmd += ["--with", f"{package}=={v}"]
    cmd += ["python", str(PEER_SCRIPT), str(work)]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    say("peers: " + " ".join(cmd))
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, env=env)
    seconds = time.perf_counter() - t0
    peers = json.loads((work / "peers.json").read_text())
    if peers["meta"]["project_venv_on_path"]:
        raise RuntimeError("the peer environment sees the project's .venv (use --isolated)")
    return peers, seconds, cmd


def per_fold(rows: list[dict], protection: str) -> dict[str, list[float]]:
    """{metric: values in fold order} of one protection in ``Evaluation.folds`` rows."""
    out: dict[str, list[float]] = {}
    for r in sorted(rows, key=lambda r: r["fold"]):
        if r["protection"] == protection and r["metric"] in METRICS:
            out.setdefault(r["metric"], []).append(float(r["value"]))
    return out


def summary(values: dict[str, list[float]]) -> dict[str, list[float]]:
    return {m: list(mean_interval(values[m])) for m in METRICS}


def run_dataset(name: str, table: pa.Table, spec, quick: bool) -> tuple[list[dict], list[dict]]:
    """Our arms through ``evaluate``: (method entries, "none" arms for the cross-check)."""
    entries: list[dict] = []
    nones: list[dict] = []
    configs = [] if quick else FAIR_MDAV
    for row, overrides, protect in configs:
        for drop in (False, True):
            ev = evaluate(
                with_params(spec, overrides),
                table,
                folds=FOLDS,
                seed=SEED,
                classifiers=["lr"],
                drop_protected=drop,
                protect_test=protect,
                progress=say,
            )
            rows = ev.folds.to_pylist()
            values = per_fold(rows, "fair_mdav")
            entries.append(
                {
                    "method": row,
                    "source": "privfair evaluate",
                    "pa": "dropped" if drop else "in",
                    "test": "protected" if protect else "raw",
                    "params": overrides,
                    "seconds": ev.seconds,
                    "folds": values,
                    "summary": summary(values),
                }
            )
            nones.append({"pa": "dropped" if drop else "in", "folds": per_fold(rows, "none")})
            say(
                f"{name} {row} pa={'dropped' if drop else 'in'} test={entries[-1]['test']}: "
                f"dpar {entries[-1]['summary']['dpar'][0]:.4f} ({ev.seconds:.0f} s)"
            )
    if quick:
        for drop in (False, True):
            ev = evaluate(
                spec,
                table,
                folds=FOLDS,
                seed=SEED,
                classifiers=["lr"],
                drop_protected=drop,
                apply=lambda train, params: train,
                progress=say,
            )
            nones.append(
                {"pa": "dropped" if drop else "in", "folds": per_fold(ev.folds.to_pylist(), "none")}
            )
    return entries, nones


def peer_entries(name: str, rows: list[dict]) -> list[dict]:
    entries = []
    for method in PEER_NAMES:
        for pa_mode in ("in", "dropped"):
            mine = sorted(
                (
                    r
                    for r in rows
                    if (r["dataset"], r["method"], r["pa"]) == (name, method, pa_mode)
                ),
                key=lambda r: r["fold"],
            )
            if not mine:
                continue
            values = {m: [float(r[m]) for r in mine] for m in METRICS}
            entries.append(
                {
                    "method": PEER_NAMES[method],
                    "source": "peer" if method != "none" else "peer (LR alone)",
                    "pa": pa_mode,
                    "test": "raw",
                    "params": {},
                    "seconds": float(sum(r["seconds"] for r in mine)),
                    "folds": values,
                    "summary": summary(values),
                    "extra": [r["extra"] for r in mine],
                }
            )
    return entries


def crosscheck(peer_rows: list[dict], name: str, nones: list[dict]) -> dict[str, float]:
    """Largest |peer "none" - evaluate "none"| over folds and metrics, per PA setting."""
    out: dict[str, float] = {}
    for arm in nones:
        mine = sorted(
            (
                r
                for r in peer_rows
                if (r["dataset"], r["method"], r["pa"]) == (name, "none", arm["pa"])
            ),
            key=lambda r: r["fold"],
        )
        diff = max(
            float(np.max(np.abs(np.array([r[m] for r in mine]) - np.array(arm["folds"][m]))))
            for m in METRICS
        )
        out[f"pa={arm['pa']}"] = max(out.get(f"pa={arm['pa']}", 0.0), diff)
    return out


def cell(s: list[float]) -> str:
    m, lo, hi = s
    return f"{m:.3f} [{lo:.3f}, {hi:.3f}]"


def markdown(result: dict) -> str:
    meta = result["peers"]["meta"]
    lines = [
        f"# Fair-MDAV beside fairlearn / AIF360 on the same folds ({result['date']})",
        "",
        f"Command: `{result['command']}`",
        "",
        f"Folds: `privfair.evaluation.evaluate.stratified_folds` (stratified on label x protected group), {FOLDS} "
        f"folds, seed {SEED}; every method is trained on the training fold and scored on the "
        "untouched test fold (except the `protected` test-fold row: Fair-MDAV also applied to "
        "the test fold, rows scored against their true label and group). Features: "
        "`Features` fitted on the raw training fold (numeric standardised, nominal one-hot), "
        "with the protected attribute (PA) in or dropped. Base classifier everywhere: "
        "`LogisticRegression(max_iter=1000)`. Cells: mean over the folds [95 % t-interval]. "
        "dPar = |P(y^=1 | protected) - P(y^=1 | unprotected)|, eOdds = |TPR diff| + |TNR diff|.",
        "",
        "Fair-MDAV: `pipelines/specs/<dataset>_fair_mdav.yaml` with k=10, tau=1 through "
        "`privfair.evaluation.evaluate.evaluate` (classifier `lr`); `ma on` = `microaggregate: true`, "
        "`ma off` = `microaggregate: false` (QIs published as they are, labels corrected: the "
        "paper's fairness-only mode). Peers: `benchmarks/peers/run_fairness_peers.py` (fairlearn "
        "`CorrelationRemover(alpha=1)` on the PA columns, or on s appended when the PA is "
        "dropped, so both rows are the same model; `ThresholdOptimizer(constraints="
        '"demographic_parity", predict_method="predict_proba", prefit=False)` predicting with '
        "the test fold's group and `random_state` = fold; AIF360 `Reweighing` with the "
        "unprotected group privileged, its weights as the LR's `sample_weight`).",
        "",
        f"Peer command: `{result['peer_command']}`",
        "",
        f"Peers ran in their own environment (`uv run --isolated --no-project`): Python "
        f"{meta['python']}, "
        + ", ".join(f"{p} {v}" for p, v in meta["versions"].items())
        + f"; project venv on the peers' path: {meta['project_venv_on_path']}. Peer run "
        f"(environment set-up included): {result['peer_seconds']:.0f} s. Our env: "
        f"{result['ours']}. Machine: {result['machine']}.",
        "",
        "Time: peers, fit + predict summed over the 5 folds; Fair-MDAV, the whole `evaluate` "
        "call (encoding, the LR on the raw fold, Fair-MDAV on every training fold, the LR on "
        "its output; for the protected test fold also Fair-MDAV on every test fold). Wall "
        "times on a shared 2-core machine (see the load above): indicative only.",
        "",
    ]
    for name, ds in result["datasets"].items():
        check = ", ".join(f"{k} {v:.1e}" for k, v in ds["crosscheck_none"].items())
        lines += [
            f"## {name} ({ds['rows']:,} rows; label `{ds['label']}`, PA `{ds['protected']}`, "
            f"protected share {ds['protected_share']:.3f}; {ds['encoded_columns']} encoded "
            "columns)",
            "",
            f"Cross-check: the peers' `none` equals `evaluate`'s `none` arm on the same folds to "
            f"max |diff| over folds and metrics = {check} ({ds['crosscheck_runs']} evaluate "
            "runs compared).",
            "",
            "| method | PA in features | test fold | dPar | eOdds | accuracy | precision | "
            "recall | time (s) |",
            "|---|---|---|---|---|---|---|---|---:|",
        ]
        for e in ds["methods"]:
            lines.append(
                f"| {e['method']} | {'yes' if e['pa'] == 'in' else 'no'} | {e['test']} | "
                + " | ".join(cell(e["summary"][m]) for m in METRICS)
                + f" | {e['seconds']:.1f} |"
            )
        lines.append("")
    return "\n".join(lines)


def order(entries: list[dict]) -> list[dict]:
    names = ["none", "fair_mdav (ma on)", "fair_mdav (ma off)", *list(PEER_NAMES.values())[1:]]
    return sorted(
        entries,
        key=lambda e: (e["pa"] != "in", names.index(e["method"]), e["test"] != "raw"),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="adult,compas,german")
    ap.add_argument("--quick", action="store_true", help="peers and the cross-check only")
    ap.add_argument("--work-dir", type=Path, default=None, help="default: a temporary folder")
    ap.add_argument("--out", type=Path, default=None, help="results prefix (.md and .json)")
    args = ap.parse_args()

    load_start = os.getloadavg()[0]
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="fairness_peers_"))
    work.mkdir(parents=True, exist_ok=True)
    out = args.out or (work if args.quick else RESULTS) / "results_fairness_peers"
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    specs, tables, exported = {}, {}, []
    for name in names:
        specs[name] = load_spec(spec_file(f"{name}_fair_mdav"))
        tables[name] = ingest(specs[name]).table
        exported.append(export(name, tables[name], work))
        say(f"{name}: {tables[name].num_rows} rows exported to {work / name}")
    (work / "manifest.json").write_text(json.dumps({"seed": SEED, "datasets": exported}, indent=1))

    peers, peer_seconds, peer_cmd = run_peers(work)

    import sklearn

    result: dict = {
        "date": dt.date.today().isoformat(),
        "command": "PRIVFAIR_DATA_DIR=../shared/data nice -n 10 uv run python "
        "benchmarks/reproduce_fairness_peers.py " + " ".join(sys.argv[1:]),
        "peer_command": " ".join(["uv", *peer_cmd[1:]]).replace(str(ROOT) + "/", ""),
        "machine": f"{os.cpu_count()} cores, 1-min load {load_start:.1f} at start",
        "ours": f"Python {sys.version.split()[0]}, scikit-learn {sklearn.__version__}, "
        f"numpy {np.__version__}",
        "peer_seconds": peer_seconds,
        "peers": {"meta": peers["meta"]},
        "datasets": {},
    }
    for ds in exported:
        name = ds["name"]
        ours, nones = run_dataset(name, tables[name], specs[name], args.quick)
        result["datasets"][name] = {
            **ds,
            "crosscheck_none": crosscheck(peers["rows"], name, nones),
            "crosscheck_runs": len(nones),
            "methods": order(ours + peer_entries(name, peers["rows"])),
        }
        say(f"{name}: cross-check {result['datasets'][name]['crosscheck_none']}")
    result["machine"] += f", {os.getloadavg()[0]:.1f} at end"
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(result) + "\n")
    print(markdown(result))
    say(f"wrote {out.with_suffix('.md')} and {out.with_suffix('.json')}; folds in {work}")
    if args.work_dir is None and not args.quick:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
