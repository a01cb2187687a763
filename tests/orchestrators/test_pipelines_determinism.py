"""Determinism across processes: the same spec (German, Fair-MDAV) released by two separate
``privfair run`` processes, side by side, into two different stores, from different working
directories and with different string-hash seeds (``PYTHONHASHSEED``: set and dict-of-set
iteration orders differ between them), publishes the same version id and byte-identical
Parquet files. A re-run inside one process cannot show this: both runs would share one hash
seed, one import order and any state cached in the process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _shared import read_latest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
GERMAN = REPO / "pipelines" / "specs" / "german_fair_mdav.yaml"
PRIVFAIR = Path(sys.executable).parent / "privfair"
HASH_SEEDS = ("1", "2")
# What may differ between two publications of one version: when it happened, how long it took,
# and the checksums of the files stamped with those (report, validation artefacts); the
# checksums of the published tables are compared on their own.
RUN_STAMPS = {"published_at", "timings", "checksums"}


def _start(tmp: Path, i: int, seed: str) -> tuple[subprocess.Popen, Path]:
    cwd, store = tmp / f"cwd{i}", tmp / f"store{i}"
    cwd.mkdir()
    (store / ".privfair").mkdir(parents=True)  # one store's key: the same public release id
    (store / ".privfair" / "secret").write_text("ef" * 32)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRIVFAIR_SPECS", "AIRFLOW"))}
    env.pop("PRIVFAIR_STORE", None)
    env.update(PYTHONHASHSEED=seed, PRIVFAIR_CACHE_DIR=str(tmp / f"cache{i}"))
    proc = subprocess.Popen(
        [str(PRIVFAIR), "run", str(GERMAN), "--store", str(store)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, store


def _published(proc: subprocess.Popen, store: Path) -> tuple[str, Path]:
    """Wait for one run; its version id (from its output) and its release folder."""
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    status, pipeline, version = out.splitlines()[0].replace(":", "").split()
    assert (status, pipeline) == ("published", "german_fair_mdav"), out
    release = store / pipeline / version
    assert f"release: {release}" in out, out
    versions = [p.name for p in (store / pipeline).iterdir() if not p.name.startswith(".")]
    assert sorted(versions) == sorted([version, "latest"])
    assert read_latest(store / pipeline) == version
    return version, release


def test_two_processes_publish_byte_identical_releases(tmp_path: Path):
    from privfair.components.core.registry import family_of
    from privfair.release.version import code_version
    from privfair.run.flow import release_files, version_id
    from privfair.spec.catalogue import algorithm_of, load_spec

    started = [_start(tmp_path, i, seed) for i, seed in enumerate(HASH_SEEDS)]
    (v1, r1), (v2, r2) = [_published(proc, store) for proc, store in started]
    assert r1.parent.parent != r2.parent.parent  # two different stores

    m1, m2 = (json.loads((r / "manifest.json").read_text()) for r in (r1, r2))
    assert m1["code_version"] == m2["code_version"], "code changed between the two runs; re-run"
    assert v1 == v2 == m1["version"] == m2["version"]
    # and the version this (third) process derives from the spec and the recorded input
    spec = load_spec(GERMAN)
    mine = code_version(family_of(algorithm_of(spec)).package)
    assert mine == m1["code_version"], "code changed since this process started; re-run"
    assert version_id(spec, m1["input"]["fingerprint"]) == v1

    outputs, sidecars = release_files(m1)
    assert outputs == {"data": "shared/data.parquet"}
    assert sidecars == {"lineage": "internal/lineage.parquet"}
    assert release_files(m2) == (outputs, sidecars)
    for name in (*outputs.values(), *sidecars.values()):
        a, b = (r1 / name).read_bytes(), (r2 / name).read_bytes()
        assert len(a) > 1000, name
        assert a == b, f"{name} differs between the two processes"
        if "checksums" in m1:  # the manifest records them: the same for both releases
            assert m1["checksums"][name] == m2["checksums"][name], name
    if "checksums" in m1:  # the same files (Great Expectations' Data Docs name theirs by time)
        listed1, listed2 = (
            sorted(n for n in m["checksums"] if not n.startswith("validation/data_docs/"))
            for m in (m1, m2)
        )
        assert listed1 == listed2 and {*outputs.values(), *sidecars.values()} <= set(listed1)
    # the shareable copy is byte for byte the same (it records no time)
    for name in ("shared/manifest.json", "shared/report.html"):
        assert (r1 / name).read_bytes() == (r2 / name).read_bytes(), name
    # everything else the manifests record matches too, except when and how fast it ran
    same1, same2 = (
        {
            # the ledger's run id and entry number are stamps (the two runs share the owner's
            # ledger: one is entry 1, the other entry 2)
            k: ({**v, "run": None, "entry": None} if k == "ledger" else v)
            for k, v in m.items()
            if k not in RUN_STAMPS
        }
        for m in (m1, m2)
    )
    assert same1 == same2
    assert m1["validation"]["status"] == "passed" and m1["outputs"]["data"]["rows"] == 980
