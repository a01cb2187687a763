"""Fairness-intervention peers of Fair-MDAV (fairlearn, AIF360) on the folds privfair exports.

Standalone on purpose: this script imports only the standard library, numpy, pandas,
scikit-learn and the peers, never privfair. Its input is the folder that
``benchmarks/reproduce_fairness_peers.py`` writes from OUR environment: ``manifest.json`` and,
per dataset and fold, ``<dataset>/fold<k>.npz`` holding ``X_train``, ``y_train``, ``s_train``,
``X_test``, ``y_test``, ``s_test`` and ``pa_cols``. The features are privfair's
``privfair.evaluation.evaluate.Features`` encoding fitted on the raw training fold (numeric columns
standardised, nominal ones one-hot), protected attribute included; ``pa_cols`` are the
indices of the protected attribute's columns, deleted for the "PA dropped" run. ``y`` is the
favourable outcome, ``s`` membership of the protected (unfavoured) group; the folds are
``privfair.evaluation.evaluate.stratified_folds`` (stratified on label x group, 5 folds, seed 0). Run it in its
own throwaway environment (``--isolated``: a plain ``--no-project --with`` would put the
project's ``.venv`` under the overlay; ``meta.project_venv_on_path`` must be false)::

    uv run --isolated --no-project --python 3.11 --with fairlearn==0.15.0 \
        --with aif360==0.6.1 --with scikit-learn==1.9.1 --with pandas==3.1.1 \
        --with numpy==2.4.6 python benchmarks/peers/run_fairness_peers.py DIR [--out FILE]

Per dataset, fold and feature set (``pa`` = ``in`` / ``dropped``), with
``LogisticRegression(max_iter=1000)`` as the base estimator, fitted on the training fold and
scored on the test fold:

* ``none``: the LR alone (must equal privfair's ``evaluate`` "none" arm on the same folds).
* ``correlation_remover``: fairlearn ``CorrelationRemover(sensitive_feature_ids=..., alpha=1)``
  fitted on the training features, applied to both folds, then the LR. With ``pa=in`` the
  sensitive ids are ``pa_cols``; with ``pa=dropped`` ``s`` is appended as the only sensitive
  column. Either way the sensitive columns are removed and the rest decorrelated from them.
* ``threshold_optimizer``: fairlearn ``ThresholdOptimizer(estimator=LR,
  constraints="demographic_parity", predict_method="predict_proba", prefit=False)`` fitted
  with ``sensitive_features=s_train``; ``predict(X_test, sensitive_features=s_test,
  random_state=seed + fold)``.
* ``reweighing``: AIF360 ``Reweighing(unprivileged_groups=[{"s": 1}],
  privileged_groups=[{"s": 0}])`` on a ``BinaryLabelDataset`` of the training fold; its
  ``instance_weights`` are the LR's ``sample_weight`` (checked against the closed form
  P(s) P(y) / P(s, y): ``weights_max_abs_diff``).

Metrics, the formulas of ``privfair.evaluation.evaluate.score_predictions``: accuracy, precision (0 without a
positive prediction), recall, dPar = |P(y^=1 | s=1) - P(y^=1 | s=0)| and eOdds =
|TPR_1 - TPR_0| + |TNR_1 - TNR_0|. ``seconds``: wall time of fit + predict (and of the
transform / weighting) of one method on one fold, the packages imported beforehand.

Output (``DIR/peers.json`` unless ``--out``): ``meta`` (versions, python, whether the
project's venv is on ``sys.path``) and ``rows``, one per dataset, pa, method and fold.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import time
import warnings
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression

Method = Callable[[dict[str, np.ndarray], int], tuple[np.ndarray, dict]]


def score(y_true: np.ndarray, y_pred: np.ndarray, s: np.ndarray) -> dict[str, float]:
    """accuracy, precision, recall, dpar, eodds with ``privfair.evaluation.evaluate.score_predictions``'s formulas."""
    y_true, y_pred, s = (np.asarray(a, dtype=bool) for a in (y_true, y_pred, s))
    tp = float(np.sum(y_pred & y_true))
    groups = np.unique(s)
    pr = np.array([y_pred[s == g].mean() for g in groups])  # one mean per group, not per row

    def rate(g: bool, cls: bool) -> float:
        mask = (s == g) & (y_true == cls)
        return float((y_pred[mask] == cls).mean()) if mask.any() else float("nan")

    return {
        "accuracy": float(np.mean(y_pred == y_true)),
        "precision": tp / float(np.sum(y_pred)) if np.any(y_pred) else 0.0,
        "recall": tp / float(np.sum(y_true)) if np.any(y_true) else 0.0,
        "dpar": float(pr.max() - pr.min()) if len(pr) else 0.0,
        "eodds": float(sum(abs(rate(True, c) - rate(False, c)) for c in (True, False)))
        if len(groups) == 2
        else float("nan"),
    }


def lr() -> LogisticRegression:
    return LogisticRegression(max_iter=1000)


def none(d: dict[str, np.ndarray], _: int) -> tuple[np.ndarray, dict]:
    return lr().fit(d["X_train"], d["y_train"]).predict(d["X_test"]), {}


def correlation_remover(d: dict[str, np.ndarray], _: int) -> tuple[np.ndarray, dict]:
    from fairlearn.preprocessing import CorrelationRemover

    x_train, x_test, ids = d["X_train"], d["X_test"], list(d["sens_cols"])
    if not ids:  # PA dropped: s itself is the column to remove and decorrelate from
        x_train = np.column_stack([x_train, d["s_train"].astype(float)])
        x_test = np.column_stack([x_test, d["s_test"].astype(float)])
        ids = [x_train.shape[1] - 1]
    cr = CorrelationRemover(sensitive_feature_ids=ids, alpha=1.0).fit(x_train)
    model = lr().fit(cr.transform(x_train), d["y_train"])
    return model.predict(cr.transform(x_test)), {"features_out": int(x_train.shape[1] - len(ids))}


def threshold_optimizer(d: dict[str, np.ndarray], seed: int) -> tuple[np.ndarray, dict]:
    from fairlearn.postprocessing import ThresholdOptimizer

    to = ThresholdOptimizer(
        estimator=lr(),
        constraints="demographic_parity",
        predict_method="predict_proba",
        prefit=False,
    )
    to.fit(d["X_train"], d["y_train"].astype(int), sensitive_features=d["s_train"].astype(int))
    pred = to.predict(d["X_test"], sensitive_features=d["s_test"].astype(int), random_state=seed)
    return np.asarray(pred), {"random_state": seed}


def reweighing(d: dict[str, np.ndarray], _: int) -> tuple[np.ndarray, dict]:
    from aif360.algorithms.preprocessing import Reweighing
    from aif360.datasets import BinaryLabelDataset

    y, s = d["y_train"].astype(float), d["s_train"].astype(float)
    frame = pd.DataFrame(d["X_train"], columns=[f"x{i}" for i in range(d["X_train"].shape[1])])
    frame["s"], frame["y"] = s, y
    data = BinaryLabelDataset(
        df=frame,
        label_names=["y"],
        protected_attribute_names=["s"],
        favorable_label=1.0,
        unfavorable_label=0.0,
    )
    rw = Reweighing(unprivileged_groups=[{"s": 1.0}], privileged_groups=[{"s": 0.0}])
    w = np.asarray(rw.fit_transform(data).instance_weights, dtype=float)
    # closed form: w(s, y) = P(s) P(y) / P(s, y), per (s, y) cell
    cell = s.astype(int) * 2 + y.astype(int)
    joint = np.bincount(cell, minlength=4) / len(cell)
    ps, py = joint.reshape(2, 2).sum(1), joint.reshape(2, 2).sum(0)
    expected = (ps[:, None] * py[None, :]).ravel()[cell] / joint[cell]
    model = lr().fit(d["X_train"], d["y_train"], sample_weight=w)
    return model.predict(d["X_test"]), {
        "weights_max_abs_diff": float(np.max(np.abs(w - expected))),
        "weights": {
            f"s={a},y={b}": float((ps[a] * py[b]) / joint[a * 2 + b])
            for a in (0, 1)
            for b in (0, 1)
        },
    }


METHODS: dict[str, Method] = {
    "none": none,
    "correlation_remover": correlation_remover,
    "threshold_optimizer": threshold_optimizer,
    "reweighing": reweighing,
}


def fold_arrays(npz: Path, pa: str) -> dict[str, np.ndarray]:
    """One fold's arrays; with ``pa="dropped"`` the protected attribute's columns deleted."""
    with np.load(npz) as f:
        d = {k: f[k] for k in f.files}
    cols = d["pa_cols"].astype(int)
    if pa == "dropped":
        d["X_train"] = np.delete(d["X_train"], cols, axis=1)
        d["X_test"] = np.delete(d["X_test"], cols, axis=1)
        d["sens_cols"] = np.zeros(0, dtype=int)
    else:
        d["sens_cols"] = cols
    for k in ("y_train", "y_test", "s_train", "s_test"):
        d[k] = d[k].astype(bool)
    return d


def meta() -> dict:
    packages = ["fairlearn", "aif360", "scikit-learn", "pandas", "numpy", "scipy"]
    here = Path(__file__).resolve().parents[2]
    return {
        "python": platform.python_version(),
        "versions": {p: version(p) for p in packages},
        "project_venv_on_path": any(str(here / ".venv") in p for p in sys.path),
        "executable": sys.executable,
        "base_estimator": "sklearn LogisticRegression(max_iter=1000)",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path, help="folder written by reproduce_fairness_peers.py")
    ap.add_argument("--out", type=Path, default=None, help="default: DIR/peers.json")
    ap.add_argument("--methods", default=",".join(METHODS))
    args = ap.parse_args()
    logging.getLogger().setLevel(logging.ERROR)  # aif360's optional-dependency warnings
    warnings.filterwarnings("ignore", category=FutureWarning)
    # imported once before any clock starts, so no method's first fold pays for it
    import aif360.algorithms.preprocessing  # noqa: F401
    import aif360.datasets  # noqa: F401
    import fairlearn.postprocessing  # noqa: F401
    import fairlearn.preprocessing  # noqa: F401

    manifest = json.loads((args.dir / "manifest.json").read_text())
    seed = int(manifest.get("seed", 0))
    methods = [m for m in args.methods.split(",") if m]
    rows: list[dict] = []
    for ds in manifest["datasets"]:
        for k in range(int(ds["folds"])):
            for pa in ("in", "dropped"):
                d = fold_arrays(args.dir / ds["name"] / f"fold{k}.npz", pa)
                for name in methods:
                    t0 = time.perf_counter()
                    pred, extra = METHODS[name](d, seed + k)
                    seconds = time.perf_counter() - t0
                    rows.append(
                        {
                            "dataset": ds["name"],
                            "pa": pa,
                            "method": name,
                            "fold": k,
                            "seconds": seconds,
                            **score(d["y_test"], np.asarray(pred).astype(bool), d["s_test"]),
                            "extra": extra,
                        }
                    )
                    r = rows[-1]
                    print(
                        f"{ds['name']} fold {k} pa={pa} {name}: dpar {r['dpar']:.4f} "
                        f"acc {r['accuracy']:.4f} ({seconds:.1f} s)",
                        file=sys.stderr,
                    )
    out = args.out or args.dir / "peers.json"
    out.write_text(json.dumps({"meta": meta(), "rows": rows}, indent=1))
    print(out)


if __name__ == "__main__":
    main()
