"""A spec reading a PostgreSQL table and publishing to an Iceberg table, run by the CLI, Dagster
and Airflow against a real PostgreSQL started by the tests: the same version and the same
published bytes whichever drives it; the connections come from the environment
(``AIRFLOW_CONN_<ID>``: CLI and Airflow) or from Dagster's ``connections`` resource, never from
the spec."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from _airflow import Run, clone_home
from _partitioned import day_rows
from _postgres import new_database
from _shared import TOY_COLUMNS

pytestmark = pytest.mark.slow

ROWS = pa.concat_tables(
    [day_rows(__import__("datetime").date(2026, 11, 2 + i), 40) for i in range(3)]
).drop_columns(["submitted"])
SPEC = {
    "name": "toy_pg_lake",
    "description": "Toy people from PostgreSQL, released to an Iceberg table.",
    "dataset": {
        "source": {"kind": "sql", "conn_id": "raw_db", "table": "raw.people"},
        "columns": TOY_COLUMNS,
    },
    "component": {"name": "mdav", "params": {"k": 5}},
    "target": {"kind": "iceberg", "conn_id": "lake", "table": "lake.people"},
}


@pytest.fixture(scope="module")
def setup(postgres_url, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tables")
    specs = tmp / "specs"
    specs.mkdir()
    (specs / "toy_pg_lake.yaml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    raw = new_database(postgres_url, ROWS)
    # one catalog per driver (the spec names it by conn_id), all in PostgreSQL
    lakes = {d: new_database(postgres_url) for d in ("cli", "dagster", "airflow")}
    return {"tmp": tmp, "specs": specs, "raw": raw, "lakes": lakes}


def _lake(setup, driver: str):
    from pyiceberg.catalog.sql import SqlCatalog

    uri = setup["lakes"][driver].replace("postgresql://", "postgresql+psycopg2://")
    wh = setup["tmp"] / f"wh_{driver}"
    return SqlCatalog("privfair", uri=uri, warehouse=wh.as_uri()).load_table("lake.people")


def _published(store: Path) -> tuple[str, str, str]:
    (folder,) = [
        p for p in (store / "toy_pg_lake").iterdir() if not p.name.startswith((".", "latest"))
    ]
    data = hashlib.sha256((folder / "shared" / "data.parquet").read_bytes()).hexdigest()
    release = json.loads((folder / "shared" / "manifest.json").read_text())["release"]
    return folder.name, data, release


def _warehouse_env(setup, driver: str) -> str:
    wh = setup["tmp"] / f"wh_{driver}"
    wh.mkdir(exist_ok=True)
    return wh.as_uri()


def test_cli_dagster_and_airflow_publish_the_same_release(setup, airflow_home, monkeypatch, capsys):
    from _shared import run_cli

    spec_path = setup["specs"] / "toy_pg_lake.yaml"
    stores = {d: setup["tmp"] / f"store_{d}" for d in ("cli", "dagster", "airflow")}

    # the CLI: connections from the environment, Airflow's convention
    monkeypatch.setenv("AIRFLOW_CONN_RAW_DB", setup["raw"])
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", setup["lakes"]["cli"])
    monkeypatch.setenv("TOY_WH", _warehouse_env(setup, "cli"))
    spec = dict(SPEC, target={**SPEC["target"], "warehouse": "${TOY_WH}"})
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    code, _, err = run_cli(capsys, "run", str(spec_path), "--store", str(stores["cli"]))
    assert code == 0, err

    # Dagster: the connections resource, the warehouse from the environment
    import dagster as dg

    from privfair.dagster.definitions import Connections, build_defs

    monkeypatch.delenv("AIRFLOW_CONN_RAW_DB")
    monkeypatch.delenv("AIRFLOW_CONN_LAKE")
    monkeypatch.setenv("TOY_WH", _warehouse_env(setup, "dagster"))
    defs = build_defs(setup["specs"], store=str(stores["dagster"]))
    conns = Connections(uris={"raw_db": setup["raw"], "lake": setup["lakes"]["dagster"]})
    job = defs.resolve_job_def("toy_pg_lake_job")
    with dg.DagsterInstance.ephemeral() as instance:
        res = job.execute_in_process(
            instance=instance, resources={"connections": conns}, raise_on_error=False
        )
    assert res.success, [e.message for e in res.all_events if e.is_failure]

    # Airflow: connections as AIRFLOW_CONN_* of the scheduler's environment
    env = clone_home(airflow_home, setup["tmp"] / "airflow_home")
    env = {
        **env,
        "PRIVFAIR_SPECS_DIR": str(setup["specs"]),
        "PRIVFAIR_STORE": str(stores["airflow"]),
        "AIRFLOW_CONN_RAW_DB": setup["raw"],
        "AIRFLOW_CONN_LAKE": setup["lakes"]["airflow"],
        "TOY_WH": _warehouse_env(setup, "airflow"),
    }
    rc, log = Run(env, "dags", "test", "toy_pg_lake").result()
    assert rc == 0, log[-4000:]

    found = {d: _published(s) for d, s in stores.items()}
    assert len({v for v, _, _ in found.values()}) == 1, found  # one version
    assert len({d for _, d, _ in found.values()}) == 1, found  # the same published bytes
    for driver, (_, _, release) in found.items():
        tbl = _lake(setup, driver)
        assert tbl.refs()[f"privfair-{release}"].snapshot_id == tbl.current_snapshot().snapshot_id
        assert tbl.scan().to_arrow().num_rows == ROWS.num_rows
        text = json.dumps(tbl.properties)
        assert setup["raw"] not in text and "raw.people" not in text
