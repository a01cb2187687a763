"""Recurring releases on Airflow: a daily-partitioned spec's DAG, one ``airflow dags test`` per
logical date, through the real CLI on a real (SQLite) metadata DB.

One module fixture runs the toy daily spec (``tests/_partitioned.py``: 5 days of 60 rows) for
its 5 days in one Airflow home, re-runs one day, and meanwhile (in a copy of the home) lists
the import errors of a spec whose schedule contradicts its partitions. The dags folder is a
temporary one: the repository's DAG file (linked) plus a consumer DAG scheduled on the release
Asset, so the Asset's events and the consumer's queue are in the same DB. The first run has
OpenLineage on (file transport) when the ``openlineage`` extra is installed.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import sqlite3
import time
from pathlib import Path

import pytest
from _airflow import Run, clone_home
from _partitioned import day_keys, spec_text, write_days, write_spec
from _shared import read_latest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DAYS = day_keys(5)
RERUN = DAYS[2]
OPENLINEAGE = importlib.util.find_spec("airflow.providers.openlineage") is not None

CONSUMER = """
import pendulum
from airflow.sdk import Asset, dag, task


@dag(
    dag_id="toy_daily_consumer",
    schedule=[Asset.ref(name="privfair.toy_daily")],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
)
def consumer():
    @task
    def read(**context):
        for event in context["triggering_asset_events"].values():
            print(event)

    read()


consumer()
"""


def _files(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _port() -> str:
    """A free local port (the scheduler's log server; another test may hold Airflow's 8793)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def _query(env: dict[str, str], sql: str, *args) -> list[tuple]:
    with sqlite3.connect(Path(env["AIRFLOW_HOME"]) / "airflow.db") as db:
        return db.execute(sql, args).fetchall()


@pytest.fixture(scope="module")
def daily(airflow_home, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("airflow_partitions")
    specs, dags, store = tmp / "specs", tmp / "dags", tmp / "store"
    write_days(specs, 5, rows=60)
    write_spec(specs)
    write_spec(specs, name="toy_weekly", granularity="week", schedule=None)
    keys = {"column": "c", "keys": ["a", "b", "c"]}
    write_spec(specs, name="toy_keys", schedule=None, partitions=keys)
    dags.mkdir()
    # the repository's DAG file, linked: it finds the repository through its resolved path
    (dags / "privfair_dags.py").symlink_to(REPO / "dags" / "privfair_dags.py")
    (dags / "consumer.py").write_text(CONSUMER)
    settings = {
        "PRIVFAIR_SPECS_DIR": str(specs),
        "PRIVFAIR_STORE": str(store),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        # a paused consumer is not queued by an asset event
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
    }
    env = {**clone_home(airflow_home, tmp / "home"), **settings}

    # a spec whose schedule cuts across its partitions is an import error naming the file
    bad = tmp / "bad_specs"
    bad.mkdir()
    (bad / "toy_weekly.yaml").write_text(
        spec_text(name="toy_weekly", granularity="week", schedule="@weekly")
    )
    bad_env = {**clone_home(airflow_home, tmp / "home_bad"), **settings}
    errors = Run(
        bad_env, "dags", "list-import-errors", "--local", "-o", "json", PRIVFAIR_SPECS_DIR=str(bad)
    )

    # a key partitioning: the run's key comes from the conf, and only from there. Its rows
    # are the daily spec's, grouped otherwise: it runs as another owner (a ledger of its own),
    # or the owner's ledger would refuse it as a re-publication of released days
    keyed_owner = {"XDG_STATE_HOME": str(tmp / "state_keys")}
    by_key = {
        "keyed": Run(
            clone_home(airflow_home, tmp / "home_keyed"),
            "dags",
            "test",
            "toy_keys",
            "-c",
            json.dumps({"partition": "b"}),
            **{**settings, **keyed_owner, "PRIVFAIR_STORE": str(tmp / "store_keys")},
        ),
        "unkeyed": Run(
            clone_home(airflow_home, tmp / "home_unkeyed"),
            "dags",
            "test",
            "toy_keys",
            **{**settings, **keyed_owner, "PRIVFAIR_STORE": str(tmp / "store_unkeyed")},
        ),
    }

    lineage = tmp / "openlineage.jsonl"
    transport = {"type": "file", "log_file_path": str(lineage), "append": True}
    done, seconds = {}, {}
    try:
        for i, day in enumerate(DAYS):
            extra = {"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport)} if i == 0 else {}
            t0 = time.perf_counter()
            done[day] = Run(env, "dags", "test", "toy_daily", day, **extra).result()
            seconds[day] = time.perf_counter() - t0
        before = _files(store)
        t0 = time.perf_counter()
        done["rerun"] = Run(env, "dags", "test", "toy_daily", RERUN).result()
        seconds["rerun"] = time.perf_counter() - t0
        # The scheduler, briefly, with the released DAGs paused (their catchup would start):
        # it turns the consumer's queued asset events into a run.
        done["pause"] = Run(
            env, "dags", "pause", "--treat-dag-id-as-regex", "-y", "^toy_(daily|weekly|keys)$"
        ).result()
        t0 = time.perf_counter()
        done["scheduler"] = Run(
            env, "scheduler", "--num-runs", "3", AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT=_port()
        ).result(timeout=300)
        seconds["scheduler"] = time.perf_counter() - t0
    finally:
        done["errors"] = errors.result()
        done.update({k: r.result() for k, r in by_key.items()})
    print("seconds per dags test:", {k: round(v, 1) for k, v in seconds.items()})
    return {
        "env": env,
        "done": done,
        "store": store,
        "before_rerun": before,
        "lineage": lineage,
        "specs": specs,
        "tmp": tmp,
    }


def _releases(store: Path) -> dict[str, dict]:
    """Partition key -> owner manifest of every release of toy_daily."""
    out = {}
    for folder in sorted((store / "toy_daily").iterdir()):
        if not folder.is_symlink() and (folder / "manifest.json").is_file():  # not `latest`
            man = json.loads((folder / "manifest.json").read_text())
            assert man["partition"] not in out, f"two releases of {man['partition']}"
            out[man["partition"]] = man
    return out


def test_five_logical_dates_publish_five_validated_releases(daily):
    """``airflow dags test toy_daily <day>`` releases the partition starting at that day (its
    60 rows), validated; one release per partition, each with its own version."""
    for day in DAYS:
        rc, log = daily["done"][day]
        assert rc == 0, log[-5000:]
        assert f"partition: {day}" in log
        assert "published: toy_daily" in log
    releases = _releases(daily["store"])
    assert sorted(releases) == DAYS
    assert len({m["version"] for m in releases.values()}) == 5
    for day, man in releases.items():
        assert man["validation"]["status"] == "passed", day
        assert man["input"]["partition"] == day and man["input"]["blocks"] == [day]
        assert man["input"]["rows"] == 60, day
        shared = daily["store"] / "toy_daily" / man["version"] / "shared" / "manifest.json"
        assert json.loads(shared.read_text())["partition"] == day


def test_rerunning_a_partition_publishes_nothing_and_emits_no_event(daily):
    rc, log = daily["done"]["rerun"]
    assert rc == 0, log[-5000:]
    version = _releases(daily["store"])[RERUN]["version"]
    assert f"exists: toy_daily {version}" in log
    assert "is already published" in log  # publish skipped: no asset event
    after = _files(daily["store"])
    before = daily["before_rerun"]
    # only `latest` may move (a re-run points it at the version it produced)
    assert {k for k in after if not k.endswith("latest")} == {
        k for k in before if not k.endswith("latest")
    }
    assert {k: v for k, v in after.items() if not k.endswith("latest")} == {
        k: v for k, v in before.items() if not k.endswith("latest")
    }


def test_each_release_is_an_asset_event_that_queues_the_consumer(daily):
    """The publish task's outlet ``privfair.toy_daily`` gets one event per new release, whose
    extra names the version, partition and status; the re-run adds none. The scheduler starts
    the consumer DAG scheduled on the Asset (``Asset.ref(name="privfair.toy_daily")``)."""
    env = daily["env"]
    rows = _query(
        env,
        "SELECT a.uri, e.extra, e.source_dag_id FROM asset_event e JOIN asset a "
        "ON a.id = e.asset_id WHERE a.name = ? ORDER BY e.id",
        "privfair.toy_daily",
    )
    releases = _releases(daily["store"])
    assert [json.loads(extra)["partition"] for _, extra, _ in rows] == DAYS  # no 6th event
    for uri, extra, source in rows:
        extra = json.loads(extra)
        assert uri == "privfair://releases/toy_daily" and source == "toy_daily"
        assert extra["status"] == "published"
        assert extra["version"] == releases[extra["partition"]]["version"]
        assert extra["path"].endswith(f"toy_daily/{extra['version']}")
    # the events queued the consumer; the scheduler made that queue a run and emptied it
    rc, log = daily["done"]["scheduler"]
    assert rc == 0, log[-5000:]
    runs = _query(env, "SELECT run_type FROM dag_run WHERE dag_id = 'toy_daily_consumer'")
    assert runs == [("asset_triggered",)]
    assert _query(env, "SELECT target_dag_id FROM asset_dag_run_queue") == []


def test_the_dags_run_one_partition_per_period_from_the_first(daily):
    """The daily DAG ticks at midnight, the weekly one on Mondays (not cron's Sunday
    ``@weekly``); with catchup, the scheduler's first interval is the first partition."""
    rows = _query(
        daily["env"],
        "SELECT dag_id, timetable_summary, next_dagrun_data_interval_start, "
        "next_dagrun_data_interval_end FROM dag WHERE dag_id LIKE 'toy_%ly' ORDER BY dag_id",
    )
    summary = {r[0]: (r[1], r[2][:10], r[3][:10]) for r in rows}
    assert summary == {
        "toy_daily": ("0 0 * * *", "2026-11-02", "2026-11-03"),
        "toy_weekly": ("0 0 * * 1", "2026-11-02", "2026-11-09"),
    }


def test_a_schedule_across_the_partitions_is_an_import_error(daily):
    rc, log = daily["done"]["errors"]
    assert rc == 1, log[-3000:]
    assert "toy_weekly.yaml" in log and "spec key 'schedule'" in log, log[-3000:]
    assert "'0 0 * * 1'" in log


@pytest.mark.skipif(not OPENLINEAGE, reason="the openlineage extra is not installed")
def test_openlineage_file_transport_records_the_tasks(daily):
    """With ``AIRFLOW__OPENLINEAGE__TRANSPORT`` set (here: file), the run writes a START and a
    COMPLETE OpenLineage event per task; without it (the other runs) nothing is written."""
    events = [json.loads(x) for x in daily["lineage"].read_text().splitlines() if x.strip()]
    seen = {(e["job"]["name"], e["eventType"]) for e in events}
    for task_id in ("ingest", "protect", "validate", "publish", "cleanup"):
        assert (f"toy_daily.{task_id}", "START") in seen, sorted(seen)
        assert (f"toy_daily.{task_id}", "COMPLETE") in seen, sorted(seen)
    runs = {e["run"]["runId"] for e in events if e["job"]["name"] == "toy_daily.ingest"}
    assert len(runs) == 1  # only the first of the six runs had the transport


def test_a_key_partitioning_releases_the_key_given_in_the_conf(daily):
    """``-c '{"partition": "b"}'`` releases the rows whose ``c`` is ``b``; without a key the
    run fails at ingest (no retry), naming the conf key, and publishes nothing."""
    rc, log = daily["done"]["keyed"]
    assert rc == 0, log[-5000:]
    assert "partition: b" in log
    store = daily["tmp"] / "store_keys" / "toy_keys"
    version = read_latest(store)
    man = json.loads((store / version / "manifest.json").read_text())
    assert man["partition"] == "b" and man["validation"]["status"] == "passed"
    rc, log = daily["done"]["unkeyed"]
    assert rc == 1, log[-5000:]
    assert "spec key 'conf.partition'" in log and "action=fail" in log
    assert "starting task_id=publish" not in log
    assert not (daily["tmp"] / "store_unkeyed" / "toy_keys").exists()
