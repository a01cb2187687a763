"""Checkers of the microaggregation guarantee kinds, each recomputing its guarantee from the
audit frame of ``privfair.components.microaggregation.audit`` (one row per input row: the input, the
published table and the lineage joined) and naming the offending groups.

Comparisons of ratios are exact (integers / fractions); float comparisons use the tolerance the
guarantee declares.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pandas as pd

from privfair.components.core.checks import (
    CheckResult,
    make_result,
    retained,
    retained_column,
    unfit,
    unfit_result,
)
from privfair.components.microaggregation import guarantees as G
from privfair.components.microaggregation.encoding import scale_of

__all__ = [
    "check_group_size_range",
    "check_group_means",
    "check_group_representatives",
    "check_qis_unchanged",
    "check_mean_preservation",
    "check_fairlet_composition",
    "check_fairlet_count",
    "check_correction_direction",
    "check_local_fairness",
    "check_minimal_correction",
    "check_demographic_parity_bound",
    "check_seed_nearest",
    "check_parameter_validity",
]


def _tau(x: float) -> Fraction:
    return Fraction(str(x)).limit_denominator(10**9)


def _whole(audit: pd.DataFrame) -> dict:
    """Facts of the whole table carried by the audit frame of a part of it (group count, QI
    scalings: ``audit.part_evidence``); empty for a whole table's frame."""
    return audit.attrs.get("whole") or {}


def _qi_columns(audit: pd.DataFrame, names: tuple[str, ...]) -> tuple[list, list, list]:
    """(published, input, missing): the audit's encoded QI columns named in ``names`` (every
    encoded QI column when ``names`` is empty), and the names with no such column."""
    side: dict[str, str] = {}
    for c in audit.columns:
        for enc in ("num", "hot"):
            if c.startswith(f"__out_{enc}__"):
                side[c.removeprefix(f"__out_{enc}__")] = enc
    keep, missing = [], []
    for n in list(names) or list(side):
        # a nominal QI published as itself is audited through its one-hot columns "n=level"
        found = [n] if n in side else [c for c in side if c.startswith(f"{n}=")]
        keep += found
        if not found:
            missing.append(n)
    return (
        [f"__out_{side[n]}__{n}" for n in keep],
        [f"__in_{side[n]}__{n}" for n in keep],
        missing,
    )


def _not_published(missing: list[str]) -> str:
    return f"quasi-identifier columns not published: {missing[:5]}"


def _missing_qis(g, missing: list[str]) -> CheckResult:
    return make_result(g, False, None, None, _not_published(missing))


_PA_COUNTS = ("__group", "__pa_out", "__y_out")
_LABELS = ("__row_id", "__group", "__pa_in", "__pa_out", "__y_in", "__y_out")


def _group_pa_counts(r: pd.DataFrame) -> pd.DataFrame:
    """Per group: m_g, n_g (unfavoured/favoured rows), a, b (positives among them, published)."""
    pa_, y = r["__pa_out"].to_numpy(), r["__y_out"].to_numpy()
    df = pd.DataFrame({"group": r["__group"].to_numpy(), "u": pa_ == 0, "f": pa_ == 1})
    df["a"] = df["u"] & (y == 1)
    df["b"] = df["f"] & (y == 1)
    out = df.groupby("group").sum().astype(np.int64)
    return out.rename(columns={"u": "m_g", "f": "n_g"})


def check_fairlet_composition(g: G.FairletComposition, audit: pd.DataFrame) -> CheckResult:
    """Every group has exactly m unfavoured and n favoured published rows."""
    c = _group_pa_counts(retained(audit, _PA_COUNTS))
    bad = c[(c["m_g"] != g.m) | (c["n_g"] != g.n)][["m_g", "n_g"]]
    return make_result(
        g,
        bad.empty and len(c) > 0,
        f"{len(c) - len(bad)}/{len(c)} groups ({g.m},{g.n})",
        {"m": g.m, "n": g.n},
        f"{len(bad)} groups are not ({g.m},{g.n})-fairlets"
        if len(bad)
        else "every group is an exact fairlet",
        bad,
    )


_COUNT_FIELDS = ("u_in", "f_in", "groups", "rows", "u_left", "f_left")


def summarise_fairlet_count(g: G.FairletCount, audit: pd.DataFrame) -> pd.DataFrame:
    """Input rows per protected group (``u_in``, ``f_in``), groups and rows published, and the
    input rows of each protected group left out (``u_left``, ``f_left``). Groups add up over
    parts that keep every group whole."""
    pa_in = audit["__pa_in"].to_numpy()
    kept = audit["__retained"].to_numpy()
    r = retained(audit, ["__group"])
    row = (
        (pa_in == 0).sum(),
        (pa_in == 1).sum(),
        r["__group"].nunique(),
        len(r),
        (pa_in[~kept] == 0).sum(),
        (pa_in[~kept] == 1).sum(),
    )
    return pd.DataFrame([[int(v) for v in row]], columns=list(_COUNT_FIELDS))


def decide_fairlet_count(g: G.FairletCount, summary: pd.DataFrame) -> CheckResult:
    u_in, f_in, n_groups, rows, u_left, f_left = (
        int(summary[c].to_numpy(np.int64).sum()) for c in _COUNT_FIELDS
    )
    expected = min(u_in // g.m, f_in // g.n)
    ok = n_groups == expected and rows == expected * (g.m + g.n) and (u_left < g.m or f_left < g.n)
    return make_result(
        g,
        ok,
        {"groups": n_groups, "rows": rows, "left_unfavoured": u_left, "left_favoured": f_left},
        {"groups": expected, "rows": expected * (g.m + g.n)},
        f"{n_groups} groups of {rows} rows; expected {expected} groups",
    )


def check_fairlet_count(g: G.FairletCount, audit: pd.DataFrame) -> CheckResult:
    """#groups = min(#U_in // m, #F_in // n); #out = #groups (m+n); leftovers too few for one more."""
    return decide_fairlet_count(g, summarise_fairlet_count(g, audit))


def check_group_size_range(g: G.GroupSizeRange, audit: pd.DataFrame) -> CheckResult:
    sizes = retained(audit, ["__group"]).groupby("__group").size()
    hi = g.max_size if g.max_size is not None else np.inf
    bad = sizes[(sizes < g.min_size) | (sizes > hi)]
    return make_result(
        g,
        bad.empty and len(sizes) > 0,
        {"min": int(sizes.min()), "max": int(sizes.max())} if len(sizes) else None,
        {"min": g.min_size, "max": g.max_size},
        f"{len(bad)} groups outside [{g.min_size}, {g.max_size}]",
        pd.DataFrame({"size": bad}),
    )


def check_group_means(g: G.GroupMeans, audit: pd.DataFrame) -> CheckResult:
    """Members of a group share one published QI vector, equal to the mean of their input QIs."""
    outs, ins, missing = _qi_columns(audit, g.quasi_identifiers)
    if missing:
        return _missing_qis(g, missing)
    r = retained(audit, ["__group", *outs, *ins])
    by = r.groupby("__group")
    spread = (by[outs].max() - by[outs].min()).abs().max(axis=1)
    mean_in = by[ins].mean().to_numpy()
    first_out = by[outs].first().to_numpy()
    tol = g.rtol * np.maximum(np.abs(mean_in), 1.0)
    err = (np.abs(first_out - mean_in) > tol).any(axis=1)
    bad_ids = sorted(set(spread.index[spread.to_numpy() > 0]) | set(spread.index[err]))
    bad = pd.DataFrame({"group": bad_ids})
    return make_result(
        g,
        not bad_ids and len(r) > 0,
        f"{len(spread) - len(bad_ids)}/{len(spread)} groups",
        "all groups",
        f"{len(bad_ids)} groups whose QIs are not one shared mean vector",
        bad,
    )


def check_group_representatives(g: G.GroupRepresentatives, audit: pd.DataFrame) -> CheckResult:
    """Members share one published QI vector: per numeric QI the input mean rounded to
    ``g.decimals``, per ordinal QI the lower median, per nominal QI the mode of the members'
    non-null values (recomputed from the input's one-hot columns; ties to the lowest level),
    a null only for a group whose members are all null."""
    outs, ins, missing = _qi_columns(audit, g.quasi_identifiers)
    if missing:
        return _missing_qis(g, missing)
    grp = retained_column(audit, "__group")
    if not len(grp):
        return make_result(g, False, None, None, "no rows published")
    groups, gid = np.unique(grp, return_inverse=True)
    n_groups = len(groups)
    sizes = np.bincount(gid)
    wrong = np.zeros(n_groups, dtype=bool)
    reasons: dict[int, str] = {}
    nominal: dict[str, list[tuple[str, str]]] = {}
    for o, i in zip(outs, ins, strict=True):
        name = o.split("__", 2)[2]
        out = retained_column(audit, o, np.float64)
        first = first_rows(out, gid, n_groups)
        spread = np.abs(out - first[gid]) > 0
        wrong |= np.bincount(gid, weights=spread, minlength=n_groups) > 0
        if o.startswith("__out_hot__"):
            nominal.setdefault(name.split("=", 1)[0], []).append((o, i))
            continue
        x = retained_column(audit, i, np.float64)
        if name in g.ordinal:
            order = np.lexsort((x, gid))
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            want = x[order][starts + (sizes - 1) // 2]
            bad = first != want
            why = "not the lower median"
        elif name in g.decimals:
            # the mean of the values themselves (exact sums in units of 10^-(d+6): independent
            # of summation order), then half-to-even at d: d is public and may be coarser than
            # the values, so they are not rounded to d before they are averaged
            unit, fine = 10.0 ** g.decimals[name], 1e6
            units = np.bincount(gid, weights=np.rint(x * (unit * fine)))
            want = np.round(units / sizes / fine) / unit
            bad = np.abs(first - want) > g.rtol * np.maximum(np.abs(want), 1.0)
            why = f"not the mean rounded to {g.decimals[name]} decimals"
        else:
            return make_result(g, False, None, None, f"no precision declared for '{name}'")
        for k in np.flatnonzero(bad):
            reasons.setdefault(int(groups[k]), f"{name}: {why}")
        wrong |= bad
    for attr, pairs in nominal.items():
        hot_in = np.column_stack([retained_column(audit, i, np.float64) for _, i in pairs])
        hot_out = np.column_stack(
            [first_rows(retained_column(audit, o, np.float64), gid, n_groups) for o, _ in pairs]
        )
        # the mode over the members' non-null values (ties to the lowest level); an all-zero
        # one-hot row (a null) only for a group none of whose members has a value
        counts = np.zeros((n_groups, len(pairs)))
        np.add.at(counts, gid, hot_in)
        mode = counts.argmax(axis=1)
        valued = counts[np.arange(n_groups), mode] > 0
        want = np.zeros((n_groups, len(pairs)))
        want[np.flatnonzero(valued), mode[valued]] = 1.0
        bad = (hot_out != want).any(axis=1)
        null_out = valued & (hot_out.sum(axis=1) == 0)
        for k in np.flatnonzero(bad):
            why = "a null where members have values" if null_out[k] else "not the mode"
            reasons.setdefault(int(groups[k]), f"{attr}: {why} (the mode of its non-null values)")
        wrong |= bad
    for k in np.flatnonzero(wrong):
        reasons.setdefault(int(groups[k]), "members differ")
    off = [{"group": k, "reason": v} for k, v in sorted(reasons.items())]
    return make_result(
        g,
        not off,
        f"{n_groups - len(off)}/{n_groups} groups",
        "all groups",
        f"{len(off)} groups whose QIs are not one representative vector "
        f"(decimals {dict(sorted(g.decimals.items()))}, ordinal {list(g.ordinal)})",
        off,
    )


def first_rows(values: np.ndarray, gid: np.ndarray, n_groups: int) -> np.ndarray:
    """The value of each group's first row."""
    out = np.zeros(n_groups)
    out[gid[::-1]] = values[::-1]
    return out


def check_qis_unchanged(g: G.QIsUnchanged, audit: pd.DataFrame) -> CheckResult:
    outs, ins, missing = _qi_columns(audit, g.quasi_identifiers)
    if missing:
        return _missing_qis(g, missing)
    r = retained(audit, ["__row_id", *outs, *ins])
    diff = (r[outs].to_numpy() != r[ins].to_numpy()).any(axis=1)
    bad = r.loc[diff, ["__row_id"]]
    return make_result(
        g,
        not diff.any(),
        int(diff.sum()),
        0,
        f"{int(diff.sum())} published rows with changed QIs",
        bad,
    )


def summarise_mean_preservation(g: G.MeanPreservation, audit: pd.DataFrame) -> pd.DataFrame:
    """The published rows (``__rows``) and the sums of each named QI column over them, published
    (``__out_...``) and input (``__in_...``)."""
    outs, ins, missing = _qi_columns(audit, g.quasi_identifiers)
    if missing:
        return unfit(_not_published(missing))
    r = retained(audit, [*outs, *ins])
    sums = np.concatenate([r[outs].to_numpy().sum(axis=0), r[ins].to_numpy().sum(axis=0)])
    return pd.DataFrame([[len(r), *sums.tolist()]], columns=["__rows", *outs, *ins])


def decide_mean_preservation(g: G.MeanPreservation, summary: pd.DataFrame) -> CheckResult:
    if (unfitted := unfit_result(g, summary, None)) is not None:
        return unfitted
    outs = [c for c in summary.columns if c.startswith("__out_")]
    ins = [c for c in summary.columns if c.startswith("__in_")]
    rows = int(summary["__rows"].to_numpy(np.int64).sum())
    s_out = summary[outs].to_numpy(np.float64).sum(axis=0)
    s_in = summary[ins].to_numpy(np.float64).sum(axis=0)
    names = [c.split("__", 2)[2] for c in outs]
    rounding = np.array(
        [rows * 0.5 * 10.0 ** -g.decimals[n] if n in g.decimals else 0.0 for n in names]
    )
    bad = np.abs(s_out - s_in) > g.rtol * np.maximum(np.abs(s_in), 1.0) + rounding
    off = [
        {"column": n, "sum_published": float(a), "sum_input": float(b)}
        for n, a, b, x in zip(names, s_out, s_in, bad, strict=True)
        if x
    ]
    return make_result(
        g, not bad.any(), int(bad.sum()), 0, f"{int(bad.sum())} QI columns whose sum changed", off
    )


def check_mean_preservation(g: G.MeanPreservation, audit: pd.DataFrame) -> CheckResult:
    """Each named QI's sum over the published rows equals its input sum over them, within
    ``rtol`` (and half a unit of ``decimals`` per row where the release rounds it)."""
    return decide_mean_preservation(g, summarise_mean_preservation(g, audit))


def check_correction_direction(g: G.CorrectionDirection, audit: pd.DataFrame) -> CheckResult:
    r = retained(audit, _LABELS)
    changed = r["__y_out"].to_numpy() != r["__y_in"].to_numpy()
    pa_, y_in = r["__pa_in"].to_numpy(), r["__y_in"].to_numpy()
    if g.direction == "positive":
        allowed = (pa_ == 0) & (y_in == 0)
    elif g.direction == "negative":
        allowed = (pa_ == 1) & (y_in == 1)
    else:
        allowed = np.zeros(len(r), dtype=bool)
    bad = changed & ~allowed
    return make_result(
        g,
        not bad.any(),
        {"relabelled": int(changed.sum()), "wrong_direction": int(bad.sum())},
        g.direction,
        f"{int(bad.sum())} labels changed against the '{g.direction}' direction",
        r.loc[bad, ["__row_id", "__group", "__pa_in", "__y_in", "__y_out"]],
    )


def check_local_fairness(g: G.LocalFairness, audit: pd.DataFrame) -> CheckResult:
    """upr(g) >= tau * fpr(g) in every group holding both protected values: a*n_g*den >= i*b*m_g."""
    c = _group_pa_counts(retained(audit, _PA_COUNTS))
    t = _tau(g.tau)
    both = c[(c["m_g"] > 0) & (c["n_g"] > 0)]
    lhs = both["a"].map(int) * both["n_g"].map(int) * t.denominator
    rhs = t.numerator * both["b"].map(int) * both["m_g"].map(int)
    bad = both[lhs < rhs].copy()
    bad["upr"] = bad["a"] / bad["m_g"]
    bad["fpr"] = bad["b"] / bad["n_g"]
    return make_result(
        g,
        bad.empty,
        f"{len(both) - len(bad)}/{len(both)} groups",
        f"upr >= {g.tau} * fpr",
        f"{len(bad)} groups with upr < {g.tau} * fpr",
        bad[["upr", "fpr"]],
    )


def _minimal_relabels(m_g: int, n_g: int, a: int, b: int, tau: Fraction, direction: str) -> int:
    """Fewest single relabels that reach a/m_g >= tau * b/n_g (the paper's loop, exactly)."""
    steps = 0
    while m_g and n_g and Fraction(a, m_g) < tau * Fraction(b, n_g):
        if direction == "positive" and a < m_g:
            a += 1
        elif direction == "negative" and b > 0:
            b -= 1
        else:
            break
        steps += 1
    return steps


def check_minimal_correction(g: G.MinimalCorrection, audit: pd.DataFrame) -> CheckResult:
    """Per group, #relabels == the fewest that satisfy local fairness, counted from the input labels."""
    r = retained(audit, _LABELS)
    pa_, y_in, y_out = r["__pa_in"].to_numpy(), r["__y_in"].to_numpy(), r["__y_out"].to_numpy()
    df = pd.DataFrame(
        {
            "group": r["__group"].to_numpy(),
            "m_g": pa_ == 0,
            "n_g": pa_ == 1,
            "a": (pa_ == 0) & (y_in == 1),
            "b": (pa_ == 1) & (y_in == 1),
            "relabelled": y_in != y_out,
        }
    )
    c = df.groupby("group").sum().astype(np.int64)
    t = _tau(g.tau)
    # the rule is a function of (m_g, n_g, a, b) alone, and groups share a few such tuples
    # (a fairlet's m_g, n_g are fixed): one loop per distinct tuple, not per group
    combos, which = np.unique(
        c[["m_g", "n_g", "a", "b"]].to_numpy(np.int64).reshape(-1, 4), axis=0, return_inverse=True
    )
    per_combo = np.array(
        [
            _minimal_relabels(int(m), int(n), int(a), int(b), t, g.direction)
            for m, n, a, b in combos
        ],
        dtype=np.int64,
    )
    expected = per_combo[which.ravel()] if len(c) else np.zeros(0, dtype=np.int64)
    c["minimal"] = expected
    bad = c[c["relabelled"] != c["minimal"]][["relabelled", "minimal"]]
    return make_result(
        g,
        bad.empty,
        int(c["relabelled"].sum()),
        int(expected.sum()),
        f"{len(bad)} groups whose relabel count is not the minimum for {g.direction} "
        f"correction at tau = {g.tau}",
        bad,
    )


_PARITY_FIELDS = ("nu", "nf", "a", "b")


def summarise_demographic_parity_bound(
    g: G.DemographicParityBound, audit: pd.DataFrame
) -> pd.DataFrame:
    """Published rows of the unfavoured (``nu``) and favoured (``nf``) group, and the positives
    among them (``a``, ``b``)."""
    r = retained(audit, _LABELS)
    pa_, y = r["__pa_out"].to_numpy(), r["__y_out"].to_numpy()
    row = ((pa_ == 0).sum(), (pa_ == 1).sum(), ((pa_ == 0) & (y == 1)).sum())
    row += (((pa_ == 1) & (y == 1)).sum(),)
    return pd.DataFrame([[int(v) for v in row]], columns=list(_PARITY_FIELDS))


def decide_demographic_parity_bound(
    g: G.DemographicParityBound, summary: pd.DataFrame
) -> CheckResult:
    nu, nf, a, b = (int(summary[c].to_numpy(np.int64).sum()) for c in _PARITY_FIELDS)
    if nu == 0 or nf == 0:
        return make_result(g, False, None, g.ratio, "the published table lacks one protected group")
    t = _tau(g.ratio)
    ok = a * nf * t.denominator >= t.numerator * b * nu
    pr_u, pr_f = a / nu, b / nf
    if g.max_difference is not None:
        ok = ok and abs(pr_u - pr_f) <= g.max_difference + 1e-12
    return make_result(
        g,
        ok,
        {"pr_unfavoured": pr_u, "pr_favoured": pr_f, "dpar": abs(pr_u - pr_f)},
        {"ratio": g.ratio, "max_difference": g.max_difference},
        f"PR unfavoured {pr_u:.4f} vs favoured {pr_f:.4f}",
    )


def check_demographic_parity_bound(g: G.DemographicParityBound, audit: pd.DataFrame) -> CheckResult:
    """PR_U(out) >= ratio * PR_F(out) (exact), and |PR_U - PR_F| <= max_difference when set."""
    return decide_demographic_parity_bound(g, summarise_demographic_parity_bound(g, audit))


def _mixed_input(audit: pd.DataFrame, scaling: str) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The input QIs of the audit frame in ``scaling``: (numeric block, nominal codes, level
    counts). Nominal codes (-1 = missing) are read back from the one-hot ``__in_hot__<a>=<v>``
    columns, grouped by attribute; distances computed on them equal one-hot distances."""
    num = [c for c in audit.columns if c.startswith("__in_num__")]
    x = audit[num].to_numpy(dtype=np.float64)
    # a part of a table is replayed in the whole table's scaling (privfair.components.core.parts)
    whole = _whole(audit).get("scale", {}).get(scaling)
    off, sc = whole if whole is not None else scale_of(x, scaling)
    x = (x - off) / sc
    blocks: dict[str, list[str]] = {}
    for c in audit.columns:
        if c.startswith("__in_hot__"):
            blocks.setdefault(c.removeprefix("__in_hot__").split("=", 1)[0], []).append(c)
    codes = np.full((len(audit), len(blocks)), -1, dtype=np.int64)
    for j, cols in enumerate(blocks.values()):
        hot = audit[cols].to_numpy(dtype=np.float64)
        codes[:, j] = np.where(hot.sum(axis=1) > 0, hot.argmax(axis=1), -1)
    return x, codes, [len(c) for c in blocks.values()]


def _to_point(
    num_t: np.ndarray, sq: np.ndarray, codes_t: np.ndarray, n_present: np.ndarray, p: tuple
) -> np.ndarray:
    """Squared one-hot distance of each row to the record ``p`` = (numeric, ||numeric||^2,
    codes, #present): numeric ||x||^2 - 2 x.x_p + ||x_p||^2, plus over nominal attributes
    #present(x) + #present(x_p) - 2 #equal present values.

    ``num_t`` and ``codes_t`` hold one row per column (a suffix of the rows is a view whose rows
    are contiguous, which a matrix-vector product and a comparison read fastest); ``codes_t``
    has -1 for a missing value, and ``p``'s codes -2 there, so that it equals nothing. Counting
    equal codes costs a tenth of gathering the one-hot terms."""
    p_num, p_sq, p_codes, p_present = p
    d = _expanded(p_num, num_t, sq, p_sq)
    if codes_t.shape[0]:
        count = np.int16 if codes_t.shape[0] < 2**15 else np.int64
        equal = (codes_t == p_codes[:, None]).sum(axis=0, dtype=count)
        nominal = np.multiply(equal, -2.0)  # small integers: exact in any order
        nominal += n_present
        nominal += p_present
        d += nominal
    return d


def _expanded(p_num: np.ndarray, num_t: np.ndarray, sq: np.ndarray, p_sq: float) -> np.ndarray:
    """``sq - 2.0 * (p_num @ num_t) + p_sq``, the same floats (x - 2y = -2y + x exactly), in one
    array: a replay makes two of these per group, over every remaining row."""
    d = p_num @ num_t
    d *= -2.0
    d += sq
    d += p_sq
    return d


class _PackedLevels:
    """Nominal attributes packed into few gather indices, for sums of per-level terms.

    ``sum_j w_j[code_j]`` over the attributes of each row (a missing code reads its
    attribute's extra last entry) is one gather per attribute; attributes whose joint
    levels (each with its missing slot) number at most ``limit`` share one index into the
    table of their weights' sums (``np.add.outer``), so the rows are read a few times instead
    of once per attribute. ``sums(w, s)`` equals ``sum_j w_j[codes[s:, j]]`` up to rounding.
    """

    def __init__(self, codes: np.ndarray, levels: list[int], limit: int = 4096) -> None:
        self.packs: list[list[int]] = []
        sizes: list[int] = []
        for j in sorted(range(len(levels)), key=lambda j: levels[j]):
            width = levels[j] + 1
            if self.packs and sizes[-1] * width <= limit:
                self.packs[-1].append(j)
                sizes[-1] *= width
            else:
                self.packs.append([j])
                sizes.append(width)
        self.base = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
        index = np.zeros((len(self.packs), codes.shape[0]), dtype=np.intp)
        for i, pack in enumerate(self.packs):
            for j in pack:
                own = np.where(codes[:, j] >= 0, codes[:, j], levels[j])
                index[i] = index[i] * (levels[j] + 1) + own
        self.index = index + self.base[:, None]

    def sums(self, weights: list[np.ndarray], s: int) -> np.ndarray:
        """``sum_j weights[j][codes[s:, j]]``; ``weights[j]`` has ``levels[j] + 1`` entries.
        The packs' shares are added in pack order, as a sum over the packs' axis would."""
        tables = []
        for pack in self.packs:
            t = weights[pack[0]]
            for j in pack[1:]:
                t = np.add.outer(t, weights[j]).ravel()
            tables.append(t)
        table = np.concatenate(tables)
        out = table.take(self.index[0, s:])
        for index in self.index[1:]:
            out += table.take(index[s:])
        return out


def check_seed_nearest(g: G.SeedNearest, audit: pd.DataFrame, atol: float = 1e-9) -> CheckResult:
    """Replay the greedy trace in the ``g.scaling`` space on every group, or on ``g.sample``
    groups drawn with ``g.seed``, independently of the component's search: the seed is a
    farthest remaining row from the mean of the remaining rows (for MDAV's second group of a
    pair: farthest from the first seed), and the other members are the seed's nearest remaining
    rows (within each protected value for fairlets).

    Rows are put in creation order (dropped rows last), so the rows remaining when group g was
    made are a suffix; their mean comes from suffix sums, and the squared distance to a mean c
    uses the one-hot identity ||e_v - c_j||^2 = ||c_j||^2 + 1 - 2 c_j[v] per nominal attribute.

    With ``g.block_rows`` the blocks are recomputed from the input QIs
    (``blocking.split_blocks`` with ``g.block_m``, ``g.block_n``); every group must lie in one
    block, and each block is replayed on its own rows (still in the table's scaling).
    """
    if g.block_rows is None and (g.block_m or g.block_n):
        return make_result(
            g,
            False,
            (g.block_m, g.block_n),
            (0, 0),
            "block sizes (block_m, block_n) are given without block_rows: not a guarantee",
        )
    num, codes, levels = _mixed_input(audit, g.scaling)
    grp = audit["__group"].to_numpy()
    n_groups = _whole(audit).get("groups", int(grp.max()) + 1 if (grp >= 0).any() else 0)
    if n_groups == 0:
        return make_result(g, False, None, None, "no groups to replay")
    ids = (
        np.arange(n_groups)
        if g.sample is None or g.sample >= n_groups
        else np.sort(np.random.default_rng(g.seed).choice(n_groups, g.sample, replace=False))
    )
    if g.block_rows is None:
        bad = _replay(g, audit, num, codes, levels, ids, atol)
        where = ""
    else:
        bad, where = _replay_blocks(g, audit, num, codes, levels, ids, atol)
    return make_result(
        g,
        not bad,
        f"{len(ids) - len(bad)}/{len(ids)} replayed groups",
        "all",
        f"replayed {len(ids)} of {n_groups} {g.grouping} groups in the {g.scaling} space "
        + ("(all)" if len(ids) == n_groups else f"(a sample drawn with seed {g.seed})")
        + where
        + f"; {len(bad)} break the greedy rule",
        bad,
    )


def _replay_blocks(
    g: G.SeedNearest, audit: pd.DataFrame, num, codes, levels, ids: np.ndarray, atol: float
) -> tuple[list[dict], str]:
    """``_replay`` per block of the split recomputed from the input (see ``check_seed_nearest``)."""
    from privfair.components.microaggregation.blocking import split_blocks

    row_id = audit["__row_id"].to_numpy()
    raw = audit[[c for c in audit.columns if c.startswith("__in_num__")]].to_numpy(np.float64)
    part = (
        audit["__pa_in"].to_numpy()
        if g.grouping == "fairlet" and "__pa_in" in audit.columns
        else np.zeros(len(audit), dtype=np.int8)
    )
    # the split numbers rows by input position: put the frame in that order first
    by_row = np.argsort(row_id, kind="stable")
    blocks = np.empty(len(audit), dtype=np.int64)
    blocks[by_row] = split_blocks(
        raw[by_row], codes[by_row], part[by_row], g.block_m, g.block_n, g.block_rows
    )
    grp = audit["__group"].to_numpy()
    grouped = grp >= 0
    per_group = pd.DataFrame({"g": grp[grouped], "b": blocks[grouped]}).groupby("g")["b"]
    spans = per_group.nunique()
    bad = [
        {"group": int(gi), "reason": "the group's rows lie in several blocks"}
        for gi in spans.index[spans.to_numpy() > 1]
    ]
    first_block = per_group.min()
    if (np.diff(first_block.to_numpy()) < 0).any():
        bad.append({"group": -1, "reason": "groups are not in block order"})
    if bad:
        return bad, f" in {int(blocks.max()) + 1} blocks of at most {g.block_rows} rows"
    for b in np.unique(blocks):
        mask = blocks == b
        sub = audit.loc[mask].copy()
        local_ids, local = np.unique(grp[mask & grouped], return_inverse=True)
        sub_grp = np.full(int(mask.sum()), -1, dtype=np.int64)
        sub_grp[grouped[mask]] = local
        sub["__group"] = sub_grp
        wanted = np.flatnonzero(np.isin(local_ids, ids))
        for x in _replay(g, sub, num[mask], codes[mask], levels, wanted, atol):
            x["group"] = int(local_ids[x["group"]]) if x["group"] >= 0 else x["group"]
            x["block"] = int(b)
            bad.append(x)
    return (
        bad,
        f" in {int(blocks.max()) + 1} blocks of at most {g.block_rows} rows, each replayed alone",
    )


def _replay(
    g: G.SeedNearest,
    audit: pd.DataFrame,
    num: np.ndarray,
    codes: np.ndarray,
    levels: list[int],
    ids: np.ndarray,
    atol: float,
) -> list[dict]:
    """The groups of ``ids`` that break the greedy rule, replayed on the rows of ``audit``
    (``num``, ``codes``: their scaled QIs)."""
    grp = audit["__group"].to_numpy()
    n_groups = int(grp.max()) + 1 if (grp >= 0).any() else 0
    # per group: how many seeds are recorded, and the frame position of the first (positions,
    # not ids: a block's frame is a subset); -1 for none
    seed_at = np.flatnonzero(audit["__is_seed"].to_numpy())
    seed_grp = grp[seed_at]
    seed_at, seed_grp = seed_at[seed_grp >= 0], seed_grp[seed_grp >= 0]
    seed_count = np.bincount(seed_grp, minlength=n_groups)
    seeds = np.full(n_groups, -1, dtype=np.int64)
    seeds[seed_grp] = seed_at  # a group with several seeds is reported before its seed is read
    pa_in = (
        audit["__pa_in"].to_numpy()
        if "__pa_in" in audit.columns
        else np.zeros(len(audit), dtype=np.int8)
    )
    # creation order: groups by id, dropped rows last; position of every input row in it
    order_key = np.where(grp < 0, np.iinfo(np.int64).max, grp)
    perm = np.lexsort((audit["__row_id"].to_numpy(), order_key))
    pos = np.empty(len(perm), dtype=np.int64)
    pos[perm] = np.arange(len(perm))
    num, codes, part, grp_s = num[perm], codes[perm], pa_in[perm], grp[perm]
    sizes = np.bincount(grp[grp >= 0], minlength=n_groups)
    start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    n = len(perm)
    # suffix sums: numeric columns and per-level counts of each nominal attribute
    suffix_num = np.cumsum(num[::-1], axis=0)[::-1]
    offsets = np.concatenate([[0], np.cumsum(levels)]).astype(np.int64)
    hot = np.zeros((n, int(offsets[-1])), dtype=np.int64)
    for j in range(codes.shape[1]):
        present = codes[:, j] >= 0
        hot[np.flatnonzero(present), offsets[j] + codes[present, j]] = 1
    suffix_hot = np.cumsum(hot[::-1], axis=0)[::-1]
    del hot
    n_present = (codes >= 0).sum(axis=1).astype(np.float64)
    sq = np.einsum("ij,ij->i", num, num)
    n_nominal = codes.shape[1]
    # attribute j's levels, then its missing slot (read as the extra last share, 1/2)
    slot_of = np.concatenate(
        [np.append(np.arange(a, b), offsets[-1]) for a, b in itertools.pairwise(offsets.tolist())]
        or [np.zeros(0, np.int64)]
    )
    slot_spans = list(itertools.pairwise((offsets + np.arange(len(offsets))).tolist()))
    packed = _PackedLevels(codes, levels)
    num_t = np.ascontiguousarray(num.T)
    small = np.int16 if max(levels, default=0) < 2**15 else np.int64
    codes_t = np.ascontiguousarray(codes.T.astype(small))
    values = [None] if g.grouping == "mdav" else [0, 1]
    # 0 on the rows of a protected value and +inf elsewhere: min(d + penalty) is the nearest
    # row of that value (a masked reduction costs several times an addition)
    penalty = {v: np.where(part == v, 0.0, np.inf) for v in values if v is not None}

    def record(i: int) -> tuple:
        own = codes_t[:, i]
        return num_t[:, i], sq[i], np.where(own < 0, -2, own).astype(small), n_present[i]

    # MDAV group types by creation order: pairs (centre, farthest-from-previous-seed) while >= 3k remained
    kinds = ["centre"] * n_groups
    if g.grouping == "mdav":
        k = int(sizes.min())
        remaining, i = n, 0
        while remaining >= 3 * k and i + 1 < n_groups:
            kinds[i], kinds[i + 1] = "centre", "pair"
            remaining -= 2 * k
            i += 2
        if remaining >= 2 * k and i < n_groups:
            kinds[i] = "centre"
            remaining -= k
            i += 1
        if remaining > 0 and i < n_groups:
            kinds[i] = "rest"

    def one(gi: int) -> dict | None:
        if seeds[gi] < 0:
            return {"group": int(gi), "reason": "no seed recorded"}
        if seed_count[gi] > 1:
            return {"group": int(gi), "reason": f"{int(seed_count[gi])} seeds recorded"}
        s, size = int(start[gi]), int(sizes[gi])
        if kinds[gi] == "rest":
            if s + size != n or (grp_s[s:] != gi).any():
                return {"group": int(gi), "reason": "last group is not all remaining rows"}
            return None
        seed = int(pos[seeds[gi]])
        if not s <= seed < s + size:
            return {"group": int(gi), "reason": "the recorded seed is not a member"}
        rn, rs, rc, rp = num_t[:, s:], sq[s:], codes_t[:, s:], n_present[s:]
        if kinds[gi] == "pair":
            if seeds[gi - 1] < 0:  # its seed was dropped or never recorded
                return {"group": int(gi), "reason": "the previous group has no seed"}
            prev = int(pos[seeds[gi - 1]])
            d_ref = _to_point(rn, rs, rc, rp, record(prev))
        else:
            m = n - s
            c = suffix_num[s] / m
            d_ref = _expanded(c, rn, rs, c @ c)
            if n_nominal:
                shares = suffix_hot[s] / m
                # each attribute's shares, then 1/2 for a missing value (its term 1 - 2 * 1/2
                # is 0)
                weights = np.append(shares, 0.5)[slot_of]
                nominal = packed.sums([weights[a:b] for a, b in slot_spans], s)
                nominal *= -2.0  # c - 2x = -2x + c exactly
                nominal += shares @ shares + n_nominal
                d_ref += nominal
        if d_ref[seed - s] < d_ref.max() - atol:
            return {"group": int(gi), "reason": "seed is not a farthest remaining row"}
        d_seed = _to_point(rn, rs, rc, rp, record(seed))
        # members are the first ``size`` rows of the suffix; per protected value for fairlets
        inside, outside = d_seed[:size], d_seed[size:]
        for v in values:
            if v is None:
                far = inside.max(initial=-np.inf)
                near = outside.min(initial=np.inf)
            else:
                far = np.max(inside, where=part[s : s + size] == v, initial=-np.inf)
                near = np.min(outside + penalty[v][s + size :], initial=np.inf)
            if far > near + atol:
                return {
                    "group": int(gi),
                    "reason": "a member is farther from the seed than a non-member",
                }
        return None

    # One thread: two gained nothing once the passes were this lean (Adult's 4,048 fairlets:
    # 1.16 s on one, 1.28 s wall and 1.79 s of CPU on two, whose NumPy calls are too short to
    # repay the GIL's hand-offs; on larger suffixes two threads share the memory bandwidth)
    return [x for x in map(one, (int(g) for g in ids)) if x is not None]


_BINARY = ("__pa_in", "__y_in")


def summarise_parameter_validity(g: G.ParameterValidity, audit: pd.DataFrame) -> pd.DataFrame:
    """Input rows (``__n``) per pair of the input's protected attribute and label as 0/1."""
    cols = [c for c in _BINARY if c in audit.columns]
    if not cols:
        return pd.DataFrame({"__n": [len(audit)]})
    keys, n = np.unique(audit[cols].to_numpy(np.int64), axis=0, return_counts=True)
    return pd.DataFrame({**{c: keys[:, j] for j, c in enumerate(cols)}, "__n": n})


def decide_parameter_validity(g: G.ParameterValidity, summary: pd.DataFrame) -> CheckResult:
    off = []
    if g.k < 2:
        off.append({"rule": "k >= 2", "k": g.k})
    n = summary["__n"].to_numpy(np.int64)
    if g.m is not None:
        if not 1 <= g.m <= g.k - 1:
            off.append({"rule": "1 <= m <= k-1", "m": g.m, "k": g.k})
        if g.n is not None and g.m + g.n != g.k:
            off.append({"rule": "m + n = k", "m": g.m, "n": g.n, "k": g.k})
        if g.derived_from_k:
            pa_in = summary["__pa_in"].to_numpy(np.int64) if "__pa_in" in summary else None
            u = int(n[pa_in == 0].sum()) if pa_in is not None else 0
            m_rule = int(Fraction(g.k * u, int(n.sum())) + Fraction(1, 2))
            m_rule = min(max(m_rule, 1), g.k - 1)  # spec 1.3: clamped so both groups occur
            if m_rule != g.m:
                off.append({"rule": "m = floor(k |U|/|D| + 1/2)", "m": g.m, "expected": m_rule})
    if not 0 <= g.tau <= 1:
        off.append({"rule": "tau in [0, 1]", "tau": g.tau})
    for col in _BINARY:
        present = summary[col].to_numpy(np.int64)[n > 0] if col in summary.columns else None
        if present is not None and set(np.unique(present).tolist()) != {0, 1}:
            off.append({"rule": "binary", "column": col})
    return make_result(
        g,
        not off,
        off or "valid",
        "valid",
        (f"{len(off)} parameter rules broken" if off else "valid")
        + f" (k = {g.k}, m = {g.m}, n = {g.n}, tau = {g.tau}, m derived from k: {g.derived_from_k})",
        off,
    )


def check_parameter_validity(g: G.ParameterValidity, audit: pd.DataFrame) -> CheckResult:
    """k >= 2, 1 <= m <= k-1, m + n = k, m = floor(k |U_in|/|In| + 1/2) when derived from k,
    tau in [0, 1], and a binary protected attribute and label in the input."""
    return decide_parameter_validity(g, summarise_parameter_validity(g, audit))
