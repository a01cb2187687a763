"""Pure checkers of the generalisation kinds (spec section 3), each reading the audit frame
(``privfair.components.generalisation.audit``) and naming its offenders.

p- and tau(R) are recomputed here from the input's decision and PD columns of the frame; the
class structure comes from the ``lineage`` sidecar (row_id, class), the labels from the published table.
A q-block is what a reader of the published columns forms: the rows sharing every published PND
label and the published PD value (``__pd_out``), whatever that value is.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privfair.components.core.checks import CheckResult, make_result, retained
from privfair.components.generalisation import guarantees as G
from privfair.components.generalisation.audit import pnd_columns
from privfair.components.generalisation.dsabre import dichotomize
from privfair.components.generalisation.itemsets import Labels, audit_itemsets, row_codes
from privfair.components.generalisation.measures import bounds, cell_of, four_fold, tau

__all__ = [
    "labels_of",
    "label_keys",
    "q_block_keys",
    "p_minus_of",
    "check_pd_groups",
    "check_truthful_generalisation",
    "check_class_labels",
    "check_decision_closeness",
    "check_leaf_closeness",
    "check_bounded_discrimination",
    "check_class_size",
    "check_disjoint_classes",
    "check_dichotomy_leaves",
]

EPS = 1e-9


def _missing(g, audit: pd.DataFrame, attributes) -> CheckResult | None:
    gone = [a for a in attributes if f"__lo__{a}" not in audit.columns]
    if gone:
        return make_result(g, False, None, None, f"PND attributes not in this release: {gone[:5]}")
    return None


def p_minus_of(audit: pd.DataFrame) -> float:
    return float(audit["__negative"].to_numpy().mean())


def _counts(keys: np.ndarray, protected: np.ndarray, negative: np.ndarray):
    """(unique keys, (k, 4) 4-fold counts per key) with cell = 2*(1-protected) + (1-negative)."""
    uniq, inv = np.unique(keys, return_inverse=True)
    cell = cell_of(protected, negative)
    counts = np.bincount(inv.ravel() * 4 + cell, minlength=4 * len(uniq)).reshape(len(uniq), 4)
    return uniq, counts


def _root(audit: pd.DataFrame) -> tuple[int, int, int, int]:
    """The input's 4-fold table (a, b, c, d)."""
    return four_fold(audit["__protected"].to_numpy() == 1, audit["__negative"].to_numpy() == 1)


def label_keys(r: pd.DataFrame, attributes) -> np.ndarray:
    """A dense id per distinct published label vector over ``attributes``."""
    if not attributes:
        return np.zeros(len(r), dtype=np.int64)
    # the frame's own arrays (int32 ranks): row_codes widens as it packs, a column at a time
    return row_codes([r[f"__{e}__{a}"].to_numpy() for a in attributes for e in ("lo", "hi")])


def q_block_keys(r: pd.DataFrame, attributes) -> np.ndarray:
    """A dense id per q-block a reader forms: the published labels over ``attributes`` and the
    published PD value (its code ``__pd_out``)."""
    return row_codes([label_keys(r, attributes), r["__pd_out"].to_numpy(np.int64)])


def check_pd_groups(g: G.PublishedGroups, audit: pd.DataFrame) -> CheckResult:
    """C1 (PD attribute): each published PD value stands for one group and each group for one
    value, and each row publishes its own (its group's name, or its value when the PD attribute
    is published unchanged)."""
    r = retained(audit)
    out_col, in_col = f"__out_col__{g.attribute}", f"__in_col__{g.attribute}"
    if out_col not in r.columns or in_col not in r.columns:
        return make_result(
            g, False, None, None, f"the PD attribute '{g.attribute}' is not published"
        )
    protected = r["__protected"].to_numpy().astype(bool)
    # each row's published value against the one it should publish, compared once per
    # distinct (published, wanted) pair: no Python object per row (10M rows: ~1.6 GB)
    out_codes, out_values = pd.factorize(r[out_col], use_na_sentinel=False)
    out_values = np.asarray(out_values, dtype=object)
    if g.groups:
        want_codes = protected.astype(np.int64)
        want_values = np.array(["unprotected", "protected"], dtype=object)
        form = "its group ('protected' / 'unprotected')"
    else:
        want_codes, want_values = pd.factorize(r[in_col], use_na_sentinel=False)
        want_values = np.asarray(want_values, dtype=object)
        form = "its input value"
    width = max(len(want_values), 1)
    pair_ids, pair_of = np.unique(
        out_codes.astype(np.int64) * width + want_codes, return_inverse=True
    )
    o, w = out_values[pair_ids // width], want_values[pair_ids % width]
    wrong = ~((o == w) | (pd.isna(o) & pd.isna(w)))[pair_of.ravel()]  # a null publishes a null
    code = r["__pd_out"].to_numpy(np.int64)
    pairs = np.unique(code * 2 + protected)
    # a published value seen with both groups, or a group published under several values
    mixed = np.unique(pairs // 2, return_counts=True)
    split = np.unique(pairs % 2, return_counts=True)
    values_of_both = int((mixed[1] > 1).sum())
    groups_split = int((split[1] > 1).sum())
    n_values = len(mixed[0])
    ok = not wrong.any() and values_of_both == 0 and groups_split == 0
    off = []
    if not ok:
        vals, counts = np.unique(out_values[out_codes[wrong]].astype(str), return_counts=True)
        order = np.argsort(-counts, kind="stable")
        off = [{"published": str(vals[i]), "rows": int(counts[i])} for i in order]
    msg = (
        f"{n_values} published values of '{g.attribute}', one per group, each row publishing {form}"
        if ok
        else f"'{g.attribute}' is not published at the granularity of the bound: "
        f"{n_values} published values for 2 groups ({groups_split} of 2 groups published under "
        f"several values, {values_of_both} values published for both groups); "
        f"{int(wrong.sum())} of {len(r)} rows do not publish {form}"
    )
    return make_result(g, ok, n_values, 2, msg, off)


def check_truthful_generalisation(g: G.TruthfulGeneralisation, audit: pd.DataFrame) -> CheckResult:
    """C2: every published PND cell is a label over the input's domain containing the original."""
    miss = _missing(g, audit, g.attributes)
    if miss:
        return miss
    r = retained(audit)
    off = []
    for a in g.attributes:
        lo, hi, rank = (r[f"__{e}__{a}"].to_numpy() for e in ("lo", "hi", "rank"))
        bad = (lo < 0) | (lo > rank) | (rank > hi)
        if bad.any():
            rows = r["__row_id"].to_numpy()[bad]
            off.append({"attribute": a, "cells": int(bad.sum()), "first_row": int(rows[0])})
    cells = len(r) * len(g.attributes)
    return make_result(
        g,
        not off,
        sum(o["cells"] for o in off),
        0,
        f"{sum(o['cells'] for o in off)} of {cells} PND cells are not a label holding the "
        "original value"
        if off
        else f"all {cells} PND cells are labels holding the original value",
        off,
    )


def check_class_labels(g: G.ClassLabels, audit: pd.DataFrame) -> CheckResult:
    """C3: a class shares one label per attribute, exactly [min, max] of its original values."""
    miss = _missing(g, audit, g.attributes)
    if miss:
        return miss
    r = retained(audit)
    cls = r["__class"].to_numpy()
    off = []
    for a in g.attributes:
        df = pd.DataFrame(
            {"c": cls, "lo": r[f"__lo__{a}"], "hi": r[f"__hi__{a}"], "r": r[f"__rank__{a}"]}
        )
        agg = df.groupby("c").agg(
            lo_min=("lo", "min"),
            lo_max=("lo", "max"),
            hi_min=("hi", "min"),
            hi_max=("hi", "max"),
            r_min=("r", "min"),
            r_max=("r", "max"),
        )
        bad = agg[
            (agg.lo_min != agg.lo_max)
            | (agg.hi_min != agg.hi_max)
            | (agg.lo_min != agg.r_min)
            | (agg.hi_max != agg.r_max)
        ]
        for c in bad.index[:5]:
            off.append({"attribute": a, "class": int(c)})
        if len(bad) > 5:
            off.append({"attribute": a, "more_classes": int(len(bad) - 5)})
    n_cls = len(np.unique(cls))
    return make_result(
        g,
        not off,
        len(off),
        0,
        f"classes whose label is not exactly [min, max] of their values: {off[:3]}"
        if off
        else f"{n_cls} classes, each labelled [min, max] of its values on every attribute",
        off,
    )


def check_decision_closeness(g: G.DecisionCloseness, audit: pd.DataFrame) -> CheckResult:
    """C4: every q-block a reader forms (published labels + published PD value) has
    |neg_rate - p-| <= t."""
    miss = _missing(g, audit, g.attributes)
    if miss:
        return miss
    r = retained(audit)
    if r.empty:
        return make_result(g, False, None, g.t, "no rows published")
    p_minus = p_minus_of(audit)
    pd_out = r["__pd_out"].to_numpy()
    neg_out = r["__negative_out"].to_numpy()
    if (pd_out < 0).any() or (neg_out < 0).any():
        return make_result(
            g,
            False,
            None,
            g.t,
            "the PD attribute or the decision is not published (or the decision holds a value "
            "the input's does not)",
        )
    keys = q_block_keys(r, g.attributes)
    uniq, counts = _counts(keys, np.zeros(len(keys)), neg_out)
    size = counts.sum(axis=1)
    dist = np.abs(counts[:, 2] / size - p_minus)  # protected=0 above: cell c holds negatives
    bad = dist > g.t + EPS
    observed = float(dist.max())
    off = pd.DataFrame({"q_block_rows": size[bad], "distance": dist[bad]})
    return make_result(
        g,
        not bad.any(),
        round(observed, 9),
        g.t,
        f"max |neg rate - p-| over {len(uniq)} q-blocks of the published labels and PD value = "
        f"{observed:.6g} (p- = {p_minus:.6g}); "
        f"{int(bad.sum())} q-blocks above t = {g.t:.6g}",
        off.sort_values("distance", ascending=False),
    )


def check_leaf_closeness(g: G.LeafCloseness, audit: pd.DataFrame) -> CheckResult:
    """C5: t_eff = max{t, tau(R)}; every class has tau <= t_eff; one class when t < tau(R)."""
    p_minus = p_minus_of(audit)
    tau_r = float(tau(*_root(audit), p_minus))
    want = max(g.t, tau_r)
    if abs(g.t_eff - want) > EPS:
        return make_result(
            g,
            False,
            g.t_eff,
            want,
            f"t_eff = {g.t_eff:.6g} but max(t, tau(R)) = max({g.t:.6g}, {tau_r:.6g}) = {want:.6g}",
        )
    r = retained(audit)
    uniq, counts = _counts(
        r["__class"].to_numpy(), r["__protected"].to_numpy(), r["__negative"].to_numpy()
    )
    taus = tau(*counts.T, p_minus)
    bad = taus > g.t_eff + EPS
    msg = f"max tau over {len(uniq)} classes = {float(taus.max()):.6g} (t_eff = {want:.6g})"
    ok = not bad.any()
    off = [{"class": int(c), "tau": float(x)} for c, x in zip(uniq[bad], taus[bad], strict=False)]
    if g.t < tau_r - EPS:
        attrs = pnd_columns(audit)
        whole = all(
            (r[f"__lo__{a}"] == 0).all() and (r[f"__hi__{a}"] == r[f"__size__{a}"] - 1).all()
            for a in attrs
        )
        if len(uniq) != 1 or not whole:
            ok = False
            msg += (
                f"; t < tau(R) = {tau_r:.6g} requires one class at the global ranges, found "
                f"{len(uniq)} classes" + ("" if whole else " not all at the global ranges")
            )
    return make_result(g, ok, round(float(taus.max()), 9), want, msg, off)


def labels_of(audit: pd.DataFrame, out: bool = True) -> Labels:
    names = pnd_columns(audit)
    r = retained(audit)

    def get(e: str) -> np.ndarray:
        # filled a column at a time, in the frame's own width (its ranks are int32: half the
        # memory of 10M rows); the audit widens what it computes with
        cols = [r[f"__{e}__{a}"].to_numpy() for a in names]
        dtype = np.result_type(np.int32, *(c.dtype for c in cols))
        out = np.empty((len(r), len(names)), dtype=dtype)
        for j, c in enumerate(cols):
            out[:, j] = c
        return out

    sizes = np.array([int(r[f"__size__{a}"].iloc[0]) for a in names], dtype=np.int64)
    suffix = "_out" if out else ""
    cell = cell_of(r[f"__protected{suffix}"].to_numpy(), r[f"__negative{suffix}"].to_numpy())
    return Labels(names, get("lo"), get("hi"), sizes, cell)


def check_bounded_discrimination(g: G.BoundedDiscrimination, audit: pd.DataFrame) -> CheckResult:
    """C6: every audited PND itemset's measures within the two-sided bounds at t, tau <= t."""
    r = retained(audit)
    if r.empty:
        return make_result(g, False, None, None, "no rows published")
    if (r["__protected_out"] < 0).any() or (r["__negative_out"] < 0).any():
        return make_result(
            g,
            False,
            None,
            None,
            "the PD attribute or the decision is not published, or publishes a value that names "
            "no PD group / no decision of the input",
        )
    labels = labels_of(audit)
    p_minus = p_minus_of(audit)
    found = audit_itemsets(
        labels,
        p_minus,
        g.t,
        tuple(g.measures),
        g.exhaustive_up_to,
        g.min_support,
        g.random_itemsets,
        g.seed,
    )
    expected = {f: [round(x, 6) for x in bounds(f, g.t, p_minus)] for f in g.measures}
    observed = {f: [round(x, 6) for x in found.extremes[f]] for f in g.measures}
    observed["tau"] = round(found.max_tau, 6)
    return make_result(
        g,
        found.violations == 0,
        observed,
        expected | {"tau": g.t},
        f"{found.itemsets} itemsets audited ({found.plain} over the published labels, "
        f"{found.disjunctive} disjunctive); {found.violations} outside the bounds at "
        f"t = {g.t:.6g} (p- = {p_minus:.6g})",
        found.offenders,
    )


def check_class_size(g: G.ClassSize, audit: pd.DataFrame) -> CheckResult:
    """C7: every q-block (published labels and PD value; ``over="q_blocks"``) or every class
    (published labels only; ``over="classes"``) has >= k rows."""
    r = retained(audit)
    attrs = pnd_columns(audit)
    what = "q-blocks" if g.over == "q_blocks" else "classes"
    if g.over == "q_blocks":
        if (r["__pd_out"] < 0).any():
            return make_result(g, False, None, g.k, "the PD attribute is not published")
        keys = q_block_keys(r, attrs)
    else:
        keys = label_keys(r, attrs)
    sizes = np.bincount(keys) if len(keys) else np.zeros(0, dtype=np.int64)
    if len(audit) < g.k:
        return make_result(g, True, len(audit), g.k, "fewer rows than k: not applicable")
    bad = sizes[sizes < g.k]
    return make_result(
        g,
        len(sizes) > 0 and not len(bad),
        int(sizes.min()) if len(sizes) else 0,
        g.k,
        f"{len(bad)} of {len(sizes)} {what} have fewer than {g.k} rows"
        if len(bad)
        else f"smallest of {len(sizes)} {what} has {int(sizes.min())} rows",
        [{"class_size": int(s)} for s in bad],
    )


def check_disjoint_classes(g: G.DisjointClasses, audit: pd.DataFrame) -> CheckResult:
    """C8: any two classes have disjoint labels on at least one attribute."""
    miss = _missing(g, audit, g.attributes)
    if miss:
        return miss
    r = retained(audit)
    cls = r["__class"].to_numpy()
    uniq, first = np.unique(cls, return_index=True)
    if not g.attributes:
        ok = len(uniq) <= 1
        return make_result(g, ok, len(uniq), 1, f"{len(uniq)} classes and no PND attribute")
    lo = np.column_stack([r[f"__lo__{a}"].to_numpy(np.int64)[first] for a in g.attributes])
    hi = np.column_stack([r[f"__hi__{a}"].to_numpy(np.int64)[first] for a in g.attributes])
    n = len(uniq)
    off = []
    chunk = max(1, 4_000_000 // max(1, n * len(g.attributes)))
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        # boxes i (rows s..e) and j overlap on an attribute when lo_i <= hi_j and lo_j <= hi_i
        overlap = (lo[s:e, None, :] <= hi[None, :, :]) & (lo[None, :, :] <= hi[s:e, None, :])
        clash = overlap.all(axis=2)
        upper = np.arange(n)[None, :] > np.arange(s, e)[:, None]
        i, j = np.nonzero(clash & upper)
        for a, b in zip(i[:5], j[:5], strict=False):
            off.append({"class": int(uniq[s + a]), "other": int(uniq[b])})
        if len(off) >= 20:
            break
    return make_result(
        g,
        not off,
        len(off),
        0,
        f"{len(off)} pairs of classes overlap on every attribute"
        if off
        else f"{n} classes pairwise separated on at least one attribute",
        off,
    )


def check_dichotomy_leaves(g: G.DichotomyLeaves, audit: pd.DataFrame) -> CheckResult:
    """C9: the classes' count vectors equal the Dichotomize leaves of the input's counts."""
    if g.k < 1:
        return make_result(g, False, g.k, 1, f"k = {g.k} is not a class size (k >= 1)")
    p_minus = p_minus_of(audit)
    want = sorted(dichotomize(_root(audit), g.t, g.k, p_minus, g.k_over, g.split_pairs))
    r = retained(audit)
    _, counts = _counts(
        r["__class"].to_numpy(), r["__protected"].to_numpy(), r["__negative"].to_numpy()
    )
    got = sorted(tuple(int(x) for x in c) for c in counts)
    ok = got == want
    diff = []
    if not ok:
        from collections import Counter

        cw, cg = Counter(want), Counter(got)
        diff = [
            {"counts": list(k), "expected": cw[k], "found": cg[k]}
            for k in (cw | cg)
            if cw[k] != cg[k]
        ]
    return make_result(
        g,
        ok,
        len(got),
        len(want),
        f"{len(got)} classes against {len(want)} Dichotomize leaves (t = {g.t:.6g}, k = {g.k} "
        f"over {g.k_over.replace('_', '-')}{', two-row leaves split' if g.split_pairs else ''})"
        + ("" if ok else f"; {len(diff)} count vectors differ"),
        diff,
    )
