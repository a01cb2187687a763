"""What a person sees of a long ``privfair run`` in a terminal: the run in a real
pseudo-terminal, its screen rendered while the grouping loop's bar is drawn and at the end,
opened in headless chromium and screenshot to ``artifacts/progress.png`` (its pixels checked:
drawn, not one flat colour). ``PRIVFAIR_PROGRESS_SPEC`` picks the spec (default German Credit
through Fair-MDAV; ``pipelines/specs/adult_fair_mdav.yaml`` for the 49k-row run).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from _shared import pixel_stats
from _terminal import capture, page, screen

ROOT = Path(__file__).resolve().parents[2]
SPEC = Path(
    os.environ.get("PRIVFAIR_PROGRESS_SPEC", ROOT / "pipelines/specs/german_fair_mdav.yaml")
)
SCREENSHOT = ROOT / "artifacts" / "progress.png"

pytestmark = pytest.mark.slow


def test_a_terminal_shows_phases_a_bar_and_the_run_ends_with_its_summary(browser, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PRIVFAIR_PROGRESS"}
    argv = [sys.executable, "-m", "privfair.cli", "run", str(SPEC), "--store", str(tmp_path)]
    cap = capture(argv, env)
    assert cap["rc"] == 0, "".join(c for _, c in cap["chunks"])[-3000:]
    # the first moment a bar of the grouping loop is on screen
    bars = [t for t, c in cap["chunks"] if re.search(r"\[[█░]+\].*rows in fairlets", c)]
    assert bars, "no bar of the grouping loop was drawn"
    bar_at = bars[len(bars) // 2]
    final = "\n".join("".join(ch for _, ch in row) for row in screen(cap["chunks"], 1e9))
    done = re.findall(r"✓ ([a-z (_)]+?)  ", final)
    assert done[:2] == ["ingest", "protect (fair_mdav)"] and done[-1] == "publish", final
    assert final.index("✓ publish") < final.index("published: ")  # stderr done, then stdout
    html = page(cap, [f"{bar_at:.2f}", "end"])
    p = browser.new_page(viewport={"width": 1000, "height": 700})
    try:
        p.set_content(html)
        SCREENSHOT.parent.mkdir(exist_ok=True)
        png = p.screenshot(path=str(SCREENSHOT), full_page=True)
    finally:
        p.close()
    stats = pixel_stats(browser, png)
    assert stats["colours"] > 20 and stats["background_share"] < 0.97, stats
