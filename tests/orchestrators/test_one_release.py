"""One release either way (issue 45): the same spec and rows released through the six doors a
user has — ``privfair run --input``, ``privfair.api.run``, ``privfair.dagster.release_assets``,
the ``PrivfairRelease`` component, ``PrivfairReleaseOperator`` and ``PrivfairTaskGroup`` —
give one version id and byte-identical published files.

The rows are one Parquet file; the spec is the Airflow example's (``customers_mdav.yaml``: its
dataset gives only the roles). Each door publishes into its own store with its own ledger.
The two Airflow doors run as ``airflow dags test`` on a real (SQLite) metadata DB, in the
background while the other four run in this process. What is compared: the version, and the
bytes of every output and sidecar the owner's manifest lists and of the shareable copy's files
(the manifests themselves hold their publication time).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd
import pytest
from _airflow import Run, clone_home

from privfair import api

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "pipelines" / "examples" / "customers_mdav.yaml"
PIPELINE = "customers_mdav"

DAGS = """
import os
from pathlib import Path

import pendulum
from airflow.sdk import DAG

from privfair.airflow import PrivfairReleaseOperator, PrivfairTaskGroup

SPEC = Path(__file__).parent / "customers_mdav.yaml"
ROWS = os.environ["ONE_RELEASE_ROWS"]
START = pendulum.datetime(2026, 1, 1, tz="UTC")

with DAG("one_operator", schedule=None, start_date=START, catchup=False):
    PrivfairReleaseOperator(task_id="release", spec=SPEC, input=ROWS)

with DAG("one_group", schedule=None, start_date=START, catchup=False):
    PrivfairTaskGroup(SPEC, group_id="customers", input=ROWS)
"""


def _rows(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(45)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 80, n),
            "region": rng.choice(list("nesw"), n),
            "sex": rng.integers(0, 2, n),
            "churned": rng.integers(0, 2, n),
        }
    )


def _published(store: Path) -> tuple[str, dict[str, str]]:
    """The one version published in ``store`` and the sha256 of each published file but the
    manifests (outputs, sidecars, the shareable copy's data)."""
    folder = store / PIPELINE
    versions = [
        p for p in folder.iterdir() if p.is_dir() and not p.is_symlink() and p.name[0] != "."
    ]
    assert len(versions) == 1, [p.name for p in folder.iterdir()]
    release = versions[0]
    man = json.loads((release / "manifest.json").read_text())
    files = [o["file"] for o in (man.get("outputs") or {}).values()]
    files += [s["file"] for s in (man.get("sidecars") or {}).values()]
    files += [p.relative_to(release).as_posix() for p in (release / "shared").rglob("*.parquet")]
    assert files, man.keys()
    return release.name, {
        f: hashlib.sha256((release / f).read_bytes()).hexdigest() for f in sorted(set(files))
    }


@pytest.fixture(scope="module")
def doors(airflow_home, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("one_release")
    rows = tmp / "rows.parquet"
    _rows().to_parquet(rows, index=False)
    dags = tmp / "dags"
    dags.mkdir()
    shutil.copy(SPEC, dags / SPEC.name)
    (dags / "one_release.py").write_text(DAGS)
    runs = {}
    for dag_id in ("one_operator", "one_group"):
        env = {
            **clone_home(airflow_home, tmp / f"home_{dag_id}"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "PRIVFAIR_STORE": str(tmp / dag_id),
            "ONE_RELEASE_ROWS": str(rows),
            "XDG_STATE_HOME": str(tmp / "state" / dag_id),
        }
        runs[dag_id] = Run(env, "dags", "test", dag_id)
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("XDG_STATE_HOME", str(tmp / "state" / "cli"))
        from privfair.cli import main

        assert main(["run", str(SPEC), "--input", str(rows), "--store", str(tmp / "cli")]) == 0
        mp.setenv("XDG_STATE_HOME", str(tmp / "state" / "api"))
        api.run(SPEC, pd.read_parquet(rows), store=tmp / "api", dataset="customers")
        _dagster(tmp, rows, mp)
    finally:
        mp.undo()
    for dag_id, run in runs.items():
        rc, log = run.result()
        assert rc == 0, f"{dag_id}:\n{log[-4000:]}"
    return {door: _published(tmp / door) for door in DOORS}


DOORS = ("cli", "api", "factory", "component", "one_operator", "one_group")


def _dagster(tmp: Path, rows: Path, mp: pytest.MonkeyPatch) -> None:
    """The factory and the component, each materialised in process with the user's asset."""
    from privfair.dagster import PrivfairRelease, release_assets

    @dg.asset(name="customers")
    def customers() -> pd.DataFrame:
        return pd.read_parquet(rows)

    component = PrivfairRelease.from_attributes_dict(
        attributes={
            "spec": str(SPEC),
            "input": {"asset": "customers"},
            "store": str(tmp / "component"),
        }
    )
    built = {
        "factory": release_assets(SPEC, input=customers, store=str(tmp / "factory")),
        "component": component.build_defs(dg.ComponentTree.for_test().load_context),
    }
    for door, defs in built.items():
        mp.setenv("XDG_STATE_HOME", str(tmp / "state" / door))
        (tmp / f"dagster_{door}").mkdir()
        with dg.instance_for_test(temp_dir=str(tmp / f"dagster_{door}")) as instance:
            result = dg.materialize(
                [customers, *defs.assets], resources=defs.resources, instance=instance
            )
        assert result.success, door


def test_every_door_publishes_one_version(doors):
    versions = {door: doors[door][0] for door in DOORS}
    assert len(set(versions.values())) == 1, versions


def test_every_door_publishes_the_same_bytes(doors):
    reference = doors["cli"][1]
    assert "shared/data.parquet" in reference, sorted(reference)
    for door in DOORS[1:]:
        assert doors[door][1] == reference, door
