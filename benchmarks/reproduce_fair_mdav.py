"""Fair-MDAV's Tables 3-5 (Income = UCI Adult) re-run with ``privfair evaluate``: our numbers
beside the paper's, same 5 stratified folds for every row.

Usage (from the repository root)::

    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/reproduce_fair_mdav.py   # ~10 min

Each row: Fair-MDAV on the training folds (spec ``adult_fair_mdav.yaml`` with the row's
overrides), the classifier trained on its output and scored on the untouched fold; the "none"
arm (raw training fold) is reported once per classifier. Whether the protected attribute is a
feature is not stated in the paper (Fair-MDAV spec A11): both are run. Microaggregated rows are
also scored on a protected test fold (``--protect-test``: Fair-MDAV run on the test fold, rows
mapped back to their true labels through the lineage). Results:
``benchmarks/results_reproduce_fair_mdav.md``.

Every row here uses the setting the paper's text suggests (fairlets, positive correction,
tau = 1). ``reproduce_fair_mdav_protocols.py`` settles which settings the paper's rows really
come from (the authors' own result file: negative correction, other tau, MDAV groups) and shows
that the untouched raw test fold with the PA among the features is the protocol that fits; the
protected-test reading this script first suggested does not.
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pipelines.catalogue import load_spec, with_params  # noqa: E402
from pipelines.evaluate import evaluate  # noqa: E402
from pipelines.flow import ingest  # noqa: E402

# (table, setting, overrides, classifier, paper fairness metric, paper value, paper accuracy)
ROWS = [
    ("3", "k = 10 (t = 0.05)", {"k": 10}, "lr", "dpar", 0.02, 0.79),
    ("3", "k = 20 (t = 0.019)", {"k": 20}, "lr", "dpar", 0.04, 0.79),
    ("3", "k = 100", {"k": 100}, "lr", "dpar", 0.05, 0.78),
    ("4", "no microaggregation", {"k": 10, "microaggregate": False}, "lr", "dpar", 0.01, 0.80),
    ("4", "no microaggregation", {"k": 10, "microaggregate": False}, "dt", "dpar", 0.09, 0.76),
    ("5", "k = 10", {"k": 10}, "lr", "eodds", 0.05, 0.85),
    ("5", "k = 10", {"k": 10}, "ada", "eodds", 0.22, 0.85),
]


def main() -> None:
    base = load_spec(HERE.parent / "pipelines" / "specs" / "adult_fair_mdav.yaml")
    table = ingest(base).table
    lines = [
        f"# Fair-MDAV Tables 3-5 on Adult ({dt.date.today()}, 5 stratified folds, seed 0)",
        "",
        "Command: `PRIVFAIR_DATA_DIR=../shared/data uv run python "
        "benchmarks/reproduce_fair_mdav.py`. Mean over folds [95 % interval].",
        "",
        "| table | setting | clf | PA in features | test fold | ours: fairness | ours: accuracy | "
        "none: fairness | none: accuracy | paper |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for tab, setting, overrides, clf, metric, p_fair, p_acc in ROWS:
        spec = with_params(base, overrides)
        tests = (False, True) if overrides.get("microaggregate", True) else (False,)
        for drop, protect in ((d, p) for p in tests for d in (False, True)):
            ev = evaluate(
                spec,
                table,
                folds=5,
                seed=0,
                classifiers=[clf],
                drop_protected=drop,
                protect_test=protect,
                progress=lambda m: print(m, file=sys.stderr),
            )
            got = {(r["protection"], r["metric"]): r for r in ev.summary.to_pylist()}

            def cell(prot, m, got=got):
                r = got[(prot, m)]
                return f"{r['mean']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"

            lines.append(
                f"| {tab} | {setting} | {clf} | {'no' if drop else 'yes'} | "
                f"{'protected' if protect else 'raw'} | "
                f"{metric} {cell('fair_mdav', metric)} | {cell('fair_mdav', 'accuracy')} | "
                f"{cell('none', metric)} | {cell('none', 'accuracy')} | "
                f"{metric} {p_fair}, accuracy {p_acc} |"
            )
            print(lines[-1], file=sys.stderr)
    out = HERE / "results_reproduce_fair_mdav.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
