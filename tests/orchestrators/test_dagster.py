"""Dagster definitions generated from the specs (``privfair.dagster.definitions``) and the file-based
tasks they share with Airflow (``privfair.run.tasks``).

* every shipped spec materialised in process publishes the same version id and byte-identical
  ``shared/data.parquet`` (and ``internal/lineage.parquet``) as ``privfair run`` (run_release), and
  every declared guarantee has its own blocking check, which passes;
* each check takes the validation result carrying its key (not the one at its position), and a
  declared check without a result fails;
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

import pyarrow.parquet as pq
import pytest
from _shared import BROKEN_SPEC, read_latest

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
from privfair.spec.catalogue import load_specs
from privfair.run.flow import run_release
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
    (version,) = [
        p
        for p in ours.iterdir()
        if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
    ]
    a = json.loads((version / "manifest.json").read_text())["code_version"]
    b = json.loads((ref_release / "manifest.json").read_text())["code_version"]
    assert a == b, f"code version changed during the test ({a} vs {b}); re-run"


def _release_files(store: Path) -> list[Path]:
    """Every file of the store but quarantined ones and the store's key."""
    return [
        p
        for p in store.rglob("*")
        if p.is_file() and not {".quarantine", ".privfair"} & set(p.parts)
    ]


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory):
    """Reference releases (run_release, in a background process) and one in-process Dagster run
    of every asset and check of every shipped spec, side by side."""
    import dagster as dg

    from privfair.dagster.definitions import build_defs

    tmp = tmp_path_factory.mktemp("dagster_all")
    ref_store, dg_store = tmp / "ref", tmp / "dagster"
    for store in (ref_store, dg_store):  # one store's key: the same public release ids
        (store / ".privfair").mkdir(parents=True)
        (store / ".privfair" / "secret").write_text("ab" * 32)
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
        job = defs.resolve_job_def("privfair_releases")
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

    from privfair.components.core.registry import algorithm
    from privfair.spec.catalogue import load_specs

    result, ref = everything["result"], everything["ref"]
    assert result.success
    names = [spec.name for _, spec in load_specs(SPECS)]
    assert sorted(ref) == sorted(names) and len(names) >= 4
    for name in names:
        out = result.asset_value(dg.AssetKey([name, "release"]))
        assert out["status"] == "published"
        _same_code(everything["store"] / name, Path(ref[name]["path"]))
        assert out["version"] == ref[name]["version"], name
        manifest = json.loads((Path(out["path"]) / "manifest.json").read_text())
        assert manifest["validation"]["status"] == "passed"
        # every public output and internal sidecar the manifest lists, byte for byte
        files = [o["file"] for o in manifest["outputs"].values()]
        files += [s["file"] for s in manifest["sidecars"].values()]
        assert files and all(f.endswith(".parquet") for f in files)
        replayable = algorithm(manifest["component"]).replayable
        for f in files:
            ours, theirs = Path(out["path"]) / f, Path(ref[name]["path"]) / f
            if replayable:
                assert ours.read_bytes() == theirs.read_bytes(), (name, f)
            else:  # DP noise is drawn afresh: same files, same schemas
                assert pq.read_schema(ours).equals(pq.read_schema(theirs)), (name, f)
        assert read_latest(everything["store"] / name) == out["version"]
        if algorithm(manifest["component"]).row_level:  # a table release
            assert manifest["outputs"]["data"]["file"] == "shared/data.parquet"
            assert manifest["sidecars"]["lineage"]["file"] == str(
                Path("internal") / "lineage.parquet"
            )
        assert Path(out["report"]).is_file()


def test_every_export_is_the_shareable_copy_and_the_same_from_both_drivers(everything, tmp_path):
    """``privfair export`` of every shipped release, from the Dagster store and from the
    ``privfair run`` store (one store key): the copy holds the public outputs, the public
    manifest and the public report and nothing else; no owner-only value (version id, input
    fingerprint, input file hashes, a metric the descriptor does not declare) is in it; a
    replayable algorithm's copy is byte-identical from both drivers; and the owner's release
    still validates after the export."""
    from privfair.components.core.registry import algorithm
    from privfair.release.share import export
    from privfair.run.flow import revalidate
    from privfair.spec.catalogue import load_specs

    for _, spec in load_specs(SPECS):
        ref = Path(everything["ref"][spec.name]["path"])
        ours = everything["store"] / spec.name / everything["ref"][spec.name]["version"]
        algo = algorithm(json.loads((ref / "manifest.json").read_text())["component"])
        copies = {}
        for who, release in (("ref", ref), ("dagster", ours)):
            owner = json.loads((release / "manifest.json").read_text())
            dest, pub = export(release, tmp_path / who / spec.name)
            names = sorted(p.name for p in dest.iterdir())
            assert names == sorted(
                [f"{o}.parquet" for o in algo.outputs] + ["manifest.json", "report.html"]
            ), (spec.name, names)
            text = "".join(p.read_bytes().decode(errors="replace") for p in dest.iterdir())
            secrets = [owner["version"], owner["input"]["fingerprint"]]
            secrets += list((owner["input"].get("files") or {}).values())
            assert not [x for x in secrets if x in text], spec.name
            assert "internal/" not in text and "row_id" not in text, spec.name
            assert pub["metrics"] == algo.public.public_metrics(owner["metrics"]), spec.name
            assert set(pub) >= {"release", "contract", "validation", "params", "checksums"}
            assert not {"input", "warnings", "timings", "cost_of_protection"} & set(pub)
            copies[who] = {p.name: p.read_bytes() for p in dest.iterdir()}
        if algo.replayable:
            assert copies["ref"] == copies["dagster"], spec.name
        assert revalidate(ref).passed, spec.name


def test_one_blocking_check_per_declared_guarantee(everything):
    """Every guarantee of the real contract got its own check (the names derived from the spec
    alone match the contract the component declared), every check passed, all are blocking."""
    from privfair.schemas.contracts import contract_from_json
    from privfair.spec.catalogue import check_keys, load_specs, outline

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
        assert check_keys(outline(spec)) == check_keys(contract), spec.name
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
    # the two t-closeness guarantees (output- and input-relative) get one check each
    c5 = {
        e.check_name: e
        for e in evaluations
        if e.asset_key.path == ["german_fair_mdav", "protected_table"]
        and e.check_name.startswith("C5_t_closeness")
    }
    assert set(c5) == {"C5_t_closeness", "C5_t_closeness_2"}
    assert {e.metadata["guarantee"].value for e in c5.values()} == {"C5 t_closeness"}
    assert c5["C5_t_closeness"].metadata["expected"] != c5["C5_t_closeness_2"].metadata["expected"]


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

    from privfair.spec.catalogue import load_specs

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


def test_the_evaluation_asset_stays_out_of_the_release_jobs(tmp_path: Path, monkeypatch):
    """``<spec>/evaluation`` is ``privfair evaluate`` on ``raw_table`` in its own group, outside
    ``<spec>_job``; materialised with run config it writes the evaluation the next release's
    report picks up."""
    import dagster as dg

    from privfair.dagster.definitions import build_defs
    from privfair.evaluation.evaluate import find_evaluation

    monkeypatch.setenv("PRIVFAIR_EVALUATIONS", str(tmp_path / "evaluations"))
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(SPECS / "german_fair_mdav.yaml", specs)
    defs = build_defs(specs, store=str(tmp_path / "store"))
    key = dg.AssetKey(["german_fair_mdav", "evaluation"])
    assert defs.resolve_asset_graph().get(key).group_name == "german_fair_mdav_evaluation"
    for job in ("german_fair_mdav_job", "privfair_releases"):
        assert key not in defs.resolve_job_def(job).asset_layer.selected_asset_keys
    raw = dg.AssetKey(["german_fair_mdav", "raw_table"])
    with dg.DagsterInstance.ephemeral() as instance:
        res = dg.materialize(
            [defs.get_assets_def(raw), defs.get_assets_def(key)],
            resources={k: defs.resources[k] for k in ("privfair_data", "connections")},
            run_config={
                "ops": {
                    "german_fair_mdav__evaluation": {
                        "config": {"grid": "k=5,20", "folds": 2, "classifiers": "lr,gnb"}
                    }
                }
            },
            instance=instance,
        )
    assert res.success
    (mat,) = [
        e.materialization for e in res.get_asset_materialization_events() if e.asset_key == key
    ]
    assert mat.metadata["grid"].value == {"k": [5, 20]} and mat.metadata["points"].value == 2
    assert '| fair_mdav | {"k": 20} | gnb |' in mat.metadata["summary"].value
    out = res.asset_value(key)
    spec_file = specs / "german_fair_mdav.yaml"
    from privfair.spec.catalogue import load_spec

    found = find_evaluation(load_spec(spec_file), None, tmp_path / "evaluations")
    assert found["stale"] is False and Path(out["page"]).is_file()


def test_dagster_cli_materialises_german(tmp_path: Path):
    from privfair.run.flow import run_release
    from privfair.spec.catalogue import load_spec

    store = tmp_path / "store"
    env = _env(
        tmp_path, DAGSTER_HOME=str(_dagster_home(tmp_path / "dh")), PRIVFAIR_STORE=str(store)
    )
    cmd = [str(BIN / "dagster"), "asset", "materialize", "-m", "privfair.dagster.definitions"]
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
    data = "shared/data.parquet"
    assert (release / data).read_bytes() == (Path(ref.path) / data).read_bytes()
    assert sorted(p.name for p in store.iterdir()) == [".privfair", "german_fair_mdav"]
    # the run's work folder is gone: no copy of the protected table or the lineage stays
    work = tmp_path / "dh" / "storage" / "privfair"
    assert not [p for p in work.rglob("*") if p.is_file()] if work.exists() else True


def test_failing_contract_stops_before_publishing(tmp_path: Path):
    import dagster as dg

    from privfair.dagster.definitions import build_defs
    from privfair.release.store import Store, list_releases

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "german_broken.yaml").write_text(BROKEN_SPEC)
    store = tmp_path / "store"
    defs = build_defs(specs, store=str(store))
    with dg.DagsterInstance.ephemeral() as instance:
        res = defs.resolve_job_def("german_broken_job").execute_in_process(
            instance=instance, raise_on_error=False
        )
        # the failed run leaves no work file behind either
        work = Path(instance.storage_directory()) / "privfair"
        assert not [p for p in work.rglob("*") if p.is_file()] if work.exists() else True
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


def test_checks_take_their_result_by_key_and_fail_without_one(tmp_path: Path, monkeypatch):
    """The validation summary the checks read is tampered with: its results reversed (so no
    check finds its own result at its own position), the result of ``C4_k_anonymity`` dropped
    and the second of the two t-closeness results (``C5_t_closeness_2``) turned into a failure.
    Each check must report the result carrying its key: C4 fails for want of a result, only the
    second C5 fails, every other one passes with its own guarantee; the blocking failures stop
    the release."""
    import dagster as dg

    from privfair.dagster.definitions import build_defs
    from privfair.run import tasks
    from privfair.spec.catalogue import check_keys, load_spec, outline

    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(SPECS / "german_fair_mdav.yaml", specs)
    store = tmp_path / "store"
    template = outline(load_spec(specs / "german_fair_mdav.yaml"))
    keys = check_keys(template)
    assert {"C4_k_anonymity", "C5_t_closeness", "C5_t_closeness_2"} <= set(keys)
    planted = "planted failure of the input-relative t-closeness"
    real_validate, seen = tasks.validate_task, {}

    def tampered(protected, store_uri, **kw):
        v = real_validate(protected, store_uri, **kw)
        doc = json.loads(Path(v.results).read_text())
        seen["original"] = {r["key"]: r for r in doc["results"] if r.get("key")}
        results = [r for r in reversed(doc["results"]) if r.get("key") != "C4_k_anonymity"]
        for r in results:
            if r.get("key") == "C5_t_closeness_2":
                r.update(passed=False, message=planted, observed=0.5)
        Path(v.results).write_text(json.dumps({**doc, "results": results}))
        return v

    monkeypatch.setattr(tasks, "validate_task", tampered)
    defs = build_defs(specs, store=str(store))
    with dg.DagsterInstance.ephemeral() as instance:
        res = defs.resolve_job_def("german_fair_mdav_job").execute_in_process(
            instance=instance, raise_on_error=False
        )
    assert not res.success
    evals = {
        e.check_name: e
        for e in res.get_asset_check_evaluations()
        if e.asset_key.path == ["german_fair_mdav", "protected_table"]
    }
    assert set(evals) == {*keys, "contract"}
    original = seen["original"]
    assert set(original) == set(keys)  # the untampered validation had one result per key

    c4 = evals["C4_k_anonymity"]
    assert not c4.passed and "guarantee" not in c4.metadata
    assert "no validation result" in c4.description
    c5, c5_2 = evals["C5_t_closeness"], evals["C5_t_closeness_2"]
    assert c5.passed and not c5_2.passed
    assert c5_2.description == planted and c5_2.metadata["observed"].value == 0.5
    assert c5.metadata["expected"].value == original["C5_t_closeness"]["expected"]
    assert c5_2.metadata["expected"].value == original["C5_t_closeness_2"]["expected"]
    assert c5.metadata["expected"].value != c5_2.metadata["expected"].value
    for key, g in zip(keys, template, strict=True):
        if key in ("C4_k_anonymity", "C5_t_closeness_2"):
            continue
        e = evals[key]
        assert e.passed, key
        assert e.metadata["guarantee"].value == f"{g.id} {g.kind}", key
        assert e.description == original[key]["message"], key
    # the blocking failures stop the release: nothing published
    assert not res.is_node_success("german_fair_mdav__release")
    mats = {tuple(e.asset_key.path) for e in res.get_asset_materialization_events()}
    assert ("german_fair_mdav", "release") not in mats
    assert [p for p in _release_files(store) if ".staging" not in p.parts] == []


def test_new_spec_file_adds_assets_and_a_dag(tmp_path: Path):
    """Copy the shipped specs, add Fair-MDAV on German at k=20: Dagster gets a new asset graph
    (which materialises) and Airflow a new DAG, without touching any code."""
    import dagster as dg

    from privfair.dagster.definitions import build_defs

    specs = tmp_path / "specs"
    shutil.copytree(SPECS, specs)
    (specs / "german_fair_mdav_k20.yaml").write_text(NEW_SPEC)
    new = {  # with the observable source of its raw input
        f"german_fair_mdav_k20/{a}"
        for a in ("source", "raw_table", "protected_table", "release", "evaluation")
    }

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

    from privfair.dagster.definitions import build_defs
    from privfair.run.flow import run_release
    from privfair.spec.catalogue import load_spec, with_params

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
    spec = with_params(load_spec(SPECS / "german_fair_mdav.yaml"), {"k": 20, "tau": 0.8})
    ref = run_release(spec, tmp_path / "ref")
    assert out["version"] == ref.version
    assert (Path(out["path"]) / "shared" / "data.parquet").read_bytes() == (
        Path(ref.path) / "shared" / "data.parquet"
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


def test_tasks_publish_is_idempotent_and_refuses_a_failed_validation(tmp_path: Path):
    import yaml

    from privfair.release.store import Store, list_releases
    from privfair.run import tasks
    from privfair.schemas.errors import ContractViolation
    from privfair.spec.catalogue import parse_spec

    spec = parse_spec(yaml.safe_load((SPECS / "german_fair_mdav.yaml").read_text()))
    ing = tasks.ingest_task(spec, tmp_path / "w" / "raw")
    prot = tasks.protect_task(spec, ing.as_dict(), tmp_path / "w" / "prot")  # the XCom form
    assert json.loads(json.dumps(prot.as_dict())) == prot.as_dict()  # XCom-safe
    assert tasks.ProtectRecord.of(prot.as_dict()) == prot
    assert set(prot.outputs) == {"data"} and set(prot.sidecars) == {"lineage"}
    val = tasks.validate_task(prot, tmp_path / "store")
    first = tasks.publish_task(prot, val, tmp_path / "store")
    data = (Path(first.path) / "shared" / "data.parquet").read_bytes()
    again = tasks.publish_task(prot.as_dict(), val.as_dict(), tmp_path / "store")
    assert (first.status, again.status) == ("published", "exists")
    assert again.version == first.version == ing.version
    assert (Path(first.path) / "shared" / "data.parquet").read_bytes() == data
    assert (Path(first.path) / "internal" / "lineage.parquet").is_file()
    assert not list((tmp_path / "store" / spec.name / ".staging").iterdir())
    # a re-run against that store reuses the published files: nothing recomputed or staged
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "store").rglob("*") if p.is_file()}
    prot2 = tasks.protect_task(spec, ing, tmp_path / "w" / "prot2", tmp_path / "store")
    assert prot2.reused == first.path and prot2.version == first.version
    assert prot2.outputs == {"data": str(Path(first.path) / "shared" / "data.parquet")}
    assert prot2.sidecars == {"lineage": str(Path(first.path) / "internal" / "lineage.parquet")}
    val2 = tasks.validate_task(prot2, tmp_path / "store")
    assert val2.passed and val2.candidate is None
    assert Path(val2.results).parent == tmp_path / "w" / "prot2"
    assert tasks.publish_task(prot2, val2, tmp_path / "store").status == "exists"
    after = {p: p.stat().st_mtime_ns for p in (tmp_path / "store").rglob("*") if p.is_file()}
    assert after == before
    # no staged candidate: publish builds and validates one itself
    (tmp_path / "store2").mkdir()
    third = tasks.publish_task(prot, None, tmp_path / "store2")
    assert third.status == "published" and third.version == first.version
    assert (Path(third.path) / "shared" / "data.parquet").read_bytes() == data

    broken = parse_spec(yaml.safe_load(BROKEN_SPEC))
    bprot = tasks.protect_task(broken, ing, tmp_path / "w" / "broken")
    with pytest.raises(ContractViolation, match="spec.0 k_anonymity"):
        tasks.validate_task(bprot, tmp_path / "store3")
    bval = tasks.validate_task(bprot, tmp_path / "store3", raise_on_failure=False)
    assert not bval.passed and bval.quarantine
    with pytest.raises(ContractViolation):
        tasks.publish_task(bprot, bval, tmp_path / "store3")
    with pytest.raises(ContractViolation):
        tasks.publish_task(bprot, None, tmp_path / "store3")
    assert list_releases(Store.open(tmp_path / "store3")) == []
    assert _release_files(tmp_path / "store3") == []


def test_the_execution_engine_resource_sends_blocks_to_spark(tmp_path: Path, spark_engine):
    """The ``execution_engine`` resource (here: Spark, local[2]) is what ``protected_table``
    runs its blocks on, through the same ``tasks.protect_task`` as Airflow and the CLI; the
    release is the one the spec's own local engine publishes."""
    import dagster as dg
    import yaml

    from privfair.dagster.definitions import ExecutionEngine, build_defs

    specs = tmp_path / "specs"
    specs.mkdir()
    spec = yaml.safe_load((SPECS / "german_fair_mdav.yaml").read_text())
    spec["component"]["params"]["block_rows"] = 300
    (specs / "german_fair_mdav.yaml").write_text(yaml.safe_dump(spec))
    versions = {}
    for engine in ("spark", "local"):
        store = tmp_path / engine
        defs = build_defs(specs, store=str(store))
        with dg.DagsterInstance.ephemeral() as instance:
            res = defs.resolve_job_def("german_fair_mdav_job").execute_in_process(
                instance=instance,
                resources={"execution_engine": ExecutionEngine(engine=engine)},
            )
            assert res.success
        version = read_latest(store / "german_fair_mdav")
        man = json.loads((store / "german_fair_mdav" / version / "manifest.json").read_text())
        assert man["execution"]["engine"] == engine
        assert man["validation"]["status"] == "passed"
        versions[engine] = (
            store / "german_fair_mdav" / version / "shared" / "data.parquet"
        ).read_bytes()
    assert versions["spark"] == versions["local"]
