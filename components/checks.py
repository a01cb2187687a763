"""Pure checkers, one per guarantee kind: each recomputes its guarantee from the published table
(``published`` batch) or from the audit frame (``audit`` batch, see ``components.audit``) and
reports the offending groups. The CLI and the Great Expectations expectations both call these.

Comparisons of ratios are exact (integers / fractions); float comparisons use the tolerance the
guarantee declares.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from schemas import contracts as C

MAX_OFFENDERS = 20


@dataclass
class CheckResult:
    id: str
    kind: str
    passed: bool
    observed: Any = None
    expected: Any = None
    message: str = ""
    offending: list[dict] = field(default_factory=list)
    n_offending: int = 0

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "passed": self.passed,
            "observed": self.observed,
            "expected": self.expected,
            "message": self.message,
            "n_offending": self.n_offending,
            "offending": self.offending,
        }


def _result(
    g, passed: bool, observed, expected, message: str, offending: pd.DataFrame | list | None = None
) -> CheckResult:
    if isinstance(offending, pd.DataFrame):
        n = len(offending)
        rows = offending.head(MAX_OFFENDERS).reset_index().to_dict(orient="records")
    else:
        rows = list(offending or [])
        n = len(rows)
        rows = rows[:MAX_OFFENDERS]
    clean = [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in rows]
    return CheckResult(g.id, g.kind, bool(passed), observed, expected, message, clean, n)


def _tau(x: float) -> Fraction:
    return Fraction(str(x)).limit_denominator(10**9)


def _retained(audit: pd.DataFrame) -> pd.DataFrame:
    return audit[audit["__retained"].to_numpy()]


def _cols(audit: pd.DataFrame, side: str) -> list[str]:
    return [
        c
        for c in audit.columns
        if c.startswith(f"__{side}_num__") or c.startswith(f"__{side}_hot__")
    ]


def _group_pa_counts(r: pd.DataFrame) -> pd.DataFrame:
    """Per group: m_g, n_g (unfavoured/favoured rows), a, b (positives among them, published)."""
    pa_, y = r["__pa_out"].to_numpy(), r["__y_out"].to_numpy()
    df = pd.DataFrame({"group": r["__group"].to_numpy(), "u": pa_ == 0, "f": pa_ == 1})
    df["a"] = df["u"] & (y == 1)
    df["b"] = df["f"] & (y == 1)
    out = df.groupby("group").sum().astype(np.int64)
    return out.rename(columns={"u": "m_g", "f": "n_g"})


# --- published batch ------------------------------------------------------------------------
def check_k_anonymity(g: C.KAnonymity, published: pd.DataFrame) -> CheckResult:
    """Every equivalence class over the QI columns has >= k rows."""
    missing = [q for q in g.quasi_identifiers if q not in published.columns]
    if missing:
        return _result(
            g, False, None, g.k, f"quasi-identifier columns missing from the table: {missing[:5]}"
        )
    if len(published) == 0:
        return _result(g, False, 0, g.k, "no rows published")
    sizes = published.groupby(list(g.quasi_identifiers), dropna=False, sort=False).size()
    small = sizes[sizes < g.k]
    bad = pd.DataFrame({"class_size": small.to_numpy()})
    return _result(
        g,
        small.empty,
        int(sizes.min()),
        g.k,
        f"{len(small)} of {len(sizes)} equivalence classes have fewer than {g.k} rows"
        if len(small)
        else f"smallest of {len(sizes)} equivalence classes has {int(sizes.min())} rows",
        bad,
    )


# --- audit batch -------------------------------------------------------------------------------
def check_partition(g: C.Partition, audit: pd.DataFrame) -> CheckResult:
    """Each published row maps to one input row, no input row is published twice, and (unless
    drops are allowed) every input row is published."""
    dup = audit[audit["__out_count"] > 1]
    dropped = int((audit["__out_count"] == 0).sum())
    ok = dup.empty and (g.allow_drops or dropped == 0)
    msg = f"{len(dup)} input rows published more than once; {dropped} input rows dropped"
    offenders = dup[["__row_id", "__out_count"]]
    if not g.allow_drops and dropped:
        offenders = pd.concat(
            [offenders, audit.loc[audit["__out_count"] == 0, ["__row_id", "__out_count"]]]
        )
    return _result(
        g,
        ok,
        {"duplicated": len(dup), "dropped": dropped},
        {"duplicated": 0, "drops_allowed": g.allow_drops},
        msg,
        offenders,
    )


def check_fairlet_composition(g: C.FairletComposition, audit: pd.DataFrame) -> CheckResult:
    """Every group has exactly m unfavoured and n favoured published rows."""
    c = _group_pa_counts(_retained(audit))
    bad = c[(c["m_g"] != g.m) | (c["n_g"] != g.n)][["m_g", "n_g"]]
    return _result(
        g,
        bad.empty and len(c) > 0,
        f"{len(c) - len(bad)}/{len(c)} groups ({g.m},{g.n})",
        {"m": g.m, "n": g.n},
        f"{len(bad)} groups are not ({g.m},{g.n})-fairlets"
        if len(bad)
        else "every group is an exact fairlet",
        bad,
    )


def check_fairlet_count(g: C.FairletCount, audit: pd.DataFrame) -> CheckResult:
    """#groups = min(#U_in // m, #F_in // n); #out = #groups (m+n); leftovers too few for one more."""
    u_in = int((audit["__pa_in"] == 0).sum())
    f_in = int((audit["__pa_in"] == 1).sum())
    r = _retained(audit)
    n_groups = int(r["__group"].nunique())
    expected = min(u_in // g.m, f_in // g.n)
    left = audit[~audit["__retained"].to_numpy()]
    u_left, f_left = int((left["__pa_in"] == 0).sum()), int((left["__pa_in"] == 1).sum())
    ok = (
        n_groups == expected and len(r) == expected * (g.m + g.n) and (u_left < g.m or f_left < g.n)
    )
    return _result(
        g,
        ok,
        {"groups": n_groups, "rows": len(r), "left_unfavoured": u_left, "left_favoured": f_left},
        {"groups": expected, "rows": expected * (g.m + g.n)},
        f"{n_groups} groups of {len(r)} rows; expected {expected} groups",
    )


def check_group_size_range(g: C.GroupSizeRange, audit: pd.DataFrame) -> CheckResult:
    sizes = _retained(audit).groupby("__group").size()
    hi = g.max_size if g.max_size is not None else np.inf
    bad = sizes[(sizes < g.min_size) | (sizes > hi)]
    return _result(
        g,
        bad.empty and len(sizes) > 0,
        {"min": int(sizes.min()), "max": int(sizes.max())} if len(sizes) else None,
        {"min": g.min_size, "max": g.max_size},
        f"{len(bad)} groups outside [{g.min_size}, {g.max_size}]",
        pd.DataFrame({"size": bad}),
    )


def check_group_means(g: C.GroupMeans, audit: pd.DataFrame) -> CheckResult:
    """Members of a group share one published QI vector, equal to the mean of their input QIs."""
    r = _retained(audit)
    outs, ins = _cols(audit, "out"), _cols(audit, "in")
    grp = r["__group"].to_numpy()
    by = r.groupby("__group")
    spread = (by[outs].max() - by[outs].min()).abs().max(axis=1)
    mean_in = by[ins].mean().to_numpy()
    first_out = by[outs].first().to_numpy()
    tol = g.rtol * np.maximum(np.abs(mean_in), 1.0)
    err = (np.abs(first_out - mean_in) > tol).any(axis=1)
    bad_ids = sorted(set(spread.index[spread.to_numpy() > 0]) | set(spread.index[err]))
    bad = pd.DataFrame({"group": bad_ids})
    del grp
    return _result(
        g,
        not bad_ids and len(r) > 0,
        f"{len(spread) - len(bad_ids)}/{len(spread)} groups",
        "all groups",
        f"{len(bad_ids)} groups whose QIs are not one shared mean vector",
        bad,
    )


def check_qis_unchanged(g: C.QIsUnchanged, audit: pd.DataFrame) -> CheckResult:
    r = _retained(audit)
    outs, ins = _cols(audit, "out"), _cols(audit, "in")
    diff = (r[outs].to_numpy() != r[ins].to_numpy()).any(axis=1)
    bad = r.loc[diff, ["__row_id"]]
    return _result(
        g,
        not diff.any(),
        int(diff.sum()),
        0,
        f"{int(diff.sum())} published rows with changed QIs",
        bad,
    )


def check_mean_preservation(g: C.MeanPreservation, audit: pd.DataFrame) -> CheckResult:
    r = _retained(audit)
    outs, ins = _cols(audit, "out"), _cols(audit, "in")
    s_out, s_in = r[outs].to_numpy().sum(axis=0), r[ins].to_numpy().sum(axis=0)
    bad = np.abs(s_out - s_in) > g.rtol * np.maximum(np.abs(s_in), 1.0)
    names = [c.split("__", 2)[2] for c in outs]
    off = [
        {"column": n, "sum_published": float(a), "sum_input": float(b)}
        for n, a, b, x in zip(names, s_out, s_in, bad, strict=True)
        if x
    ]
    return _result(
        g, not bad.any(), int(bad.sum()), 0, f"{int(bad.sum())} QI columns whose sum changed", off
    )


def check_t_closeness(g: C.TCloseness, audit: pd.DataFrame) -> CheckResult:
    """max over groups of |share of the unfavoured value in g - reference share| <= t."""
    r = _retained(audit)
    ref = (
        float((r["__pa_out"] == 0).mean())
        if g.reference == "output"
        else float((audit["__pa_in"] == 0).mean())
    )
    share = (r["__pa_out"] == 0).groupby(r["__group"]).mean()
    dist = (share - ref).abs()
    bad = dist[dist > g.t + 1e-12]
    observed = float(dist.max()) if len(dist) else None
    return _result(
        g,
        bad.empty and len(dist) > 0,
        observed,
        g.t,
        f"max t over groups = {observed} against the {g.reference} share {ref:.6f}",
        pd.DataFrame({"t": bad}),
    )


def check_attributes_preserved(g: C.AttributesPreserved, audit: pd.DataFrame) -> CheckResult:
    r = _retained(audit)
    off = []
    for c in g.columns:
        a, b = f"__in_col__{c}", f"__out_col__{c}"
        if a not in r.columns or b not in r.columns:
            off.append({"column": c, "changed_rows": None})
            continue
        changed = int((r[a].astype(object).to_numpy() != r[b].astype(object).to_numpy()).sum())
        if changed:
            off.append({"column": c, "changed_rows": changed})
    return _result(
        g,
        not off,
        off or 0,
        0,
        f"{len(off)} sensitive columns changed" if off else "unchanged",
        off,
    )


def check_correction_direction(g: C.CorrectionDirection, audit: pd.DataFrame) -> CheckResult:
    r = _retained(audit)
    changed = r["__y_out"].to_numpy() != r["__y_in"].to_numpy()
    pa_, y_in = r["__pa_in"].to_numpy(), r["__y_in"].to_numpy()
    if g.direction == "positive":
        allowed = (pa_ == 0) & (y_in == 0)
    elif g.direction == "negative":
        allowed = (pa_ == 1) & (y_in == 1)
    else:
        allowed = np.zeros(len(r), dtype=bool)
    bad = changed & ~allowed
    return _result(
        g,
        not bad.any(),
        {"relabelled": int(changed.sum()), "wrong_direction": int(bad.sum())},
        g.direction,
        f"{int(bad.sum())} labels changed against the '{g.direction}' direction",
        r.loc[bad, ["__row_id", "__group", "__pa_in", "__y_in", "__y_out"]],
    )


def check_local_fairness(g: C.LocalFairness, audit: pd.DataFrame) -> CheckResult:
    """upr(g) >= tau * fpr(g) in every group holding both protected values: a*n_g*den >= i*b*m_g."""
    c = _group_pa_counts(_retained(audit))
    t = _tau(g.tau)
    both = c[(c["m_g"] > 0) & (c["n_g"] > 0)]
    lhs = both["a"].map(int) * both["n_g"].map(int) * t.denominator
    rhs = t.numerator * both["b"].map(int) * both["m_g"].map(int)
    bad = both[lhs < rhs].copy()
    bad["upr"] = bad["a"] / bad["m_g"]
    bad["fpr"] = bad["b"] / bad["n_g"]
    return _result(
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


def check_minimal_correction(g: C.MinimalCorrection, audit: pd.DataFrame) -> CheckResult:
    """Per group, #relabels == the fewest that satisfy local fairness, counted from the input labels."""
    r = _retained(audit)
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
    expected = np.array(
        [
            _minimal_relabels(int(m), int(n), int(a), int(b), t, g.direction)
            for m, n, a, b in zip(c["m_g"], c["n_g"], c["a"], c["b"], strict=True)
        ],
        dtype=np.int64,
    )
    c["minimal"] = expected
    bad = c[c["relabelled"] != c["minimal"]][["relabelled", "minimal"]]
    return _result(
        g,
        bad.empty,
        int(c["relabelled"].sum()),
        int(expected.sum()),
        f"{len(bad)} groups whose relabel count is not the minimum",
        bad,
    )


def check_demographic_parity_bound(g: C.DemographicParityBound, audit: pd.DataFrame) -> CheckResult:
    """PR_U(out) >= ratio * PR_F(out) (exact), and |PR_U - PR_F| <= max_difference when set."""
    r = _retained(audit)
    pa_, y = r["__pa_out"].to_numpy(), r["__y_out"].to_numpy()
    nu, nf = int((pa_ == 0).sum()), int((pa_ == 1).sum())
    a, b = int(((pa_ == 0) & (y == 1)).sum()), int(((pa_ == 1) & (y == 1)).sum())
    if nu == 0 or nf == 0:
        return _result(g, False, None, g.ratio, "the published table lacks one protected group")
    t = _tau(g.ratio)
    ok = a * nf * t.denominator >= t.numerator * b * nu
    pr_u, pr_f = a / nu, b / nf
    if g.max_difference is not None:
        ok = ok and abs(pr_u - pr_f) <= g.max_difference + 1e-12
    return _result(
        g,
        ok,
        {"pr_unfavoured": pr_u, "pr_favoured": pr_f, "dpar": abs(pr_u - pr_f)},
        {"ratio": g.ratio, "max_difference": g.max_difference},
        f"PR unfavoured {pr_u:.4f} vs favoured {pr_f:.4f}",
    )


def _scaled_input(audit: pd.DataFrame, scaling: str) -> np.ndarray:
    num = [c for c in audit.columns if c.startswith("__in_num__")]
    hot = [c for c in audit.columns if c.startswith("__in_hot__")]
    x = audit[num].to_numpy(dtype=np.float64)
    if scaling == "zscore":
        off, sc = x.mean(axis=0), x.std(axis=0)
    else:
        off, sc = x.min(axis=0), x.max(axis=0) - x.min(axis=0)
    sc = np.where(sc > 0, sc, 1.0)
    return np.hstack([(x - off) / sc, audit[hot].to_numpy(dtype=np.float64)])


def check_seed_nearest(
    g: C.SeedNearest,
    audit: pd.DataFrame,
    scaling: str = "minmax",
    sample: int | None = 64,
    atol: float = 1e-9,
) -> CheckResult:
    """Replay the greedy trace on a sample of groups (all when ``sample`` is None), with a plain
    dense computation independent of the component: the seed is a farthest remaining row from
    the mean of the remaining rows (for MDAV's second group of a pair: farthest from the first
    seed), and the other members are the seed's nearest remaining rows (within each protected
    value for fairlets)."""
    x = _scaled_input(audit, scaling)
    grp = audit["__group"].to_numpy()
    order_key = np.where(grp < 0, np.iinfo(np.int64).max, grp)
    n_groups = int(grp.max()) + 1 if (grp >= 0).any() else 0
    seed_rows = audit.loc[audit["__is_seed"].to_numpy(), ["__row_id", "__group"]]
    seed_count = seed_rows["__group"].value_counts()
    seeds = seed_rows.drop_duplicates("__group").set_index("__group")["__row_id"]
    pa_in = (
        audit["__pa_in"].to_numpy()
        if "__pa_in" in audit.columns
        else np.zeros(len(audit), dtype=np.int8)
    )
    if n_groups == 0:
        return _result(g, False, None, None, "no groups to replay")
    ids = (
        np.arange(n_groups)
        if sample is None or sample >= n_groups
        else np.unique(np.linspace(0, n_groups - 1, sample).round().astype(np.int64))
    )
    # MDAV group types by creation order: pairs (centre, farthest-from-previous-seed) while >= 3k remained
    kinds = ["centre"] * n_groups
    if g.grouping == "mdav":
        sizes = np.bincount(grp[grp >= 0], minlength=n_groups)
        k = int(sizes.min())
        remaining, i = len(audit), 0
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
    bad = []
    for gi in ids:
        rem = order_key >= gi
        rows = np.flatnonzero(rem)
        members = grp[rows] == gi
        if gi not in seeds.index:
            bad.append({"group": int(gi), "reason": "no seed recorded"})
            continue
        if seed_count.loc[gi] > 1:
            bad.append({"group": int(gi), "reason": f"{int(seed_count.loc[gi])} seeds recorded"})
            continue
        seed = int(seeds.loc[gi])
        if kinds[gi] == "rest":
            if not members.all():
                bad.append({"group": int(gi), "reason": "last group is not all remaining rows"})
            continue
        xr = x[rows]
        if kinds[gi] == "pair":
            prev = int(seeds.loc[gi - 1])
            d_ref = ((xr - x[prev]) ** 2).sum(axis=1)
        else:
            d_ref = ((xr - xr.mean(axis=0)) ** 2).sum(axis=1)
        seed_pos = int(np.flatnonzero(rows == seed)[0])
        if d_ref[seed_pos] < d_ref.max() - atol:
            bad.append({"group": int(gi), "reason": "seed is not a farthest remaining row"})
            continue
        d_seed = ((xr - x[seed]) ** 2).sum(axis=1)
        parts = (
            [np.ones(len(rows), bool)]
            if g.grouping == "mdav"
            else [pa_in[rows] == 0, pa_in[rows] == 1]
        )
        for part in parts:
            inside = part & members
            outside = part & ~members
            if (
                inside.any()
                and outside.any()
                and d_seed[inside].max() > d_seed[outside].min() + atol
            ):
                bad.append(
                    {
                        "group": int(gi),
                        "reason": "a member is farther from the seed than a non-member",
                    }
                )
                break
    return _result(
        g,
        not bad,
        f"{len(ids) - len(bad)}/{len(ids)} replayed groups",
        "all",
        f"replayed {len(ids)} of {n_groups} groups; {len(bad)} break the greedy rule",
        bad,
    )


def check_parameter_validity(g: C.ParameterValidity, audit: pd.DataFrame) -> CheckResult:
    off = []
    if g.m is not None:
        if not 1 <= g.m <= g.k - 1:
            off.append({"rule": "1 <= m <= k-1", "m": g.m, "k": g.k})
        if g.n is not None and g.m + g.n != g.k:
            off.append({"rule": "m + n = k", "m": g.m, "n": g.n, "k": g.k})
        if g.derived_from_k:
            u, n_in = int((audit["__pa_in"] == 0).sum()), len(audit)
            m_rule = int(Fraction(g.k * u, n_in) + Fraction(1, 2))
            m_rule = min(max(m_rule, 1), g.k - 1)  # spec 1.3: clamped so both groups occur
            if m_rule != g.m:
                off.append({"rule": "m = floor(k |U|/|D| + 1/2)", "m": g.m, "expected": m_rule})
    if not 0 <= g.tau <= 1:
        off.append({"rule": "tau in [0, 1]", "tau": g.tau})
    for col in ("__pa_in", "__y_in"):
        if col in audit.columns and set(np.unique(audit[col])) != {0, 1}:
            off.append({"rule": "binary", "column": col})
    return _result(
        g,
        not off,
        off or "valid",
        "valid",
        f"{len(off)} parameter rules broken" if off else "valid",
        off,
    )


CHECKS: dict[str, tuple[str, Callable[..., CheckResult]]] = {
    "k_anonymity": ("published", check_k_anonymity),
    "partition": ("audit", check_partition),
    "fairlet_composition": ("audit", check_fairlet_composition),
    "fairlet_count": ("audit", check_fairlet_count),
    "group_size_range": ("audit", check_group_size_range),
    "group_means": ("audit", check_group_means),
    "qis_unchanged": ("audit", check_qis_unchanged),
    "mean_preservation": ("audit", check_mean_preservation),
    "t_closeness": ("audit", check_t_closeness),
    "attributes_preserved": ("audit", check_attributes_preserved),
    "correction_direction": ("audit", check_correction_direction),
    "local_fairness": ("audit", check_local_fairness),
    "minimal_correction": ("audit", check_minimal_correction),
    "demographic_parity_bound": ("audit", check_demographic_parity_bound),
    "seed_nearest": ("audit", check_seed_nearest),
    "parameter_validity": ("audit", check_parameter_validity),
}


def unsupported(contract: list) -> list[str]:
    """Kinds in ``contract`` that no checker of this version can verify."""
    return sorted({g.kind for g in contract if g.kind not in CHECKS})


def check_guarantee(g, published: pd.DataFrame, audit: pd.DataFrame, **options) -> CheckResult:
    if g.kind not in CHECKS:
        return _result(
            g, False, None, None, f"no checker for guarantee kind '{g.kind}' in this version"
        )
    batch, fn = CHECKS[g.kind]
    frame = published if batch == "published" else audit
    if g.kind == "seed_nearest":
        return fn(g, frame, **options)
    return fn(g, frame)


def check_contract(
    contract: list, published: pd.DataFrame, audit: pd.DataFrame, **options
) -> list[CheckResult]:
    """Run every guarantee's checker; results in contract order."""
    return [check_guarantee(g, published, audit, **options) for g in contract]
