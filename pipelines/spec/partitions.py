"""Partitions of a spec's input (``PipelineSpec.partitions``): which rows a key selects, which
partitions a table covers, and the key of a moment in time.

A time partitioning keys each row by the first day of its period (``YYYY-MM-DD``: the day,
the Monday of its ISO week, the 1st of its month); a key partitioning by the column's value as
text. The same keys name Dagster's partitions, Airflow's data intervals and the ledger's blocks
(``privfair.budget.ledger``), so one partition means the same rows everywhere.

>>> import pyarrow as pa
>>> from privfair.schemas.spec import PartitionSpec
>>> part = PartitionSpec(column="day", granularity="week", start="2026-11-02")
>>> t = pa.table({"day": pa.array(["2026-11-04", "2026-11-09", "2026-11-08"]).cast(pa.date32())})
>>> keys_of(t, part)
['2026-11-02', '2026-11-09']
>>> select(t, part, "2026-11-02").num_rows
2
>>> check_key(part, "2026-11-03")
Traceback (most recent call last):
...
privfair.schemas.errors.SpecError: spec key '--partition': '2026-11-03' does not start a week (a Monday)
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc

from privfair.schemas.errors import InputError, SpecError
from privfair.schemas.spec import CRON_PRESETS, PartitionSpec, PipelineSpec, aligned

__all__ = [
    "CRON",
    "WHOLE",
    "check_key",
    "key_column",
    "key_for",
    "keys_of",
    "cron_of",
    "schedule_note",
    "schedule_of",
    "select",
    "window",
]

#: The one block of an input that is not partitioned (the ledger's key for "every row").
WHOLE = "*"

#: The cron of each granularity: one tick at the start of every period (UTC), so that an
#: orchestrator's data interval between two ticks is exactly one partition. Weeks tick on
#: Monday: cron's ``@weekly`` is Sunday-based and would straddle two partitions.
CRON = {"day": "0 0 * * *", "week": "0 0 * * 1", "month": "0 0 1 * *"}
#: The spellings of each granularity's cron a spec's ``schedule`` may use: the cron itself and
#: the presets that mean it (``@weekly`` is Sunday-based: not a week's).
_SAME_CRON = {
    g: {cron, *(p for p, c in CRON_PRESETS.items() if c == cron)} for g, cron in CRON.items()
}

_ALIGN = {"day": "a day", "week": "a week (a Monday)", "month": "a month (the 1st)"}


def check_key(part: PartitionSpec | None, key: str, where: str = "--partition") -> str:
    """``key`` when it names a partition of ``part``, else a ``SpecError`` naming ``where``
    and the rule (a time key is an ISO date starting its period, inside [start, end); a fixed
    key list must contain it; a dynamic key is any non-empty text)."""
    if part is None:
        raise SpecError(where, f"'{key}': the spec declares no partitions")
    if not isinstance(key, str) or not key:
        raise SpecError(where, "a partition key must be non-empty text")
    if part.granularity is not None:
        try:
            d = date.fromisoformat(key)
        except ValueError:
            raise SpecError(where, f"'{key}' is not an ISO date (YYYY-MM-DD)") from None
        if not aligned(d, part.granularity):
            raise SpecError(where, f"'{key}' does not start {_ALIGN[part.granularity]}")
        if d < part.start or (part.end is not None and d >= part.end):
            end = f" before {part.end}" if part.end is not None else ""
            raise SpecError(where, f"'{key}' is outside the partitions ({part.start}{end})")
    elif isinstance(part.keys, list) and key not in part.keys:
        raise SpecError(where, f"'{key}' is not one of the keys {part.keys}")
    return key


def key_column(table: pa.Table, part: PartitionSpec) -> pa.ChunkedArray:
    """Each row's partition key as text. ``InputError`` naming the column when it is missing,
    holds a null, or (time partitioning) is neither a date nor a timestamp nor ISO date text."""
    if part.column not in table.column_names:
        raise SpecError(
            "partitions.column", f"no column '{part.column}' in the input to partition on"
        )
    col = table.column(part.column)
    if col.null_count:
        raise InputError(
            part.column,
            f"{col.null_count} null value(s) in the partition column: every row must belong "
            "to one partition",
        )
    if part.granularity is None:
        return pc.cast(col, pa.string())
    t = col.type
    if pa.types.is_dictionary(t):
        col, t = col.cast(t.value_type), t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        try:
            col = pc.cast(col, pa.date32())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise InputError(
                part.column,
                "a time partitioning needs dates, timestamps or ISO date text (YYYY-MM-DD)",
            ) from None
    elif not (pa.types.is_date(t) or pa.types.is_timestamp(t)):
        raise InputError(
            part.column,
            f"a time partitioning needs dates, timestamps or ISO date text, not {t}",
        )
    floor = pc.floor_temporal(col, unit=part.granularity, week_starts_monday=True)
    return pc.cast(pc.cast(floor, pa.date32()), pa.string())


def keys_of(table: pa.Table, part: PartitionSpec | None) -> list[str]:
    """The sorted partition keys ``table``'s rows belong to (``[WHOLE]`` without partitions)."""
    if part is None:
        return [WHOLE]
    return sorted(pc.unique(key_column(table, part)).to_pylist())


def select(table: pa.Table, part: PartitionSpec, key: str) -> pa.Table:
    """The rows of partition ``key`` (possibly none), in the input's order."""
    return table.filter(pc.equal(key_column(table, part), key))


def key_for(part: PartitionSpec, when: datetime | date) -> str:
    """The key of the partition holding ``when`` (an Airflow data interval's start)."""
    d = when.date() if isinstance(when, datetime) else when
    if part.granularity == "week":
        d -= timedelta(days=d.weekday())
    elif part.granularity == "month":
        d = d.replace(day=1)
    elif part.granularity != "day":
        raise SpecError("partitions", "a key partitioning has no partition for a time")
    return d.isoformat()


def window(part: PartitionSpec, key: str) -> tuple[date, date]:
    """[start, end) of time partition ``key``."""
    d = date.fromisoformat(check_key(part, key))
    if part.granularity == "day":
        return d, d + timedelta(days=1)
    if part.granularity == "week":
        return d, d + timedelta(days=7)
    nxt = (d.replace(day=28) + timedelta(days=4)).replace(day=1)
    return d, nxt


def schedule_of(spec: PipelineSpec) -> str | None:
    """The schedule an orchestrator runs ``spec`` on: its own ``schedule`` without partitions,
    the granularity's cron (``CRON``) for a time partitioning (one run per partition), none for
    a key partitioning (a run is started per key). The one rule both orchestrators read:
    Dagster's schedule (``privfair.dagster.definitions``) and Airflow's timetable
    (``dags/privfair_dags.py``) come from here, never from ``spec.schedule`` itself.

    The granularity decides: a spec's ``schedule`` may be omitted or spell the same cron;
    any other schedule (``@weekly`` for weeks too: cron's week starts on Sunday) would cut
    runs across partitions and is a ``SpecError`` naming ``schedule`` (in both orchestrators).
    A key partitioning has no calendar, so a timed run would not know which key it releases:
    its ``schedule`` is accepted and not a timetable (``schedule_note`` says so; Dagster's
    source sensor and a run per key, Airflow's runs with ``{"partition": KEY}``, start its
    releases).

    >>> from privfair.schemas.spec import PipelineSpec
    >>> data = {"path": "x.csv", "columns": {"x": {"role": "quasi_identifier"}}}
    >>> base = {"name": "s", "dataset": data, "component": {"name": "mdav"}}
    >>> week = {"column": "day", "granularity": "week", "start": "2026-11-02"}
    >>> schedule_of(PipelineSpec(**base, partitions=week))
    '0 0 * * 1'
    >>> schedule_of(PipelineSpec(**base, partitions=week, schedule="@weekly"))
    Traceback (most recent call last):
    ...
    privfair.schemas.errors.SpecError: spec key 'schedule': '@weekly' runs across the partitions: a week partitioning runs on '0 0 * * 1' (each Monday 00:00 UTC); omit 'schedule' or give that
    """
    part = spec.partitions
    if part is None:
        return spec.schedule
    if part.granularity is None:
        return None
    cron = CRON[part.granularity]
    if spec.schedule is not None and spec.schedule not in _SAME_CRON[part.granularity]:
        first = {"day": "00:00 UTC", "week": "each Monday 00:00 UTC", "month": "the 1st 00:00 UTC"}
        raise SpecError(
            "schedule",
            f"'{spec.schedule}' runs across the partitions: a {part.granularity} partitioning "
            f"runs on '{cron}' ({first[part.granularity]}); omit 'schedule' or give that",
        )
    return cron


def schedule_note(spec: PipelineSpec) -> str | None:
    """Why the spec's own ``schedule`` is not what an orchestrator runs it on (None: it is,
    or there is none): a key partitioning's runs are started per key (``schedule_of``).

    >>> from privfair.schemas.spec import PipelineSpec
    >>> data = {"path": "x.csv", "columns": {"x": {"role": "quasi_identifier"}}}
    >>> keys = {"column": "x", "keys": ["a", "b"]}
    >>> spec = PipelineSpec(name="s", dataset=data, component={"name": "mdav"},
    ...                     partitions=keys, schedule="@daily")
    >>> schedule_of(spec) is None
    True
    >>> print(schedule_note(spec))  # doctest: +ELLIPSIS
    schedule '@daily' is not a timetable for a partitioning by the keys of 'x': ...
    """
    part = spec.partitions
    if part is None or part.granularity is not None or spec.schedule is None:
        return None
    return (
        f"schedule '{spec.schedule}' is not a timetable for a partitioning by the keys of "
        f"'{part.column}': each key is released by a run of its own (Dagster: the source "
        "sensor or a launch of the key's partition; Airflow: a run with conf "
        '{"partition": KEY})'
    )


def cron_of(schedule: str | None) -> str | None:
    """A schedule as a cron string (None: no schedule; ``@once`` has none).

    >>> cron_of("@daily"), cron_of("@once"), cron_of("*/5 * * * *")
    ('0 0 * * *', None, '*/5 * * * *')
    """
    if schedule is None:
        return None
    return CRON_PRESETS.get(schedule, schedule)
