"""The re-identification risk section of a release report (owner's and public alike): the
numbers of ``privfair.components.core.risk`` and a histogram of the equivalence classes' sizes,
drawn from the run's ``reidentification_risk`` and ``l_diversity`` metrics alone (functions of
the published table, declared public by every row-level family), or why they do not apply.

>>> html = risk_section({"reidentification_risk": {"background": ["age", "sex"], "rows": 6,
...     "classes": 2, "threshold": 0.2, "marketer": 1 / 3, "uniques": 0.0,
...     "prosecutor": {"highest": 1 / 3, "average": 1 / 3, "records_at_highest": 1.0,
...                    "records_above": 1.0}, "class_sizes": {"3": 2}}}, None)
>>> 'id="risk"' in html, "1/3" in html
(True, True)
"""

from __future__ import annotations

from privfair.components.core.descriptor import Algorithm
from privfair.components.core.plots import bar_chart, esc, fmt_num

__all__ = ["risk_section"]

# the bars of the histogram once the sizes are too many to show one bar each
_EDGES = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100, 200, 500, 1000, 10_000, 100_000)
_MAX_BARS = 30


def _share(v) -> str:
    return "n/a" if v is None else f"{100 * float(v):.1f} %"


def _bars(sizes: dict[str, int]) -> tuple[list[str], list[float]]:
    """(bar labels, rows per bar): one bar per class size, or per range of sizes when there
    are more than ``_MAX_BARS`` sizes."""
    rows = sorted((int(s), int(s) * int(c)) for s, c in sizes.items())
    if len(rows) <= _MAX_BARS:
        return [str(s) for s, _ in rows], [float(r) for _, r in rows]
    labels, values = [], []
    edges = [*_EDGES, max(s for s, _ in rows) + 1]
    for lo, hi in zip(edges, edges[1:], strict=False):
        total = sum(r for s, r in rows if lo <= s < hi)
        if total:
            labels.append(str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}")
            values.append(float(total))
        if hi > rows[-1][0]:
            break
    return labels, values


def _not_applicable(algo: Algorithm | None) -> str:
    if algo is None or algo.row_level:
        return '<p id="risk">Not measured for this release.</p>'
    if algo.cost is not None:
        why = (
            "no published row is a person: the rows are drawn from a differentially private "
            "model, not taken from the input, so no row links to one record (the privacy "
            "guarantee is the differential-privacy bound, not a class size)"
        )
    else:
        why = "the release publishes aggregate tables, no row-level data to link to a person"
    return f'<p id="risk">Not applicable: {esc(why)}.</p>'


def risk_section(metrics: dict, algo: Algorithm | None) -> str:
    """The section's HTML from a manifest's ``metrics`` (the owner's or the public one)."""
    risk = metrics.get("reidentification_risk")
    if not isinstance(risk, dict) or not isinstance(risk.get("prosecutor"), dict):
        return _not_applicable(algo)
    p = risk["prosecutor"]
    background = ", ".join(map(str, risk.get("background") or []))
    highest = p.get("highest")
    smallest = round(1 / highest) if highest else None
    rows = [
        ("attacker's background", esc(background)),
        ("equivalence classes", esc(f"{risk.get('classes')} over {risk.get('rows')} rows")),
        (
            "highest prosecutor risk",
            esc(f"1/{smallest} ({fmt_num(highest)})" if smallest else "n/a"),
        ),
        ("records at the highest risk", esc(_share(p.get("records_at_highest")))),
        (
            f"records above a risk of {fmt_num(risk.get('threshold'))}",
            esc(_share(p.get("records_above"))),
        ),
        ("average prosecutor risk", esc(fmt_num(p.get("average")))),
        ("marketer risk (classes / rows)", esc(fmt_num(risk.get("marketer")))),
        ("sample uniques", esc(_share(risk.get("uniques")))),
    ]
    for col, d in (metrics.get("l_diversity") or {}).items():
        if isinstance(d, dict):
            rows.append(
                (
                    f"l-diversity of {col}",
                    esc(f"distinct {d.get('distinct')}, entropy {fmt_num(d.get('entropy'))}"),
                )
            )
    body = "\n".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
    parts = [
        '<section id="risk">',
        "<p>An attacker who knows a person's values of the background columns finds them among "
        "the published rows that share those values (an equivalence class of f rows) and picks "
        "the right one with probability 1/f (the prosecutor risk). k counts the rows sharing "
        "one published quasi-identifier tuple; this risk counts them over the whole background, "
        "protected attribute included, so its classes can be smaller than k. The l-diversity "
        "of a column is the fewest distinct values it takes in a class (distinct) and exp of "
        "the smallest entropy of its values (entropy): 1 means that in some class every row "
        "has the same value, which the attacker then learns.</p>",
        f'<table class="kv" id="risk-numbers">\n{body}\n</table>',
    ]
    sizes = risk.get("class_sizes") or {}
    if sizes:
        labels, values = _bars(sizes)
        svg = bar_chart(
            labels,
            values,
            title="Rows per equivalence-class size (attacker's background)",
            x_label="class size f (prosecutor risk 1/f)",
            y_label="rows",
        )
        parts.append(
            f'<figure id="fig-class-sizes">\n{svg}\n<figcaption>Each bar: the published rows in '
            "classes of that size over the attacker's background; the leftmost bar holds the "
            "records at the highest risk.</figcaption>\n</figure>"
        )
    parts.append("</section>")
    return "\n".join(parts)
