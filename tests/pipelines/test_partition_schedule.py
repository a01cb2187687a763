"""The schedule an orchestrator gives a partitioned spec (``privfair.spec.partitions.schedule_of``):
the granularity decides, a contradicting ``schedule`` is refused naming the key."""

from __future__ import annotations

from datetime import datetime

import pytest
import yaml
from _partitioned import spec_text

from privfair.schemas.errors import SpecError
from privfair.schemas.spec import PipelineSpec
from privfair.spec.partitions import CRON, key_for, schedule_note, schedule_of


def spec(**kw) -> PipelineSpec:
    data = yaml.safe_load(spec_text(**kw))
    if kw.get("granularity") == "month":
        data["partitions"]["start"] = "2026-11-01"
    return PipelineSpec(**data)


@pytest.mark.parametrize(
    ("granularity", "schedule"),
    [
        ("day", "@daily"),
        ("day", None),
        ("day", "0 0 * * *"),
        ("week", None),
        ("week", "0 0 * * 1"),
        ("month", "@monthly"),
        ("month", None),
    ],
)
def test_the_granularity_gives_the_cron(granularity, schedule):
    assert schedule_of(spec(granularity=granularity, schedule=schedule)) == CRON[granularity]


@pytest.mark.parametrize(
    ("granularity", "schedule"),
    [("week", "@weekly"), ("day", "@hourly"), ("day", "0 6 * * *"), ("month", "@daily")],
)
def test_a_schedule_across_the_partitions_is_refused(granularity, schedule):
    with pytest.raises(SpecError) as e:
        schedule_of(spec(granularity=granularity, schedule=schedule))
    assert e.value.key == "schedule" and CRON[granularity] in str(e.value)


def test_key_partitions_have_no_schedule():
    """Whatever the spec's schedule: both orchestrators start a run per key, and say why the
    schedule is not a timetable (``schedule_note``)."""
    keys = {"column": "c", "keys": ["a", "b"]}
    assert schedule_of(spec(schedule=None, partitions=keys)) is None
    assert schedule_note(spec(schedule=None, partitions=keys)) is None
    assert schedule_of(spec(schedule="@daily", partitions=keys)) is None
    assert "not a timetable" in schedule_note(spec(schedule="@daily", partitions=keys))


def test_without_partitions_the_spec_schedule_stays():
    assert schedule_of(spec(schedule="@weekly", partitions=None)) == "@weekly"
    assert schedule_of(spec(schedule=None, partitions=None)) is None


@pytest.mark.parametrize("granularity", ["day", "week", "month"])
def test_each_cron_tick_starts_its_own_partition(granularity):
    """A tick of the cron at 00:00 UTC is the start of the partition it keys: the interval
    from one tick to the next is one partition (Mondays for weeks, the 1st for months)."""
    minute, hour, dom, month, dow = CRON[granularity].split()
    assert (minute, hour, month) == ("0", "0", "*")
    tick = {"day": datetime(2026, 11, 4), "week": datetime(2026, 11, 9)}.get(
        granularity, datetime(2026, 12, 1)
    )
    assert key_for(spec(granularity=granularity).partitions, tick) == tick.date().isoformat()
    assert (dom, dow) == {"day": ("*", "*"), "week": ("*", "1"), "month": ("1", "*")}[granularity]
