"""The cost of protection, measured the way the papers measure it: stratified folds, the
component applied to the training folds only, classifiers trained on the protected training
table and scored on the untouched test fold, against the same classifiers trained on the raw
training fold ("no protection").

Orchestrator-neutral and algorithm-blind: it reads the roles (the label and its ``positive``
values, the first protected attribute and its protected values) and the algorithm's first
output, which must be a table holding the label (a table release or a synthetic table; a report
is refused). Features are every other column, encoded from the raw training fold: numeric
columns standardised, nominal ones one-hot, a generalised ``struct<lo, hi>`` cell at its
midpoint, a generalised ``list`` cell as equal shares of its values (the test fold's single
values then hit the same one-hot columns). A protected attribute the algorithm publishes as its
groups (dMondrian and dSabre with more than two protected values: ``"protected"`` /
``"unprotected"``) is compared on those groups: in both arms, and on the test fold, its feature
is the row's group (1 protected, 0 not), read through each table's own role.

Per grid point, protection and classifier: accuracy, precision, recall, dPar
(|P(y^=1 | U) - P(y^=1 | F)|) and eOdds (|TPR_U - TPR_F| + |TNR_U - TNR_F|), its two parts TPRB
and TNRB, and, when the input declares ``admissible`` columns, PreFair's conditional measures
CDP, CTPRB and CTNRB given the joint admissible value of the test row (paper form and the
reference code's form, :func:`privfair.components.core.metrics.fairness_measures`); mean over the folds
with a 95 % t-interval.

>>> parse_grid(["k=5,10", "tau=1"])
{'k': [5, 10], 'tau': [1]}
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core import progress as pbar
from privfair.components.core.inputs import (
    RERUN_ROWS,
    group_indicator,
    outcome_indicator,
    uniform_sample,
)
from privfair.components.core.metrics import (
    demographic_parity_difference,
    equalized_odds_sum,
    fairness_measures,
)
from privfair.evaluation.options import (
    CLASSIFIERS,
    check_options,
    parse_grid,
)
from privfair.schemas.errors import InputError, SpecError
from privfair.schemas.roles import Role, read_roles

__all__ = [
    "CLASSIFIERS",
    "parse_grid",
    "check_options",
    "check_folds",
    "make_classifier",
    "label_and_protected",
    "stratified_folds",
    "score_predictions",
    "admissible_strata",
    "mean_interval",
    "Features",
    "evaluate",
    "Evaluation",
]

METRICS = ("accuracy", "precision", "recall", "dpar", "eodds", "tprb", "tnrb", "positive_rate")
CONDITIONAL = ("cdp", "ctprb", "ctnrb", "cdp_reference", "ctprb_reference", "ctnrb_reference")


def check_folds(folds: int, y: np.ndarray, label: str) -> None:
    """Every test fold must hold rows of both label classes: ``folds`` at most the rows of the
    smaller class (``SpecError`` naming ``--folds``); a label with one class is an
    ``InputError``."""
    n = len(y)
    n_pos = int(np.sum(y))
    smaller, which = min((n_pos, "positive"), (n - n_pos, "negative"))
    if smaller == 0:
        only = "negative" if n_pos == 0 else "positive"
        raise InputError(
            label,
            f"evaluation needs rows of both label classes (accuracy, dPar and eOdds compare "
            f"them); all {n} rows are {only}",
        )
    if folds > smaller:
        raise SpecError(
            "--folds",
            f"{folds} folds need at least {folds} rows of each class of the label '{label}' "
            f"(every test fold holds both); it has {smaller} {which} rows (of {n})",
        )


def one_blas_thread():
    """A context in which BLAS and OpenMP run on one thread, where the classifiers are fitted.

    The scores then do not depend on the machine's core count (a reduction split between
    threads may round differently), and the cost of protection measured beside a run
    (``privfair.release.beside``) does not take the run's own core. On Adult the hold-out's two
    logistic regressions (~36,500 x 106 features, two matrix-vector products per L-BFGS step)
    take 2.8 s of CPU and 1.4 s on two BLAS threads, whose workers spin between the small
    products, and 0.8 s on one thread, with the same scores.

    >>> import numpy as np
    >>> with one_blas_thread():
    ...     float(np.ones((4, 3)).sum(axis=0) @ np.ones(3))
    12.0
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


def make_classifier(name: str, seed: int):
    """A new, unfitted scikit-learn classifier of the protocol, by its short name.

    Parameters
    ----------
    name
        One of ``CLASSIFIERS``: ``lr`` (logistic regression), ``rf`` (random forest of 100
        trees, one job), ``sgd`` (linear SVM by SGD, hinge loss), ``gnb`` (Gaussian naive
        Bayes), ``dt`` (decision tree), ``ada`` (AdaBoost), ``mlp`` (two hidden layers of 20).
    seed
        The ``random_state`` of the classifiers that take one.

    Returns
    -------
    sklearn.base.ClassifierMixin
        The classifier, with the protocol's settings.

    Raises
    ------
    SpecError
        ``name`` is not a known classifier.
    """
    from privfair.components.core.imports import collector_paused

    with collector_paused():
        from sklearn.ensemble import AdaBoostClassifier, RandomForestClassifier
        from sklearn.linear_model import LogisticRegression, SGDClassifier
        from sklearn.naive_bayes import GaussianNB
        from sklearn.neural_network import MLPClassifier
        from sklearn.tree import DecisionTreeClassifier

    makers: dict[str, Callable[[], Any]] = {
        "lr": lambda: LogisticRegression(max_iter=1000),
        "rf": lambda: RandomForestClassifier(n_estimators=100, random_state=seed, n_jobs=1),
        "sgd": lambda: SGDClassifier(loss="hinge", random_state=seed),
        "gnb": lambda: GaussianNB(),
        "dt": lambda: DecisionTreeClassifier(random_state=seed),
        "ada": lambda: AdaBoostClassifier(random_state=seed),
        "mlp": lambda: MLPClassifier(hidden_layer_sizes=(20, 20), max_iter=200, random_state=seed),
    }
    if name not in makers:
        raise SpecError(
            "--classifiers", f"unknown classifier '{name}'; known: {', '.join(CLASSIFIERS)}"
        )
    return makers[name]()


@dataclass
class Features:
    """The feature encoding, fitted on a raw training table: per column, numeric (mean, std)
    or the list of levels."""

    columns: list[str]
    numeric: dict[str, tuple[float, float]] = field(default_factory=dict)
    levels: dict[str, list] = field(default_factory=dict)
    #: protected attributes encoded as their group (1 protected, 0 not), from each table's role
    groups: frozenset[str] = frozenset()

    @classmethod
    def fit(cls, table: pa.Table, columns: Sequence[str]) -> Features:
        f = cls(list(columns))
        for c in columns:
            t = table.schema.field(c).type
            if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
                x = _numbers(table.column(c))
                sd = float(np.nanstd(x)) or 1.0
                f.numeric[c] = (float(np.nanmean(x)) if len(x) else 0.0, sd)
            else:
                values = pc.unique(table.column(c)).to_pylist()
                f.levels[c] = sorted({str(v) for v in values}, key=str)
        return f

    def as_groups(self, columns: Iterable[str]) -> Features:
        """This encoding with ``columns`` (protected attributes) encoded as their group."""
        return Features(list(self.columns), self.numeric, self.levels, self.groups | set(columns))

    def transform(self, table: pa.Table) -> np.ndarray:
        """The feature matrix of ``table``: a raw or protected table with the fitted columns,
        or a table that publishes a nominal column as one-hot level shares (fields whose role
        names it as ``source`` with a ``level``: microaggregation's ``publish: onehot``), whose
        shares then fill that column's one-hot block."""
        shares = _level_columns(table)
        blocks = []
        roles = read_roles(table) if self.groups else None
        for c in self.columns:
            if c in self.groups and roles is not None and c in roles:
                blocks.append(group_indicator(table.column(c), roles[c]).astype(float)[:, None])
            elif c in self.numeric:
                mean, sd = self.numeric[c]
                x = _numbers(table.column(c))
                blocks.append(((np.nan_to_num(x, nan=mean) - mean) / sd)[:, None])
            elif c in table.column_names:
                blocks.append(_one_hot(table.column(c), self.levels[c]))
            elif c in shares:
                block = np.zeros((table.num_rows, len(self.levels[c])))
                for j, level in enumerate(self.levels[c]):
                    if level in shares[c]:
                        block[:, j] = _numbers(table.column(shares[c][level]))
                blocks.append(block)
            else:
                raise InputError(c, "the protected table has neither this column nor its levels")
        return np.hstack(blocks) if blocks else np.zeros((table.num_rows, 0))


def _level_columns(table: pa.Table) -> dict[str, dict[str, str]]:
    """{source column: {level (as text): one-hot share column}} from the roles."""
    out: dict[str, dict[str, str]] = {}
    for c in read_roles(table):
        if c.source is not None and c.level is not None:
            out.setdefault(c.source, {})[str(c.level)] = c.name
    return out


def published_groups(table: pa.Table) -> set[str]:
    """The columns of a protected table that publish a protected attribute as its groups
    (``privfair.components.generalisation.publish.group_field``: ``"protected"`` / ``"unprotected"``)."""
    from privfair.components.core.result import GROUPS_META

    return {f.name for f in table.schema if f.metadata and GROUPS_META in f.metadata}


def _numbers(col: pa.ChunkedArray) -> np.ndarray:
    """A numeric column as floats; a generalised ``struct<lo, hi>`` column at its midpoints."""
    t = col.type
    if pa.types.is_struct(t):
        lo = pc.struct_field(col, "lo").cast(pa.float64()).to_numpy(zero_copy_only=False)
        hi = pc.struct_field(col, "hi").cast(pa.float64()).to_numpy(zero_copy_only=False)
        return (lo + hi) / 2
    return col.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)


def _one_hot(col: pa.ChunkedArray, levels: list) -> np.ndarray:
    out = np.zeros((len(col), len(levels)))
    value_set = pa.array(levels, pa.string())
    if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        # a generalised cell spreads equal shares over the levels it holds
        cells = col.combine_chunks()
        lengths = pc.list_value_length(cells).fill_null(0).to_numpy(zero_copy_only=False)
        parents = pc.list_parent_indices(cells).to_numpy(zero_copy_only=False)
        flat = pc.list_flatten(cells).cast(pa.string())
        idx = pc.index_in(flat, value_set=value_set).to_numpy(zero_copy_only=False)
        ok = ~np.isnan(idx.astype(float))
        out[parents[ok], idx[ok].astype(int)] = 1.0 / lengths[parents[ok]]
        return out
    if pa.types.is_struct(col.type):
        return out
    idx = pc.index_in(col.cast(pa.string()), value_set=value_set).to_numpy(zero_copy_only=False)
    ok = ~np.isnan(idx.astype(float))
    out[np.flatnonzero(ok), idx[ok].astype(int)] = 1.0
    return out


def label_and_protected(table: pa.Table):
    """The label and the protected attribute the evaluation scores against, from the roles.

    Parameters
    ----------
    table
        A table carrying privfair's column roles.

    Returns
    -------
    tuple of ColumnRole
        ``(label, protected)``: the role of the first ``label`` column (its ``positive``
        values are the positive class) and of the first ``protected`` column (its protected
        values are the protected group).

    Raises
    ------
    InputError
        The table declares no label, or no protected attribute.
    """
    roles = read_roles(table)
    labels = roles.with_role(Role.LABEL)
    protected = roles.with_role(Role.PROTECTED)
    if not labels:
        raise InputError(None, "evaluation needs a label column (the classifiers' target)")
    if not protected:
        raise InputError(None, "evaluation needs a protected attribute (for dPar and eOdds)")
    return labels[0], protected[0]


def stratified_folds(y: np.ndarray, s: np.ndarray, folds: int, seed: int):
    """The protocol's shuffled, stratified K-fold split of the rows.

    The strata are the label x group cells (``2 y + s``); when a non-empty cell holds fewer
    rows than ``folds``, the label alone.

    Parameters
    ----------
    y
        The outcome of each row (bool: the positive class).
    s
        The group of each row (bool: the protected group).
    folds
        The number of folds (K).
    seed
        The ``random_state`` of the shuffle.

    Returns
    -------
    iterator of (numpy.ndarray, numpy.ndarray)
        Per fold, the row indices of the training part and of the test fold
        (``sklearn.model_selection.StratifiedKFold.split``).
    """
    from sklearn.model_selection import StratifiedKFold

    strata = y.astype(int) * 2 + s.astype(int)
    counts = np.bincount(strata, minlength=4)
    if counts[counts > 0].min() < folds:
        strata = y.astype(int)  # a label x group cell smaller than the folds: label only
    return StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(y, strata)


def score_predictions(y_true, y_pred, s, strata: np.ndarray | None = None) -> dict[str, float]:
    """The protocol's scores of one classifier's predictions on one test fold.

    Parameters
    ----------
    y_true
        The true outcome of each row (bool array).
    y_pred
        The predicted outcome of each row (bool array).
    s
        The group of each row (bool or 0/1 array: 1 the protected group).
    strata
        The joint admissible value of each row (``admissible_strata``), or None.

    Returns
    -------
    dict of str to float
        ``accuracy``, ``precision``, ``recall`` (0 when nothing is predicted, or nothing is
        positive), ``positive_rate`` (the share predicted positive), ``dpar`` (the demographic
        parity difference), ``eodds`` (TPR and TNR gaps summed; NaN unless ``s`` has exactly
        two values), ``tprb`` and ``tnrb``, and with ``strata`` PreFair's conditional measures
        (``CONDITIONAL``), as
        :func:`privfair.components.core.metrics.fairness_measures` computes them.
    """
    tp = float(np.sum(y_pred & y_true))
    two_groups = len(np.unique(s)) == 2
    out = {
        "accuracy": float(np.mean(y_pred == y_true)),
        "precision": tp / float(np.sum(y_pred)) if np.any(y_pred) else 0.0,
        "recall": tp / float(np.sum(y_true)) if np.any(y_true) else 0.0,
        # 0 or 1: the classifier predicts one class (``degenerate``)
        "positive_rate": float(np.mean(y_pred)) if len(y_pred) else float("nan"),
        "dpar": demographic_parity_difference(y_pred.astype(int), sensitive_features=s),
        "eodds": equalized_odds_sum(y_true.astype(int), y_pred.astype(int), sensitive_features=s)
        if two_groups
        else float("nan"),
    }
    m = fairness_measures(s, y_pred, y=y_true, strata=strata)
    out |= {k: m[k] for k in ("tprb", "tnrb") + (CONDITIONAL if strata is not None else ())}
    return out


def admissible_strata(table: pa.Table) -> np.ndarray | None:
    """The strata of PreFair's conditional measures: the joint value of the ``admissible``
    columns of each row, as an integer code.

    Parameters
    ----------
    table
        A table carrying privfair's column roles.

    Returns
    -------
    numpy.ndarray or None
        One dense ``int64`` code per row (equal codes: equal values in every admissible
        column, a null a value of its own), or None when the table declares no
        ``admissible`` column.
    """
    cols = read_roles(table).with_role(Role.ADMISSIBLE)
    if not cols:
        return None
    code = np.zeros(table.num_rows, dtype=np.int64)
    for c in cols:
        enc = pc.dictionary_encode(table.column(c.name).combine_chunks())
        idx = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64) + 1
        code = code * (len(enc.dictionary) + 1) + idx
        _, code = np.unique(code, return_inverse=True)  # dense again, so it never overflows
    return code.reshape(-1)


def mean_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """The mean of ``values`` and its two-sided 95 % Student-t confidence interval.

    NaN values are left out. With one value left the interval is that value; with none,
    all three are NaN.

    Parameters
    ----------
    values
        The per-fold values of one metric.

    Returns
    -------
    tuple of float
        ``(mean, low, high)``: ``mean -/+ t(0.975, n - 1) * sd / sqrt(n)``, ``sd`` the sample
        standard deviation of the ``n`` values.

    >>> mean_interval([1.0, float("nan"), 1.0])
    (1.0, 1.0, 1.0)
    """
    from scipy.stats import t

    x = np.asarray([v for v in values if v == v], dtype=float)
    if len(x) == 0:
        return math.nan, math.nan, math.nan
    m = float(x.mean())
    if len(x) < 2:
        return m, m, m
    h = float(t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return m, m - h, m + h


@dataclass
class Evaluation:
    """``folds``: one row per (grid point, protection, classifier, fold, metric); ``summary``:
    mean and 95 % interval per (grid point, protection, classifier, metric)."""

    spec: str
    folds: pa.Table
    summary: pa.Table
    seconds: float
    features: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)


def evaluate(
    spec,
    table: pa.Table,
    grid: Mapping[str, list] | None = None,
    folds: int = 5,
    seed: int = 0,
    classifiers: Sequence[str] = ("lr", "rf", "sgd", "gnb"),
    progress: Callable[[str], None] | None = None,
    apply: Callable | None = None,
    drop_protected: bool = False,
    protect_test: bool = False,
    fold_limit: int | None = None,
    input_fingerprint: str | None = None,
) -> Evaluation:
    """The protocol of the module docstring on ``table`` (the spec's ingested input).

    ``apply(train_table, params) -> protected train table`` defaults to the spec's algorithm's
    first output; tests pass a recording one. ``drop_protected`` leaves the protected attribute
    out of the classifiers' features (papers rarely say whether they keep it; default in).
    ``protect_test``: the protected arm's classifier also sees the test fold as the component
    publishes it (run on the test fold alone), each published row scored against its input
    row's true label and group through the ``lineage`` sidecar; a row-level algorithm only.
    ``fold_limit`` runs the first folds only (one fold of a 4-fold split is a stratified 75/25
    hold-out). ``input_fingerprint`` (the ingest's) is recorded in ``meta`` with the spec's
    fingerprint, so a release report shows only an evaluation of its own spec and input.
    """
    from privfair.spec.catalogue import algorithm_of, with_params

    t0 = time.perf_counter()
    # a caller's log (Dagster, Airflow) gets one line per fold; the CLI shows a bar instead
    # (privfair.components.core.progress), so nothing is printed when stderr is not a terminal
    say = progress or (lambda m: None)
    classifiers = list(classifiers)
    check_options(folds, seed, classifiers)  # before any work
    algo = algorithm_of(spec)
    if not measures_cost(algo):
        raise InputError(
            None,
            f"evaluation needs a table release with the label; '{algo.name}' publishes "
            f"{', '.join(algo.outputs)} (a report, not a table to train on)",
        )
    if protect_test and (apply is not None or not algo.row_level or "lineage" not in algo.sidecars):
        raise InputError(
            None,
            f"protect_test needs a row-level algorithm with a lineage sidecar; '{algo.name}' "
            "does not map its rows back to the input",
        )
    label, prot = label_and_protected(table)
    y_all = outcome_indicator(table.column(label.name), label)
    check_folds(folds, y_all, label.name)
    s_all = group_indicator(table.column(prot.name), prot)
    a_all = admissible_strata(table)
    features = [
        c for c in table.column_names if c != label.name and not (drop_protected and c == prot.name)
    ]
    keys = list((grid or {}).keys())
    points = [
        dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(grid or {}).values())
    ] or [{}]
    specs = [with_params(spec, p) if p else spec for p in points]

    def run(train: pa.Table, params) -> pa.Table:
        if apply is not None:
            return apply(train, params)
        result = algo(train, params)
        out = result.outputs["data"]
        if label.name not in out.column_names:
            raise InputError(
                label.name,
                f"evaluation needs a table release with the label; '{algo.name}' publishes "
                f"{', '.join(result.outputs)} without it",
            )
        return out

    def fit_predict(clf_name: str, k: int, x, y, x_eval) -> np.ndarray:
        if len(np.unique(y)) < 2:
            return np.full(len(x_eval), bool(y[0]) if len(y) else False)
        with one_blas_thread():
            return make_classifier(clf_name, seed + k).fit(x, y).predict(x_eval).astype(bool)

    # per fold, what no grid point changes: the split, the encoding fitted on the raw
    # training fold, and the unprotected arm's scores
    def unprotected(k: int, idx: tuple, train: pa.Table, test: pa.Table, enc: Features):
        """(the test fold encoded, its labels, groups and strata; the raw arm's scores)."""
        train_idx, test_idx = idx
        a_test = None if a_all is None else a_all[test_idx]
        raw = (enc.transform(test), y_all[test_idx], s_all[test_idx], a_test)
        x_train = enc.transform(train)
        y_train = y_all[train_idx]
        none = {
            c: score_predictions(
                raw[1], fit_predict(c, k, x_train, y_train, raw[0]), raw[2], raw[3]
            )
            for c in classifiers
        }
        return raw, none

    splits = []
    n_split = folds if fold_limit is None else min(folds, fold_limit)
    fold_bar = pbar.bar(n_split, "folds encoded, unprotected arm scored")
    for k, idx in enumerate(stratified_folds(y_all, s_all, folds, seed)):
        if fold_limit is not None and k >= fold_limit:
            break
        train = table.take(pa.array(idx[0]))
        test = table.take(pa.array(idx[1]))
        enc = Features.fit(train, features)
        raw, none = unprotected(k, idx, train, test, enc)
        splits.append((idx, train, test, enc, raw, none))
        fold_bar.advance()
    fold_bar.close()
    grouped: set[str] = set()  # protected attributes the algorithm published as their groups

    rows: list[dict] = []

    def add(grid_key: str, name: str, clf_name: str, k: int, scores: dict) -> None:
        rows.extend(
            {
                "grid": grid_key,
                "protection": name,
                "classifier": clf_name,
                "fold": k,
                "metric": metric,
                "value": value,
            }
            for metric, value in scores.items()
        )

    total = len(points) * len(splits)
    done = 0
    run_bar = pbar.bar(total, "grid points × folds protected and scored")
    for point, sp in zip(points, specs, strict=True):
        grid_key = json.dumps(point, sort_keys=True)

        for k, (idx, train, test, enc, raw, none) in enumerate(splits):
            protected = run(train, sp.params)
            new = (published_groups(protected) & set(features)) - enc.groups
            if new:  # both arms and the test fold compared on the published groups
                grouped |= new
                enc = enc.as_groups(new)
                raw, none = unprotected(k, idx, train, test, enc)
                splits[k] = (idx, train, test, enc, raw, none)
            x_eval, y_eval, s_eval, a_eval = raw
            if protect_test:
                res = algo(test, sp.params)
                rid = res.sidecars["lineage"].column("row_id").to_numpy()
                x_eval, y_eval, s_eval, a_eval = (
                    enc.transform(res.outputs["data"]),
                    y_eval[rid],
                    s_eval[rid],
                    None if a_eval is None else a_eval[rid],
                )
            x = enc.transform(protected)
            y = outcome_indicator(protected.column(label.name), label)
            for clf_name in classifiers:
                add(grid_key, "none", clf_name, k, none[clf_name])
            for clf_name in classifiers:
                pred = fit_predict(clf_name, k, x, y, x_eval)
                add(
                    grid_key,
                    algo.name,
                    clf_name,
                    k,
                    score_predictions(y_eval, pred, s_eval, a_eval),
                )
            done += 1
            run_bar.advance()
            say(f"evaluate {spec.name}: {done}/{total} (grid {point or '-'}, fold {k + 1})")
    run_bar.close()
    per_fold = pa.Table.from_pylist(rows)
    summary = _summarise(rows)
    meta = {
        "spec": spec.name,
        "spec_fingerprint": spec.fingerprint(),
        "input_fingerprint": input_fingerprint,
        "algorithm": algo.name,
        "grid": {k: list(v) for k, v in (grid or {}).items()},
        "folds": folds,
        "folds_run": len(splits),
        "seed": seed,
        "classifiers": list(classifiers),
        "drop_protected": drop_protected,
        "protect_test": protect_test,
        "features": features,
    }
    if grouped:
        meta["compared_as_groups"] = sorted(grouped)
    return Evaluation(spec.name, per_fold, summary, time.perf_counter() - t0, features, meta)


def _summarise(rows: list[dict]) -> pa.Table:
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        groups.setdefault((r["grid"], r["protection"], r["classifier"], r["metric"]), []).append(
            r["value"]
        )
    out = []
    for (grid, protection, clf, metric), values in groups.items():
        m, lo, hi = mean_interval(values)
        out.append(
            {
                "grid": grid,
                "protection": protection,
                "classifier": clf,
                "metric": metric,
                "mean": m,
                "ci_low": lo,
                "ci_high": hi,
                "folds": len(values),
            }
        )
    return pa.Table.from_pylist(out)


#: the most input rows the report's cost of protection is measured on (``cost_of_protection``)
COST_SAMPLE_ROWS = RERUN_ROWS
HOLDOUT_FOLDS = 4  # the report's hold-out: the first fold of a stratified 4-fold split


def cost_of_protection(
    spec,
    table: pa.Table,
    *,
    classifier: str = "lr",
    seed: int = 0,
    input_fingerprint: str | None = None,
    evaluations=None,
    max_rows: int | None = None,
) -> dict:
    """What a release report shows of the cost of protection, as plain JSON data.

    ``sample``: an input above ``max_rows`` rows (default ``COST_SAMPLE_ROWS``) is measured on a
    uniform sample of that many rows drawn with ``seed`` (the hold-out runs the algorithm again:
    at scale that would cost a second release), and the result says so; a smaller input is
    measured whole and has no ``sample``.

    ``holdout``: one stratified 75/25 split of the input (the first fold of a 4-fold split);
    the component runs on the 75 % alone, and ``classifier`` trained on the raw and on the
    protected training rows is scored on the untouched 25 % (:func:`evaluate` with
    ``fold_limit=1``): ``{"none": {metric: value}, <algorithm>: {...}}``. An algorithm that
    publishes no table with the label gets ``status: not applicable`` and the reason.

    ``grid``: the summary of the latest ``privfair evaluate`` of this spec found under
    ``evaluations`` (:func:`find_evaluation`), for the trade-off plot, or None.
    """
    table, sample = cost_sample(table, max_rows, seed)
    out = holdout_cost(spec, table, sample, classifier=classifier, seed=seed)
    out["grid"] = find_evaluation(spec, input_fingerprint, evaluations)
    return out


def cost_sample(
    table: pa.Table, max_rows: int | None = None, seed: int = 0, draw: bool = True
) -> tuple[pa.Table, dict | None]:
    """The rows the cost of protection is measured on: ``table`` itself up to ``max_rows``
    (default ``COST_SAMPLE_ROWS``), else a uniform sample drawn with ``seed`` and the record
    saying so (``privfair.components.core.inputs.uniform_sample``; ``draw=False``: the record
    alone, for an algorithm whose cost reads no row, ``measures_cost``)."""
    cap = COST_SAMPLE_ROWS if max_rows is None else max_rows
    return uniform_sample(table, cap, seed, draw)


def measures_cost(algo) -> bool:
    """Whether the cost of protection of ``algo`` is measured on rows: it publishes a table
    to train on (``data``); a report's is ``not applicable`` and reads none."""
    return "data" in algo.outputs


def holdout_cost(
    spec, table: pa.Table, sample: dict | None, *, classifier: str = "lr", seed: int = 0
) -> dict:
    """:func:`cost_of_protection` without its ``grid``, on the rows :func:`cost_sample` chose
    (``sample`` is its record, None when ``table`` is the whole input): everything that runs
    the algorithm again, so ``privfair.release.beside`` can measure it in a second process."""
    out: dict[str, Any] = {
        "classifier": classifier,
        "split": f"stratified hold-out: fold 1 of {HOLDOUT_FOLDS} (seed {seed})",
    }
    if sample is not None:
        out["sample"] = sample
        out["split"] += (
            f", on a uniform sample of {sample['rows']:,} of the {sample['of']:,} input rows"
        )
    try:
        ev = evaluate(
            spec,
            table,
            folds=HOLDOUT_FOLDS,
            seed=seed,
            classifiers=[classifier],
            fold_limit=1,
            progress=lambda m: None,
        )
    except InputError as e:
        reason = e.rule if e.column is None else str(e)
        out |= {
            "status": "not applicable",
            "reason": reason + (f" ({e.detail})" if e.detail and e.column is None else ""),
        }
    except SpecError as e:  # the input is too small for the hold-out (``check_folds``)
        out |= {
            "status": "not applicable",
            "reason": f"the hold-out is one fold of {HOLDOUT_FOLDS}: {e.rule}",
        }
    else:
        arms: dict[str, dict[str, float]] = {}
        for r in ev.folds.to_pylist():
            v = r["value"]
            arms.setdefault(r["protection"], {})[r["metric"]] = None if v != v else v
        test_rows = table.num_rows // HOLDOUT_FOLDS  # StratifiedKFold: n // k or one more
        out |= {
            "degenerate": degenerate(arms),
            "status": "measured",
            "train_rows": table.num_rows - test_rows,
            "test_rows_approx": test_rows,
            "features": ev.features,
            "holdout": arms,
        }  # no wall time here: two runs of one version write the same manifest
        if ev.meta.get("compared_as_groups"):
            out["compared_as_groups"] = ev.meta["compared_as_groups"]
    return out


def degenerate(arms: dict[str, dict]) -> dict[str, str]:
    """``{arm: why}`` for each arm whose classifier is degenerate on the test split
    (``privfair.components.core.metrics.degenerate_classifier``: a predicted positive rate below 1 %
    or above 99 %, or an accuracy within one point of the majority-class rate): its accuracy
    is a base rate and its dPar says nothing about fairness, so the cost of protection must
    not be read from it.

    >>> degenerate({"none": {"positive_rate": 0.4, "accuracy": 0.85, "precision": 0.7},
    ...             "mst": {"positive_rate": 0.0, "accuracy": 0.76}})["mst"][:46]
    'the classifier predicts the positive class for'
    """
    from privfair.components.core.metrics import degenerate_classifier

    out = {}
    for arm, m in arms.items():
        why = degenerate_classifier(m)
        if why is not None:
            out[arm] = why
    return out


def find_evaluation(spec, input_fingerprint: str | None, root=None) -> dict | None:
    """The evaluation ``privfair evaluate`` wrote for ``spec`` under ``root`` (default: the
    evaluations setting), if it was run on this spec and this input (their fingerprints);
    ``{"stale": True, ...}`` if one exists for another version; None if there is none.

    Only the accuracy and dPar rows of its summary are kept: what the trade-off plot needs.
    """
    from pathlib import Path

    import pyarrow.parquet as pq

    from privfair.spec.settings import resolve_evaluations

    folder = Path(resolve_evaluations(root)) / spec.name
    meta_file = folder / "evaluation.json"
    if not meta_file.is_file():
        return None
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        summary = pq.read_table(folder / "summary.parquet").to_pylist()
    except (OSError, ValueError) as e:
        return {"stale": True, "path": str(folder), "reason": f"unreadable: {e}"}
    if meta.get("spec_fingerprint") != spec.fingerprint() or (
        input_fingerprint is not None and meta.get("input_fingerprint") != input_fingerprint
    ):
        return {
            "stale": True,
            "path": str(folder),
            "reason": "it was run on another version of the spec or of the input",
        }
    keep = [r for r in summary if r["metric"] in ("accuracy", "dpar")]
    return {
        "stale": False,
        "path": str(folder),
        "grid": meta.get("grid", {}),
        "folds": meta.get("folds"),
        "classifiers": meta.get("classifiers", []),
        "rows": keep,
    }


def tradeoff_series(rows: Iterable[Mapping]) -> list[tuple[str, list]]:
    """Summary rows as scatter series: per protection, one (dPar, accuracy, label) point per
    grid setting and classifier, labelled ``clf key=value ...``."""
    by: dict[tuple, dict] = {}
    for r in rows:
        by.setdefault((r["protection"], r["grid"], r["classifier"]), {})[r["metric"]] = r["mean"]
    series: dict[str, list] = {}
    for (protection, grid, clf), m in by.items():
        if "accuracy" in m and "dpar" in m:
            # the raw arm does not depend on the grid: one point per classifier
            setting = (
                ""
                if protection == "none"
                else " ".join(f"{k}={v}" for k, v in json.loads(grid).items())
            )
            point = (m["dpar"], m["accuracy"], f"{clf} {setting}".strip())
            if point not in series.setdefault(protection, []):
                series[protection].append(point)
    return list(series.items())


def tradeoff_chart(rows: Iterable[Mapping], title: str) -> str:
    """The trade-off plot (accuracy against dPar) of summary rows, as inline SVG."""
    from privfair.components.core.plots import scatter_chart

    return scatter_chart(
        tradeoff_series(rows),
        title=title,
        x_label="dPar (lower is fairer)",
        y_label="accuracy",
        annotate=True,
    )


def page(ev: Evaluation) -> str:
    """A self-contained HTML page: the trade-off plot (accuracy against dPar, one point per
    grid setting and classifier, one colour per protection) and the summary table."""
    from html import escape

    from privfair.components.core.plots import fmt_num

    rows = ev.summary.to_pylist()
    by: dict[tuple, dict] = {}
    for r in rows:
        by.setdefault((r["protection"], r["grid"], r["classifier"]), {})[r["metric"]] = r
    svg = tradeoff_chart(rows, f"Cost of protection: {ev.spec}")
    present = {r["metric"] for r in rows}
    shown = [m for m in METRICS + CONDITIONAL[:3] if m in present]
    head = "".join(f"<th>{escape(m)}</th>" for m in shown)
    body = []
    for (protection, grid, clf), m in sorted(by.items()):
        cells = "".join(
            f"<td>{fmt_num(m[k]['mean'])} [{fmt_num(m[k]['ci_low'])}, {fmt_num(m[k]['ci_high'])}]</td>"
            if k in m
            else "<td></td>"
            for k in shown
        )
        body.append(
            f"<tr><td>{escape(protection)}</td><td>{escape(grid)}</td><td>{escape(clf)}</td>"
            f"{cells}</tr>"
        )
    folds = max((r["folds"] for r in rows), default=0)
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>privfair evaluation: {escape(ev.spec)}</title>"
        "<style>body{font-family:DejaVu Sans,Verdana,sans-serif;margin:2em;color:#222}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;"
        "font-size:13px}th{background:#f3f3f3}</style></head><body>"
        f"<h1>Cost of protection: {escape(ev.spec)}</h1>"
        f"<p>Stratified {folds}-fold protocol: the component applied to the training folds "
        "only, classifiers trained on the protected (or, for <em>none</em>, the raw) training "
        "fold and scored on the untouched test fold. Mean over the folds with a 95 % "
        f"t-interval; {ev.seconds:.1f} s.</p><section id='tradeoff'>{svg}</section>"
        "<section id='summary'><table><tr><th>protection</th><th>grid</th><th>classifier</th>"
        f"{head}</tr>{''.join(body)}</table></section></body></html>"
    )


def write(ev: Evaluation, out_dir) -> dict[str, str]:
    """``evaluation.parquet`` (per fold), ``summary.parquet``, ``evaluation.html`` and
    ``evaluation.json`` (what was run: ``Evaluation.meta``) in ``out_dir``, each written aside
    and renamed so a failed run leaves no partial file; the JSON goes last, so a folder with
    it is complete."""
    import os
    from pathlib import Path

    import pyarrow.parquet as pq

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, write_fn in (
        ("evaluation.parquet", lambda p: pq.write_table(ev.folds, p)),
        ("summary.parquet", lambda p: pq.write_table(ev.summary, p)),
        ("evaluation.html", lambda p: Path(p).write_text(page(ev), encoding="utf-8")),
        (
            "evaluation.json",
            lambda p: Path(p).write_text(
                json.dumps({**ev.meta, "seconds": ev.seconds}, indent=2), encoding="utf-8"
            ),
        ),
    ):
        tmp = out / f".{name}.tmp"
        write_fn(tmp)
        os.replace(tmp, out / name)
        paths[name] = str(out / name)
    return paths
