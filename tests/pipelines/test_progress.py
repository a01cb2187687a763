"""Progress of long commands on stderr (``privfair.components.core.progress``): phases with elapsed time
and bars on a terminal (a real pseudo-terminal here), plain lines with ``--progress``, nothing
when stderr is not a terminal or with ``--quiet``, and never anything on stdout."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest
from _shared import run_cli

SPECS = Path(__file__).resolve().parents[2] / "pipelines" / "specs"
GERMAN = SPECS / "german_fair_mdav.yaml"
PHASES = [  # in the order they end: a phase's sub-phases before it
    "ingest",
    "protect (fair_mdav)",
    "write",
    "evidence",
    "expectation suites compiled",
    "results and Data Docs",
    "validate",
    "cost of protection",
    "report",
    "stage",
    "publish",
]


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("progress") / "store"
    assert (
        subprocess.run(
            [sys.executable, "-m", "privfair.cli", "run", str(GERMAN), "--store", str(store)],
            capture_output=True,
        ).returncode
        == 0
    )
    return store


def test_no_progress_when_stderr_is_not_a_terminal(
    published: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRIVFAIR_PROGRESS", raising=False)
    code, out, err = run_cli(capsys, "validate", str(published / "german_fair_mdav" / "latest"))
    assert code == 0 and err == ""
    assert out.splitlines()[-1].startswith("guarantees:")


def test_progress_flag_writes_plain_phase_lines_to_stderr_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys, "run", str(GERMAN), "--store", str(tmp_path / "s"), "--progress"
    )
    assert code == 0, err
    assert "✓" not in out and "\x1b" not in err  # plain lines: not a terminal
    done = [line.split("✓ ", 1)[1].split("  ")[0] for line in err.splitlines() if "✓ " in line]
    assert done == PHASES, err
    assert "rows grouped" in err or "rows in fairlets" in err  # the grouping loop's bar
    # --quiet wins over PRIVFAIR_PROGRESS=1
    os.environ["PRIVFAIR_PROGRESS"] = "1"
    try:
        code, out, err = run_cli(
            capsys, "validate", str(tmp_path / "s" / "german_fair_mdav" / "latest"), "--quiet"
        )
    finally:
        del os.environ["PRIVFAIR_PROGRESS"]
    assert code == 0 and err == ""


def _in_terminal(argv: list[str]) -> str:
    """What ``argv`` writes to a pseudo-terminal (stdout and stderr both go there)."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.environ["TERM"] = "xterm"
        os.environ.pop("PRIVFAIR_PROGRESS", None)
        os.execv(sys.executable, [sys.executable, "-m", "privfair.cli", *argv])
    data = b""
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], 120)
            chunk = os.read(fd, 65536) if ready else b""
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    os.waitpid(pid, 0)
    return data.decode(errors="replace")


def test_a_terminal_gets_live_phases_a_bar_and_a_closing_line_per_phase(published: Path) -> None:
    text = _in_terminal(["validate", str(published / "german_fair_mdav" / "latest")])
    assert "\r\x1b[K" in text  # the live line is rewritten in place
    assert "✓\x1b[0m ingest" in text and "✓\x1b[0m validate" in text
    assert "guarantees:" in text and " hold" in text


def test_the_elapsed_time_runs_in_a_phase_with_no_loop() -> None:
    """On a terminal the live line is redrawn every TICK_S even when nothing reports (a long
    library call): its elapsed time runs; the phase still ends with one closing line."""
    import io
    import time

    from privfair.components.core import progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    with progress.reporting(out, enabled=True), progress.phase("validate"):
        time.sleep(3 * progress.TICK_S + 0.2)
    text = out.getvalue()
    assert text.count("▸") >= 4, text  # the first draw and at least three ticks
    assert text.count("✓") == 1 and text.endswith("\n")  # closed: no live line left
