"""Airflow DAGs built from privfair pipeline specs: one DAG per spec (dag_id = spec name).

Each DAG runs ``ingest -> protect -> validate -> publish -> cleanup``: one
``PrivfairTaskGroup`` (``privfair.airflow.task_group``, the group a user puts in a DAG of their
own) whose tasks keep these ids and read their settings from the run's params; the tasks call the orchestrator-neutral tasks of ``privfair.run.tasks`` and hand each other small dicts
of Parquet/JSON paths through XCom, never tables. ``validate`` builds the candidate release in the
store's staging area and checks every declared guarantee (Great Expectations); a failing
guarantee quarantines the candidate and fails the run without retries, so ``publish`` never runs.
``publish`` renames the validated candidate into ``<store>/<pipeline>/<version>`` atomically and is
idempotent: a re-run reports ``exists`` (``protect`` reuses the published files instead of
recomputing them, ``validate`` re-checks those files and stages nothing). The version id, the
release and its shareable copy are the ones ``privfair run`` produces. ``cleanup``, a teardown
task, removes the run's work folder when the run ends, whatever its outcome; no task keeps a
copy of the raw input (each reads the source and checks its fingerprint).

Recurring releases (a spec with ``partitions``): each run releases one partition, versioned by
its own rows, so a partition's release is idempotent like any other. A time partitioning's DAG
runs on a data-interval timetable on the granularity's cron (``privfair.spec.partitions.CRON``:
daily at 00:00 UTC, weekly on Mondays, monthly on the 1st), from ``partitions.start`` up to
``end``, with catchup; the spec's ``schedule`` may be omitted or name that cron, any other is an
import error naming the spec file (``partitions.schedule_of``, the rule Dagster's schedules
read too; a key partitioning is never scheduled, whatever its ``schedule``). A run's partition
is the period holding its logical date (a scheduled run's logical date is its data interval's
start; ``airflow dags test toy_daily 2026-11-02`` releases the day 2026-11-02), or the run conf's
``partition`` (a key partitioning's only way: ``-c '{"partition": "b"}'``).

Every ``publish`` task declares the outlet Asset ``privfair.<pipeline>`` (URI
``privfair://releases/<pipeline>``, whatever the store); a new release (status ``published``
or ``rebuilt``) records an asset event whose ``extra`` holds ``pipeline``, ``version``,
``partition`` (null without partitions), ``status`` and ``path``, so a DAG with
``schedule=[Asset.ref(name="privfair.<pipeline>")]`` runs on each new release. A re-run whose
version is already published skips ``publish`` (the log says ``exists``): no event, so no
consumer runs for a release it has seen. (The event carries no Airflow partition key: Airflow
would then queue only partition-aware consumers.)

OpenLineage (``pip install privfair[openlineage]``: the Airflow provider) is off unless a
transport is configured, e.g. ``AIRFLOW__OPENLINEAGE__TRANSPORT='{"type": "console"}'`` or
``'{"type": "file", "log_file_path": "/tmp/ol.jsonl", "append": true}'``; each task then emits
START/COMPLETE events (job ``<pipeline>.<task>``).

Adding a spec file to the specs folder adds a DAG; no code change. Parsing is light: only the
specs (YAML + pydantic) are read here; pyarrow, the components and Great Expectations are
imported inside the tasks.

Settings (environment of the scheduler / ``airflow dags test``):

* ``PRIVFAIR_SPECS_DIR``  spec folder (default: the example specs shipped with privfair)
* ``PRIVFAIR_STORE``      release store (default ``releases``, relative to the current directory)
* ``PRIVFAIR_DATA_DIR``   raw dataset files (default: the checked download cache)
* ``PRIVFAIR_WORK_DIR``   work files of each run (default ``$AIRFLOW_HOME/privfair_work``)

Per run (``airflow dags test <dag> -c '{...}'`` or trigger conf): ``partition`` (partitioned
specs only), ``store``, ``data_dir``,
``overrides`` (algorithm parameters, e.g. ``{"k": 20}``; validated by
``privfair.spec.catalogue.with_params``) and ``evaluate``: null (the default: the ``evaluate`` task
returns at once) or the options of ``privfair evaluate``, e.g. ``{"grid": "k=5,10", "folds": 5,
"classifiers": "lr,gnb"}``; it runs on the ingested table before ``validate``, so the report of
the release shows its trade-off plot.

Embedded defaults (``python -m privfair.orchestrate airflow ...`` sets them):
``AIRFLOW_HOME=./.airflow_home`` (SQLite metadata DB, migrated on first use),
``AIRFLOW__CORE__LOAD_EXAMPLES=False``, ``AIRFLOW__CORE__DAGS_FOLDER=./dags``.

    python -m privfair.orchestrate airflow dags test <spec name>
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG, CronDataIntervalTimetable, Param

from privfair.airflow.common import ASSET_URI, DEFAULT_ARGS, NO_RETRY, release_asset
from privfair.airflow.task_group import PrivfairTaskGroup
from privfair.schemas.errors import SpecError
from privfair.spec import partitions
from privfair.spec.catalogue import load_specs  # light: YAML, pydantic, descriptors

__all__ = [
    "ASSET_URI",
    "DEFAULT_ARGS",
    "NO_RETRY",
    "build_dag",
    "build_dags",
    "dag_args",
    "release_asset",
]


def _timing(spec, source: Path) -> dict:
    """The DAG's schedule, start, end and catchup.

    Without partitions: the spec's ``schedule`` from 2024-01-01, no catchup (as before). With a
    time partitioning: one run per partition, a data-interval timetable on the granularity's
    cron (``partitions.schedule_of``; a contradicting ``schedule`` is refused at parse, naming the
    spec file), from ``partitions.start`` to the last period before ``partitions.end``, with
    catchup (every partition since ``start`` is released). Each scheduled run's logical date is
    its period's start. With a key partitioning: no schedule (a run per key, by conf), whatever
    the spec's ``schedule`` says (``partitions.schedule_note``): Dagster reads the same rule."""
    try:
        cron = partitions.schedule_of(spec)
    except SpecError as e:
        raise SpecError(e.key, e.rule, str(source)) from None
    part = spec.partitions
    if part is None or part.granularity is None:
        start = pendulum.datetime(2024, 1, 1, tz="UTC")
        return {"schedule": cron, "start_date": start, "end_date": None, "catchup": False}

    def midnight(d):
        return pendulum.datetime(d.year, d.month, d.day, tz="UTC")

    return {
        "schedule": CronDataIntervalTimetable(cron, timezone="UTC"),
        "start_date": midnight(part.start),
        # a run is made for every interval starting at or before end_date: stop short of `end`
        "end_date": midnight(part.end) - timedelta(seconds=1) if part.end else None,
        "catchup": True,
    }


def dag_args(spec_path: Path, spec) -> dict:
    """The keyword arguments of the DAG of one spec (``airflow.sdk.DAG(**dag_args(...))``):
    ``dag_id`` = the spec's name, its schedule, start, end and catchup (``_timing``), one run
    at a time, ``DEFAULT_ARGS`` (``NO_RETRY``), tags, the run params the task group reads with
    ``run_conf=True`` (store, data_dir, overrides, execution, evaluate; partition for a
    partitioned spec) and a doc naming the spec file, component and schedule."""
    name = spec.name
    timing = _timing(spec, spec_path)
    asset = release_asset(name)
    doc = (
        f"**{name}** from `{spec_path}`\n\n{spec.description}\n\n"
        f"component `{spec.component.name}` {dict(spec.component.params)}; "
        f"schedule `{spec.schedule}`"
    )
    note = partitions.schedule_note(spec)  # the rule Dagster reads too
    if note is not None:
        doc += f" ({note})"
    params = {
        "store": Param(None, type=["null", "string"], description="release store"),
        "data_dir": Param(None, type=["null", "string"], description="raw data folder"),
        "overrides": Param({}, type="object", description="component parameter overrides"),
        "execution": Param(
            {},
            type="object",
            description="where the component's blocks run, over the spec's execution: "
            "{engine: 'spark', master: 'local[2]', workers: 2}; the version is the same",
        ),
        "evaluate": Param(
            None,
            type=["null", "object"],
            description="privfair evaluate options, e.g. {grid: 'k=5,10', folds: 5, "
            "classifiers: 'lr'}; null skips the evaluation",
        ),
    }
    if spec.partitions is not None:
        part = spec.partitions
        doc += (
            f"\n\npartitioned on `{part.column}` "
            + (f"by {part.granularity} from {part.start}" if part.granularity else "by key")
            + f"; each new release updates the Asset `{asset.name}` ({asset.uri})"
        )
        params["partition"] = Param(
            None,
            type=["null", "string"],
            description="the partition to release (a time partitioning: the ISO date starting "
            "its period; default: the run's logical date's period)",
        )

    return {
        "dag_id": name,
        "description": (spec.description or name).strip()[:200],
        "doc_md": doc,
        "schedule": timing["schedule"],
        "start_date": timing["start_date"],
        "end_date": timing["end_date"],
        "catchup": timing["catchup"],
        "max_active_runs": 1,
        "default_args": DEFAULT_ARGS,
        "tags": ["privfair", spec.component.name],
        "params": params,
    }


def build_dag(spec_path: Path, spec) -> DAG:
    """The DAG of one spec (``dag_args``): a ``PrivfairTaskGroup`` whose tasks keep their ids
    (``ingest``, ``protect``, ``validate``, ``publish``, ``cleanup``, ``evaluate``) and read
    their settings from the run's params."""
    with DAG(**dag_args(spec_path, spec)) as d:
        PrivfairTaskGroup(spec, group_id=spec.name, prefix_group_id=False, run_conf=True)
    return d


def build_dags(specs: str | Path | None = None) -> dict:
    """One DAG per spec of the folder ``specs`` (default ``$PRIVFAIR_SPECS_DIR``, else the
    shipped examples), by ``dag_<spec name>``: what a DAG file puts in its globals."""
    return {f"dag_{spec.name}": build_dag(path, spec) for path, spec in load_specs(specs)}
