"""Dagster definitions generated from the specs (``pipelines.definitions``) and the path-based
steps they share with Airflow (``pipelines.steps``).

* every shipped spec materialised in process publishes the same version id and byte-identical
  ``data.parquet`` as ``privfair run`` (run_release), and every declared guarantee has its own
  blocking check, which passes;
* the ``dagster asset materialize`` CLI publishes German;
* a spec whose contract fails stops at the blocking checks: the release asset is not
  materialised and nothing is published (the candidate is quarantined, as with privfair run);
* a new spec file adds a new asset graph and a new Airflow DAG, no code change;
* run-config overrides go through ``spec.with_params`` (new version; clear errors).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _shared import BROKEN_SPEC

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "pipelines" / "specs"
BIN = Path(sys.executable).parent


NEW_SPEC = """\
name: german_fair_mdav_k20
description: German Credit through Fair-MDAV with fairlets of 20 rows.
dataset: {name: german}
component:
  name: fair_mdav
  params: {k: 20, tau: 1.0}
schedule: "@daily"
"""

REFERENCE = """\
import json, sys
from pipelines.catalogue import load_specs
from pipelines.flow import run_release
out = {}
for _, spec in load_specs(sys.argv[2] if len(sys.argv) > 2 else None):
    o = run_release(spec, sys.argv[1])
    out[spec.name] = {"version": o.version, "path": o.path, "status": o.status}
print(json.dumps(out))
"""

DAGBAG = """\
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
errors = {k: str(v) for k, v in bag.import_errors.items()}
print("DAGBAG=" + json.dumps({"dags": sorted(bag.dag_ids), "errors": errors}))
"""


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PRIVFAIR_CACHE_DIR", str(tmp / "cache"))
    env.pop("PRIVFAIR_SPECS_DIR", None)
    env.update(extra)
    return env


def _dagster_home(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return path


def _same_code(ours: Path, ref_release: Path) -> None:
    """Fail with a clear message when the code version moved between the two runs (someone
    edited ``components/`` or ``schemas/`` meanwhile): versions cannot match then."""
    (version,) = [p for p in ours.iterdir() if p.is_dir() and not p.name.startswith(".")]
    a = json.loads((version / "manifest.json").read_text())["code_version"]
    b = json.loads((ref_release / "manifest.json").read_text())["code_version"]
    assert a == b, f"code version changed during the test ({a} vs {b}); re-run"


def _release_files(store: Path) -> list[Path]:
    return [p for p in store.rglob("*") if p.is_file() and ".quarantine" not in p.parts]


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory):
    """Reference releases (run_release, in a background process) and one in-process Dagster run
    of every asset and check of every shipped spec, side by side."""
    import dagster as dg

    from pipelines.definitions import build_defs

    tmp = tmp_path_factory.mktemp("dagster_all")
    ref_store, dg_store = tmp / "ref", tmp / "dagster"
    ref = subprocess.Popen(
        [sys.executable, "-c", REFERENCE, str(ref_store), str(SPECS)],
        cwd=REPO,
        env=_env(tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        defs = build_defs(SPECS, store=str(dg_store))
        job = defs.resolve_implicit_global_asset_job_def()
        with dg.DagsterInstance.ephemeral() as instance:
            result = job.execute_in_process(instance=instance, raise_on_error=False)
            out, err = ref.communicate(timeout=600)
    finally:
        if ref.poll() is None:
            ref.kill()
            ref.wait()
    assert ref.returncode == 0, err[-3000:]
    return {
        "defs": defs,
        "result": result,
        "ref": json.loads(out.strip().splitlines()[-1]),
        "ref_store": ref_store,
        "store": dg_store,
    }


def test_every_spec_publishes_what_privfair_run_publishes(everything):
    import dagster as dg

    from pipelines.catalogue import load_specs

    result, ref = everything["result"], everything["ref"]
    assert result.success
    names = [spec.name for _, spec in load_specs(SPECS)]
    assert sorted(ref) == sorted(names) and len(names) >= 4
    for name in names:
        out = result.asset_value(dg.AssetKey([name, "release"]))
        assert out["status"] == "published"
        assert out["version"] == ref[name]["version"], name
        ours = Path(out["path"]) / "data.parquet"
        theirs = Path(ref[name]["path"]) / "data.parquet"
        assert ours.read_bytes() == theirs.read_bytes(), name
        assert (Path(out["path"]) / "lineage.parquet").read_bytes() == (
            Path(ref[name]["path"]) / "lineage.parquet"
        ).read_bytes()
        assert (everything["store"] / name / "latest").read_text().strip() == out["version"]
        manifest = json.loads((Path(out["path"]) / "manifest.json").read_text())
        assert manifest["validation"]["status"] == "passed"
        assert Path(out["report"]).is_file()


def test_one_blocking_check_per_declared_guarantee(everything):
    """Every guarantee of the real contract got its own check (the names derived from the spec
    alone match the contract the component declared), every check passed, all are blocking."""
    from pipelines.catalogue import check_keys, load_specs
    from schemas.contracts import contract_from_json

    defs, result = everything["defs"], everything["result"]
    evaluations = result.get_asset_check_evaluations()
    graph = defs.resolve_asset_graph()
    for _, spec in load_specs(SPECS):
        key_path = [spec.name, "protected_table"]
        mine = {e.check_name: e for e in evaluations if e.asset_key.path == key_path}
        release = Path(everything["ref"][spec.name]["path"])
        contract = contract_from_json(
            json.dumps(json.loads((release / "manifest.json").read_text())["contract"])
        )
        expected = set(check_keys(contract)) | {"contract"}
        assert set(mine) == expected, spec.name
        assert all(e.passed for e in mine.values()), [n for n, e in mine.items() if not e.passed]
        checks = [k for k in graph.asset_check_keys if list(k.asset_key.path) == key_path]
        assert {k.name for k in checks} == expected
        assert all(graph.get_check_spec(k).blocking for k in checks)
    c4 = next(
        e
        for e in evaluations
        if e.asset_key.path == ["german_fair_mdav", "protected_table"]
        and e.check_name == "C4_k_anonymity"
    )
    assert c4.metadata["guarantee"].value == "C4 k_anonymity"


def test_materialisation_metadata(everything):
    import dagster as dg

    result = everything["result"]
    mats = {
        tuple(e.asset_key.path): e.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
    raw = mats[("german_fair_mdav", "raw_table")]
    assert raw["dagster/row_count"].value == 1000
    prot = mats[("german_fair_mdav", "protected_table")]
    assert prot["rows_in"].value == 1000 and prot["rows_out"].value < 1000
    assert "metrics/dpar_before" in prot and "metrics/dpar_after" in prot
    rel = mats[("german_fair_mdav", "release")]
    assert isinstance(rel["release"], dg.PathMetadataValue)
    assert rel["report"].value.endswith("report.html") and Path(rel["report"].value).is_file()
    assert rel["report_url"].value.startswith("file://")
    assert rel["contract/status"].value == "passed"
    assert rel["status"].value == "published"


def test_jobs_and_schedules_follow_the_specs(everything):
    import dagster as dg

    from pipelines.catalogue import load_specs

    defs = everything["defs"]
    graph = defs.resolve_asset_graph()
    for _, spec in load_specs(SPECS):
        job = defs.resolve_job_def(f"{spec.name}_job")
        keys = {k.to_user_string() for k in job.asset_layer.selected_asset_keys}
        assert keys == {f"{spec.name}/{a}" for a in ("raw_table", "protected_table", "release")}
        sched = defs.resolve_schedule_def(f"{spec.name}_schedule")
        assert sched.job_name == f"{spec.name}_job"
        assert sched.cron_schedule == "0 0 * * 0"  # every shipped spec is @weekly
        for a in ("raw_table", "protected_table", "release"):
            assert graph.get(dg.AssetKey([spec.name, a])).group_name == spec.name


def test_dagster_cli_materialises_german(tmp_path: Path):
    from pipelines.flow import run_release
    from pipelines.catalogue import load_spec

    store = tmp_path / "store"
    env = _env(
        tmp_path, DAGSTER_HOME=str(_dagster_home(tmp_path / "dh")), PRIVFAIR_STORE=str(store)
    )
    cmd = [str(BIN / "dagster"), "asset", "materialize", "-m", "pipelines.definitions"]
    proc = subprocess.run(
        [*cmd, "--select", "key:german_fair_mdav/*"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "RUN_SUCCESS" in proc.stderr
    ref = run_release(load_spec(SPECS / "german_fair_mdav.yaml"), tmp_path / "ref")
    _same_code(store / "german_fair_mdav", Path(ref.path))
    release = store / "german_fair_mdav" / ref.version
    assert (release / "data.parquet").read_bytes() == (Path(ref.path) / "data.parquet").read_bytes()
    assert sorted(p.name for p in store.iterdir()) == ["german_fair_mdav"]


def test_failing_contract_stops_before_publishing(tmp_path: Path):
    import dagster as dg

    from pipelines.definitions import build_defs
    from pipelines.release import Store, list_releases

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "german_broken.yaml").write_text(BROKEN_SPEC)
    store = tmp_path / "store"
    defs = build_defs(specs, store=str(store))
    with dg.DagsterInstance.ephemeral() as instance:
        res = defs.resolve_job_def("german_broken_job").execute_in_process(
            instance=instance, raise_on_error=False
        )
        assert not res.success
        failed = {e.check_name for e in res.get_asset_check_evaluations() if not e.passed}
        assert failed == {"spec_0_k_anonymity", "contract"}
        assert not res.is_node_success("german_broken__release")
        mats = {tuple(e.asset_key.path) for e in res.get_asset_materialization_events()}
        assert ("german_broken", "release") not in mats
        assert ("german_broken", "protected_table") in mats
        assert (
            instance.get_latest_materialization_event(dg.AssetKey(["german_broken", "release"]))
            is None
        )
    assert list_releases(Store.open(store)) == []
    assert _release_files(store) == []  # no version folder, no `latest`, nothing staged
    quarantined = list((store / "german_broken" / ".quarantine").iterdir())
    assert len(quarantined) == 1 and (quarantined[0] / "manifest.json").is_file()


def test_new_spec_file_adds_assets_and_a_dag(tmp_path: Path):
    """Copy the shipped specs, add Fair-MDAV on German at k=20: Dagster gets a new asset graph
    (which materialises) and Airflow a new DAG, without touching any code."""
    import dagster as dg

    from pipelines.definitions import build_defs

    specs = tmp_path / "specs"
    shutil.copytree(SPECS, specs)
    (specs / "german_fair_mdav_k20.yaml").write_text(NEW_SPEC)
    new = {f"german_fair_mdav_k20/{a}" for a in ("raw_table", "protected_table", "release")}

    before = {
        k.to_user_string() for k in build_defs(SPECS).resolve_asset_graph().get_all_asset_keys()
    }
    defs = build_defs(specs, store=str(tmp_path / "store"))
    after = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert not new & before
    assert after == before | new
    assert defs.resolve_schedule_def("german_fair_mdav_k20_schedule").cron_schedule == "0 0 * * *"

    with dg.DagsterInstance.ephemeral() as instance:
        res = defs.resolve_job_def("german_fair_mdav_k20_job").execute_in_process(instance=instance)
    out = res.asset_value(dg.AssetKey(["german_fair_mdav_k20", "release"]))
    assert out["status"] == "published"
    manifest = json.loads((Path(out["path"]) / "manifest.json").read_text())
    assert manifest["params"]["k"] == 20 and manifest["validation"]["status"] == "passed"

    env = _env(tmp_path, AIRFLOW_HOME=str(tmp_path / "airflow"), PRIVFAIR_SPECS_DIR=str(specs))
    env["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    env["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
    proc = subprocess.run(
        [sys.executable, "-c", DAGBAG, str(REPO / "dags")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("DAGBAG="))
    bag = json.loads(line.removeprefix("DAGBAG="))
    assert bag["errors"] == {}
    assert "german_fair_mdav_k20" in bag["dags"]
    assert set(bag["dags"]) == {p.stem for p in specs.glob("*.yaml")}


def test_run_config_overrides_params(tmp_path: Path):
    import dagster as dg

    from pipelines.definitions import build_defs
    from pipelines.flow import run_release
    from pipelines.catalogue import load_spec

    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(SPECS / "german_fair_mdav.yaml", specs)
    defs = build_defs(specs, store=str(tmp_path / "store"))
    job = defs.resolve_job_def("german_fair_mdav_job")
    op = "german_fair_mdav__protected_table"

    def run(config: dict):
        with dg.DagsterInstance.ephemeral() as instance:
            return job.execute_in_process(
                instance=instance,
                raise_on_error=False,
                run_config={"ops": {op: {"config": config}}},
            )

    res = run({"k": 20, "tau": 0.8})
    assert res.success
    out = res.asset_value(dg.AssetKey(["german_fair_mdav", "release"]))
    spec = load_spec(SPECS / "german_fair_mdav.yaml").with_params({"k": 20, "tau": 0.8})
    ref = run_release(spec, tmp_path / "ref")
    assert out["version"] == ref.version
    assert (Path(out["path"]) / "data.parquet").read_bytes() == (
        Path(ref.path) / "data.parquet"
    ).read_bytes()

    again = run({"k": 20, "tau": 0.8})  # the same version again: reused, not republished
    assert again.success
    assert again.asset_value(dg.AssetKey(["german_fair_mdav", "release"]))["status"] == "exists"
    (prot_mat,) = [
        e.materialization
        for e in again.get_asset_materialization_events()
        if e.asset_key.path[-1] == "protected_table"
    ]
    assert prot_mat.metadata["reused_release"].value == out["path"]

    for config, key in (({"k": 1}, "component.params.k"), ({"m": 3}, "component.params")):
        bad = run(config)
        assert not bad.success
        (failure,) = bad.get_step_failure_events()
        assert failure.step_key == op
        msg = failure.event_specific_data.error.message
        assert "invalid run config" in msg and f"'{key}" in msg, msg


def test_steps_publish_is_idempotent_and_refuses_a_failed_validation(tmp_path: Path):
    import yaml

    from pipelines import steps
    from pipelines.release import Store, list_releases
    from schemas.errors import ContractViolation
    from pipelines.catalogue import parse_spec

    spec = parse_spec(yaml.safe_load((SPECS / "german_fair_mdav.yaml").read_text()))
    ing = steps.ingest_step(spec, tmp_path / "w" / "raw")
    prot = steps.protect_step(spec, ing["raw"], tmp_path / "w" / "prot")  # the path form
    assert json.loads(json.dumps(prot)) == prot  # XCom-safe
    val = steps.validate_step(prot, tmp_path / "store")
    first = steps.publish_step(prot, val, tmp_path / "store")
    data = (Path(first["path"]) / "data.parquet").read_bytes()
    again = steps.publish_step(prot, val, tmp_path / "store")
    assert (first["status"], again["status"]) == ("published", "exists")
    assert again["version"] == first["version"] == ing["version"]
    assert (Path(first["path"]) / "data.parquet").read_bytes() == data
    assert not list((tmp_path / "store" / spec.name / ".staging").iterdir())
    # a re-run against that store reuses the published files: nothing recomputed or staged
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "store").rglob("*") if p.is_file()}
    prot2 = steps.protect_step(spec, ing, tmp_path / "w" / "prot2", tmp_path / "store")
    assert prot2["reused"] == first["path"] and prot2["version"] == first["version"]
    assert prot2["data"] == str(Path(first["path"]) / "data.parquet")
    val2 = steps.validate_step(prot2, tmp_path / "store")
    assert val2["passed"] and val2["candidate"] is None
    assert Path(val2["results"]).parent == tmp_path / "w" / "prot2"
    assert steps.publish_step(prot2, val2, tmp_path / "store")["status"] == "exists"
    after = {p: p.stat().st_mtime_ns for p in (tmp_path / "store").rglob("*") if p.is_file()}
    assert after == before
    # no staged candidate: publish builds and validates one itself
    (tmp_path / "store2").mkdir()
    third = steps.publish_step(prot, None, tmp_path / "store2")
    assert third["status"] == "published" and third["version"] == first["version"]

    broken = parse_spec(yaml.safe_load(BROKEN_SPEC))
    bprot = steps.protect_step(broken, ing, tmp_path / "w" / "broken")
    with pytest.raises(ContractViolation, match="spec.0 k_anonymity"):
        steps.validate_step(bprot, tmp_path / "store3")
    bval = steps.validate_step(bprot, tmp_path / "store3", raise_on_failure=False)
    assert not bval["passed"] and bval["quarantine"]
    with pytest.raises(ContractViolation):
        steps.publish_step(bprot, bval, tmp_path / "store3")
    with pytest.raises(ContractViolation):
        steps.publish_step(bprot, None, tmp_path / "store3")
    assert list_releases(Store.open(tmp_path / "store3")) == []
    assert _release_files(tmp_path / "store3") == []
