"""Releases published to lakehouse tables by write-audit-publish (``target``, ``privfair.release.targets``).

An Iceberg target gets the release on an audit branch, validated from it, then ``main``
fast-forwarded and tagged in one commit; a Delta target gets a staging table, then one
overwrite commit with the release's metadata. What lands there is the shareable copy, never
the owner part; a release that fails validation or audit leaves ``main`` untouched.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import yaml
from _partitioned import day_keys, write_days
from _shared import TOY_COLUMNS, run_cli

from privfair.release import targets
from privfair.run import flow
from privfair.schemas.errors import StoreError
from privfair.spec.catalogue import load_spec

ROOT = Path(__file__).resolve().parents[2]


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


def _release(out: str) -> tuple[str, str]:
    _, name, version = out.splitlines()[0].split()
    return name, version


def _shared(store: Path, name: str, version: str) -> dict:
    return json.loads((store / name / version / "shared" / "manifest.json").read_text())


def test_iceberg_write_audit_publish(tmp_path, capsys):
    write_days(tmp_path, 2)
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "run", str(_spec(tmp_path)), "--store", str(store))
    assert code == 0, err
    name, version = _release(out)
    release_id = _shared(store, name, version)["release"]
    tbl = _catalog(store).load_table("privfair.toy_lake")
    refs = tbl.refs()
    assert set(refs) == {"main", f"privfair-{release_id}"}  # the audit branch is gone
    assert refs[f"privfair-{release_id}"].snapshot_id == tbl.current_snapshot().snapshot_id
    published = pq.read_table(store / name / version / "shared" / "data.parquet")
    lake = tbl.scan().to_arrow()
    assert targets._same_rows(lake, published, None)
    assert tbl.current_snapshot().summary["privfair.release"] == release_id
    assert version not in json.dumps(tbl.properties)  # the owner's version id stays with the owner
    assert json.loads(tbl.properties["privfair.contract"])
    docs = {f.name: f.doc for f in tbl.schema().fields}
    assert "quasi_identifier" in docs["x"] and "k_anonymity" in docs["x"]
    # a re-run publishes nothing new: main does not move
    code, out, _ = run_cli(capsys, "run", str(_spec(tmp_path)), "--store", str(store))
    assert out.startswith("exists:")
    assert _catalog(store).load_table("privfair.toy_lake").current_snapshot().snapshot_id == (
        refs["main"].snapshot_id
    )


def test_a_failed_validation_leaves_main_untouched(tmp_path, capsys):
    write_days(tmp_path, 2)
    store = tmp_path / "store"
    assert run_cli(capsys, "run", str(_spec(tmp_path)), "--store", str(store))[0] == 0
    before = _catalog(store).load_table("privfair.toy_lake")
    demand = [{"kind": "k_anonymity", "k": 500}]
    broken = _spec(tmp_path, name="toy_lake", guarantees=demand, republish="allow")
    code, _, err = run_cli(capsys, "run", str(broken), "--store", str(store))
    assert code == 1 and "k_anonymity" in err
    after = _catalog(store).load_table("privfair.toy_lake")
    assert after.current_snapshot().snapshot_id == before.current_snapshot().snapshot_id
    assert set(after.refs()) == set(before.refs())  # no branch left behind


def test_rows_that_differ_on_the_branch_fail_the_audit(tmp_path, capsys, monkeypatch):
    """The audit reads the branch back: a writer that loses a row is caught before main moves."""
    write_days(tmp_path, 2)
    store = tmp_path / "store"
    rows = targets._rows
    monkeypatch.setattr(targets, "_rows", lambda t, p: rows(t, p).slice(1))
    code, _, err = run_cli(capsys, "run", str(_spec(tmp_path)), "--store", str(store))
    assert code == 1 and "target.audit" in err and "quarantined" in err
    tbl = _catalog(store).load_table("privfair.toy_lake")
    assert tbl.scan().to_arrow().num_rows == 0 and set(tbl.refs()) == {"main"}
    assert not [p for p in (store / "toy_lake").iterdir() if not p.name.startswith(".")]


def test_a_run_killed_before_the_fast_forward_is_repaired(tmp_path):
    write_days(tmp_path, 2)
    store = tmp_path / "store"
    spec = _spec(tmp_path)
    code = (
        "import sys; from privfair.spec.catalogue import load_spec; from privfair.run.flow import "
        f"run_release; run_release(load_spec({str(spec)!r}), {str(store)!r}, crash_after='validate')"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 17, proc.stderr
    tbl = _catalog(store).load_table("privfair.toy_lake")
    assert any(r.startswith("privfair-audit-") for r in tbl.refs())  # written, not published
    assert tbl.scan().to_arrow().num_rows == 0  # readers of main see nothing
    out = flow.run_release(load_spec(spec), store)
    assert out.status == "published"
    tbl = _catalog(store).load_table("privfair.toy_lake")
    assert not any(r.startswith("privfair-audit-") for r in tbl.refs())
    assert tbl.scan().to_arrow().num_rows == 120


def test_two_releases_racing_to_one_table_one_wins_cleanly(tmp_path):
    """An audit branch exists only for the release writing it: the second write drops the
    first's branch (with its snapshots), so the first finds its branch gone at publish and
    publishes nothing; a release whose table's main moved since its write (not a
    fast-forward) publishes nothing either, and its branch's snapshots are expired."""
    write_days(tmp_path, 3)
    store = tmp_path / "store"
    spec = load_spec(
        _spec(
            tmp_path,
            partitions={"column": "submitted", "granularity": "day", "start": day_keys(1)[0]},
        )
    )

    def staged(key):
        plan = flow.ReleasePlan.of(spec, store, partition=key)
        ing = plan.ingest()
        version = plan.version(ing.input["fingerprint"])
        return plan, flow.stage(plan, ing, flow.protect(plan, ing), version)

    (plan_a, a), (plan_b, b) = staged(day_keys(2)[0]), staged(day_keys(2)[1])
    with pytest.raises(StoreError, match="is gone"):
        flow.publish(plan_a, a.cand)
    assert flow.publish(plan_b, b.cand)
    tbl = _catalog(store).load_table("privfair.toy_lake")
    assert set(tbl.scan().to_arrow()["privfair_partition"].to_pylist()) == {day_keys(2)[1]}
    assert not (store / "toy_lake" / a.cand.version).exists()

    plan_c, c = staged(day_keys(3)[2])
    tbl = _catalog(store).load_table("privfair.toy_lake")
    (branch,) = [r for r in tbl.refs() if r.startswith("privfair-audit-")]
    audit = tbl.refs()[branch].snapshot_id
    tbl.append(tbl.scan().to_arrow().slice(0, 0))  # another writer moves main
    with pytest.raises(StoreError, match="another run published"):
        flow.publish(plan_c, c.cand)
    tbl = _catalog(store).load_table("privfair.toy_lake")
    assert not any(r.startswith("privfair-audit-") for r in tbl.refs())
    assert tbl.snapshot_by_id(audit) is None  # expired: not readable by its id
    assert set(tbl.scan().to_arrow()["privfair_partition"].to_pylist()) == {day_keys(2)[1]}
    assert not (store / "toy_lake" / c.cand.version).exists()


def test_partitions_land_side_by_side(tmp_path, capsys):
    write_days(tmp_path, 3)
    store = tmp_path / "store"
    part = {"column": "submitted", "granularity": "day", "start": day_keys(1)[0]}
    spec = _spec(tmp_path, partitions=part)
    for key in day_keys(3) + day_keys(1):
        code, _, err = run_cli(capsys, "run", str(spec), "--store", str(store), "--partition", key)
        assert code == 0, err
    tbl = _catalog(store).load_table("privfair.toy_lake")
    lake = tbl.scan().to_arrow()
    assert sorted(set(lake["privfair_partition"].to_pylist())) == day_keys(3)
    assert lake.num_rows == 180
    assert sum(r.startswith("privfair-") for r in tbl.refs()) == 3  # one tag per release


def test_delta_target(tmp_path, capsys):
    from deltalake import DeltaTable

    write_days(tmp_path, 2)
    store = tmp_path / "store"
    spec = _spec(tmp_path, {"kind": "delta", "url": "lake/toy"})
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 0, err
    name, version = _release(out)
    release_id = _shared(store, name, version)["release"]
    dt = DeltaTable(str(tmp_path / "lake/toy"))
    published = pq.read_table(store / name / version / "shared" / "data.parquet")
    assert targets._same_rows(dt.to_pyarrow_table(), published, None)
    assert dt.history(1)[0]["privfair.release"] == release_id
    assert not list((tmp_path / "lake").glob("*staging*"))
    before = dt.version()
    demand = [{"kind": "k_anonymity", "k": 500}]
    broken = _spec(
        tmp_path, {"kind": "delta", "url": "lake/toy"}, guarantees=demand, republish="allow"
    )
    assert run_cli(capsys, "run", str(broken), "--store", str(store))[0] == 1
    assert DeltaTable(str(tmp_path / "lake/toy")).version() == before
    assert not list((tmp_path / "lake").glob("*staging*"))


def test_a_target_never_gets_the_owner_part(tmp_path, capsys):
    write_days(tmp_path, 2)
    store = tmp_path / "store"
    run_cli(capsys, "run", str(_spec(tmp_path)), "--store", str(store))
    tbl = _catalog(store).load_table("privfair.toy_lake")
    assert set(tbl.schema().as_arrow().names) == {"x", "c", "PA", "y"}  # no lineage, no ids
    text = json.dumps({**tbl.properties, **tbl.current_snapshot().summary.additional_properties})
    assert "submissions.csv" not in text and "fingerprint" not in text


def test_a_published_table_reads_back_with_its_roles(tmp_path, capsys):
    """The column docs a target writes are roles a later spec can read the table with."""
    write_days(tmp_path, 2)
    store = tmp_path / "store"
    assert run_cli(capsys, "run", str(_spec(tmp_path)), "--store", str(store))[0] == 0
    lake = store / ".lakehouse"
    downstream = {
        "name": "toy_downstream",
        "dataset": {
            "source": {
                "kind": "iceberg",
                "catalog": f"sqlite:///{lake / 'catalog.db'}",
                "warehouse": (lake / "warehouse").as_uri(),
                "table": "privfair.toy_lake",
            }
        },
        "component": {"name": "mdav", "params": {"k": 10}},
    }
    (tmp_path / "down.yaml").write_text(yaml.safe_dump(downstream))
    code, out, err = run_cli(
        capsys, "run", str(tmp_path / "down.yaml"), "--store", str(tmp_path / "s2")
    )
    assert code == 0, err
    name, version = _release(out)
    man = json.loads((tmp_path / "s2" / name / version / "manifest.json").read_text())
    assert man["validation"]["status"] == "passed"
    kanon = [g for g in man["contract"] if g["kind"] == "k_anonymity"]
    assert kanon and all(set(g["quasi_identifiers"]) == {"x", "c"} for g in kanon)


def test_a_source_without_roles_anywhere_names_the_key(tmp_path, capsys):
    from deltalake import write_deltalake

    write_days(tmp_path, 1)
    write_deltalake(str(tmp_path / "d"), pacsv.read_csv(tmp_path / "submissions.csv"))
    spec = {
        "name": "toy_bare",
        "dataset": {"source": {"kind": "delta", "url": "d"}},
        "component": {"name": "mdav", "params": {"k": 5}},
    }
    (tmp_path / "bare.yaml").write_text(yaml.safe_dump(spec))
    code, _, err = run_cli(
        capsys, "run", str(tmp_path / "bare.yaml"), "--store", str(tmp_path / "s")
    )
    assert code == 2 and "dataset.columns" in err and "privfair role" in err
