"""privfair as parts of a user's own Airflow DAGs (issue 45), through the real CLI on a real
(SQLite) metadata DB: ``PrivfairTaskGroup`` after the user's upstream task and before their
downstream one, ``PrivfairReleaseOperator``, ``PrivfairCheckOperator``, ``@task.privfair`` and
the provider entry point.

The dags folder is a temporary one holding the README's example DAG (``customers``, from
``pipelines/examples/airflow_user_dag.py.txt`` beside its spec) and ``TASKS`` below. One module
fixture starts one ``airflow dags test`` per DAG, side by side, each in its own copy of the
migrated home (and its own ledger), and computes the ``privfair run --input`` and
``privfair.api.run`` references meanwhile. Airflow is never imported into the pytest process.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _airflow import Run, clone_home, dag_env
from _shared import published_versions, task_states

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "pipelines" / "examples"
SPEC = EXAMPLES / "customers_mdav.yaml"

# The user's other DAGs: the same upstream task (the example's rows), then a broken demand
# in a task group and in the operator; the operator on a file Asset; the check operator on a
# table that is not k-anonymous and on one that is; the decorator.
TASKS = '''
import os
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Asset, task

from privfair.airflow import PrivfairCheckOperator, PrivfairReleaseOperator, PrivfairTaskGroup

HERE = Path(__file__).parent
SPEC = HERE / "customers_mdav.yaml"
DATA = Path(os.environ["CUSTOMERS_DATA"])
STORE = Path(os.environ["PRIVFAIR_STORE"])
START = pendulum.datetime(2026, 1, 1, tz="UTC")
# the example's spec demanding what 300 rows cannot give
BROKEN = {
    "name": "customers_broken",
    "dataset": {"columns": {
        "age": {"role": "quasi_identifier", "kind": "numeric"},
        "region": {"role": "quasi_identifier", "kind": "nominal"},
        "sex": {"role": "protected", "kind": "binary", "favoured": 1},
        "churned": {"role": "label", "kind": "binary", "positive": 1},
    }},
    "component": {"name": "mdav", "params": {"k": 5}},
    "guarantees": [{"kind": "k_anonymity", "k": 400}],
}


def rows():
    """The example DAG's rows (its ``extract``)."""
    import random

    import pyarrow as pa

    rng = random.Random(7)
    data = [
        (rng.randint(18, 80), rng.choice("nesw"), rng.randint(0, 1), rng.randint(0, 1))
        for _ in range(300)
    ]
    age, region, sex, churned = (list(c) for c in zip(*data))
    return pa.table({"age": age, "region": region, "sex": sex, "churned": churned})


def write(name, table):
    import pyarrow.parquet as pq

    DATA.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, DATA / name)
    return str(DATA / name)


with DAG("user_broken", schedule=None, start_date=START, catchup=False):

    @task
    def extract() -> str:
        return write("customers.parquet", rows())

    @task
    def after_group() -> None:
        print("after_group ran")

    @task
    def after_operator() -> None:
        print("after_operator ran")

    up = extract()
    group = PrivfairTaskGroup(
        BROKEN, input="{{ ti.xcom_pull(task_ids='extract') }}", dataset="customers"
    )
    op = PrivfairReleaseOperator(
        task_id="release_broken",
        spec=BROKEN,
        input="{{ ti.xcom_pull(task_ids='extract') }}",
        store=str(STORE / "operator_broken"),
        dataset="customers",
    )
    missing = PrivfairReleaseOperator(
        task_id="release_missing",
        spec=SPEC,
        input=str(DATA / "no_such_file.parquet"),
        store=str(STORE / "operator_missing"),
    )
    up >> group >> after_group()
    up >> op >> after_operator()
    up >> missing


with DAG("user_tasks", schedule=None, start_date=START, catchup=False):

    @task
    def extract() -> str:
        return write("customers.parquet", rows())

    @task
    def tables() -> dict:
        import pyarrow as pa

        # 'zz-unique' is a region only one row has: a class of size 1
        bad = pa.table({"age": [30] * 5 + [41], "region": ["n"] * 5 + ["zz-unique"]})
        good = pa.table({"age": [30] * 5 + [41] * 5, "region": ["n"] * 5 + ["s"] * 5})
        return {"bad": write("bad.parquet", bad), "good": write("good.parquet", good)}

    @task
    def after_bad() -> None:
        print("after_bad ran")

    @task
    def after_good() -> None:
        print("after_good ran")

    @task.privfair(spec=SPEC, store=str(STORE / "decorator"), dataset="customers")
    def decorated():
        return rows().to_pandas()

    demand = [{"kind": "k_anonymity", "k": 5, "quasi_identifiers": ["age", "region"]}]
    checked = tables()
    bad = PrivfairCheckOperator(
        task_id="check_bad", table="{{ ti.xcom_pull(task_ids='tables')['bad'] }}", demands=demand
    )
    good = PrivfairCheckOperator(
        task_id="check_good",
        table=Asset(f"file://{DATA}/good.parquet"),
        demands=demand,
    )
    checked >> bad >> after_bad()
    checked >> good >> after_good()
    release = PrivfairReleaseOperator(
        task_id="release",
        spec=SPEC,
        input=Asset(f"file://{DATA}/customers.parquet"),
        store=str(STORE / "operator"),
        dataset="customers",
    )
    extract() >> release
    decorated()


# A DAG scheduled on the rows' own Asset: it runs whenever a producer updates the file. The
# Asset the operator above reads (one name per URI: Airflow deactivates an Asset whose URI
# another name holds, failing the task that reads it)
ROWS = Asset(f"file://{DATA}/customers.parquet")
with DAG("user_on_asset", schedule=[ROWS], start_date=START, catchup=False):
    PrivfairTaskGroup(SPEC, input=ROWS, store=str(STORE / "on_asset"), dataset="customers")
'''

SCHEDULE = """\
import json, sys
from airflow.dag_processing.dagbag import DagBag

dag = DagBag(dag_folder=sys.argv[1]).get_dag("user_on_asset")
ingest = dag.get_task("customers_mdav.ingest")
publish = dag.get_task("customers_mdav.publish")
print("SCHEDULE=" + json.dumps({
    "timetable": type(dag.timetable).__name__,
    "on": [getattr(a, "uri", str(a)) for a in dag.timetable.asset_condition.objects],
    "inlets": [getattr(a, "uri", str(a)) for a in ingest.inlets],
    "outlets": [getattr(a, "name", str(a)) for a in publish.outlets],
}))
"""


@pytest.fixture(scope="module")
def user(airflow_home, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("airflow_pluggable")
    dags = tmp / "dags"
    dags.mkdir()
    shutil.copy(SPEC, dags / SPEC.name)
    (dags / "customers.py").write_text((EXAMPLES / "airflow_user_dag.py.txt").read_text())
    (dags / "user_tasks.py").write_text(TASKS)
    runs, envs = {}, {}
    for dag_id in ("customers", "user_broken", "user_tasks"):
        env = dag_env(airflow_home, tmp / f"home_{dag_id}", dags, tmp / "runs" / dag_id)
        envs[dag_id] = env
        runs[dag_id] = Run(env, "dags", "test", dag_id)
    runs["providers"] = Run(
        clone_home(airflow_home, tmp / "home_providers"), "providers", "list", "-o", "json"
    )
    runs["errors"] = Run(
        clone_home(airflow_home, tmp / "home_errors"),
        "dags",
        "list-import-errors",
        "--local",
        "-o",
        "json",
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        CUSTOMERS_DATA=str(tmp / "data" / "errors"),
        PRIVFAIR_STORE=str(tmp / "store" / "errors"),
    )
    done = {k: r.result() for k, r in runs.items()}
    return {"done": done, "envs": envs, "tmp": tmp, "work": Path(airflow_home["PRIVFAIR_WORK_DIR"])}


def _references(tmp: Path, data: Path, monkeypatch) -> tuple[str, str]:
    """The versions ``privfair run SPEC --input FILE`` and ``privfair.api.run(SPEC, rows)``
    give on the file the DAG's upstream task wrote, in stores of their own."""
    import pyarrow.parquet as pq

    from privfair import api
    from privfair.cli import main

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp / "state_reference"))
    assert main(["run", str(SPEC), "--input", str(data), "--store", str(tmp / "ref_cli")]) == 0
    (cli_version,) = published_versions(tmp / "ref_cli", "customers_mdav")
    rel = api.run(SPEC, pq.read_table(data), store=tmp / "ref_api", dataset="customers")
    return cli_version, rel.version


def test_a_release_is_schedulable_on_its_inputs_asset(user):
    """``schedule=[rows]`` with the task group's ``input=rows``: the DAG is triggered by the
    rows' Asset, which its ``ingest`` reads (an inlet), and announces the release's Asset."""
    import subprocess

    from _airflow import AIRFLOW

    env = user["envs"]["user_tasks"]
    python = str(Path(AIRFLOW).with_name("python"))
    proc = subprocess.run(
        [python, "-c", SCHEDULE, env["AIRFLOW__CORE__DAGS_FOLDER"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = [x for x in proc.stdout.splitlines() if x.startswith("SCHEDULE=")]
    assert line, proc.stderr[-3000:]
    got = json.loads(line[0].removeprefix("SCHEDULE="))
    data = env["CUSTOMERS_DATA"]
    assert got["timetable"] == "AssetTriggeredTimetable", got
    assert got["on"] == [f"file://{data}/customers.parquet"], got
    assert got["inlets"] == [f"file://{data}/customers.parquet"], got
    assert got["outlets"] == ["privfair.customers_mdav"], got


def test_the_dags_import_without_errors(user):
    rc, log = user["done"]["errors"]
    assert rc == 0, log[-3000:]
    assert "No data found" in log or "[]" in log, log[-3000:]


def test_a_task_group_in_the_users_dag_publishes_privfair_runs_version(user, monkeypatch):
    """The README's example DAG: the user's ``extract`` writes the rows, the task group
    releases them, the user's ``report`` runs after it; the version is the one ``privfair run
    --input`` and ``api.run`` give on the same rows."""
    rc, log = user["done"]["customers"]
    assert rc == 0, log[-5000:]
    env = user["envs"]["customers"]
    states = task_states(env["AIRFLOW_HOME"], "customers")
    assert set(states.values()) == {"success"}, states
    assert sorted(states) == [
        "customers_mdav.cleanup",
        "customers_mdav.ingest",
        "customers_mdav.protect",
        "customers_mdav.publish",
        "customers_mdav.validate",
        "extract",
        "report",
    ]
    (version,) = published_versions(Path(env["PRIVFAIR_STORE"]), "customers_mdav")
    data = Path(env["CUSTOMERS_DATA"]) / "customers.parquet"
    assert f"input: {data.resolve()}" in log
    assert f"released customers_mdav {version}" in log  # the downstream task read the XCom
    cli_version, api_version = _references(user["tmp"], data, monkeypatch)
    assert version == cli_version == api_version
    man = json.loads(
        (Path(env["PRIVFAIR_STORE"]) / "customers_mdav" / version / "manifest.json").read_text()
    )
    assert man["validation"]["status"] == "passed"


def test_a_demand_that_cannot_hold_stops_the_group_and_what_follows(user):
    rc, log = user["done"]["user_broken"]
    assert rc != 0, log[-5000:]
    states = task_states(user["envs"]["user_broken"]["AIRFLOW_HOME"], "user_broken")
    assert states["extract"] == "success"
    assert states["customers_broken.validate"] == "failed", states
    assert states["customers_broken.publish"] == "upstream_failed"
    assert states["after_group"] == "upstream_failed"
    assert states["customers_broken.cleanup"] == "success"  # the teardown ran all the same
    assert "ContractViolation" in log and "k_anonymity" in log
    assert "after_group ran" not in log
    store = Path(user["envs"]["user_broken"]["PRIVFAIR_STORE"])
    assert published_versions(store, "customers_broken") == []
    assert list((store / "customers_broken" / ".quarantine").iterdir())


def test_the_operator_fails_on_a_broken_guarantee_naming_it(user):
    rc, log = user["done"]["user_broken"]
    states = task_states(user["envs"]["user_broken"]["AIRFLOW_HOME"], "user_broken")
    assert states["release_broken"] == "failed"
    assert states["after_operator"] == "upstream_failed"
    assert "AirflowFailException" in log
    assert "customers_broken: 1 guarantee(s) do not hold, nothing published" in log
    assert "after_operator ran" not in log
    store = Path(user["envs"]["user_broken"]["PRIVFAIR_STORE"]) / "operator_broken"
    assert published_versions(store, "customers_broken") == []


def test_the_operator_fails_on_a_missing_input_naming_it(user):
    rc, log = user["done"]["user_broken"]
    env = user["envs"]["user_broken"]
    assert task_states(env["AIRFLOW_HOME"], "user_broken")["release_missing"] == "failed"
    missing = Path(env["CUSTOMERS_DATA"]) / "no_such_file.parquet"
    assert f"customers_mdav: DataSourceError: input file '{missing}': not found" in log


def test_the_operator_releases_a_file_asset_with_privfair_runs_version(user, monkeypatch):
    rc, log = user["done"]["user_tasks"]
    env = user["envs"]["user_tasks"]
    states = task_states(env["AIRFLOW_HOME"], "user_tasks")
    assert states["release"] == "success", log[-5000:]
    (version,) = published_versions(Path(env["PRIVFAIR_STORE"]) / "operator", "customers_mdav")
    data = Path(env["CUSTOMERS_DATA"]) / "customers.parquet"
    cli_version, _ = _references(user["tmp"], data, monkeypatch)
    assert version == cli_version
    assert f"published: customers_mdav {version}" in log


def test_the_check_operator_fails_on_a_table_that_is_not_k_anonymous(user):
    rc, log = user["done"]["user_tasks"]
    assert rc != 0  # check_bad failed the run
    states = task_states(user["envs"]["user_tasks"]["AIRFLOW_HOME"], "user_tasks")
    assert states["check_bad"] == "failed", log[-5000:]
    assert states["after_bad"] == "upstream_failed"
    assert states["check_good"] == "success"
    assert states["after_good"] == "success"
    assert "1 of 1 demand(s) do not hold" in log
    assert "class(es) of sizes [1]" in log
    assert "zz-unique" not in log  # sizes, never values
    assert "after_bad ran" not in log and "after_good ran" in log


def test_the_decorator_releases_what_the_function_returns(user, monkeypatch):
    rc, log = user["done"]["user_tasks"]
    env = user["envs"]["user_tasks"]
    states = task_states(env["AIRFLOW_HOME"], "user_tasks")
    assert states["decorated"] == "success", log[-5000:]
    (version,) = published_versions(Path(env["PRIVFAIR_STORE"]) / "decorator", "customers_mdav")
    data = Path(env["CUSTOMERS_DATA"]) / "customers.parquet"
    _, api_version = _references(user["tmp"], data, monkeypatch)
    assert version == api_version


def test_no_work_file_outlives_the_runs(user):
    for dag_id in ("customers", "user_broken"):
        assert "cleanup" in json.dumps(task_states(user["envs"][dag_id]["AIRFLOW_HOME"], dag_id))
    left = [p for p in user["work"].rglob("*") if p.is_file()] if user["work"].exists() else []
    assert left == []


def test_the_provider_is_listed(user):
    rc, log = user["done"]["providers"]
    assert rc == 0, log[-3000:]
    (listing,) = [x for x in log.splitlines() if x.startswith("[{")]
    names = {p["package_name"]: p for p in json.loads(listing)}
    assert "privfair" in names, sorted(names)


def test_the_provider_info_is_valid_against_airflows_schema():
    import importlib.metadata as md

    import jsonschema

    from privfair.airflow.provider import get_provider_info

    airflow = Path(md.distribution("apache-airflow-core").locate_file("airflow"))
    schema = json.loads((airflow / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    (ep,) = [
        e
        for e in md.entry_points(group="apache_airflow_provider")
        if e.value.startswith("privfair")
    ]
    assert ep.load()() == info
    assert info["task-decorators"] == [
        {"name": "privfair", "class-name": "privfair.airflow.decorators.privfair_task"}
    ]


def test_the_readme_shows_the_example_as_the_tests_run_it():
    """README, "In your Airflow DAGs": the spec and the DAG file, as this module (and the
    packaging test, on the wheel) runs them."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## In your Airflow DAGs\n", 1)[1].split("\n## ", 1)[0]
    for name in ("airflow_user_dag.py.txt", "customers_mdav.yaml"):
        text = (EXAMPLES / name).read_text()
        assert text in section, name
