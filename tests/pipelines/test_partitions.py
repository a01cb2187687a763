"""Partitions of a spec's input: the keys, the rows a key selects, and one release per partition.

The rule under test (``privfair.spec.partitions``, ``ReleasePlan.partition``): a time partitioning
keys each row by the first day of its period, every row belongs to exactly one partition, a
partition's release is versioned by its key and its own rows (so an old partition keeps its
version when the source grows) and a re-run of it publishes nothing new.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pytest
from _partitioned import START, day_keys, day_rows, write_days, write_spec
from _shared import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from privfair.schemas.errors import InputError, SpecError
from privfair.schemas.spec import PartitionSpec
from privfair.spec.catalogue import load_spec, parse_spec
from privfair.spec.partitions import WHOLE, check_key, key_for, keys_of, select, window

DAY = PartitionSpec(column="d", granularity="day", start="2026-11-02")
WEEK = PartitionSpec(column="d", granularity="week", start="2026-11-02")
MONTH = PartitionSpec(column="d", granularity="month", start="2026-11-01")


def _dates(*iso: str) -> pa.Table:
    return pa.table({"d": pa.array([date.fromisoformat(s) for s in iso], pa.date32())})


# --- keys ----------------------------------------------------------------------------------------
def test_keys_start_their_period():
    t = _dates("2026-11-02", "2026-11-08", "2026-11-09", "2026-12-31")
    assert keys_of(t, DAY) == ["2026-11-02", "2026-11-08", "2026-11-09", "2026-12-31"]
    assert keys_of(t, WEEK) == ["2026-11-02", "2026-11-09", "2026-12-28"]
    assert keys_of(t, MONTH) == ["2026-11-01", "2026-12-01"]
    assert keys_of(t, None) == [WHOLE]


def test_timestamps_and_iso_text_key_like_dates():
    ts = pa.table({"d": pa.array([datetime(2026, 11, 4, 23, 59), datetime(2026, 11, 9, 0, 0)])})
    text = pa.table({"d": ["2026-11-04", "2026-11-09"]})
    assert keys_of(ts, WEEK) == keys_of(text, WEEK) == ["2026-11-02", "2026-11-09"]


def test_key_partitioning_keys_by_value():
    part = PartitionSpec(column="r", keys="dynamic")
    t = pa.table({"r": ["north", "south", "north"]})
    assert keys_of(t, part) == ["north", "south"]
    assert select(t, part, "north").num_rows == 2


@pytest.mark.parametrize(
    ("table", "rule"),
    [
        (pa.table({"d": pa.array([date(2026, 11, 2), None], pa.date32())}), "null value"),
        (pa.table({"d": ["2026-11-02", "yesterday"]}), "ISO date"),
        (pa.table({"d": [1.5, 2.5]}), "not double"),
    ],
)
def test_a_row_outside_every_partition_is_refused(table, rule):
    with pytest.raises(InputError, match=rule) as e:
        keys_of(table, DAY)
    assert e.value.column == "d"


def test_a_missing_partition_column_names_the_key():
    with pytest.raises(SpecError, match="partitions.column"):
        keys_of(pa.table({"x": [1]}), DAY)


@pytest.mark.parametrize(
    ("part", "key", "rule"),
    [
        (WEEK, "2026-11-03", "a Monday"),
        (MONTH, "2026-11-02", "the 1st"),
        (DAY, "2026-11-01", "outside"),
        (DAY, "02/11/2026", "ISO date"),
        (PartitionSpec(column="r", keys=["a", "b"]), "c", "not one of"),
        (None, "2026-11-02", "no partitions"),
    ],
)
def test_a_bad_key_names_the_option_and_the_rule(part, key, rule):
    with pytest.raises(SpecError, match=rule) as e:
        check_key(part, key)
    assert e.value.key == "--partition"


def test_key_for_a_moment_and_the_window_of_a_key():
    assert key_for(WEEK, datetime(2026, 11, 8, 12)) == "2026-11-02"
    assert key_for(MONTH, date(2026, 2, 14)) == "2026-02-01"
    assert window(MONTH, "2026-12-01") == (date(2026, 12, 1), date(2027, 1, 1))
    assert window(WEEK, "2026-11-02") == (date(2026, 11, 2), date(2026, 11, 9))


@settings(max_examples=60, deadline=None)
@given(
    days=st.lists(st.integers(0, 120), min_size=1, max_size=40),
    granularity=st.sampled_from(["day", "week", "month"]),
)
def test_partitions_cut_the_rows_exactly_once(days, granularity):
    """Every row lies in exactly one partition, and that partition's window holds its date."""
    part = PartitionSpec(column="d", granularity=granularity, start="2026-06-01")
    t = pa.table({"d": pa.array([date(2026, 6, 1) + timedelta(days=i) for i in days], pa.date32())})
    keys = keys_of(t, part)
    parts = [select(t, part, k) for k in keys]
    assert sum(p.num_rows for p in parts) == t.num_rows
    for k, p in zip(keys, parts, strict=True):
        lo, hi = window(part, k)
        assert p.num_rows > 0
        assert pc.all(pc.greater_equal(p["d"], pa.scalar(lo, pa.date32()))).as_py()
        assert pc.all(pc.less(p["d"], pa.scalar(hi, pa.date32()))).as_py()


# --- the spec ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("partitions", "rule"),
    [
        ({"column": "d"}, "exactly one of"),
        ({"column": "d", "granularity": "day"}, "needs 'start'"),
        ({"column": "d", "granularity": "week", "start": "2026-11-04"}, "a Monday"),
        ({"column": "d", "granularity": "hour", "start": "2026-11-04"}, "granularity"),
        ({"column": "d", "keys": ["a", "a"]}, "twice"),
        ({"column": "d", "keys": "dynamic", "start": "2026-11-02"}, "time partitioning"),
    ],
)
def test_a_bad_partitioning_is_a_spec_error(partitions, rule):
    raw = {
        "name": "p",
        "dataset": {"name": "german"},
        "component": {"name": "mdav", "params": {"k": 5}},
        "partitions": partitions,
    }
    with pytest.raises(SpecError, match=rule) as e:
        parse_spec(raw)
    assert e.value.key.startswith("partitions")


def test_budget_and_policy_are_not_part_of_the_version(tmp_path):
    base = {
        "name": "p",
        "dataset": {"name": "german"},
        "component": {"name": "mst", "params": {"epsilon": 1.0, "delta": 1e-9}},
    }
    with_budget = {**base, "budget": {"rho": 0.5}, "republish": "allow"}
    assert parse_spec(base).fingerprint() == parse_spec(with_budget).fingerprint()
    parted = {**base, "partitions": {"column": "d", "keys": "dynamic"}}
    assert parse_spec(parted).fingerprint() != parse_spec(base).fingerprint()


# --- one release per partition -------------------------------------------------------------------
def _manifest(store: Path, version: str) -> dict:
    return json.loads((store / "toy_daily" / version / "manifest.json").read_text())


def _version(out: str) -> str:
    return out.splitlines()[0].split()[-1]


def test_each_partition_is_a_release_and_a_rerun_publishes_nothing(tmp_path, capsys):
    write_days(tmp_path, 5)
    spec = write_spec(tmp_path)
    store = tmp_path / "store"
    versions = {}
    for key in day_keys(5):
        code, out, err = run_cli(
            capsys, "run", str(spec), "--store", str(store), "--partition", key
        )
        assert code == 0, err
        assert out.startswith("published:")
        versions[key] = _version(out)
        man = _manifest(store, versions[key])
        assert man["partition"] == key
        assert man["input"]["partition"] == key and man["input"]["blocks"] == [key]
        assert man["input"]["rows"] == 60
        assert man["validation"]["status"] == "passed"
        public = json.loads(
            (store / "toy_daily" / versions[key] / "shared/manifest.json").read_text()
        )
        assert public["partition"] == key
        assert "blocks" not in json.dumps(public)
    assert len(set(versions.values())) == 5
    folders = sorted(p.name for p in (store / "toy_daily").iterdir())
    code, out, _ = run_cli(
        capsys, "run", str(spec), "--store", str(store), "--partition", day_keys(1)[0]
    )
    assert code == 0 and out.startswith("exists:") and _version(out) == versions[day_keys(1)[0]]
    assert sorted(p.name for p in (store / "toy_daily").iterdir()) == folders
    release = store / "toy_daily" / versions["2026-11-03"]
    code, _, err = run_cli(capsys, "validate", str(release), "--data-dir", str(tmp_path))
    assert code == 0, err


def test_an_old_partition_keeps_its_version_when_the_source_grows(tmp_path, capsys):
    write_days(tmp_path, 2)
    spec = write_spec(tmp_path)
    store = tmp_path / "store"
    first = day_keys(1)[0]
    code, out, _ = run_cli(capsys, "run", str(spec), "--store", str(store), "--partition", first)
    before = _version(out)
    # a new day is appended to the source: the file (and its fingerprint) changes
    with open(tmp_path / "submissions.csv", "ab") as f:
        sink = pa.BufferOutputStream()
        pacsv.write_csv(
            day_rows(START + timedelta(days=2), 60), sink, pacsv.WriteOptions(include_header=False)
        )
        f.write(sink.getvalue().to_pybytes())
    code, out, _ = run_cli(capsys, "run", str(spec), "--store", str(store), "--partition", first)
    assert code == 0 and out.startswith("exists:") and _version(out) == before
    man = _manifest(store, before)
    assert man["input"]["source_fingerprint"] != man["input"]["fingerprint"]


def test_a_changed_partition_gets_a_new_version(tmp_path):
    from privfair.run.flow import ReleasePlan

    write_days(tmp_path, 2)
    spec = load_spec(write_spec(tmp_path))
    plan = ReleasePlan.of(spec, partition=day_keys(1)[0])
    v1 = plan.version(plan.ingest().input["fingerprint"])
    t = pacsv.read_csv(tmp_path / "submissions.csv")
    x = t["x"].to_pylist()
    x[0] += 1  # one row of the first day changes
    pacsv.write_csv(t.set_column(1, "x", pa.array(x)), tmp_path / "submissions.csv")
    v2 = plan.version(plan.ingest().input["fingerprint"])
    assert v1 != v2


def test_a_whole_table_run_covers_every_partition(tmp_path, capsys):
    write_days(tmp_path, 3)
    spec = write_spec(tmp_path)
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    assert code == 0, err
    man = json.loads((tmp_path / "s/toy_daily" / _version(out) / "manifest.json").read_text())
    assert man["input"]["blocks"] == day_keys(3)
    assert "partition" not in man and man["input"]["rows"] == 180


@pytest.mark.parametrize(
    ("key", "rule"),
    [("2026-11-20", "has no rows"), ("2026-11-01", "outside the partitions"), ("x", "ISO date")],
)
def test_a_partition_that_cannot_be_released_exits_2(tmp_path, capsys, key, rule):
    write_days(tmp_path, 2)
    spec = write_spec(tmp_path)
    code, _, err = run_cli(
        capsys, "run", str(spec), "--store", str(tmp_path / "s"), "--partition", key
    )
    assert code == 2 and rule in err and key in err
    assert not (tmp_path / "s" / "toy_daily").exists()


def test_partition_of_a_spec_without_partitions_exits_2(tmp_path, capsys):
    code, _, err = run_cli(
        capsys,
        "run",
        "pipelines/specs/german_fair_mdav.yaml",
        "--store",
        str(tmp_path),
        "--partition",
        "2026-11-02",
    )
    assert code == 2 and "declares no partitions" in err
