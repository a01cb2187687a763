"""Report figures of the generalisation family.

- the discrimination measures before and after, against the bound (the shape of the paper's
  Figs. 6-8): per measure, the extreme value over every PND itemset of the input and of the
  release (recomputed here from the published table, the ``lineage`` sidecar (row_id, class) and the input),
  next to the bound bd_f(t_eff);
- information loss and count-query error against t (Figs. 9-10): the algorithm rerun on the
  input at a few values of t between tau(R) and t_max, the release's own t among them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from privfair.components.core import plots
from privfair.components.core.descriptor import Figure
from privfair.components.core.inputs import RERUN_ROWS, uniform_sample
from privfair.components.core.plots import esc, fmt_num
from privfair.components.generalisation.audit import original_labels, release_labels
from privfair.components.generalisation.itemsets import Labels, audit_itemsets
from privfair.components.generalisation.measures import bounds, t_max

__all__ = ["figures", "input_measures", "discrimination_extremes", "sweep", "sweep_grid"]

#: the most input rows the utility-against-t figure reruns the algorithm on (the same sample as
#: the cost of protection's)
SWEEP_ROWS = RERUN_ROWS

GROUPS = (
    ("RD", "ED"),
    ("RR", "ER", "OR"),
    ("RC", "EC"),
)


def discrimination_extremes(
    labels: Labels, p_minus: float, t: float, max_attributes: int = 12
) -> dict:
    """{measure: (min, max)} over every PND itemset of ``labels`` (``audit.release_labels``,
    ``audit.original_labels``); the offending itemsets are not described (an input's are
    thousands of rows of dicts, 0.2 s on Adult, that a figure does not draw)."""
    return audit_itemsets(
        labels, p_minus, t, max_attributes=max_attributes, keep_offenders=0
    ).extremes


def _fig_measures(man: dict, published, input_table, classes) -> list[Figure]:
    m = man.get("metrics") or {}
    t_eff = m.get("t_eff")
    if published is None or input_table is None or classes is None or t_eff is None:
        return []
    after_labels, p_minus = release_labels(input_table, published, classes)
    after = discrimination_extremes(after_labels, p_minus, t_eff)
    before = discrimination_extremes(*original_labels(input_table), t_eff)
    out = []
    for group in GROUPS:
        lower = group[0] in ("RC", "EC")
        pick = 0 if lower else 1
        bound = [bounds(f, t_eff, p_minus)[pick] for f in group]
        finite = [b if np.isfinite(b) else 0.0 for b in bound]
        series = [
            ("input (every itemset)", [before[f][pick] for f in group]),
            ("release (every itemset)", [after[f][pick] for f in group]),
            (f"bound at t_eff = {fmt_num(t_eff)}", finite),
        ]
        what = "minimum" if lower else "maximum"
        svg = plots.grouped_bar_chart(
            list(group),
            series,
            title=f"{', '.join(group)}: {what} over PND itemsets against the bound",
            y_label=what,
        )
        vac = [f for f, b in zip(group, bound, strict=False) if not np.isfinite(b)]
        note = f" The bound of {', '.join(vac)} is vacuous (infinite) at this t." if vac else ""
        cap = (
            f"The {what} of {esc(', '.join(group))} over every PND itemset with a non-empty "
            "cover, in the input and in the release (recomputed from the published labels and "
            f"the input's PD attribute and decision), against bd_f(t_eff) of Theorems 10/15. "
            "The release stays within the bound; the input need not. Infinite values (a zero "
            "denominator, possible only where the bound is vacuous) are left out." + note
        )
        out.append(Figure(f"measures_{'_'.join(group).lower()}", svg, cap))
    return out


def sweep_grid(tau_r: float, top: float, t: float, points: int = 4) -> list[float]:
    """``points`` values of t from tau(R) to ``top`` (= t_max), rounded to 4 decimals but
    never below tau(R) (a value rounded below it would be refused: no cut is d-allowable
    there), plus the release's own ``t``.

    >>> sweep_grid(0.08395, 0.76, 0.15, points=3)
    [0.08395, 0.15, 0.422, 0.76]
    """
    grid = {max(round(float(x), 4), tau_r) for x in np.linspace(tau_r, top, points)}
    return sorted(grid | {t})


def sweep(algorithm: str, params: dict, input_table: pa.Table, points: int = 4) -> list[dict]:
    """LM and median query error of the algorithm rerun at ``points`` values of t between
    tau(R) and t_max (plus the release's own t), on at most ``SWEEP_ROWS`` input rows (a
    seeded uniform sample of a larger input: ``uniform_sample``)."""
    from privfair.components.core.registry import algorithm as get
    from privfair.components.generalisation.inputs import prepare

    algo = get(algorithm)
    input_table, _ = uniform_sample(input_table, SWEEP_ROWS)
    prep = prepare(input_table, None)
    top = t_max(prep.p_minus)
    queries = min(int(params.get("utility_queries", 0)), 1000)
    out = []
    for t in sweep_grid(prep.tau_r, top, params["t"], points):
        p = algo.params(**{**params, "t": min(t, top), "utility_queries": queries})
        m = algo(input_table, p).metrics
        out.append(
            {
                "t": t,
                "lm_norm": m["information_loss"]["lm_norm"],
                "error": (m.get("query_error") or {}).get("median_relative_error"),
                "classes": m["classes"],
            }
        )
    return out


def input_measures(algorithm: str, params: dict, input_table: pa.Table) -> dict:
    """What the owner's report reads from the params and the input alone (the descriptor's
    ``input_measures``): ``{"utility_against_t": sweep(...)}``."""
    return {"utility_against_t": sweep(algorithm, params, input_table)}


def _fig_sweep(man: dict, published, input_table, classes) -> list[Figure]:
    algo, params = man.get("component"), man.get("params")
    if input_table is None or not algo or not params:
        return []
    # measured beside the release when the run could (``privfair.release.beside``), else here
    rows = (man.get("input_measures") or {}).get("utility_against_t")
    if rows is None:
        rows = sweep(algo, params, input_table)
    cats = [fmt_num(r["t"]) for r in rows]
    series = [("LM (normalised)", [r["lm_norm"] for r in rows])]
    if all(r["error"] is not None for r in rows):
        series.append(("median relative query error", [r["error"] for r in rows]))
    svg = plots.grouped_bar_chart(cats, series, title="Utility against t", y_label="value")
    n = input_table.num_rows
    on = (
        "the input"
        if n <= SWEEP_ROWS
        else f"a uniform sample of {SWEEP_ROWS:,} of the {n:,} input rows (seed 0)"
    )
    cap = (
        f"{esc(algo)} rerun on {on} at t from tau(R) to max(p-, 1 - p-) (the release's "
        f"t = {fmt_num(params['t'])} included): information loss LM normalised over the PND "
        "attributes and the PD attribute, and the median relative error of seeded count "
        "queries (at most 1,000 per point here). Classes per point: "
        + ", ".join(f"t = {fmt_num(r['t'])}: {r['classes']}" for r in rows)
        + "."
    )
    return [Figure("utility_against_t", svg, cap)]


def figures(
    man: dict, outputs: dict[str, pa.Table], input_table: pa.Table | None, sidecars: dict
) -> list[Figure]:
    """The figures that apply to this release (one lacking its data is left out)."""
    published, classes = outputs.get("data"), sidecars.get("lineage")
    return [
        *_fig_measures(man, published, input_table, classes),
        *_fig_sweep(man, published, input_table, classes),
    ]
