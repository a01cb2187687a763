"""Helpers of the Airflow tests: the ``airflow`` CLI of this environment, a copy of a migrated
home (one SQLite file per parallel run) with a DAG folder of its own, a CLI call in the background."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

AIRFLOW = str(Path(sys.executable).parent / "airflow")


def clone_home(env: dict[str, str], home: Path) -> dict[str, str]:
    """A copy of the migrated home, so independent CLI runs can go in parallel (one SQLite
    file each: no 'database is locked')."""
    shutil.copytree(env["AIRFLOW_HOME"], home, ignore=shutil.ignore_patterns("logs", "*.log"))
    # airflow.cfg names the original DB by absolute path: point the copy at its own file
    db = f"sqlite:///{home / 'airflow.db'}"
    return {**env, "AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db}


def dag_env(env: dict[str, str], home: Path, dags: Path, run: Path, **extra: str) -> dict[str, str]:
    """A cloned home (``clone_home``) whose DAGs are in ``dags`` and whose runs write below
    ``run``: the store, the example DAG's data and privfair's state, each of its own."""
    return {
        **clone_home(env, home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "PRIVFAIR_STORE": str(run / "store"),
        "CUSTOMERS_DATA": str(run / "data"),
        "XDG_STATE_HOME": str(run / "state"),
        **extra,
    }


class Run:
    """One ``airflow`` CLI call in the background; ``result()`` waits and returns rc, log."""

    def __init__(self, env: dict[str, str], *args: str, **extra: str) -> None:
        self.log_path = Path(env["AIRFLOW_HOME"]) / f"cli-{os.getpid()}-{id(self)}.log"
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [AIRFLOW, *args],
            env={**env, **extra},
            cwd=env["AIRFLOW_HOME"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def result(self, timeout: float = 900) -> tuple[int, str]:
        try:
            rc = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._log.close()
        return rc, self.log_path.read_text()
