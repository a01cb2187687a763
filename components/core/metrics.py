"""Fairness, privacy and utility metrics (pure functions, fairlearn/pycanon-style signatures).

Notation: U = unfavoured protected group, F = favoured group, PR(group) = #positives / #rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


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
