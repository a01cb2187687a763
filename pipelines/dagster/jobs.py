"""The jobs and schedules of the Dagster face.

``spec_job``: ``<spec>_job`` over a spec's group; ``spec_schedules``: its ``<spec>_schedule``
when ``privfair.spec.partitions.schedule_of`` (the rule Airflow's DAGs read) gives it one;
``releases_job``: ``privfair_releases`` over every unpartitioned spec's group.

A job is an unresolved asset job (``dg.define_asset_job``), typed ``Any`` here: Dagster does
not export its class.
"""

from pathlib import Path
from typing import Any

import dagster as dg

from privfair.schemas.errors import SpecError
from privfair.schemas.spec import PipelineSpec
from privfair.spec.partitions import cron_of, schedule_note, schedule_of

RELEASES_JOB = "privfair_releases"  # every spec's release group, no evaluation asset


def spec_job(spec: PipelineSpec) -> Any:
    """``<spec>_job``: build, validate and publish the assets of the spec's group (so not its
    evaluation, which has a group of its own), tagged ``privfair/pipeline``."""
    name = spec.name
    note = schedule_note(spec)
    return dg.define_asset_job(
        f"{name}_job",
        selection=dg.AssetSelection.groups(name),
        description=f"Build, validate and publish {name}."
        + (f" The spec's {note}." if note else ""),
        tags={"privfair/pipeline": name},
    )


def spec_schedules(
    path: Path,
    spec: PipelineSpec,
    pdef: dg.PartitionsDefinition | None,
    job: Any,
) -> list:
    """The schedule of ``job`` (none, or ``<spec>_schedule``): a time partitioning's is built
    from the partitioned job (each period once it has ended), an unpartitioned spec's runs on
    its cron in UTC, a key partitioning has none. A schedule contradicting the rule is a
    ``SpecError`` naming the spec file ``path``."""
    name = spec.name
    # the rule Airflow reads too (``partitions.schedule_of``): a time partitioning's cadence is
    # its granularity's, a key partitioning has none, a contradicting schedule is refused
    try:
        cron = cron_of(schedule_of(spec))
    except SpecError as e:
        raise SpecError(e.key, e.rule, str(path)) from None
    if cron is None:
        return []
    if pdef is None:
        return [
            dg.ScheduleDefinition(
                name=f"{name}_schedule",
                job=job,
                cron_schedule=cron,
                execution_timezone="UTC",
                description=f"{name} on its spec schedule ({spec.schedule}).",
            )
        ]
    if isinstance(pdef, dg.TimeWindowPartitionsDefinition):
        # the partitions set the cadence: each tick releases the period just ended
        return [
            dg.build_schedule_from_partitioned_job(
                job,
                name=f"{name}_schedule",
                description=f"{name}: each {spec.partitions.granularity}'s partition once "
                "the period has ended.",
            )
        ]
    return []  # a key partitioning has no calendar: the source sensor starts its runs


def releases_job(names: list[str]) -> Any:
    """``privfair_releases``: the groups of the specs ``names`` (the unpartitioned ones: a job
    runs one partitioning), their evaluations left out."""
    return dg.define_asset_job(
        RELEASES_JOB,
        selection=dg.AssetSelection.groups(*names),
        description="Every unpartitioned spec's release (the evaluations are left out; a "
        "partitioned spec runs by partition in its own job).",
    )
