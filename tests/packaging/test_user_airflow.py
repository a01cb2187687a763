"""A user's own Airflow project on the built wheel (issue 45, "Must show"): a fresh virtual
environment outside the repository with ``privfair[airflow]`` (the session fixture
``with_airflow``), a project folder of the user's with their DAG file (the README's example:
an upstream task writing the rows, ``PrivfairTaskGroup``, a downstream task), run by
``airflow dags test`` with an ``AIRFLOW_HOME`` of its own.

The release is published with the version ``privfair run --input`` gives in the same
environment; the same DAG on a spec demanding what the rows cannot give stops before
``publish`` and its downstream task does not run; ``airflow providers list`` shows privfair.
"""

from __future__ import annotations

import json

import pytest
from _shared import published_versions, task_states

from tests.packaging._venvs import REPO, Venv, empty_dir, explain, ok, run

pytestmark = pytest.mark.slow

EXAMPLES = REPO / "pipelines" / "examples"
DAG_FILE = "airflow_user_dag.py.txt"
SPEC_FILE = "customers_mdav.yaml"
STRICT = "guarantees:\n  - {kind: k_anonymity, k: 400}  # 300 rows: cannot hold\n"


@pytest.fixture(scope="module")
def project(with_airflow: Venv, tmp_path_factory) -> dict:
    """The user's project: the example DAG and spec as the wheel ships them, plus a strict
    variant; the metadata DB migrated; both DAGs run."""
    root = empty_dir(tmp_path_factory, "airflow-project")
    dags = root / "dags"
    dags.mkdir()
    shipped = with_airflow.site / "privfair" / "examples"
    dag_text = (shipped / DAG_FILE).read_text()
    spec_text = (shipped / SPEC_FILE).read_text()
    assert dag_text == (EXAMPLES / DAG_FILE).read_text()  # the wheel ships the README's text
    (dags / "customers.py").write_text(dag_text)
    (dags / SPEC_FILE).write_text(spec_text)
    strict = spec_text.replace("name: customers_mdav", "name: customers_strict") + STRICT
    (dags / "customers_strict.yaml").write_text(strict)
    (dags / "customers_strict.py").write_text(
        dag_text.replace('dag_id="customers"', 'dag_id="customers_strict"').replace(
            "customers_mdav", "customers_strict"
        )
    )
    home = root / "airflow_home"
    env = with_airflow.env(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        PRIVFAIR_STORE=str(root / "releases"),
        CUSTOMERS_DATA=str(root / "data"),
    )
    airflow = with_airflow.bin("airflow")
    ok(run([airflow, "db", "migrate"], cwd=root, env=env, timeout=900))
    return {
        "root": root,
        "home": home,
        "env": env,
        "customers": run([airflow, "dags", "test", "customers"], cwd=root, env=env, timeout=900),
        "strict": run(
            [airflow, "dags", "test", "customers_strict"], cwd=root, env=env, timeout=900
        ),
        "providers": run([airflow, "providers", "list", "-o", "json"], cwd=root, env=env),
    }


def test_the_users_dag_publishes_privfair_runs_version(project, with_airflow: Venv):
    proc = project["customers"]
    ok(proc)
    root = project["root"]
    states = task_states(project["home"], "customers")
    assert states and set(states.values()) == {"success"}, states
    assert "customers_mdav.publish" in states and "report" in states
    (version,) = published_versions(root / "releases", "customers_mdav")
    man = json.loads((root / "releases" / "customers_mdav" / version / "manifest.json").read_text())
    assert man["validation"]["status"] == "passed"
    out = proc.stdout + proc.stderr
    assert f"released customers_mdav {version}" in out, explain(proc)
    # the same rows through the CLI, in the same environment, into another store
    cli = ok(
        run(
            [
                with_airflow.bin("privfair"),
                "run",
                root / "dags" / SPEC_FILE,
                "--input",
                root / "data" / "customers.parquet",
                "--store",
                root / "cli_releases",
            ],
            cwd=root,
            env=project["env"],
        )
    )
    assert f"published: customers_mdav {version}" in cli.stdout, explain(cli)


def test_a_demand_that_cannot_hold_stops_the_downstream_task(project):
    proc = project["strict"]
    assert proc.returncode != 0, explain(proc)
    states = task_states(project["home"], "customers_strict")
    assert states["customers_strict.validate"] == "failed", states
    assert states["customers_strict.publish"] == "upstream_failed"
    assert states["report"] == "upstream_failed"
    assert published_versions(project["root"] / "releases", "customers_strict") == []


def test_airflow_lists_the_privfair_provider(project):
    proc = ok(project["providers"])
    (listing,) = [x for x in proc.stdout.splitlines() if x.startswith("[{")]
    providers = {p["package_name"]: p for p in json.loads(listing)}
    assert "privfair" in providers, sorted(providers)
