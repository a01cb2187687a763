"""Why Greedy-PreFair's DP and CDP fall further on our Adult runs than in PreFair's Table 3
(ours 34-53 %, paper 64.4 / 64.8 %): the same synthetic tables scored under our protocol and
under the authors' (spec ``prefair.md`` section 6.1, from their notebooks [R]).

Usage (from the repository root)::

    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/reproduce_prefair_dp.py   # ~8 min
    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/reproduce_prefair_dp.py --seeds 1

Per (seed, fold) of ``evaluate``'s stratified folds, MST and Greedy-PreFair (the specs of
``reproduce_prefair.py``: ``adult_prefair.yaml`` and its MST twin) synthesise the training
fold once; the same two synthetic tables are then scored by two classifiers, each on two test
sets, so each factor is isolated on identical releases:

- classifier *ours*: ``evaluate``'s ``mlp`` (scikit-learn ``MLPClassifier((20, 20))``) on
  standardised numerics and one-hot nominals;
- classifier *authors'*: their Keras MLP emulated with scikit-learn (Dense 20-20-10-5, ReLU,
  Adam, batch 50, 20 epochs) on **integer codes** of every non-outcome column, unscaled (the
  rank of a value among the column's public values), as their notebook feeds it;
- test set *fold*: the untouched real test fold (ours); *whole*: the entire real table, the
  authors' (no held-out split: the rows the synthesiser saw are scored too).

Preparation (the authors' 14 attributes with fnlwgt in 100 admissible bins; ours has 13, no
fnlwgt) cannot be varied here: our Adult file has no fnlwgt. Writes
``benchmarks/results/results_reproduce_prefair_dp.md``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from harness import result  # noqa: E402
from reproduce_prefair import Recorder, datasets, ratio, snap_to_bins  # noqa: E402

from privfair.components.core.inputs import group_indicator, outcome_indicator  # noqa: E402
from privfair.components.core.metrics import fairness_measures  # noqa: E402
from privfair.evaluation.evaluate import (  # noqa: E402
    Features,
    admissible_strata,
    make_classifier,
    stratified_folds,
)
from privfair.schemas.roles import read_roles  # noqa: E402
from privfair.spec.catalogue import algorithm_of  # noqa: E402

OUT = result("results_reproduce_prefair_dp.md")
PAPER = {"dp": 64.4, "cdp_reference": 64.8}
CLASSIFIERS = ("ours", "authors")
TESTS = ("fold", "whole")


class IntegerCodes:
    """The authors' features: every column as the integer rank of its value among the real
    table's distinct values (nominal: sorted levels; a synthetic value between two real ones
    takes the rank of the next), unscaled."""

    def __init__(self, table: pa.Table, columns: list[str]) -> None:
        self.columns = columns
        self.domains = {
            c: np.unique(np.asarray(table.column(c).to_pylist(), dtype=object).astype(str))
            if not _numeric(table, c)
            else np.unique(table.column(c).to_numpy(zero_copy_only=False).astype(float))
            for c in columns
        }

    def transform(self, table: pa.Table) -> np.ndarray:
        cols = []
        for c in self.columns:
            dom = self.domains[c]
            if dom.dtype.kind == "f":
                x = table.column(c).to_numpy(zero_copy_only=False).astype(float)
            else:
                x = np.asarray(table.column(c).to_pylist(), dtype=object).astype(str)
            cols.append(np.searchsorted(dom, x).astype(float))
        return np.stack(cols, 1)


def _numeric(table: pa.Table, c: str) -> bool:
    t = table.schema.field(c).type
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def authors_mlp(seed: int):
    from sklearn.neural_network import MLPClassifier

    return MLPClassifier(
        hidden_layer_sizes=(20, 20, 10, 5),
        activation="relu",
        solver="adam",
        batch_size=50,
        max_iter=20,
        random_state=seed,
    )


def measures(pred: np.ndarray, y: np.ndarray, s: np.ndarray, strata: np.ndarray) -> dict:
    m = fairness_measures(s, pred, y=y, strata=strata)
    return {
        "dp": float(m["dp"]),
        "cdp_reference": float(m["cdp_reference"]),
        "accuracy": float(np.mean(pred == y)),
    }


def run(seeds: list[int], folds: int, say) -> list[dict]:
    ds = datasets(["adult"])[0]
    table = ds.table
    roles = read_roles(table)
    y = outcome_indicator(table.column(ds.label), roles[ds.label]).astype(bool)
    s = group_indicator(table.column(ds.protected), roles[ds.protected])
    feats = [c for c in table.column_names if c != ds.label]
    codes = IntegerCodes(table, feats)
    whole = (codes.transform(table), y, s, admissible_strata(table))
    rows = []
    for seed in seeds:
        for k, (tr, te) in enumerate(stratified_folds(y, s, folds, seed)):
            train, test = table.take(pa.array(tr)), table.take(pa.array(te))
            enc = Features.fit(train, feats)
            x_test = {"ours": enc.transform(test), "authors": codes.transform(test)}
            x_whole = {"ours": enc.transform(table), "authors": whole[0]}
            st_test = admissible_strata(test)
            for arm in ("mst", "greedy"):
                spec = ds.specs[arm]
                t0 = time.perf_counter()
                rec = Recorder(
                    algorithm_of(spec),
                    lambda t, p=spec.params: snap_to_bins(t, p),
                    ds.protected,
                    ds.label,
                )
                rec.start(seed)
                syn = rec(train, spec.params)
                r_syn = read_roles(syn)
                y_syn = outcome_indicator(syn.column(ds.label), r_syn[ds.label]).astype(bool)
                fitted = {
                    "ours": make_classifier("mlp", seed + k).fit(enc.transform(syn), y_syn),
                    "authors": authors_mlp(seed + k).fit(codes.transform(syn), y_syn),
                }
                for clf, model in fitted.items():
                    for test_set, x, yy, ss, stt in (
                        ("fold", x_test[clf], y[te], s[te], st_test),
                        ("whole", x_whole[clf], y, s, whole[3]),
                    ):
                        pred = model.predict(x).astype(bool)
                        rows.append(
                            {
                                "seed": seed,
                                "fold": k,
                                "arm": arm,
                                "clf": clf,
                                "test": test_set,
                                "synthetic_dp": rec.runs[-1]["synthetic_dp"],
                            }
                            | measures(pred, yy, ss, stt)
                        )
                say(f"seed {seed} fold {k} {arm}: {time.perf_counter() - t0:.0f} s")
    return rows


def render(rows: list[dict], meta: str) -> str:
    L = [
        "# PreFair Table 3, Adult: why our DP and CDP ratios fall below the paper's",
        "",
        meta,
        "",
        "Same synthetic tables in every column (paired); 100 x mean(Greedy) / mean(MST) "
        "[95 % paired bootstrap]. Absolute values are means over the runs (MST -> Greedy). "
        "Paper: DP 64.4, CDP 64.8 (authors' notebook: DP 0.0564 -> 0.0364, CDP 0.0850 -> "
        "0.0551, MLP on integer codes, whole-table test).",
        "",
        "| classifier, features | test set | DP ratio | CDP ratio | DP (abs) | CDP (abs) | "
        "accuracy (MST, Greedy) |",
        "|---|---|---|---|---|---|---|",
    ]
    for clf in CLASSIFIERS:
        for test in TESTS:
            sel = [r for r in rows if r["clf"] == clf and r["test"] == test]
            g = [r for r in sel if r["arm"] == "greedy"]
            m = [r for r in sel if r["arm"] == "mst"]
            cells = []
            for key in ("dp", "cdp_reference"):
                gv = np.array([r[key] for r in g])
                mv = np.array([r[key] for r in m])
                v, lo, hi = ratio(gv, mv, f"dp-explain-{clf}-{test}-{key}")
                cells.append(f"{v:.1f} [{lo:.1f}, {hi:.1f}]")
            absl = [
                f"{np.mean([r[key] for r in m]):.4f} -> {np.mean([r[key] for r in g]):.4f}"
                for key in ("dp", "cdp_reference")
            ]
            acc = f"{np.mean([r['accuracy'] for r in m]):.3f}, {np.mean([r['accuracy'] for r in g]):.3f}"
            name = (
                "evaluate's MLP (20, 20), one-hot"
                if clf == "ours"
                else "authors' MLP (20-20-10-5, 20 epochs), integer codes"
            )
            L.append(
                f"| {name} | {test} | {cells[0]} | {cells[1]} | {absl[0]} | {absl[1]} | {acc} |"
            )
    syn = {
        a: np.mean(
            [
                r["synthetic_dp"]
                for r in rows
                if r["arm"] == a and r["clf"] == "ours" and r["test"] == "fold"
            ]
        )
        for a in ("mst", "greedy")
    }
    L += [
        "",
        f"DP of the synthetic labels themselves (mean): MST {syn['mst']:.4f}, "
        f"Greedy {syn['greedy']:.4f} ({100 * syn['greedy'] / syn['mst']:.1f} %).",
    ]
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2, help="evaluate seeds 0 .. N-1")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")  # the 20-epoch MLP stops before it converges, as theirs
    t0 = time.perf_counter()
    rows = run(list(range(args.seeds)), args.folds, lambda m: print(m, file=sys.stderr, flush=True))
    meta = (
        "Command: `PRIVFAIR_DATA_DIR=../shared/data uv run python "
        f"benchmarks/reproduce_prefair_dp.py --seeds {args.seeds} --folds {args.folds}` "
        f"({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {time.perf_counter() - t0:.0f} s; "
        f"{args.seeds} x {args.folds} = {args.seeds * args.folds} synthetic tables per method, "
        "epsilon = 1)."
    )
    text = render(rows, meta)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
