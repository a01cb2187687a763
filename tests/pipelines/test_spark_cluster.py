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


# --- an input the driver cannot read: MST's rows stay on the cluster --------------------------
#: Run as ``python RECORDER OUT privfair-args...``: ``privfair run`` with every exact marginal of
#: the input the release counted (``Marginals``: every 1-way and every 2-way over the declared
#: domains; which ones does not depend on the noise) written to OUT as JSON at exit. OpenDP's
#: noise takes no seed, so two MST releases never share their noisy bytes: what must be the
#: same on both engines is every exact count the mechanism read, and every file the noise does
#: not touch.
RECORDER = """
import atexit, json, sys
import numpy as np
from privfair.components.synthesis import marginals as M

out, seen = sys.argv[1], {}
count = M.Marginals.count

def recorded(self, cliques):
    count(self, cliques)
    for c, s in self._sparse.items():  # (codes..., count) of each cell present, sorted
        seen[",".join(map(str, c))] = sorted(zip(*(v.tolist() for v in s.cells), s.count.tolist()))

M.Marginals.count = recorded
atexit.register(lambda: open(out, "w").write(json.dumps(seen, sort_keys=True)))
from privfair.cli import main
sys.exit(main(sys.argv[2:]))
"""
#: the driver as root without the capabilities that let root read any file: it reads what a
#: plain user reads, and the input below is its owner's alone
NO_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


def _private_input(cluster, table, spec_file: str, name: str, keep: bool = False):
    """(spec file, readable folder, private folder): ``table`` as a Parquet file twice, the
    same bytes: a copy anyone reads, and one that only the worker's user reads (0600, its own,
    in a folder the driver lists but whose file it cannot open). The spec (``spec_file``'s,
    renamed ``name``, its dataset that file with ``table``'s roles) names the file
    relatively: each run finds it through its --data-dir, and the two runs have one spec, so
    one version."""
    import pwd

    import pyarrow.parquet as pq
    import yaml

    from privfair.io.ingest import _column_spec
    from privfair.schemas.roles import read_roles

    root = cluster.root / f"private-{name}"
    readable, private = root / "readable", root / "private"
    for d in (root, readable, private):
        d.mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o755)
    pq.write_table(table.replace_schema_metadata(None), readable / "input.parquet")
    shutil.copyfile(readable / "input.parquet", private / "input.parquet")
    pw = pwd.getpwnam(cluster.user)
    os.chown(private, pw.pw_uid, pw.pw_gid)
    os.chown(private / "input.parquet", pw.pw_uid, pw.pw_gid)
    os.chmod(private / "input.parquet", 0o600)
    raw = yaml.safe_load((SPECS / spec_file).read_text())
    raw.pop("budget", None)
    raw["name"] = name
    cols = {
        c.name: _column_spec(c).model_dump(mode="json", exclude_none=True)
        for c in read_roles(table)
    }
    raw["dataset"] = {"path": "input.parquet", "columns": cols}
    if keep:  # as adult_mst: its ignored columns are synthesised
        raw["dataset"]["unlabelled"] = "keep"
    spec = root / "spec" / f"{name}.yaml"
    spec.parent.mkdir(exist_ok=True)
    spec.write_text(yaml.safe_dump(raw))
    probe = subprocess.run([*NO_DAC, "cat", str(private / "input.parquet")], capture_output=True)
    assert probe.returncode != 0 and b"Permission denied" in probe.stderr  # the premise
    return spec, readable, private


@pytest.fixture(scope="module")
def private_adult(cluster):
    """1000 Adult rows with adult_mst's roles, only the worker's user reading them."""
    from privfair.run.flow import ingest
    from privfair.spec.catalogue import load_spec

    table = ingest(load_spec(SPECS / "adult_mst.yaml")).table.slice(0, 1000)
    return _private_input(cluster, table, "adult_mst.yaml", "adult_mst_private", keep=True)


def _recorded_run(cluster, tmp_path, which: str, spec: Path, data: Path, *more: str):
    recorder = tmp_path / "recorder.py"
    recorder.write_text(RECORDER)
    counts = tmp_path / f"{which}.json"
    proc = subprocess.run(
        [*NO_DAC, sys.executable, str(recorder), str(counts), "run", str(spec)]
        + ["--data-dir", str(data), "--store", str(tmp_path / which), *more],
        cwd=REPO,
        env={**cluster.env(), "PRIVFAIR_SPARK_CONNECT_TIMEOUT": "120"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    version = proc.stdout.split()[2]
    folder = tmp_path / which / "adult_mst_private" / version
    return version, folder, json.loads(counts.read_text())


def test_an_mst_release_of_a_file_only_the_executors_read_is_the_local_release(
    cluster, private_adult, tmp_path
):
    """The driver (root without its file capabilities) cannot open the input: the release on
    the cluster succeeding proves the executors read it and the driver did not. It has the
    local release's version and input record (the file's sha256, computed on the executors),
    every exact count the mechanism read, what the noise does not decide (the ledger's plan of
    every OpenDP step, its 1-way queries), the published schema, and it passes validation."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    spec, readable, private = private_adult
    local = _recorded_run(cluster, tmp_path, "local", spec, readable)
    spark = _recorded_run(
        cluster, tmp_path, "spark", spec, private, "--engine", "spark", "--master", cluster.url
    )
    assert spark[2] == local[2] and len(local[2]) >= 13 + 78  # every 1-way and 2-way count
    lm = json.loads((local[1] / "manifest.json").read_text())
    sm = json.loads((spark[1] / "manifest.json").read_text())
    assert sm["input"] == lm["input"]  # the fingerprint: the file's sha256, on the executors
    assert sm["spec_fingerprint"] == lm["spec_fingerprint"]
    # the same version, unless another engineer's edit of the family's code landed between
    # the two runs (the version hashes the code of the checkout)
    assert spark[0] == local[0] or sm["code_version"] != lm["code_version"]
    assert sm["execution"]["engine"] == "spark" and sm["execution"]["master"] == cluster.url
    assert sm["validation"]["status"] == lm["validation"]["status"] == "passed"
    # the plan of every OpenDP step; which pairs the 2-way steps measured follows the noise
    ledgers = [pq.read_table(f / "internal" / "ledger.parquet") for f in (local[1], spark[1])]
    plan = ["step", "phase", "mechanism", "sensitivity", "scale", "rho"]
    assert ledgers[1].select(plan).equals(ledgers[0].select(plan))
    one_way = [t.filter(pc.equal(t["phase"], "one_way")) for t in ledgers]
    assert one_way[1].equals(one_way[0]) and one_way[0].num_rows == 13
    assert pq.read_schema(spark[1] / "shared" / "data.parquet").equals(
        pq.read_schema(local[1] / "shared" / "data.parquet"), check_metadata=True
    )
    assert sm["metrics"]["fairness"]["input"] is None and sm["metrics"]["owner_notes"]
    assert sm["metrics"]["fidelity"]["one_way_tvd"] is not None


def test_an_atr_release_of_a_file_only_the_executors_read_is_the_local_release(
    cluster, builtin_table, tmp_path
):
    """adult_atr (the label deciding: its transparency report is counted from the records
    alone) on 3000 Adult records that only the worker's user reads: the executors project and
    count them, the driver cannot open the file, and every shared file of the release is the
    local release's, byte for byte (ATR's noise is seeded; one store, so one release id)."""
    import yaml

    from tests.transparency._reports import shipped_report

    table, _ = shipped_report(builtin_table, "adult_atr")
    table = table.select(["sex", "education-num", "income"]).slice(0, 3000)
    spec, readable, private = _private_input(cluster, table, "adult_atr.yaml", "atr_private")
    raw = yaml.safe_load(spec.read_text())
    for key in ("model", "train_fraction", "model_seed"):
        raw["component"]["params"].pop(key, None)
    raw["component"]["params"]["decisions"] = "label"
    spec.write_text(yaml.safe_dump(raw))
    store = tmp_path / "store"
    common = [
        *NO_DAC,
        sys.executable,
        "-m",
        "privfair.cli",
        "run",
        str(spec),
        "--store",
        str(store),
    ]
    env = {**cluster.env(), "PRIVFAIR_SPARK_CONNECT_TIMEOUT": "120"}
    runs = {}
    for which, data, more in (
        ("local", readable, []),
        ("spark", private, ["--engine", "spark", "--master", cluster.url]),
    ):
        proc = subprocess.run(
            [*common, "--data-dir", str(data), *more],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        version = proc.stdout.split()[2]
        shutil.move(store / "atr_private", tmp_path / which)  # the next run releases anew
        runs[which] = tmp_path / which / version
    local, spark = runs["local"], runs["spark"]
    assert local.name == spark.name  # the same version
    files = {p.relative_to(local / "shared") for p in (local / "shared").rglob("*") if p.is_file()}
    assert {str(f) for f in files} >= {"manifest.json", "report.html"}
    for f in files:
        assert (spark / "shared" / f).read_bytes() == (local / "shared" / f).read_bytes(), f
    lm, sm = (json.loads((d / "manifest.json").read_text()) for d in (local, spark))
    assert sm["input"] == lm["input"]
    assert sm["execution"] == {**sm["execution"], "engine": "spark", "master": cluster.url}
    assert sm["validation"] == lm["validation"] and lm["validation"]["status"] == "passed"


PROTECT_ON_THE_EXECUTORS = r"""
import json, sys
from pathlib import Path
import pyarrow.parquet as pq
from privfair.components.core.engine import SparkEngine, SparkFrame, using
from privfair.components.microaggregation.params import FairMDAVParams
from privfair.components.microaggregation.spark_release import protect_on_spark
from privfair.io.ingest import file_names
from privfair.io.positions import with_positions
from privfair.io.files import spark_uri

master, schema_file, input_file, out, params = sys.argv[1:6]
schema = pq.read_schema(schema_file)  # the roles: a file of no row
path = Path(input_file)
engine = SparkEngine(master)
with using(engine):
    df = engine.spark.read.parquet(spark_uri(path))
    frame = SparkFrame(with_positions(df, path, file_names(path)), schema)
    r = protect_on_spark(frame, FairMDAVParams(**json.loads(params)), spark_uri(Path(out)),
                         rows_per_part=1500, local_rows=1200)
engine.close()
print(json.dumps({"parts": r.parts, "metrics": r.metrics, "warnings": r.warnings}, default=str))
"""


def test_a_fair_mdav_release_made_by_executors_of_a_file_only_they_read(
    cluster, builtin_table, tmp_path
):
    """Fair-MDAV's blocked release made on the cluster (``spark_release.protect_on_spark``) by
    a driver that cannot open its input (root without its file capabilities; the file is the
    worker's user's alone): the executors read, split, protect and write it, and its parts,
    read in order, are the local run's data and lineage, its metrics the local run's."""
    import pwd

    import pyarrow as pa
    import pyarrow.parquet as pq

    from privfair.components.microaggregation.fair_mdav import fair_mdav
    from privfair.components.microaggregation.params import FairMDAVParams

    table = builtin_table("adult").slice(0, 4000)
    _, _, private = _private_input(cluster, table, "adult_fair_mdav.yaml", "fm_private")
    schema_file = cluster.root / "fm-schema.parquet"
    pq.write_table(table.schema.empty_table(), schema_file)
    out = cluster.root / "fm-release"
    out.mkdir()
    pw = pwd.getpwnam(cluster.user)
    os.chown(out, pw.pw_uid, pw.pw_gid)  # the executors write the parts
    params = {"k": 5, "tau": 0.8, "block_rows": 500}
    proc = subprocess.run(
        [
            *NO_DAC,
            sys.executable,
            "-c",
            PROTECT_ON_THE_EXECUTORS,
            cluster.url,
            str(schema_file),
            str(private / "input.parquet"),
            str(out),
            json.dumps(params),
        ],
        cwd=REPO,
        env={**cluster.env(), "PRIVFAIR_SPARK_CONNECT_TIMEOUT": "120"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    want = fair_mdav(table, FairMDAVParams(**params))
    data = pa.concat_tables([pq.read_table(out / name) for name, _ in got["parts"]])
    lineage = pa.concat_tables(
        [pq.read_table(out / name.replace("part-", "lineage-")) for name, _ in got["parts"]]
    )
    assert len(got["parts"]) == 3
    assert data.equals(want.outputs["data"].replace_schema_metadata(None), check_metadata=True)
    assert lineage.equals(want.sidecars["lineage"])
    for key in ("groups", "relabelled", "group_sizes", "dpar_after", "dropped_by_group"):
        assert got["metrics"][key] == json.loads(json.dumps(want.metrics[key], default=str)), key
