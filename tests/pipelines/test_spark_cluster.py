"""Releases on a real Spark standalone cluster (``tests/_spark_cluster.py``): a master and a worker
started with pyspark's own ``spark-class``, the worker running as another OS user, so the
executors read nothing of the driver's private folders. A blocked Fair-MDAV release and a
dMondrian release published through it are byte for byte the local engine's; a cluster that
cannot be used ends in exit 2 naming it, never a Java stack.

Each ``privfair run`` on the cluster is a subprocess (as a user runs it): this test session may
hold a ``local[2]`` Spark session already, and a process has one Spark context."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from _shared import run_cli
from _spark_cluster import Cluster, start_or_skip

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "pipelines" / "specs"


@pytest.fixture(scope="module")
def cluster():
    root = Path(tempfile.mkdtemp(prefix="privfair-cluster-"))
    c = start_or_skip(root)
    yield c
    c.stop()
    shutil.rmtree(root, ignore_errors=True)


def run_on(cluster: Cluster, *argv: str, env: dict | None = None, timeout: float = 600):
    """``privfair run ...`` in a subprocess whose driver uses ``cluster``."""
    full = {**cluster.env(), "PRIVFAIR_SPARK_CONNECT_TIMEOUT": "120", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "privfair.cli", "run", *argv],
        cwd=REPO,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(pid)


def test_the_worker_runs_as_another_user_and_is_registered(cluster):
    import pwd

    alive = cluster.alive_workers()
    assert len(alive) == 1 and alive[0]["host"] == "127.0.0.1", alive
    master, worker = cluster.procs
    assert _uid(master.pid) == os.geteuid()
    assert _uid(worker.pid) == pwd.getpwnam(cluster.user).pw_uid != os.geteuid()


def _published(store: Path, name: str, out: str) -> tuple[str, bytes]:
    version = out.split()[2]
    return version, (store / name / version / "shared" / "data.parquet").read_bytes()


BLOCKED = {
    "fair_mdav_blocked": ("german_fair_mdav.yaml", ["--set", "block_rows=300"]),
    "dmondrian": ("german_dmondrian.yaml", ["--set", "block_rows=300"]),
}
_LOCAL: dict[str, tuple[str, bytes]] = {}


def local_release(case: str, capsys, tmp_path: Path) -> tuple[str, bytes]:
    """(version, published bytes) of ``case`` on the local engine, once per module."""
    if case not in _LOCAL:
        spec, more = BLOCKED[case]
        store = tmp_path / "local"
        code, out, err = run_cli(capsys, "run", str(SPECS / spec), *more, "--store", str(store))
        assert code == 0, err
        _LOCAL[case] = _published(store, spec.removesuffix(".yaml"), out)
    return _LOCAL[case]


def release_on(cluster: Cluster, master: str, case: str, tmp_path: Path) -> tuple[str, bytes]:
    spec, more = BLOCKED[case]
    name = spec.removesuffix(".yaml")
    store = tmp_path / "spark"
    proc = run_on(
        cluster,
        str(SPECS / spec),
        *more,
        *("--engine", "spark", "--master", master, "--store", str(store)),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the spark engine ran nothing" not in proc.stdout + proc.stderr
    got = _published(store, name, proc.stdout)
    man = json.loads((store / name / got[0] / "manifest.json").read_text())
    assert man["execution"]["engine"] == "spark"
    assert man["execution"]["master"] == master
    return got


@pytest.mark.parametrize("case", list(BLOCKED))
def test_a_release_through_the_cluster_is_the_local_release(cluster, tmp_path, capsys, case):
    """The issue's reproduction: the blocks went to the executors as a Parquet file in the
    driver's private temp folder (``FileNotFoundException``, exit 1 with a Java stack). Now
    they go as Arrow batches over Spark's own connections: same version, same bytes."""
    local = local_release(case, capsys, tmp_path)
    spark = release_on(cluster, cluster.url, case, tmp_path)
    assert spark[0] == local[0]  # the same version
    assert spark[1] == local[1]  # the same published bytes


def test_a_release_through_spark_connect_is_the_local_release(cluster, tmp_path, capsys):
    """``--master sc://...``: a Spark Connect server (pyspark's ``start-connect-server.sh``)
    driving the same cluster; the driver here is a Connect client, no JVM of its own."""
    url, server = cluster.start_connect()
    try:
        local = local_release("fair_mdav_blocked", capsys, tmp_path)
        assert release_on(cluster, url, "fair_mdav_blocked", tmp_path) == local
    finally:
        cluster.end(server)


def _one_error(proc) -> str:
    assert proc.returncode == 2, proc.stderr[-3000:]
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith("privfair: error:")]
    assert len(ours) == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert not [ln for ln in proc.stderr.splitlines() if ln.lstrip().startswith("at org.")]
    return ours[0]


def test_a_cluster_that_gives_no_executor_is_exit_2_naming_it(cluster, tmp_path):
    """Executors asked bigger than any worker: Spark alone waits for ever ("Initial job has
    not accepted any resources"); privfair gives up after the connect timeout."""
    spec, more = BLOCKED["fair_mdav_blocked"]
    proc = run_on(
        cluster,
        str(SPECS / spec),
        *more,
        *("--engine", "spark", "--master", cluster.url, "--store", str(tmp_path / "s")),
        *("--conf", "spark.executor.memory=64g"),
        env={"PRIVFAIR_SPARK_CONNECT_TIMEOUT": "45"},
    )
    line = _one_error(proc)
    assert f"the Spark cluster at '{cluster.url}' gave this application no executor" in line
    assert not (tmp_path / "s" / "german_fair_mdav").exists()


def test_a_failing_spark_job_is_exit_2_naming_the_cluster(cluster, tmp_path):
    """The executors cannot start the Python it names (``--conf spark.pyspark.python``): the
    job fails; one line names the cluster and what the task hit."""
    spec, more = BLOCKED["fair_mdav_blocked"]
    proc = run_on(
        cluster,
        str(SPECS / spec),
        *more,
        *("--engine", "spark", "--master", cluster.url, "--store", str(tmp_path / "s")),
        *("--conf", "spark.pyspark.python=/nonexistent/python3"),
    )
    line = _one_error(proc)
    assert f"the Spark cluster at '{cluster.url}' failed running the blocks" in line, line
    assert "/nonexistent/python3" in line, line


def test_a_bad_setting_is_refused_naming_it(tmp_path, capsys):
    spec, more = BLOCKED["fair_mdav_blocked"]
    code, _, err = run_cli(
        capsys, "run", str(SPECS / spec), "--conf", "spark.executor.memory", "--engine", "spark"
    )
    assert code == 2 and "--conf" in err and "key=value" in err, err
    code, _, err = run_cli(capsys, "run", str(SPECS / spec), "--conf", "a=b")
    assert code == 2 and "'conf' and 'scratch' are Spark settings" in err, err


def test_the_callers_spark_session_runs_the_release(spark_engine, tmp_path, capsys):
    """``privfair.api.run(spec, spark=session)``: the caller's session (here the suite's
    ``local[2]``) serves the run, and is left running."""
    from privfair import api

    local = local_release("fair_mdav_blocked", capsys, tmp_path)
    session = spark_engine.spark
    release = api.run(
        SPECS / "german_fair_mdav.yaml",
        store=tmp_path / "api",
        params={"block_rows": 300},
        spark=session,
    )
    assert release.version == local[0]
    data = tmp_path / "api" / "german_fair_mdav" / local[0] / "shared" / "data.parquet"
    assert data.read_bytes() == local[1]
    man = json.loads((Path(release.path) / "manifest.json").read_text())
    assert man["execution"]["engine"] == "spark"
    session.range(1).count()  # still running


def test_a_spec_s_scratch_and_conf_reach_the_cluster(cluster, tmp_path, capsys):
    """``execution: {engine: spark, master, conf, scratch}`` in the spec: the blocks reach the
    executors as Parquet in a folder of the run under ``scratch`` (0755: the worker's user
    reads it), removed after; the version is the spec's without ``execution``."""
    import yaml

    local = local_release("fair_mdav_blocked", capsys, tmp_path)
    raw = yaml.safe_load((SPECS / "german_fair_mdav.yaml").read_text())
    scratch = cluster.root / "scratch"
    scratch.mkdir(exist_ok=True)
    raw["component"]["params"]["block_rows"] = 300
    raw["execution"] = {
        "engine": "spark",
        "master": cluster.url,
        "scratch": str(scratch),
        "conf": {"spark.sql.shuffle.partitions": 4, "spark.executor.memory": "1g"},
    }
    spec = tmp_path / "german_fair_mdav.yaml"
    spec.write_text(yaml.safe_dump(raw))
    proc = run_on(cluster, str(spec), "--store", str(tmp_path / "s"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _published(tmp_path / "s", "german_fair_mdav", proc.stdout) == local
    assert list(scratch.iterdir()) == []  # the run's folder is gone


def test_a_setting_spark_cannot_start_with_is_exit_2_naming_it(tmp_path):
    """``--conf spark.driver.memory=banana``: the JVM does not start; one line names the
    master and the settings given (a subprocess: this session may run a Spark context)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime")
    spec, more = BLOCKED["fair_mdav_blocked"]
    proc = subprocess.run(
        [sys.executable, "-m", "privfair.cli", "run", str(SPECS / spec), *more]
        + ["--engine", "spark", "--master", "local[1]", "--store", str(tmp_path / "s")]
        + ["--conf", "spark.driver.memory=banana"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = _one_error(proc)
    assert "no Spark session on 'local[1]'" in line, line
    assert "spark.driver.memory=banana" in line, line
