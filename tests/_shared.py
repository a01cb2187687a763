"""Constants shared by several test modules (imported as ``_shared``: tests/ is on sys.path)."""

from __future__ import annotations

from pathlib import Path

# Debian's chromium, with the flags this machine's closed network needs (no background calls).
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# A spec whose contract cannot hold: k = 10 fairlets cannot be 500-anonymous.
BROKEN_SPEC = """\
name: german_broken
description: German Credit through Fair-MDAV at k = 10, demanding 500-anonymity (cannot hold).
dataset: {name: german}
component:
  name: fair_mdav
  params: {k: 10, tau: 1.0}
guarantees:
  - {kind: k_anonymity, k: 500}
schedule: "@weekly"
"""

# The column roles of the small CSVs several pipeline tests write (x, c, PA, y).
TOY_COLUMNS = {
    "x": {"role": "quasi_identifier", "kind": "numeric"},
    "c": {"role": "quasi_identifier", "kind": "nominal"},
    "PA": {"role": "protected", "kind": "binary", "favoured": 1},
    "y": {"role": "label", "kind": "binary", "positive": 1},
}


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``privfair ARGV`` in-process: (exit code, stdout, stderr)."""
    from pipelines.cli import main

    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err
