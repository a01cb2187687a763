"""The human report, opened in a real headless browser (Debian's chromium driven by Playwright).

A German release is published into a temp store and its ``report.html`` opened via ``file://``:
no console or page errors, no request leaves the file, every chart is drawn, the contract table
has one PASS row per guarantee (plus the ``declared_contract`` row and the schema checks). A
full-page screenshot goes to ``artifacts/report.png`` and each figure's own pixels are checked
(through a canvas in the same browser: not one flat colour, mostly not background). A candidate
that fails its contract gets a report too (in ``.quarantine/``) showing the FAIL row.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from _shared import pixel_stats

from privfair.release.report import render_report
from privfair.run.flow import ingest, run_release
from privfair.schemas.contracts import parse_contract
from privfair.schemas.errors import ContractViolation
from privfair.spec.catalogue import algorithm_of, check_keys, load_spec

ROOT = Path(__file__).resolve().parents[2]
GERMAN = ROOT / "pipelines" / "specs" / "german_fair_mdav.yaml"
SCREENSHOT = ROOT / "artifacts" / "report.png"

pytestmark = pytest.mark.slow


# --- browser -----------------------------------------------------------------------------------


class Opened:
    """A page with every console error, page error and request it made recorded."""

    def __init__(self, browser, path: Path) -> None:
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.browser = browser
        self.page = browser.new_page(viewport={"width": 1100, "height": 900})
        self.page.on(
            "console",
            lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None,
        )
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.resolve().as_uri(), wait_until="load")

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def open_page(browser):
    pages: list[Opened] = []

    def _open(path: Path) -> Opened:
        pages.append(Opened(browser, path))
        return pages[-1]

    yield _open
    for p in pages:
        p.close()


# --- releases ----------------------------------------------------------------------------------


@pytest.fixture
def german_release(tmp_path: Path) -> Path:
    out = run_release(load_spec(GERMAN), tmp_path / "store")
    assert out.status == "published"
    return Path(out.path)


@pytest.fixture
def failed_candidate(tmp_path: Path) -> Path:
    raw = yaml.safe_load(GERMAN.read_text())
    raw["name"] = "german_k50"
    raw["guarantees"] = [{"kind": "k_anonymity", "k": 50}]
    spec_path = tmp_path / "german_k50.yaml"
    spec_path.write_text(yaml.safe_dump(raw))
    store = tmp_path / "store"
    with pytest.raises(ContractViolation):
        run_release(load_spec(spec_path), store)
    (quarantined,) = (store / "german_k50" / ".quarantine").iterdir()
    return quarantined


SVG_PROBE = """
() => Array.from(document.querySelectorAll('svg')).map(svg => {
  const box = svg.getBoundingClientRect();
  const shapes = Array.from(svg.querySelectorAll('rect, line, path, circle, polyline, polygon'));
  const drawn = shapes.filter(el => {
    const b = el.getBBox();
    return b.width > 0 || b.height > 0;
  }).length;
  const texts = Array.from(svg.querySelectorAll('text'));
  const clipped = texts.filter(t => {
    const b = t.getBoundingClientRect();  // includes rotation and the svg's scaling
    return b.width === 0 || b.left < box.left - 1 || b.top < box.top - 1
        || b.right > box.right + 1 || b.bottom > box.bottom + 1;
  }).map(t => t.textContent);
  const fig = svg.closest('figure');
  return {
    width: box.width, height: box.height, drawn, texts: texts.length, clipped,
    title: (svg.querySelector('title') || {}).textContent || '',
    caption: fig && fig.querySelector('figcaption') ? fig.querySelector('figcaption').textContent : null,
  };
})
"""

CONTRACT_PROBE = """
() => Array.from(document.querySelectorAll('#contract > tbody > tr[data-passed]')).map(tr => ({
  cells: Array.from(tr.children).map(td => td.textContent.trim()),
  passed: tr.dataset.passed,
}))
"""


def check_page_basics(opened: Opened, expected_figures: int) -> list[dict]:
    assert opened.errors == [], opened.errors
    foreign = [u for u in opened.requests if not u.startswith(("file:", "data:"))]
    assert foreign == [], f"the report fetched something outside its file: {foreign}"
    svgs = opened.page.evaluate(SVG_PROBE)
    assert len(svgs) == expected_figures, [s["title"] for s in svgs]
    for s in svgs:
        assert s["width"] > 0 and s["height"] > 0, s
        assert s["drawn"] >= 3, f"chart '{s['title']}' draws nothing: {s}"
        assert s["texts"] >= 3, f"chart '{s['title']}' has no labels: {s}"
        assert s["clipped"] == [], f"chart '{s['title']}' has text outside its box: {s['clipped']}"
        assert s["caption"], f"chart '{s['title']}' is not in a <figure> with a <figcaption>"
    assert opened.page.locator("figure > figcaption").count() == expected_figures
    assert opened.page.locator("script").count() == 0
    return svgs


# --- tests -------------------------------------------------------------------------------------


def test_published_report_renders_in_chromium(open_page, german_release: Path) -> None:
    report = german_release / "report.html"
    man = json.loads((german_release / "manifest.json").read_text())
    opened = open_page(report)
    page = opened.page

    svgs = check_page_basics(opened, expected_figures=5)
    titles = [s["title"] for s in svgs]
    assert titles == [
        "Group sizes",
        "Positive ratio per protected group",
        "Unfavoured share of sex per group",
        "Information loss per attribute",
        "Rows per equivalence-class size (attacker's background)",
    ]

    assert page.title() == f"Release report: german_fair_mdav {man['version']}"
    assert page.locator("#status").get_attribute("data-status") == "passed"
    # what was released
    released = page.locator("#release").inner_text()
    for needle in (
        man["version"],
        man["code_version"],
        man["input"]["fingerprint"],
        *man["input"]["files"].values(),
        "Input rows\t1000",
        "Published rows\tdata: 980",
        "Internal sidecars (not for distribution)\tinternal/lineage.parquet",
    ):
        assert needle in released
    metrics = page.locator("#metrics").inner_text()
    for needle in ("input rows\t1000", "published rows\t980", "dropped rows\t20"):
        assert needle in metrics, metrics
    # one PASS row per validation result: the declared guarantees first (each with its check
    # key), the declared-contract check, then the schema checks
    rows = page.evaluate(CONTRACT_PROBE)
    results = man["validation"]["results"]
    guarantees = [r for r in results if r["id"] not in ("schema", "declared")]
    assert len(guarantees) == len(man["contract"]) == 15
    assert [r["key"] for r in guarantees] == check_keys(parse_contract(man["contract"]))
    declared = [r for r in results if r["id"] == "declared"]
    assert [(r["kind"], r["passed"]) for r in declared] == [("declared_contract", True)]
    ordered = [r for r in results if r["id"] != "schema"] + [
        r for r in results if r["id"] == "schema"
    ]
    assert ordered[len(guarantees)] is declared[0]
    assert len(rows) == len(results) == man["validation"]["checked"]
    for row, r in zip(rows, ordered, strict=True):
        assert row["cells"][:3] == ["PASS", r["id"], r["kind"]]
        assert row["passed"] == "true"
        assert row["cells"][5].startswith(r["message"])
    assert page.locator("#contract thead th").all_inner_texts() == [
        "Result",
        "ID",
        "Kind",
        "Observed",
        "Expected",
        "Message",
    ]
    # the manifest's warnings, one item each (or a plain "No warnings.")
    if man["warnings"]:
        assert page.locator("#warnings li").all_inner_texts() == man["warnings"]
    else:
        assert page.locator("#warnings").inner_text() == "No warnings."
    # links point only at artefacts stored inside the release folder
    hrefs = page.evaluate(
        "() => Array.from(document.querySelectorAll('[href]'), a => a.getAttribute('href'))"
    )
    anchors = [h for h in hrefs if h.startswith("#")]
    files = [h for h in hrefs if not h.startswith("#")]
    assert len(anchors) >= 5 and all(page.locator(h).count() == 1 for h in anchors), anchors
    assert files == sorted(man["validation"]["artefacts"].values())
    assert all((german_release / h).is_file() for h in files)
    assert "tau" in page.locator("#params").inner_text()

    # the bound and the input share are marked on the t-closeness chart
    caption = page.locator("#fig-protected-share figcaption").inner_text()
    assert "input share 0.31" in caption and "bound t ≤ 0.05" in caption
    assert "0 group(s) outside the bound" in caption

    # what the screenshot shows: the whole page, not a blank one, and every figure drawn in it
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    shot = page.screenshot(path=str(SCREENSHOT), full_page=True)
    whole = pixel_stats(opened.browser, shot)
    height = page.evaluate("() => document.documentElement.scrollHeight")
    assert (whole["width"], whole["height"]) == (1100, height)
    assert height > 3000  # four figures and an 82-row table: far more than one screen
    assert whole["colours"] >= 200, whole  # text, badges and charts; a blank page has 1
    assert whole["background_share"] < 0.95, whole
    for i, s in enumerate(svgs):
        fig = page.locator("main figure").nth(i)
        assert fig.locator("svg > title").text_content() == s["title"]
        box = fig.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 200, (s["title"], box)
        drawn = pixel_stats(opened.browser, fig.screenshot())
        assert drawn["colours"] >= 50, (s["title"], drawn)  # bars, axes, anti-aliased labels
        assert drawn["background_share"] < 0.95, (s["title"], drawn)
    for text in ("Release report: german_fair_mdav", "Validation passed", "Group sizes"):
        assert text in page.locator("body").inner_text()


def test_failed_candidate_report_shows_fail_rows(open_page, failed_candidate: Path) -> None:
    man = json.loads((failed_candidate / "manifest.json").read_text())
    assert man["validation"]["status"] == "failed"
    opened = open_page(failed_candidate / "report.html")
    check_page_basics(opened, expected_figures=5)
    page = opened.page

    status = page.locator("#status")
    assert status.get_attribute("data-status") == "failed"
    assert "FAILED" in status.inner_text() and "spec.0 k_anonymity" in status.inner_text()
    rows = page.evaluate(CONTRACT_PROBE)
    assert len(rows) == len(man["validation"]["results"])
    failed = [r for r in rows if r["passed"] == "false"]
    assert [r["cells"][:5] for r in failed] == [["FAIL", "spec.0", "k_anonymity", "10", "50"]]
    assert "fewer than 50 rows" in failed[0]["cells"][5]
    assert sum(r["cells"][0] == "PASS" for r in rows) == len(rows) - 1
    # offending groups are listed (collapsed) under the failed row
    assert page.locator("#contract tr.fail details summary").inner_text().startswith("98 offending")


def test_report_escapes_everything_from_data(open_page, german_release: Path, tmp_path) -> None:
    man = json.loads((german_release / "manifest.json").read_text())
    evil = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2">'
    man["spec"]["description"] = evil
    man["warnings"] = [f"column '{evil}' & \"quotes\""]
    man["validation"]["results"][0]["message"] = evil
    man["params"]["seed"] = evil
    man["metrics"]["information_loss"]["per_attribute"][evil] = 0.5
    spec = load_spec(GERMAN)
    html = render_report(
        man,
        algorithm_of(spec),
        {"data": pq.read_table(german_release / "shared" / "data.parquet")},
        ingest(spec).table,
        {"lineage": pq.read_table(german_release / "internal" / "lineage.parquet")},
    )
    assert "<script" not in html and "<img" not in html
    tags = re.findall(r"<[^>]*>", html)  # escaped data never forms a tag
    assert not [t for t in tags if re.search(r"\b(?:src|on\w+)\s*=", t)]
    hrefs = [h for t in tags for h in re.findall(r'\bhref="([^"]*)"', t)]
    assert all(":" not in h and not h.startswith("/") and ".." not in h for h in hrefs), hrefs
    assert "url(" not in html
    path = tmp_path / "evil.html"
    path.write_text(html, encoding="utf-8")

    opened = open_page(path)
    check_page_basics(opened, expected_figures=5)
    page = opened.page
    assert page.evaluate("() => window.__pwned === undefined")
    assert page.locator("img").count() == 0
    assert evil in page.locator("#release").inner_text()
    assert page.locator("#warnings li").inner_text() == f"column '{evil}' & \"quotes\""


def test_report_is_deterministic(german_release: Path) -> None:
    man = json.loads((german_release / "manifest.json").read_text())
    spec = load_spec(GERMAN)
    tables = (
        algorithm_of(spec),
        {"data": pq.read_table(german_release / "shared" / "data.parquet")},
        ingest(spec).table,
        {"lineage": pq.read_table(german_release / "internal" / "lineage.parquet")},
    )
    first = render_report(man, *tables)
    assert first == render_report(json.loads(json.dumps(man)), *tables)
    # the report written at publication is the same page
    assert first == (german_release / "report.html").read_text(encoding="utf-8")


@pytest.fixture
def german_release_with_grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A German release published after ``privfair evaluate`` ran a k grid on the same spec
    and input, so its report carries the trade-off plot."""
    from privfair.evaluation.evaluate import evaluate, write

    monkeypatch.setenv("PRIVFAIR_EVALUATIONS", str(tmp_path / "evaluations"))
    spec = load_spec(GERMAN)
    ing = ingest(spec)
    ev = evaluate(
        spec,
        ing.table,
        grid={"k": [5, 20]},
        folds=3,
        classifiers=["lr", "gnb"],
        input_fingerprint=ing.input["fingerprint"],
        progress=lambda m: None,
    )
    write(ev, tmp_path / "evaluations" / spec.name)
    out = run_release(spec, tmp_path / "store")
    assert out.status == "published"
    return Path(out.path)


COST_PROBE = """
() => Array.from(document.querySelectorAll('#cost-holdout tbody tr'), tr => ({
  head: tr.querySelector('th').textContent.trim(),
  cells: Array.from(tr.querySelectorAll('td'), td => td.textContent.trim()),
}))
"""


def test_cost_of_protection_section_in_chromium(open_page, german_release_with_grid: Path):
    """The hold-out table shows the manifest's measured arms and their change; the trade-off
    figure draws one point per (setting, classifier) of the evaluation, plus one raw point per
    classifier, each labelled, inside its box, and visibly drawn."""
    from privfair.components.core.plots import fmt_num

    man = json.loads((german_release_with_grid / "manifest.json").read_text())
    cost = man["cost_of_protection"]
    assert cost["status"] == "measured" and cost["grid"]["stale"] is False
    opened = open_page(german_release_with_grid / "report.html")
    svgs = check_page_basics(opened, expected_figures=6)
    assert svgs[-1]["title"] == "Trade-off: german_fair_mdav"
    page = opened.page
    assert page.locator("#cost-holdout thead th").all_inner_texts() == [
        "trained on",
        "accuracy",
        "precision",
        "recall",
        "dPar",
        "eOdds",
    ]
    rows = page.evaluate(COST_PROBE)
    assert [r["head"] for r in rows] == [
        "raw training split",
        "fair_mdav output of the split",
        "change",
    ]
    keys = ("accuracy", "precision", "recall", "dpar", "eodds")
    by_head = {r["head"]: r["cells"] for r in rows}
    ours, raw = cost["holdout"]["fair_mdav"], cost["holdout"]["none"]
    assert by_head["raw training split"] == [fmt_num(raw[k]) for k in keys]
    assert by_head["fair_mdav output of the split"] == [fmt_num(ours[k]) for k in keys]
    assert by_head["change"] == [f"{ours[k] - raw[k]:+.3f}" for k in keys]

    fig = page.locator("#fig-tradeoff")
    labels = fig.locator("svg text").all_text_contents()
    for label in ("lr k=5", "lr k=20", "gnb k=5", "gnb k=20", "lr", "gnb"):
        assert label in labels, labels
    assert fig.locator("svg circle").count() == 2 * 2 + 2
    assert "k ∈ [5, 20]" in fig.locator("figcaption").inner_text()
    shot = fig.screenshot()
    drawn = pixel_stats(opened.browser, shot)
    assert drawn["colours"] >= 50 and drawn["background_share"] < 0.97, drawn
    section = page.locator("#cost")
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    section.screenshot(path=str(SCREENSHOT.with_name("report-cost.png")))


# --- the synthetic-data quality report (issue 47, part 2) ----------------------------------------

ADULT_MST = ROOT / "pipelines" / "specs" / "adult_mst.yaml"


@pytest.fixture
def mst_release(tmp_path: Path) -> Path:
    out = run_release(load_spec(ADULT_MST), tmp_path / "store")
    assert out.status == "published"
    return Path(out.path)


def test_quality_sections_of_both_reports_in_chromium(open_page, mst_release: Path) -> None:
    """The owner's report shows the quality report against the noisy measurements and
    SDMetrics' against the input with its DCR panel; the shareable copy's report shows the
    first only, with the scores of its public manifest. Screenshots of the sections:
    artifacts/report-quality-owner.png and artifacts/report-quality-public.png."""
    from privfair.release.share import shared_file

    pub = json.loads((mst_release / shared_file("manifest.json")).read_text())
    q = pub["metrics"]["quality"]
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    shots = {}
    for who, path in (("owner", "report.html"), ("public", shared_file("report.html"))):
        opened = open_page(mst_release / path)
        assert opened.errors == [], opened.errors
        page = opened.page
        fig = page.locator("#fig-quality")
        assert fig.count() == 1
        head = fig.locator("table.quality-scores tbody td").all_inner_texts()
        assert head == [
            f"{q['score']:.3f}",
            f"{q['column_shapes']['score']:.3f}",
            f"{q['column_pair_trends']['score']:.3f}",
        ]
        assert fig.locator("svg rect").count() >= len(q["column_shapes"]["columns"])
        owner = page.locator("#fig-quality_input")
        assert owner.count() == (1 if who == "owner" else 0)
        shots[who] = [fig.screenshot()]
        if who == "owner":
            panel = owner.locator("table.quality-privacy").inner_text()
            assert "DCRBaselineProtection" in panel and "no holdout exists" in panel
            assert "SDMetrics 0." in owner.locator("figcaption").inner_text()
            shots[who].append(owner.screenshot())
        for shot in shots[who]:
            drawn = pixel_stats(opened.browser, shot)
            assert drawn["colours"] >= 20 and drawn["background_share"] < 0.98, drawn
        # the quality figures of the page (absolute coordinates: a full-page clip)
        top, bottom = page.evaluate(
            """() => {
              const boxes = Array.from(document.querySelectorAll('#fig-quality, #fig-quality_input'),
                e => { const b = e.getBoundingClientRect();
                       return [b.top + window.scrollY, b.bottom + window.scrollY]; });
              return [Math.min(...boxes.map(b => b[0])) - 8, Math.max(...boxes.map(b => b[1])) + 8];
            }"""
        )
        page.screenshot(
            path=str(SCREENSHOT.with_name(f"report-quality-{who}.png")),
            full_page=True,
            clip={"x": 0, "y": top, "width": 1100, "height": bottom - top},
        )
