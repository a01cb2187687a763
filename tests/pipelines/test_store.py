"""The release store as a data engineer hands it to an analyst: paths that travel with the spec,
``latest`` that follows the runs (and ``privfair promote``), listings that show quarantined
candidates and create nothing, releases checked against their recorded checksums (an incomplete
one is quarantined and rebuilt), and every store failure an exit 2 naming the path and the rule.

Everything goes through the real CLI (``privfair.cli.main`` in-process) on a store in tmp_path;
German Credit is the dataset of the built-in runs, a 30-row CSV the one of the file runs.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from _shared import BROKEN_SPEC, TOY_COLUMNS, read_latest, run_cli

from privfair.cli import main
from privfair.release import store as release
from privfair.release.store import Store
from privfair.spec.catalogue import load_spec, with_params

SPECS = Path(__file__).resolve().parents[2] / "pipelines" / "specs"
GERMAN = SPECS / "german_fair_mdav.yaml"
PIPE = "german_fair_mdav"


def csv_text(n: int = 30) -> str:
    """``n`` rows in which PA = 1, the favoured value the spec declares, has the higher positive
    rate (12 of 20 against 5 of 10 at n = 30): a declared favoured value the data contradict
    refuses the run."""
    rows = ["x,c,PA,y"]
    pos = {0: 0, 1: 0}
    size = {0: 0, 1: 0}
    for i in range(n):
        pa_, y = int(i % 3 != 0), int((i // 2) % 2 == 1 or i % 6 == 1)
        pos[pa_] += y
        size[pa_] += 1
        rows.append(f"{(i * 37 % 101) / 10:.1f},{'abc'[i * 7 % 3]},{pa_},{y}")
    assert pos[1] * size[0] > pos[0] * size[1], "the data must favour PA = 1"
    return "\n".join(rows) + "\n"


def file_spec(folder: Path, path: str, name: str = "file_release") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    spec = {
        "name": name,
        "dataset": {"path": path, "format": "csv", "columns": TOY_COLUMNS},
        "component": {"name": "fair_mdav", "params": {"k": 3, "tau": 1.0}},
    }
    out = folder / "spec.yaml"
    out.write_text(yaml.safe_dump(spec, sort_keys=False))
    return out


def german_variant(tmp_path: Path, k: int) -> Path:
    raw = yaml.safe_load(GERMAN.read_text())
    raw["component"]["params"]["k"] = k
    # another grouping of the same rows, published on purpose (not part of the version)
    raw["republish"] = "allow"
    path = tmp_path / f"german_k{k}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def latest_of(store: Path, pipeline: str = PIPE) -> str:
    return read_latest(store / pipeline)


def all_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One German Credit release in a store, run once for the module (tests copy the store)."""
    root = tmp_path_factory.mktemp("store_module")
    store = root / "store"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PRIVFAIR_CACHE_DIR", str(root / "cache"))
        assert main(["run", str(GERMAN), "--store", str(store)]) == 0
    return {"store": store, "version": latest_of(store)}


@pytest.fixture
def store(published: dict, tmp_path: Path) -> Path:
    """A private copy of the module's store."""
    copy = tmp_path / "store"
    shutil.copytree(published["store"], copy, symlinks=True)
    return copy


# --- 1. paths ----------------------------------------------------------------------------------
def test_relative_dataset_path_resolves_beside_the_spec_and_no_absolute_path_is_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    spec = file_spec(project, "data/input.csv")
    (project / "data").mkdir()
    (project / "data" / "input.csv").write_text(csv_text())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the current directory is not the spec's folder

    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 0, err + out
    folder = store / "file_release" / latest_of(store, "file_release")
    man = json.loads((folder / "manifest.json").read_text())
    assert man["input"]["dataset"] == "data/input.csv"  # as written in the spec
    assert man["spec"]["dataset"]["path"] == "data/input.csv"
    for path in all_files(store):
        data = path.read_bytes()
        for local in (str(tmp_path), str(tmp_path.resolve())):
            assert local.encode() not in data, f"{path} holds the local path {local}"


def test_an_absolute_dataset_path_is_published_as_its_file_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "raw" / "input.csv"
    data.parent.mkdir()
    data.write_text(csv_text())
    spec = file_spec(tmp_path / "specs", str(data))
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 0, err + out
    man = json.loads(next(store.rglob("manifest.json")).read_text())
    assert man["input"]["dataset"] == "input.csv"
    assert list(man["input"]["files"]) == ["input.csv"]


def test_data_dir_applies_to_file_datasets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = file_spec(tmp_path / "specs", "input.csv")
    data = tmp_path / "raw"
    data.mkdir()
    (data / "input.csv").write_text(csv_text())
    store = tmp_path / "store"

    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 2, err + out
    assert "'input.csv' not found" in err and str(tmp_path / "specs" / "input.csv") in err
    assert not store.exists()  # refused before anything was written

    code, out, err = run_cli(
        capsys, "run", str(spec), "--store", str(store), "--data-dir", str(data)
    )
    assert code == 0, err + out
    man = json.loads(next(store.rglob("manifest.json")).read_text())
    assert man["input"]["dataset"] == "input.csv"


def test_the_spec_folder_is_kept_by_with_params(tmp_path: Path) -> None:
    path = shutil.copy(GERMAN, tmp_path / "german.yaml")
    spec = load_spec(path)
    assert spec.spec_dir == tmp_path.resolve()
    changed = with_params(spec, {"k": 12})
    assert changed.spec_dir == tmp_path.resolve()
    assert changed.fingerprint() != spec.fingerprint()
    # the folder is not part of the spec's data: moving a spec does not change its version
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert load_spec(shutil.copy(GERMAN, other / "g.yaml")).fingerprint() == spec.fingerprint()


# --- 2. latest, promote, validate latest --------------------------------------------------------
def test_rerun_moves_latest_to_its_version_and_promote_points_it_back(
    store: Path, published: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1 = published["version"]
    code, out, err = run_cli(
        capsys, "run", str(german_variant(tmp_path, 11)), "--store", str(store)
    )
    assert code == 0, err + out
    v2 = latest_of(store)
    assert v2 != v1 and out.startswith(f"published: {PIPE} {v2}")

    # a re-run of the first spec finds its version and moves latest back to it
    code, out, err = run_cli(capsys, "run", str(GERMAN), "--store", str(store))
    assert code == 0, err + out
    assert out.startswith(f"exists: {PIPE} {v1}")
    assert latest_of(store) == v1

    # promote <store>/<pipeline>/<version>, and PIPELINE VERSION --store S
    code, out, err = run_cli(capsys, "promote", str(store / PIPE / v2))
    assert code == 0, err + out
    assert f"promoted: {PIPE} {v2}" in out and latest_of(store) == v2
    code, out, err = run_cli(capsys, "promote", PIPE, v1, "--store", str(store))
    assert code == 0, err + out
    assert latest_of(store) == v1

    # only an existing, complete release can be promoted
    code, out, err = run_cli(capsys, "promote", PIPE, "0123456789abcdef", "--store", str(store))
    assert code == 2 and "not a complete release" in err and "0123456789abcdef" in err
    (store / PIPE / v2 / "report.html").unlink()
    code, out, err = run_cli(capsys, "promote", str(store / PIPE / v2))
    assert code == 2, err + out
    assert "report.html is missing" in err and str(store / PIPE / v2) in err
    assert latest_of(store) == v1


def test_validate_follows_the_latest_pointer(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "validate", str(store / PIPE / "latest"))
    assert code == 0, err + out
    assert "FAIL" not in out and "hold" in out


def test_help_documents_latest(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "moves `latest` to the version it produced" in text
    assert "also when that version already existed" in text
    with pytest.raises(SystemExit):
        main(["promote", "--help"])
    assert "complete" in capsys.readouterr().out


# --- 3. listing, and what failed runs leave behind ----------------------------------------------
def test_releases_on_a_missing_store_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no" / "store"
    code, out, err = run_cli(capsys, "releases", "--store", str(missing))
    assert code == 0, err
    assert "no releases" in out and "does not exist" in out
    assert not (tmp_path / "no").exists()
    code, out, _ = run_cli(capsys, "releases", "--store", str(missing), "--json")
    assert code == 0 and json.loads(out) == []
    assert not (tmp_path / "no").exists()


def test_a_failed_contract_keeps_only_the_quarantined_candidate_and_it_is_listed(
    store: Path, published: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "german_broken.yaml"
    spec.write_text(BROKEN_SPEC)
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 1, err + out
    base = store / "german_broken"
    assert sorted(p.name for p in base.iterdir()) == [".quarantine"]  # no .staging, no version
    (q,) = (base / ".quarantine").iterdir()

    code, out, err = run_cli(capsys, "releases", "--store", str(store))
    assert code == 0, err
    (line,) = [x for x in out.splitlines() if x.startswith("german_broken")]
    assert "quarantined" in line and q.name in line and "failed" in line
    (pub,) = [x for x in out.splitlines() if x.startswith(PIPE)]
    assert published["version"] in pub and "(latest)" in pub and "quarantined" not in pub
    rows = json.loads(run_cli(capsys, "releases", "--store", str(store), "--json")[1])
    assert {(r["pipeline"], r["quarantined"]) for r in rows} == {
        (PIPE, None),
        ("german_broken", q.name),
    }


def test_refused_runs_leave_no_folder_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    # bad input: a column the spec names is not in the CSV
    bad = file_spec(tmp_path / "bad_input", "input.csv", name="bad_input")
    (tmp_path / "bad_input" / "input.csv").write_text(csv_text().replace("x,c,", "x,cc,", 1))
    code, out, err = run_cli(capsys, "run", str(bad), "--store", str(store))
    assert code == 2 and "column 'c'" in err, err + out
    # bad spec: a demand on a column that does not exist (refused before the component runs)
    raw = yaml.safe_load(GERMAN.read_text())
    raw["guarantees"] = [{"kind": "t_closeness", "attribute": "nosuch", "t": 0.1}]
    spec = tmp_path / "bad_spec.yaml"
    spec.write_text(yaml.safe_dump(raw))
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 2 and "guarantees.0.attribute" in err, err + out
    assert not store.exists()


# --- 4. checksums; an incomplete release is quarantined and rebuilt -----------------------------
def test_the_manifest_records_every_file_checksum(store: Path, published: dict) -> None:
    import hashlib

    folder = store / PIPE / published["version"]
    man = json.loads((folder / "manifest.json").read_text())
    files = {p.relative_to(folder).as_posix() for p in all_files(folder)} - {"manifest.json"}
    assert set(man["checksums"]) == files
    assert {"shared/data.parquet", "internal/lineage.parquet", "report.html"} <= files
    assert any(f.startswith("validation/") for f in files)
    for name, rec in man["checksums"].items():
        data = (folder / name).read_bytes()
        assert rec == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    assert release.verify_release(Store.open(store), PIPE, published["version"]) is None


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_corrupted_release_is_quarantined_and_rebuilt(
    store: Path, published: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    version = published["version"]
    folder = store / PIPE / version
    flip_a_byte(folder / "shared" / "data.parquet")  # same size, other bytes
    original = json.loads((folder / "manifest.json").read_text())["checksums"]

    code, out, err = run_cli(capsys, "run", str(GERMAN), "--store", str(store))
    assert code == 0, err + out
    assert (
        f"existing release {version} was incomplete or corrupted "
        "(shared/data.parquet checksum differs); quarantined and rebuilt"
    ) in err
    assert out.startswith(f"rebuilt: {PIPE} {version}")
    assert latest_of(store) == version
    rebuilt = json.loads((folder / "manifest.json").read_text())["checksums"]
    assert (
        rebuilt["shared/data.parquet"] == original["shared/data.parquet"]
    )  # deterministic: same bytes
    assert release.verify_release(Store.open(store), PIPE, version) is None
    (q,) = (store / PIPE / ".quarantine").iterdir()
    assert q.name.startswith(version) and (q / "shared" / "data.parquet").is_file()
    assert "checksum differs" in (q / "QUARANTINED.txt").read_text()

    # a complete release is reused as is
    code, out, err = run_cli(capsys, "run", str(GERMAN), "--store", str(store))
    assert code == 0 and out.startswith(f"exists: {PIPE} {version}") and not err


@pytest.mark.parametrize(
    "damage, problem",
    [
        (
            lambda f: (f / "internal" / "lineage.parquet").unlink(),
            "internal/lineage.parquet is missing",
        ),
        (lambda f: (f / "manifest.json").write_text("{not json"), "manifest.json cannot be read"),
        (lambda f: (f / "manifest.json").unlink(), "manifest.json is missing"),
        (lambda f: (f / "report.html").write_text("<html></html>"), "report.html size differs"),
    ],
    ids=["sidecar-missing", "manifest-unreadable", "manifest-missing", "report-changed"],
)
def test_verify_release_names_what_is_wrong(store: Path, published: dict, damage, problem) -> None:
    damage(store / PIPE / published["version"])
    assert problem in release.verify_release(Store.open(store), PIPE, published["version"])


def test_the_tasks_reuse_only_a_complete_release(
    store: Path, published: dict, tmp_path: Path
) -> None:
    from privfair.run import flow, tasks

    version = published["version"]
    spec = load_spec(GERMAN)
    ing = tasks.ingest_task(spec, tmp_path / "w" / "raw")
    assert ing.version == version
    prot = tasks.protect_task(spec, ing, tmp_path / "w" / "ok", store)
    assert prot.reused == str(store / PIPE / version) and prot.rebuilt is None

    (store / PIPE / version / "report.html").unlink()
    prot = tasks.protect_task(spec, ing, tmp_path / "w" / "again", store)
    assert prot.reused is None  # recomputed, not read from the damaged release
    assert prot.rebuilt and "report.html is missing" in prot.rebuilt
    assert not (store / PIPE / version).exists()  # moved to .quarantine
    assert len(list((store / PIPE / ".quarantine").iterdir())) == 1
    assert not flow.already_published(Store.open(store), PIPE, version)

    val = tasks.validate_task(prot, store)
    pub = tasks.publish_task(prot, val, store)
    assert pub.status == "rebuilt" and "report.html is missing" in pub.message
    assert release.verify_release(Store.open(store), PIPE, version) is None
    assert latest_of(store) == version


# --- 5. store failures: exit 2, the path and the rule, no traceback ----------------------------
def store_cases(tmp_path: Path) -> list[tuple[str, str, str]]:
    """(store argument, path named, rule) for each broken store."""
    a_file = tmp_path / "a_file"
    a_file.write_text("not a store")
    pipe_file = tmp_path / "pipe_is_file"
    pipe_file.mkdir()
    (pipe_file / PIPE).write_text("")
    latest_dir = tmp_path / "latest_is_dir"
    (latest_dir / PIPE / "latest").mkdir(parents=True)
    return [
        ("", "''", "not empty"),
        ("foo://x", "'foo://x'", "unknown or unusable store URI scheme 'foo://'"),
        (str(a_file), f"'{a_file}'", "is a file, not a folder"),
        (str(a_file / "below"), f"'{a_file / 'below'}'", f"lies below the file {a_file}"),
        (str(pipe_file), f"'{pipe_file / PIPE}'", "the pipeline folder is a file"),
        (str(latest_dir), f"'{latest_dir / PIPE / 'latest'}'", "'latest' is a folder"),
    ]


@pytest.mark.parametrize(
    "case",
    range(6),
    ids=["empty", "unknown-scheme", "file", "below-file", "pipe-file", "latest-dir"],
)
def test_store_failures_are_exit_2_naming_path_and_rule(
    case: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # whatever happens, nothing lands in the repository
    arg, path, rule = store_cases(tmp_path)[case]
    before = {p.relative_to(tmp_path) for p in tmp_path.rglob("*")}
    code, out, err = run_cli(capsys, "run", str(GERMAN), "--store", arg)
    assert code == 2, err + out
    assert err.startswith(f"privfair: error: store {path}: "), err
    assert rule in err and "Traceback" not in err
    assert {p.relative_to(tmp_path) for p in tmp_path.rglob("*")} == before  # nothing written
    if case != 4:  # a pipeline folder that is a file is skipped by the listing
        code, out, err = run_cli(capsys, "releases", "--store", arg)
        assert code == 2 and rule in err, err + out


def test_latest_that_is_a_folder_fails_validate_and_promote(
    store: Path, published: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    (store / PIPE / "latest").unlink()
    (store / PIPE / "latest").mkdir()
    for argv in (
        ("validate", str(store / PIPE / "latest")),
        ("promote", str(store / PIPE / published["version"])),
    ):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2, err + out
        assert f"store '{store / PIPE / 'latest'}'" in err and "'latest' is a folder" in err


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="running as root: chmod does not stop root from writing (the store below a file "
    "covers an unwritable store path)",
)
def test_a_read_only_store_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    store.mkdir()
    store.chmod(0o500)
    try:
        code, out, err = run_cli(capsys, "run", str(GERMAN), "--store", str(store))
    finally:
        store.chmod(0o700)
    assert code == 2, err + out
    assert err.startswith("privfair: error: store '") and "cannot" in err
    assert "permission denied" in err.lower()


# --- latest as a symlink any tool reads -------------------------------------------------------
def test_latest_is_a_relative_symlink_pandas_reads_through(store: Path, published: dict) -> None:
    """``<store>/<pipeline>/latest`` is ``latest -> <version>`` (relative: the store can move),
    so ``pd.read_parquet`` reads the shareable copy through it with no privfair code."""
    import pandas as pd

    link = store / PIPE / "latest"
    assert link.is_symlink() and os.readlink(link) == published["version"]
    man = json.loads((store / PIPE / published["version"] / "shared" / "manifest.json").read_text())
    name = sorted(n for n in man["checksums"] if n.endswith(".parquet"))[0]
    frame = pd.read_parquet(f"{store}/{PIPE}/latest/shared/{name}")  # as typed by a reader
    direct = pd.read_parquet(store / PIPE / published["version"] / "shared" / name)
    assert len(frame) > 0 and frame.equals(direct)
    moved = store.parent / "moved"
    store.rename(moved)  # relative: still resolves after the store folder moves
    assert (moved / PIPE / "latest" / "manifest.json").is_file()


def test_an_old_text_file_latest_is_still_read_and_replaced_by_a_symlink(
    store: Path, published: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store written before ``latest`` became a symlink: every reader follows the text file,
    and the next move of ``latest`` replaces it by a symlink in one rename."""
    v1 = published["version"]
    (store / PIPE / "latest").unlink()
    (store / PIPE / "latest").write_text(v1 + "\n")
    st = Store.open(store)
    assert release.latest(st, PIPE) == v1
    assert release.resolve_release(store / PIPE / "latest") == store / PIPE / v1
    code, out, err = run_cli(capsys, "validate", str(store / PIPE / "latest"))
    assert code == 0, err + out
    assert [r["latest"] for r in release.list_releases(st)] == [True]
    code, out, err = run_cli(
        capsys, "run", str(german_variant(tmp_path, 11)), "--store", str(store)
    )
    assert code == 0, err + out
    v2 = out.split()[2]
    assert (store / PIPE / "latest").is_symlink() and read_latest(store / PIPE) == v2
    assert not [p for p in (store / PIPE).iterdir() if p.name.startswith(".latest-")]
    # promote over the symlink; then quarantining the release latest names repairs it
    assert release.set_latest(st, PIPE, v1) and os.readlink(store / PIPE / "latest") == v1
    release.quarantine_release(st, PIPE, v1, "test")
    assert os.readlink(store / PIPE / "latest") == v2


def test_a_remote_store_keeps_the_text_file(tmp_path: Path) -> None:
    """A ``pyarrow.fs`` store other than the local one has no symlinks: ``latest`` stays a text
    file naming the version (here the local disk seen through a SubTreeFileSystem, which is not
    a ``LocalFileSystem``)."""
    import pyarrow.fs as pafs

    (tmp_path / "p" / "v1").mkdir(parents=True)
    st = Store(pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()), "")
    assert not st.local
    assert release.set_latest(st, "p", "v1")
    assert not (tmp_path / "p" / "latest").is_symlink()
    assert (tmp_path / "p" / "latest").read_text() == "v1" and release.latest(st, "p") == "v1"


# --- what differs between versions -------------------------------------------------------------
def test_releases_says_what_differs_from_the_previous_version(
    store: Path, published: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys, "run", str(german_variant(tmp_path, 11)), "--store", str(store)
    )
    assert code == 0, err + out
    v2 = out.split()[2]
    code, out, err = run_cli(capsys, "releases", "--store", str(store))
    assert code == 0, err
    lines = out.splitlines()
    at = {ln.split()[1]: i for i, ln in enumerate(lines) if ln.startswith(PIPE)}
    assert lines[at[v2] + 1].strip() == "params k: 10 -> 11; input same; code same"
    assert lines[at[published["version"]] + 1].strip() == "first release"
    code, out, err = run_cli(capsys, "releases", "--store", str(store), "--json")
    rows = {r["version"]: r for r in json.loads(out)}
    assert rows[v2]["changes"] == {
        "params": {"k": {"from": 10, "to": 11}},
        "input_changed": False,
        "code_changed": False,
    }
    assert rows[published["version"]]["changes"] is None
    # what is compared stays out of the listing (the input fingerprint is the owner's)
    assert all(not k.startswith("_") for r in rows.values() for k in r)


def test_a_file_system_without_symlinks_gets_the_text_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a symlink cannot be made (some mounted file systems), ``latest`` is the text file,
    and a later move replaces it as before."""

    def no_symlinks(*a, **k):
        raise OSError(1, "Operation not permitted")

    (tmp_path / "p" / "v1").mkdir(parents=True)
    (tmp_path / "p" / "v2").mkdir()
    st = Store.open(tmp_path)
    monkeypatch.setattr(os, "symlink", no_symlinks)
    assert release.set_latest(st, "p", "v1")
    assert not (tmp_path / "p" / "latest").is_symlink()
    assert (tmp_path / "p" / "latest").read_text() == "v1" and release.latest(st, "p") == "v1"
    assert release.set_latest(st, "p", "v2") and release.latest(st, "p") == "v2"
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == [".staging", "latest", "v1", "v2"]
