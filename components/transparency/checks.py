"""Pure checkers of the transparency kinds (ATR spec section 6).

The optimum beta*_g is recomputed here in closed form with pandas group-bys (corrected
Theorem 1, E3), independently of the vectorised solver in ``scheme``; the fidelity interval is
recomputed from its definition (spec 1.7); confidences are recomputed from the published
mapping. Tolerances as in the spec: 1e-9 absolute on probabilities and masses, relative on
confidences.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privfair.components.core.checks import CheckResult, make_result
from privfair.components.transparency import guarantees as G

__all__ = [
    "interval",
    "closed_form",
    "achieved",
    "check_atr_input_validity",
    "check_atr_valid_distribution",
    "check_atr_fidelity",
    "check_atr_group_optimum",
    "check_atr_group_bound",
    "check_atr_global_privacy",
    "check_atr_sandwich",
    "check_atr_solution_structure",
    "check_atr_mass_conservation",
    "check_atr_fairness_bounds",
    "check_atr_monotone_tradeoff",
    "check_atr_public_fields",
]


def interval(d1: np.ndarray, mode: str, level: float) -> tuple[np.ndarray, np.ndarray]:
    """[L, H] for D~_1 (spec 1.7, both outcomes made consistent), widened by at most one
    rounding step so that L <= D_1 <= H in floating point too (in exact arithmetic D_1 lies in
    its own interval; at alpha = 1 and D_1 = 1e-15, 1 - (1 - D_1) rounds below D_1, and an
    interval with L > H would give an optimum above 1).

    >>> lo, hi = interval(np.array([1e-15]), "alpha", 1.0)
    >>> bool(lo[0] <= 1e-15 <= hi[0])
    True
    """
    if mode == "delta":
        lo, hi = np.maximum(0.0, d1 - (1 - level)), np.minimum(1.0, d1 + (1 - level))
    else:
        d0 = 1.0 - d1
        with np.errstate(divide="ignore", invalid="ignore"):  # alpha = 0 is refused by C0
            lo = np.maximum(level * d1, 1.0 - np.minimum(1.0, d0 / level))
            hi = np.minimum.reduce([np.ones_like(d1), d1 / level, 1.0 - level * d0])
    return np.clip(np.minimum(lo, d1), 0.0, 1.0), np.clip(np.maximum(hi, d1), 0.0, 1.0)


def closed_form(cells: pd.DataFrame, mode: str, level: float) -> pd.DataFrame:
    """Per group: N, M1, M0, the first maximisers x1/x0 (frame index), beta_0, beta_1,
    beta_p, beta_min, beta* and the case."""
    lo, hi = interval(cells["__d1"].to_numpy(float), mode, level)
    p = cells["__p"].to_numpy(float)
    df = pd.DataFrame({"g": cells["__group"].to_numpy(), "p": p, "m1": p * lo, "m0": p * (1 - hi)})
    df = df[df["p"] > 0]
    by = df.groupby("g", sort=True)
    out = pd.DataFrame({"N": by["p"].sum(), "M1": by["m1"].max(), "M0": by["m0"].max()})
    out["x1"] = by["m1"].idxmax()
    out["x0"] = by["m0"].idxmax()
    out["pmax"] = by["p"].max()
    df = df.join(out[["M1", "M0"]], on="g")
    u1 = np.minimum(df["p"] * hi[df.index], df["M1"]).groupby(df["g"]).sum()
    u0 = np.minimum(df["p"] * (1 - lo[df.index]), df["M0"]).groupby(df["g"]).sum()
    out["beta_1"] = np.where(out["M1"] > 0, out["M1"] / u1.where(u1 > 0, 1.0), 0.0)
    out["beta_0"] = np.where(out["M0"] > 0, out["M0"] / u0.where(u0 > 0, 1.0), 0.0)
    out["beta_p"] = (out["M1"] + out["M0"]) / out["N"]
    out["beta_min"] = out["pmax"] / out["N"]
    cand = out[["beta_0", "beta_1", "beta_p", "beta_min"]].to_numpy()
    out["beta"] = cand.max(axis=1)
    first = (cand >= out["beta"].to_numpy()[:, None] - 1e-12).argmax(axis=1)
    out["case"] = np.array(["beta0", "beta1", "betap", "betamin"])[first]
    return out


def achieved(cells: pd.DataFrame, d1: np.ndarray, tol: float = 1e-9) -> pd.Series:
    """Per group, the largest adversary confidence max_a max_x P D_a / S_a (outcomes with
    S_a <= tol N left out)."""
    p = cells["__p"].to_numpy(float)
    g = cells["__group"].to_numpy()
    best = pd.Series(-np.inf, index=np.unique(g))
    n = pd.Series(p).groupby(g).sum()
    for mass in (p * d1, p * (1 - d1)):
        s = pd.Series(mass).groupby(g).sum()
        m = pd.Series(mass).groupby(g).max()
        ok = s > tol * n
        best = np.maximum(best, (m / s.where(ok, np.nan)).fillna(-np.inf))
    return best


def _rel(a, b, tol):
    """``a`` equals ``b`` within ``tol`` relative (an infinite p%-rule equals itself)."""
    with np.errstate(invalid="ignore"):
        return (np.isinf(a) & (a == b)) | (np.abs(a - b) <= tol * np.maximum(1.0, np.abs(b)))


def _fail_missing(g, cells: pd.DataFrame) -> CheckResult | None:
    missing = int(cells["__announced"].isna().sum())
    if missing:
        return make_result(g, False, missing, 0, f"{missing} cells are not announced")
    return None


def check_atr_input_validity(g: G.InputValidity, cells: pd.DataFrame) -> CheckResult:
    """C0 on the cells rebuilt from the input."""
    bad = []
    p, d1 = cells["__p"].to_numpy(float), cells["__d1"].to_numpy(float)
    if (p < 0).any() or not p.sum() > 0:
        bad.append("prior mass negative or all zero")
    if ((d1 < 0) | (d1 > 1) | np.isnan(d1)).any():
        bad.append("true rule outside [0, 1]")
    keys = [c for c in cells.columns if not c.startswith("__")]
    if cells.duplicated(keys).any():
        bad.append("cell keys not unique")
    ok_level = 0 <= g.level <= 1 if g.fidelity == "delta" else 0 < g.level <= 1
    if not ok_level:
        bad.append(f"{g.fidelity} = {g.level} outside its range")
    return make_result(
        g,
        not bad,
        bad or "valid",
        [],
        "; ".join(bad) or f"{len(cells)} valid cells ({g.fidelity} = {g.level})",
        [{"rule": b} for b in bad],
    )


def check_atr_valid_distribution(g: G.ValidDistribution, cells: pd.DataFrame) -> CheckResult:
    """C1: every cell announced, D~_1 in [0, 1], D~_0 + D~_1 = 1."""
    miss = _fail_missing(g, cells)
    if miss:
        return miss
    a1, a0 = cells["__announced"].to_numpy(float), cells["__announced_d0"].to_numpy(float)
    bad = (a1 < -g.tolerance) | (a1 > 1 + g.tolerance) | (np.abs(a1 + a0 - 1) > g.tolerance)
    return make_result(
        g,
        not bad.any(),
        int(bad.sum()),
        0,
        f"{int(bad.sum())} of {len(a1)} announced cells are not distributions",
        cells.loc[bad, ["__announced", "__announced_d0"]],
    )


def check_atr_fidelity(g: G.Fidelity, cells: pd.DataFrame) -> CheckResult:
    """C2 per cell and outcome."""
    miss = _fail_missing(g, cells)
    if miss:
        return miss
    d1, a1 = cells["__d1"].to_numpy(float), cells["__announced"].to_numpy(float)
    a0, d0 = cells["__announced_d0"].to_numpy(float), 1 - d1
    t = g.tolerance
    if g.fidelity == "delta":
        bad = (np.abs(a1 - d1) > 1 - g.level + t) | (np.abs(a0 - d0) > 1 - g.level + t)
        worst = float(np.max(np.abs(a1 - d1)))
        expected = 1 - g.level
    else:
        lvl = g.level
        bad = np.zeros(len(d1), dtype=bool)
        for a, d in ((a1, d1), (a0, d0)):
            bad |= (a < lvl * d - t) | (a > d / lvl + t)
        worst, expected = int(bad.sum()), 0
    return make_result(
        g,
        not bad.any(),
        worst,
        expected,
        f"{int(bad.sum())} of {len(d1)} cells outside {g.fidelity}-fidelity {g.level}",
        cells.loc[bad, ["__d1", "__announced"]],
    )


def check_atr_group_optimum(g: G.GroupOptimum, cells: pd.DataFrame) -> CheckResult:
    """C3: achieved confidence = closed-form beta*_g = published beta*_g, per group."""
    miss = _fail_missing(g, cells)
    if miss:
        return miss
    cf = closed_form(cells, g.fidelity, g.level)
    got = achieved(cells, cells["__announced"].to_numpy(float)).reindex(cf.index)
    declared = cells.groupby("__group")["__declared"].first().reindex(cf.index)
    ok = _rel(got.to_numpy(), cf["beta"].to_numpy(), g.tolerance) & _rel(
        declared.to_numpy(), cf["beta"].to_numpy(), g.tolerance
    )
    off = pd.DataFrame(
        {"achieved": got, "optimum": cf["beta"], "published": declared, "case": cf["case"]}
    )[~ok]
    return make_result(
        g,
        bool(ok.all()),
        round(float(got.max()), 9),
        round(float(cf["beta"].max()), 9),
        (
            f"{int((~ok).sum())} of {len(cf)} groups off their optimum beta* (or its "
            "published value)"
            if (~ok).any()
            else f"every one of {len(cf)} groups at its optimum beta*"
        )
        + f" ({g.fidelity} = {g.level})",
        off,
    )


def check_atr_group_bound(g: G.GroupBound, cells: pd.DataFrame) -> CheckResult:
    """C3 of a randomised announcement: beta_min,g <= achieved confidence <= closed-form
    beta*_g + slack, and achieved = published beta*_g, per group."""
    miss = _fail_missing(g, cells)
    if miss:
        return miss
    cf = closed_form(cells, g.fidelity, g.level)
    got = achieved(cells, cells["__announced"].to_numpy(float)).reindex(cf.index)
    declared = cells.groupby("__group")["__declared"].first().reindex(cf.index)
    cap = np.minimum(cf["beta"] + g.slack, 1.0)
    t = g.tolerance
    ok = (
        (got >= cf["beta_min"] * (1 - t) - t)
        & (got <= cap * (1 + t))
        & _rel(declared.to_numpy(), got.to_numpy(), t)
    )
    off = pd.DataFrame(
        {"achieved": got, "beta_min": cf["beta_min"], "cap": cap, "published": declared}
    )[~ok]
    return make_result(
        g,
        bool(ok.all()),
        round(float(np.nanmax(got - cf["beta"])), 9),
        {"at_most": g.slack},
        (
            f"{int((~ok).sum())} of {len(cf)} groups outside [beta_min, beta* + {g.slack}] (or "
            "off their published value)"
            if (~ok).any()
            else f"every one of {len(cf)} groups within [beta_min, beta* + {g.slack}]"
        )
        + f" ({g.fidelity} = {g.level})",
        off,
    )


def check_atr_global_privacy(g: G.GlobalPrivacy, cells: pd.DataFrame) -> CheckResult:
    """C4: published beta*_global = max confidence of the mapping = max published group value."""
    miss = _fail_missing(g, cells)
    if miss:
        return miss
    got = float(achieved(cells, cells["__announced"].to_numpy(float)).max())
    declared = float(cells["__declared_global"].iloc[0]) if len(cells) else np.nan
    groups = float(cells["__declared"].max())
    ok = bool(_rel(declared, got, g.tolerance) and _rel(groups, got, g.tolerance))
    return make_result(
        g,
        ok,
        {"published_global": declared, "published_groups_max": groups},
        got,
        f"published beta*_global {declared:.9g}, largest group value {groups:.9g}, largest "
        f"confidence of the published mapping {got:.9g}",
    )


def check_atr_sandwich(g: G.Sandwich, cells: pd.DataFrame) -> CheckResult:
    """C5: beta_min <= beta* <= C* per group; at fidelity 1 the announced mapping is D."""
    miss = _fail_missing(g, cells)
    if miss:
        return miss
    cf = closed_form(cells, g.fidelity, g.level)
    c_star = achieved(cells, cells["__d1"].to_numpy(float), tol=0.0).reindex(cf.index)
    got = achieved(cells, cells["__announced"].to_numpy(float)).reindex(cf.index)
    t = g.tolerance
    ok = (cf["beta_min"] - t <= got) & (got <= c_star + t)
    msg = (
        f"{int((~ok).sum())} of {len(cf)} groups outside [beta_min, C*] ({g.fidelity} = {g.level})"
    )
    if g.level >= 1:
        same = np.abs(cells["__announced"] - cells["__d1"]) <= t
        ok &= bool(same.all())
        msg += f"; at fidelity 1, {int((~same).sum())} cells differ from D"
    return make_result(
        g,
        bool(ok.all()),
        round(float(got.max()), 9),
        [round(float(cf["beta_min"].max()), 9), round(float(c_star.max()), 9)],
        msg,
        pd.DataFrame({"beta_min": cf["beta_min"], "achieved": got, "C_star": c_star})[~ok],
    )


def _mass(cells: pd.DataFrame) -> pd.Series:
    return (cells["__p"] * cells["__announced"]).groupby(cells["__group"]).sum()


def check_atr_solution_structure(g: G.SolutionStructure, cells: pd.DataFrame) -> CheckResult:
    """C6 (Corollary 1), the case of each group recomputed in closed form; a cell's
    announcement compared as its joint mass P D~_1, within tolerance times the group's mass."""
    miss = _fail_missing(g, cells)
    if miss:
        return miss
    cf = closed_form(cells, g.fidelity, g.level)
    lo, hi = interval(cells["__d1"].to_numpy(float), g.fidelity, g.level)
    p, a1 = cells["__p"].to_numpy(float), cells["__announced"].to_numpy(float)
    grp = cells["__group"].to_numpy()
    t = g.tolerance
    bad_groups = set()
    case = cf["case"].reindex(grp).to_numpy()
    M1, M0 = cf["M1"].reindex(grp).to_numpy(), cf["M0"].reindex(grp).to_numpy()
    populated = p > 0
    # a cell's announcement is compared as its joint mass P D~_1, within tolerance times its
    # group's mass (as C7): the solver fills masses, so the rule of a cell of negligible mass
    # (P = 1e-11 N) is only known to tolerance N / P, and is then no evidence of anything
    slack = t * cf["N"].reindex(grp).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        want0 = np.maximum(lo, 1 - M0 / p)
        want1 = np.minimum(hi, M1 / p)
        off0, off1 = (np.abs(p * (a1 - want)) > slack for want in (want0, want1))
    off = populated & (((case == "beta0") & off0) | ((case == "beta1") & off1))
    bad_groups |= set(grp[off].tolist())
    for gid, row in cf[cf["case"] == "betap"].iterrows():
        x1, x0, n = int(row["x1"]), int(row["x0"]), t * row["N"]
        if abs(p[x1] * (a1[x1] - lo[x1])) > n or abs(p[x0] * (a1[x0] - hi[x0])) > n:
            bad_groups.add(gid)
    mass = _mass(cells)
    tight = cf[np.abs(cf["beta"] - cf["beta_min"]) <= 1e-12]
    for gid, row in tight.iterrows():
        sel = (grp == gid) & (np.abs(p - row["pmax"]) <= 1e-12 * row["pmax"])
        if (np.abs(a1[sel] - mass[gid] / row["N"]) > 1e-7).any():
            bad_groups.add(gid)
    return make_result(
        g,
        not bad_groups,
        len(bad_groups),
        {"tolerance": g.tolerance},
        (
            f"{len(bad_groups)} of {len(cf)} groups break the structure of their case"
            if bad_groups
            else f"{len(cf)} groups have the structure of their case "
            f"({cf['case'].value_counts().to_dict()})"
        )
        + f" ({g.fidelity} = {g.level})",
        [{"group": int(x), "case": str(cf.loc[x, "case"])} for x in sorted(bad_groups)],
    )


def check_atr_mass_conservation(g: G.MassConservation, cells: pd.DataFrame) -> CheckResult:
    """C7: S_1 of each group in [M1/beta*, N - M0/beta*], at its end for beta_0/beta_1/beta_p."""
    miss = _fail_missing(g, cells)
    if miss:
        return miss
    cf = closed_form(cells, g.fidelity, g.level)
    s = _mass(cells).reindex(cf.index)
    s_lo, s_hi = cf["M1"] / cf["beta"], cf["N"] - cf["M0"] / cf["beta"]
    t = g.tolerance * cf["N"]
    ok = (s >= s_lo - t) & (s <= s_hi + t)
    ok &= np.where(cf["case"] == "beta0", np.abs(s - s_hi) <= t, True)
    ok &= np.where(cf["case"].isin(["beta1", "betap"]), np.abs(s - s_lo) <= t, True)
    return make_result(
        g,
        bool(ok.all()),
        int((~ok).sum()),
        0,
        f"{int((~ok).sum())} of {len(cf)} groups announce a positive mass outside their range "
        f"({g.fidelity} = {g.level})",
        pd.DataFrame({"S": s, "S_lo": s_lo, "S_hi": s_hi, "case": cf["case"]})[~ok],
    )


def check_atr_fairness_bounds(g: G.FairnessBounds, fairness: pd.DataFrame) -> CheckResult:
    """C8: published measures recomputable, intervals holding the true values, Lemma 2."""
    need = {
        "measure", "value", "true_value_lower", "true_value_upper", "rate_group_1",
        "rate_group_2", "__value", "__true", "__true_rate_1", "__true_rate_2", "__expected_rows",
        "__published",
    }  # fmt: skip
    if not need <= set(fairness.columns):
        missing = sorted(need - set(fairness.columns))
        return make_result(
            g, False, missing, [], f"the fairness evidence lacks its columns: {missing}"
        )
    # with no row at all, nothing was published and nothing was expected (the evidence adds a
    # row for every expected row the table lacks)
    expected = int(fairness["__expected_rows"].iloc[0]) if len(fairness) else 0
    t = g.tolerance
    v, rv, tv = (fairness[c].astype(float) for c in ("value", "__value", "__true"))
    lo, hi = fairness["true_value_lower"].astype(float), fairness["true_value_upper"].astype(float)
    # the ends hold the true value within tolerance relative to their size: a p%-rule's end
    # hi_1 / lo_2 with lo_2 = 1e-6 is 1e6 and carries the rounding of lo_2 (about 1e-10 of it)
    with np.errstate(invalid="ignore"):
        slack_lo, slack_hi = (
            np.where(np.isfinite(e), t * np.maximum(1.0, np.abs(e)), 0.0) for e in (lo, hi)
        )
        ok = _rel(v, rv, t) & (lo - slack_lo <= tv) & (tv <= hi + slack_hi)
    if g.fidelity == "delta":
        tv_based = fairness["measure"].isin(["SP", "CSP"])
        ok &= ~tv_based | (np.abs(v - tv) <= min(2 * (1 - g.level), 1) + t)
        for i in (1, 2):
            r, tr = (
                fairness[f"rate_group_{i}"].astype(float),
                fairness[f"__true_rate_{i}"].astype(float),
            )
            ok &= np.abs(r - tr) <= (1 - g.level) + t
    published = fairness["__published"].astype(bool)
    ok = ok.fillna(False) & published
    n_published = int(published.sum())
    n_ok = n_published == expected
    return make_result(
        g,
        bool(ok.all()) and n_ok,
        int((~ok).sum()),
        0,
        f"{int((~ok).sum())} of {len(fairness)} measures wrong, not bounding the true value or "
        f"not published ({g.fidelity} = {g.level}); {n_published} rows published, "
        f"{expected} expected",
        fairness.loc[
            ~ok, ["measure", "value", "true_value_lower", "true_value_upper", "__published"]
        ],
    )


def check_atr_monotone_tradeoff(g: G.MonotoneTradeoff, cells: pd.DataFrame) -> CheckResult:
    """C11: beta*_global over the grid non-decreasing, equal to C* at fidelity 1."""
    if not g.grid:
        return make_result(g, False, None, None, "empty grid")
    betas = [float(closed_form(cells, g.fidelity, lvl)["beta"].max()) for lvl in g.grid]
    c_star = float(achieved(cells, cells["__d1"].to_numpy(float), tol=0.0).max())
    mono = all(b2 >= b1 - g.tolerance for b1, b2 in zip(betas[:-1], betas[1:], strict=True))
    top = g.grid[-1] < 1 or abs(betas[-1] - c_star) <= g.tolerance
    return make_result(
        g,
        mono and top,
        [round(b, 9) for b in betas],
        {"non_decreasing": True, "C_star": c_star},
        f"beta*_global over {g.fidelity} in {list(g.grid)}: {', '.join(f'{b:.4g}' for b in betas)}",
    )


def check_atr_public_fields(g: G.PublicFields, public: pd.DataFrame) -> CheckResult:
    """C12: public tables hold only the allowed fields."""
    found = (public["table"] + "." + public["column"]).tolist() if len(public) else []
    extra = sorted(set(found) - set(g.allowed))
    return make_result(
        g,
        not extra,
        extra or [],
        [],
        f"fields not allowed in a public table: {extra[:5]}"
        if extra
        else f"{len(found)} public fields, all allowed",
        [{"field": f} for f in extra],
    )
