"""CorrectFairness (Fair-MDAV Alg. 4) in closed form, with exact rational arithmetic.

In a group g with m_g unfavoured rows (a of them positive) and n_g favoured rows (b positive),
and tau = i/den, the loop "while upr < tau*fpr: relabel one record" stops after

    positive correction (unfavoured 0 -> 1):  r* = min(m_g - a, max(0, ceil(i*b*m_g / (den*n_g)) - a))
    negative correction (favoured 1 -> 0):    s* = 0 if i = 0
                                              else min(b, max(0, b - floor(den*a*n_g / (i*m_g))))

relabels: the fewest that make a'*n_g*den >= i*b'*m_g. Groups lacking one protected value are
left alone. Candidates are taken in group-membership order (nearest to the seed first) or in a
seeded random order.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np


def group_counts(
    group: np.ndarray, pa01: np.ndarray, y: np.ndarray, n_groups: int
) -> tuple[np.ndarray, ...]:
    """(m_g, n_g, a, b) per group: unfavoured rows, favoured rows, positives among each."""
    u = pa01 == 0
    m_g = np.bincount(group[u], minlength=n_groups).astype(np.int64)
    n_g = np.bincount(group[~u], minlength=n_groups).astype(np.int64)
    a = np.bincount(group[u & (y == 1)], minlength=n_groups).astype(np.int64)
    b = np.bincount(group[~u & (y == 1)], minlength=n_groups).astype(np.int64)
    return m_g, n_g, a, b


def relabel_counts(m_g, n_g, a, b, tau: Fraction, direction: str) -> np.ndarray:
    """Closed-form number of relabels per group (see module docstring). Python integers, exact."""
    i, den = tau.numerator, tau.denominator
    out = np.zeros(len(m_g), dtype=np.int64)
    largest = max(int(np.max(m_g, initial=0)), int(np.max(n_g, initial=0)), 1)
    if max(i, den) * largest * largest < 2**62:  # every product below fits in int64: vectorised
        m_g, n_g, a, b = (np.asarray(x, dtype=np.int64) for x in (m_g, n_g, a, b))
        ok = (m_g > 0) & (n_g > 0) & (i != 0)
        mg, ng = np.where(ok, m_g, 1), np.where(ok, n_g, 1)
        if direction == "positive":
            need = -((-i * b * mg) // (den * ng))  # ceil
            r = np.minimum(m_g - a, np.maximum(0, need - a))
        else:
            keep = (den * a * ng) // (i * mg) if i else np.zeros_like(a)  # floor
            r = np.minimum(b, np.maximum(0, b - keep))
        return np.where(ok, r, 0).astype(np.int64)
    for g in range(len(m_g)):
        mg, ng, ag, bg = int(m_g[g]), int(n_g[g]), int(a[g]), int(b[g])
        if mg == 0 or ng == 0 or i == 0:
            continue
        if direction == "positive":
            need = -((-i * bg * mg) // (den * ng))  # ceil
            out[g] = min(mg - ag, max(0, need - ag))
        else:
            keep = (den * ag * ng) // (i * mg)  # floor
            out[g] = min(bg, max(0, bg - keep))
    return out


def relabel_counts_by_loop(
    m_g: int, n_g: int, a: int, b: int, tau: Fraction, direction: str
) -> int:
    """The paper's loop, one relabel at a time with exact comparison; the reference the closed
    form is tested against."""
    count = 0
    if m_g == 0 or n_g == 0:
        return 0
    while Fraction(a, m_g) < tau * Fraction(b, n_g):
        if direction == "positive":
            if a == m_g:
                break
            a += 1
        else:
            if b == 0:
                break
            b -= 1
        count += 1
    return count


def correct_fairness(
    group: np.ndarray,
    pa01: np.ndarray,
    y: np.ndarray,
    n_groups: int,
    tau: Fraction,
    direction: str,
    order: str = "nearest",
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Return (corrected labels, relabel flags). Rows must be in group-membership order."""
    m_g, n_g, a, b = group_counts(group, pa01, y, n_groups)
    r = relabel_counts(m_g, n_g, a, b, tau, direction)
    if direction == "positive":
        cand = np.flatnonzero((pa01 == 0) & (y == 0))
    else:
        cand = np.flatnonzero((pa01 == 1) & (y == 1))
    if order == "random":
        rng = np.random.default_rng(seed)
        cand = cand[np.lexsort((rng.permutation(len(cand)), group[cand]))]
    # rank of each candidate among the candidates of its group (candidates are group-contiguous)
    g = group[cand]
    starts = np.searchsorted(g, np.arange(n_groups), side="left")
    rank = np.arange(len(cand)) - starts[g]
    flip = cand[rank < r[g]]
    out = y.copy()
    out[flip] = 1 - out[flip]
    flags = np.zeros(len(y), dtype=bool)
    flags[flip] = True
    return out, flags
