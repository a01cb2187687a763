"""A real PostgreSQL (started by the tests) as a source through ADBC and as an Iceberg catalog.

The must-show of the tables issue: a spec reading a PostgreSQL table and publishing to an Iceberg
table (its catalog in PostgreSQL) by write-audit-publish, through the CLI (the orchestrators:
``tests/orchestrators/test_tables_orchestrated.py``); a failed validation leaves ``main``
untouched; an unreachable server is refused within seconds, host and port named, no password.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from _partitioned import day_rows
from _postgres import new_database
from _shared import TOY_COLUMNS, run_cli

from privfair.io.connectors import read_source
from privfair.schemas.spec import SourceSpec

ROWS = pa.concat_tables(
    [day_rows(__import__("datetime").date(2026, 11, 2 + i), 40) for i in range(3)]
).drop_columns(["submitted"])


@pytest.fixture
def database(postgres_url):
    """A fresh database on the session's server, with table ``raw.people`` (ROWS)."""
    return new_database(postgres_url, ROWS)


def _spec(folder: Path, dataset: dict, target: dict | None, name: str = "toy_pg", **extra) -> Path:
    spec = {
        "name": name,
        "dataset": dataset,
        "component": {"name": "mdav", "params": {"k": 5}},
        **({"target": target} if target else {}),
        **extra,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _catalog(url: str, warehouse: Path):
    from pyiceberg.catalog.sql import SqlCatalog

    uri = url.replace("postgresql://", "postgresql+psycopg2://")
    return SqlCatalog("privfair", uri=uri, warehouse=warehouse.as_uri())


def test_postgres_table_to_iceberg_on_a_postgres_catalog(database, tmp_path, capsys):
    warehouse = tmp_path / "wh"
    warehouse.mkdir()
    target = {
        "kind": "iceberg",
        "catalog": database,
        "warehouse": warehouse.as_uri(),
        "table": "lake.people",
    }
    source = {"kind": "sql", "url": database, "table": "raw.people"}
    spec = _spec(tmp_path, {"source": source, "columns": TOY_COLUMNS}, target)
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    assert code == 0, err
    _, name, version = out.splitlines()[0].split()
    release = tmp_path / "s" / name / version
    man = json.loads((release / "manifest.json").read_text())
    assert (
        man["input"]["dataset"].startswith("postgresql:") and man["input"]["rows"] == ROWS.num_rows
    )
    release_id = json.loads((release / "shared" / "manifest.json").read_text())["release"]
    tbl = _catalog(database, warehouse).load_table("lake.people")
    assert tbl.refs()[f"privfair-{release_id}"].snapshot_id == tbl.current_snapshot().snapshot_id
    assert tbl.scan().to_arrow().num_rows == ROWS.num_rows
    # a failed validation leaves main untouched
    before = tbl.current_snapshot().snapshot_id
    broken = _spec(
        tmp_path,
        {"source": source, "columns": TOY_COLUMNS},
        target,
        guarantees=[{"kind": "k_anonymity", "k": 500}],
        republish="allow",
    )
    code, _, err = run_cli(capsys, "run", str(broken), "--store", str(tmp_path / "s"))
    assert code == 1
    after = _catalog(database, warehouse).load_table("lake.people")
    assert after.current_snapshot().snapshot_id == before
    assert not any(r.startswith("privfair-audit-") for r in after.refs())


def test_a_query_and_column_comments(database, tmp_path, capsys):
    import adbc_driver_postgresql.dbapi as pg

    with pg.connect(database, autocommit=True) as conn, conn.cursor() as cur:
        for col, doc in {
            "x": "privfair role: quasi_identifier (numeric)",
            "c": "privfair role: quasi_identifier (nominal)",
            "PA": "privfair role: protected (binary); favoured: 1",
            "y": "privfair role: label (binary); positive: 1",
        }.items():
            cur.execute(f"COMMENT ON COLUMN raw.people.\"{col}\" IS '{doc}'")
    read = read_source(SourceSpec(kind="sql", url=database, table="raw.people"))
    assert read.docs["PA"].endswith("favoured: 1")
    # roles from the comments: the spec names none
    spec = _spec(
        tmp_path, {"source": {"kind": "sql", "url": database, "table": "raw.people"}}, None
    )
    code, _, err = run_cli(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    assert code == 0, err
    q = read_source(
        SourceSpec(kind="sql", url=database, query="SELECT x, c FROM raw.people WHERE x > 50")
    )
    assert q.table.column_names == ["x", "c"] and q.table.num_rows == sum(
        v > 50 for v in ROWS["x"].to_pylist()
    )
    assert q.table.schema.field("x").type == pa.int64()  # types kept, not widened


def test_password_from_the_environment_never_recorded(database, tmp_path, capsys, monkeypatch):
    """The session's server trusts local connections: a password is accepted and ignored, so the
    run succeeds and the test checks where the password went."""
    monkeypatch.setenv("RAW_PW", "s3cret-pw")
    url = database.replace("privfair@", "privfair:${RAW_PW}@")
    spec = _spec(
        tmp_path,
        {"source": {"kind": "sql", "url": url, "table": "raw.people"}, "columns": TOY_COLUMNS},
        None,
    )
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    assert code == 0, err
    for f in (tmp_path / "s").rglob("*"):
        if f.is_file() and f.suffix in {".json", ".html", ".sqlite"}:
            assert b"s3cret-pw" not in f.read_bytes(), f
    assert "s3cret-pw" not in out + err


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ({"kind": "sql", "table": "raw.nobody"}, "nobody"),
        ({"kind": "sql", "query": "SELECT * FROM raw.people WHERE x > 1000"}, "has no rows"),
        ({"kind": "sql", "query": "SELEKT 1"}, "cannot be read"),
    ],
)
def test_bad_tables_exit_2(database, tmp_path, capsys, source, rule):
    spec = _spec(tmp_path, {"source": {**source, "url": database}, "columns": TOY_COLUMNS}, None)
    code, _, err = run_cli(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    assert code == 2 and rule in err, err


def test_an_unreachable_server_is_named_within_seconds(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PW", "hunter2")
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    source = {"kind": "sql", "url": f"postgresql://ana:${{PW}}@127.0.0.1:{port}/raw", "table": "t"}
    spec = _spec(tmp_path, {"source": source, "columns": TOY_COLUMNS}, None)
    t0 = time.monotonic()
    code, _, err = run_cli(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    assert code == 2 and time.monotonic() - t0 < 10
    assert f"127.0.0.1:{port}" in err and "hunter2" not in err
