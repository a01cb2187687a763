"""A partitioned pipeline's current table (issue 43): ``latest`` is the last partition run, so
``privfair releases --current`` lists each partition's current release (the version ``latest``
names when it is of that partition, else the newest) and ``privfair.api.current`` reads them
as one table, each partition's shareable rows with its key in ``privfair_partition``."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from _partitioned import day_keys, write_days, write_spec
from _shared import read_latest, run_cli

from privfair import api

DAYS = day_keys(3)


def _version(out: str) -> str:
    return out.splitlines()[0].split()[2]


def test_each_partition_current_release_listed_and_read_as_one_table(tmp_path, capsys):
    csv = write_days(tmp_path, 3, rows=30)
    spec = str(write_spec(tmp_path, republish="allow"))
    store = tmp_path / "store"
    versions = {}
    for day in DAYS:
        code, out, err = run_cli(capsys, "run", spec, "--partition", day, "--store", str(store))
        assert code == 0, err
        versions[day] = _version(out)
    assert read_latest(store / "toy_daily") == versions[DAYS[-1]]  # latest: the last day only

    def listed() -> dict:
        code, out, err = run_cli(
            capsys, "releases", "--current", "--store", str(store), "toy_daily", "--json"
        )
        assert code == 0, err
        return {r["partition"]: r for r in json.loads(out)}

    assert {k: r["version"] for k, r in listed().items()} == versions
    table = api.current(store, "toy_daily")
    assert table.column_names[0] == "privfair_partition"
    parts = [
        pq.read_table(store / "toy_daily" / versions[d] / "shared" / "data.parquet") for d in DAYS
    ]
    assert table.num_rows == sum(t.num_rows for t in parts) == 90
    for day, part in zip(DAYS, parts, strict=True):
        rows = table.filter(pa.compute.equal(table["privfair_partition"], day))
        assert rows.drop_columns(["privfair_partition"]).to_pylist() == part.to_pylist()
    assert table.schema.field("x").metadata == parts[0].schema.field("x").metadata  # roles kept

    # the first day's rows change: its newer release is that partition's current one
    data = pacsv.read_csv(csv)
    first = pa.compute.equal(data["submitted"].cast(pa.string()), DAYS[0])
    x = pa.compute.if_else(first, pa.compute.add(data["x"], 1), data["x"])
    pacsv.write_csv(data.set_column(data.schema.get_field_index("x"), "x", x), csv)
    code, out, err = run_cli(capsys, "run", spec, "--partition", DAYS[0], "--store", str(store))
    assert code == 0, err
    newer = _version(out)
    assert newer != versions[DAYS[0]]
    # re-running the last day moves latest back to it: the first day's current stays the newer
    code, out, _ = run_cli(capsys, "run", spec, "--partition", DAYS[-1], "--store", str(store))
    assert out.startswith("exists:")
    now = listed()
    assert now[DAYS[0]]["version"] == newer and not now[DAYS[0]]["latest"]
    assert now[DAYS[-1]]["version"] == versions[DAYS[-1]] and now[DAYS[-1]]["latest"]
    # promote the older first day: latest names it, so it is that partition's current again
    code, _, err = run_cli(capsys, "promote", "toy_daily", versions[DAYS[0]], "--store", str(store))
    assert code == 0, err
    assert listed()[DAYS[0]]["version"] == versions[DAYS[0]]

    code, out, _ = run_cli(capsys, "releases", "--current", "--store", str(store))
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["pipeline", "partition", "version"]
    assert len(lines) == 4 and all(line.startswith("toy_daily ") for line in lines[1:])
    assert "(latest)" in lines[1] and versions[DAYS[0]] in lines[1]


def test_an_unpartitioned_pipeline_current_table_is_latest(tmp_path, capsys):
    write_days(tmp_path, 2, rows=30)
    spec = str(write_spec(tmp_path, name="toy_whole", partitions=None, schedule=None))
    store = tmp_path / "store"
    code, _, err = run_cli(capsys, "run", spec, "--store", str(store))
    assert code == 0, err
    latest = pq.read_table(store / "toy_whole" / "latest" / "shared" / "data.parquet")
    assert api.current(store, "toy_whole").equals(latest)
    code, out, _ = run_cli(capsys, "releases", "--current", "--store", str(store), "--json")
    (row,) = json.loads(out)
    assert row["partition"] is None and row["latest"]
    code, out, _ = run_cli(capsys, "releases", "--current", "--store", str(tmp_path / "none"))
    assert code == 0 and out.startswith("no releases")
