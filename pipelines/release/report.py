"""The human report of a release: one self-contained HTML page (inline CSS and SVG, no scripts,
no external URLs) written next to the manifest as ``report.html``.

It shows what was released (pipeline, version, input checksums, rows, code version), every
guarantee as a PASS/FAIL row (``<table id="contract">``), the warnings, the parameters, the
algorithm's headline metrics and its figures (``Algorithm.headline`` / ``Algorithm.figures``:
each family draws its own, from the published outputs and sidecars where it can), and the cost
of protection (``<section id="cost">``: one classifier trained on the raw and on the protected
training split, scored on the untouched split; the trade-off plot of ``privfair evaluate``
when one was run on this spec and input).

Everything that comes from data or the spec is HTML-escaped.
"""

from __future__ import annotations

import json
import re

import pyarrow as pa

from privfair.components.core.descriptor import Algorithm, Metric, resolve
from privfair.components.core.plots import esc, fmt_num, fmt_value
from privfair.release.risk_report import risk_section
from privfair.schemas.contracts import SCHEMA_CHECK_ID

MAX_OFFENDERS_SHOWN = 10

CSS = """
:root { --ink:#222; --muted:#555; --line:#d0d0d0; --pass:#1b7f3b; --fail:#b3261e; --bg:#fafafa; }
* { box-sizing: border-box; }
body { font-family: "DejaVu Sans", Verdana, Arial, Helvetica, sans-serif; color: var(--ink);
       margin: 0; background: #fff; line-height: 1.45; font-size: 14px; }
main { max-width: 980px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 32px 0 10px; padding-bottom: 4px; border-bottom: 2px solid var(--line); }
.subtitle { color: var(--muted); margin: 0 0 16px; }
.banner { padding: 10px 14px; border-radius: 6px; font-weight: bold; margin: 12px 0 8px; }
.banner.pass { background: #e6f4ea; color: var(--pass); border: 1px solid #a8d5b5; }
.banner.fail { background: #fce8e6; color: var(--fail); border: 1px solid #f1aaa4; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 12px; }
th, td { text-align: left; vertical-align: top; padding: 5px 8px; border-bottom: 1px solid var(--line); }
th { background: var(--bg); font-weight: bold; }
table.kv th { width: 250px; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px; word-break: break-all; }
.badge { display: inline-block; min-width: 44px; text-align: center; padding: 1px 6px; border-radius: 4px;
         font-weight: bold; font-size: 12px; color: #fff; }
.badge.pass { background: var(--pass); }
.badge.fail { background: var(--fail); }
tr.fail td { background: #fff5f4; }
tr.group th { background: #eef2f7; font-weight: bold; padding-top: 10px; }
#contract { table-layout: fixed; }
#contract td { overflow-wrap: break-word; }
#contract col.result { width: 64px; } #contract col.id { width: 70px; }
#contract col.kind { width: 190px; } #contract col.observed { width: 180px; }
#contract col.expected { width: 160px; }
tbody.schema td { font-size: 12px; padding: 3px 8px; }
nav.toc { font-size: 13px; color: var(--muted); margin: 4px 0 0; }
nav.toc a { color: #2a5599; margin-right: 10px; }
ul.warnings li { color: #7a4d00; }
figure { margin: 18px 0 26px; padding: 10px; border: 1px solid var(--line); border-radius: 6px; }
figure svg { display: block; max-width: 100%; height: auto; margin: 0 auto; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 6px; }
figcaption b { color: var(--ink); }
details summary { cursor: pointer; color: var(--muted); }
.unavailable { color: var(--fail); }
footer { color: var(--muted); font-size: 12px; margin-top: 40px; border-top: 1px solid var(--line); padding-top: 8px; }
"""


# --- value formatting ----------------------------------------------------------------------


def _kv_table(rows: list[tuple[str, str]], table_id: str) -> str:
    """Rows of (escaped header text, already-escaped HTML cell)."""
    body = "\n".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="kv" id="{table_id}">\n{body}\n</table>'


# --- sections --------------------------------------------------------------------------------


def _released(man: dict) -> str:
    inp = man.get("input") or {}
    files = inp.get("files") or {}
    files_html = (
        "<br>".join(f"{esc(name)}: <code>{esc(sha)}</code>" for name, sha in sorted(files.items()))
        or "—"
    )
    spec = man.get("spec") or {}
    published = "; ".join(
        f"{name}: {fmt_value(o.get('rows'))}"
        for name, o in sorted((man.get("outputs") or {}).items())
    )
    internal = ", ".join(
        f"{o.get('file', name)}" for name, o in sorted((man.get("sidecars") or {}).items())
    )
    rows = [
        ("Pipeline", esc(man.get("pipeline", "?"))),
        ("Description", esc((spec.get("description") or "").strip() or "—")),
        ("Version", f"<code>{esc(man.get('version', '?'))}</code>"),
        ("Component", esc(man.get("component", "?"))),
        ("Dataset", esc(inp.get("dataset") or (spec.get("dataset") or {}).get("path") or "?")),
        ("Input files (sha256)", files_html),
        ("Input fingerprint", f"<code>{esc(inp.get('fingerprint', '—'))}</code>"),
        ("Input rows", esc(fmt_value(inp.get("rows")))),
        ("Nulls (dataset.nulls)", _nulls(inp.get("nulls") or {})),
        ("Published rows", esc(published or "—")),
        ("Internal sidecars (not for distribution)", esc(internal or "none")),
        (
            "Shareable copy",
            esc(
                f"{(man.get('shared') or {}).get('folder')}/ (release id "
                f"{(man.get('shared') or {}).get('release')}): privfair export"
            )
            if man.get("shared")
            else "none (not published)",
        ),
        ("Code version", f"<code>{esc(man.get('code_version', '?'))}</code>"),
        ("Spec fingerprint", f"<code>{esc(man.get('spec_fingerprint', '—'))}</code>"),
        ("Created (UTC)", esc(man.get("published_at", "?"))),
    ]
    return _kv_table(rows, "release")


def _nulls(nulls: dict) -> str:
    """What the spec's null policy did, column by column (owner report only: counts and
    imputed values are statistics of the input)."""
    if not nulls:
        return "none handled (nulls: keep, or no nulls)"
    parts = []
    for col, d in sorted(nulls.items()):
        if col == "*":
            parts.append(f"{fmt_value(d.get('dropped_rows'))} rows dropped")
        else:
            what = f"{col}: {fmt_value(d.get('nulls'))} nulls, {d.get('policy')}"
            if "imputed_with" in d:
                what += f" ({fmt_value(d['imputed_with'])})"
            parts.append(what)
    return "<br>".join(esc(p) for p in parts)


def _offenders(r: dict) -> str:
    rows = r.get("offending") or []
    n = r.get("n_offending", len(rows))
    if not rows:
        return ""
    cols: list[str] = []
    for row in rows[:MAX_OFFENDERS_SHOWN]:
        for k in row:
            if k not in cols:
                cols.append(k)
    head = "".join(f"<th>{esc(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(fmt_value(row.get(c)))}</td>" for c in cols) + "</tr>"
        for row in rows[:MAX_OFFENDERS_SHOWN]
    )
    return (
        f"<details><summary>{esc(n)} offending item(s); first {min(len(rows), MAX_OFFENDERS_SHOWN)}"
        f"</summary><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></details>"
    )


SCHEMA_ID = SCHEMA_CHECK_ID


def _split(results: list[dict]) -> tuple[list[dict], list[dict]]:
    """(declared/demanded guarantees, built-in schema checks), each in the validator's order."""
    return (
        [r for r in results if r.get("id") != SCHEMA_ID],
        [r for r in results if r.get("id") == SCHEMA_ID],
    )


def _wbr(escaped: str) -> str:
    """Allow line breaks after '_' in long identifiers (text content is unchanged)."""
    return escaped.replace("_", "_<wbr>")


def _verdict_row(r: dict, details: str = "") -> str:
    """One check as a table row: its verdict badge, id and kind, then ``details`` (cells)."""
    ok = bool(r.get("passed"))
    cls = "pass" if ok else "fail"
    return (
        f'<tr class="{cls}" data-passed="{"true" if ok else "false"}">'
        f'<td><span class="badge {cls}">{"PASS" if ok else "FAIL"}</span></td>'
        f"<td>{esc(r.get('id', ''))}</td><td>{_wbr(esc(r.get('kind', '')))}</td>{details}</tr>"
    )


def _result_row(r: dict) -> str:
    return _verdict_row(
        r,
        f"<td>{_wbr(esc(fmt_value(r.get('observed'))))}</td>"
        f"<td>{_wbr(esc(fmt_value(r.get('expected'))))}</td>"
        f"<td>{esc(r.get('message', ''))}{_offenders(r)}</td>",
    )


def _contract(man: dict) -> str:
    """Every validation result, one row each: the guarantees first, then the schema checks
    (each group in its own ``<tbody>``)."""
    guarantees, schema = _split((man.get("validation") or {}).get("results") or [])
    bodies = []
    if guarantees:
        bodies.append(
            '<tbody class="guarantees">\n' + "\n".join(map(_result_row, guarantees)) + "\n</tbody>"
        )
    if schema:
        n_fail = sum(1 for r in schema if not r.get("passed"))
        head = (
            f'<tr class="group"><th colspan="6">Schema of the published table: {len(schema)} '
            f"built-in checks, {len(schema) - n_fail} pass</th></tr>"
        )
        bodies.append(
            '<tbody class="schema">\n'
            + head
            + "\n"
            + "\n".join(map(_result_row, schema))
            + "\n</tbody>"
        )
    if not bodies:
        bodies.append('<tbody><tr><td colspan="6">No guarantees were checked.</td></tr></tbody>')
    return (
        '<table id="contract">\n<colgroup><col class="result"><col class="id"><col class="kind">'
        '<col class="observed"><col class="expected"><col class="message"></colgroup>\n'
        "<thead><tr><th>Result</th><th>ID</th><th>Kind</th>"
        "<th>Observed</th><th>Expected</th><th>Message</th></tr></thead>\n"
        + "\n".join(bodies)
        + "\n</table>"
    )


_SAFE_REL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*")


def _artefacts(man: dict) -> str:
    """Links to the Great Expectations artefacts stored inside the release folder itself."""
    names = {"ge_results": "Great Expectations validation results", "data_docs": "Data Docs"}
    links = []
    for key, rel in sorted(((man.get("validation") or {}).get("artefacts") or {}).items()):
        rel = str(rel)
        if not _SAFE_REL.fullmatch(rel) or ".." in rel.split("/"):
            continue  # only plain relative paths inside the release
        links.append(
            f'<a href="{esc(rel)}">{esc(names.get(key, key))}</a> (<code>{esc(rel)}</code>)'
        )
    if not links:
        return ""
    return '<p id="artefacts">Stored with this release: ' + " · ".join(links) + ".</p>"


def _banner(man: dict) -> str:
    v = man.get("validation") or {}
    results = v.get("results") or []
    n_fail = sum(1 for r in results if not r.get("passed"))
    passed = v.get("status") == "passed" and n_fail == 0 and bool(results)
    if passed:
        return (
            f'<p class="banner pass" id="status" data-status="passed">Validation passed: all '
            f"{len(results)} checks hold, recomputed from the published files.</p>"
        )
    failed = ", ".join(v.get("failed") or []) or "no guarantees were checked"
    return (
        f'<p class="banner fail" id="status" data-status="failed">Validation FAILED: '
        f"{n_fail} of {len(results)} checks do not hold ({esc(failed)}). "
        "This candidate is not published; it was moved to quarantine.</p>"
    )


def _warnings(man: dict) -> str:
    warns = man.get("warnings") or []
    if not warns:
        return '<p id="warnings">No warnings.</p>'
    items = "\n".join(f"<li>{esc(w)}</li>" for w in warns)
    return f'<ul class="warnings" id="warnings">\n{items}\n</ul>'


def _num(v) -> str:
    return "—" if v is None else f"{v:.6g}"


def _ledger(man: dict) -> str:
    """The release's ledger record (owner only): what it spent and what remains of the
    declared budget (or that none is declared), the blocks charged, the re-publication
    policy and the earlier releases it may be intersected with."""
    led = man.get("ledger")
    if not led:
        return '<p id="ledger">Not recorded in a ledger (a remote store without a ledger URL).</p>'
    rows = [
        (
            "Dataset (ledger key)",
            f"<code>{esc(led.get('dataset'))}</code>, unit {esc(led.get('unit'))}",
        ),
        ("Blocks", esc(", ".join(led.get("blocks") or []))),
        ("Ledger", f"<code>{esc(led.get('ledger') or '—')}</code>, entry {esc(led.get('entry'))}"),
    ]
    charge = led.get("charge")
    if charge is not None:
        rows.append(
            (
                "This release spent",
                f"rho = {_num(charge.get('rho'))} (epsilon = {_num(charge.get('epsilon'))} at "
                f"delta = {_num(charge.get('delta'))})",
            )
        )
        budget = led.get("budget")
        spent, left = led.get("spent") or {}, led.get("remaining") or {}
        if budget is None:
            rows.append(
                ("Budget", "no budget is declared: releases are recorded, nothing is capped")
            )
            rows.append(("Spent so far (most-spent block)", f"rho = {_num(spent.get('rho'))}"))
        else:
            cap = (
                f"rho = {_num(budget.get('rho'))}"
                if budget.get("rho") is not None
                else f"epsilon = {_num(budget.get('epsilon'))}, delta = {_num(budget.get('delta'))}"
            )
            rows.append(("Budget", f"{cap} per {esc(budget.get('per'))}"))
            eps = (
                f", epsilon = {_num(spent.get('epsilon'))}"
                if spent.get("epsilon") is not None
                else ""
            )
            rows.append(
                (
                    "Spent after this release (most-spent block)",
                    f"rho = {_num(spent.get('rho'))}{eps}",
                )
            )
            eps = (
                f", epsilon = {_num(left.get('epsilon'))}"
                if left.get("epsilon") is not None
                else ""
            )
            rows.append(("Remaining", f"rho = {_num(left.get('rho'))}{eps}"))
    else:
        rows.append(("Re-publication policy", f"<code>republish: {esc(led.get('policy'))}</code>"))
    inter = led.get("intersects") or []
    if inter:
        rows.append(
            (
                "May be intersected with",
                "<br>".join(
                    f"version <code>{esc(i['version'])}</code> (blocks {esc(', '.join(i['blocks']))})"
                    for i in inter
                ),
            )
        )
    others = led.get("other_pipelines") or []
    if others:
        rows.append(
            (
                "Also released by",
                "<br>".join(
                    f"{esc(o['pipeline'])} <code>{esc(o['version'])}</code>" for o in others
                ),
            )
        )
    return _kv_table(rows, "ledger")


def _params(man: dict) -> str:
    params = man.get("params") or {}
    rows = [
        (k, f"<code>{esc(json.dumps(v, sort_keys=True))}</code>") for k, v in sorted(params.items())
    ]
    spec = man.get("spec") or {}
    demanded = spec.get("guarantees") or []
    out = _kv_table(rows, "params") if rows else '<p id="params">No parameters.</p>'
    extra = [
        ("Component", esc((spec.get("component") or {}).get("name", man.get("component", "?")))),
        ("Schedule", esc(spec.get("schedule") or "—")),
        (
            "Guarantees demanded by the spec",
            "<br>".join(esc(fmt_value(g)) for g in demanded) or "none (the component's own only)",
        ),
    ]
    return out + "\n" + _kv_table(extra, "spec")


def _metrics(man: dict, headline: list[Metric]) -> str:
    m = man.get("metrics") or {}
    rows = []
    for metric in headline:
        v = metric.get(m)
        if v is not None and not isinstance(v, dict | list):
            rows.append((metric.label, esc(fmt_value(v))))
    timings = man.get("timings") or {}
    for k, v in sorted(timings.items()):
        rows.append((f"time: {k.removesuffix('_s')}", esc(f"{fmt_num(v * 1000.0)} ms")))
    return _kv_table(rows, "metrics") if rows else '<p id="metrics">No metrics.</p>'


def _figures(man: dict, algo: Algorithm | None, outputs, input_table, sidecars) -> str:
    if algo is None or algo.figures is None:
        return "<p>No plots apply to this release.</p>"
    try:
        figs = resolve(algo.figures)(man, outputs or {}, input_table, sidecars or {})
    except Exception as e:  # a broken plot must not hide the rest of the report
        return f'<p class="unavailable">The plots could not be drawn: {esc(repr(e))}</p>'
    out = [
        f'<figure id="fig-{esc(f.name)}">\n{f.svg}\n<figcaption>{f.caption}</figcaption>\n</figure>'
        for f in figs
    ]
    return "\n".join(out) or "<p>No plots apply to this release.</p>"


def _count_heading(results: list[dict]) -> str:
    guarantees, schema = _split(results)
    text = f"{len(guarantees)} guarantees"
    return text + (f" + {len(schema)} schema checks" if schema else "")


_TOC = (
    '<nav class="toc">Contents: <a href="#release">Release</a><a href="#warnings">Warnings</a>'
    '<a href="#contract">Guarantees</a><a href="#plots">Plots</a><a href="#cost">Cost of '
    'protection</a><a href="#metrics">Metrics</a><a href="#params">Parameters</a></nav>'
)

_COST_METRICS = (
    ("accuracy", "accuracy"),
    ("precision", "precision"),
    ("recall", "recall"),
    ("dpar", "dPar"),
    ("eodds", "eOdds"),
)


def _cost(man: dict) -> str:
    """The cost-of-protection section from the manifest's ``cost_of_protection`` record."""
    cost = man.get("cost_of_protection")
    if not cost:
        why = (
            "the candidate failed validation"
            if (man.get("validation") or {}).get("status") != "passed"
            else "this release predates the measurement"
        )
        return f'<section id="cost"><p>Not measured: {esc(why)}.</p></section>'
    parts = ['<section id="cost">']
    if cost.get("status") != "measured":
        parts.append(
            f"<p>Not applicable: {esc(cost.get('reason') or cost.get('status', '?'))}.</p>"
        )
    else:
        arms = cost.get("holdout") or {}
        clf = esc(cost.get("classifier", "?"))
        head = "".join(f"<th>{esc(label)}</th>" for _, label in _COST_METRICS)
        rows = []
        # the raw arm first, whatever order the manifest's JSON keys came back in
        for arm, values in sorted(arms.items(), key=lambda kv: (kv[0] != "none", kv[0])):
            what = "raw training split" if arm == "none" else f"{arm} output of the split"
            cells = "".join(
                f'<td class="num">{esc(fmt_num(values.get(key)))}</td>' for key, _ in _COST_METRICS
            )
            rows.append(f"<tr><th>{esc(what)}</th>{cells}</tr>")
        if "none" in arms and len(arms) == 2:
            other = next(a for a in arms if a != "none")
            cells = "".join(
                f'<td class="num">{esc(_signed(arms[other].get(k), arms["none"].get(k)))}</td>'
                for k, _ in _COST_METRICS
            )
            rows.append(f'<tr class="delta"><th>change</th>{cells}</tr>')
        parts.append(
            f"<p>The same classifier (<code>{clf}</code>) trained on the raw training split "
            "and on what the component publishes from that split alone, both scored on the "
            f"untouched test split ({esc(cost.get('split', ''))}; "
            f"{esc(fmt_value(cost.get('train_rows')))} training rows). dPar = |P(ŷ=1 | "
            "protected) − P(ŷ=1 | others)|; eOdds = |ΔTPR| + |ΔTNR|. A measurement on one "
            "split, not a guarantee: <code>privfair evaluate</code> gives folds and "
            "intervals.</p>"
        )
        parts.append(
            f'<table id="cost-holdout"><thead><tr><th>trained on</th>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>"
        )
        for arm, why in sorted((cost.get("degenerate") or {}).items()):
            what = "raw training split" if arm == "none" else f"{arm} output"
            parts.append(f'<p class="warning degenerate">Degenerate ({esc(what)}): {esc(why)}.</p>')
    grid = cost.get("grid")
    if grid and not grid.get("stale"):
        from privfair.evaluation.evaluate import tradeoff_chart

        svg = tradeoff_chart(grid.get("rows") or [], f"Trade-off: {man.get('pipeline', '?')}")
        settings = ", ".join(f"{k} ∈ {v}" for k, v in (grid.get("grid") or {}).items())
        parts.append(
            f'<figure id="fig-tradeoff">\n{svg}\n<figcaption><b>Accuracy against dPar</b> '
            f"from <code>privfair evaluate</code> ({esc(grid.get('folds'))} folds; "
            f"{esc(settings or 'the spec as released')}; classifiers "
            f"{esc(', '.join(grid.get('classifiers') or []))}): one point per setting and "
            "classifier, mean over the folds.</figcaption>\n</figure>"
        )
    elif grid:
        parts.append(
            f"<p>An evaluation exists at <code>{esc(grid.get('path', '?'))}</code> but is not "
            f"shown: {esc(grid.get('reason', 'stale'))}. Run <code>privfair evaluate</code> "
            "again for the trade-off plot.</p>"
        )
    else:
        parts.append(
            "<p>No grid evaluated yet: <code>privfair evaluate SPEC --grid key=v1,v2</code> "
            "adds the trade-off plot to the next release's report.</p>"
        )
    parts.append("</section>")
    return "\n".join(parts)


def _signed(value, base) -> str:
    if not isinstance(value, int | float) or not isinstance(base, int | float):
        return "—"
    if value != value or base != base:
        return "—"
    return f"{value - base:+.3f}"


# --- the public report -------------------------------------------------------------------------
def _public_released(pub: dict) -> str:
    spec = pub.get("spec") or {}
    dataset = (spec.get("dataset") or {}).get("name")
    published = "; ".join(
        f"{name}: {fmt_value(o.get('rows'))} rows ({o.get('file', '')})"
        for name, o in sorted((pub.get("outputs") or {}).items())
    )
    rows = [
        ("Pipeline", esc(pub.get("pipeline", "?"))),
        ("Description", esc((spec.get("description") or "").strip() or "—")),
        ("Release", f"<code>{esc(pub.get('release', '?'))}</code>"),
        ("Algorithm", esc(f"{pub.get('title', '?')} ({pub.get('family', '?')})")),
        ("Paper", esc(pub.get("paper") or "—")),
        ("Dataset", esc(dataset or "the data owner's table")),
        ("Published outputs", esc(published or "—")),
        ("Code version", f"<code>{esc(pub.get('code_version', '?'))}</code>"),
    ]
    return _kv_table(rows, "release")


def _disclosure(pub: dict) -> str:
    d = pub.get("disclosure") or {}
    parts = ['<section id="disclosure">']
    if d.get("covers"):
        parts.append(f"<p><b>What the guarantee covers.</b> {esc(d['covers'])}</p>")
    if d.get("does_not_cover"):
        parts.append(f"<p><b>What it does not cover.</b> {esc(d['does_not_cover'])}</p>")
    kept = "".join(f"<li>{esc(x)}</li>" for x in d.get("owner_only") or [])
    if kept:
        parts.append(f"<p>Kept by the data owner, not in this copy:</p><ul>{kept}</ul>")
    parts.append("</section>")
    return "\n".join(parts)


def _verdicts(pub: dict) -> str:
    guarantees, schema = _split((pub.get("validation") or {}).get("results") or [])
    body = "\n".join(map(_verdict_row, guarantees))
    n_ok = sum(1 for r in schema if r.get("passed"))
    tail = (
        f'<tr class="group"><th colspan="3">Schema of the published table: {len(schema)} '
        f"built-in checks, {n_ok} pass</th></tr>"
        if schema
        else ""
    )
    contract = "".join(
        "<tr><td>{}</td><td>{}</td><td><code>{}</code></td></tr>".format(
            esc(g.get("id", "")),
            _wbr(esc(g.get("kind", ""))),
            esc(fmt_value({k: v for k, v in g.items() if k not in ("id", "kind")})),
        )
        for g in pub.get("contract") or []
    )
    return (
        '<table id="contract"><thead><tr><th>Result</th><th>ID</th><th>Kind</th></tr></thead>'
        f"<tbody>{body}{tail}</tbody></table>"
        '<details id="contract-terms"><summary>The contract, guarantee by guarantee</summary>'
        "<table><thead><tr><th>ID</th><th>Kind</th><th>Terms</th></tr></thead>"
        f"<tbody>{contract}</tbody></table></details>"
    )


def _public_figures(pub: dict, algo: Algorithm | None, outputs) -> str:
    """The figures the descriptor declares public, drawn from the public manifest and the
    public outputs alone (no input table, no sidecars)."""
    if algo is None or algo.figures is None or not algo.public.figures:
        return "<p>No plots are part of this copy.</p>"
    try:
        figs = resolve(algo.figures)(pub, outputs or {}, None, {})
    except Exception as e:  # a broken plot must not hide the rest of the report
        return f'<p class="unavailable">The plots could not be drawn: {esc(type(e).__name__)}</p>'
    out = [
        f'<figure id="fig-{esc(f.name)}">\n{f.svg}\n<figcaption>{f.caption}</figcaption>\n</figure>'
        for f in figs
        if f.name in algo.public.figures
    ]
    return "\n".join(out) or "<p>No plots are part of this copy.</p>"


def render_public_report(
    pub: dict, algo: Algorithm | None = None, outputs: dict[str, pa.Table] | None = None
) -> str:
    """The report of a release's shareable copy (``privfair.release.share``): one self-contained HTML
    page drawn from the public manifest ``pub`` and the public outputs only — the verdicts, the
    contract's terms, what the guarantee covers, the public metrics and figures, the parameters.
    No input-side number, check detail, warning, timing or cost of protection is on it."""
    name, release = pub.get("pipeline", "?"), pub.get("release", "?")
    v = pub.get("validation") or {}
    passed = v.get("status") == "passed"
    n = v.get("checked") or 0
    banner = (
        f'<p class="banner pass" id="status" data-status="passed">Validation passed: all {n} '
        "checks hold, recomputed by the data owner from the published files and the input "
        "(this copy carries the verdicts, not the evidence).</p>"
        if passed
        else f'<p class="banner fail" id="status" data-status="failed">Validation FAILED '
        f"({esc(', '.join(v.get('failed') or []))}).</p>"
    )
    headline = [Metric(k, label) for k, label in (pub.get("headline") or {}).items()]
    page = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(f'Release report: {name} {release}')}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        "<main>",
        f"<h1>Release report: {esc(name)}</h1>",
        f'<p class="subtitle">release <code>{esc(release)}</code> · {esc(pub.get("title", "?"))}'
        " · shareable copy</p>",
        banner,
        '<nav class="toc">Contents: <a href="#release">Release</a><a href="#disclosure">What it '
        'covers</a><a href="#contract">Guarantees</a><a href="#plots">Plots</a><a '
        'href="#metrics">Metrics</a><a href="#params">Parameters</a></nav>',
        "<h2>What was released</h2>",
        _public_released(pub),
        "<h2>What this release guarantees, and what it does not</h2>",
        _disclosure(pub),
        f"<h2>Guarantees ({_count_heading(v.get('results') or [])})</h2>",
        _verdicts(pub),
        '<h2 id="plots">Plots</h2>',
        _public_figures(pub, algo, outputs),
        "<h2>Re-identification risk</h2>",
        risk_section(pub.get("metrics") or {}, algo),
        "<h2>Metrics</h2>",
        _metrics({"metrics": pub.get("metrics") or {}}, headline),
        "<h2>Parameters</h2>",
        _params(pub),
        f"<footer>privfair {esc(pub.get('code_version', '?'))} · shareable copy · this page is "
        "self-contained: no scripts, no external resources.</footer>",
        "</main>",
        "</body>",
        "</html>",
    ]
    return "\n".join(page) + "\n"


# --- the page --------------------------------------------------------------------------------
def _headline(man: dict) -> list[Metric]:
    return [Metric(k, label) for k, label in (man.get("headline") or {}).items()]


def render_report(
    manifest: dict,
    algo: Algorithm | None = None,
    outputs: dict[str, pa.Table] | None = None,
    input_table: pa.Table | None = None,
    sidecars: dict[str, pa.Table] | None = None,
) -> str:
    """The release report as one self-contained HTML page (UTF-8 text)."""
    man = manifest
    name, version = man.get("pipeline", "?"), man.get("version", "?")
    title = f"Release report: {name} {version}"
    v = man.get("validation") or {}
    sections = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        "<main>",
        f"<h1>Release report: {esc(name)}</h1>",
        f'<p class="subtitle">version <code>{esc(version)}</code> · component '
        f"{esc(man.get('component', '?'))} · created {esc(man.get('published_at', '?'))} UTC</p>",
        _banner(man),
        _TOC,
        f"<h2>{'What was released' if v.get('status') == 'passed' else 'What this candidate holds'}</h2>",
        _released(man),
        "<h2>Warnings</h2>",
        _warnings(man),
        '<h2 id="budget">Privacy budget and re-publication</h2>',
        _ledger(man),
        f"<h2>Guarantees ({_count_heading(v.get('results') or [])})</h2>",
        "<p>Every guarantee the component declares (and every one the spec demands), recomputed "
        "by the validator from the files of this release and the input, never from numbers the "
        "component reported about itself.</p>",
        _contract(man),
        _artefacts(man),
        '<h2 id="plots">Plots</h2>',
        _figures(man, algo, outputs, input_table, sidecars),
        "<h2>Re-identification risk</h2>",
        risk_section(man.get("metrics") or {}, algo),
        "<h2>Cost of protection</h2>",
        _cost(man),
        "<h2>Metrics</h2>",
        _metrics(man, list(algo.headline) if algo is not None else _headline(man)),
        "<h2>Parameters</h2>",
        _params(man),
        f"<footer>privfair {esc(man.get('code_version', '?'))} · this page is self-contained: "
        "no scripts, no external resources.</footer>",
        "</main>",
        "</body>",
        "</html>",
    ]
    return "\n".join(sections) + "\n"
