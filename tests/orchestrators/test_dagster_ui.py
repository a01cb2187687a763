"""The Dagster UI: ``dagster dev`` on the generated definitions, driven by a real headless browser.

``dagster dev -m privfair.dagster.definitions`` is started through ``privfair.orchestrate sigdfl`` (a
wrapper restoring default SIGINT/SIGTERM handling, without which ``dagster dev`` hangs on
shutdown when started from a non-interactive parent), in its own session, with DAGSTER_HOME,
TMPDIR and the release store in a temp folder. Debian's chromium (Playwright) opens the asset
catalogue, finds the German assets and their checks; a materialisation launched through GraphQL
must succeed and publish. Screenshots go to ``artifacts/`` (``dagster_ui_assets.png``: the asset
group; ``dagster_ui.png``: the checks of ``protected_table`` after the run;
``dagster_ui_run.png``: the run); each page's text must name what the screenshot is meant to show
and each screenshot must not be blank (its pixels are counted through a canvas in the same
browser). The server is always
stopped by its own PID (SIGTERM to the wrapper's process group, SIGKILL for stragglers) and no
process may be left behind.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

import pytest
from _shared import pixel_stats, read_latest
from _webserver import serving

from privfair.spec.catalogue import check_keys, load_spec, outline

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SCREENSHOT = REPO / "artifacts" / "dagster_ui.png"
ASSETS_SHOT = SCREENSHOT.with_name("dagster_ui_assets.png")
RUN_SHOT = SCREENSHOT.with_name("dagster_ui_run.png")
LOCATION = "privfair.dagster.definitions"
PIPELINE = "german_fair_mdav"
START_TIMEOUT_S = 240
RUN_TIMEOUT_S = 400
STOP_TIMEOUT_S = 45


# --- processes -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dagster_dev(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("dagster_dev")
    home, tmpdir, store = tmp / "dagster_home", tmp / "tmp", tmp / "store"
    home.mkdir()
    tmpdir.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = dict(os.environ)
    env.pop("PRIVFAIR_SPECS_DIR", None)
    env.update(
        DAGSTER_HOME=str(home),
        TMPDIR=str(tmpdir),
        PRIVFAIR_STORE=str(store),
        PRIVFAIR_CACHE_DIR=str(tmp / "cache"),
    )
    program = [str(BIN / "dagster"), "dev", "-m", LOCATION]
    with serving(
        program, REPO, env, tmp / "dagster_dev.log", START_TIMEOUT_S, STOP_TIMEOUT_S, store
    ) as server:
        yield server


# --- the test ------------------------------------------------------------------------------------
CHECKS_QUERY = """
query($path: [String!]!) {
  assetNodeOrError(assetKey: {path: $path}) {
    ... on AssetNode { assetChecksOrError { ... on AssetChecks { checks { name blocking } } } }
  }
}"""
GROUP_QUERY = """
query($group: AssetGroupSelector!) {
  assetNodes(group: $group) { assetKey { path } groupName hasAssetChecks }
}"""
LAUNCH = """
mutation($p: ExecutionParams!) {
  launchRun(executionParams: $p) {
    __typename
    ... on LaunchRunSuccess { run { runId status } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""
RUN_STATUS = "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"


CHECK_STATUS = """
query($path: [String!]!) {
  assetNodeOrError(assetKey: {path: $path}) {
    ... on AssetNode { assetChecksOrError { ... on AssetChecks {
      checks { name executionForLatestMaterialization { status } } } } }
  }
}"""


def shoot(browser, page, path: Path, must_show: list[str]) -> str:
    """Screenshot ``page`` into ``path`` once the page's text names everything in
    ``must_show``; the screenshot must be the viewport and not blank. Returns the page text."""
    text = page.locator("body").inner_text()
    missing = [t for t in must_show if t not in text]
    assert not missing, f"{path.name}: the page does not show {missing}:\n{text[:3000]}"
    path.parent.mkdir(exist_ok=True)
    stats = pixel_stats(browser, page.screenshot(path=str(path)))
    assert (stats["width"], stats["height"]) == (1400, 1000), stats
    # a blank page is one colour; Dagster's UI draws text, icons and status tags
    assert stats["colours"] >= 100 and stats["background_share"] < 0.985, (path.name, stats)
    return text


def _dismiss_popups(page) -> None:
    """The first visit shows a 'Join the Dagster community' dialog; skip it (it is remembered)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):  # no dialog this time
        page.get_by_role("button", name="Skip").click(timeout=4000)


def test_catalogue_checks_and_a_launched_run(dagster_dev, browser):
    server = dagster_dev
    group = {
        "groupName": PIPELINE,
        "repositoryName": "__repository__",
        "repositoryLocationName": LOCATION,
    }
    nodes = server.graphql(GROUP_QUERY, {"group": group})["assetNodes"]
    keys = {"/".join(n["assetKey"]["path"]): n for n in nodes}
    # the group also holds the observable source of the raw input (observed, not materialised)
    assert set(keys) == {
        f"{PIPELINE}/{a}" for a in ("source", "raw_table", "protected_table", "release")
    }
    assert keys[f"{PIPELINE}/protected_table"]["hasAssetChecks"]
    checks = server.graphql(CHECKS_QUERY, {"path": [PIPELINE, "protected_table"]})
    checks = checks["assetNodeOrError"]["assetChecksOrError"]["checks"]
    names = {c["name"] for c in checks}
    spec = load_spec(REPO / "pipelines" / "specs" / f"{PIPELINE}.yaml")
    expected = [*check_keys(outline(spec)), "contract"]
    assert sorted(names) == sorted(expected)
    assert {"C4_k_anonymity", "C5_t_closeness", "C5_t_closeness_2", "contract"} <= names
    assert all(c["blocking"] for c in checks)
    assets = ["raw_table", "protected_table", "release"]

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{server.url}/assets/{PIPELINE}", wait_until="domcontentloaded")
        _dismiss_popups(page)
        for asset in assets:
            page.get_by_text(asset, exact=True).first.wait_for(timeout=60_000)
        checks_url = f"{server.url}/assets/{PIPELINE}/protected_table?view=checks"
        page.goto(checks_url, wait_until="domcontentloaded")
        _dismiss_popups(page)
        page.get_by_text("C4_k_anonymity", exact=True).first.wait_for(timeout=60_000)
        page.get_by_text(f"Checks ({len(names)})").first.wait_for(timeout=30_000)

        params = {
            "selector": {
                "repositoryLocationName": LOCATION,
                "repositoryName": "__repository__",
                "jobName": f"{PIPELINE}_job",
            },
            "runConfigData": {},
        }
        launched = server.graphql(LAUNCH, {"p": params})["launchRun"]
        assert launched["__typename"] == "LaunchRunSuccess", launched
        run_id = launched["run"]["runId"]
        deadline = time.monotonic() + RUN_TIMEOUT_S
        status = "QUEUED"
        while status not in ("SUCCESS", "FAILURE", "CANCELED"):
            assert time.monotonic() < deadline, f"run {run_id} still {status}\n{server.log_tail()}"
            time.sleep(2)
            status = server.graphql(RUN_STATUS, {"id": run_id})["runOrError"]["status"]
        assert status == "SUCCESS", server.log_tail()

        page.goto(f"{server.url}/assets/{PIPELINE}", wait_until="domcontentloaded")
        _dismiss_popups(page)
        # the asset group: the three assets, each materialised by the run
        for asset in assets:
            page.get_by_text(asset, exact=True).first.wait_for(timeout=60_000)
        page.get_by_text("Materialized", exact=True).nth(len(assets) - 1).wait_for(timeout=60_000)
        text = shoot(browser, page, ASSETS_SHOT, [PIPELINE, *assets])
        assert text.splitlines().count("Materialized") == len(assets), text
        # the folder also lists <spec>/evaluation, which no release job materialises
        assert text.count("Never materialized") == 1 and "evaluation" in text, text
        # the checks of protected_table: every declared check listed, each one succeeded
        page.goto(checks_url, wait_until="domcontentloaded")
        _dismiss_popups(page)
        page.get_by_text("C4_k_anonymity", exact=True).first.wait_for(timeout=60_000)
        page.get_by_text("Succeeded", exact=True).nth(len(names) - 1).wait_for(timeout=60_000)
        text = shoot(
            browser,
            page,
            SCREENSHOT,
            ["protected_table", f"Checks ({len(names)})", "This is a blocking asset check."],
        )
        lines = text.splitlines()
        assert [n for n in expected if n not in lines] == [], text
        assert lines.count("Succeeded") == len(names), text
        assert "Failed" not in lines
        # the run: succeeded, all four steps, none errored
        page.goto(f"{server.url}/runs/{run_id}", wait_until="domcontentloaded")
        _dismiss_popups(page)
        page.get_by_text("Success").first.wait_for(timeout=60_000)
        page.get_by_text("RUN_SUCCESS", exact=True).first.wait_for(timeout=60_000)
        shoot(
            browser,
            page,
            RUN_SHOT,
            [
                run_id[:8],
                "Success",
                f"{PIPELINE}_job",
                f"{len(assets)} assets",
                f"{len(names)} checks",
                "Errored (0)",
                "Succeeded (4)",
                "RUN_SUCCESS",
            ],
        )
    finally:
        page.close()
    latest = server.graphql(CHECK_STATUS, {"path": [PIPELINE, "protected_table"]})
    latest = latest["assetNodeOrError"]["assetChecksOrError"]["checks"]
    statuses = {
        c["name"]: (c["executionForLatestMaterialization"] or {}).get("status") for c in latest
    }
    assert statuses == dict.fromkeys(expected, "SUCCEEDED")

    releases = [p for p in (server.store / PIPELINE).iterdir() if not p.name.startswith(".")]
    versions = [p for p in releases if p.is_dir() and not p.is_symlink()]
    assert len(versions) == 1 and (versions[0] / "shared" / "data.parquet").is_file()
    assert read_latest(server.store / PIPELINE) == versions[0].name
