"""Report figures of the transparency family.

- ``privacy_by_group`` (public): beta*_g of the most exposed QID groups and beta*_global, read
  off the published privacy summary;
- ``fairness_intervals`` (public): each published fairness measure with the interval that holds
  its true value, read off the published fairness table;
- ``tradeoff`` (owner only): the privacy-fidelity trade-off per QID group (spec 5.1, Fig. 5:
  beta*_g against the fidelity level, recomputed in closed form from the input). It is a sweep
  over the true rule D: its curves, with C* at fidelity 1, give a group's true rules back, so
  it is drawn only when the input table is given (the owner's report), never in the shareable
  copy (``ATR.public.figures``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from privfair.components.core import plots
from privfair.components.core.descriptor import Figure
from privfair.components.core.plots import esc, fmt_num
from privfair.components.transparency.fields import SUMMARY_FIELDS

__all__ = ["figures"]

MAX_GROUPS = 8


def _tradeoff(man: dict, outputs: dict, input_table: pa.Table | None) -> Figure | None:
    params = man.get("params")
    if input_table is None or not params:
        return None
    from privfair.components.transparency.audit import evidence
    from privfair.components.transparency.checks import closed_form
    from privfair.components.transparency.params import ATRParams

    p = ATRParams(**params)
    cells = evidence(input_table, {}, {}, p)["cells"]
    from privfair.components.transparency.contract import sweep_grid

    grid = list(sweep_grid(p))
    curves = np.array([closed_form(cells, p.fidelity, lvl)["beta"].to_numpy() for lvl in grid])
    mass = cells.groupby("__group")["__population"].sum().to_numpy()
    top = np.argsort(-mass)[:MAX_GROUPS]
    keys = cells.groupby("__group").first()
    names = [
        ", ".join(
            str(keys.loc[g, c])
            for c in keys.columns
            if not c.startswith("__") and c in (man.get("public") or keys.columns[:1])
        )
        for g in keys.index
    ]
    series = [(names[g], curves[:, g].tolist()) for g in top]
    series.append(("global (max over groups)", np.nanmax(curves, axis=1).tolist()))
    svg = plots.grouped_bar_chart(
        [fmt_num(x) for x in grid],
        series,
        title=f"Privacy-fidelity trade-off: beta* against {p.fidelity}",
        y_label="beta*",
        y_max=1.0,
    )
    cap = (
        f"The smallest achievable adversary confidence beta*_g of each QID group (the "
        f"{min(MAX_GROUPS, len(mass))} most populated of {len(mass)}) and of the report, at "
        f"every {esc(p.fidelity)} level of the sweep, recomputed in closed form (corrected "
        "Theorem 1) from the input. Lower fidelity buys lower confidence, down to beta_min "
        f"(Lemma 5). This release: {p.fidelity} = {fmt_num(p.level)}."
    )
    return Figure("tradeoff", svg, cap)


MAX_BARS = 12


def _privacy(outputs: dict) -> Figure | None:
    s = outputs.get("privacy_summary")
    if s is None or s.num_rows == 0 or "max_adversary_confidence" not in s.column_names:
        return None
    keys = [c for c in s.column_names if c not in SUMMARY_FIELDS]
    rows = s.to_pylist()
    groups = [r for r in rows if r.get("scope") == "group"]
    glob = [r for r in rows if r.get("scope") == "global"]

    def name(r: dict) -> str:
        return ", ".join(f"{k} = {r[k]}" for k in keys) or "group"

    top = sorted(groups, key=lambda r: (-r["max_adversary_confidence"], name(r)))[:MAX_BARS]
    cats = [name(r) for r in top] + ["report (max over groups)" for _ in glob[:1]]
    vals = [r["max_adversary_confidence"] for r in top + glob[:1]]
    svg = plots.bar_chart(
        cats, vals, title="Largest adversary confidence per QID group", y_label="beta*"
    )
    cap = (
        f"beta*_g, the largest confidence an adversary who reads the announced rules as the "
        f"true ones gets about a data subject's private attributes, for the "
        f"{len(top)} most exposed of {len(groups)} QID groups, and beta* of the report; "
        "recomputed from the published rules."
    )
    return Figure("privacy_by_group", svg, cap)


def _fairness(outputs: dict) -> Figure | None:
    f = outputs.get("fairness")
    if f is None or f.num_rows == 0:
        return None
    rows = f.to_pylist()[:12]
    cats = [
        r["measure"] + ("" if r["condition_value"] is None else f" {r['condition_value']}")
        for r in rows
    ]
    series = [
        ("announced", [r["value"] for r in rows]),
        ("true value: lower end", [r["true_value_lower"] for r in rows]),
        ("true value: upper end", [min(r["true_value_upper"], 2.0) for r in rows]),
    ]
    svg = plots.grouped_bar_chart(cats, series, title="Fairness measures and their intervals")
    cap = (
        "Each published fairness measure (SP, CSP per stratum: |rate_1 - rate_2|; PR: "
        "rate_1 / rate_2), computed from the announced mapping, beside the interval the "
        "fidelity guarantees for its true value (Lemma 2). Upper ends above 2 are cut at 2."
    )
    return Figure("fairness_intervals", svg, cap)


def figures(man: dict, outputs: dict, input_table, sidecars: dict) -> list[Figure]:
    """The owner's figures; with ``input_table=None`` (the shareable copy) only those drawn
    from the published tables."""
    drawn = (_privacy(outputs), _fairness(outputs), _tradeoff(man, outputs, input_table))
    return [f for f in drawn if f is not None]
