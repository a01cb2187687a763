"""The two parts of a release: the owner part stays the owner's (permissions), the shareable copy
is what ``privfair export`` writes (checked against its own manifest), and a recipient can check
it (``privfair verify``) but not mistake it for an owner release."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GERMAN = REPO / "pipelines" / "specs" / "german_fair_mdav.yaml"


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from privfair.run.flow import run_release
    from privfair.spec.catalogue import load_spec

    store = tmp_path_factory.mktemp("share") / "store"
    out = run_release(load_spec(GERMAN), store)
    assert out.status == "published"
    return Path(out.path)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_owner_files_are_the_owners_and_the_shared_copy_is_readable(release: Path):
    for p in [release, *release.rglob("*")]:
        shared = p == release / "shared" or release / "shared" in p.parents
        if p == release or shared:
            assert _mode(p) == (0o755 if p.is_dir() else 0o644), p
        else:
            assert _mode(p) == (0o700 if p.is_dir() else 0o600), p
    key = release.parents[1] / ".privfair" / "secret"
    assert _mode(key) == 0o600 and _mode(key.parent) == 0o700


def test_export_writes_the_shareable_copy_and_nothing_else(release: Path, tmp_path: Path):
    from privfair.cli import main
    from privfair.run.flow import revalidate

    assert main(["export", str(release.parent / "latest"), str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["data.parquet", "manifest.json", "report.html"]
    pub = json.loads((out / "manifest.json").read_text())
    owner = json.loads((release / "manifest.json").read_text())
    assert pub["release"] == owner["shared"]["release"] != owner["version"]
    assert pub["format"] == "privfair-shared/1"
    assert not {"input", "warnings", "timings", "cost_of_protection", "version"} & set(pub)
    text = "".join(p.read_bytes().decode(errors="replace") for p in out.iterdir())
    for secret in (
        owner["version"],
        owner["input"]["fingerprint"],
        *owner["input"]["files"].values(),
    ):
        assert secret not in text
    # each verdict, without the evidence it was computed from
    assert all(set(r) == {"id", "key", "kind", "passed"} for r in pub["validation"]["results"])
    assert main(["verify", str(out)]) == 0
    assert revalidate(release).passed  # the owner's release is untouched and still validates


def test_verify_refuses_a_copy_that_does_not_match_its_manifest(release: Path, tmp_path, capsys):
    from privfair.cli import main
    from privfair.release.share import export

    dest, _ = export(release, tmp_path / "a")
    data = dest / "data.parquet"
    blob = bytearray(data.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    data.write_bytes(bytes(blob))
    assert main(["verify", str(dest)]) == 2
    assert "data.parquet checksum differs" in capsys.readouterr().err
    dest, _ = export(release, tmp_path / "b")
    (dest / "lineage.parquet").write_bytes(b"smuggled")
    assert main(["verify", str(dest)]) == 2
    assert "not listed in its manifest: lineage.parquet" in capsys.readouterr().err


def test_export_errors_name_the_path_and_the_rule(release: Path, tmp_path: Path, capsys):
    from privfair.cli import main

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    assert main(["export", str(release), str(busy)]) == 2
    err = capsys.readouterr().err
    assert str(busy) in err and "must not exist or be empty" in err
    assert main(["export", str(tmp_path), str(tmp_path / "new")]) == 2
    assert "not a release folder" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    # an exported copy is not an owner release: validate says what it is
    assert main(["export", str(release), str(tmp_path / "copy")]) == 0
    capsys.readouterr()
    assert main(["validate", str(tmp_path / "copy")]) == 2
    assert "shareable copy" in capsys.readouterr().err


def test_the_release_id_is_keyed_by_the_store(release: Path):
    from privfair.release.share import public_id
    from privfair.release.store import Store, store_secret

    store = Store.open(release.parents[1])
    key = store_secret(store)
    assert store_secret(store) == key and len(key) == 32
    pub = json.loads((release / "shared" / "manifest.json").read_text())
    assert pub["release"] == public_id(key, release.parent.name, release.name)
    assert public_id(b"\0" * 32, release.parent.name, release.name) != pub["release"]


def test_a_rerun_publishes_nothing_new_and_the_copy_is_unchanged(release: Path):
    from privfair.run.flow import run_release
    from privfair.spec.catalogue import load_spec

    before = {p: p.read_bytes() for p in (release / "shared").iterdir()}
    out = run_release(load_spec(GERMAN), release.parents[1])
    assert out.status == "exists" and Path(out.path) == release
    assert {p: p.read_bytes() for p in (release / "shared").iterdir()} == before


def test_what_a_writer_stored_beside_the_data_is_not_ingested(tmp_path: Path):
    """pandas records its index (with the input's row count) in the file's metadata; a release
    built from the ingested table must not carry it, whatever the family."""
    import pandas as pd

    from privfair.io.ingest import load_dataset
    from privfair.schemas.spec import DatasetSpec

    frame = pd.DataFrame({"x": range(12347), "y": [0, 1] * 6173 + [0]})
    frame.index = frame.index + 7  # a RangeIndex pandas stores as metadata
    frame.to_parquet(tmp_path / "t.parquet")
    ds = DatasetSpec(
        path=str(tmp_path / "t.parquet"),
        columns={"x": {"role": "quasi_identifier"}, "y": {"role": "label", "kind": "binary"}},
    )
    table, _ = load_dataset(ds)
    assert b"pandas" not in (table.schema.metadata or {})
    assert "12347" not in str(table.schema.metadata) and "12354" not in str(table.schema)


def test_a_relative_dataset_path_is_read_again_by_every_task_and_by_validate(tmp_path: Path):
    """No task keeps a copy of the input: validate and publish read it again, from the spec
    file's folder, as ``privfair validate`` does later."""
    import numpy as np
    import yaml
    from _shared import TOY_COLUMNS

    from privfair.cli import main
    from privfair.run import tasks
    from privfair.spec.catalogue import load_spec

    rng = np.random.default_rng(1)
    n = 60
    rows = ["x,c,PA,y"] + [
        f"{rng.integers(0, 50)},{'abc'[i % 3]},{i % 2},{rng.integers(0, 2)}" for i in range(n)
    ]
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "toy.csv").write_text("\n".join(rows) + "\n")
    spec_file = folder / "toy.yaml"
    spec_file.write_text(
        yaml.safe_dump(
            {
                "name": "toy_relative",
                "dataset": {"path": "toy.csv", "columns": TOY_COLUMNS},
                "component": {"name": "mdav", "params": {"k": 5}},
            }
        )
    )
    spec = load_spec(spec_file)
    work, store = tmp_path / "work", tmp_path / "store"
    ing = tasks.ingest_task(spec, work / "raw")
    prot = tasks.protect_task(tasks.as_spec(ing.spec), ing.as_dict(), work / "prot", store)
    val = tasks.validate_task(prot.as_dict(), store)
    out = tasks.publish_task(prot.as_dict(), val.as_dict(), store)
    assert out.status == "published"
    assert not list(work.rglob("*.parquet")) or all(
        "raw" not in p.parts for p in work.rglob("*.parquet")
    )
    # a manifest holds no local path: validate finds a relative file through --data-dir
    assert main(["validate", out.path, "--data-dir", str(folder)]) == 0
