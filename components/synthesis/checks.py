"""Pure checkers of the synthesis kinds (spec section 4). Each reads one evidence frame of
``privfair.components.synthesis.audit`` and the guarantee's fields, and recomputes what it checks:

- the ledger against the plan rebuilt from (epsilon, delta, split, d, selector) in closed form,
  each step's rho from OpenDP's own privacy map of its scale, the total by OpenDP's
  composition and its epsilon by OpenDP's conversion;
- compression from the noisy counts; the tree's shape and fairness from its edges and the
  input's roles; the model's conditional mutual information by exact inference along the
  tree path; the synthetic table's conditional independence by a G-test.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import chi2

from privfair.components.core.checks import CheckResult, make_result
from privfair.components.synthesis import guarantees as G
from privfair.components.synthesis.accounting import composed_total, epsilon_of, step_rho
from privfair.components.synthesis.params import noisy_rows
from privfair.components.synthesis.selection import DisjointSets, tree_path

__all__ = [
    "expected_plan",
    "check_privacy_ledger",
    "check_public_compression",
    "check_tree_structure",
    "check_fair_tree",
    "check_model_independence",
    "check_synthetic_independence",
    "check_synthetic_schema",
    "check_synthetic_nulls",
    "check_adaptive_ledger",
    "check_chordal_structure",
    "conditional_mi",
    "g_test",
]

_PHASES = ("one_way", "select", "two_way")


def expected_plan(d: int, selector: str) -> list[tuple[str, str, int]]:
    """(phase, mechanism, calls) of a release over ``d`` attributes (spec PRIV-1)."""
    sel = ("gaussian", d * (d - 1) // 2) if selector == "exponential" else ("noisy_max", d - 1)
    return [("one_way", "gaussian", d), ("select", *sel), ("two_way", "gaussian", d - 1)]


def check_privacy_ledger(g: G.PrivacyLedger, ledger: pd.DataFrame) -> CheckResult:
    d = len(g.attributes)
    problems: list[dict] = []
    want = [
        (phase, mech, k, share)
        for (phase, mech, k), share in zip(expected_plan(d, g.selector), g.split, strict=True)
    ]
    phases = [p for p, _, k, _ in want for _ in range(k)]
    if len(ledger) != len(phases):
        problems.append({"rule": "steps", "found": len(ledger), "expected": len(phases)})
    else:
        got = ledger["phase"].tolist()
        if got != phases:
            problems.append({"rule": "phase order", "found": got[:5], "expected": phases[:5]})
        one = ledger[ledger["phase"] == "one_way"]["query"].tolist()
        if one != list(g.attributes):
            problems.append({"rule": "1-way queries are the attributes", "found": one[:5]})
        for phase, mech, k, share in want:
            rows = ledger[ledger["phase"] == phase]
            scale = math.sqrt(k / (2.0 * share * g.rho)) if g.rho > 0 else math.inf
            for r in rows.itertuples():
                if r.mechanism != mech or r.sensitivity != 1.0:
                    problems.append({"step": r.step, "rule": f"{mech} of sensitivity 1"})
                elif not (math.isfinite(r.scale) and r.scale > 0):
                    problems.append({"step": r.step, "rule": "noise present", "scale": r.scale})
                elif abs(r.scale - scale) > 1e-9 * scale:
                    problems.append(
                        {
                            "step": r.step,
                            "rule": "planned scale",
                            "scale": r.scale,
                            "expected": scale,
                        }
                    )
                elif r.rho != step_rho(mech, r.scale, r.sensitivity):
                    problems.append(
                        {"step": r.step, "rule": "rho = OpenDP map of the scale", "rho": r.rho}
                    )
            spent = float(rows["rho"].sum())
            if abs(spent - share * g.rho) > 1e-9 * g.rho:
                problems.append(
                    {"phase": phase, "rule": "phase share", "rho": spent, "expected": share * g.rho}
                )
        if g.selector == "exponential" and 0 < g.epsilon <= 10:
            sel = ledger[ledger["phase"] == "select"]["scale"]
            if len(sel) and sel.min() < 1:
                problems.append({"rule": "PRIV-5: score noise std >= 1", "scale": sel.min()})
    return _spends_the_budget(
        g, ledger, problems, "the ledger is the plan, spends the budget and no more"
    )


def _spends_the_budget(g, ledger: pd.DataFrame, problems: list, holds: str) -> CheckResult:
    """The verdict of a ledger check: ``problems`` (the plan's rules broken, found by the
    caller) plus the budget's own two rules, from the ledger's steps alone: their zCDP
    total, composed as OpenDP composes it, equals ``g.rho`` (within ``g.tolerance``, never
    above), and its (epsilon, delta) conversion stays within ``g.epsilon``. ``holds`` is the
    message when nothing is broken."""
    total = composed_total(ledger["rho"].tolist()) if len(ledger) else 0.0
    eps = epsilon_of(total, g.delta) if total > 0 else 0.0
    if total > g.rho or abs(total - g.rho) > g.tolerance * g.rho:
        problems.append({"rule": "total = budget", "rho": total, "budget": g.rho})
    if eps > g.epsilon * (1 + 1e-12):
        problems.append({"rule": "epsilon within target", "epsilon": eps})
    return make_result(
        g,
        not problems,
        {"rho": total, "epsilon": eps, "steps": len(ledger)},
        {"rho": g.rho, "epsilon": g.epsilon, "delta": g.delta, "tolerance": g.tolerance},
        holds if not problems else f"{len(problems)} ledger rule(s) broken",
        problems,
    )


def check_public_compression(g: G.PublicCompression, frame: pd.DataFrame) -> CheckResult:
    bad = []
    for a in g.attributes:
        rows = frame[frame["attribute"] == a].sort_values("code")
        if rows.empty or rows["value"].isna().any() or rows["std"].isna().any():
            bad.append({"attribute": a, "rule": "noisy 1-way counts and their std recorded"})
            continue
        keep = (
            rows["value"].to_numpy() >= g.threshold * rows["std"].to_numpy()
            if g.enabled
            else np.ones(len(rows), bool)
        )
        want = np.full(len(keep), int(keep.sum()))
        want[keep] = np.arange(int(keep.sum()))
        got = rows["compressed"].to_numpy()
        if not np.array_equal(got, want):
            bad.append({"attribute": a, "codes": np.flatnonzero(got != want)[:10].tolist()})
    return make_result(
        g,
        not bad,
        len(bad),
        f"merged iff noisy count < {g.threshold} std" if g.enabled else "nothing merged",
        "compression follows the noisy counts" if not bad else f"{len(bad)} attribute(s) differ",
        bad,
    )


def _edges(frame: pd.DataFrame, source: str) -> list[tuple[str, str]]:
    rows = frame[frame["source"] == source]
    return [tuple(sorted((a, b))) for a, b in zip(rows["a"], rows["b"], strict=True)]


def _components(nodes, edges) -> tuple[dict, bool]:
    """({node: its component's representative}, whether an edge between ``nodes`` closed a
    cycle); edges with an endpoint outside ``nodes`` are ignored."""
    index = {v: i for i, v in enumerate(nodes)}
    sets = DisjointSets(len(index))
    cycle = False
    for a, b in edges:
        if a in index and b in index and not sets.union(index[a], index[b]):
            cycle = True
    return {v: sets.find(i) for v, i in index.items()}, cycle


def check_tree_structure(g: G.TreeStructure, frame: pd.DataFrame) -> CheckResult:
    nodes = list(g.attributes)
    tree = _edges(frame, "tree")
    problems = []
    strange = [e for e in tree if e[0] not in nodes or e[1] not in nodes or e[0] == e[1]]
    comp, cycle = _components(nodes, tree)
    if strange:
        problems.append({"rule": "edges join two attributes", "edges": strange[:5]})
    if len(tree) != len(nodes) - 1 or cycle or len(set(comp.values())) != 1:
        problems.append(
            {
                "rule": "spanning tree",
                "edges": len(tree),
                "cycle": cycle,
                "components": len(set(comp.values())),
            }
        )
    for source in ("two_way", "model"):
        other = _edges(frame, source)
        if sorted(other) != sorted(tree):
            problems.append(
                {
                    "rule": f"{source} cliques = tree edges",
                    "extra": sorted(set(other) - set(tree))[:5],
                    "missing": sorted(set(tree) - set(other))[:5],
                }
            )
    return make_result(
        g,
        not problems,
        len(tree),
        len(nodes) - 1,
        "a spanning tree, measured and fitted on its edges"
        if not problems
        else f"{len(problems)} structure rule(s) broken",
        problems,
    )


def check_fair_tree(g: G.FairTree, frame: pd.DataFrame) -> CheckResult:
    tree = _edges(frame, "tree")
    adm, prot, outs = set(g.admissible), set(g.protected), set(g.outcomes)
    nodes = sorted({v for e in tree for v in e} | prot | outs)
    comp, _ = _components([v for v in nodes if v not in adm], [e for e in tree if not set(e) & adm])
    joined = [
        {"protected": p, "outcome": o}
        for p in sorted(prot)
        for o in sorted(outs)
        if p in comp and o in comp and comp[p] == comp[o]
    ]
    if not adm:
        joined.append({"rule": "no admissible attribute"})
    neighbours = []
    if g.neighbours_admissible:
        for a, b in tree:
            for o, x in ((a, b), (b, a)):
                if o in outs and x not in adm | outs:
                    neighbours.append({"outcome": o, "neighbour": x})
    bad = joined + neighbours
    observed = {"pairs_checked": len(prot) * len(outs), "violations": len(bad)}
    return make_result(
        g,
        not bad,
        observed,
        {"violations": 0},
        "every protected-outcome path passes an admissible attribute"
        + (", outcomes' neighbours admissible" if g.neighbours_admissible else "")
        if not bad
        else f"{len(joined)} protected-outcome pair(s) unseparated, "
        f"{len(neighbours)} inadmissible outcome neighbour(s)",
        bad,
    )


def _tables(model: pd.DataFrame) -> dict:
    out = {}
    for (a, b), rows in model.groupby(["a", "b"], sort=False):
        ia, ib = rows["code_a"].to_numpy(), rows["code_b"].to_numpy()
        t = np.zeros((ia.max() + 1, ib.max() + 1))
        np.add.at(t, (ia, ib), rows["count"].to_numpy(float))
        out[(a, b)] = t
        out[(b, a)] = t.T
    return out


def conditional_mi(joint: np.ndarray) -> float:
    """I(X; Y | Z) in nats of a joint table indexed [x, z, y]."""
    p = joint / joint.sum()
    pz = p.sum(axis=(0, 2))
    pxz = p.sum(axis=2)
    pzy = p.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = p * np.log(p * pz[None, :, None] / (pxz[:, :, None] * pzy[None, :, :]))
    return float(np.nansum(np.where(p > 0, t, 0.0)))


def _path_joint(tables: dict, path: list[str], keep: int) -> np.ndarray:
    """The model's joint of (path[0], path[keep], path[-1]) (indexed [x, kept, y]) by exact
    inference along the tree path: start from mu(v0, v1), multiply by each conditional
    mu(v_i, v_i+1) / mu(v_i), and copy v_keep into its own axis when the walk reaches it."""
    state = tables[(path[0], path[1])][:, None, :]
    for i in range(1, len(path) - 1):
        if i == keep:
            cur = state.sum(axis=1)
            state = cur[:, :, None] * np.eye(cur.shape[1])[None, :, :]
        t = tables[(path[i], path[i + 1])]
        with np.errstate(divide="ignore", invalid="ignore"):
            cond = np.nan_to_num(t / t.sum(axis=1, keepdims=True))
        state = np.einsum("xmc,cn->xmn", state, cond)
    return state


def check_model_independence(g: G.ModelIndependence, model: pd.DataFrame) -> CheckResult:
    tables = _tables(model)
    cliques = sorted({tuple(sorted(k)) for k in tables})
    nodes = sorted({v for e in cliques for v in e} | set(g.protected) | set(g.outcomes))
    _, cycle = _components(nodes, cliques)
    bad, worst = [], 0.0
    if cycle:
        bad.append({"rule": "the model's cliques form a tree"})
    A = set(g.admissible)
    for o in g.outcomes:
        for p in g.protected:
            path = tree_path(cliques, o, p)
            if path is None:
                continue  # not connected: independent
            inner = [i for i, v in enumerate(path[1:-1], start=1) if v in A]
            if not inner or cycle:
                bad.append(
                    {
                        "outcome": o,
                        "protected": p,
                        "path": "-".join(path),
                        "rule": "no admissible attribute on the path",
                    }
                )
                continue
            cmi = conditional_mi(_path_joint(tables, path, inner[0]))
            worst = max(worst, cmi)
            if not cmi <= g.tolerance:
                bad.append({"outcome": o, "protected": p, "separator": path[inner[0]], "cmi": cmi})
    observed = {"pairs": len(g.outcomes) * len(g.protected), "max_cmi": worst}
    return make_result(
        g,
        not bad,
        observed,
        g.tolerance,
        f"I(o; p | a) <= {g.tolerance} nats in the fitted model"
        if not bad
        else f"{len(bad)} outcome-protected pair(s) dependent in the model",
        bad,
    )


def g_test(o: np.ndarray, p: np.ndarray, s: np.ndarray) -> tuple[float, int, float]:
    """(G, df, p-value) of o independent of p given the strata s (integer codes >= 0).

    G = sum over strata of G_s / q_s, G_s = 2 sum n_ops ln(n_ops n_s / (n_os n_ps)), with
    Williams' correction q_s = 1 + (n_s sum 1/n_os - 1)(n_s sum 1/n_ps - 1) / (6 n_s df_s)
    (the G-test rejects too often on sparse tables without it); df = sum of
    df_s = (r_s - 1)(c_s - 1), r_s and c_s the levels of o and p observed in stratum s.
    """
    if len(o) == 0:
        return 0.0, 0, 1.0
    _, o = np.unique(o, return_inverse=True)
    _, p = np.unique(p, return_inverse=True)
    _, s = np.unique(s, return_inverse=True)
    no, np_, ns = o.max() + 1, p.max() + 1, s.max() + 1
    n = np.bincount((s * no + o) * np_ + p, minlength=ns * no * np_).reshape(ns, no, np_)
    n = n.astype(float)
    n_s = n.sum(axis=(1, 2))
    n_os = n.sum(axis=2)
    n_ps = n.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = n * np.log(n * n_s[:, None, None] / (n_os[:, :, None] * n_ps[:, None, :]))
        g_s = 2 * np.where(n > 0, t, 0.0).sum(axis=(1, 2))
        df_s = ((n_os > 0).sum(axis=1) - 1) * ((n_ps > 0).sum(axis=1) - 1)
        inv_o = np.where(n_os > 0, 1.0 / n_os, 0.0).sum(axis=1)
        inv_p = np.where(n_ps > 0, 1.0 / n_ps, 0.0).sum(axis=1)
        q = 1 + (n_s * inv_o - 1) * (n_s * inv_p - 1) / (6 * n_s * df_s)
    live = df_s > 0
    stat = float(np.sum(g_s[live] / q[live]))
    df = int(df_s[live].sum())
    pval = float(chi2.sf(stat, df)) if df > 0 else 1.0
    return stat, df, pval


def check_synthetic_independence(g: G.SyntheticIndependence, frame: pd.DataFrame) -> CheckResult:
    pairs = [(o, p) for o in g.outcomes for p in g.protected]
    level = g.alpha / max(1, len(pairs))
    bad, rows, lowest = [], [], 1.0
    for o, p in pairs:
        key = f"__s__{o}__{p}"
        if o not in frame or p not in frame or key not in frame:
            bad.append({"outcome": o, "protected": p, "rule": "columns present"})
            continue
        ok = (frame[o] >= 0) & (frame[p] >= 0)
        stat, df, pval = g_test(
            frame[o][ok].to_numpy(), frame[p][ok].to_numpy(), frame[key][ok].to_numpy()
        )
        lowest = min(lowest, pval)
        row = {"outcome": o, "protected": p, "G": stat, "df": df, "p_value": pval}
        rows.append(row)
        if not pval >= level:
            bad.append(row)
    admissible = set(g.admissible)
    if not admissible:
        bad.append({"rule": "no admissible attribute to condition on"})
    return make_result(
        g,
        not bad,
        lowest,
        level,
        f"no G-test rejects at {level:.3g} (alpha {g.alpha} / {len(pairs)} pairs)"
        if not bad
        else f"{len(bad)} pair(s) dependent given the admissible separator",
        bad or rows,
    )


def check_synthetic_schema(g: G.SyntheticSchema, frame: pd.DataFrame) -> CheckResult:
    problems = []
    names, types = frame["name"].tolist(), frame["type"].tolist()
    if names != list(g.columns):
        problems.append({"rule": "columns in the input's order", "found": names[:8]})
    elif types != list(g.types):
        diff = [(n, t, w) for n, t, w in zip(names, types, g.types, strict=True) if t != w]
        problems.append({"rule": "the input's types", "found": diff[:5]})
    outside = frame[frame["out_of_domain"] > 0]
    for r in outside.itertuples():
        problems.append(
            {"column": r.name, "rule": "values in the public domain", "outside": r.out_of_domain}
        )
    rows = int(frame["rows"].iloc[0]) if len(frame) else 0
    total = float(frame["noisy_total"].iloc[0]) if len(frame) else math.nan
    if g.rows is not None:
        want = g.rows
    else:
        want = min(noisy_rows(total), g.max_rows) if math.isfinite(total) else None
    if rows != want:
        problems.append({"rule": "row count", "rows": rows, "expected": want})
    return make_result(
        g,
        not problems,
        rows,
        want,
        "the input's schema, values in their public domains, rows as declared"
        if not problems
        else f"{len(problems)} output rule(s) broken",
        problems,
    )


def check_synthetic_nulls(g: G.SyntheticNulls, frame: pd.DataFrame) -> CheckResult:
    nullable = set(g.nullable)
    invented = [
        {
            "column": r.name,
            "rule": "no null where the declared domain has no null level",
            "nulls": int(r.nulls),
        }
        for r in frame.itertuples()
        if r.nulls > 0 and r.name not in nullable
    ]
    return make_result(
        g,
        not invented,
        {"columns_with_nulls": sorted(str(r.name) for r in frame.itertuples() if r.nulls > 0)},
        {"nullable": sorted(nullable)},
        "nulls only in the columns whose declared domain holds a null level"
        if not invented
        else f"{len(invented)} column(s) hold a null their declared domain does not have",
        invented,
    )


def check_adaptive_ledger(g: G.AdaptiveLedger, ledger: pd.DataFrame) -> CheckResult:
    d = len(g.attributes)
    problems: list[dict] = []
    rows = list(ledger.itertuples())
    for r in rows:
        if not (math.isfinite(r.scale) and r.scale > 0):
            problems.append({"step": r.step, "rule": "noise present", "scale": r.scale})
        elif r.sensitivity != 1.0 or r.mechanism not in ("gaussian", "noisy_max"):
            problems.append({"step": r.step, "rule": "gaussian or noisy_max of sensitivity 1"})
        elif r.rho != step_rho(r.mechanism, r.scale, r.sensitivity):
            problems.append({"step": r.step, "rule": "rho = OpenDP map of the scale", "rho": r.rho})
    sigma0 = math.sqrt(g.rounds / (2.0 * (1.0 - g.select_share) * g.rho)) if g.rho > 0 else 0.0
    one, rest = rows[:d], rows[d:]
    if [r.phase for r in one] != ["one_way"] * d or [r.query for r in one] != list(g.attributes):
        problems.append({"rule": "d 1-way steps on the attributes first", "found": len(one)})
    for r in one:
        if r.mechanism != "gaussian" or abs(r.scale - sigma0) > 1e-9 * sigma0:
            problems.append(
                {"step": r.step, "rule": "1-way std of the first round", "scale": r.scale}
            )
    want = [("select", "noisy_max"), ("two_way", "gaussian")] * (len(rest) // 2)
    if not rest or len(rest) % 2 or [(r.phase, r.mechanism) for r in rest] != want:
        problems.append({"rule": "rounds of one selection then one 2-way measurement"})
    else:
        budget_left = g.rho - float(sum(r.rho for r in one))
        prev = sigma0
        n = len(rest) // 2
        for k in range(n):
            sel, mea = rest[2 * k], rest[2 * k + 1]
            cost = sel.rho + mea.rho
            if abs(sel.rho - g.select_share * cost) > g.tolerance_share * cost:
                problems.append({"step": sel.step, "rule": "selection share", "rho": sel.rho})
            if k < n - 1:
                if not any(abs(mea.scale - s) <= 1e-9 * s for s in (prev, prev / 2)):
                    problems.append(
                        {"step": mea.step, "rule": "std kept or halved", "scale": mea.scale}
                    )
                if budget_left < 2 * cost * (1 - 1e-9):
                    problems.append({"step": sel.step, "rule": "two rounds left before a round"})
            prev = mea.scale
            budget_left -= cost
    return _spends_the_budget(
        g,
        ledger,
        problems,
        "every 2-way measurement was selected privately; the ledger spends the budget and no more",
    )


def check_chordal_structure(g: G.ChordalStructure, frame: pd.DataFrame) -> CheckResult:
    from privfair.components.synthesis.junction import maximal_cliques

    nodes = list(g.attributes)
    rows = frame[frame["source"] == "tree"]
    picked = list(zip(rows["a"], rows["b"], strict=True))
    paid = list(zip(*[frame[frame["source"] == "two_way"][c] for c in ("a", "b")], strict=True))
    problems = []
    strange = [e for e in picked if e[0] not in nodes or e[1] not in nodes or e[0] == e[1]]
    if strange:
        problems.append({"rule": "pairs join two attributes", "pairs": strange[:5]})
    if picked != paid:
        problems.append(
            {
                "rule": "selected pairs = paid 2-way queries, in order",
                "selected": len(picked),
                "paid": len(paid),
            }
        )
    edges = sorted({tuple(sorted(e)) for e in picked if e not in strange})
    index = {v: i for i, v in enumerate(nodes)}
    if maximal_cliques(len(nodes), [(index[a], index[b]) for a, b in edges]) is None:
        problems.append({"rule": "the graph of the selected pairs is chordal"})
    model = sorted(set(_edges(frame, "model")))
    if model != edges:
        problems.append(
            {
                "rule": "model edges = selected pairs",
                "extra": sorted(set(model) - set(edges))[:5],
                "missing": sorted(set(edges) - set(model))[:5],
            }
        )
    return make_result(
        g,
        not problems,
        len(edges),
        "a chordal graph of the selected pairs",
        "the paid pairs form a chordal graph, fitted on its edges"
        if not problems
        else f"{len(problems)} structure rule(s) broken",
        problems,
    )
