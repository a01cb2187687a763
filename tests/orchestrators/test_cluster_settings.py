"""A cluster's settings from the orchestrator faces (issue 46, item 3): the Dagster resource's
execution fields (set at launch, as the launchpad sets them), the component's ``execution``
attribute, a ``SparkSession`` handed to the resource, and Airflow's ``execution=`` and
``spark_conn_id=`` reach the Spark session that runs the release; where it runs never changes
the version; a bad setting or an unreachable master fails naming the key or the master.

A setting is read back from the session itself: ``SparkEngine.close`` (which every run calls
once its session has done the work) is wrapped to record, before it closes, the session's
master, its ``defaultParallelism`` and the test's ``spark.privfair.*`` settings. The spec is
the Airflow example's (``customers_mdav``, 300 rows) in blocks of 150 rows, so the grouping
and the validation run on Spark (``local[1]``).
"""

from __future__ import annotations

import json
import random
import shutil
import socket
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "pipelines" / "examples"

COLUMNS = {
    "age": {"role": "quasi_identifier", "kind": "numeric"},
    "region": {"role": "quasi_identifier", "kind": "nominal"},
    "sex": {"role": "protected", "kind": "binary", "favoured": 1},
    "churned": {"role": "label", "kind": "binary", "positive": 1},
}
SPEC = {
    "name": "customers_blocks",
    "dataset": {"columns": COLUMNS},
    "component": {"name": "mdav", "params": {"k": 5, "block_rows": 150}},
}
#: Few shuffle partitions: each is a task of a Python worker, and these blocks are small.
FEW = {"spark.sql.shuffle.partitions": "2"}


def rows():
    """The README's Airflow example rows (its ``extract``)."""
    import pyarrow as pa

    rng = random.Random(7)
    data = [
        (rng.randint(18, 80), rng.choice("nesw"), rng.randint(0, 1), rng.randint(0, 1))
        for _ in range(300)
    ]
    age, region, sex, churned = (list(c) for c in zip(*data, strict=True))
    return pa.table({"age": age, "region": region, "sex": sex, "churned": churned})


def _java() -> None:
    import os

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime: install it with .ci/deps")


@pytest.fixture
def sessions(monkeypatch) -> list[dict]:
    """What each Spark session a run used held when the run closed its engine."""
    from privfair.components.core import engine as engines

    seen: list[dict] = []
    close = engines.SparkEngine.close

    def recording(self) -> None:
        if self._session is not None:
            spark = self._session
            seen.append(
                {
                    "master": spark.sparkContext.master,
                    "parallelism": spark.sparkContext.defaultParallelism,
                    "face": spark.conf.get("spark.privfair.face", None),
                    "layer": spark.conf.get("spark.privfair.layer", None),
                    "owned": self._owned,
                }
            )
        close(self)

    monkeypatch.setattr(engines.SparkEngine, "close", recording)
    return seen


# --- Dagster -------------------------------------------------------------------------------------
def _people():
    import dagster as dg

    @dg.asset(key="people")
    def people():
        return rows().to_pandas()

    return people


def _component(execution: dict | None):
    import dagster as dg

    from privfair.dagster import PrivfairRelease

    attrs = {"spec": SPEC, "input": {"asset": "people"}}
    if execution is not None:
        attrs["execution"] = execution
    rel = PrivfairRelease.from_attributes_dict(attributes=attrs)
    return rel.build_defs(dg.ComponentTree.for_test().load_context)


def _materialise(defs, **kwargs):
    import dagster as dg

    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [_people(), *defs.assets],
            resources=defs.resources,
            instance=instance,
            raise_on_error=False,
            **kwargs,
        )
        failures = [
            e.step_failure_data.user_failure_data.description
            if e.step_failure_data.user_failure_data is not None
            else e.step_failure_data.error.message
            for e in result.get_step_failure_events()
        ]
        mats = result.asset_materializations_for_node("customers_blocks")
        path = mats[0].metadata["privfair/path"].value if mats else None
    return result.success, failures, path


def _manifest(path: str) -> dict:
    return json.loads((Path(path) / "manifest.json").read_text())


@pytest.mark.slow
def test_the_dagster_resource_set_at_launch_runs_the_release_on_its_spark(
    tmp_path, sessions, monkeypatch
):
    """The resource's execution fields given in the run's config (what the launchpad sends)
    over the component's ``execution`` attribute: the session that ran the blocks has the
    master and every setting of both (the resource's winning a setting both name), and the
    release has the version and the bytes of the same rows on the local engine."""
    from pyspark.sql import SparkSession

    _java()
    monkeypatch.setenv("PRIVFAIR_STORE", str(tmp_path / "local"))
    ok, failures, local = _materialise(_component({"engine": "local", "workers": 1}))
    assert ok, failures
    assert _manifest(local)["execution"]["engine"] == "local"

    fresh = SparkSession.getActiveSession() is None  # else Spark hands the run that session
    monkeypatch.setenv("PRIVFAIR_STORE", str(tmp_path / "spark"))
    defs = _component(
        {
            "engine": "spark",
            "conf": {
                "spark.privfair.layer": "component",
                "spark.privfair.face": "component",
                **FEW,
            },
        }
    )
    launch = {
        "master": "local[1]",
        "conf": {"spark.privfair.face": "launchpad", "spark.default.parallelism": "3"},
    }
    ok, failures, spark = _materialise(
        defs, run_config={"resources": {"privfair": {"config": launch}}}
    )
    assert ok, failures
    assert sessions, "the release started no Spark session"
    got = sessions[-1]
    assert (got["face"], got["layer"]) == ("launchpad", "component")
    man = _manifest(spark)
    assert man["execution"]["engine"] == "spark"
    if fresh:
        assert got["master"] == "local[1]" and got["parallelism"] == 3
        assert man["execution"] == {"engine": "spark", "master": "local[1]", "workers": 3}
    assert man["version"] == _manifest(local)["version"]
    assert (Path(spark) / "shared" / "data.parquet").read_bytes() == (
        Path(local) / "shared" / "data.parquet"
    ).read_bytes()


def test_a_session_given_to_the_resource_runs_the_release_and_is_left_running(
    tmp_path, sessions, spark_engine
):
    """``PrivfairResource(spark=...)`` with a resource holding a session as ``spark_session``
    (as dagster-pyspark's does): the release's engine is that very session (its master in
    the manifest), the resource's ``conf`` set on it, and the session is still usable once
    the run is over. (Unblocked, so that no block is sent: the test above runs blocks.)"""
    from privfair.dagster import release_assets
    from privfair.dagster.resources import PrivfairResource

    session = spark_engine.spark
    held = types.SimpleNamespace(spark_session=session)
    res = PrivfairResource(
        store=str(tmp_path / "store"), spark=held, conf={"spark.privfair.face": "session"}
    )
    unblocked = {**SPEC, "component": {"name": "mdav", "params": {"k": 5}}}
    ok, failures, path = _materialise(release_assets(unblocked, input="people", resource=res))
    assert ok, failures
    assert sessions and sessions[-1]["face"] == "session"
    assert sessions[-1]["owned"] is False
    assert session.conf.get("spark.privfair.face") == "session"
    assert session.range(3).count() == 3  # not stopped
    man = _manifest(path)
    assert man["execution"]["engine"] == "spark"
    assert man["execution"]["master"] == session.sparkContext.master


def test_bad_settings_of_the_resource_fail_naming_the_field():
    """A ``conf`` that is not a map of name to text is refused when the resource is built and
    when a run's config gives it; an unknown engine, a master Spark would not parse and a
    ``spark`` that holds no session fail the step naming the field and the rule; a component's
    bad ``execution`` fails when the project loads."""
    import dagster as dg
    import pydantic

    from privfair.dagster import release_assets
    from privfair.dagster.resources import PrivfairResource

    with pytest.raises(pydantic.ValidationError, match=r"conf\.`spark\.executor\.cores`"):
        PrivfairResource(conf={"spark.executor.cores": [2]})
    defs = release_assets(SPEC, input="people", resource=PrivfairResource())
    with pytest.raises(dg.DagsterInvalidConfigError, match=r"spark\.executor\.cores"):
        _materialise(
            defs,
            run_config={
                "resources": {"privfair": {"config": {"conf": {"spark.executor.cores": 2}}}}
            },
        )
    for res, named, rule in [
        (PrivfairResource(engine="dask"), "resources.privfair.config.engine", "unknown engine"),
        (
            PrivfairResource(engine="spark", master="spark//host:7077"),
            "resources.privfair.config.master",
            "not a Spark master URL",
        ),
        (
            PrivfairResource(engine="local", conf={"spark.executor.memory": "8g"}),
            "resources.privfair.config.engine",
            "'local' takes no Spark setting",
        ),
        (PrivfairResource(spark=object()), "resources.privfair.spark", "not a SparkSession"),
    ]:
        ok, failures, _ = _materialise(release_assets(SPEC, input="people", resource=res))
        assert not ok
        assert named in failures[0] and rule in failures[0], failures
    # Dagster's resolution error, naming the attribute, with privfair's rule
    with pytest.raises(Exception, match=r"attribute 'execution\.conf\.spark\.x': .* is text"):
        _component({"engine": "spark", "conf": {"spark.x": ["a"]}})
    with pytest.raises(Exception, match=r"attribute 'execution\.engine': unknown engine 'ray'"):
        _component({"engine": "ray"})


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_master_fails_the_step_naming_it(tmp_path):
    """A standalone master nothing listens on: the step fails at once (no JVM is started),
    its message naming the master and why, without a Java or Python stack."""
    import time

    from privfair.dagster import release_assets
    from privfair.dagster.resources import PrivfairResource

    _java()
    master = f"spark://127.0.0.1:{_closed_port()}"
    res = PrivfairResource(store=str(tmp_path / "store"), engine="spark", master=master)
    t0 = time.monotonic()
    ok, failures, _ = _materialise(release_assets(SPEC, input="people", resource=res))
    assert not ok and time.monotonic() - t0 < 60
    (message,) = failures
    assert master in message and "connection refused" in message, message
    assert "Traceback" not in message and "\tat " not in message and "py4j" not in message
    assert not (tmp_path / "store" / "customers_blocks").exists()


# --- Airflow -------------------------------------------------------------------------------------
def test_bad_execution_of_an_airflow_task_is_the_dags_import_error():
    """A setting the operator, the decorator or the task group cannot use fails when the DAG
    file is parsed, naming ``execution.<key>`` and the rule; a templated one waits for the
    run; ``spark_conn_id`` beside ``engine: local`` is a contradiction."""
    import pendulum
    from airflow.sdk import DAG, task

    from privfair.airflow import PrivfairReleaseOperator, PrivfairTaskGroup
    from privfair.schemas.errors import SpecError

    start = pendulum.datetime(2026, 1, 1, tz="UTC")
    with DAG("bad_execution", schedule=None, start_date=start):
        for bad, match in [
            ({"conf": {"spark.executor.cores": [2]}}, r"'execution\.conf\.spark\.executor\.cores'"),
            ({"conf": ["spark.executor.cores=2"]}, r"'execution\.conf': Spark settings: a map"),
            ({"engine": "dask"}, r"'execution\.engine': unknown engine 'dask'"),
            ({"master": "spark:/h:7077"}, r"'execution\.master': 'spark:/h:7077' is not a Spark"),
            ({"cluster": "big"}, r"'execution\.cluster': not an execution setting"),
            ({"workers": 0.5}, r"'execution\.workers'"),
        ]:
            with pytest.raises(SpecError, match=match):
                PrivfairReleaseOperator(task_id="r", spec=SPEC, execution=bad)
            with pytest.raises(SpecError, match=match):
                PrivfairTaskGroup(SPEC, group_id="g", execution=bad)
            with pytest.raises(SpecError, match=match):
                task.privfair(spec=SPEC, execution=bad)(rows)()
        with pytest.raises(SpecError, match=r"'execution\.engine': 'local' contradicts"):
            PrivfairReleaseOperator(
                task_id="c", spec=SPEC, execution={"engine": "local"}, spark_conn_id="spark"
            )
        op = PrivfairReleaseOperator(
            task_id="t", spec=SPEC, execution={"engine": "spark", "master": "{{ params.m }}"}
        )
    assert op.execution == {"engine": "spark", "master": "{{ params.m }}"}
    assert {"execution", "spark_conn_id"} <= set(op.template_fields)


def test_an_airflow_spark_connection_gives_the_master_and_the_settings(monkeypatch):
    """``spark_conn_id``: a ``spark`` connection's host and port are the master (a bare host:
    a standalone master), its extra ``conf`` (and ``queue``) Spark settings; a
    ``spark_connect`` one is an ``sc://`` URL; another type, a missing connection or a bad
    ``conf`` is refused naming ``spark_conn_id``."""
    from privfair.airflow.common import spark_connection, with_cluster
    from privfair.api import spec as make_spec
    from privfair.schemas.errors import SpecError

    conns = {
        "SPARK_HOST": {"conn_type": "spark", "host": "spark-master", "port": 7078,
                       "extra": {"queue": "etl", "conf": {"spark.executor.cores": 2}}},
        "SPARK_URL": {"conn_type": "spark", "host": "k8s://https://api:6443"},
        "SPARK_LOCAL": {"conn_type": "spark", "host": "local[1]",
                        "extra": {"conf": {"spark.executor.memory": "2g"}}},
        "SPARK_CONNECT": {"conn_type": "spark_connect", "host": "sc://connect", "login": "ann"},
        "SPARK_CLUSTER": {"conn_type": "spark", "host": "yarn",
                          "extra": {"deploy-mode": "cluster"}},
        "SPARK_BAD": {"conn_type": "spark", "host": "yarn", "extra": {"conf": {"a": {"b": 1}}}},
        "POSTGRES": {"conn_type": "postgres", "host": "db"},
    }  # fmt: skip
    for name, conn in conns.items():
        monkeypatch.setenv(f"AIRFLOW_CONN_{name}", json.dumps(conn))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_URI", "spark://spark-master:7077")
    assert spark_connection("spark_host") == {
        "engine": "spark",
        "master": "spark://spark-master:7078",
        "conf": {"spark.executor.cores": "2", "spark.yarn.queue": "etl"},
    }
    assert spark_connection("spark_uri")["master"] == "spark://spark-master:7077"
    assert spark_connection("spark_url")["master"] == "k8s://https://api:6443"
    assert spark_connection("spark_connect")["master"] == "sc://connect:15002/;user_id=ann"
    for conn_id, match in [
        ("spark_cluster", r"'spark_conn_id': .*deploy-mode 'cluster'"),
        ("spark_bad", r"'spark_conn_id=spark_bad\.extra\.conf\.a'"),
        ("postgres", r"'spark_conn_id': connection 'postgres' is of type 'postgres'"),
        ("nowhere", r"'spark_conn_id': no Airflow connection 'nowhere'"),
    ]:
        with pytest.raises(SpecError, match=match):
            spark_connection(conn_id)
    # the task's execution goes over the connection, over the spec: conf key by key
    s = make_spec(
        "layers",
        component="mdav",
        params={"k": 5},
        columns=COLUMNS,
        execution={"engine": "spark", "conf": {"spark.a": "spec", "spark.b": "spec"}},
    )
    eff = with_cluster(
        s, {"conf": {"spark.b": "task", "spark.executor.memory": "4g"}}, "spark_local"
    )
    assert eff.execution.master == "local[1]"
    assert eff.execution.conf == {
        "spark.a": "spec",
        "spark.b": "task",
        "spark.executor.memory": "4g",
    }


DAG_FILE = '''
import json
import os
import random
from pathlib import Path

import pendulum
from airflow.sdk import DAG, get_current_context, task

from privfair.airflow import PrivfairReleaseOperator, PrivfairTaskGroup
from privfair.components.core import engine as engines

SPEC = json.loads(os.environ["CLUSTER_SPEC"])
DATA = Path(os.environ["CUSTOMERS_DATA"])
STORE = Path(os.environ["PRIVFAIR_STORE"])
SEEN = Path(os.environ["CLUSTER_SEEN"])
_close = engines.SparkEngine.close


def _recording(self):
    """What the session that ran the task's blocks holds, read from it before it closes."""
    if self._session is not None:
        spark = self._session
        with SEEN.open("a") as f:
            f.write(json.dumps({
                "task": get_current_context()["ti"].task_id,
                "master": spark.sparkContext.master,
                "parallelism": spark.sparkContext.defaultParallelism,
                "face": spark.conf.get("spark.privfair.face", None),
            }) + "\\n")
    _close(self)


engines.SparkEngine.close = _recording


def rows():
    import pyarrow as pa

    rng = random.Random(7)
    data = [
        (rng.randint(18, 80), rng.choice("nesw"), rng.randint(0, 1), rng.randint(0, 1))
        for _ in range(300)
    ]
    age, region, sex, churned = (list(c) for c in zip(*data))
    return pa.table({"age": age, "region": region, "sex": sex, "churned": churned})


with DAG("cluster_settings", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         catchup=False, max_active_tasks=1):

    @task
    def extract() -> str:
        import pyarrow.parquet as pq

        DATA.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows(), DATA / "customers.parquet")
        return str(DATA / "customers.parquet")

    up = extract()
    operator = PrivfairReleaseOperator(
        task_id="operator",
        spec=SPEC,
        input="{{ ti.xcom_pull(task_ids='extract') }}",
        store=str(STORE / "operator"),
        dataset="customers",
        spark_conn_id="privfair_spark",
        execution={"conf": {"spark.privfair.face": "{{ ti.task_id }}"}},
    )
    group = PrivfairTaskGroup(
        SPEC,
        group_id="group",
        input="{{ ti.xcom_pull(task_ids='extract') }}",
        store=str(STORE / "group"),
        dataset="customers",
        execution={"engine": "spark", "master": "local[1]",
                   "conf": {"spark.privfair.face": "group", "spark.default.parallelism": "2",
                            "spark.sql.shuffle.partitions": "2"}},
    )
    up >> operator >> group
'''


@pytest.mark.slow
def test_airflow_tasks_run_the_release_where_the_dag_says(airflow_home, tmp_path, monkeypatch):
    """One ``airflow dags test``: the operator on an Airflow Connection (``spark_conn_id``,
    ``$AIRFLOW_CONN_PRIVFAIR_SPARK``: master ``local[1]``, extra ``conf``) with a templated
    ``execution``, then the task group with its own ``execution``. Each session that ran
    blocks has the master and the settings given (read from it), each manifest says so, and
    both releases have the version ``privfair.api.run`` gives the same rows on the local
    engine."""
    import pyarrow.parquet as pq
    from _airflow import Run, dag_env

    from privfair import api
    from privfair.spec.catalogue import parse_spec

    _java()
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "cluster_settings.py").write_text(DAG_FILE)
    store, seen = tmp_path / "store", tmp_path / "seen.jsonl"
    conn = {
        "conn_type": "spark",
        "host": "local[1]",
        "extra": {
            "conf": {
                "spark.default.parallelism": "3",
                "spark.privfair.face": "conn",
                "spark.sql.shuffle.partitions": "2",
            }
        },
    }
    env = dag_env(
        airflow_home,
        tmp_path / "home",
        dags,
        tmp_path,
        CLUSTER_SPEC=json.dumps(SPEC),
        CLUSTER_SEEN=str(seen),
        AIRFLOW_CONN_PRIVFAIR_SPARK=json.dumps(conn),
        PYSPARK_PYTHON=sys.executable,
    )
    rc, log = Run(env, "dags", "test", "cluster_settings").result()
    assert rc == 0, log[-6000:]
    got = {r["task"]: r for r in map(json.loads, seen.read_text().splitlines())}
    # the connection's master and settings, the task's templated setting over the
    # connection's
    assert got["operator"] == {
        "task": "operator",
        "master": "local[1]",
        "parallelism": 3,
        "face": "operator",
    }
    assert got["group.protect"]["face"] == "group"
    assert got["group.protect"]["parallelism"] == 2
    assert got["group.validate"]["face"] == "group"  # validated on the same settings
    mans = {
        name: json.loads(
            next((store / name / "customers_blocks").glob("*/manifest.json")).read_text()
        )
        for name in ("operator", "group")
    }
    assert mans["operator"]["execution"] == {"engine": "spark", "master": "local[1]", "workers": 3}
    assert mans["group"]["execution"] == {"engine": "spark", "master": "local[1]", "workers": 2}
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state_reference"))
    table = pq.read_table(tmp_path / "data" / "customers.parquet")
    local = api.run(
        parse_spec(SPEC),
        table,
        store=tmp_path / "ref",
        dataset="customers",
        execution={"workers": 1},
    )
    assert mans["operator"]["version"] == mans["group"]["version"] == local.version
