"""The README's "Tables in and out" quick start, run as printed on this clone."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _quick_start() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Tables in and out", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


@pytest.mark.slow
def test_the_quick_start_runs_as_printed():
    commands = _quick_start()
    assert len(commands) == 2 and all(c.startswith("uv run ") for c in commands)
    env = {**os.environ, "UV_FROZEN": "1"}
    for command in commands:
        proc = subprocess.run(
            shlex.split(command), cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
    out = proc.stdout.splitlines()[0].split()
    assert out[0] in {"published:", "exists:"} and out[1] == "german_sql_to_iceberg"
    release = ROOT / "releases" / out[1] / out[2]
    release_id = json.loads((release / "shared" / "manifest.json").read_text())["release"]
    from pyiceberg.catalog.sql import SqlCatalog

    lake = ROOT / "releases" / ".lakehouse"
    cat = SqlCatalog(
        "privfair", uri=f"sqlite:///{lake / 'catalog.db'}", warehouse=(lake / "warehouse").as_uri()
    )
    tbl = cat.load_table("privfair.german_sql_to_iceberg")
    assert tbl.refs()[f"privfair-{release_id}"].snapshot_id == tbl.current_snapshot().snapshot_id
