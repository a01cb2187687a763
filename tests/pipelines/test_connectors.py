"""Database, lakehouse and remote-file sources (``dataset.source``, ``privfair.io.connectors``).

The same rows read from a CSV, a SQLite table (ADBC), an Iceberg table on a SQLite catalog
(pyiceberg), a Delta table (deltalake) and a ``file://`` URL give the same release; a pinned
source keeps its version when the table moves on; credentials never reach the spec, a manifest
or a message.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
import yaml
from _partitioned import day_rows
from _shared import TOY_COLUMNS, run_cli

from privfair.io.connectors import quote_name, read_source, redact
from privfair.schemas.errors import SpecError
from privfair.schemas.spec import SourceSpec
from privfair.spec.catalogue import parse_spec

ROWS = pa.concat_tables(
    [day_rows(__import__("datetime").date(2026, 11, 2 + i), 40) for i in range(3)]
).drop_columns(["submitted"])


def _sqlite(folder: Path, table: pa.Table, name: str = "people") -> Path:
    import adbc_driver_sqlite.dbapi as driver

    path = folder / "raw.db"
    with driver.connect(str(path)) as conn:
        with conn.cursor() as cur:
            cur.adbc_ingest(name, table, mode="create_append")
        conn.commit()
    return path


def _iceberg(folder: Path, table: pa.Table):
    from pyiceberg.catalog.sql import SqlCatalog

    (folder / "warehouse").mkdir(exist_ok=True)
    cat = SqlCatalog(
        "privfair",
        uri=f"sqlite:///{folder / 'catalog.db'}",
        warehouse=(folder / "warehouse").as_uri(),
    )
    cat.create_namespace_if_not_exists("raw")
    tbl = cat.create_table_if_not_exists("raw.people", schema=table.schema)
    tbl.append(table)
    return tbl


def _spec(folder: Path, source: dict, name: str = "toy_source", **extra) -> Path:
    spec = {
        "name": name,
        "dataset": {"source": source, "columns": TOY_COLUMNS},
        "component": {"name": "mdav", "params": {"k": 5}},
        **extra,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _release(capsys, spec: Path, store: Path) -> Path:
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 0, err
    return store / out.splitlines()[0].split()[1] / out.splitlines()[0].split()[2]


def _shared_data(release: Path) -> str:
    return hashlib.sha256((release / "shared" / "data.parquet").read_bytes()).hexdigest()


def _every_source(folder: Path) -> dict[str, dict]:
    """``ROWS`` written as a CSV file, a SQLite table, an Iceberg table and a Delta table in
    ``folder``, and the ``dataset.source`` of each (a query and a table for SQLite)."""
    pacsv.write_csv(ROWS, folder / "people.csv")
    _sqlite(folder, ROWS)
    _iceberg(folder, ROWS)
    from deltalake import write_deltalake

    write_deltalake(str(folder / "delta_people"), ROWS)
    return {
        "sql": {"kind": "sql", "url": "sqlite:///raw.db", "table": "people"},
        "query": {"kind": "sql", "url": "sqlite:///raw.db", "query": "SELECT * FROM people"},
        "iceberg": {
            "kind": "iceberg",
            "catalog": "sqlite:///catalog.db",
            "warehouse": (folder / "warehouse").as_uri(),
            "table": "raw.people",
        },
        "delta": {"kind": "delta", "url": "delta_people"},
        "file": {"kind": "file", "url": (folder / "people.csv").as_uri()},
    }


def test_every_source_kind_gives_the_same_release(tmp_path, capsys):
    sources = _every_source(tmp_path)
    digests = {}
    for kind, src in sources.items():
        release = _release(capsys, _spec(tmp_path, src), tmp_path / f"store_{kind}")
        digests[kind] = _shared_data(release)
        man = json.loads((release / "manifest.json").read_text())
        assert man["input"]["source"]["kind"] == src["kind"]
        assert man["validation"]["status"] == "passed"
        public = (release / "shared" / "manifest.json").read_text()
        assert (
            "raw.db" not in public and "catalog.db" not in public and "delta_people" not in public
        )
    # tables without a row order are read in value order; a file keeps its own order, as a
    # dataset.path does
    tables = {k: v for k, v in digests.items() if k != "file"}
    assert len(set(tables.values())) == 1, digests
    by_path = {"path": "people.csv", "columns": TOY_COLUMNS}
    spec = {
        "name": "toy_path",
        "dataset": by_path,
        "component": {"name": "mdav", "params": {"k": 5}},
    }
    (tmp_path / "toy_path.yaml").write_text(yaml.safe_dump(spec))
    assert (
        _shared_data(_release(capsys, tmp_path / "toy_path.yaml", tmp_path / "sp"))
        == digests["file"]
    )


def test_a_table_read_in_another_order_gives_the_same_release(tmp_path):
    """The rows a database returns, in whatever order, are one input."""
    a = _sqlite(tmp_path, ROWS, "a")
    _sqlite(tmp_path, ROWS.take(list(reversed(range(ROWS.num_rows)))), "b")
    ra = read_source(SourceSpec(kind="sql", url=f"sqlite:///{a}", table="a"), tmp_path)
    rb = read_source(SourceSpec(kind="sql", url=f"sqlite:///{a}", table="b"), tmp_path)
    assert ra.table.equals(rb.table) and ra.fingerprint == rb.fingerprint


def test_a_pinned_iceberg_source_keeps_its_version(tmp_path, capsys):
    tbl = _iceberg(tmp_path, ROWS)
    first = tbl.current_snapshot().snapshot_id
    src = {
        "kind": "iceberg",
        "catalog": "sqlite:///catalog.db",
        "warehouse": (tmp_path / "warehouse").as_uri(),
        "table": "raw.people",
        "snapshot": first,
    }
    spec = _spec(tmp_path, src)
    v1 = _release(capsys, spec, tmp_path / "s").name
    tbl.append(ROWS.slice(0, 10))  # the table moves on
    code, out, _ = run_cli(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    assert out.startswith("exists:") and out.split()[2] == v1
    # the table's current rows hold the pinned ones: by the table (its uuid, whatever the
    # pipeline), another grouping of them is a re-publication
    now = {k: v for k, v in src.items() if k != "snapshot"}
    code, _, err = run_cli(
        capsys, "run", str(_spec(tmp_path, now, "toy_now")), "--store", str(tmp_path / "s")
    )
    assert code == 2 and "republish: refuse" in err and "toy_source" in err
    unpinned = _spec(tmp_path, now, "toy_now", republish="allow")
    man = json.loads((_release(capsys, unpinned, tmp_path / "s") / "manifest.json").read_text())
    assert man["input"]["rows"] == ROWS.num_rows + 10
    assert man["input"]["source"]["pin"]["snapshot"] != first


def test_a_pinned_delta_version_reads_that_version(tmp_path):
    from deltalake import write_deltalake

    write_deltalake(str(tmp_path / "d"), ROWS)
    write_deltalake(str(tmp_path / "d"), ROWS.slice(0, 5), mode="append")
    v0 = read_source(SourceSpec(kind="delta", url="d", version=0), tmp_path)
    now = read_source(SourceSpec(kind="delta", url="d"), tmp_path)
    assert v0.table.num_rows == ROWS.num_rows and now.table.num_rows == ROWS.num_rows + 5
    assert v0.pin["version"] == 0 and v0.fingerprint != now.fingerprint


def test_an_unpinned_query_is_fingerprinted_by_its_result(tmp_path):
    _sqlite(tmp_path, ROWS)
    a = read_source(
        SourceSpec(kind="sql", url="sqlite:///raw.db", query="SELECT * FROM people"), tmp_path
    )
    b = read_source(SourceSpec(kind="sql", url="sqlite:///raw.db", table="people"), tmp_path)
    c = read_source(
        SourceSpec(kind="sql", url="sqlite:///raw.db", query="SELECT * FROM people WHERE x > 20"),
        tmp_path,
    )
    assert a.pin is None and a.fingerprint == b.fingerprint != c.fingerprint


# --- credentials and bad sources ----------------------------------------------------------------
def test_a_password_in_the_spec_is_refused():
    raw = {
        "name": "p",
        "dataset": {
            "source": {"kind": "sql", "url": "postgresql://ana:s3cret@db:5432/x", "table": "t"},
            "columns": TOY_COLUMNS,
        },
        "component": {"name": "mdav", "params": {"k": 5}},
    }
    with pytest.raises(SpecError, match="password") as e:
        parse_spec(raw)
    assert "s3cret" not in str(e.value) and e.value.key == "dataset.source"


def test_an_environment_variable_fills_the_url(tmp_path, monkeypatch):
    _sqlite(tmp_path, ROWS)
    src = SourceSpec(kind="sql", url="sqlite:///${RAW_DB}", table="people")
    with pytest.raises(SpecError, match="RAW_DB is not set"):
        read_source(src, tmp_path)
    monkeypatch.setenv("RAW_DB", "raw.db")
    assert read_source(src, tmp_path).table.num_rows == ROWS.num_rows


def test_a_connection_id_comes_from_the_environment(tmp_path, monkeypatch):
    _sqlite(tmp_path, ROWS)
    src = SourceSpec(kind="sql", conn_id="raw_db", table="people")
    monkeypatch.delenv("AIRFLOW_HOME", raising=False)
    with pytest.raises(SpecError, match="AIRFLOW_CONN_RAW_DB"):
        read_source(src, tmp_path)
    monkeypatch.setenv("AIRFLOW_CONN_RAW_DB", f"sqlite:///{tmp_path / 'raw.db'}")
    assert read_source(src, tmp_path).table.num_rows == ROWS.num_rows


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ({"kind": "sql", "url": "sqlite:///raw.db", "table": "nobody"}, "nobody"),
        ({"kind": "sql", "url": "sqlite:///none.db", "table": "people"}, "no SQLite database"),
        (
            {
                "kind": "sql",
                "url": "sqlite:///raw.db",
                "query": "SELECT * FROM people WHERE x > 999",
            },
            "has no rows",
        ),
        ({"kind": "sql", "url": "mysql://h/db", "table": "people"}, "not a postgresql"),
        ({"kind": "delta", "url": "nowhere"}, "Delta table"),
        (
            {"kind": "iceberg", "catalog": "sqlite:///catalog.db", "table": "raw.nobody"},
            "no Iceberg table 'raw.nobody'",
        ),
        ({"kind": "file", "url": "file:///nowhere/x.csv"}, "cannot read"),
    ],
)
def test_a_bad_source_exits_2_naming_it(tmp_path, capsys, source, rule):
    _sqlite(tmp_path, ROWS)
    _iceberg(tmp_path, ROWS)
    code, out, err = run_cli(
        capsys, "run", str(_spec(tmp_path, source)), "--store", str(tmp_path / "s")
    )
    assert code == 2 and rule in err, err
    assert not (tmp_path / "s" / "toy_source").exists()


def test_an_unreachable_database_fails_fast_naming_host_and_port(tmp_path, capsys, monkeypatch):
    import time

    monkeypatch.setenv("PGPW", "hunter2")
    src = {"kind": "sql", "url": "postgresql://ana:${PGPW}@127.0.0.1:9/db", "table": "t"}
    t0 = time.monotonic()
    code, _, err = run_cli(capsys, "run", str(_spec(tmp_path, src)), "--store", str(tmp_path / "s"))
    assert code == 2 and time.monotonic() - t0 < 15
    assert "127.0.0.1:9" in err and "hunter2" not in err


def test_redact_and_quote():
    assert redact("postgresql://u:p@h:1/d?password=p") == "postgresql://u:***@h:1/d"
    assert quote_name('a."b') == '"a"."""b"'


def test_a_source_that_changes_between_ingest_and_protect_fails_the_run(tmp_path):
    """The orchestrators' tasks read the source again: an unpinned table that changed meanwhile
    is refused; a pinned Iceberg snapshot reads the same rows (the pin wins)."""
    from privfair.run import tasks
    from privfair.schemas.errors import DataSourceError
    from privfair.spec.catalogue import load_spec

    _sqlite(tmp_path, ROWS)
    spec = load_spec(_spec(tmp_path, {"kind": "sql", "url": "sqlite:///raw.db", "table": "people"}))
    rec = tasks.ingest_task(spec, tmp_path / "work")
    _sqlite(tmp_path, ROWS.slice(0, 3))  # three more rows arrive
    with pytest.raises(DataSourceError, match="changed since this run ingested it"):
        tasks.protect_task(spec, rec, tmp_path / "work")

    tbl = _iceberg(tmp_path, ROWS)
    src = {
        "kind": "iceberg",
        "catalog": "sqlite:///catalog.db",
        "warehouse": (tmp_path / "warehouse").as_uri(),
        "table": "raw.people",
        "snapshot": tbl.current_snapshot().snapshot_id,
    }
    pinned = load_spec(_spec(tmp_path, src, "toy_pinned"))
    rec = tasks.ingest_task(pinned, tmp_path / "work2")
    tbl.append(ROWS.slice(0, 3))
    assert tasks.protect_task(pinned, rec, tmp_path / "work2").rows_in == ROWS.num_rows


def test_a_column_type_the_family_cannot_take_exits_2(tmp_path, capsys):
    """A struct column read from a lakehouse table, named as a quasi-identifier."""
    from deltalake import write_deltalake

    odd = ROWS.set_column(0, "x", pa.array([{"a": int(v)} for v in ROWS["x"].to_pylist()]))
    write_deltalake(str(tmp_path / "odd"), odd)
    code, _, err = run_cli(
        capsys,
        "run",
        str(_spec(tmp_path, {"kind": "delta", "url": "odd"})),
        "--store",
        str(tmp_path / "s"),
    )
    assert code == 2 and "'x'" in err, err


def test_a_source_is_kept_in_the_ledger_by_its_table(tmp_path, capsys):
    _sqlite(tmp_path, ROWS)
    spec = _spec(tmp_path, {"kind": "sql", "url": "sqlite:///raw.db", "table": "people"})
    release = _release(capsys, spec, tmp_path / "s")
    man = json.loads((release / "manifest.json").read_text())
    assert man["ledger"]["dataset"] == "sql:people"


def test_every_source_streams_into_a_map_and_reads_again_without_one(tmp_path, monkeypatch):
    """A database cursor, an Iceberg scan, a Delta table and a remote CSV file (its bytes
    read whole: they are its fingerprint) go into a memory map a batch at a time once they
    are large (the threshold at one row here, as for a 10M-row source); where
    the temporary folder cannot take a map, the source is read again whole: the same table
    either way, the one read in memory."""
    from privfair.components.core import memory
    from privfair.io.ingest import normalise_types

    for kind, src in _every_source(tmp_path).items():
        spec = SourceSpec.model_validate(src)
        in_memory = read_source(spec, tmp_path)
        assert not memory._in_maps(in_memory.table), kind
        with monkeypatch.context() as m:
            m.setattr(memory, "RELEASE_ROWS", 1)
            mapped = read_source(spec, tmp_path)
            assert memory._in_maps(mapped.table), kind
            m.setattr(memory.tempfile, "tempdir", str(tmp_path / "no-such-folder"))
            again = read_source(spec, tmp_path)
        for got in (mapped, again):
            # as ingest reads them: pyiceberg's batch reader gives string where its to_arrow
            # gives large_string, which ingest normalises (``normalise_types``)
            assert normalise_types(got.table)[0].equals(normalise_types(in_memory.table)[0]), kind
            assert got.fingerprint == in_memory.fingerprint, kind
