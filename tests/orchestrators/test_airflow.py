"""The Airflow DAGs generated from the specs (``dags/privfair_dags.py``), through the real CLI.

A session fixture (``conftest.airflow_home``) migrates a SQLite metadata DB in a temporary
``AIRFLOW_HOME`` (Airflow 3 needs one even for ``dags test``); the dags folder is the
repository's ``dags/``. Airflow is never imported into the pytest process.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from _airflow import Run, clone_home
from _shared import BROKEN_SPEC, read_latest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "pipelines" / "specs"


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and mtime (to prove nothing was rewritten)."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def runs(airflow_home, tmp_path_factory: pytest.TempPathFactory):
    """Start the independent CLI runs side by side (each in its own copy of the home), compute
    the privfair-run reference in process meanwhile, then collect everything."""
    from privfair.run.flow import run_release
    from privfair.spec.catalogue import load_spec

    tmp = tmp_path_factory.mktemp("airflow_runs")
    for store in ("s1", "ref"):  # one store's key: the same public release ids
        (tmp / store / ".privfair").mkdir(parents=True)
        (tmp / store / ".privfair" / "secret").write_text("cd" * 32)
    specs = tmp / "specs"
    specs.mkdir()
    shutil.copy(SPECS / "german_fair_mdav.yaml", specs)
    (specs / "german_broken.yaml").write_text(BROKEN_SPEC)
    german_env = clone_home(airflow_home, tmp / "home_german")
    broken_env = clone_home(airflow_home, tmp / "home_broken")
    started = {
        "german": Run(
            german_env, "dags", "test", "german_fair_mdav", PRIVFAIR_STORE=str(tmp / "s1")
        ),
        "broken": Run(
            broken_env,
            "dags",
            "test",
            "german_broken",
            PRIVFAIR_STORE=str(tmp / "s2"),
            PRIVFAIR_SPECS_DIR=str(specs),
        ),
        "evaluate": Run(
            clone_home(airflow_home, tmp / "home_evaluate"),
            "dags",
            "test",
            "german_fair_mdav",
            "-c",
            json.dumps({"evaluate": {"grid": "k=5,20", "folds": 2, "classifiers": "lr"}}),
            PRIVFAIR_STORE=str(tmp / "s4"),
            PRIVFAIR_EVALUATIONS=str(tmp / "evaluations"),
        ),
        "spark": Run(
            clone_home(airflow_home, tmp / "home_spark"),
            "dags",
            "test",
            "german_fair_mdav",
            "-c",
            json.dumps(
                {
                    "execution": {"engine": "spark", "master": "local[1]"},
                    "overrides": {"block_rows": 300},
                }
            ),
            PRIVFAIR_STORE=str(tmp / "s5"),
        ),
        "errors": Run(airflow_home, "dags", "list-import-errors"),
        "list": Run(
            clone_home(airflow_home, tmp / "home_list"), "dags", "list", "--local", "-o", "json"
        ),
    }
    try:
        ref = run_release(load_spec(SPECS / "german_fair_mdav.yaml"), tmp / "ref")
        # The re-run: the DAG against a store that already holds this very version.
        shutil.copytree(tmp / "ref", tmp / "s3", symlinks=True)
        before_rerun = _files(tmp / "s3")
        started["rerun"] = Run(
            clone_home(airflow_home, tmp / "home_rerun"),
            "dags",
            "test",
            "german_fair_mdav",
            PRIVFAIR_STORE=str(tmp / "s3"),
        )
    finally:
        done = {k: r.result() for k, r in started.items()}
    return {
        "done": done,
        "ref": ref,
        "german_store": tmp / "s1",
        "broken_store": tmp / "s2",
        "evaluate_store": tmp / "s4",
        "evaluations": tmp / "evaluations",
        "rerun_store": tmp / "s3",
        "spark_store": tmp / "s5",
        "before_rerun": before_rerun,
        "work": Path(airflow_home["PRIVFAIR_WORK_DIR"]),
    }


def test_no_import_errors_and_one_dag_per_spec(runs):
    rc, log = runs["done"]["errors"]
    assert rc == 0, log[-3000:]
    assert "No data found" in log, log[-3000:]
    rc, log = runs["done"]["list"]
    assert rc == 0, log[-3000:]
    (listing,) = [x for x in log.splitlines() if x.startswith("[{")]
    dags = {d["dag_id"] for d in json.loads(listing)}
    assert dags == {p.stem for p in SPECS.glob("*.yaml")}


def test_dags_test_publishes_what_privfair_run_publishes(runs):
    rc, log = runs["done"]["german"]
    assert rc == 0, log[-5000:]
    ref, store = runs["ref"], runs["german_store"]
    release = store / "german_fair_mdav" / ref.version
    man = json.loads((Path(ref.path) / "manifest.json").read_text())
    found = {
        p.name: json.loads((p / "manifest.json").read_text())["code_version"]
        for p in (store / "german_fair_mdav").iterdir()
        if (p / "manifest.json").is_file()
    }
    assert release.is_dir(), (
        f"expected version {ref.version} (code {man['code_version']}); found {found}"
        + (
            " (code changed during the test: someone edited components/ or schemas/; re-run)"
            if found and man["code_version"] not in found.values()
            else ""
        )
    )
    for name in (
        "shared/data.parquet",
        "shared/manifest.json",
        "shared/report.html",
        "internal/lineage.parquet",
    ):
        assert (release / name).read_bytes() == (Path(ref.path) / name).read_bytes(), name
    assert read_latest(store / "german_fair_mdav") == ref.version
    assert (release / "report.html").is_file()
    assert json.loads((release / "manifest.json").read_text())["validation"]["status"] == "passed"
    assert f"published: german_fair_mdav {ref.version}" in log
    for task_id in ("ingest", "protect", "validate", "publish", "cleanup"):
        assert f"end task task_id={task_id}" in log


def test_no_work_file_outlives_a_run(runs):
    """The teardown task removes each run's work folder, published or failed: no copy of the
    protected table, the lineage or the input record stays behind."""
    for run in ("german", "broken"):
        assert "end task task_id=cleanup" in runs["done"][run][1], run
    left = [p for p in runs["work"].rglob("*") if p.is_file()] if runs["work"].exists() else []
    assert left == []


def test_rerun_is_idempotent(runs):
    """Running the DAG when its version is already in the store (published by an earlier run:
    here privfair run, run beforehand in this process) rewrites nothing and reports ``exists``;
    the release's files, ``latest`` and staging are untouched."""
    rc, log = runs["done"]["rerun"]
    assert rc == 0, log[-5000:]
    assert f"exists: german_fair_mdav {runs['ref'].version}" in log, (
        "code version changed during the test (someone edited components/ or schemas/)?"
        if "published: german_fair_mdav" in log
        else log[-5000:]
    )
    release = runs["rerun_store"] / "german_fair_mdav" / runs["ref"].version
    assert f"'reused': '{release}'" in log  # protect did not recompute the release
    assert _files(runs["rerun_store"]) == runs["before_rerun"]


def test_failing_contract_fails_the_dag_and_publishes_nothing(runs):
    rc, log = runs["done"]["broken"]
    assert rc == 1, log[-5000:]
    assert "ContractViolation" in log and "spec.0 k_anonymity" in log
    assert "action=fail" in log  # the retry policy: a broken guarantee is not retried
    assert "starting task_id=publish" not in log
    store = runs["broken_store"]
    published = [
        p
        for p in store.rglob("*")
        if p.is_file() and ".quarantine" not in p.relative_to(store).parts
    ]
    assert published == []
    (quarantined,) = (store / "german_broken" / ".quarantine").iterdir()
    assert (quarantined / "manifest.json").is_file()


def test_the_evaluate_task_runs_before_validate_and_the_report_shows_it(runs):
    """Run conf ``evaluate`` makes the DAG's ``evaluate`` task run ``privfair evaluate`` on the
    ingested table; the release validated after it carries that grid in its report."""
    rc, log = runs["done"]["evaluate"]
    assert rc == 0, log[-5000:]
    meta = json.loads((runs["evaluations"] / "german_fair_mdav" / "evaluation.json").read_text())
    assert meta["grid"] == {"k": [5, 20]} and meta["folds"] == 2 and meta["classifiers"] == ["lr"]
    store = runs["evaluate_store"] / "german_fair_mdav"
    version = read_latest(store)
    man = json.loads((store / version / "manifest.json").read_text())
    grid = man["cost_of_protection"]["grid"]
    assert grid["stale"] is False and grid["grid"] == {"k": [5, 20]}
    assert {json.loads(r["grid"])["k"] for r in grid["rows"]} == {5, 20}
    assert 'id="fig-tradeoff"' in (store / version / "report.html").read_text()
    # without the conf the task returns at once and the report has no trade-off plot
    rc, log = runs["done"]["german"]
    assert rc == 0 and "evaluate: not requested" in log


def test_the_protect_task_runs_its_blocks_on_spark(runs):
    """Run conf ``execution`` sends the ``protect`` task's blocks to Spark (the same
    ``tasks.protect_task`` as Dagster and ``privfair run --engine spark``); the release's
    guarantees are re-checked and its manifest says where it ran."""
    if shutil.which("java") is None and not os.environ.get("CI"):
        pytest.skip("no Java runtime (.ci/deps installs it)")
    rc, log = runs["done"]["spark"]
    assert rc == 0, log[-5000:]
    store = runs["spark_store"] / "german_fair_mdav"
    version = read_latest(store)
    man = json.loads((store / version / "manifest.json").read_text())
    assert man["execution"] == {"engine": "spark", "master": "local[1]", "workers": 1}
    assert man["params"]["block_rows"] == 300
    assert man["validation"]["status"] == "passed"
