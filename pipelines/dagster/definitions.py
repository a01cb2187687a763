"""Dagster definitions generated from the pipeline specs (``defs``).

For every spec in ``$PRIVFAIR_SPECS_DIR`` (default ``pipelines/specs/*.yaml``), found when this
module is imported (a new YAML file adds a new asset graph, no code change):

* assets ``<spec>/raw_table`` -> ``<spec>/protected_table`` -> ``<spec>/release``, in the asset
  group ``<spec>``; their values are small dicts of Parquet/JSON paths written by the
  orchestrator-neutral steps of ``privfair.steps`` (the same ones the Airflow DAGs run);
* one **blocking** asset check per guarantee of the release, named from the algorithm's
  data-free outline plus the spec's demands (``privfair.spec.catalogue.check_keys``), on
  ``protected_table``, plus ``contract`` (every guarantee holds and the declared contract holds
  every required one). They run together: one Great Expectations validation of the candidate
  release (``privfair.run.flow.build_candidate``), each check taking the result with its key; a
  declared check without a result fails. A failed check quarantines the candidate and stops
  ``release``;
* run config on ``protected_table``, generated from the algorithm's ``Params`` model: every
  parameter optional (unset keeps the spec's value), validated by
  ``privfair.spec.catalogue.with_params``;
* resources ``privfair_data`` (raw-data folder; default ``$PRIVFAIR_DATA_DIR``),
  ``connections`` (``conn_id`` -> URI of a database source or lakehouse target; ``${VAR}`` in
  a URI from the environment),
  ``release_store`` (default ``$PRIVFAIR_STORE`` or ``releases``, relative to the current directory)
  and ``execution_engine`` (where blocks run: ``local`` or ``spark`` and its master; default
  ``$PRIVFAIR_ENGINE`` / ``$PRIVFAIR_SPARK_MASTER``, else each spec's ``execution``);
* a job ``<spec>_job`` over the group (and ``privfair_releases`` over every spec's group) and, when the spec has a schedule, ``<spec>_schedule``
  (created stopped: turn it on in the UI or with ``dagster schedule start``);
* an observable source asset ``<spec>/source`` upstream of ``raw_table``: its data version is
  the input's fingerprint (``flow.ReleasePlan.observe``, one read of the source), so the
  release shows as stale when the source changes; and a sensor ``<spec>_source_sensor``
  (created stopped) that observes the source and requests a run of ``<spec>_job`` when it
  changed (``run_key``: the fingerprint; its first tick only records what is there);
* for a spec with ``partitions`` (``partitions_def_of``): daily / weekly (Monday) / monthly
  partitions from ``start`` (to ``end``), static partitions for a key list, dynamic ones for
  ``keys: dynamic``, keyed as ``privfair.spec.partitions`` keys them. Its assets and checks are
  partitioned, a run releases ``context.partition_key`` (a partition's release is versioned
  by its own rows and idempotent: re-running an unchanged partition publishes nothing), the
  source's data versions are per partition (``DataVersionsByPartition``), the sensor
  requests one run per changed or new partition (``run_key`` ``<key>:<fingerprint>``; under
  ``keys: dynamic`` it adds the new keys first), and the schedule of a time partitioning is
  built from the partitioned job (``build_schedule_from_partitioned_job``: each period once it
  has ended; a key partitioning has none, whatever its ``schedule``). Which spec gets a
  schedule is ``privfair.spec.partitions.schedule_of``'s rule, the one Airflow's DAGs read: a
  time partitioning always (its ``schedule`` omitted or its granularity's cron, any other is
  a ``SpecError`` naming the spec file), a key partitioning never. Backfills: the UI's "Materialize" on the
  partitions, or ``dagster job backfill -j <spec>_job --from KEY --to KEY``. A partitioned
  spec stays out of ``privfair_releases`` (one job runs one partitioning);
* on each ``release`` materialisation, catalogue metadata (``privfair.release.catalog_metadata``):
  ``dagster/table_name`` ``privfair.<pipeline>.<output>`` and ``dagster/column_schema`` (each
  published column's type, role and the guarantees naming it), and, when the manifest has a
  ``ledger`` section, ``privfair/budget_spent`` / ``privfair/budget_remaining``;
* an asset ``<spec>/evaluation`` (``privfair evaluate`` on ``raw_table``: stratified folds,
  classifiers on protected vs raw training folds; run config ``grid``, ``folds``,
  ``classifiers``, ...) in its own group ``<spec>_evaluation``, outside the release job, so a
  scheduled release never waits for a grid; a release validated after it shows its trade-off
  plot.

The Dagster instance: ``DAGSTER_HOME``, which ``python -m privfair.orchestrate dagster-dev``,
the demo and the Makefile default to ``./.dagster_home`` (created on demand, with a
``dagster.yaml`` disabling telemetry; storage is Dagster's default SQLite under that folder).
Importing this module has no side effect on the environment. The work files of each run live
under ``<instance storage>/privfair/<spec>/<run_id>/``.

    python -m privfair.orchestrate dagster-dev -p 3000      # the UI on http://127.0.0.1:3000
    dagster asset materialize -m privfair.dagster.definitions --select 'key:<spec name>/*'

This module composes the face (``build_defs``, ``defs``) and keeps every name it had before the
face was split (issue 44), so ``from privfair.dagster.definitions import ...`` goes on working;
each part lives in the module named for it: ``resources`` (the resources and run config),
``translator`` (specs and records as metadata), ``partitions`` (partitions and the source's
data versions), ``assets`` (one spec's assets and checks, ``spec_definitions``), ``jobs`` (jobs
and schedules) and ``sensors`` (the source sensor).
"""

import os
from pathlib import Path

import dagster as dg

from privfair.dagster.assets import CONTRACT_CHECK, SpecAssets, spec_definitions
from privfair.dagster.jobs import RELEASES_JOB, releases_job
from privfair.dagster.partitions import (
    DATA_VERSION_TAG,
    known_keys,
    observe_source,
    partitions_def_of,
)
from privfair.dagster.resources import (
    Connections,
    EvaluationConfig,
    ExecutionEngine,
    ParamsConfig,
    PrivfairData,
    ReleaseStore,
    config_class,
)
from privfair.dagster.sensors import SENSOR_INTERVAL, source_sensor
from privfair.dagster.translator import column_schema, ledger_metadata
from privfair.spec.catalogue import load_specs

__all__ = [
    "CONTRACT_CHECK",
    "DATA_VERSION_TAG",
    "RELEASES_JOB",
    "SENSOR_INTERVAL",
    "Connections",
    "EvaluationConfig",
    "ExecutionEngine",
    "ParamsConfig",
    "PrivfairData",
    "ReleaseStore",
    "SpecAssets",
    "build_defs",
    "column_schema",
    "config_class",
    "defs",
    "known_keys",
    "ledger_metadata",
    "observe_source",
    "partitions_def_of",
    "source_sensor",
    "spec_definitions",
]


def build_defs(
    specs_dir: str | Path | None = None,
    store: str | None = None,
    data_dir: str | None = None,
) -> dg.Definitions:
    """Definitions for every spec in ``specs_dir`` (default ``$PRIVFAIR_SPECS_DIR`` or the
    shipped specs). ``store``/``data_dir`` preset the resources (default: from the env)."""
    parts: dict[str, list] = {
        "assets": [],
        "asset_checks": [],
        "jobs": [],
        "schedules": [],
        "sensors": [],
    }
    names = []
    for path, spec in load_specs(specs_dir):
        if spec.partitions is None:  # a job runs one partitioning: each partitioned spec its own
            names.append(spec.name)
        for key, items in spec_definitions(path, spec).items():
            parts[key] += items
    parts["jobs"].append(releases_job(names))
    return dg.Definitions(
        **parts,
        # One process per run: a spec's steps form a chain, and a subprocess per step would
        # spend longer importing pyarrow / Great Expectations than German takes to protect.
        executor=dg.in_process_executor,
        resources={
            "privfair_data": PrivfairData(
                data_dir=data_dir or os.environ.get("PRIVFAIR_DATA_DIR", "")
            ),
            "release_store": ReleaseStore(uri=store or os.environ.get("PRIVFAIR_STORE", "")),
            "connections": Connections(),
            "execution_engine": ExecutionEngine(
                engine=os.environ.get("PRIVFAIR_ENGINE", ""),
                master=os.environ.get("PRIVFAIR_SPARK_MASTER", ""),
            ),
        },
    )


defs = build_defs()
