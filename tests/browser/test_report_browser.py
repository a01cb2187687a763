"""The human report, opened in a real headless browser (Debian's chromium driven by Playwright).

A German release is published into a temp store and its ``report.html`` opened via ``file://``:
no console or page errors, no request leaves the file, every chart is drawn, the contract table
has one PASS row per guarantee. A full-page screenshot goes to ``artifacts/report.png``. A
candidate that fails its contract gets a report too (in ``.quarantine/``) showing the FAIL row.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from pipelines.report import render_report
from pipelines.flow import run_release
from pipelines.flow import ingest
from schemas.errors import ContractViolation
from pipelines.catalogue import load_spec

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

    svgs = check_page_basics(opened, expected_figures=4)
    titles = [s["title"] for s in svgs]
    assert titles == [
        "Group sizes",
        "Positive ratio per protected group",
        "Unfavoured share of sex per group",
        "Information loss per attribute",
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
        "1000 / 980 / 20",
    ):
        assert needle in released
    # one PASS row per validation result: the declared guarantees first, then schema checks
    rows = page.evaluate(CONTRACT_PROBE)
    results = man["validation"]["results"]
    guarantees = [r for r in results if r["id"] != "schema"]
    assert len(guarantees) == len(man["contract"]) == 15
    ordered = guarantees + [r for r in results if r["id"] == "schema"]
    assert len(rows) == len(results)
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

    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    assert SCREENSHOT.stat().st_size > 20_000


def test_failed_candidate_report_shows_fail_rows(open_page, failed_candidate: Path) -> None:
    man = json.loads((failed_candidate / "manifest.json").read_text())
    assert man["validation"]["status"] == "failed"
    opened = open_page(failed_candidate / "report.html")
    check_page_basics(opened, expected_figures=4)
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
    html = render_report(
        man,
        pq.read_table(german_release / "data.parquet"),
        ingest(load_spec(GERMAN)).table,
        pq.read_table(german_release / "lineage.parquet"),
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
    check_page_basics(opened, expected_figures=4)
    page = opened.page
    assert page.evaluate("() => window.__pwned === undefined")
    assert page.locator("img").count() == 0
    assert evil in page.locator("#release").inner_text()
    assert page.locator("#warnings li").inner_text() == f"column '{evil}' & \"quotes\""


def test_report_is_deterministic(german_release: Path) -> None:
    man = json.loads((german_release / "manifest.json").read_text())
    tables = (
        pq.read_table(german_release / "data.parquet"),
        ingest(load_spec(GERMAN)).table,
        pq.read_table(german_release / "lineage.parquet"),
    )
    first = render_report(man, *tables)
    assert first == render_report(json.loads(json.dumps(man)), *tables)
    # the report written at publication is the same page
    assert first == (german_release / "report.html").read_text(encoding="utf-8")
