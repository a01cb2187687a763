"""Report figures of the synthesis family: the selected tree drawn with each attribute's role,
the fidelity of every marginal (TVD), the privacy ledger per phase against the budget, and
demographic parity of each outcome before (input) and after (synthetic)."""

from __future__ import annotations

import math

import pyarrow as pa

from components.core import plots
from components.core.descriptor import Figure
from components.core.plots import _line, _svg, _text, esc
from schemas.roles import Role, read_roles

__all__ = ["figures"]

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


def _tree(input_table: pa.Table | None, sidecars: dict) -> Figure | None:
    tree = sidecars.get("tree")
    if tree is None or input_table is None:
        return None
    roles = read_roles(input_table)
    names = input_table.column_names
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
    for a, b in zip(tree.column("a").to_pylist(), tree.column("b").to_pylist(), strict=True):
        if a in pos and b in pos:
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


def _fidelity(man: dict) -> Figure | None:
    fid = (man.get("metrics") or {}).get("fidelity") or {}
    one, two = fid.get("one_way") or {}, fid.get("two_way") or {}
    if not one:
        return None
    worst = sorted(two.items(), key=lambda kv: -kv[1])[:15]
    labels = [f"{k}" for k in one] + [k.replace("|", " x ") for k, _ in worst]
    values = list(one.values()) + [v for _, v in worst]
    svg = plots.hbar_chart(
        labels,
        values,
        title="TVD per marginal (synthetic vs input)",
        x_label="total variation distance",
    )
    cap = (
        "Total variation distance between the synthetic table and the input: every 1-way "
        f"marginal (mean {fid.get('one_way_tvd', float('nan')):.4f}), then the 15 worst of the "
        f"{len(two)} 2-way marginals (mean {fid.get('two_way_tvd', float('nan')):.4f}). An "
        "evaluation against the private input, for the data owner: not covered by the DP "
        "guarantee."
    )
    return Figure("tvd", svg, cap)


def _ledger(man: dict, sidecars: dict) -> Figure | None:
    ledger = sidecars.get("ledger")
    if ledger is None or ledger.num_rows == 0:
        return None
    rows = ledger.to_pylist()
    phases = ["one_way", "select", "two_way"]
    spent = [sum(r["rho"] for r in rows if r["phase"] == p) for p in phases]
    counts = [sum(1 for r in rows if r["phase"] == p) for p in phases]
    privacy = (man.get("metrics") or {}).get("privacy") or {}
    cats = [f"{p} ({c} steps)" for p, c in zip(phases, counts, strict=True)]
    svg = plots.bar_chart(
        cats,
        spent,
        title="Privacy ledger: zCDP rho per phase",
        y_label="rho",
        value_fmt=lambda v: f"{v:.3g}",
    )
    cap = (
        f"The {len(rows)} OpenDP steps of the release by phase (add/remove-one-record "
        f"neighbours). Total rho = {sum(spent):.6g} of the budget "
        f"{privacy.get('rho_budget', float('nan')):.6g}, which OpenDP converts to "
        f"(epsilon = {privacy.get('epsilon', float('nan')):.6g}, delta = "
        f"{privacy.get('delta', float('nan')):.3g})-DP."
    )
    return Figure("ledger", svg, cap)


def _fairness(man: dict) -> Figure | None:
    fair = (man.get("metrics") or {}).get("fairness") or {}
    pairs = [(k, v) for k, v in fair.items() if v.get("input") and v.get("synthetic")]
    if not pairs:
        return None
    cats = [k for k, _ in pairs]
    series = [
        ("input", [v["input"]["dp"] for _, v in pairs]),
        ("synthetic", [v["synthetic"]["dp"] for _, v in pairs]),
    ]
    svg = plots.grouped_bar_chart(
        cats,
        series,
        title="Demographic parity, before and after",
        y_label="|P(o=1 | s=1) - P(o=1 | s=0)|",
    )
    cap = (
        "Demographic parity difference of each outcome between the protected group and the "
        "others, in the input and in the synthetic table (the conditional forms are in the "
        "metrics). PreFair's model makes each outcome independent of the protected attributes "
        "given the admissible ones; what remains is the dependence the admissible attributes "
        "carry."
    )
    return Figure("fairness", svg, cap)


def figures(man: dict, outputs: dict, input_table, sidecars: dict) -> list[Figure]:
    out = [_tree(input_table, sidecars), _fidelity(man), _ledger(man, sidecars), _fairness(man)]
    return [f for f in out if f is not None]
