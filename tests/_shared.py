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
