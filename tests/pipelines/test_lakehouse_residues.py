"""What a lakehouse target keeps readable besides the releases it published (``privfair.release.targets``).

An attacker who reads the catalog (or the warehouse's files) must not be able to difference two
releases through what a run left behind: an audit branch of a run killed before its publish,
the snapshots of a branch that was dropped (readable by snapshot id until expired, and from an
older metadata file), a Delta staging table beside the target. An audit branch or staging table
exists only while its release runs: the next write to the target removes a stale one, expires
the snapshots only it reached and deletes their files; a release whose audit fails leaves no
snapshot outside ``main``'s history. ``targets.residues`` names what is left before that (the
ledger counts it as published). Table metadata carries no path of the store and no timing but
the commit time.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _partitioned import day_keys, write_days
from _shared import TOY_COLUMNS

from privfair.release import targets
from privfair.run import flow
from privfair.spec.catalogue import load_spec

ROOT = Path(__file__).resolve().parents[2]
TABLE = "privfair.toy_lake"
# a key that says how long something took, or when (other than the commit's own time)
TIMING = re.compile(r"time|duration|elapsed|seconds|_ms$|_ns$", re.IGNORECASE)


def _spec(folder: Path, target: dict | None = None, name: str = "toy_lake", **extra) -> Path:
    spec = {
        "name": name,
        "dataset": {
            "path": "submissions.csv",
            "columns": {**TOY_COLUMNS, "submitted": {"role": "ignored"}},
            "unlabelled": "drop",
        },
        "component": {"name": "mdav", "params": {"k": 5}},
        "target": target or {"kind": "iceberg"},
        "partitions": {"column": "submitted", "granularity": "day", "start": day_keys(1)[0]},
        **extra,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _catalog(store: Path):
    from pyiceberg.catalog.sql import SqlCatalog

    lake = store / ".lakehouse"
    return SqlCatalog(
        "privfair", uri=f"sqlite:///{lake / 'catalog.db'}", warehouse=(lake / "warehouse").as_uri()
    )


def _crash_before_publish(spec: Path, store: Path, partition: str) -> None:
    """A run killed between its audit-branch (staging-table) write and its publish."""
    code = (
        "from privfair.spec.catalogue import load_spec; from privfair.run.flow import run_release; "
        f"run_release(load_spec({str(spec)!r}), {str(store)!r}, crash_after='validate', "
        f"partition={partition!r})"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 17, proc.stderr


def _lineage(tbl, snapshot_id: int) -> set[int]:
    seen: set[int] = set()
    at = snapshot_id
    while at is not None and at not in seen:
        seen.add(at)
        snap = tbl.snapshot_by_id(at)
        at = snap.parent_snapshot_id if snap is not None else None
    return seen


def _readable_elsewhere(tbl, warehouse: Path) -> set[int]:
    """The snapshot ids a reader of the catalog or of the warehouse's metadata files finds
    that are neither in main's history nor tagged."""
    from pyiceberg.table import StaticTable

    main = _lineage(tbl, tbl.refs()["main"].snapshot_id)
    tagged = {r.snapshot_id for r in tbl.refs().values() if r.snapshot_ref_type.value == "tag"}
    ids = {s.snapshot_id for s in tbl.metadata.snapshots}
    for path in warehouse.rglob("*.metadata.json"):
        ids |= {s.snapshot_id for s in StaticTable.from_metadata(str(path)).metadata.snapshots}
    return ids - main - tagged


def _unreadable(tbl, snapshot_id: int) -> None:
    assert tbl.snapshot_by_id(snapshot_id) is None
    try:
        rows = tbl.scan(snapshot_id=snapshot_id).to_arrow().num_rows
    except Exception:
        return
    assert rows == 0


def _data_files(warehouse: Path) -> set[str]:
    return {p.name for p in warehouse.rglob("*.parquet")}


def _live_files(tbl) -> set[str]:
    """The data files some branch or tag of ``tbl`` reaches."""
    out = set()
    for ref in tbl.refs().values():
        for sid in _lineage(tbl, ref.snapshot_id):
            for task in tbl.scan(snapshot_id=sid).plan_files():
                out.add(Path(task.file.file_path).name)
    return out


def test_an_interrupted_iceberg_publish_leaves_nothing_readable_once_the_next_run_writes(tmp_path):
    write_days(tmp_path, 2)
    store = tmp_path / "store"
    spec = _spec(tmp_path)
    first, second = day_keys(2)
    _crash_before_publish(spec, store, first)
    tbl = _catalog(store).load_table(TABLE)
    (branch,) = [r for r in tbl.refs() if r.startswith("privfair-audit-")]
    stale = tbl.refs()[branch].snapshot_id
    assert tbl.scan(snapshot_id=stale).to_arrow().num_rows == 60  # what the attacker could read
    stale_files = _data_files(store / ".lakehouse") - _live_files(_without(tbl, branch))

    plan = flow.ReleasePlan.of(load_spec(spec), store, partition=second)
    found = targets.residues(plan.spec.target, plan)
    assert found == [f"{TABLE}@{branch}"]
    assert targets.release_of(found[0]) == branch.removeprefix("privfair-audit-")

    out = flow.run_release(load_spec(spec), store, partition=second)
    assert out.status == "published"
    tbl = _catalog(store).load_table(TABLE)
    assert not [r for r in tbl.refs() if r.startswith("privfair-audit-")]
    assert _readable_elsewhere(tbl, store / ".lakehouse" / "warehouse") == set()
    _unreadable(tbl, stale)
    assert stale_files and not stale_files & _data_files(store / ".lakehouse")
    assert set(tbl.scan().to_arrow()["privfair_partition"].to_pylist()) == {second}
    assert targets.residues(plan.spec.target, plan) == []


def _without(tbl, branch: str):
    """``tbl`` as if ``branch`` did not exist (for the files only it reaches)."""

    class View:
        def refs(self):
            return {r: ref for r, ref in tbl.refs().items() if r != branch}

        def __getattr__(self, name):
            return getattr(tbl, name)

    return View()


def test_a_release_failing_its_audit_leaves_no_snapshot_outside_main(tmp_path, monkeypatch):
    write_days(tmp_path, 2)
    store = tmp_path / "store"
    spec = _spec(tmp_path)
    first, second = day_keys(2)
    assert flow.run_release(load_spec(spec), store, partition=first).status == "published"

    dropped = []
    discard = targets.discard

    def spy(plan, written):
        tbl = _catalog(store).load_table(TABLE)
        dropped.append(tbl.refs()[written.ref].snapshot_id)
        discard(plan, written)

    rows = targets._rows
    monkeypatch.setattr(targets, "_rows", lambda t, p: rows(t, p).slice(1))  # loses a row
    monkeypatch.setattr(targets, "discard", spy)
    with pytest.raises(Exception, match="target.audit"):
        flow.run_release(load_spec(spec), store, partition=second)
    tbl = _catalog(store).load_table(TABLE)
    assert dropped and not [r for r in tbl.refs() if r.startswith("privfair-audit-")]
    assert _readable_elsewhere(tbl, store / ".lakehouse" / "warehouse") == set()
    _unreadable(tbl, dropped[0])
    assert _data_files(store / ".lakehouse") == _live_files(tbl)  # its files are gone too
    assert set(tbl.scan().to_arrow()["privfair_partition"].to_pylist()) == {first}


def test_a_stale_delta_staging_table_is_removed_before_the_next_write(tmp_path):
    from deltalake import DeltaTable

    write_days(tmp_path, 2)
    store = tmp_path / "store"
    spec = _spec(tmp_path, {"kind": "delta", "url": "lake/toy"})
    first, second = day_keys(2)
    _crash_before_publish(spec, store, first)
    (staging,) = (tmp_path / "lake").glob("toy__privfair_staging_*")
    assert DeltaTable(str(staging)).to_pyarrow_table().num_rows == 60

    plan = flow.ReleasePlan.of(load_spec(spec), store, partition=second)
    found = targets.residues(plan.spec.target, plan)
    assert found == [str(staging)]
    assert targets.release_of(found[0]) == staging.name.split("__privfair_staging_")[1]

    assert flow.run_release(load_spec(spec), store, partition=second).status == "published"
    assert not staging.exists()
    assert sorted(p.name for p in (tmp_path / "lake").iterdir()) == ["toy"]
    lake = DeltaTable(str(tmp_path / "lake" / "toy")).to_pyarrow_table()
    assert set(lake["privfair_partition"].to_pylist()) == {second}
    assert targets.residues(plan.spec.target, plan) == []


def _no_path_no_timing(where: str, data: dict, store: Path) -> None:
    text = json.dumps(data, default=str)
    for path in {str(store), str(store.resolve()), str(store.parent), "/tmp/"}:
        assert path not in text, f"{where} names {path}: {text[:300]}"

    def keys(value, at=""):
        if isinstance(value, dict):
            for k, v in value.items():
                yield f"{at}{k}"
                yield from keys(v, f"{at}{k}.")
        elif isinstance(value, list):
            for v in value:
                yield from keys(v, at)

    timed = [k for k in keys(data) if TIMING.search(k.rsplit(".", 1)[-1])]
    assert not timed, f"{where} has timing keys {timed}"


def test_table_metadata_names_no_path_of_the_store_and_no_timing(tmp_path):
    from deltalake import DeltaTable

    write_days(tmp_path, 2)
    store = tmp_path / "store"
    for key in day_keys(2):
        assert flow.run_release(load_spec(_spec(tmp_path)), store, partition=key).status
    tbl = _catalog(store).load_table(TABLE)
    _no_path_no_timing("the table properties", dict(tbl.properties), tmp_path)
    for snap in tbl.metadata.snapshots:
        summary = snap.summary.additional_properties if snap.summary else {}
        _no_path_no_timing(f"snapshot {snap.snapshot_id}'s summary", summary, tmp_path)
    docs = {f.name: f.doc for f in tbl.schema().fields}
    _no_path_no_timing("the column docs", docs, tmp_path)

    delta = _spec(tmp_path, {"kind": "delta", "url": "lake/toy"}, name="toy_delta")
    for key in day_keys(2):
        assert flow.run_release(load_spec(delta), store, partition=key).status
    dt = DeltaTable(str(tmp_path / "lake" / "toy"))
    for commit in dt.history():
        # the commit's own time is the one time a commit may carry; the table's creation
        # records where the table is (as any Delta writer does: its readers read it there)
        info = {k: v for k, v in commit.items() if k != "timestamp"}
        params = dict(info.get("operationParameters") or {})
        if info.get("operation") == "CREATE TABLE":
            assert params.pop("location").rstrip("/") == (tmp_path / "lake" / "toy").as_uri()
            params.pop("metadata")  # the metaData action's copy, checked below
        _no_path_no_timing(
            f"Delta commit {commit.get('version')}",
            {**info, "operationParameters": params},
            tmp_path,
        )
    meta = dt.metadata()
    _no_path_no_timing(
        "the Delta table's metadata",
        {"description": meta.description, "configuration": meta.configuration},
        tmp_path,
    )
