"""The README's Dagster launch command, as written: ``dg launch`` with a run-config override of a
parameter generated from the algorithm's Params, publishing into the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _shared import read_latest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_dg_launch_with_run_config_publishes(tmp_path):
    dg = Path(sys.executable).parent / "dg"
    if not dg.exists():
        pytest.skip("the dg CLI (dagster-dg-cli) is not installed")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "home"),
        "PRIVFAIR_STORE": str(tmp_path / "store"),
    }
    (tmp_path / "home").mkdir()
    config = {"ops": {"german_fair_mdav__protected_table": {"config": {"k": 20}}}}
    out = subprocess.run(
        [
            str(dg),
            "launch",
            "-m",
            "pipelines.definitions",
            "--assets",
            "key:german_fair_mdav/*",
            "--config-json",
            json.dumps(config),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    store = tmp_path / "store" / "german_fair_mdav"
    version = read_latest(store)
    man = json.loads((store / version / "manifest.json").read_text())
    assert man["params"]["k"] == 20  # the override reached the algorithm
    assert man["validation"]["status"] == "passed"
