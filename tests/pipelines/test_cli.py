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
from _shared import read_latest

from privfair.cli import main
from privfair.run.flow import release_files as release_outputs
from privfair.schemas.contracts import contract_from_json
from privfair.schemas.roles import Role, read_roles

SPECS = Path(__file__).resolve().parents[2] / "pipelines" / "specs"
# each public output at the top, each sidecar under internal/ (never for distribution)
RELEASE_FILES = ("shared/data.parquet", "internal/lineage.parquet", "manifest.json", "report.html")


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
    version = read_latest(store / "german_fair_mdav")
    folder = store / "german_fair_mdav" / version
    return {"spec": spec, "store": store, "version": version, "folder": folder, "out": out}


def test_run_publishes_a_release(german):
    folder = german["folder"]
    assert f"published: german_fair_mdav {german['version']}" in german["out"]
    assert f"release: {folder}" in german["out"]
    for name in RELEASE_FILES:
        assert (folder / name).is_file(), name
    assert not (folder / "lineage.parquet").exists()  # the sidecar is not a public output
    assert not list((german["store"] / "german_fair_mdav").glob(".staging/*"))
    man = json.loads((folder / "manifest.json").read_text())
    assert release_outputs(man) == (
        {"data": "shared/data.parquet"},
        {"lineage": "internal/lineage.parquet"},
    )
    assert man["outputs"]["data"]["rows"] == man["sidecars"]["lineage"]["rows"] == 980


def test_run_prints_the_headline_metrics(german):
    """The algorithm's headline metrics as '  <label>: <value>' lines, not key=value."""
    out = german["out"]
    man = json.loads((german["folder"] / "manifest.json").read_text())
    metrics = man["metrics"]
    assert "  input rows: 1000\n" in out
    assert "  published rows: 980\n" in out
    assert f"  labels relabelled: {metrics['relabelled']}\n" in out
    assert f"  demographic parity difference, input: {metrics['dpar_before']:.4f}\n" in out
    assert man["headline"]["relabelled"] == "labels relabelled"
    assert re.search(r"guarantees: (\d+)/\1 hold; schema checks: (\d+)/\2 pass", out), out
    assert not [line for line in out.splitlines() if re.match(r"\s*\w+=", line)], out


def test_data_parquet_carries_roles_and_contract(german):
    folder = german["folder"]
    schema = pq.read_schema(folder / "shared" / "data.parquet")
    roles = read_roles(schema)
    prot, lab = roles.single(Role.PROTECTED), roles.single(Role.LABEL)
    assert prot.name == "sex" and lab.name == "credit"
    assert prot.favoured == (1,) and lab.positive == (1,)  # value sets
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
    df = pq.read_table(german["folder"] / "shared" / "data.parquet").to_pandas()
    pr = df.groupby("sex")["credit"].mean()
    assert metrics["dpar_after"] == pytest.approx(abs(pr[0] - pr[1]), abs=1e-12)


def test_second_run_is_idempotent(german):
    before = release_files(german["folder"])
    latest_before = (german["store"] / "german_fair_mdav" / "latest").lstat().st_mtime_ns
    code, out, err = cli("run", str(german["spec"]), "--store", str(german["store"]))
    assert code == 0, err
    assert out.startswith(f"exists: german_fair_mdav {german['version']}")
    assert release_files(german["folder"]) == before  # same files, none rewritten
    assert (german["store"] / "german_fair_mdav" / "latest").lstat().st_mtime_ns == latest_before
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


def flip_favoured_positive_label(path: Path) -> None:
    """Flip the label of the first favoured (sex = 1) positive (credit = 1) row of a German
    release's data.parquet, keeping its schema metadata (roles, contract)."""
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
    assert read_roles(pq.read_schema(path)).single(Role.LABEL).name == "credit"  # metadata kept
    assert int(pq.read_table(path)["credit"].to_numpy()[row]) == 0


def test_validate_catches_a_flipped_label(german, tmp_path):
    """Flip the label of one favoured positive row: positive correction never does that (C7),
    and the group's relabel count is no longer minimal (C9)."""
    copy = tmp_path / "release"
    shutil.copytree(german["folder"], copy)
    flip_favoured_positive_label(copy / "shared" / "data.parquet")

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


# --- the must-show cases -----------------------------------------------------------------
def german_variant(tmp_path: Path, name: str, **changes) -> Path:
    """The shipped German spec under ``name`` with top-level keys replaced (or, for
    ``dataset``, merged)."""
    spec = yaml.safe_load((SPECS / "german_fair_mdav.yaml").read_text())
    spec["name"] = name
    for key, value in changes.items():
        spec[key] = {**spec[key], **value} if key == "dataset" else value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def assert_nothing_published(store: Path, pipeline: str) -> None:
    """No version folder, no ``latest``; a manifest only in quarantine, if anywhere."""
    base = store / pipeline
    if base.exists():
        assert [p.name for p in base.iterdir() if not p.name.startswith(".")] == []
    assert all(".quarantine" in p.parts for p in store.rglob("manifest.json"))
    code, out, _ = cli("releases", "--store", str(store))
    assert code == 0 and "no releases" in out


def test_t_closeness_of_the_label_at_zero_publishes_nothing(tmp_path):
    """Demanding t = 0 closeness of the label within every group cannot hold (the label is not
    spread evenly over the fairlets): exit 1, the demand named, nothing published."""
    spec = german_variant(
        tmp_path, "german_t0", guarantees=[{"kind": "t_closeness", "attribute": "credit", "t": 0}]
    )
    store = tmp_path / "store"
    code, out, err = cli("run", str(spec), "--store", str(store))
    assert code == 1, err + out
    assert err.startswith("privfair: release not published"), err
    assert "spec.0 t_closeness" in err and "'credit'" in err
    assert not out.startswith("published")
    assert_nothing_published(store, "german_t0")
    (q,) = (store / "german_t0" / ".quarantine").iterdir()
    man = json.loads((q / "manifest.json").read_text())
    (failed,) = [r for r in man["validation"]["results"] if not r["passed"]]
    assert (failed["id"], failed["kind"], failed["expected"]) == ("spec.0", "t_closeness", 0)
    assert failed["observed"] > 0 and failed["n_offending"] > 0


def test_t_closeness_of_a_missing_attribute_is_a_spec_error(tmp_path):
    spec = german_variant(
        tmp_path,
        "german_nosuch",
        guarantees=[{"kind": "t_closeness", "attribute": "nosuchattribute", "t": 0.1}],
    )
    store = tmp_path / "store"
    code, out, err = cli("run", str(spec), "--store", str(store))
    assert code == 2, err + out
    assert err.startswith("privfair: error:"), err
    assert "spec key 'guarantees.0.attribute'" in err and "'nosuchattribute'" in err
    assert_nothing_published(store, "german_nosuch")
    assert not list(store.rglob("*.parquet"))  # refused before the component ran


def test_builtin_dataset_column_override_of_a_missing_column(tmp_path):
    spec = german_variant(
        tmp_path,
        "german_nosuchcolumn",
        dataset={"columns": {"nosuchcolumn": {"role": "quasi_identifier"}}},
    )
    store = tmp_path / "store"
    code, out, err = cli("run", str(spec), "--store", str(store))
    assert code == 2, err + out
    assert err.startswith("privfair: error:"), err
    assert "spec key 'dataset.columns.nosuchcolumn'" in err
    assert "not a column of built-in dataset 'german'" in err
    assert_nothing_published(store, "german_nosuchcolumn")


def drop_from_contract(folder: Path, ids: set[str]) -> None:
    """Delete the guarantees ``ids`` from both copies of the declared contract a release carries:
    the manifest's and the one in data.parquet's metadata (``privfair.contract``)."""
    mpath = folder / "manifest.json"
    man = json.loads(mpath.read_text())
    before = len(man["contract"])
    man["contract"] = [g for g in man["contract"] if g["id"] not in ids]
    assert len(man["contract"]) == before - len(ids)
    mpath.write_text(json.dumps(man, indent=2))

    path = folder / "shared" / "data.parquet"
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    kept = [g for g in json.loads(meta[b"privfair.contract"]) if g["id"] not in ids]
    assert len(kept) == before - len(ids)
    meta[b"privfair.contract"] = json.dumps(kept).encode()
    pq.write_table(table.replace_schema_metadata(meta), path)
    left = contract_from_json(pq.read_schema(path).metadata[b"privfair.contract"])
    assert len(left) == before - len(ids) and not {g.id for g in left} & ids


def test_validate_catches_a_flipped_label_hidden_from_the_declared_contract(german, tmp_path):
    """Flip one favoured positive label AND delete C7 and C9 from the manifest's contract and
    from the Parquet metadata: the contract is rebuilt from the spec, so C7 and C9 are still
    checked (and fail), and the declared copies fail ``declared_contract`` naming both."""
    copy = tmp_path / "release"
    shutil.copytree(german["folder"], copy)
    flip_favoured_positive_label(copy / "shared" / "data.parquet")
    drop_from_contract(copy, {"C7", "C9"})

    code, out, err = cli("validate", str(copy))
    assert code == 1, err + out
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert any("C7" in line and "correction_direction" in line for line in fails), out
    assert any("C9" in line and "minimal_correction" in line for line in fails), out
    (declared,) = [line for line in fails if "declared_contract" in line]
    assert "C7 correction_direction" in declared and "C9 minimal_correction" in declared
    assert "manifest.json" in declared and "shared/data.parquet" in declared
    held, total = guarantees_held(out)
    assert held <= total - 3
    assert cli("validate", str(german["folder"]))[0] == 0  # the original still validates


def test_validate_catches_an_overwritten_passthrough_column(tmp_path):
    """German with ``foreigner`` made a pass-through (public) column instead of a QI: the
    release publishes it unchanged (C6); overwriting it in data.parquet fails validation."""
    spec = german_variant(
        tmp_path,
        "german_foreigner",
        dataset={"columns": {"foreigner": {"role": "public", "kind": "binary"}}},
    )
    store = tmp_path / "store"
    code, out, err = cli("run", str(spec), "--store", str(store))
    assert code == 0, err + out
    version = read_latest(store / "german_foreigner")
    folder = store / "german_foreigner" / version
    man = json.loads((folder / "manifest.json").read_text())
    (c6,) = [g for g in man["contract"] if g["kind"] == "attributes_preserved"]
    assert c6["id"] == "C6" and set(c6["columns"]) == {"foreigner", "sex"}
    assert (
        read_roles(pq.read_schema(folder / "shared" / "data.parquet"))["foreigner"].role
        is Role.PUBLIC
    )
    assert cli("validate", str(folder))[0] == 0

    copy = tmp_path / "release"
    shutil.copytree(folder, copy)
    path = copy / "shared" / "data.parquet"
    table = pq.read_table(path)
    i = table.schema.get_field_index("foreigner")
    field = table.schema.field(i)
    values = table["foreigner"].to_numpy()
    table = table.set_column(i, field, pa.array(1 - values, field.type))  # every value flipped
    pq.write_table(table, path)

    code, out, err = cli("validate", str(copy))
    assert code == 1, err + out
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 1, out
    assert "C6" in fails[0] and "attributes_preserved" in fails[0]
    assert "1 of 2 preserved columns changed" in fails[0]


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
    data = yaml.safe_load((SPECS / "adult_fair_mdav.yaml").read_text())
    # the paper's setting, not the shipped one: (3,7)-fairlets, positive correction at tau = 1
    data["component"]["params"] = {"k": 10, "tau": 1.0, "correction": "positive"}
    data["guarantees"] = [{"kind": "k_anonymity", "k": 10}]
    spec.write_text(yaml.safe_dump(data))
    store = tmp_path / "store"
    code, out, err = cli("run", str(spec), "--store", str(store))
    assert code == 0, err
    version = read_latest(store / "adult_fair_mdav")
    folder = store / "adult_fair_mdav" / version

    table = pq.read_table(folder / "shared" / "data.parquet")
    roles = read_roles(table)
    df = table.to_pandas()
    lineage = pq.read_table(folder / "internal" / "lineage.parquet").to_pandas()
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


def test_the_command_ends_with_mains_code_and_all_it_printed(tmp_path):
    """``privfair`` (``cli.entry``) exits through ``leave``, which skips the interpreter's last
    collections: the code is ``main``'s and what it printed into a pipe (buffered) is whole."""
    import subprocess
    import sys

    repo = SPECS.parents[1]

    def command(*argv: str) -> subprocess.CompletedProcess:
        script = "from privfair.cli import entry; entry()"
        return subprocess.run(
            [sys.executable, "-c", script, *argv], capture_output=True, text=True, cwd=repo
        )

    code, out, _ = cli("describe", "--markdown")
    described = command("describe", "--markdown")
    assert (described.returncode, described.stdout) == (code, out) == (0, out)
    assert len(out) > 10_000  # more than one buffer's worth
    missing = command("run", str(tmp_path / "missing.yaml"))
    assert missing.returncode == 2, missing.stderr
    assert missing.stderr.startswith("privfair: error:") and "missing.yaml" in missing.stderr
