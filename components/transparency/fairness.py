"""Fairness measures of a report, computed from a decision mapping, with the intervals the
fidelity guarantees for their true values (spec 1.8, 5.2, Lemma 2).

Rates are population-weighted: ``rate(T) = sum_{x in T} n(x) d(x) / sum_{x in T} n(x)``
(Remark 1). SP = |rate_1 - rate_2|, CSP the same within one stratum of a condition attribute,
PR = rate_1 / rate_2. The published rows (``announced_rows``) are computed from the announced
rule alone; the true values are added for the audit only (``measure_rows``). Every interval
end is a function of the announced rates and the fidelity (``true_value_interval``). Under
delta-fidelity every rate moves by at most 1 - delta and SP/CSP by at most
min{2(1 - delta), 1} (Lemma 2), so the true SP lies in [max(0, SP~ - b), min(1, SP~ + b)];
PR's interval is [lo_1 / hi_2, hi_1 / lo_2] from the rate intervals. Under alpha-fidelity a true rate lies in [alpha r~, min(1, r~ / alpha)], SP's
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

__all__ = ["rate", "true_value_interval", "announced_rows", "measure_rows", "default_measures"]


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


def true_value_interval(
    kind: str, rate_1: float, rate_2: float, mode: str, level: float
) -> tuple[float, float, float, float | None]:
    """(announced value, lower end, upper end, distortion bound) of a measure from its two
    announced rates and the fidelity (``mode``, ``level``) alone: no argument is a true
    quantity, so every end is computable by anyone who reads the published rates and the
    fidelity, and none is clipped by a true value.

    >>> [round(x, 6) for x in true_value_interval("SP", 0.2, 0.365, "delta", 0.9)]
    [0.165, 0.0, 0.365, 0.2]
    >>> [round(x, 6) for x in true_value_interval("PR", 0.2, 0.365, "delta", 0.9)[:3]]
    [0.547945, 0.215054, 1.132075]
    """
    lo1, hi1 = _rate_interval(rate_1, mode, level)
    lo2, hi2 = _rate_interval(rate_2, mode, level)
    if kind in ("SP", "CSP"):
        value = abs(rate_1 - rate_2)
        if mode == "delta":
            bound = min(2 * (1 - level), 1.0)
            return value, max(0.0, value - bound), min(1.0, value + bound), bound
        return value, max(0.0, lo1 - hi2, lo2 - hi1), max(hi1 - lo2, hi2 - lo1), None
    value = _ratio(rate_1, rate_2)
    if mode == "alpha":
        return value, value * level**2, value / level**2, -2 * math.log(level)
    return value, _ratio(lo1, hi2), _ratio(hi1, lo2), None


def _strata(measures: list[dict], keys: dict[str, np.ndarray]):
    """(measure, stratum or None, mask of group 1, mask of group 2) per published row."""
    for m in measures:
        col = keys[m["protected_attribute"]]
        mask1, mask2 = col == str(m["group_1"]), col == str(m["group_2"])
        if m["type"] == "CSP":
            cond = keys[m["condition_attribute"]]
            for v in dict.fromkeys(cond.tolist()):
                yield m, v, mask1 & (cond == v), mask2 & (cond == v)
        else:
            yield m, None, mask1, mask2


def announced_rows(
    measures: list[dict],
    keys: dict[str, np.ndarray],
    population: np.ndarray,
    d_ann: np.ndarray,
    mode: str,
    level: float,
) -> list[dict]:
    """The published rows: one per measure (per stratum for CSP) whose two groups have mass,
    computed from the announced rule, the populations (which the adversary is assumed to
    know) and the fidelity only; this function is never given the true rule."""
    out = []
    for m, stratum, mask1, mask2 in _strata(measures, keys):
        a1, a2 = rate(mask1, population, d_ann), rate(mask2, population, d_ann)
        if a1 is None or a2 is None:
            continue
        kind = m["type"]
        value, lo, hi, bound = true_value_interval(kind, a1, a2, mode, level)
        out.append(
            {
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
            }
        )
    return out


def measure_rows(
    measures: list[dict],
    keys: dict[str, np.ndarray],
    population: np.ndarray,
    d_true: np.ndarray,
    d_ann: np.ndarray,
    mode: str,
    level: float,
) -> list[dict]:
    """``announced_rows`` and, for the audit only (never published), the true values the
    intervals must contain: ``true_value``, ``true_rate_group_1``, ``true_rate_group_2``."""
    rows = announced_rows(measures, keys, population, d_ann, mode, level)
    masks = [
        (m1, m2)
        for _, _, m1, m2 in _strata(measures, keys)
        if rate(m1, population, d_ann) is not None and rate(m2, population, d_ann) is not None
    ]
    for row, (mask1, mask2) in zip(rows, masks, strict=True):
        t1, t2 = rate(mask1, population, d_true), rate(mask2, population, d_true)
        true = abs(t1 - t2) if row["measure"] in ("SP", "CSP") else _ratio(t1, t2)
        row.update(true_value=true, true_rate_group_1=t1, true_rate_group_2=t2)
    return rows


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
