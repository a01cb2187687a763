"""The C6 audit: discrimination measures of PND itemsets, against the bounds of Theorems 10/15.

A PND itemset B holds at most one item per PND attribute; its cover is the set of rows
supporting every item, and its 4-fold table (a, b, c, d) counts the cover's rows by PD group
and decision. Two families of itemsets are audited:

- **plain itemsets** over the published labels (an item ``A = label``): every itemset with a
  non-empty cover over every subset of at most ``max_attributes`` PND attributes (all of them:
  exhaustive; this covers every closed itemset). One pass per attribute subset, depth first:
  a subset's itemset keys extend its parent's by one column, re-densified with ``np.unique``;
- **disjunctive itemsets** (Def. 13, Cor. 14): ``count`` seeded random itemsets of range items
  ``A in [v, w]`` over the active domain; a row supports one when its label lies inside.

Both count over the table's distinct label vectors, each with the 4-fold counts of its rows
(``Labels.vectors``), not over its rows: whether a row supports an itemset depends only on its
labels, so the counts are the same integers, and the work grows with the number of distinct
published label vectors (a few per class) instead of the number of rows.

``audit_itemsets`` returns, per measure, the extreme values over the audited itemsets, the
number of itemsets outside the two-sided bounds at ``t`` (plus those with tau(B) > t) and the
worst offenders.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from privfair.components.generalisation.measures import MEASURES, bounds, measures, tau

__all__ = [
    "Labels",
    "LabelVectors",
    "ItemsetAudit",
    "audit_itemsets",
    "dense_codes",
    "plain_counts",
    "random_counts",
    "row_codes",
]


def dense_codes(key: np.ndarray) -> np.ndarray:
    """``np.unique(key, return_inverse=True)[1]``: each value's rank among the distinct values.
    Through a table of every value in the keys' range when it is not much larger than the
    keys (labels: a few thousand possible values over millions of rows), with no sort.

    >>> dense_codes(np.array([7, 3, 7, 5])).tolist()
    [2, 0, 2, 1]
    """
    if len(key) == 0:
        return np.zeros(0, dtype=np.int64)
    lo, hi = int(key.min()), int(key.max())
    if hi - lo >= max(len(key), 1 << 16):
        return np.unique(key, return_inverse=True)[1].ravel()
    seen = np.zeros(hi - lo + 1, dtype=bool)
    seen[key - lo] = True
    return (np.cumsum(seen) - 1)[key - lo]


def row_codes(columns: list[np.ndarray]) -> np.ndarray:
    """A dense id per distinct row of the integer ``columns``, numbered in the rows'
    lexicographic order (``np.unique(axis=0)``'s ids). The columns are packed into one int64
    key by mixed radix when their ranges allow (a 1-D unique: ~10x faster and a fraction of the
    memory of a row-wise one on 10M rows), row-wise otherwise."""
    n = len(columns[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    key = np.zeros(n, dtype=np.int64)
    room = 1
    for c in columns:
        lo, hi = int(c.min()), int(c.max())
        radix = hi - lo + 1
        room *= radix
        if room >= 2**63:
            stacked = np.column_stack(columns)
            return np.unique(stacked, axis=0, return_inverse=True)[1].ravel()
        key *= radix
        key += c - lo
    return dense_codes(key)


@dataclass
class LabelVectors:
    """The distinct label vectors of a ``Labels``: per vector its labels ``lo`` / ``hi``
    (ranks), the 4-fold ``counts`` (a, b, c, d) of the rows holding it and the ``first`` such
    row; ``codes``: a dense label id per vector and attribute, equal to ``Labels.codes`` of its
    rows."""

    lo: np.ndarray
    hi: np.ndarray
    counts: np.ndarray
    first: np.ndarray
    codes: np.ndarray


@dataclass
class Labels:
    """The rows to audit: per PND attribute the label interval ``[lo, hi]`` in ranks, the
    active-domain ``sizes``, each row's 4-fold ``cell`` (0..3 = a, b, c, d)."""

    names: list[str]
    lo: np.ndarray
    hi: np.ndarray
    sizes: np.ndarray
    cell: np.ndarray

    def codes(self, dtype=np.int64) -> np.ndarray:
        """A dense label id per row and attribute (equal ids = equal labels), as ``dtype``
        (an attribute has a few hundred distinct labels at most: int32 holds them at half
        the memory of 10M rows)."""
        n, m = self.lo.shape
        out = np.empty((n, m), dtype=dtype)
        for j in range(m):
            key = self.lo[:, j].astype(np.int64) * (int(self.sizes[j]) + 2) + self.hi[:, j]
            out[:, j] = dense_codes(key)
        return out

    def vectors(self) -> LabelVectors:
        """The distinct label vectors and the 4-fold counts of their rows (one group-by).

        >>> lab = Labels(["A"], np.array([[0], [0], [1]]), np.array([[1], [1], [1]]),
        ...              np.array([2]), np.array([0, 3, 1]))
        >>> v = lab.vectors()
        >>> v.counts.tolist(), v.first.tolist()
        ([[1, 0, 0, 1], [0, 1, 0, 0]], [0, 2])
        """
        n, m = self.lo.shape
        codes = self.codes(np.int32 if n < 2**31 else np.int64)
        key = row_codes([codes[:, j] for j in range(m)]) if m else np.zeros(n, dtype=np.int64)
        u = int(key.max()) + 1 if n else 0
        first = np.full(u, n, dtype=np.int64)
        np.minimum.at(first, key, np.arange(n))  # each vector's first row
        counts = np.bincount(key * 4 + self.cell, minlength=4 * u).reshape(u, 4)
        return LabelVectors(
            self.lo[first].astype(np.int64),
            self.hi[first].astype(np.int64),
            counts.astype(np.int64),
            first,
            codes[first].astype(np.int64),
        )


@dataclass
class ItemsetAudit:
    """What the audit found. ``extremes[f] = (min, max)`` over the audited itemsets;
    ``violations``: itemsets outside a bound; ``offenders``: the worst, described."""

    itemsets: int = 0
    plain: int = 0
    disjunctive: int = 0
    extremes: dict[str, tuple[float, float]] = field(default_factory=dict)
    max_tau: float = 0.0
    violations: int = 0
    offenders: list[dict] = field(default_factory=list)


def plain_counts(labels: Labels, max_attributes: int, vectors: LabelVectors | None = None):
    """Yield (attribute subset, 4-fold counts (k, 4), first row of each itemset) for every
    subset of at most ``max_attributes`` attributes, the empty itemset first (counted over the
    distinct label vectors: ``vectors``, or ``labels.vectors()``)."""
    vec = vectors if vectors is not None else labels.vectors()
    u, m = vec.codes.shape
    n = len(labels.cell)
    stack: list[tuple[tuple[int, ...], np.ndarray]] = [((), np.zeros(u, dtype=np.int64))]
    while stack:
        subset, key = stack.pop()
        k = int(key.max()) + 1 if u else 0
        # float weights are exact here: every count is an integer below 2**53
        counts = np.column_stack(
            [np.bincount(key, weights=vec.counts[:, c], minlength=k) for c in range(4)]
        ).astype(np.int64)
        first = np.full(k, n, dtype=np.int64)
        np.minimum.at(first, key, vec.first)
        yield subset, counts.reshape(k, 4), first
        if len(subset) >= max_attributes:
            continue
        start = subset[-1] + 1 if subset else 0
        for j in range(m - 1, start - 1, -1):
            card = int(vec.codes[:, j].max()) + 1 if u else 1
            child = np.unique(key * card + vec.codes[:, j], return_inverse=True)[1].ravel()
            stack.append(((*subset, j), child))


def random_counts(
    labels: Labels,
    count: int,
    seed: int,
    max_arity: int = 5,
    chunk: int = 128,
    vectors: LabelVectors | None = None,
):
    """Yield (attribute index matrix, [v, w] ranges, 4-fold counts) for ``count`` seeded random
    disjunctive itemsets (empty covers dropped), counted over the distinct label vectors."""
    m = labels.lo.shape[1]
    if m == 0 or count == 0:
        return
    vec = vectors if vectors is not None else labels.vectors()
    lo, hi, n = vec.lo, vec.hi, len(vec.first)
    rng = np.random.default_rng(seed)
    onehot = vec.counts.astype(np.float64)  # exact: integer counts below 2**53
    done = 0
    while done < count:
        c = min(chunk, count - done)
        arity = rng.integers(1, min(max_arity, m) + 1, size=c)
        chosen = np.argsort(rng.random((c, m)), axis=1)
        active = np.arange(m)[None, :] < arity[:, None]
        attrs = np.where(active, chosen, -1)
        a = rng.integers(0, labels.sizes[None, :], size=(c, m))
        b = rng.integers(0, labels.sizes[None, :], size=(c, m))
        v, w = np.minimum(a, b), np.maximum(a, b)
        mask = np.ones((c, n), dtype=bool)
        for slot in range(m):
            j = attrs[:, slot]
            use = j >= 0
            if not use.any():
                continue
            jj = np.where(use, j, 0)
            vv = np.take_along_axis(v, jj[:, None], axis=1)
            ww = np.take_along_axis(w, jj[:, None], axis=1)
            inside = (vv <= lo[:, jj].T) & (ww >= hi[:, jj].T)
            mask &= np.where(use[:, None], inside, True)
        counts = (mask.astype(np.float64) @ onehot).astype(np.int64)
        keep = counts.sum(axis=1) > 0
        yield attrs[keep], np.stack([v, w], axis=-1)[keep], counts[keep]
        done += c


def _evaluate(counts: np.ndarray, p_minus: float, t: float, names: tuple[str, ...]):
    a, b, c, d = counts.T
    values = measures(a, b, c, d, p_minus)
    bad = np.zeros(len(counts), dtype=bool)
    for f in names:
        lo, hi = bounds(f, t, p_minus)
        x = values[f]
        tol = 1e-9 * np.maximum(1.0, np.abs(np.where(np.isfinite(x), x, 0.0)))
        bad |= ~((x >= lo - tol) & (x <= hi + tol))
    ta = tau(a, b, c, d, p_minus)
    bad |= ta > t + 1e-9
    return values, ta, bad


def audit_itemsets(
    labels: Labels,
    p_minus: float,
    t: float,
    names: tuple[str, ...] = MEASURES,
    max_attributes: int | None = None,
    min_support: int = 1,
    random_itemsets: int = 0,
    seed: int = 0,
    keep_offenders: int = 20,
) -> ItemsetAudit:
    """Audit the itemsets of ``labels`` (module docstring) against the bounds at ``t``."""
    m = labels.lo.shape[1]
    depth = m if max_attributes is None else min(max_attributes, m)
    out = ItemsetAudit(extremes={f: (np.inf, -np.inf) for f in names})
    worst: list[tuple[float, dict]] = []

    def account(counts, describe):
        support = counts.sum(axis=1)
        sel = support >= min_support
        if not sel.any():
            return 0
        counts = counts[sel]
        values, ta, bad = _evaluate(counts, p_minus, t, names)
        for f in names:
            x = values[f][np.isfinite(values[f])]
            if len(x):
                lo, hi = out.extremes[f]
                out.extremes[f] = (min(lo, float(x.min())), max(hi, float(x.max())))
        out.max_tau = max(out.max_tau, float(ta.max()))
        out.violations += int(bad.sum())
        for i in np.flatnonzero(bad)[:keep_offenders]:
            a, b, c, d = (int(x) for x in counts[i])
            row = {"itemset": describe(np.flatnonzero(sel)[i]), "a": a, "b": b, "c": c, "d": d}
            row["tau"] = round(float(ta[i]), 6)
            row.update({f: round(float(values[f][i]), 6) for f in names})
            worst.append((float(ta[i]), row))
        return len(counts)

    vectors = labels.vectors()
    for subset, counts, first in plain_counts(labels, depth, vectors):

        def describe(i, subset=subset, first=first):
            r = int(first[i])
            return {labels.names[j]: [int(labels.lo[r, j]), int(labels.hi[r, j])] for j in subset}

        got = account(counts, describe)
        out.plain += got
    for attrs, ranges, counts in random_counts(labels, random_itemsets, seed, vectors=vectors):

        def describe(i, attrs=attrs, ranges=ranges):
            return {
                labels.names[j]: [int(ranges[i, j, 0]), int(ranges[i, j, 1])]
                for j in attrs[i]
                if j >= 0
            } | {"disjunctive": True}

        out.disjunctive += account(counts, describe)
    out.itemsets = out.plain + out.disjunctive
    worst.sort(key=lambda x: -x[0])
    out.offenders = [r for _, r in worst[:keep_offenders]]
    return out
