"""``privfair run | validate | releases`` end to end on German Credit (and one Adult run)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from pipelines.cli import main
from schemas.contracts import contract_from_json
from schemas.roles import Role, read_roles

SPECS = Path(__file__).resolve().parents[2] / "pipelines" / "specs"
RELEASE_FILES = ("data.parquet", "lineage.parquet", "manifest.json")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def guarantees_held(out: str) -> tuple[int, int]:
    """(held, total) from the summary line of ``privfair validate`` ('.. 13/15 .. hold ..')."""
    found = re.search(r"(\d+)/(\d+)(?: guarantees)? hold", out)
    assert found, out
    return int(found.group(1)), int(found.group(2))


def release_files(folder: Path) -> dict[str, int]:
    """Every file of a release folder with its mtime (ns)."""
    return {
        p.relative_to(folder).as_posix(): p.stat().st_mtime_ns
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def german(tmp_path_factory):
    """One German Credit release in a fresh store (spec copied from pipelines/specs)."""
    root = tmp_path_factory.mktemp("cli")
    spec = root / "german_fair_mdav.yaml"
    shutil.copy(SPECS / "german_fair_mdav.yaml", spec)
    store = root / "store"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PRIVFAIR_CACHE_DIR", str(root / "cache"))
        code, out, err = cli("run", str(spec), "--store", str(store))
    assert code == 0, err
    version = (store / "german_fair_mdav" / "latest").read_text().strip()
    folder = store / "german_fair_mdav" / version
    return {"spec": spec, "store": store, "version": version, "folder": folder, "out": out}


def test_run_publishes_a_release(german):
    folder = german["folder"]
    assert f"published: german_fair_mdav {german['version']}" in german["out"]
    assert f"release: {folder}" in german["out"]
    for name in RELEASE_FILES:
        assert (folder / name).is_file(), name
    assert not list((german["store"] / "german_fair_mdav").glob(".staging/*"))


def test_data_parquet_carries_roles_and_contract(german):
    folder = german["folder"]
    schema = pq.read_schema(folder / "data.parquet")
    roles = read_roles(schema)
    assert roles.protected.name == "sex" and roles.label.name == "credit"
    assert roles.protected.favoured == 1 and roles.label.positive == 1
    qis = roles.quasi_identifiers
    assert qis and set(qis) | {"sex", "credit"} == set(schema.names)
    assert all(roles[q].role is Role.QUASI_IDENTIFIER for q in qis)

    contract = contract_from_json(schema.metadata[b"privfair.contract"])
    kinds = {g.kind for g in contract}
    assert {"fairlet_composition", "k_anonymity", "local_fairness", "partition"} <= kinds
    assert json.loads(schema.metadata[b"privfair.params"])["k"] == 10

    manifest = json.loads((folder / "manifest.json").read_text())
    assert contract_from_json(json.dumps(manifest["contract"])) == contract


def test_manifest_metrics_and_input(german):
    m = json.loads((german["folder"] / "manifest.json").read_text())
    assert m["pipeline"] == "german_fair_mdav" and m["version"] == german["version"]
    metrics = m["metrics"]
    for key in ("dpar_before", "dpar_after", "positive_ratio_before", "positive_ratio_after"):
        assert key in metrics, key
    assert metrics["input_rows"] == 1000 and metrics["output_rows"] == 980
    assert metrics["information_loss"]["il_attr"] > 0
    files = m["input"]["files"]
    assert files == {
        "german.data": "b21f3d81db8071257d5ff1deaeba1fd4303b62712e6fcc9715c7a86202cb5871"
    }
    assert len(m["input"]["fingerprint"]) == 64
    assert m["validation"]["status"] == "passed" and not m["validation"]["failed"]

    # dPar after, recomputed from the published file
    df = pq.read_table(german["folder"] / "data.parquet").to_pandas()
    pr = df.groupby("sex")["credit"].mean()
    assert metrics["dpar_after"] == pytest.approx(abs(pr[0] - pr[1]), abs=1e-12)


def test_second_run_is_idempotent(german):
    before = release_files(german["folder"])
    latest_before = (german["store"] / "german_fair_mdav" / "latest").stat().st_mtime_ns
    code, out, err = cli("run", str(german["spec"]), "--store", str(german["store"]))
    assert code == 0, err
    assert out.startswith(f"exists: german_fair_mdav {german['version']}")
    assert release_files(german["folder"]) == before  # same files, none rewritten
    assert (german["store"] / "german_fair_mdav" / "latest").stat().st_mtime_ns == latest_before
    versions = [p.name for p in (german["store"] / "german_fair_mdav").iterdir()]
    assert sorted(v for v in versions if not v.startswith(".")) == sorted(
        [german["version"], "latest"]
    )


def test_validate_passes(german):
    code, out, err = cli("validate", str(german["folder"]))
    assert code == 0, err + out
    assert "FAIL" not in out
    held, total = guarantees_held(out)
    assert held == total > 0


def test_validate_catches_a_flipped_label(german, tmp_path):
    """Flip the label of one favoured positive row: positive correction never does that (C7),
    and the group's relabel count is no longer minimal (C9)."""
    copy = tmp_path / "release"
    shutil.copytree(german["folder"], copy)
    path = copy / "data.parquet"
    table = pq.read_table(path)
    df = table.to_pandas()
    row = int(np.flatnonzero((df["sex"] == 1).to_numpy() & (df["credit"] == 1).to_numpy())[0])
    i = table.schema.get_field_index("credit")
    flipped = table["credit"].to_numpy().copy()
    flipped[row] = 0
    table = table.set_column(
        i, table.schema.field(i), pa.array(flipped, table.schema.field(i).type)
    )
    pq.write_table(table, path)
    assert read_roles(pq.read_schema(path)).label.name == "credit"  # metadata kept

    code, out, err = cli("validate", str(copy))
    assert code == 1, err + out
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert any("C7" in line and "correction_direction" in line for line in fails), out
    assert any("C9" in line and "minimal_correction" in line for line in fails), out
    held, total = guarantees_held(out)
    assert held <= total - 2
    # the original release still validates
    assert cli("validate", str(german["folder"]))[0] == 0


def test_unmet_demand_publishes_nothing(tmp_path):
    """A spec demanding 50-anonymity of a k = 10 release: exit 1, no version, no latest."""
    spec = yaml.safe_load((SPECS / "german_fair_mdav.yaml").read_text())
    spec["guarantees"] = [{"kind": "k_anonymity", "k": 50}]
    path = tmp_path / "german_k50.yaml"
    path.write_text(yaml.safe_dump(spec))
    store = tmp_path / "store"
    code, out, err = cli("run", str(path), "--store", str(store))
    assert code == 1, err
    assert "release not published" in err and "k_anonymity" in err
    pipeline = store / "german_fair_mdav"
    assert not (pipeline / "latest").exists()
    published = [p for p in pipeline.iterdir() if not p.name.startswith(".")]
    assert published == []
    assert all(".quarantine" in p.parts for p in store.rglob("manifest.json"))
    code, out, _ = cli("releases", "--store", str(store))
    assert code == 0 and "no releases" in out


def test_releases_lists_the_release(german):
    code, out, err = cli("releases", "--store", str(german["store"]))
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("german_fair_mdav"))
    assert german["version"] in line and "(latest)" in line and "980" in line
    code, out, _ = cli("releases", "--store", str(german["store"]), "--json")
    rows = json.loads(out)
    assert [(r["pipeline"], r["version"], r["latest"]) for r in rows] == [
        ("german_fair_mdav", german["version"], True)
    ]
    assert rows[0]["rows"] == 980 and rows[0]["status"] == "passed"


@pytest.mark.slow
def test_adult_release_must_show(tmp_path):
    """The issue's "must show" on UCI Adult: 10-anonymous, every group an exact (3,7)-fairlet,
    upr >= fpr in every group, information loss and dPar before/after in the manifest."""
    spec = tmp_path / "adult_fair_mdav.yaml"
    shutil.copy(SPECS / "adult_fair_mdav.yaml", spec)
    store = tmp_path / "store"
    code, out, err = cli("run", str(spec), "--store", str(store))
    assert code == 0, err
    version = (store / "adult_fair_mdav" / "latest").read_text().strip()
    folder = store / "adult_fair_mdav" / version

    table = pq.read_table(folder / "data.parquet")
    roles = read_roles(table)
    df = table.to_pandas()
    lineage = pq.read_table(folder / "lineage.parquet").to_pandas()
    assert len(df) == len(lineage) == 46_640

    # 10-anonymous over every published QI column
    sizes = df.groupby(roles.quasi_identifiers, dropna=False).size()
    assert sizes.min() >= 10

    # every group an exact (3, 7)-fairlet; Male (1) is favoured
    g = pd.DataFrame({"group": lineage["group"], "u": df["sex"] == 0, "y": df["income"] == 1})
    per = g.groupby("group").agg(m=("u", "sum"), size=("u", "size"))
    assert (per["m"] == 3).all() and (per["size"] == 10).all() and len(per) == 4_664

    # upr >= fpr in every group (tau = 1), exactly: a/3 >= b/7  <=>  7a >= 3b
    a = g[g["u"]].groupby("group")["y"].sum()
    b = g[~g["u"]].groupby("group")["y"].sum()
    assert (7 * a >= 3 * b).all()

    m = json.loads((folder / "manifest.json").read_text())
    metrics = m["metrics"]
    assert (metrics["m"], metrics["n"]) == (3, 7)
    assert metrics["information_loss"]["il_attr"] > 0 and metrics["information_loss"]["il"] > 0
    assert 0 <= metrics["dpar_before"] <= 1 and 0 <= metrics["dpar_after"] <= 1
    assert metrics["dpar_before"] == pytest.approx(0.1945, abs=1e-3)  # 0.3038 - 0.1093
    assert m["validation"]["status"] == "passed"
