"""The source sensor of a spec: a run of ``<spec>_job`` when its source changes.

``source_sensor`` builds ``<spec>_source_sensor``; a tick reads the source once
(``partitions.observe_source``), compares its data versions with those in the cursor
(``_versions_now``, ``_tick``) and records and requests what changed.
"""

import json
from typing import Any

import dagster as dg

from privfair.dagster.partitions import DATA_VERSION_TAG, known_keys, observe_source
from privfair.dagster.resources import Connections, PrivfairData
from privfair.schemas.spec import PipelineSpec
from privfair.spec.partitions import WHOLE

SENSOR_INTERVAL = 300  # seconds between two reads of a source by its sensor


def source_sensor(
    spec: PipelineSpec,
    src_key: dg.AssetKey,
    pdef: dg.PartitionsDefinition | None,
    job: Any,
) -> dg.SensorDefinition:
    """``<spec>_source_sensor`` (created stopped): reads the source (``observe_source``, one
    read per tick), records the data versions that changed as observations of
    ``<spec>/source`` and requests a run of ``<spec>_job`` for each change: the whole input
    (``run_key`` its fingerprint) or each partition whose rows changed or appeared
    (``run_key`` ``<key>:<fingerprint>``). Its cursor holds the versions last seen; the
    first tick records them and requests nothing (backfill the partitions already there).
    Under ``keys: dynamic`` it first adds the keys new in the source as partitions. A run of
    an unchanged partition would publish nothing new anyway (its version exists)."""
    name = spec.name

    @dg.sensor(
        name=f"{name}_source_sensor",
        job=job,
        minimum_interval_seconds=SENSOR_INTERVAL,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description=f"Starts {name}_job when the source of {name} changes"
        + (" (one run per changed partition)." if pdef is not None else "."),
    )
    def sensor(
        context: dg.SensorEvaluationContext, privfair_data: PrivfairData, connections: Connections
    ):
        with connections.scope():
            whole, parts = observe_source(spec, privfair_data.resolved())
        now, added = _versions_now(pdef, whole, parts, context.instance)
        return _tick(src_key, pdef, whole, now, added, context.cursor)

    return sensor


def _versions_now(
    pdef: dg.PartitionsDefinition | None,
    whole: str,
    parts: dict[str, str],
    instance: dg.DagsterInstance,
) -> tuple[dict[str, str], list[str]]:
    """The data versions a tick compares (``WHOLE``'s, or each partition's: under
    ``keys: dynamic`` every key of the source, else only the partitions Dagster knows) and the
    dynamic keys to add first."""
    now = parts if pdef is not None else {WHOLE: whole}
    added: list[str] = []
    if isinstance(pdef, dg.DynamicPartitionsDefinition):
        added = sorted(set(now) - known_keys(pdef, instance))
    elif pdef is not None:
        now = {k: v for k, v in now.items() if k in known_keys(pdef, instance)}
    return now, added


def _tick(
    src_key: dg.AssetKey,
    pdef: dg.PartitionsDefinition | None,
    whole: str,
    now: dict[str, str],
    added: list[str],
    cursor: str | None,
) -> dg.SensorResult:
    """One tick's result: an observation of ``src_key`` and a run request per version of
    ``now`` not in ``cursor`` (none on the first tick, which only records them), the new
    cursor and the request adding the ``added`` dynamic partitions."""
    first = cursor is None
    seen = json.loads(cursor) if cursor else {}
    changed = {k: v for k, v in now.items() if seen.get(k) != v}
    events = [
        dg.AssetObservation(
            asset_key=src_key,
            partition=k if pdef is not None else None,
            tags={DATA_VERSION_TAG: v},
        )
        for k, v in changed.items()
    ]
    requests = (
        []
        if first
        else [
            dg.RunRequest(
                run_key=f"{k}:{v}" if pdef is not None else v,
                partition_key=k if pdef is not None else None,
                tags={"privfair/source_fingerprint": whole},
            )
            for k, v in changed.items()
        ]
    )
    return dg.SensorResult(
        run_requests=requests,
        skip_reason=None
        if requests
        else (
            f"first look at the source: {len(now)} version(s) recorded"
            if first
            else "the source has not changed"
        ),
        cursor=json.dumps(now, sort_keys=True),
        asset_events=events,
        dynamic_partitions_requests=[pdef.build_add_request(added)] if added else None,
    )
