"""Dagster and Airflow read one schedule rule (``privfair.spec.partitions.schedule_of``, issue 43):
a key-partitioned spec with a ``schedule`` is accepted by both and scheduled by neither (its
releases are started per key), a time-partitioned one runs on its granularity's cron in both
(its ``schedule`` omitted or the same cron), and a schedule across the partitions is refused by
both, naming the spec file. The Airflow side parses the repository's DAG file in a DagBag."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _partitioned import write_days, write_spec

from privfair.schemas.errors import SpecError
from privfair.spec.partitions import CRON

REPO = Path(__file__).resolve().parents[2]

DAGBAG = """\
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
dags = {}
for dag_id, dag in bag.dags.items():
    tt = dag.timetable
    dags[dag_id] = {
        "timetable": type(tt).__name__,
        "expression": getattr(tt, "expression", None) or getattr(tt, "_expression", None),
        "doc": dag.doc_md,
    }
errors = {k: str(v) for k, v in bag.import_errors.items()}
print("DAGBAG=" + json.dumps({"dags": dags, "errors": errors}))
"""


def _specs(folder: Path) -> Path:
    specs = folder / "specs"
    specs.mkdir()
    write_days(specs, 2)
    # a key partitioning with the spec's schedule: Dagster loaded it, Airflow refused the file
    write_spec(
        specs, name="toy_keys", schedule="@daily", partitions={"column": "c", "keys": "dynamic"}
    )
    write_spec(specs, name="toy_daily", schedule=None)
    write_spec(specs, name="toy_weekly", granularity="week", schedule="0 0 * * 1")
    write_spec(specs, name="toy_whole", partitions=None, schedule="@weekly")
    return specs


def _dagbag(tmp: Path, specs: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PRIVFAIR_SPECS"))}
    env |= {
        "AIRFLOW_HOME": str(tmp / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "PRIVFAIR_SPECS_DIR": str(specs),
    }
    proc = subprocess.run(
        [sys.executable, "-c", DAGBAG, str(REPO / "dags")],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("DAGBAG="))
    return json.loads(line.removeprefix("DAGBAG="))


def test_both_orchestrators_read_one_schedule_rule(tmp_path):
    from privfair.dagster.definitions import build_defs

    specs = _specs(tmp_path)
    bag = _dagbag(tmp_path, specs)
    assert bag["errors"] == {}  # the DAG file imports with the key-partitioned spec
    dags = bag["dags"]
    assert set(dags) == {"toy_keys", "toy_daily", "toy_weekly", "toy_whole"}
    assert dags["toy_keys"]["timetable"] == "NullTimetable"
    assert "is not a timetable" in dags["toy_keys"]["doc"]
    for name, cron in (("toy_daily", CRON["day"]), ("toy_weekly", CRON["week"])):
        assert dags[name]["timetable"] == "CronDataIntervalTimetable"
        assert dags[name]["expression"] == cron

    defs = build_defs(specs, store=str(tmp_path / "store"))
    schedules = {s.name for s in defs.schedules or []}
    # the key partitioning is scheduled by neither; the time partitionings by both, on the
    # same cron (toy_daily's spec gives no schedule: its granularity does)
    assert schedules == {"toy_daily_schedule", "toy_weekly_schedule", "toy_whole_schedule"}
    assert "is not a timetable" in defs.resolve_job_def("toy_keys_job").description
    for name, cron in (("toy_daily", CRON["day"]), ("toy_weekly", CRON["week"])):
        assert defs.resolve_schedule_def(f"{name}_schedule").cron_schedule == cron
    assert defs.resolve_schedule_def("toy_whole_schedule").cron_schedule == "0 0 * * 0"


def test_a_schedule_across_the_partitions_is_refused_by_dagster_too(tmp_path):
    """Airflow's import error for it is ``test_airflow_partitions``' (a DAG file of its own)."""
    from privfair.dagster.definitions import build_defs

    specs = tmp_path / "specs"
    specs.mkdir()
    path = write_spec(specs, name="toy_weekly", granularity="week", schedule="@weekly")
    with pytest.raises(SpecError) as e:
        build_defs(specs, store=str(tmp_path / "store"))
    assert e.value.key == "schedule" and e.value.source == str(path)
    assert CRON["week"] in str(e.value)


def test_the_dags_folder_is_read_when_asked_not_at_import(tmp_path, monkeypatch):
    """privfair's Airflow defaults point at ``./dags`` of the directory a command runs in: a
    process that imported ``privfair.orchestrate`` elsewhere first still finds it."""
    from privfair import orchestrate

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PRIVFAIR_DAGS_FOLDER", raising=False)
    assert orchestrate.dags_folder() == tmp_path.resolve() / "dags"
    env = orchestrate.airflow_env(home=tmp_path / "home", base={"PATH": "/usr/bin"})
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == str(tmp_path.resolve() / "dags")
    assert orchestrate.dags_folder({"PRIVFAIR_DAGS_FOLDER": "x"}) == tmp_path.resolve() / "x"
