"""Quality, fairness and downstream metrics of a synthetic table (spec section 5.4, fact table F3).

A table is a mapping ``column -> 1-D integer code array`` (codes ``0 .. sizes[column] - 1``) and
``sizes`` maps each column to its public domain size. Everything is vectorised: a marginal is one
``np.bincount`` of the mixed-radix cell index, the conditional fairness metrics one ``bincount``
over the strata per count.

- fidelity: :func:`marginal`, :func:`tvd`, :func:`one_way_tvd`, :func:`two_way_tvd`;
- correlation: :func:`cramers_v` (bias-corrected, Bergsma) and :func:`acd`;
- fairness (Table 2, A12): :func:`fairness_measures` (shared with evaluation, from the core);
- utility: :func:`downstream_accuracy` (train on synthetic, test on real).

>>> real = {"a": np.array([0, 0, 1, 1]), "b": np.array([0, 1, 0, 1])}
>>> syn = {"a": np.array([0, 0, 0, 1]), "b": np.array([0, 0, 1, 1])}
>>> sizes = {"a": 2, "b": 2}
>>> one_way_tvd(real, syn, sizes)
{'a': 0.25, 'b': 0.0}
>>> two_way_tvd(real, syn, sizes)
{('a', 'b'): 0.25}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from privfair.components.core.metrics import _binary, fairness_measures
from privfair.schemas.errors import InputError

__all__ = [
    "marginal",
    "tvd",
    "one_way_tvd",
    "two_way_tvd",
    "cramers_v",
    "acd",
    "fairness_measures",
    "downstream_accuracy",
]

Model = Literal["logistic_regression", "random_forest", "linear_regression"]

# Error messages name a column, the rule and a count, never a value or a row count read from
# the data: the real table behind them is private.


# --------------------------------------------------------------------------- marginals and TVD


def _codes(codes: Mapping[str, np.ndarray], sizes: Mapping[str, int], column: str) -> np.ndarray:
    """``codes[column]`` as a 1-D ``intp`` array, every code within ``0 .. sizes[column] - 1``."""
    if column not in codes:
        raise InputError(column, "is missing from the table")
    if column not in sizes:
        raise InputError(column, "has no domain size")
    size = int(sizes[column])
    arr = np.asarray(codes[column])
    if arr.ndim != 1:
        raise InputError(column, "codes must be a 1-D array", f"got shape {arr.shape}")
    if arr.size and not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
        raise InputError(column, "codes must be integers", f"got dtype {arr.dtype}")
    arr = arr.astype(np.intp, copy=False)
    if size < 1:
        raise InputError(column, "domain size must be >= 1", f"got {size}")
    if arr.size and (arr.min() < 0 or arr.max() >= size):
        bad = int(((arr < 0) | (arr >= size)).sum())
        raise InputError(column, f"codes must lie in 0..{size - 1}", f"{bad} rows outside")
    return arr


def _count(arrays: Sequence[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """Count table of validated code arrays: ``bincount`` of the mixed-radix (C order) index."""
    lengths = {len(a) for a in arrays}
    if len(lengths) > 1:
        raise InputError(None, "columns must have the same length", f"{len(lengths)} lengths")
    index = np.ravel_multi_index(tuple(arrays), shape)
    return np.bincount(index, minlength=int(np.prod(shape))).reshape(shape)


def marginal(
    codes: Mapping[str, np.ndarray], sizes: Mapping[str, int], columns: Sequence[str]
) -> np.ndarray:
    """Count table of ``columns``: ``M[v_1, ..., v_k] = #{rows : codes[c_i] = v_i for all i}``.

    The cell of a row is its mixed-radix index
    ``((v_1 * n_2 + v_2) * n_3 + v_3) ...`` with ``n_i = sizes[c_i]`` (C order), counted with one
    ``np.bincount``.

    Parameters
    ----------
    codes
        Column name -> 1-D integer codes in ``0 .. sizes[column] - 1``, all of the same length.
    sizes
        Column name -> domain size.
    columns
        The columns of the marginal, in axis order. Empty gives a 0-d array holding the row count.

    Returns
    -------
    np.ndarray
        ``int64`` counts of shape ``tuple(sizes[c] for c in columns)``; they sum to the row count.

    >>> marginal({"x": np.array([0, 1, 1]), "y": np.array([2, 0, 0])}, {"x": 2, "y": 3}, ["x", "y"])
    array([[0, 0, 1],
           [2, 0, 0]])
    """
    if not columns:
        n = len(np.asarray(next(iter(codes.values())))) if codes else 0
        return np.array(n, dtype=np.int64)
    arrays = [_codes(codes, sizes, c) for c in columns]
    shape = tuple(int(sizes[c]) for c in columns)
    return _count(arrays, shape).astype(np.int64, copy=False)


def tvd(p_counts: ArrayLike, q_counts: ArrayLike) -> float:
    """Total variation distance of two count tables after normalising each to sum 1.

    ``TVD = 1/2 * sum_v |p(v) / sum(p) - q(v) / sum(q)|``, in ``[0, 1]``. Both empty (all-zero)
    gives 0; exactly one empty gives NaN (a distribution against nothing is undefined).

    Parameters
    ----------
    p_counts, q_counts
        Non-negative finite counts (or weights) of the same shape.

    >>> tvd([3, 1], [1, 1])
    0.25
    >>> tvd([0, 0], [0, 0])
    0.0
    """
    p = np.asarray(p_counts, dtype=np.float64)
    q = np.asarray(q_counts, dtype=np.float64)
    if p.shape != q.shape:
        raise InputError(None, "count tables must have the same shape", f"{p.shape} != {q.shape}")
    for name, arr in (("p_counts", p), ("q_counts", q)):
        if not np.isfinite(arr).all() or (arr < 0).any():
            raise InputError(name, "counts must be finite and non-negative")
    sp, sq = p.sum(), q.sum()
    if sp == 0 and sq == 0:
        return 0.0
    if sp == 0 or sq == 0:
        return float("nan")
    return float(min(1.0, 0.5 * np.abs(p / sp - q / sq).sum()))


def one_way_tvd(
    real: Mapping[str, np.ndarray],
    synthetic: Mapping[str, np.ndarray],
    sizes: Mapping[str, int],
) -> dict[str, float]:
    """1-way TVD per column of ``real`` (in its order): ``tvd(M_c(real), M_c(synthetic))``.

    The paper's "1-way TVD" is the mean of these values over the d attributes.

    >>> one_way_tvd({"a": np.array([0, 1])}, {"a": np.array([1, 1, 1])}, {"a": 2})
    {'a': 0.5}
    """
    return {c: tvd(marginal(real, sizes, [c]), marginal(synthetic, sizes, [c])) for c in real}


def _pairs(columns: Sequence[str], sizes: Mapping[str, int], max_cells: int) -> list:
    """Unordered column pairs (in column order) whose 2-way table has at most ``max_cells`` cells."""
    return [
        (a, b) for a, b in combinations(columns, 2) if int(sizes[a]) * int(sizes[b]) <= max_cells
    ]


def _pair_tables(
    table: Mapping[str, np.ndarray], sizes: Mapping[str, int], pairs: list
) -> dict[tuple[str, str], np.ndarray]:
    """2-way count tables of ``pairs``, every column validated once."""
    cols = {c: _codes(table, sizes, c) for pair in pairs for c in pair}
    return {(a, b): _count([cols[a], cols[b]], (int(sizes[a]), int(sizes[b]))) for a, b in pairs}


def two_way_tvd(
    real: Mapping[str, np.ndarray],
    synthetic: Mapping[str, np.ndarray],
    sizes: Mapping[str, int],
    max_cells: int = 10_000,
) -> dict[tuple[str, str], float]:
    """2-way TVD per unordered pair ``(a, b)`` of ``real``'s columns (``a`` before ``b``).

    ``tvd(M_ab(real), M_ab(synthetic))``, restricted to pairs with
    ``sizes[a] * sizes[b] <= max_cells`` (the reference's ``max_cells``); the paper's "2-way TVD"
    is the mean over these pairs.

    >>> real = {"a": np.array([0, 1]), "b": np.array([0, 1]), "c": np.arange(2)}
    >>> syn = {"a": np.array([0, 1]), "b": np.array([1, 0]), "c": np.arange(2)}
    >>> two_way_tvd(real, syn, {"a": 2, "b": 2, "c": 200}, max_cells=100)
    {('a', 'b'): 1.0}
    """
    pairs = _pairs(list(real), sizes, max_cells)
    r, s = _pair_tables(real, sizes, pairs), _pair_tables(synthetic, sizes, pairs)
    return {pair: tvd(r[pair], s[pair]) for pair in pairs}


# --------------------------------------------------------------------------- Cramér's V and ACD


def cramers_v(table: ArrayLike) -> float:
    """Bias-corrected Cramér's V (Bergsma 2013) of an r x c contingency table (spec 5.4).

    All-zero rows and columns are dropped first (r, c count the rest), then with ``N = sum``::

        chi2   = sum (O - E)^2 / E,   E = row_sum * col_sum / N   (no Yates correction)
        phi2   = chi2 / N
        phi2~  = max(0, phi2 - (r - 1)(c - 1) / (N - 1))
        r~     = r - (r - 1)^2 / (N - 1),   c~ = c - (c - 1)^2 / (N - 1)
        V      = sqrt(phi2~ / min(r~ - 1, c~ - 1))

    ``V = 0`` if ``N <= 1`` or ``min(r~ - 1, c~ - 1) <= 0``; V is clipped to ``[0, 1]`` against
    rounding.

    >>> round(cramers_v([[10, 0], [0, 10]]), 12)
    1.0
    >>> cramers_v([[5, 5], [5, 5]])
    0.0
    >>> # chi2 = 7.2, phi2 = 0.36, phi2~ = 0.36 - 1/19, r~ - 1 = 18/19: V = sqrt(73/225)
    >>> round(cramers_v([[8, 2], [2, 8]]), 6)
    0.5696
    """
    t = np.asarray(table, dtype=np.float64)
    if t.ndim != 2:
        raise InputError(None, "a contingency table must be 2-D", f"got shape {t.shape}")
    if not np.isfinite(t).all() or (t < 0).any():
        raise InputError(None, "contingency counts must be finite and non-negative")
    t = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0]
    n = t.sum()
    if n <= 1:
        return 0.0
    r, c = t.shape
    rows, cols = t.sum(axis=1), t.sum(axis=0)
    expected = np.outer(rows, cols) / n
    chi2 = float(((t - expected) ** 2 / expected).sum())
    phi2 = max(0.0, chi2 / n - (r - 1) * (c - 1) / (n - 1))
    denom = min(r - (r - 1) ** 2 / (n - 1) - 1, c - (c - 1) ** 2 / (n - 1) - 1)
    if denom <= 0:
        return 0.0
    return float(min(1.0, np.sqrt(phi2 / denom)))


def acd(
    real: Mapping[str, np.ndarray],
    synthetic: Mapping[str, np.ndarray],
    sizes: Mapping[str, int],
    max_cells: int = 10_000,
) -> float:
    """Average correlation difference: ``mean over pairs (a, b) of |V_real(a, b) - V_syn(a, b)|``.

    ``V`` is :func:`cramers_v` of the pair's 2-way count table; the pairs are those of
    :func:`two_way_tvd` (``sizes[a] * sizes[b] <= max_cells``). NaN if there is no such pair.

    >>> real = {"a": np.array([0, 0, 1, 1] * 5), "b": np.array([0, 0, 1, 1] * 5)}
    >>> syn = {"a": np.array([0, 0, 1, 1] * 5), "b": np.array([0, 1, 0, 1] * 5)}
    >>> acd(real, syn, {"a": 2, "b": 2})
    1.0
    """
    pairs = _pairs(list(real), sizes, max_cells)
    if not pairs:
        return float("nan")
    r, s = _pair_tables(real, sizes, pairs), _pair_tables(synthetic, sizes, pairs)
    return float(np.mean([abs(cramers_v(r[p]) - cramers_v(s[p])) for p in pairs]))


# --------------------------------------------------------------------------- downstream accuracy


def downstream_accuracy(
    train_X: np.ndarray,
    train_y: np.ndarray,
    test_X: np.ndarray,
    test_y: np.ndarray,
    model: Model = "logistic_regression",
    seed: int = 0,
) -> dict:
    """Train on ``(train_X, train_y)`` (synthetic), predict ``test_X`` (real); spec 5.4.

    ``accuracy = (TP + TN) / (TP + FP + FN + TN) = mean(prediction == test_y)`` (NaN if the test
    set is empty). The features are integer codes.

    - ``"logistic_regression"``: ``LogisticRegression`` on one-hot features (a code never seen in
      training encodes as all zeros);
    - ``"random_forest"``: ``RandomForestRegressor(n_estimators=200)`` on the raw codes, the
      reference's setting; prediction = score rounded (``> 0.5``);
    - ``"linear_regression"``: OLS on the 0/1 label, raw codes; the score is clipped to ``[0, 1]``
      and rounded (``> 0.5``; a score of exactly 0.5 rounds to 0, as ``np.round`` does).

    A single-class ``train_y`` predicts that class for every test row.

    Returns
    -------
    dict
        ``{"accuracy": float, "predictions": bool array of len(test_X)}``.

    >>> X = np.array([[0, 1], [1, 0], [0, 0], [1, 1]] * 5)
    >>> y = X[:, 0] == 1
    >>> downstream_accuracy(X, y, X, y, "linear_regression")["accuracy"]
    1.0
    """
    if model not in ("logistic_regression", "random_forest", "linear_regression"):
        raise InputError("model", "unknown model", repr(model))
    train_X, test_X = np.asarray(train_X), np.asarray(test_X)
    if train_X.ndim != 2 or test_X.ndim != 2 or train_X.shape[1] != test_X.shape[1]:
        raise InputError(
            None,
            "features must be 2-D with the same columns",
            f"{train_X.ndim}-D with {_width(train_X)} and {test_X.ndim}-D with "
            f"{_width(test_X)} columns",
        )
    train_y = _binary("train_y", train_y, len(train_X))
    test_y = _binary("test_y", test_y, len(test_X))
    if len(train_y) == 0:
        raise InputError("train_y", "the training set is empty")

    if train_y.all() or not train_y.any():
        pred = np.full(len(test_X), bool(train_y[0]))
    elif len(test_X) == 0:
        pred = np.zeros(0, dtype=bool)
    elif model == "logistic_regression":
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import OneHotEncoder

        enc = OneHotEncoder(handle_unknown="ignore").fit(train_X)
        clf = LogisticRegression(max_iter=1000, random_state=seed)
        pred = clf.fit(enc.transform(train_X), train_y).predict(enc.transform(test_X))
        pred = pred.astype(bool)
    elif model == "random_forest":
        from sklearn.ensemble import RandomForestRegressor

        reg = RandomForestRegressor(n_estimators=200, random_state=seed)
        pred = reg.fit(train_X, train_y.astype(float)).predict(test_X) > 0.5
    else:  # "linear_regression"
        from sklearn.linear_model import LinearRegression

        score = LinearRegression().fit(train_X, train_y.astype(float)).predict(test_X)
        pred = np.clip(score, 0.0, 1.0) > 0.5
    accuracy = float(np.mean(pred == test_y)) if len(test_y) else float("nan")
    return {"accuracy": accuracy, "predictions": np.asarray(pred, dtype=bool)}


def _width(x: np.ndarray) -> int | str:
    """The number of columns of a feature matrix (not its shape: the row count is private)."""
    return x.shape[1] if x.ndim == 2 else "?"
