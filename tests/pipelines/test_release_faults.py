"""Publishing under faults and races, with real processes.

Each test runs a release in a subprocess and kills it (``crash_after`` hooks that ``os._exit``,
or SIGKILL from outside) at one step of publishing, then checks the store invariant:

* every ``<store>/<pipeline>/<version>/`` folder is a complete release (manifest.json,
  shared/data.parquet, internal/lineage.parquet, report.html, validation passed); nothing else is
  published;
* ``latest`` is absent or names a complete release;

and that a normal re-run recovers (publishes, or finds the version and repairs ``latest``).
Concurrent runs of one spec publish exactly one version; a failing contract publishes nothing
and leaves the candidate, with its validation results, in ``.quarantine/``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from privfair import cli
from privfair.release.store import LATEST, QUARANTINE, STAGING, Store, latest, repair_latest
from privfair.release.version import code_version
from privfair.run.flow import ingest, run_release, version_id
from privfair.spec.catalogue import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "pipelines" / "specs"
GERMAN = SPECS / "german_fair_mdav.yaml"
ADULT_MDAV = SPECS / "adult_mdav.yaml"
RELEASE_FILES = {"manifest.json", "shared/data.parquet", "internal/lineage.parquet", "report.html"}
# manifest.json's published_at: UTC with microseconds (repair_latest orders releases by it)
STAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")

# The child: optional pause points (env PAUSE_AT) print a marker and sleep, so the parent can
# SIGKILL it at a known step; "component" only prints (the real component keeps running).
CHILD = textwrap.dedent(
    """
    import os, sys, time
    import privfair.run.flow as run
    import privfair.release.store as release
    from privfair.spec.catalogue import load_spec

    pause_at = os.environ.get("PAUSE_AT", "")
    barrier = os.environ.get("BARRIER_DIR")

    def mark(what, pause):
        print(f"at:{what}", flush=True)
        if pause:
            time.sleep(60)

    orig_protect = run.protect
    def protect(*a, **k):
        mark("component", False)
        return orig_protect(*a, **k)
    run.protect = protect

    orig_write = release.Candidate.write
    def write(self, name, data):
        orig_write(self, name, data)
        if name == "shared/data.parquet" and pause_at == "candidate":
            mark("candidate", True)
    release.Candidate.write = write

    orig_publish = release.Candidate.publish
    def publish(self, *a, **k):
        if barrier:  # every racer has a validated candidate before anyone renames
            n = int(os.environ["BARRIER_N"])
            open(os.path.join(barrier, str(os.getpid())), "w").close()
            t0 = time.time()
            while len(os.listdir(barrier)) < n and time.time() - t0 < 120:
                time.sleep(0.02)
        return orig_publish(self, *a, **k)
    release.Candidate.publish = publish

    spec_path, store, crash = sys.argv[1], sys.argv[2], sys.argv[3] or None
    out = run.run_release(load_spec(spec_path), store, crash_after=crash)
    print(f"status:{out.status} {out.version}", flush=True)
    """
)


def child(spec: Path, store: Path, crash: str = "", **env: str) -> subprocess.Popen:
    """Start a release in a fresh interpreter (inheriting PRIVFAIR_DATA_DIR and the cache dir)."""
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(spec), str(store), crash],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(proc: subprocess.Popen, marker: str, timeout: float = 120.0) -> None:
    """Read the child's stdout until ``marker`` (a line ``at:<marker>``) appears."""
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == f"at:{marker}":
            return
        if time.monotonic() > deadline:
            break
    proc.kill()
    _, err = proc.communicate()
    raise AssertionError(f"child never reached '{marker}' (rc={proc.returncode}):\n{err[-3000:]}")


def sigkill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def files_of(folder: Path) -> set[str]:
    """Every file of a release folder, as a path relative to it."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def published_versions(store: Path, pipeline: str) -> list[str]:
    """Check the store invariant for ``pipeline`` and return its published versions."""
    base = store / pipeline
    if not base.exists():
        return []
    versions = []
    for entry in sorted(base.iterdir()):
        if entry.name.startswith("."):
            assert entry.name in (STAGING, QUARANTINE), f"unexpected hidden entry {entry}"
            continue
        if entry.is_file() or entry.is_symlink():  # latest: a symlink, or an old text file
            assert entry.name == LATEST, f"stray file in the release folder: {entry}"
            continue
        missing = RELEASE_FILES - files_of(entry)
        assert not missing, f"partial release {entry.name}: missing {sorted(missing)}"
        man = json.loads((entry / "manifest.json").read_text())
        assert man["version"] == entry.name
        assert man["validation"]["status"] == "passed"
        rows = man["metrics"]["output_rows"]
        assert man["outputs"]["data"] == {"file": "shared/data.parquet", "rows": rows}
        assert man["sidecars"]["lineage"]["file"] == "internal/lineage.parquet"
        assert pq.read_metadata(entry / "shared" / "data.parquet").num_rows == rows
        assert pq.read_metadata(entry / "internal" / "lineage.parquet").num_rows == rows
        assert (entry / "report.html").read_text().rstrip().endswith("</html>")
        versions.append(entry.name)
    cur = latest(Store.open(store), pipeline)
    if cur is not None:
        assert cur in versions, f"latest names {cur!r}, not a complete release ({versions})"
    return versions


def staging_entries(store: Path, pipeline: str) -> list[str]:
    d = store / pipeline / STAGING
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def spec_variant(tmp_path: Path, name: str, **changes) -> Path:
    raw = yaml.safe_load(GERMAN.read_text())
    raw["name"] = name
    # variants publish other groupings of the same rows on purpose (not part of the version)
    raw["republish"] = "allow"
    for k, v in changes.items():
        raw[k] = v
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def rerun(spec, store: Path):
    """A normal in-process run. The code version is recomputed first, as a fresh process would
    (it is cached per process, and the children computed theirs from the files as they are)."""
    code_version.cache_clear()
    return run_release(spec, store)


# --- crashes at each step of publishing --------------------------------------------------------


def test_crash_after_validate_publishes_nothing_and_rerun_publishes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = child(GERMAN, store, "validate")
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 17, err[-3000:]
    assert "status:" not in out

    assert published_versions(store, "german_fair_mdav") == []
    assert latest(Store.open(store), "german_fair_mdav") is None
    # the validated candidate is left in staging, where no reader looks
    (cand,) = staging_entries(store, "german_fair_mdav")
    assert files_of(store / "german_fair_mdav" / STAGING / cand) >= RELEASE_FILES

    res = rerun(load_spec(GERMAN), store)
    assert res.status == "published"
    assert published_versions(store, "german_fair_mdav") == [res.version]
    assert latest(Store.open(store), "german_fair_mdav") == res.version


def test_crash_between_rename_and_latest_is_repaired_by_rerun(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = child(GERMAN, store, "rename")
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 17, err[-3000:]

    (version,) = published_versions(store, "german_fair_mdav")  # complete, already in place
    assert latest(Store.open(store), "german_fair_mdav") is None

    res = rerun(load_spec(GERMAN), store)
    assert (res.status, res.version) == ("exists", version)
    assert published_versions(store, "german_fair_mdav") == [version]
    assert latest(Store.open(store), "german_fair_mdav") == version


def test_crash_after_rename_of_a_newer_version_moves_latest_on_rerun(tmp_path: Path) -> None:
    """``latest`` names an older release when the newer one crashes before moving it; the
    re-run that finds the newer version moves ``latest`` forward to it. A re-run moves
    ``latest`` to the version it produced, so re-running the older spec moves it back (by
    design); ``repair_latest`` (run when the release ``latest`` names is quarantined) points
    it at the newest published release by publication time, not by version name."""
    store = tmp_path / "store"
    # version ids are hashes that change with the code: pick the older spec among variants so
    # that its id sorts in the upper half, then a newer one sorting below it (each try has odds
    # of at least one half, so the search cannot run dry in practice)
    fingerprint = ingest(load_spec(GERMAN)).input["fingerprint"]

    def variant(k: int, name: str) -> Path:
        (tmp_path / name).mkdir(exist_ok=True)
        return spec_variant(
            tmp_path / name,
            "german_fair_mdav",
            component={"name": "fair_mdav", "params": {"k": k, "tau": 1.0}},
        )

    older = next(
        p
        for k in range(10, 200)
        if version_id(load_spec(p := variant(k, f"o{k}")), fingerprint) >= "8"
    )
    old = rerun(load_spec(older), store)
    assert old.status == "published"
    old_man = json.loads((Path(old.path) / "manifest.json").read_text())
    old_at = old_man["published_at"]
    assert STAMP.fullmatch(old_at), old_at  # the stamp's format, microseconds included
    # wait until the clock, in the stamp's own format, is past the old stamp (fixed width,
    # so the strings order as the times do): the newer release is stamped strictly later
    deadline = time.monotonic() + 5
    while datetime.now(UTC).strftime(STAMP_FORMAT) <= old_at:
        assert time.monotonic() < deadline, f"the clock never passed {old_at}"
        time.sleep(0.001)

    # a newer spec whose version id sorts BEFORE the old one: picking the newest by name (or
    # folder listing order) instead of by published_at would leave latest on the old version
    assert old_man["input"]["fingerprint"] == fingerprint
    newer = next(
        (
            p
            for k in range(200, 400)
            if version_id(load_spec(p := variant(k, f"n{k}")), fingerprint) < old.version
        ),
        None,
    )
    assert newer is not None, "no k in 200..399 gives a version id sorting before the old one"

    proc = child(newer, store, "rename")
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 17, err[-3000:]
    versions = published_versions(store, "german_fair_mdav")
    assert len(versions) == 2
    assert latest(Store.open(store), "german_fair_mdav") == old.version  # still the old one
    (new_version,) = set(versions) - {old.version}
    assert new_version < old.version
    new_at = json.loads((store / "german_fair_mdav" / new_version / "manifest.json").read_text())[
        "published_at"
    ]
    assert STAMP.fullmatch(new_at), new_at
    assert new_at > old_at

    # the re-run of the crashed spec finds its complete version and repairs latest
    res = rerun(load_spec(newer), store)
    assert res.status == "exists" and res.version == new_version
    assert latest(Store.open(store), "german_fair_mdav") == new_version
    assert published_versions(store, "german_fair_mdav") == versions  # nothing rebuilt

    # re-running the older spec moves latest back to its version (a re-run points latest at
    # the version it produced, also one that already existed)
    again = rerun(load_spec(older), store)
    assert (again.status, again.version) == ("exists", old.version)
    assert latest(Store.open(store), "german_fair_mdav") == old.version
    assert published_versions(store, "german_fair_mdav") == versions

    # the repair points latest at the newest release by published_at: the newer version,
    # although its id sorts first; once there, it is left alone
    assert repair_latest(Store.open(store), "german_fair_mdav") == new_version
    assert latest(Store.open(store), "german_fair_mdav") == new_version
    pointer = store / "german_fair_mdav" / LATEST
    before = pointer.stat().st_mtime_ns
    assert repair_latest(Store.open(store), "german_fair_mdav") == new_version
    assert pointer.stat().st_mtime_ns == before


def test_sigkill_while_writing_the_candidate(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = child(GERMAN, store, PAUSE_AT="candidate")
    wait_for(proc, "candidate")
    sigkill(proc)

    assert published_versions(store, "german_fair_mdav") == []
    assert latest(Store.open(store), "german_fair_mdav") is None
    (cand,) = staging_entries(store, "german_fair_mdav")  # half-written, ignored
    written = files_of(store / "german_fair_mdav" / STAGING / cand)
    assert "shared/data.parquet" in written and "manifest.json" not in written

    res = rerun(load_spec(GERMAN), store)
    assert res.status == "published"
    assert published_versions(store, "german_fair_mdav") == [res.version]
    assert latest(Store.open(store), "german_fair_mdav") == res.version


@pytest.mark.slow
def test_sigkill_while_the_component_runs(tmp_path: Path) -> None:
    """Adult through MDAV takes seconds in the component: kill -9 one second into it."""
    store = tmp_path / "store"
    proc = child(ADULT_MDAV, store)
    wait_for(proc, "component")
    time.sleep(1.0)
    assert proc.poll() is None, "the component finished before it could be killed"
    sigkill(proc)

    assert published_versions(store, "adult_mdav") == []
    assert latest(Store.open(store), "adult_mdav") is None

    res = rerun(load_spec(ADULT_MDAV), store)
    assert res.status == "published"
    assert published_versions(store, "adult_mdav") == [res.version]
    assert latest(Store.open(store), "adult_mdav") == res.version


# --- concurrency -------------------------------------------------------------------------------


def test_concurrent_runs_publish_exactly_one_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three runs of one spec into one store at once. A barrier holds every run after it has a
    validated candidate until all three have one, so all three race on the rename."""
    store = tmp_path / "store"
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {"BARRIER_DIR": str(barrier), "BARRIER_N": "3"}
    procs = [child(GERMAN, store, **env) for _ in range(3)]
    results = [p.communicate(timeout=300) for p in procs]
    statuses = []
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err[-3000:]
        (line,) = [ln for ln in out.splitlines() if ln.startswith("status:")]
        statuses.append(line.removeprefix("status:").split())
    assert sorted(s for s, _ in statuses) == ["exists", "exists", "published"]
    assert len({v for _, v in statuses}) == 1

    (version,) = published_versions(store, "german_fair_mdav")
    assert version == statuses[0][1]
    assert latest(Store.open(store), "german_fair_mdav") == version
    assert staging_entries(store, "german_fair_mdav") == []  # losers discarded their candidates

    # `privfair validate` re-checks the published files from scratch (in-process: same code)
    assert cli.main(["validate", str(store / "german_fair_mdav" / version)]) == 0
    assert "FAIL" not in capsys.readouterr().out


# --- a failing contract ------------------------------------------------------------------------


def test_failing_contract_publishes_nothing_and_quarantines(tmp_path: Path) -> None:
    store = tmp_path / "store"
    spec = spec_variant(tmp_path, "german_k50", guarantees=[{"kind": "k_anonymity", "k": 50}])
    proc = subprocess.run(
        [sys.executable, "-m", "privfair.cli", "run", str(spec), "--store", str(store)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "release not published" in proc.stderr
    assert "k_anonymity" in proc.stderr

    assert published_versions(store, "german_k50") == []
    assert not (store / "german_k50" / LATEST).exists()
    assert staging_entries(store, "german_k50") == []
    (q,) = (store / "german_k50" / QUARANTINE).iterdir()
    assert files_of(q) >= RELEASE_FILES
    man = json.loads((q / "manifest.json").read_text())
    v = man["validation"]
    assert v["status"] == "failed"
    failed = [r for r in v["results"] if not r["passed"]]
    assert [(r["kind"], r["expected"], r["observed"]) for r in failed] == [("k_anonymity", 50, 10)]
    assert "FAIL" in (q / "report.html").read_text()
