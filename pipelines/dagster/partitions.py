"""A spec's partitions in Dagster and the data versions of its source.

``partitions_def_of`` keys Dagster's partitions exactly as ``privfair.spec.partitions`` keys a
spec's; ``known_keys`` are those Dagster knows now; ``observe_source`` reads the source once
for its fingerprint and each partition's, which ``source_versions`` turns into the data
versions of ``<spec>/source`` (and the source sensor into run requests).
"""

import dagster as dg

from privfair.schemas.errors import SpecError
from privfair.schemas.spec import PipelineSpec

DATA_VERSION_TAG = "dagster/data_version"  # the tag Dagster reads an observation's version from


def partitions_def_of(spec: PipelineSpec) -> dg.PartitionsDefinition | None:
    """The Dagster partitions of ``spec.partitions`` (None: not partitioned), keyed exactly as
    ``privfair.spec.partitions`` keys them: a time partition by the ISO date its period starts on
    (``%Y-%m-%d``, UTC; weeks start on Monday: ``day_offset=1``; months on the 1st), from
    ``start`` up to ``end`` excluded; a key partition by its value (a fixed list: static
    partitions; ``dynamic``: Dagster dynamic partitions named after the spec, which the source
    sensor adds as the source shows new keys)."""
    part = spec.partitions
    if part is None:
        return None
    if part.granularity is not None:
        when = {
            "start_date": part.start.isoformat(),
            "end_date": part.end.isoformat() if part.end is not None else None,
            "fmt": "%Y-%m-%d",
            "timezone": "UTC",
        }
        if part.granularity == "day":
            return dg.DailyPartitionsDefinition(**when)
        if part.granularity == "week":
            return dg.WeeklyPartitionsDefinition(day_offset=1, **when)
        return dg.MonthlyPartitionsDefinition(day_offset=1, **when)
    if part.keys == "dynamic":
        return dg.DynamicPartitionsDefinition(name=spec.name)
    try:
        return dg.StaticPartitionsDefinition(list(part.keys))
    except dg.DagsterInvalidDefinitionError as e:
        raise SpecError("partitions.keys", f"not usable as Dagster partition keys: {e}") from None


def known_keys(pdef: dg.PartitionsDefinition, instance: dg.DagsterInstance) -> set[str]:
    """The partition keys Dagster knows now (time partitions: up to the last complete period;
    dynamic: those added to ``instance``)."""
    if isinstance(pdef, dg.DynamicPartitionsDefinition):
        return set(instance.get_dynamic_partitions(pdef.name))
    return set(pdef.get_partition_keys())


def observe_source(spec: PipelineSpec, data_dir: str | None) -> tuple[str, dict[str, str]]:
    """The source's fingerprint and each partition's, from one read
    (``flow.ReleasePlan.observe``): the data versions of ``<spec>/source``. A source that cannot
    be read fails the observation with the reason (a ``dg.Failure``, no retry)."""
    from privfair.run.flow import ReleasePlan
    from privfair.schemas.errors import PrivfairError

    try:
        return ReleasePlan.of(spec, data_dir=data_dir).observe()
    except PrivfairError as e:
        raise dg.Failure(description=f"cannot observe the source of '{spec.name}': {e}") from None


def source_versions(
    context: dg.OpExecutionContext,
    name: str,
    pdef: dg.PartitionsDefinition | None,
    whole: str,
    parts: dict[str, str],
) -> dg.ObserveResult | dg.DataVersionsByPartition:
    """The data versions of ``<name>/source`` from ``observe_source``'s ``whole`` fingerprint
    and ``parts``: the whole input's (unpartitioned), else each known partition's. A key of
    the source that is no partition (yet) is logged as a warning, not versioned."""
    if pdef is None:
        return dg.ObserveResult(
            data_version=dg.DataVersion(whole), metadata={"source_fingerprint": whole}
        )
    known = known_keys(pdef, context.instance)
    unknown = sorted(set(parts) - known)
    if unknown:  # rows of a period not started yet, before start, or a key not added yet
        context.log.warning(
            f"{len(unknown)} partition key(s) in the source are not partitions of "
            f"{name} (yet): {unknown[:5]}"
        )
    return dg.DataVersionsByPartition(
        {k: dg.DataVersion(fp) for k, fp in parts.items() if k in known}
    )
