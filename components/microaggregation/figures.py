"""Report figures of the microaggregation family: group sizes, positive ratio per protected
group before/after, the protected attribute's share per group against the t bound, and
information loss per attribute. Recomputed from the published table and its lineage where
possible, otherwise taken from the run's metrics (and then labelled as such).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from privfair.components.core import plots
from privfair.components.core.descriptor import Figure
from privfair.components.core.plots import esc, fmt_num, fmt_value
from privfair.schemas.roles import Role, read_roles

__all__ = ["figures"]


def _protected(published: pa.Table | None, man: dict) -> str | None:
    if published is not None:
        prot = read_roles(published).with_role(Role.PROTECTED)
        if len(prot) == 1:
            return prot[0].name
    for g in man.get("contract") or []:
        if g.get("kind") == "t_closeness":
            return g.get("attribute")
    return None


def _other_value(table: pa.Table | None, column: str, favoured: Any) -> Any:
    if table is None or column not in table.column_names:
        return None
    others = [v for v in table.column(column).unique().to_pylist() if v != favoured]
    return others[0] if len(others) == 1 else None


def _fig_group_sizes(man: dict, published, input_table, lineage) -> Figure | None:
    m = man.get("metrics") or {}
    if lineage is not None and "group" in lineage.column_names and lineage.num_rows:
        g = lineage.column("group").to_numpy(zero_copy_only=False).astype(np.int64)
        per_group = np.bincount(g)
        per_group = per_group[per_group > 0]
        hist = np.bincount(per_group).tolist()
        source = "counted from the lineage of the published rows"
    elif m.get("group_sizes"):
        hist = [int(x) for x in m["group_sizes"]]
        source = "from the component's metrics"
    else:
        return None
    sizes = [s for s, c in enumerate(hist) if c]
    if not sizes:
        return None
    lo, hi = min(sizes), max(sizes)
    cats = [str(s) for s in range(lo, hi + 1)]
    counts = [hist[s] if s < len(hist) else 0 for s in range(lo, hi + 1)]
    svg = plots.bar_chart(
        cats,
        counts,
        title="Group sizes",
        x_label="rows per group (equivalence class)",
        y_label="groups",
    )
    k = m.get("k")
    kpart = f" The declared group size is k = {esc(fmt_value(k))}." if k is not None else ""
    caption = (
        f"<b>Group-size distribution.</b> {sum(counts)} groups of {lo}"
        f"{'' if lo == hi else f' to {hi}'} rows ({esc(source)}).{kpart}"
    )
    return Figure("group-sizes", svg, caption)


def _fig_positive_ratio(man: dict, published, input_table, lineage) -> Figure | None:
    m = man.get("metrics") or {}
    before, after = m.get("positive_ratio_before") or {}, m.get("positive_ratio_after") or {}
    if not before:
        return None
    prot = _protected(published, man) or "protected attribute"
    fav = m.get("favoured_value")
    unf = _other_value(input_table, prot, fav)
    names = {
        "unfavoured": f"unfavoured ({prot} = {fmt_value(unf)})"
        if unf is not None
        else "unfavoured",
        "favoured": f"favoured ({prot} = {fmt_value(fav)})" if fav is not None else "favoured",
    }
    keys = [k for k in ("unfavoured", "favoured") if k in before]
    nan = float("nan")
    svg = plots.grouped_bar_chart(
        [names[k] for k in keys],
        [
            ("input (before)", [float(before.get(k, nan)) for k in keys]),
            ("published (after)", [float(after.get(k, nan)) for k in keys]),
        ],
        title="Positive ratio per protected group",
        y_label="share with the positive label",
        y_max=1.0,
    )
    dpar = ""
    if "dpar_before" in m and m.get("dpar_after") is not None:
        dpar = (
            f" Demographic parity difference |PR(U) − PR(F)|: {esc(fmt_num(m['dpar_before']))} "
            f"before, {esc(fmt_num(m['dpar_after']))} after."
        )
    caption = (
        f"<b>Positive ratio PR = #positives / #rows of each group of <code>{esc(prot)}</code>,"
        f" before and after protection.</b>{dpar}"
    )
    return Figure("positive-ratio", svg, caption)


def _fig_protected_share(man: dict, published, input_table, lineage) -> Figure | None:
    m = man.get("metrics") or {}
    prot = _protected(published, man)
    fav = m.get("favoured_value")
    if (
        prot is None
        or fav is None
        or published is None
        or lineage is None
        or prot not in published.column_names
        or "group" not in lineage.column_names
        or not lineage.num_rows
    ):
        return None
    unf_out = np.array([v != fav for v in published.column(prot).to_pylist()], dtype=np.float64)
    g = lineage.column("group").to_numpy(zero_copy_only=False).astype(np.int64)
    size = np.bincount(g)
    share = np.bincount(g, weights=unf_out, minlength=len(size))[size > 0] / size[size > 0]
    if input_table is not None and prot in input_table.column_names:
        share_in = float(np.mean([v != fav for v in input_table.column(prot).to_pylist()]))
    elif "unfavoured_share_input" in m:
        share_in = float(m["unfavoured_share_input"])
    else:
        return None
    bound = next(
        (
            float(c["t"])
            for c in man.get("contract") or []
            if c.get("kind") == "t_closeness" and c.get("reference") == "input"
        ),
        m.get("t_pa_bound"),
    )
    t_max = float(np.max(np.abs(share - share_in))) if len(share) else 0.0
    band = None
    if bound is not None:
        band = (share_in - bound, share_in + bound, f"input share ± bound t ≤ {fmt_num(bound)}")
    svg = plots.histogram(
        share.tolist(),
        title=f"Unfavoured share of {prot} per group",
        lo=0.0,
        hi=1.0,
        bins=40,
        x_label=f"share of unfavoured {prot} in the group",
        y_label="groups",
        markers=[(share_in, f"input share {fmt_num(share_in)}")],
        band=band,
    )
    outside = int(np.sum(np.abs(share - share_in) > bound + 1e-12)) if bound is not None else 0
    bpart = (
        f"; bound t ≤ {esc(fmt_num(bound))}; {outside} group(s) outside the bound"
        if bound is not None
        else ""
    )
    caption = (
        f"<b>t-closeness of <code>{esc(prot)}</code>:</b> share of the unfavoured value in each of "
        f"{len(share)} groups (from the published table and its lineage) against the input share "
        f"{esc(fmt_num(share_in))}. Largest distance t = max |share − input share| = "
        f"{esc(fmt_num(t_max))}{bpart}."
    )
    return Figure("protected-share", svg, caption)


def _fig_information_loss(man: dict, published, input_table, lineage) -> Figure | None:
    il = (man.get("metrics") or {}).get("information_loss") or {}
    per = il.get("per_attribute") or {}
    if not per:
        return None
    items = sorted(per.items(), key=lambda kv: (-float(kv[1]), kv[0]))
    svg = plots.hbar_chart(
        [k for k, _ in items],
        [float(v) for _, v in items],
        title="Information loss per attribute",
        x_label="root-mean-square change in scaled units, sqrt(SSE_A / N)",
    )
    overall = (
        f" Averaged over attributes: IL_attr = {esc(fmt_num(il['il_attr']))}."
        if "il_attr" in il
        else ""
    )
    caption = (
        "<b>Information loss per quasi-identifier</b> (0 = published unchanged): the root-mean-"
        "square distance between each original and published value in the scaled QI space, one-hot "
        f"columns of an attribute summed.{overall}"
    )
    return Figure("information-loss", svg, caption)


_FIGURES = (_fig_group_sizes, _fig_positive_ratio, _fig_protected_share, _fig_information_loss)


def figures(
    man: dict, outputs: dict[str, pa.Table], input_table: pa.Table | None, sidecars: dict
) -> list[Figure]:
    """The four figures that apply to this release (a figure lacking its data is left out)."""
    published, lineage = outputs.get("data"), sidecars.get("lineage")
    out = []
    for fn in _FIGURES:
        fig = fn(man, published, input_table, lineage)
        if fig is not None:
            out.append(fig)
    return out
