"""The ATR privacy component (spec 7.3): cells, fidelity bounds, the corrected solver, the
fairness measures, and the three public tables plus the internal audit tables.

Public outputs (everything computed from the announced mapping D~, the cell populations the
adversary is assumed to know, and the parameters; never from D):

- ``decision_rules``: one row per cell, its key and the announced D~_1, D~_0 (and its
  population with ``include_population``);
- ``fairness``: SP, CSP per stratum and the p%-rule, announced, with the fidelity's distortion
  bound and an interval that holds the true value, its ends computed from the announced rates
  and the fidelity alone (``fairness.announced_rows`` is never given D);
- ``privacy_summary``: beta*_g per QID group and beta*_global, the largest confidence an
  adversary reading D~ as the true mapping can reach about a subject's private attributes,
  recomputed from D~ (it equals the solver's optimum, C3).

Internal sidecars (never published): ``audit_cells`` (true rule, bounds, confidences before
and after), ``audit_groups`` (the solver's candidates and case), ``audit_fairness`` (the true
values), ``training`` (which records trained the model, with ``decisions: model``).

Metrics: the public ones (``ATR.public``) are read off the public tables or the parameters;
``c_star_global``, ``beta_min_global``, ``cases``, ``max_abs_change``, ``unprotectable_groups``,
``records`` and the model card (``model``) are computed from D or the input and stay with the
owner.

>>> from privfair.components.transparency.examples import golden_cells
>>> r = atr(golden_cells(), ATRParams(delta=0.9, decisions="cells"))
>>> [round(b, 6) for b in r.outputs["privacy_summary"].column("max_adversary_confidence").to_pylist()]
[0.675, 0.637795, 0.675]
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from privfair.components.core.inputs import absent_value
from privfair.components.core.result import ComponentResult
from privfair.components.transparency.cells import Cells, build_cells
from privfair.components.transparency.contract import contract
from privfair.components.transparency.fairness import announced_rows, default_measures, measure_rows
from privfair.components.transparency.fidelity import fidelity_bounds
from privfair.components.transparency.fields import PUBLIC_FAIRNESS
from privfair.components.transparency.params import ATRParams
from privfair.components.transparency.randomised import draw
from privfair.components.transparency.scheme import adversary_confidence, solve
from privfair.schemas.errors import InputError

__all__ = [
    "atr",
    "protect_cells",
    "announce",
    "at_an_end",
    "NOTICE",
    "PUBLIC_FAIRNESS",
    "PUBLIC_MODEL_FIELDS",
]

NOTICE = (
    "decision rules and measures are perturbed for privacy within the stated fidelity; "
    "see the intervals"
)

PUBLIC_MODEL_FIELDS = ("kind", "target", "features", "train_fraction")
"""The model card's fields that are parameters or column roles (``metrics.decisions``)."""


def _confidences(group, p, d):
    """Per cell, the confidence of each outcome: P d / sum_group P d (0 where none)."""
    out = []
    for masses in (p * d, p * (1 - d)):
        s = np.bincount(group, weights=masses)[group]
        out.append(np.divide(masses, s, out=np.zeros_like(masses), where=s > 0))
    return out


def protect_cells(cells: Cells, params: ATRParams):
    """(bounds L, H, the solver's Solution) for ``cells``."""
    lo, hi = fidelity_bounds(cells.d1, params.fidelity, params.level)
    sol = solve(cells.group, cells.p, lo, hi, cells.d1, alloc=params.allocation)
    return lo, hi, sol


def announce(cells: Cells, params: ATRParams, lo, hi, sol) -> np.ndarray:
    """The announced D~_1 per cell: the optimum, or with ``announce: randomised`` a draw from
    the mappings within the fidelity whose confidence is at most beta*_g + slack
    (``randomised.draw``; its generator seeded by ``announce_seed``, fresh OS entropy when
    None)."""
    if params.announce == "optimum":
        return sol.d1_tilde
    rng = np.random.default_rng(params.announce_seed)
    return draw(sol.cell_group, cells.p, lo, hi, sol.d1_tilde, sol.beta, params.slack, rng)


def at_an_end(p, lo, hi, d_ann, tol: float = 1e-12) -> int:
    """Populated cells announced at an unclipped end of their interval: their true rule is
    the announced one -+ (1 - delta) to a reader who knows delta (owner only: reads [L, H])."""
    end = ((np.abs(d_ann - lo) <= tol) & (lo > 0)) | ((np.abs(d_ann - hi) <= tol) & (hi < 1))
    return int((end & (p > 0)).sum())


def _measures(params: ATRParams, cells: Cells, keys: dict) -> list[dict]:
    """The measures to publish: ``params.fairness``, each naming attributes of the cells and
    two groups that hold data subjects, or the default ones.

    A group is a value of the attribute as the report writes it (its text: the group 1 of an
    integer column is ``1`` or ``"1"``, not ``1.0``) whose cells have a positive population; a
    group no record falls in cannot be compared, and is refused (``InputError`` naming the
    attribute, the measure's key and the value, and listing the values that occur)."""
    if not params.fairness:
        return default_measures(keys, cells.population, cells.public, cells.private)
    for i, m in enumerate(params.fairness):
        for a in filter(None, (m.protected_attribute, m.condition_attribute)):
            if a not in keys:
                raise InputError(
                    a,
                    "a fairness measure names an attribute the cells lack",
                    f"fairness[{i}]; attributes: {', '.join(keys)}",
                )
        col = keys[m.protected_attribute]
        held = list(dict.fromkeys(col[cells.population > 0].tolist()))
        for field in ("group_1", "group_2"):
            value = getattr(m, field)
            if str(value) not in held:
                raise absent_value(m.protected_attribute, f"fairness[{i}].{field}", value, held)
    return [m.model_dump() for m in params.fairness]


def atr(table: pa.Table, params: ATRParams) -> ComponentResult:
    """Run the component on decision records or cells (``params.decisions``)."""
    started = time.perf_counter()
    cells = build_cells(table, params)
    keys = {
        n: np.asarray(cells.keys.column(n).to_pylist(), dtype=object)
        for n in cells.keys.column_names
    }
    measures = _measures(params, cells, keys)  # refused before the solver runs
    lo, hi, sol = protect_cells(cells, params)
    d_ann = announce(cells, params, lo, hi, sol)
    t_solve = time.perf_counter()
    # the published rows never see the true rule; the audit rows add the true values
    public_rows = announced_rows(
        measures, keys, cells.population, d_ann, params.fidelity, params.level
    )
    rows = measure_rows(
        measures, keys, cells.population, cells.d1, d_ann, params.fidelity, params.level
    )
    n_cells = len(d_ann)

    rules = {n: cells.keys.column(n) for n in cells.keys.column_names}
    rules["announced_d1"] = pa.array(d_ann, pa.float64())
    rules["announced_d0"] = pa.array(1.0 - d_ann, pa.float64())
    if params.include_population:
        rules["population"] = pa.array(cells.population, pa.float64())
    fairness = pa.Table.from_pylist(
        [{k: r[k] for k in PUBLIC_FAIRNESS} for r in public_rows],
        schema=pa.schema(
            [(k, pa.string()) for k in PUBLIC_FAIRNESS[:6]]
            + [(k, pa.float64()) for k in ("rate_group_1", "rate_group_2", "value")]
            + [("fidelity_mode", pa.string())]
            + [(k, pa.float64()) for k in ("fidelity", "distortion_bound", "rate_bound",
                                           "true_value_lower", "true_value_upper", "pr_threshold_p")]
            + [("pr_satisfied_announced", pa.bool_())]
        ),
    )  # fmt: skip
    # beta*_g as published: the confidence recomputed from the announced mapping and P (equal
    # to the solver's optimum within 1e-9, C3), so the summary is a function of what it states
    achieved = adversary_confidence(cells.group, cells.p, d_ann, tol=1e-9)
    beta_published = float(np.nanmax(achieved))
    first = np.zeros(len(sol.groups), dtype=np.int64)
    first[sol.cell_group[::-1]] = np.arange(n_cells)[::-1]
    summary = {
        "scope": ["group"] * len(sol.groups) + ["global"],
        **{n: [cells.keys.column(n)[int(i)].as_py() for i in first] + [None] for n in cells.public},
        "max_adversary_confidence": [*map(float, achieved), beta_published],
        "fidelity_mode": [params.fidelity] * (len(sol.groups) + 1),
        "fidelity_value": [params.level] * (len(sol.groups) + 1),
        "notice": [NOTICE] * (len(sol.groups) + 1),
    }
    c1_true, c0_true = _confidences(cells.group, cells.p, cells.d1)
    c1_ann, c0_ann = _confidences(cells.group, cells.p, d_ann)
    audit_cells = pa.table(
        {
            **{n: cells.keys.column(n) for n in cells.keys.column_names},
            "group": pa.array(cells.group, pa.int64()),
            "population": cells.population,
            "p_x": cells.p,
            "d1_true": cells.d1,
            "d1_min": lo,
            "d1_max": hi,
            "d1_announced": d_ann,
            "abs_change": np.abs(d_ann - cells.d1),
            "conf_true_a1": c1_true,
            "conf_true_a0": c0_true,
            "conf_announced_a1": c1_ann,
            "conf_announced_a0": c0_ann,
        }
    )
    c_star = adversary_confidence(cells.group, cells.p, cells.d1)
    audit_groups = pa.table(
        {
            "group": pa.array(np.arange(len(sol.groups)), pa.int64()),
            "m": sol.m,
            "mass": sol.mass,
            "x1_cell": sol.pi,
            "x0_cell": sol.theta,
            "M1": sol.M1,
            "M0": sol.M0,
            "beta_0": sol.beta0,
            "beta_1": sol.beta1,
            "beta_p": sol.betap,
            "beta_min": sol.betamin,
            "beta_star": sol.beta,
            "case": pa.array([str(c) for c in sol.case]),
            "C_star": c_star,
            "achieved_max_conf": achieved,
            "S_announced": sol.S,
            "alloc_residual": sol.residual,
            "unprotectable": sol.betamin >= 1 - 1e-12,
        }
    )
    sidecars = {
        "audit_cells": audit_cells,
        "audit_groups": audit_groups,
        "audit_fairness": pa.Table.from_pylist(rows)
        if rows
        else pa.table({"measure": pa.array([], pa.string())}),
    }
    split = cells.split if cells.split is not None else np.zeros(0, dtype=bool)
    sidecars["training"] = pa.table(
        {
            "row_id": pa.array(np.arange(len(split)), pa.int64()),
            "train": pa.array(split, pa.bool_()),
        }
    )
    warnings = list(cells.warnings)
    if params.announce == "randomised" and params.announce_seed is not None:
        warnings.append(
            "announce_seed is published with the params: whoever holds it can replay the "
            "randomised draw for every candidate true rule and read the true rules back (leave "
            "it unset for a release)"
        )
    unprot = int((sol.betamin >= 1 - 1e-12).sum())
    if unprot:
        warnings.append(
            f"{unprot} of {len(sol.groups)} QID groups hold one populated cell: their private "
            "value is certain from the public record alone (beta* = 1, unprotectable)"
        )
    metrics = {
        "records": table.num_rows,
        "cells": n_cells,
        "groups": len(sol.groups),
        "fidelity_mode": params.fidelity,
        "fidelity": params.level,
        "beta_global": beta_published,
        "c_star_global": float(np.nanmax(c_star)),
        "beta_min_global": float(np.nanmax(sol.betamin)),
        "unprotectable_groups": unprot,
        "cases": {c: int((sol.case == c).sum()) for c in ("beta0", "beta1", "betap", "betamin")},
        "max_abs_change": float(np.abs(d_ann - cells.d1).max()),
        "cells_at_end": at_an_end(cells.p, lo, hi, d_ann),
        "fairness": {
            f"{r['measure']}{'' if r['condition_value'] is None else ':' + r['condition_value']}": {
                "announced": r["value"], "interval": [r["true_value_lower"], r["true_value_upper"]],
            }
            for r in public_rows
        },
    }  # fmt: skip
    metrics["decisions"] = {"source": params.decisions}
    if cells.model is not None:  # the card's parameters and roles; its fit stays in "model"
        metrics["decisions"] |= {k: cells.model[k] for k in PUBLIC_MODEL_FIELDS}
        metrics["model"] = cells.model
    return ComponentResult(
        component="atr",
        outputs={
            "decision_rules": pa.table(rules),
            "fairness": fairness,
            "privacy_summary": pa.table(summary),
        },
        sidecars=sidecars,
        contract=contract(params, table),
        params=params.model_dump(mode="json"),
        metrics=metrics,
        timings={"solve_s": t_solve - started, "total_s": time.perf_counter() - started},
        warnings=warnings,
    )
