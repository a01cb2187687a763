"""Fixtures of the orchestrator tests."""

from __future__ import annotations

import os
import subprocess

import pytest
from _airflow import AIRFLOW


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A migrated SQLite metadata DB in a temporary AIRFLOW_HOME; returns the CLI env."""
    from privfair.orchestrate import airflow_env

    tmp = tmp_path_factory.mktemp("airflow")
    base = dict(os.environ)
    # the developer's Airflow, spec folder and OpenLineage settings stay out of the tests
    drop = ("AIRFLOW", "PRIVFAIR_SPECS", "OPENLINEAGE")
    for k in [k for k in base if k.startswith(drop)]:
        del base[k]
    base["PRIVFAIR_CACHE_DIR"] = str(tmp / "cache")
    base["PRIVFAIR_WORK_DIR"] = str(tmp / "work")
    env = airflow_env(tmp / "home", base=base)
    proc = subprocess.run(
        [AIRFLOW, "db", "migrate"], env=env, cwd=tmp, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp / "home" / "airflow.db").is_file()
    return env
