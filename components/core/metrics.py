"""Fairness, privacy and utility metrics (pure functions, fairlearn/pycanon-style signatures).

Notation: U = unfavoured protected group, F = favoured group, PR(group) = #positives / #rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from privfair.schemas.errors import InputError


def positive_ratio(y: np.ndarray, *, sensitive_features: np.ndarray) -> dict:
    """PR per value of the sensitive feature: PR(v) = #{y = 1, s = v} / #{s = v}."""
    y = np.asarray(y)
    s = np.asarray(sensitive_features)
    return {v.item() if hasattr(v, "item") else v: float(y[s == v].mean()) for v in np.unique(s)}


def demographic_parity_difference(y_pred: np.ndarray, *, sensitive_features: np.ndarray) -> float:
    """dPar = |P(Y=1 | U) - P(Y=1 | F)| (Fair-MDAV Eq. 1); for more groups, max PR - min PR."""
    pr = positive_ratio(y_pred, sensitive_features=sensitive_features)
    return float(max(pr.values()) - min(pr.values())) if pr else 0.0


def demographic_parity_ratio(y_pred: np.ndarray, *, sensitive_features: np.ndarray) -> float:
    """min_g PR(g) / max_g PR(g) (fairlearn's definition); 1 is parity."""
    pr = positive_ratio(y_pred, sensitive_features=sensitive_features)
    hi = max(pr.values())
    return float(min(pr.values()) / hi) if hi > 0 else 1.0


def _rate(y_true, y_pred, s, v, cls) -> float:
    mask = (s == v) & (y_true == cls)
    return float((y_pred[mask] == cls).mean()) if mask.any() else float("nan")


def equalized_odds_sum(
    y_true: np.ndarray, y_pred: np.ndarray, *, sensitive_features: np.ndarray
) -> float:
    """eOdds = |TPR_U - TPR_F| + |TNR_U - TNR_F| (Fair-MDAV Eq. 2: the sum, not fairlearn's max)."""
    y_true, y_pred, s = map(np.asarray, (y_true, y_pred, sensitive_features))
    v = np.unique(s)
    if len(v) != 2:
        raise ValueError("equalized_odds_sum needs exactly two groups")
    return float(
        sum(
            abs(_rate(y_true, y_pred, s, v[0], c) - _rate(y_true, y_pred, s, v[1], c))
            for c in (1, 0)
        )
    )


def equal_opportunity_difference(
    y_true: np.ndarray, y_pred: np.ndarray, *, sensitive_features: np.ndarray
) -> float:
    """|TPR_U - TPR_F|."""
    y_true, y_pred, s = map(np.asarray, (y_true, y_pred, sensitive_features))
    v = np.unique(s)
    return float(abs(_rate(y_true, y_pred, s, v[0], 1) - _rate(y_true, y_pred, s, v[1], 1)))


def _binary(name: str, values: ArrayLike, n: int | None) -> np.ndarray:
    """``values`` as a 1-D bool array (bool, or integers in {0, 1}) of length ``n``."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InputError(name, "must be a 1-D array", f"got shape {arr.shape}")
    if n is not None and len(arr) != n:
        raise InputError(name, "must have one entry per row", f"{len(arr)} != {n}")
    if arr.dtype != np.bool_:
        if arr.size and not np.isin(arr, (0, 1)).all():
            raise InputError(name, "must be boolean (or 0/1)")
        arr = arr.astype(bool)
    return arr


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den`` elementwise, NaN where ``den == 0``."""
    out = np.full(np.shape(den), np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


def fairness_measures(
    s: ArrayLike,
    o: ArrayLike,
    y: ArrayLike | None = None,
    strata: ArrayLike | None = None,
) -> dict[str, float]:
    """Fairness of the outcome ``o`` w.r.t. the binary group ``s`` (PreFair Table 2, spec A12).

    With ``rate_g(E | B) = P(E | S = g, B)`` (and, per stratum, ``P(E | S = g, B, A = a)``), each
    measure is a base condition ``B`` and an event ``E``:

    - ``dp``   = ``|P(O=1 | S=1) - P(O=1 | S=0)|``                 (B = all rows, E = O=1);
    - ``tprb`` = ``|P(O=1 | S=1, Y=1) - P(O=1 | S=0, Y=1)|``       (B = Y=1, E = O=1);
    - ``tnrb`` = ``|P(O=0 | S=1, Y=0) - P(O=0 | S=0, Y=0)|``       (B = Y=0, E = O=0).

    Their conditional versions ``cdp``, ``ctprb``, ``ctnrb`` (given ``strata``, the joint
    admissible value ``a`` of each row) come in two forms:

    - paper form ``c*`` = ``sum_a P^(a) |rate_1(a) - rate_0(a)|`` over the strata where both rates
      are defined (both S values present among the base rows of ``a``), ``P^(a)`` = share of all
      rows in stratum ``a``, renormalised to sum 1 over those strata;
    - reference form ``c*_reference`` =
      ``|mean_{a : rate_1(a) defined} rate_1(a) - mean_{a : rate_0(a) defined} rate_0(a)|``
      (unweighted means, taken separately per S).

    An undefined rate (empty group) gives NaN. ``tprb``/``tnrb`` (and their conditional forms)
    need ``y``; the conditional forms need ``strata``.

    Parameters
    ----------
    s
        Protected-group indicator (S=1), bool or 0/1, one per row.
    o
        Outcome or prediction (O=1), bool or 0/1.
    y
        True label (Y=1), bool or 0/1, or None.
    strata
        One integer code per row for the joint admissible value ``a`` (any integers), or None.

    Returns
    -------
    dict[str, float]
        Keys ``dp`` [, ``tprb``, ``tnrb``] [, ``cdp``, ``cdp_reference``
        [, ``ctprb``, ``ctprb_reference``, ``ctnrb``, ``ctnrb_reference``]].

    Stratum 0 has rates 1 (S=1) and 0 (S=0), stratum 1 has 0 and 0, stratum 2 only S=0 (rate 1):
    paper form ``4/8 * 1 + 4/8 * 0``, reference form ``|(1 + 0)/2 - (0 + 0 + 1)/3|``.

    >>> s = np.array([1, 1, 0, 0, 1, 0, 0, 0, 0])
    >>> o = np.array([1, 1, 0, 0, 0, 0, 0, 0, 1])
    >>> a = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2])
    >>> m = fairness_measures(s, o, strata=a)
    >>> round(m["dp"], 6), round(m["cdp"], 6), round(m["cdp_reference"], 6)
    (0.5, 0.5, 0.166667)
    """
    s = _binary("s", s, None)
    n = len(s)
    o = _binary("o", o, n)
    y = None if y is None else _binary("y", y, n)
    inverse = None
    if strata is not None:
        st = np.asarray(strata)
        if st.ndim != 1 or len(st) != n:
            raise InputError("strata", "must be a 1-D array with one entry per row")
        if st.size and not (np.issubdtype(st.dtype, np.integer) or st.dtype == np.bool_):
            raise InputError("strata", "must be integer codes", f"got dtype {st.dtype}")
        _, inverse = np.unique(st, return_inverse=True)
        inverse = inverse.reshape(-1)
    k = 0 if inverse is None or inverse.size == 0 else int(inverse.max()) + 1
    share = np.bincount(inverse, minlength=k) if inverse is not None else None

    measures: list[tuple[str, str, np.ndarray, np.ndarray]] = [("dp", "cdp", np.ones(n, bool), o)]
    if y is not None:
        measures += [("tprb", "ctprb", y, o), ("tnrb", "ctnrb", ~y, ~o)]

    out: dict[str, float] = {}
    for name, cname, base, event in measures:
        rates = []
        for g in (s, ~s):  # S = 1, then S = 0
            den, num = np.count_nonzero(base & g), np.count_nonzero(base & g & event)
            rates.append(num / den if den else np.nan)
        out[name] = float(abs(rates[0] - rates[1]))
        if inverse is None:
            continue
        per = []
        for g in (s, ~s):
            den = np.bincount(inverse, weights=base & g, minlength=k)
            num = np.bincount(inverse, weights=base & g & event, minlength=k)
            per.append(_ratio(num, den))
        r1, r0 = per
        both = ~np.isnan(r1) & ~np.isnan(r0)
        w = share[both]
        out[cname] = (
            float((w * np.abs(r1[both] - r0[both])).sum() / w.sum()) if both.any() else np.nan
        )
        d1, d0 = ~np.isnan(r1), ~np.isnan(r0)
        out[f"{cname}_reference"] = (
            float(abs(r1[d1].mean() - r0[d0].mean())) if d1.any() and d0.any() else np.nan
        )
    return out


def k_anonymity(frame: pd.DataFrame, quasi_identifiers: Sequence[str]) -> int:
    """The k of a table: size of its smallest equivalence class over the QIs (0 for no rows)."""
    if len(frame) == 0:
        return 0
    if not quasi_identifiers:
        return len(frame)
    sizes = frame.groupby(list(quasi_identifiers), dropna=False, sort=False).size()
    return int(sizes.min())


def t_closeness_binary(
    groups: np.ndarray, attribute01: np.ndarray, reference_share: float
) -> np.ndarray:
    """Per group g: t_g = |share of attribute = 0 in g - reference share|. For a binary attribute
    this equals the EMD with equal ground distance and the total-variation distance."""
    n_groups = int(groups.max()) + 1 if len(groups) else 0
    size = np.bincount(groups, minlength=n_groups)
    zeros = np.bincount(groups[attribute01 == 0], minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.abs(zeros / size - reference_share)


def information_loss(
    original_scaled: np.ndarray, published_scaled: np.ndarray, attribute_of_column: Sequence[str]
) -> dict:
    """Information loss in the scaled QI space (Fair-MDAV Eq. 3 and section 2.4):

    SSE = sum over grouped rows of ||x - x_bar||^2;  IL = sqrt(SSE / N_g);
    IL_attr = sqrt(SSE / (N_g * p)) with p encoded QI columns (the paper's "averaged by attribute");
    per_attribute[A] = sqrt(SSE_A / N_g), SSE_A summed over the columns encoding attribute A.
    """
    n, p = original_scaled.shape
    if n == 0 or p == 0:
        return {"il": 0.0, "il_attr": 0.0, "sse": 0.0, "per_attribute": {}}
    col_sse = ((original_scaled - published_scaled) ** 2).sum(axis=0)
    sse = float(col_sse.sum())
    per: dict[str, float] = {}
    for a, v in zip(attribute_of_column, col_sse, strict=True):
        per[a] = per.get(a, 0.0) + float(v)
    return {
        "il": float(np.sqrt(sse / n)),
        "il_attr": float(np.sqrt(sse / (n * p))),
        "sse": sse,
        "per_attribute": {a: float(np.sqrt(v / n)) for a, v in per.items()},
    }


#: the declared rule of a degenerate classifier (``degenerate_classifier``): a predicted
#: positive rate below ``DEGENERATE_RATE`` or above 1 - ``DEGENERATE_RATE``, or an accuracy
#: within ``DEGENERATE_ACCURACY`` (one point) of the majority-class rate
DEGENERATE_RATE = 0.01
DEGENERATE_ACCURACY = 0.01


def majority_rate(metrics: dict) -> float | None:
    """The test split's majority-class rate max(b, 1 - b), b its positive base rate: the
    ``majority_rate`` or ``base_rate`` in ``metrics`` when given, else derived exactly from a
    classifier's accuracy, precision and predicted positive rate (b = 1 - PR + 2 * precision
    * PR - accuracy, since accuracy = TP/n + TN/n and TN/n = 1 - PR - b + TP/n); None when
    they are missing.

    >>> round(majority_rate({"accuracy": 0.8, "precision": 0.5, "positive_rate": 0.2}), 6)
    0.8
    """
    if metrics.get("majority_rate") is not None:
        return float(metrics["majority_rate"])
    b = metrics.get("base_rate")
    if b is None:
        acc, prec, pr = (metrics.get(k) for k in ("accuracy", "precision", "positive_rate"))
        if any(v is None or v != v for v in (acc, prec, pr)):
            return None
        b = 1.0 - pr + 2.0 * prec * pr - acc
    b = min(max(float(b), 0.0), 1.0)
    return max(b, 1.0 - b)


def degenerate_classifier(metrics: dict) -> str | None:
    """Why a classifier's scores on a test split must not be read as a cost of protection
    (None when they may): it is **degenerate** when

    - its predicted positive rate is below 1 % or above 99 % (``DEGENERATE_RATE``): it
      (almost) always predicts one class, so its dPar near 0 says nothing about fairness; or
    - its accuracy is within one point (``DEGENERATE_ACCURACY``) of the majority-class rate
      (``majority_rate``): it does no better than predicting the majority class, so its
      accuracy is a base rate, not what the features or the protection allow.

    ``metrics``: the classifier's ``positive_rate`` and ``accuracy`` (with ``precision``, or
    the split's ``base_rate`` / ``majority_rate``), as ``privfair.evaluation.evaluate`` scores them.

    >>> degenerate_classifier({"positive_rate": 0.4, "accuracy": 0.85, "precision": 0.7})
    >>> degenerate_classifier({"positive_rate": 0.004, "accuracy": 0.76, "precision": 1.0})[:46]
    'the classifier predicts the positive class for'
    >>> degenerate_classifier({"positive_rate": 0.2, "accuracy": 0.755, "majority_rate": 0.76})[:40]
    'its accuracy 0.7550 is within one point '
    """
    rate = metrics.get("positive_rate")
    if rate is not None and rate == rate and not DEGENERATE_RATE <= rate <= 1 - DEGENERATE_RATE:
        which, share = ("positive", rate) if rate < 0.5 else ("negative", 1 - rate)
        return (
            f"the classifier predicts the {which} class for {share:.1%} of the test split "
            f"(below {DEGENERATE_RATE:.0%}): it (almost) always predicts one class, so its "
            "accuracy is about the base rate and its dPar near 0 says nothing about fairness"
        )
    acc, major = metrics.get("accuracy"), majority_rate(metrics)
    near = acc is not None and acc == acc and major is not None
    if near and abs(acc - major) <= DEGENERATE_ACCURACY + 1e-12:
        return (
            f"its accuracy {acc:.4f} is within one point of the majority-class rate "
            f"{major:.4f}: it does no better than always predicting the majority class, "
            "so neither its accuracy nor its dPar measures the cost of protection"
        )
    return None
