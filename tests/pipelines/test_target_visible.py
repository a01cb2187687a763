"""A release published to a lakehouse table says where it went (issue 43): ``privfair run``
prints the table, the catalog (its name, which a reader must open it under, its URI and
warehouse) and the snapshot or Delta version it published, and the owner's manifest records
them (``target``); the shareable copy names none of them."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from _partitioned import write_days
from _shared import TOY_COLUMNS, run_cli


def _spec(folder: Path, target: dict, name: str) -> Path:
    spec = {
        "name": name,
        "dataset": {
            "path": "submissions.csv",
            "columns": {**TOY_COLUMNS, "submitted": {"role": "ignored"}},
            "unlabelled": "drop",
        },
        "component": {"name": "mdav", "params": {"k": 5}},
        "target": target,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _manifests(store: Path, out: str) -> tuple[dict, dict, str]:
    _, name, version = out.splitlines()[0].split()
    folder = store / name / version
    owner = json.loads((folder / "manifest.json").read_text())
    shared = (folder / "shared" / "manifest.json").read_text()
    return owner, json.loads(shared), shared


def test_an_iceberg_release_names_its_table_catalog_and_snapshot(tmp_path, capsys):
    from pyiceberg.catalog.sql import SqlCatalog

    write_days(tmp_path, 2)
    store = tmp_path / "store"
    spec = _spec(tmp_path, {"kind": "iceberg"}, "toy_seen")
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 0, err
    owner, shared, text = _manifests(store, out)
    rec = owner["target"]
    assert rec["kind"] == "iceberg" and rec["catalog_name"] == "privfair"
    lake = store.resolve() / ".lakehouse"
    assert rec["catalog"] == f"sqlite:///{lake / 'catalog.db'}"
    assert rec["warehouse"] == (lake / "warehouse").as_uri()
    table = rec["tables"]["data"]
    assert table["table"] == "privfair.toy_seen"
    # what the record says is what a reader opening the catalog under that name finds
    cat = SqlCatalog(rec["catalog_name"], uri=rec["catalog"], warehouse=rec["warehouse"])
    tbl = cat.load_table(table["table"])
    assert tbl.current_snapshot().snapshot_id == table["snapshot"]
    assert tbl.refs()[table["tag"]].snapshot_id == table["snapshot"]
    assert table["tag"] == f"privfair-{shared['release']}"
    # under another name the same database shows no table: the name is part of the address
    other = SqlCatalog("default", uri=rec["catalog"], warehouse=rec["warehouse"])
    assert not other.list_namespaces()
    assert f"iceberg table: privfair.toy_seen, snapshot {table['snapshot']}" in out
    assert f"iceberg catalog: 'privfair' at {rec['catalog']}" in out
    # the shareable copy names no table, catalog or snapshot
    assert "target" not in shared and "lakehouse" not in text and "toy_seen," not in text
    assert str(table["snapshot"]) not in text
    # a re-run publishes nothing and prints the same
    code, again, _ = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert again.startswith("exists:") and f"snapshot {table['snapshot']}" in again


def test_a_delta_release_names_its_table_and_version(tmp_path, capsys):
    from deltalake import DeltaTable

    write_days(tmp_path, 2)
    store = tmp_path / "store"
    url = tmp_path / "lake" / "toy"
    spec = _spec(tmp_path, {"kind": "delta", "url": str(url)}, "toy_delta_seen")
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 0, err
    owner, shared, text = _manifests(store, out)
    table = owner["target"]["tables"]["data"]
    assert owner["target"]["kind"] == "delta" and table["table"] == str(url)
    assert table["version"] == DeltaTable(str(url)).version()
    assert f"delta table: {url}, version {table['version']}" in out
    assert "target" not in shared and str(url) not in text
