"""The attacker of a transparency report (issue 21, point 5), on the shipped Adult report.

Setting: ``pipelines/specs/adult_atr.yaml`` (a logistic regression on UCI Adult decides; cells
sex (public) x education band (private); delta = 0.9). The attacker is the honest-but-curious
adversary of the paper (spec 1.4) at its strongest: besides what the data owner hands out (the
three public tables, the metrics ``ATR.public`` declares, the public figures) they know every
cell's population (P_X, side information A2), delta, and the mechanism (this code), so they can
re-run it on any true rule they guess. They try to recover

- a QID group's true positive rate (``floor_group_rates``: a group whose published beta* is its
  floor max P / N announced its true rate under the spec's SELECT_S, S = clamp(true mass));
- a QID group's three true cell rules (``c_star_completion``: every cell announced at an end of
  its fidelity interval read back as announced -+ (1 - delta), the one rule left solved from C*,
  the confidence under the true rules, and the guess kept only if the mechanism run on it
  reproduces the published tables and, when the attacker has it, the trade-off curve);
- the true SP and PR between the two sexes (``parity_from_total``: one group's true rate and the
  model card's exact overall positive rate give the other group's).

Before issue 21 was fixed the beta_min group (sex = 0) announced its true rate 0.075284; the
manifest's model card held the exact positive rate and C* (0.698, above beta* 0.657), and the
owner's trade-off sweep ran on the true rules: together they gave sex = 1's three rules and the
true SP 0.180275 and PR 0.294586, while the report showed the intervals [0.013, 0.413] and
[0, 0.932].
``test_owner_view_gives_the_true_rules_and_parity_back`` replays that attack on the owner's
numbers (it must succeed: the test can fail); the public view must give nothing of it back
(``test_public_view_gives_no_true_rate_rule_or_parity``), and
``test_other_true_rules_give_the_same_public_view`` proves it for every attacker: other true
rules, with other true rates, SP and PR, give the same public tables, metrics and figures.

What the announced mapping and delta do give a reader who knows the mechanism (spec L1, outside
the paper's guarantee) is stated by ``test_cells_announced_at_an_end_give_their_rule_away``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest

from privfair.components.transparency import ATR
from privfair.components.transparency.atr import atr
from privfair.components.transparency.figures import figures
from privfair.components.transparency.params import ATRParams
from privfair.components.transparency.scheme import adversary_confidence, fidelity_bounds, solve
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles
from tests.transparency._reports import shipped_report

EXACT = 1e-6  # "recovered": within this of the true value
BANDS = ("<9", "[9, 13)", ">=13")


# --- the release and what the attacker holds -----------------------------------------------------


@pytest.fixture(scope="module")
def adult(builtin_table):
    """(input table with the family's Adult roles, params of adult_atr.yaml, the run)."""
    table, params = shipped_report(builtin_table, "adult_atr")
    return table, params, atr(table, params)


@pytest.fixture(scope="module")
def truth(adult):
    """The owner's truth, to score the attacker: cells, true rules, rates, SP, PR."""
    _, _, result = adult
    cells = result.sidecars["audit_cells"].to_pydict()
    pop = np.asarray(cells["population"], dtype=float)
    d1 = np.asarray(cells["d1_true"], dtype=float)
    sex = np.asarray(cells["sex"])
    rates = {g: float((pop * d1)[sex == g].sum() / pop[sex == g].sum()) for g in ("0", "1")}
    return {
        "cells": cells,
        "population": pop,
        "d1": d1,
        "rates": rates,
        "sp": abs(rates["0"] - rates["1"]),
        "pr": rates["0"] / rates["1"],
    }


def public_view(result, params) -> dict:
    """What the data owner hands out: the public tables, the declared public metrics and the
    declared figures (drawn with no input and no sidecars)."""
    metrics = ATR.public.public_metrics(result.metrics)
    manifest = {"metrics": metrics, "params": params.model_dump(mode="json")}
    drawn = figures(manifest, result.outputs, None, {})
    return {
        "outputs": result.outputs,
        "metrics": metrics,
        "figures": {f.name: f.svg for f in drawn if f.name in ATR.public.figures},
    }


def owner_view(table, params, result) -> dict:
    """What the owner keeps (the attack of issue 21 had it, through the manifest, the report and
    the Great Expectations results): every metric, and the trade-off figure's curves, beta*_g
    over the fidelity sweep computed on the true rules (the last point, fidelity 1, is C*_g)."""
    from privfair.components.transparency.audit import evidence
    from privfair.components.transparency.checks import closed_form
    from privfair.components.transparency.contract import sweep_grid

    cells = evidence(table, {}, {}, params)["cells"]
    grid = sweep_grid(params)
    curves = np.array([closed_form(cells, params.fidelity, lvl)["beta"].to_numpy() for lvl in grid])
    names = cells.groupby("__group")["sex"].first().astype(str).tolist()
    sweep = {"grid": grid, **{g: curves[:, i] for i, g in enumerate(names)}}
    return {"outputs": result.outputs, "metrics": result.metrics, "figures": {}, "sweep": sweep}


def _metric(view: dict, key: str):
    v = view["metrics"]
    for part in key.split("."):
        if not isinstance(v, dict) or part not in v:
            return None
        v = v[part]
    return v


# --- the attacks ---------------------------------------------------------------------------------


def _groups(view: dict) -> dict[str, np.ndarray]:
    sex = np.asarray(view["outputs"]["decision_rules"].column("sex").to_pylist())
    return {g: np.flatnonzero(sex == g) for g in ("0", "1")}


def _announced(view: dict) -> np.ndarray:
    return np.asarray(view["outputs"]["decision_rules"].column("announced_d1").to_pylist())


def _published_beta(view: dict) -> dict[str, float]:
    s = view["outputs"]["privacy_summary"].to_pydict()
    return {
        g: b
        for scope, g, b in zip(s["scope"], s["sex"], s["max_adversary_confidence"], strict=True)
        if scope == "group"
    }


def floor_group_rates(view: dict, pop: np.ndarray) -> dict[str, float]:
    """Per QID group whose published beta* is its floor max P / N: its announced rate, taken as
    its true rate (exact under the spec's S = clamp(true mass, g_l, f_r))."""
    ann, beta = _announced(view), _published_beta(view)
    out = {}
    for g, cells in _groups(view).items():
        floor = pop[cells].max() / pop[cells].sum()
        if abs(beta[g] - floor) <= 1e-12:
            out[g] = float((pop[cells] * ann[cells]).sum() / pop[cells].sum())
    return out


def _mechanism(pop: np.ndarray, d1: np.ndarray, params: ATRParams) -> tuple[np.ndarray, float]:
    lo, hi = fidelity_bounds(d1, params.fidelity, params.level)
    sol = solve(np.zeros(len(pop), dtype=np.int64), pop, lo, hi, d1, alloc=params.allocation)
    return sol.d1_tilde, float(sol.beta[0])


def _curve(P: np.ndarray, d: np.ndarray, params: ATRParams, grid) -> np.ndarray:
    out = []
    for lvl in grid:
        lo, hi = fidelity_bounds(d, params.fidelity, lvl)
        out.append(solve(np.zeros(len(P), dtype=np.int64), P, lo, hi, d).beta[0])
    return np.array(out)


def c_star_completion(view: dict, pop: np.ndarray, params: ATRParams) -> dict[str, np.ndarray]:
    """Per QID group, its true rules when every guess consistent with the view agrees.

    A guess: one cell's rule unknown, every other cell at an end of its interval (true rule =
    announced -+ (1 - delta)), and the group's C* (the last point of its trade-off curve when
    the view has the curves, else c_star_global) attained at one (cell, outcome), which fixes
    the unknown rule. It is kept when it lies within the fidelity of the announced rule, the
    mechanism run on it announces the published rules and beta*, and its trade-off curve is
    the published one. Needs ``c_star_global`` or the curves."""
    sweep = view.get("sweep")
    c_star_global = _metric(view, "c_star_global")
    if c_star_global is None and sweep is None:
        return {}
    s = 1.0 - params.level
    ann, beta = _announced(view), _published_beta(view)
    out = {}
    for g, cells in _groups(view).items():
        P, A = pop[cells], ann[cells]
        c_star = c_star_global if sweep is None else float(sweep[g][-1])
        kept = []
        for j in range(len(cells)):
            others = [k for k in range(len(cells)) if k != j]
            for signs in itertools.product((-1.0, 1.0), repeat=len(others)):
                d = A.copy()
                d[others] = A[others] + np.array(signs) * s
                if ((d[others] < 0) | (d[others] > 1)).any():
                    continue
                for k, a in itertools.product(range(len(cells)), (0, 1)):
                    w = d if a == 1 else 1.0 - d
                    rest = sum(P[x] * w[x] for x in others)
                    if k == j:
                        wj = c_star * rest / (P[j] * (1 - c_star))
                    else:
                        wj = (P[k] * w[k] / c_star - rest) / P[j]
                    d[j] = wj if a == 1 else 1.0 - wj
                    if not (0 <= d[j] <= 1 and abs(d[j] - A[j]) <= s + 1e-12):
                        continue
                    conf = adversary_confidence(np.zeros(len(P), dtype=np.int64), P, d)[0]
                    announced, b = _mechanism(P, d, params)
                    if (
                        abs(conf - c_star) <= 1e-9
                        and np.allclose(announced, A, atol=1e-9)
                        and abs(b - beta[g]) <= 1e-9
                        and (
                            sweep is None
                            or np.allclose(_curve(P, d, params, sweep["grid"]), sweep[g], atol=1e-9)
                        )
                    ):
                        kept.append(d.copy())
        if kept and np.ptp(np.array(kept), axis=0).max() <= EXACT:
            out[g] = np.mean(kept, axis=0)
    return out


def parity_from_total(view: dict, pop: np.ndarray, known: dict[str, float]) -> dict[str, float]:
    """True SP and PR from one group's true rate and the overall true positive rate (the model
    card's ``positive_rate``); without them, the announced SP and PR are the attacker's guess."""
    rows = view["outputs"]["fairness"].to_pylist()
    guess = {r["measure"].lower(): r["value"] for r in rows if r["measure"] in ("SP", "PR")}
    total = _metric(view, "model.positive_rate")
    if total is None or not known:
        return guess
    groups = _groups(view)
    g, r = next(iter(known.items()))
    other = "1" if g == "0" else "0"
    n, n_g, n_o = pop.sum(), pop[groups[g]].sum(), pop[groups[other]].sum()
    r_o = (total * n - r * n_g) / n_o
    rates = {g: r, other: r_o}
    return {"sp": abs(rates["0"] - rates["1"]), "pr": rates["0"] / rates["1"]}


def attack(view: dict, pop: np.ndarray, params: ATRParams) -> dict:
    """Everything the attacker gets out of ``view``: group rates, group rules, SP, PR."""
    rules = c_star_completion(view, pop, params)
    groups = _groups(view)
    solved = {g: float((pop[groups[g]] * d).sum() / pop[groups[g]].sum()) for g, d in rules.items()}
    rates = floor_group_rates(view, pop) | solved  # a solved group's rate over the floor guess
    known = solved or rates
    return {"rates": rates, "rules": rules, **parity_from_total(view, pop, known)}


# --- the tests -----------------------------------------------------------------------------------


def test_owner_view_gives_the_true_rules_and_parity_back(adult, truth):
    """With the owner's numbers (C* and the trade-off curves on the true rules, the model
    card's exact positive rate) the attack of issue 21 works, on this code too: sex = 1's three
    rules, both true rates, the true SP and PR."""
    table, params, result = adult
    got = attack(owner_view(table, params, result), truth["population"], params)
    sex1 = np.flatnonzero(np.asarray(truth["cells"]["sex"]) == "1")
    np.testing.assert_allclose(got["rules"]["1"], truth["d1"][sex1], atol=EXACT)
    assert got["rates"]["1"] == pytest.approx(truth["rates"]["1"], abs=EXACT)
    assert got["sp"] == pytest.approx(truth["sp"], abs=EXACT)
    assert got["pr"] == pytest.approx(truth["pr"], abs=EXACT)
    assert truth["sp"] == pytest.approx(0.180275, abs=5e-7)
    assert truth["pr"] == pytest.approx(0.294586, abs=5e-7)


def test_public_view_gives_no_true_rate_rule_or_parity(adult, truth):
    """From what the owner hands out, no group's true rate, no group's rules, neither the true
    SP nor the true PR comes back within 1e-6 (each is off by more than 1e-3)."""
    _, params, result = adult
    view = public_view(result, params)
    got = attack(view, truth["population"], params)
    for g, r in got["rates"].items():
        assert abs(r - truth["rates"][g]) > 1e-3, f"sex = {g}: true rate {truth['rates'][g]}"
    assert not got["rules"]
    assert abs(got["sp"] - truth["sp"]) > 1e-3
    assert abs(got["pr"] - truth["pr"]) > 1e-3
    assert view["metrics"], "the report declares no public metric: nothing was tried on them"


def test_public_metrics_and_figures_follow_from_the_tables(adult):
    """The declared metrics are read off the public tables and the params; no metric computed
    from the true rules or the input, and no figure drawn from them, is in the view."""
    _, params, result = adult
    view = public_view(result, params)
    out = result.outputs
    summary = out["privacy_summary"].to_pydict()
    m = view["metrics"]
    assert m["cells"] == out["decision_rules"].num_rows
    assert m["groups"] == summary["scope"].count("group")
    assert m["beta_global"] == summary["max_adversary_confidence"][summary["scope"].index("global")]
    assert (m["fidelity_mode"], m["fidelity"]) == (params.fidelity, params.level)
    for r in out["fairness"].to_pylist():
        key = r["measure"] + ("" if r["condition_value"] is None else f":{r['condition_value']}")
        assert m["fairness"][key] == {
            "announced": r["value"],
            "interval": [r["true_value_lower"], r["true_value_upper"]],
        }
    assert m["decisions"] == {
        "source": "model",
        "kind": "logistic_regression",
        "target": "income",
        "features": result.metrics["model"]["features"],
        "train_fraction": 0.7,
    }
    for key in ("c_star_global", "beta_min_global", "cases", "max_abs_change", "records", "model"):
        assert key not in m
    assert set(view["figures"]) == set(ATR.public.figures)
    assert "tradeoff" not in view["figures"]


def test_fairness_intervals_follow_from_announced_rates_and_fidelity(adult, truth):
    """Every interval of fairness.parquet is Lemma 2 applied to the row's own announced rates
    and the fidelity (no true quantity enters, none clips an end) and holds the true value."""
    _, params, result = adult
    s = 1.0 - params.level
    for r in result.outputs["fairness"].to_pylist():
        a1, a2 = r["rate_group_1"], r["rate_group_2"]
        assert (r["fidelity_mode"], r["fidelity"], r["rate_bound"]) == ("delta", 0.9, s)
        if r["measure"] in ("SP", "CSP"):
            b = min(2 * s, 1.0)
            want = (max(0.0, abs(a1 - a2) - b), min(1.0, abs(a1 - a2) + b))
        else:
            lo1, hi1 = max(0.0, a1 - s), min(1.0, a1 + s)
            lo2, hi2 = max(0.0, a2 - s), min(1.0, a2 + s)
            want = (lo1 / hi2, hi1 / lo2)
        assert (r["true_value_lower"], r["true_value_upper"]) == pytest.approx(want, abs=1e-12)
    audit = {
        (r["measure"], r["condition_value"]): r["true_value"]
        for r in result.sidecars["audit_fairness"].to_pylist()
    }
    for r in result.outputs["fairness"].to_pylist():
        true = audit[(r["measure"], r["condition_value"])]
        assert r["true_value_lower"] <= true <= r["true_value_upper"]
    sp = next(r for r in result.outputs["fairness"].to_pylist() if r["measure"] == "SP")
    assert sp["true_value_lower"] < truth["sp"] < sp["true_value_upper"]


def _cells_table(truth: dict, d1: np.ndarray) -> pa.Table:
    """The release's cells as a pre-aggregated input, with the true rule ``d1``."""
    roles = TableRoles.of(
        [
            ColumnRole("sex", Role.PUBLIC, Kind.NOMINAL),
            ColumnRole("education-num", Role.SENSITIVE, Kind.ORDINAL, domain=BANDS),
            ColumnRole("d1", Role.LABEL, Kind.NUMERIC, positive=1),
            ColumnRole("population", Role.ADMISSIBLE, Kind.NUMERIC),
        ]
    )
    data = pa.table(
        {
            "sex": truth["cells"]["sex"],
            "education-num": truth["cells"]["education-num"],
            "d1": pa.array(d1, pa.float64()),
            "population": pa.array(truth["population"], pa.float64()),
        }
    )
    return attach_roles(data, roles)


def _view_of(table: pa.Table, params: ATRParams) -> dict:
    return public_view(atr(table, params), params)


def _same(a: dict, b: dict) -> bool:
    return (
        all(a["outputs"][k].equals(b["outputs"][k]) for k in a["outputs"])
        and a["metrics"] == b["metrics"]
        and a["figures"] == b["figures"]
    )


def test_other_true_rules_give_the_same_public_view(adult, truth):
    """No attacker can recover what the shareable copy does not determine: true rules that
    differ from the release's (the sex = 0 cell [9, 13), which announces its group's flat
    level, anywhere in [0.02, 0.15]; the sex = 1 cell <9, announced at its clipped end 0,
    anywhere in [0, 0.09]) give a byte-identical public view, yet true group rates, SP and PR
    that differ by more than 0.01."""
    _, params, result = adult
    cells = params.model_copy(update={"decisions": "cells", "bins": {}})
    base = _view_of(_cells_table(truth, truth["d1"]), cells)
    mine = public_view(result, params)
    assert all(base["outputs"][k].equals(mine["outputs"][k]) for k in mine["outputs"])
    assert base["figures"] == mine["figures"]
    sex, band = np.asarray(truth["cells"]["sex"]), np.asarray(truth["cells"]["education-num"])
    flat = int(np.flatnonzero((sex == "0") & (band == "[9, 13)"))[0])
    clipped = int(np.flatnonzero((sex == "1") & (band == "<9"))[0])
    sps, prs, rates0, rates1 = [truth["sp"]], [truth["pr"]], [], []
    for a, b in itertools.product((0.02, 0.15), (0.0, 0.09)):
        d1 = truth["d1"].copy()
        d1[flat], d1[clipped] = a, b
        assert _same(_view_of(_cells_table(truth, d1), cells), base), (a, b)
        pop = truth["population"]
        r0 = (pop * d1)[sex == "0"].sum() / pop[sex == "0"].sum()
        r1 = (pop * d1)[sex == "1"].sum() / pop[sex == "1"].sum()
        rates0.append(r0)
        rates1.append(r1)
        sps.append(abs(r0 - r1))
        prs.append(r0 / r1)
    for spread in (np.ptp(sps), np.ptp(prs), np.ptp(rates0), np.ptp(rates1)):
        assert spread > 0.01


def test_cells_announced_at_an_end_give_their_rule_away(adult, truth):
    """What the announced mapping and delta give a reader who knows the mechanism (spec L1,
    documented in privfair.components.transparency.scheme): a cell announced at an unclipped end of its
    fidelity interval has the true rule announced -+ (1 - delta). Here: sex = 1 (case beta_0,
    whose solution the optimum fixes) announces [9, 13) at its upper end (x^0) and >= 13 at its
    lower end; sex = 0 (case beta_min) announces <9 and >= 13 at the ends of their intervals
    nearest its flat level, which their intervals miss. The other two cells (sex = 0 [9, 13) at
    the flat level, sex = 1 <9 at the clipped end 0) give nothing but their interval, and with
    them each group's rate stays open (previous test)."""
    _, params, result = adult
    s = 1.0 - params.level
    ann = _announced(public_view(result, params))
    d1 = truth["d1"]
    sex, band = np.asarray(truth["cells"]["sex"]), np.asarray(truth["cells"]["education-num"])
    at_end = {("0", "<9"): -s, ("0", ">=13"): +s, ("1", "[9, 13)"): -s, ("1", ">=13"): +s}
    for i in range(len(d1)):
        shift = at_end.get((str(sex[i]), str(band[i])))
        if shift is None:
            assert min(abs(ann[i] - s - d1[i]), abs(ann[i] + s - d1[i])) > 1e-3
        else:
            assert ann[i] + shift == pytest.approx(d1[i], abs=1e-12)
    groups = result.sidecars["audit_groups"].to_pydict()
    assert groups["case"] == ["betamin", "beta0"]
