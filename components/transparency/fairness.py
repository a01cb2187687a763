"""Fairness measures of a report, computed from a decision mapping, with the intervals the
fidelity guarantees for their true values (spec 1.8, 5.2, Lemma 2).

Rates are population-weighted: ``rate(T) = sum_{x in T} n(x) d(x) / sum_{x in T} n(x)``
(Remark 1). SP = |rate_1 - rate_2|, CSP the same within one stratum of a condition attribute,
PR = rate_1 / rate_2. Under delta-fidelity every rate moves by at most 1 - delta and SP/CSP by
at most min{2(1 - delta), 1} (Lemma 2), so the true SP lies in
[max(0, SP~ - b), min(1, SP~ + b)]; PR's interval is [lo_1 / hi_2, hi_1 / lo_2] from the rate
intervals. Under alpha-fidelity a true rate lies in [alpha r~, min(1, r~ / alpha)], SP's
interval follows from the rate intervals and PR moves by at most a factor alpha^2 (|log| bound
-2 log alpha, uncapped: spec erratum on (15)).

>>> import numpy as np
>>> rows = measure_rows(
...     [{"type": "SP", "protected_attribute": "g", "group_1": "F", "group_2": "M"}],
...     {"g": np.array(["F", "F", "M", "M"])}, np.array([1.0, 1.0, 1.0, 1.0]),
...     np.array([0.0, 1.0, 1.0, 1.0]), np.array([0.1, 0.9, 0.9, 0.9]), "delta", 0.9)
>>> [round(rows[0][k], 3) for k in ("value", "true_value", "distortion_bound")]
[0.4, 0.5, 0.2]
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["rate", "measure_rows", "default_measures"]


def rate(mask: np.ndarray, population: np.ndarray, d: np.ndarray) -> float | None:
    """Population-weighted positive rate over the cells in ``mask`` (None if it has no mass)."""
    n = float(population[mask].sum())
    return float((population[mask] * d[mask]).sum() / n) if n > 0 else None


def _rate_interval(r: float, mode: str, level: float) -> tuple[float, float]:
    if mode == "delta":
        return max(0.0, r - (1 - level)), min(1.0, r + (1 - level))
    return level * r, min(1.0, r / level)


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else (math.inf if a > 0 else 1.0)


def _row(m: dict, stratum, mask1, mask2, pop, d_true, d_ann, mode, level) -> dict | None:
    t1, t2 = rate(mask1, pop, d_true), rate(mask2, pop, d_true)
    a1, a2 = rate(mask1, pop, d_ann), rate(mask2, pop, d_ann)
    if None in (t1, t2, a1, a2):
        return None
    kind = m["type"]
    lo1, hi1 = _rate_interval(a1, mode, level)
    lo2, hi2 = _rate_interval(a2, mode, level)
    if kind in ("SP", "CSP"):
        value, true = abs(a1 - a2), abs(t1 - t2)
        if mode == "delta":
            bound = min(2 * (1 - level), 1.0)
            lo, hi = max(0.0, value - bound), min(1.0, value + bound)
        else:
            bound = None
            lo = max(0.0, lo1 - hi2, lo2 - hi1)
            hi = max(hi1 - lo2, hi2 - lo1)
    else:
        value, true = _ratio(a1, a2), _ratio(t1, t2)
        if mode == "alpha":
            bound = -2 * math.log(level)
            lo, hi = value * level**2, value / level**2
        else:
            bound = None
            lo, hi = _ratio(lo1, hi2), _ratio(hi1, lo2)
    return {
        "measure": kind,
        "protected_attribute": m["protected_attribute"],
        "group_1": str(m["group_1"]),
        "group_2": str(m["group_2"]),
        "condition_attribute": m.get("condition_attribute"),
        "condition_value": None if stratum is None else str(stratum),
        "rate_group_1": a1,
        "rate_group_2": a2,
        "value": value,
        "fidelity_mode": mode,
        "fidelity": level,
        "distortion_bound": bound,
        "rate_bound": (1 - level) if mode == "delta" else None,
        "true_value_lower": lo,
        "true_value_upper": hi,
        "pr_threshold_p": m.get("p") if kind == "PR" else None,
        "pr_satisfied_announced": (m["p"] <= value <= 1 / m["p"]) if kind == "PR" else None,
        # audit only (never published): the true values the interval must contain
        "true_value": true,
        "true_rate_group_1": t1,
        "true_rate_group_2": t2,
    }


def measure_rows(
    measures: list[dict],
    keys: dict[str, np.ndarray],
    population: np.ndarray,
    d_true: np.ndarray,
    d_ann: np.ndarray,
    mode: str,
    level: float,
) -> list[dict]:
    """One row per measure (per stratum for CSP), announced values with their intervals and,
    for the audit, the true values."""
    out = []
    for m in measures:
        col = keys[m["protected_attribute"]]
        mask1, mask2 = col == str(m["group_1"]), col == str(m["group_2"])
        if m["type"] == "CSP":
            cond = keys[m["condition_attribute"]]
            for v in dict.fromkeys(cond.tolist()):
                row = _row(
                    m,
                    v,
                    mask1 & (cond == v),
                    mask2 & (cond == v),
                    population,
                    d_true,
                    d_ann,
                    mode,
                    level,
                )
                if row:
                    out.append(row)
        else:
            row = _row(m, None, mask1, mask2, population, d_true, d_ann, mode, level)
            if row:
                out.append(row)
    return out


def default_measures(keys: dict[str, np.ndarray], population: np.ndarray, public, private):
    """SP and PR between the two most populated values of the first public attribute, and CSP
    per value of the first private attribute (none when that attribute has one value)."""
    col = keys[public[0]]
    values = list(dict.fromkeys(col.tolist()))
    if len(values) < 2:
        return []
    mass = {v: float(population[col == v].sum()) for v in values}
    g1, g2 = sorted(values, key=lambda v: -mass[v])[:2]
    base = {"protected_attribute": public[0], "group_1": g1, "group_2": g2}
    return [
        {"type": "SP", **base},
        {"type": "CSP", **base, "condition_attribute": private[0]},
        {"type": "PR", **base, "p": 0.8},
    ]
