"""The user's Dagster project in the Dagster UI, in a real headless browser.

The README's ``definitions.py`` (``pipelines/examples/dagster_definitions.py.txt``: the user's
asset ``people``, its privfair release ``published/people_k5``, ``people_report`` downstream)
in a temp folder is materialised once (``dagster asset materialize``, in process), then served
by ``dagster-webserver -f definitions.py`` on a free port, started through ``privfair.orchestrate
sigdfl`` in a session of its own with DAGSTER_HOME and the store in the temp folder. Debian's
chromium (Playwright) opens the release's lineage (``people -> people_k5 -> people_report``, the
release's checks all passed) and its checks tab; each page must name what its screenshot is
meant to show and each screenshot must not be blank. The screenshots go to the test's temp
folder and to ``/tmp/privfair_user_graph.png`` / ``/tmp/privfair_user_checks.png``. The server
is stopped by its own process group; no process of it may be left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _shared import pixel_stats
from _webserver import serving

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DEFINITIONS = REPO / "pipelines" / "examples" / "dagster_definitions.py.txt"
RELEASE = ["published", "people_k5"]
GRAPH_COPY = Path("/tmp/privfair_user_graph.png")
CHECKS_COPY = Path("/tmp/privfair_user_checks.png")
IN_PROCESS = json.dumps({"execution": {"config": {"in_process": {}}}})
START_TIMEOUT_S = 180
STOP_TIMEOUT_S = 30
VIEWPORT = {"width": 1400, "height": 900}

NODE = """
query($path: [String!]!) {
  assetNodeOrError(assetKey: {path: $path}) {
    ... on AssetNode {
      groupName
      dependencyKeys { path }
      dependedByKeys { path }
      assetChecksOrError { ... on AssetChecks { checks {
        name blocking executionForLatestMaterialization { status } } } }
    }
  }
}"""


@pytest.fixture(scope="module")
def webserver(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("user_dagster_project")
    (root / "definitions.py").write_text(DEFINITIONS.read_text())
    home = root / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "PRIVFAIR_S"))}
    # the project's own ledger, not the session's other releases
    env.update(
        DAGSTER_HOME=str(home),
        PRIVFAIR_STORE=str(root / "releases"),
        XDG_STATE_HOME=str(root / "state"),
    )
    mat = subprocess.run(
        [BIN / "dagster", "asset", "materialize", "-f", "definitions.py", "--select", "*"]
        + ["--config-json", IN_PROCESS],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert mat.returncode == 0, mat.stderr[-4000:]
    program = [str(BIN / "dagster-webserver"), "-f", "definitions.py"]
    with serving(
        program, root, env, root / "webserver.log", START_TIMEOUT_S, STOP_TIMEOUT_S
    ) as server:
        yield server


def _dismiss_popups(page) -> None:
    """The first visit shows a 'Join the Dagster community' dialog, after a moment; skip it."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):
        page.get_by_role("button", name="Skip").click(timeout=8000)


def _shoot(browser, page, path: Path, copy: Path, must_show: list[str]) -> str:
    """Screenshot ``page`` into ``path`` (and ``copy``) once its text names all of
    ``must_show``; the screenshot must not be blank. Returns the page's text."""
    deadline = time.monotonic() + 60
    while True:  # the nodes fill in one by one
        text = page.locator("body").inner_text()
        missing = [t for t in must_show if t not in text]
        if (not missing and "Loading..." not in text) or time.monotonic() > deadline:
            break
        page.wait_for_timeout(500)
    page.wait_for_timeout(1000)
    assert not missing, f"{path.name}: the page does not show {missing}:\n{text[:3000]}"
    stats = pixel_stats(browser, page.screenshot(path=str(path)))
    assert (stats["width"], stats["height"]) == (VIEWPORT["width"], VIEWPORT["height"]), stats
    assert stats["colours"] >= 100 and stats["background_share"] < 0.985, (path.name, stats)
    shutil.copy(path, copy)
    return text


def test_the_users_graph_shows_their_asset_the_release_and_its_checks(webserver, browser, tmp_path):
    node = webserver.graphql(NODE, {"path": RELEASE})["assetNodeOrError"]
    assert node["dependencyKeys"] == [{"path": ["people"]}]  # the lineage edge
    assert node["dependedByKeys"] == [{"path": ["people_report"]}]
    assert node["groupName"] == "privacy"
    checks = node["assetChecksOrError"]["checks"]
    names = sorted(c["name"] for c in checks)
    assert {"contract", "spec_0_k_anonymity", "C4_k_anonymity"} <= set(names)
    assert all(c["blocking"] for c in checks)
    statuses = {c["name"]: c["executionForLatestMaterialization"]["status"] for c in checks}
    assert set(statuses.values()) == {"SUCCEEDED"}, statuses

    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.goto(f"{webserver.url}/assets/{'/'.join(RELEASE)}?view=lineage")
        _dismiss_popups(page)
        for asset in ("people", "people_k5", "people_report"):
            page.get_by_text(asset, exact=True).first.wait_for(timeout=60_000)
        page.get_by_text(f"{len(names)} / {len(names)} Passed").first.wait_for(timeout=60_000)
        _shoot(
            browser,
            page,
            tmp_path / "user_graph.png",
            GRAPH_COPY,
            ["crm", "privacy", "reporting", "people", "people_k5", "people_report", "privfair"]
            + [f"{len(names)} / {len(names)} Passed", "1 / 1 Passed"],
        )

        page.goto(f"{webserver.url}/assets/{'/'.join(RELEASE)}?view=checks")
        _dismiss_popups(page)
        page.get_by_text("contract", exact=True).first.wait_for(timeout=60_000)
        page.get_by_text("Succeeded", exact=True).nth(len(names) - 1).wait_for(timeout=60_000)
        text = _shoot(
            browser,
            page,
            tmp_path / "user_checks.png",
            CHECKS_COPY,
            ["people_k5", f"Checks ({len(names)})", "This is a blocking asset check."],
        )
        lines = text.splitlines()
        assert [n for n in names if n not in lines] == [], text
        assert lines.count("Succeeded") == len(names), text
    finally:
        page.close()
