"""Report figures of the synthesis family, public and owner-only.

Public (``PUBLIC_FIGURES``, declared in ``privfair.components.synthesis.PUBLIC``; drawn for the shareable copy from the public manifest and the
synthetic table alone, ``figures(public_manifest, outputs, None, {})``):

- ``tree``: the selected tree (the public ``tree`` metric) with each attribute's declared role
  (the synthetic table's field metadata);
- ``ledger``: the privacy ledger per phase against the budget (``privacy.phases``, fixed by
  the plan);
- ``tvd_measured``: the synthetic table against the noisy measurements
  (``measured_fidelity``);
- ``fairness_synthetic``: demographic parity of each outcome in the synthetic table
  (``fairness.synthetic``);
- ``quality``: the quality report against the noisy measurements (``quality``: column shapes,
  measured pairs' trends, overall score; ``privfair.components.synthesis.quality``).

Owner only (computed on the private input): ``tvd`` (the synthetic table against the input,
``fidelity``), ``fairness`` (parity in the input and in the synthetic table,
``fairness.input``) and ``quality_input`` (SDMetrics' QualityReport of the synthetic table
against the input, and the DCR privacy panel; computed here from the input table, so drawn only
when it is given, never for the shareable copy). Every figure reads only the metrics it names, so a public figure shows
the same thing in the owner's report as in the shareable copy.
"""

from __future__ import annotations

import math

import pyarrow as pa

from privfair.components.core import plots
from privfair.components.core.descriptor import Figure
from privfair.components.core.plots import _line, _svg, _text, esc
from privfair.components.synthesis import PUBLIC
from privfair.schemas.roles import Role, read_roles

__all__ = ["figures", "PUBLIC_FIGURES", "OWNER_FIGURES", "tree_edges"]

PUBLIC_FIGURES = PUBLIC.figures  # tree, ledger, tvd_measured, fairness_synthetic, quality
OWNER_FIGURES = ("tvd", "fairness", "quality_input")

_ROLE_COLOUR = {
    Role.PROTECTED: "#c0392b",
    Role.ADMISSIBLE: "#27ae60",
    Role.LABEL: "#2e6fdb",
    Role.IGNORED: "#7f8c8d",
}
_ROLE_NAME = {
    Role.PROTECTED: "protected",
    Role.ADMISSIBLE: "admissible",
    Role.LABEL: "outcome",
    Role.IGNORED: "unlabelled",
}


def _metrics(man: dict) -> dict:
    return man.get("metrics") or {}


def tree_edges(tree: list[str], names: list[str]) -> list[tuple[str, str]]:
    """The edges of the ``tree`` metric (``"a-b"`` per edge) as column pairs: each split at
    the one hyphen that leaves two column names (an edge with no such split, or more than
    one, is left out).

    >>> tree_edges(["education-num-income", "age-sex"], ["age", "education-num", "sex", "income"])
    [('education-num', 'income'), ('age', 'sex')]
    """
    known, out = set(names), []
    for edge in tree:
        splits = [
            (edge[:k], edge[k + 1 :])
            for k, ch in enumerate(edge)
            if ch == "-" and edge[:k] in known and edge[k + 1 :] in known
        ]
        if len(splits) == 1:
            out.append(splits[0])
    return out


def _tree(man: dict, outputs: dict) -> Figure | None:
    data = outputs.get("data")
    tree = _metrics(man).get("tree")
    if data is None or not tree:
        return None
    roles = read_roles(data)
    names = data.column_names
    n = len(names)
    w, h, r = 640, 460, 170
    cx, cy = w / 2, h / 2 + 10
    pos = {
        v: (
            cx + r * math.cos(2 * math.pi * i / n - math.pi / 2),
            cy + r * math.sin(2 * math.pi * i / n - math.pi / 2),
        )
        for i, v in enumerate(names)
    }
    parts = [_text(12, 22, "Selected tree (2-way marginals measured)", size=14, weight="bold")]
    for a, b in tree_edges(tree, names):
        parts.append(_line(*pos[a], *pos[b], "#34495e", width=2))
    for v, (x, y) in pos.items():
        role = roles[v].role if v in roles else Role.IGNORED
        colour = _ROLE_COLOUR.get(role, "#7f8c8d")
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="7" fill="{colour}">'
            f"<title>{esc(v)}: {_ROLE_NAME.get(role, role.value)}</title></circle>"
        )
        dx = 12 if x >= cx else -12
        parts.append(_text(x + dx, y + 4, v, anchor="start" if x >= cx else "end", fill=colour))
    lx = 12
    for role, colour in _ROLE_COLOUR.items():
        parts.append(f'<circle cx="{lx + 5}" cy="{h - 14}" r="5" fill="{colour}"/>')
        parts.append(_text(lx + 14, h - 10, _ROLE_NAME[role]))
        lx += 110
    svg = _svg(w, h, "Selected tree", parts)
    cap = (
        "The spanning tree whose 2-way marginals were measured; the synthetic data is sampled "
        "from a model that factorises over it. Red: protected, green: admissible, blue: "
        "outcome, grey: unlabelled. A tree is fair when every path from a red to a blue node "
        "passes through a green one (then each outcome is independent of the protected "
        "attributes given the admissible ones in the model)."
    )
    return Figure("tree", svg, cap)


def _tvd_chart(fid: dict, title: str) -> str | None:
    one, two = fid.get("one_way") or {}, fid.get("two_way") or {}
    one = {k: v for k, v in one.items() if v is not None}
    two = {k: v for k, v in two.items() if v is not None}
    if not one:
        return None
    worst = sorted(two.items(), key=lambda kv: -kv[1])[:15]
    labels = list(one) + [k.replace("|", " x ") for k, _ in worst]
    values = list(one.values()) + [v for _, v in worst]
    return plots.hbar_chart(labels, values, title=title, x_label="total variation distance")


def _num(x, fmt: str = ".4f") -> str:
    return format(x, fmt) if isinstance(x, int | float) else "n/a"


def _fidelity_input(man: dict) -> Figure | None:
    fid = _metrics(man).get("fidelity") or {}
    svg = _tvd_chart(fid, "TVD per marginal (synthetic vs input)")
    if svg is None:
        return None
    cap = (
        "Total variation distance between the synthetic table and the input: every 1-way "
        f"marginal (mean {_num(fid.get('one_way_tvd'))}), then the 15 worst of the "
        f"{len(fid.get('two_way') or {})} 2-way marginals (mean "
        f"{_num(fid.get('two_way_tvd'))}). An evaluation against the private input, for the "
        "data owner only: it is not part of the shareable copy."
    )
    return Figure("tvd", svg, cap)


def _fidelity_measured(man: dict) -> Figure | None:
    fid = _metrics(man).get("measured_fidelity") or {}
    svg = _tvd_chart(fid, "TVD per measured marginal (synthetic vs noisy measurements)")
    if svg is None:
        return None
    cap = (
        "Total variation distance between the synthetic table and the noisy marginals the "
        "release measured (negative noisy counts set to 0): every 1-way marginal (mean "
        f"{_num(fid.get('one_way_tvd'))}), then the {len(fid.get('two_way') or {})} 2-way "
        f"marginals of the tree (mean {_num(fid.get('two_way_tvd'))}). Computed from the "
        "differentially private measurements and the synthetic table only: it shows how "
        "closely the model follows what was measured, not the distance to the input."
    )
    return Figure("tvd_measured", svg, cap)


_PHASES = ("one_way", "select", "two_way")


def _ledger(man: dict, sidecars: dict) -> Figure | None:
    privacy = _metrics(man).get("privacy") or {}
    phases = privacy.get("phases")
    if phases:
        names = [p for p in _PHASES if p in phases] + [p for p in phases if p not in _PHASES]
        spent = [float(phases[p]["rho"]) for p in names]
        counts = [int(phases[p]["steps"]) for p in names]
    else:  # a manifest from before privacy.phases: the owner's ledger sidecar
        ledger = sidecars.get("ledger")
        if ledger is None or ledger.num_rows == 0:
            return None
        rows = ledger.to_pylist()
        names = list(_PHASES)
        spent = [sum(r["rho"] for r in rows if r["phase"] == p) for p in names]
        counts = [sum(1 for r in rows if r["phase"] == p) for p in names]
    cats = [f"{p} ({c} steps)" for p, c in zip(names, counts, strict=True)]
    svg = plots.bar_chart(
        cats,
        spent,
        title="Privacy ledger: zCDP rho per phase",
        y_label="rho",
        value_fmt=lambda v: f"{v:.3g}",
    )
    cap = (
        f"The {sum(counts)} OpenDP steps of the release by phase (add/remove-one-record "
        f"neighbours). Total rho = {sum(spent):.6g} of the budget "
        f"{_num(privacy.get('rho_budget'), '.6g')}, which OpenDP converts to "
        f"(epsilon = {_num(privacy.get('epsilon'), '.6g')}, delta = "
        f"{_num(privacy.get('delta'), '.3g')})-DP."
    )
    return Figure("ledger", svg, cap)


def _fairness_sides(man: dict) -> tuple[dict, dict]:
    """``(synthetic, input)``: per ``protected->outcome`` the fairness measures (or None)."""
    fair = _metrics(man).get("fairness") or {}
    if "synthetic" in fair or "input" in fair:
        return fair.get("synthetic") or {}, fair.get("input") or {}
    # a manifest from before the split: {pair: {"input": ..., "synthetic": ...}}
    return (
        {k: v.get("synthetic") for k, v in fair.items() if isinstance(v, dict)},
        {k: v.get("input") for k, v in fair.items() if isinstance(v, dict)},
    )


_DP_AXIS = "|P(o=1 | s=1) - P(o=1 | s=0)|"


def _fairness_before_after(man: dict) -> Figure | None:
    syn, inp = _fairness_sides(man)
    cats = [k for k in syn if syn.get(k) and inp.get(k)]
    if not cats:
        return None
    series = [
        ("input", [inp[k]["dp"] for k in cats]),
        ("synthetic", [syn[k]["dp"] for k in cats]),
    ]
    svg = plots.grouped_bar_chart(
        cats, series, title="Demographic parity, before and after", y_label=_DP_AXIS
    )
    cap = (
        "Demographic parity difference of each outcome between the protected group and the "
        "others, in the input and in the synthetic table (the conditional forms are in the "
        "metrics). PreFair's model makes each outcome independent of the protected attributes "
        "given the admissible ones; what remains is the dependence the admissible attributes "
        "carry. The input's side is computed on the private input, for the data owner only."
    )
    return Figure("fairness", svg, cap)


def _fairness_synthetic(man: dict) -> Figure | None:
    syn, _ = _fairness_sides(man)
    cats = [k for k, v in syn.items() if v and v.get("dp") is not None]
    if not cats:
        return None
    series = [
        ("parity gap (dp)", [syn[k]["dp"] for k in cats]),
        ("conditional (cdp)", [syn[k].get("cdp") or 0.0 for k in cats]),
    ]
    svg = plots.grouped_bar_chart(
        cats, series, title="Demographic parity in the synthetic table", y_label=_DP_AXIS
    )
    cap = (
        "Demographic parity difference of each outcome between the protected group and the "
        "others in the synthetic table, and its conditional form given the admissible "
        "attributes (cdp). Computed on the synthetic table alone."
    )
    return Figure("fairness_synthetic", svg, cap)


def _score(x) -> str:
    return f"{x:.3f}" if isinstance(x, int | float) else "n/a"


def _quality_html(q: dict, title: str, against: str) -> str | None:
    """The report's block: overall and property scores, a bar per column shape, and the
    pairs' trend scores (the 15 lowest when there are more, SDMetrics' drill-down)."""
    shapes = q.get("column_shapes") or {}
    trends = q.get("column_pair_trends") or {}
    cols = {k: v for k, v in (shapes.get("columns") or {}).items() if v.get("score") is not None}
    if not cols:
        return None
    pairs = {k: v for k, v in (trends.get("pairs") or {}).items() if v is not None}
    head = (
        '<table class="quality-scores"><thead><tr><th>overall</th><th>column shapes</th>'
        "<th>column pair trends</th></tr></thead><tbody><tr>"
        f"<td><strong>{_score(q.get('score'))}</strong></td>"
        f"<td>{_score(shapes.get('score'))}</td><td>{_score(trends.get('score'))}</td>"
        "</tr></tbody></table>"
    )
    bars = plots.hbar_chart(
        [f"{k} ({v['metric']})" for k, v in cols.items()],
        [v["score"] for v in cols.values()],
        title=f"{title}: column shapes ({against})",
        x_label="score (1 = same distribution)",
        value_fmt=lambda x: f"{x:.3f}",
    )
    low = sorted(pairs.items(), key=lambda kv: kv[1])[:15]
    rows = "".join(
        f"<tr><td>{esc(k.replace('|', ' x '))}</td><td>{_score(v)}</td></tr>" for k, v in low
    )
    shown = f"the {len(low)} lowest of" if len(pairs) > len(low) else "all"
    table = (
        f'<table class="quality-pairs"><caption>Column pair trends: {shown} {len(pairs)} '
        f"pair{'s' if len(pairs) != 1 else ''}</caption><thead><tr><th>pair</th><th>score</th>"
        f"</tr></thead><tbody>{rows}</tbody></table>"
        if pairs
        else ""
    )
    return f'<div class="quality">{head}\n{bars}\n{table}</div>'


def _quality_measured(man: dict) -> Figure | None:
    q = _metrics(man).get("quality") or {}
    html = _quality_html(q, "Quality", "vs the noisy measurements")
    if html is None:
        return None
    cap = (
        "Quality report of the synthetic table against the noisy marginals the release "
        "measured, on SDMetrics' definitions: a column's shape score is 1 - TVD (nominal, "
        "binary) or 1 - KS over its bins (numeric, ordinal), a measured pair's trend score "
        "the contingency similarity 1 - TVD of its 2-way table, the overall score the mean "
        "of the two property scores. Post-processing of the differentially private "
        "measurements and the synthetic table only: pairs the release did not measure have "
        "no score here, and nothing is compared with the input."
    )
    return Figure("quality", html, cap)


def _quality_input(outputs: dict, input_table: pa.Table | None) -> Figure | None:
    data = (outputs or {}).get("data")
    if input_table is None or data is None:
        return None
    from privfair.components.synthesis.quality import input_quality

    try:
        q = input_quality(input_table, data)
    except ImportError as e:  # the quality extra is optional: say what to install
        return Figure("quality_input", f'<p class="unavailable">{esc(e)}</p>', esc(e))
    html = _quality_html(q, "Quality", "vs the input")
    p = q["privacy"]
    n = q["sample_rows"]
    panel = (
        '<table class="quality-privacy"><caption>Privacy: distance to closest record '
        "(DCR)</caption><thead><tr><th>measure</th><th>value</th></tr></thead><tbody>"
        f"<tr><td>DCRBaselineProtection (1 = as far from the input as random rows)</td>"
        f"<td><strong>{_score(p['dcr_baseline_protection'])}</strong></td></tr>"
        f"<tr><td>median DCR, synthetic rows to input rows</td>"
        f"<td>{_score(p['median_dcr_synthetic'])}</td></tr>"
        f"<tr><td>median DCR, random rows to input rows</td>"
        f"<td>{_score(p['median_dcr_random'])}</td></tr>"
        f"<tr><td>DCROverfittingProtection</td><td>{esc(p['overfitting_note'])}</td></tr>"
        "</tbody></table>"
    )
    cap = (
        f"SDMetrics {esc(q['sdmetrics'])} QualityReport of the synthetic table against the "
        f"input (samples of {n['input']} input and {n['synthetic']} synthetic rows, seed 0; "
        "KS on raw numeric values, every pair), and its DCRBaselineProtection on "
        f"{p['sample_rows']['synthetic']} synthetic rows against {p['sample_rows']['input']} "
        "input rows. An evaluation against the private input, for the data owner only: not "
        "covered by the DP guarantee and not part of the shareable copy."
    )
    return Figure("quality_input", f"{html or ''}\n{panel}", cap)


def figures(man: dict, outputs: dict, input_table: pa.Table | None, sidecars: dict) -> list:
    """Every figure the manifest ``man`` and ``outputs`` allow, public ones first. Called with
    the public manifest, the public outputs, no input and no sidecars (the shareable copy),
    it can draw only the public figures: the owner ones read metrics the public manifest
    does not hold (and the release flow keeps only ``PUBLIC_FIGURES`` there anyway)."""
    out = [
        _tree(man, outputs or {}),
        _ledger(man, sidecars or {}),
        _fidelity_measured(man),
        _fairness_synthetic(man),
        _quality_measured(man),
        _fidelity_input(man),
        _fairness_before_after(man),
        _quality_input(outputs, input_table),
    ]
    return [f for f in out if f is not None]
