"""privfair as a user has it (issue 44): the wheel built from this repository, installed into
fresh virtual environments outside it, run from an empty folder with no ``PYTHONPATH``.

* the wheel holds ``privfair/`` and its ``dist-info`` only: every module of ``pipelines/``,
  ``components/`` and ``schemas/`` under its ``privfair`` name, the shipped specs and the
  parameter reference, no repository folder (``tests``, ``dags``, ``benchmarks``...);
* without extras: ``privfair.api`` releases a table held in memory into a store in the current
  folder (the ledger in ``$XDG_STATE_HOME``), the release reads back k-anonymous, nothing lands
  in ``site-packages``; no orchestrator is installed and each face's import names its extra;
  no generic top-level name (``components``, ``pipelines``, ``schemas``) is importable; the
  ``privfair`` command runs and reads the store of the current folder;
* a third-party family, a real package with a ``privfair.families`` entry point, installed
  beside the wheel: listed by ``privfair describe`` and released through the Python API;
* ``privfair[dagster]``: the definitions load for a spec folder; ``privfair[airflow]``: one DAG
  per spec; neither environment holds the other orchestrator.

Versions are the lock's (``uv export`` as constraints) and come from uv's cache.
"""

from __future__ import annotations

import subprocess
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from _rounding_family import family_source

from tests.packaging._venvs import (
    DIST_INFO,
    PROJECT,
    REPO,
    K,
    Venv,
    empty_dir,
    explain,
    files,
    last_json,
    make_venv,
    numba_cache,
    ok,
    outside_repo,
    python_bytecode,
    run,
    written,
)

pytestmark = pytest.mark.slow


def test_the_wheel_holds_only_privfair_and_its_metadata(wheel):
    _, names, _ = wheel
    stray = [n for n in names if not n.startswith(("privfair/", f"{DIST_INFO}/"))]
    assert stray == [], f"entries outside privfair/ and {DIST_INFO}/"
    tops = {n.split("/")[0] for n in names}
    assert tops == {"privfair", DIST_INFO}
    for folder in ("tests", "dags", "benchmarks", "components", "pipelines", "schemas"):
        assert folder not in tops and not any(n.startswith(f"{folder}/") for n in names)


def test_the_wheel_ships_every_module_under_its_privfair_name(wheel):
    _, names, sources = wheel
    held = set(names)
    missing = sorted(f"{src} (as {name})" for name, src in sources.items() if name not in held)
    assert missing == [], (
        "modules of the repository not in the wheel (a package missing from pyproject's "
        "[tool.setuptools] packages?)"
    )
    # a module in the wheel with no source in the repository: a stale build/lib of setuptools
    unknown = sorted(n for n in names if n.endswith(".py") and n not in sources)
    assert unknown == [], "modules in the wheel that the repository does not have (rm -rf build/?)"


def test_the_wheel_ships_the_specs_and_the_reference(wheel):
    _, names, _ = wheel
    held = set(names)
    specs = sorted(p.name for p in (REPO / "pipelines" / "specs").glob("*.yaml"))
    assert specs, "the repository has no example specs"
    assert [s for s in specs if f"privfair/specs/{s}" not in held] == []
    examples = sorted(p.name for p in (REPO / "pipelines" / "examples").glob("*.yaml"))
    assert [e for e in examples if f"privfair/examples/{e}" not in held] == []
    if (REPO / "components" / "PARAMETERS.md").exists():
        assert "privfair/components/PARAMETERS.md" in held
    assert "privfair/py.typed" in held


def test_the_wheel_declares_the_commands_and_the_extras(wheel):
    whl, _, _ = wheel
    with zipfile.ZipFile(whl) as z:
        entry_points = z.read(f"{DIST_INFO}/entry_points.txt").decode()
        metadata = z.read(f"{DIST_INFO}/METADATA").decode()
        top_level = z.read(f"{DIST_INFO}/top_level.txt").decode().split()
    assert top_level == ["privfair"]
    assert "privfair = privfair.cli:entry" in entry_points
    assert "privfair-airflow = privfair.orchestrate:airflow_main" in entry_points
    extras = {
        line.split(":", 1)[1].strip()
        for line in metadata.splitlines()
        if line.startswith("Provides-Extra:")
    }
    assert extras >= set(PROJECT["optional-dependencies"])


RELEASE = f"""
import json, sys
import numpy as np
import pandas as pd
from privfair import api

rng = np.random.default_rng(7)
n = 300
people = pd.DataFrame({{
    "age": rng.integers(18, 80, n),
    "hours": rng.integers(10, 60, n),
    "sex": np.tile(["F", "M"], n // 2),
    "income": np.tile([0, 0, 1, 1], n // 4)[:n],
}})
spec = api.spec(
    "wheel_mdav",
    component="mdav",
    params={{"k": {K}}},
    columns={{
        "age": {{"role": "quasi_identifier", "kind": "numeric"}},
        "hours": {{"role": "quasi_identifier", "kind": "numeric"}},
        "sex": {{"role": "protected", "kind": "nominal", "favoured": "M"}},
        "income": {{"role": "label", "kind": "binary", "positive": 1}},
    }},
    demands=[{{"kind": "k_anonymity", "k": {K}}}],
    dataset_name="wheel_people",
)
release = api.run(spec, people)  # the default store: ./releases
back = api.open_release(release.path)
data = back.to_pandas()
import privfair, privfair.components, privfair.schemas
print(json.dumps({{
    "status": release.status,
    "passed": release.passed,
    "path": release.path,
    "verdicts": [[v.kind, v.passed, v.message] for v in back.verdicts],
    "rows": len(data),
    "columns": list(data.columns),
    "smallest_class": int(data.groupby(["age", "hours"]).size().min()),
    "modules": [privfair.__file__, privfair.components.__file__, privfair.schemas.__file__, api.__file__],
    "algorithms": api.algorithms(),
}}))
"""


@dataclass
class Pending:
    """The release script, started in the background as soon as the bare venv exists (numba
    compiles MDAV's kernels on a fresh install: most of this file's time), so the other
    environments are built meanwhile; ``result`` waits for it once."""

    proc: subprocess.Popen
    args: list[str]
    cwd: Path
    site: Path
    before: dict
    _result: dict | None = None

    def result(self) -> dict:
        if self._result is None:
            try:
                out, err = self.proc.communicate(timeout=900)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                out, err = self.proc.communicate()
            done = subprocess.CompletedProcess(self.args, self.proc.returncode, out, err)
            self._result = {
                "proc": done,
                "cwd": self.cwd,
                "before": self.before,
                "after": files(self.site),
            }
        return self._result


@pytest.fixture(scope="module")
def bare_venv(uv, tmp_path_factory, wheel, constraints):
    """The wheel without extras, and its release (``RELEASE``) under way from an empty folder."""
    venv = make_venv(uv, tmp_path_factory, "bare", wheel[0], constraints)
    cwd = empty_dir(tmp_path_factory, "user")
    script = outside_repo(tmp_path_factory.mktemp("scripts")) / "release.py"
    script.write_text(RELEASE)
    before = files(venv.site)
    args = [str(venv.python), str(script)]
    proc = subprocess.Popen(
        args, cwd=cwd, env=venv.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    pending = Pending(proc, args, cwd, venv.site, before)
    yield venv, pending
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


@pytest.fixture(scope="module")
def bare(bare_venv) -> Venv:
    return bare_venv[0]


@pytest.fixture(scope="module")
def released(bare_venv) -> dict:
    """The release of a table in memory through ``privfair.api`` in the bare venv, from an
    empty folder: its process, that folder, the venv's site-packages before and after."""
    return bare_venv[1].result()


@pytest.mark.parametrize("module", ["dagster", "airflow"])
def test_no_orchestrator_is_installed_without_its_extra(bare, tmp_path_factory, module):
    proc = bare.python_c(f"import {module}", empty_dir(tmp_path_factory, "probe"))
    assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr, explain(proc)


@pytest.mark.parametrize("face", ["dagster", "airflow"])
def test_a_face_without_its_extra_names_the_extra(bare, tmp_path_factory, face):
    proc = bare.python_c(
        f"""
        import json
        try:
            import privfair.{face}
        except ImportError as e:
            print(json.dumps([type(e).__name__, str(e)]))
        else:
            print(json.dumps(["imported", ""]))
        """,
        empty_dir(tmp_path_factory, "probe"),
    )
    kind, message = last_json(proc)
    assert kind in ("ImportError", "ModuleNotFoundError"), (kind, message)
    assert f"privfair[{face}]" in message, message


@pytest.mark.parametrize("name", ["components", "pipelines", "schemas"])
def test_no_generic_top_level_name_is_installed(bare, tmp_path_factory, name):
    proc = bare.python_c(f"import {name}", empty_dir(tmp_path_factory, "probe"))
    assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr, explain(proc)


def test_the_privfair_command_runs(bare, tmp_path_factory):
    proc = ok(
        run(
            [bare.bin("privfair"), "--help"],
            cwd=empty_dir(tmp_path_factory, "cli"),
            env=bare.env(),
        )
    )
    assert proc.stdout.startswith("usage: privfair")


# --- the orchestrator faces ------------------------------------------------------------------
DAGSTER_FACE = """
import json, shutil
from pathlib import Path
import dagster as dg
import privfair.dagster.definitions as face
from privfair.dagster.definitions import build_defs
from privfair.spec.settings import DEFAULT_SPECS_DIR

Path("specs").mkdir()
shutil.copy(DEFAULT_SPECS_DIR / "german_fair_mdav.yaml", "specs")
defs = build_defs("specs", store="store")
dg.Definitions.validate_loadable(defs)
graph = defs.resolve_asset_graph()
shipped = {k.to_user_string().split("/")[0] for k in face.defs.resolve_asset_graph().get_all_asset_keys()}
print(json.dumps({
    "specs_dir": str(DEFAULT_SPECS_DIR),
    "keys": sorted(k.to_user_string() for k in graph.get_all_asset_keys()),
    "checks": len(graph.asset_check_keys),
    "jobs": sorted(j.name for j in defs.resolve_all_job_defs() if not j.name.startswith("__")),
    "shipped": sorted(shipped),
}))
"""

AIRFLOW_FACE = """
import json, shutil
from pathlib import Path
from privfair.airflow.dags import build_dags
from privfair.spec.settings import DEFAULT_SPECS_DIR

Path("specs").mkdir()
shutil.copy(DEFAULT_SPECS_DIR / "german_fair_mdav.yaml", "specs")
dags = build_dags("specs")
print(json.dumps({
    "specs_dir": str(DEFAULT_SPECS_DIR),
    "dags": {name: [d.dag_id, sorted(t.task_id for t in d.tasks)] for name, d in dags.items()},
}))
"""


def _shipped_specs() -> list[str]:
    return sorted(p.stem for p in (REPO / "pipelines" / "specs").glob("*.yaml"))


def test_the_dagster_face_loads_definitions_for_a_spec_folder(with_dagster, tmp_path_factory):
    cwd = empty_dir(tmp_path_factory, "dagster-user")
    got = last_json(with_dagster.python_c(DAGSTER_FACE, cwd, DAGSTER_HOME=str(cwd / "dh")))
    assert Path(got["specs_dir"]).is_relative_to(with_dagster.site)
    assert got["keys"] == [
        f"german_fair_mdav/{a}"
        for a in ("evaluation", "protected_table", "raw_table", "release", "source")
    ]
    assert got["checks"] > 1
    assert got["jobs"] == ["german_fair_mdav_job", "privfair_releases"]
    assert got["shipped"] == _shipped_specs()  # the module's own defs: the shipped specs


def test_the_airflow_face_builds_one_dag_per_spec(with_airflow, tmp_path_factory):
    cwd = empty_dir(tmp_path_factory, "airflow-user")
    got = last_json(with_airflow.python_c(AIRFLOW_FACE, cwd, AIRFLOW_HOME=str(cwd / "ah")))
    assert Path(got["specs_dir"]).is_relative_to(with_airflow.site)
    assert got["dags"] == {
        "dag_german_fair_mdav": [
            "german_fair_mdav",
            ["cleanup", "evaluate", "ingest", "protect", "publish", "validate"],
        ]
    }


@pytest.mark.parametrize(
    ("venv", "other"), [("with_dagster", "airflow"), ("with_airflow", "dagster")]
)
def test_each_face_lacks_the_other_orchestrator(request, tmp_path_factory, venv, other):
    env: Venv = request.getfixturevalue(venv)
    proc = env.python_c(f"import {other}", empty_dir(tmp_path_factory, "probe"))
    assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr, explain(proc)


# --- the release (started with the bare venv) ------------------------------------------------
def test_a_table_in_memory_is_released_from_the_installed_wheel(bare, released):
    got = last_json(released["proc"])
    assert (got["status"], got["passed"]) == ("published", True), got
    for module in got["modules"]:  # the wheel's copy, not the repository's
        assert Path(module).is_relative_to(bare.site), module
    assert {"mdav", "fair_mdav", "dmondrian", "mst", "atr"} <= set(got["algorithms"])
    assert got["verdicts"] and all(passed for _, passed, _ in got["verdicts"]), got["verdicts"]
    assert "k_anonymity" in {kind for kind, _, _ in got["verdicts"]}
    assert got["rows"] == 300
    assert got["columns"] == ["age", "hours", "sex", "income"]
    assert got["smallest_class"] >= K  # k-anonymous on the quasi-identifiers, read back


def test_the_store_and_the_ledger_are_the_users_not_the_packages(bare, released):
    got = last_json(released["proc"])
    store = released["cwd"] / "releases"
    assert Path(got["path"]).is_relative_to(store), (
        f"the default store is not ./releases of the current folder: {got['path']}"
    )
    assert (Path(got["path"]) / "manifest.json").is_file()
    assert (bare.home / "state" / "privfair" / "ledger.sqlite").is_file(), (
        "the ledger is not in $XDG_STATE_HOME/privfair"
    )
    assert sorted(p.name for p in released["cwd"].iterdir()) == ["releases"]
    data = [
        f
        for f in written(released["before"], released["after"])
        if not (python_bytecode(f) or numba_cache(f))
    ]
    assert data == [], "the release wrote into the venv's site-packages"


def test_the_privfair_command_reads_the_store_of_the_current_folder(bare, released):
    last_json(released["proc"])
    proc = ok(run([bare.bin("privfair"), "releases"], cwd=released["cwd"], env=bare.env()))
    assert "wheel_mdav" in proc.stdout and "(latest)" in proc.stdout, explain(proc)
    proc = ok(run([bare.bin("privfair"), "describe", "mdav"], cwd=released["cwd"], env=bare.env()))
    assert proc.stdout.startswith("mdav: MDAV microaggregation"), explain(proc)


# --- a third-party family --------------------------------------------------------------------
FAMILY_CODE = family_source(
    "wheel_steps", "wheel_step", "multiple_of", "Third-party step rounding", "S"
)

FAMILY_PYPROJECT = """\
[project]
name = "privfair-wheel-steps"
version = "0.1.0"
dependencies = ["privfair"]

[project.entry-points."privfair.families"]
wheel_steps = "privfair_wheel_steps:FAMILY"

[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[tool.setuptools]
py-modules = ["privfair_wheel_steps"]
"""

FAMILY_RELEASE = """
import json
import numpy as np
import pandas as pd
import privfair_wheel_steps
from privfair import api

table = pd.DataFrame({"x": (np.arange(80) * 37) % 1000, "note": [f"n{i % 4}" for i in range(80)]})
spec = api.spec(
    "wheel_steps_release",
    component="wheel_step",
    params={"step": 25},
    columns={"x": {"role": "quasi_identifier"}, "note": {"role": "sensitive", "kind": "nominal"}},
    dataset_name="wheel_notes",
)
release = api.run(spec, table, store="store")
data = release.to_pandas()
print(json.dumps({
    "module": privfair_wheel_steps.__file__,
    "algorithms": api.algorithms(),
    "status": release.status,
    "verdicts": [[v.kind, v.passed] for v in release.verdicts],
    "off_step": int((data["x"] % 25 != 0).sum()),
    "rows": len(data),
}))
"""


@pytest.fixture(scope="module")
def family(uv, bare, released, wheel, constraints, tmp_path_factory) -> Venv:
    """The family package, built and installed into the bare venv (after its release was
    measured: ``released``)."""
    src = outside_repo(tmp_path_factory.mktemp("family-src"))
    (src / "pyproject.toml").write_text(FAMILY_PYPROJECT)
    (src / "privfair_wheel_steps.py").write_text(textwrap.dedent(FAMILY_CODE))
    ok(
        run(
            [uv, "pip", "install", "--python", bare.python, "--constraint", constraints]
            + [wheel[0], src],
            cwd=src.parent,
        )
    )
    return bare


def test_a_third_party_family_is_listed_by_the_command(family, tmp_path_factory):
    cwd = empty_dir(tmp_path_factory, "family-cli")
    listed = ok(run([family.bin("privfair"), "describe"], cwd=cwd, env=family.env()))
    assert "wheel_step" in listed.stdout and "wheel_steps" in listed.stdout, explain(listed)
    one = ok(run([family.bin("privfair"), "describe", "wheel_step"], cwd=cwd, env=family.env()))
    assert "step" in one.stdout and "rounding step" in one.stdout, explain(one)


def test_a_third_party_family_releases_through_the_api(family, tmp_path_factory):
    cwd = empty_dir(tmp_path_factory, "family-run")
    script = outside_repo(tmp_path_factory.mktemp("scripts")) / "family_release.py"
    script.write_text(FAMILY_RELEASE)
    got = last_json(run([family.python, script], cwd=cwd, env=family.env()))
    assert Path(got["module"]).is_relative_to(family.site), got["module"]
    assert "wheel_step" in got["algorithms"]
    assert got["status"] == "published"
    kinds = {kind: passed for kind, passed in got["verdicts"]}
    assert kinds.get("multiple_of") is True, got["verdicts"]  # the family's own guarantee kind
    assert all(kinds.values()), got["verdicts"]
    assert (got["rows"], got["off_step"]) == (80, 0)


# --- last, so that -x runs everything else first: strict about site-packages -----------------
def test_the_release_writes_nothing_into_site_packages(bare, released):
    """Strict: not even a compile cache (the interpreter's own .pyc aside)."""
    last_json(released["proc"])
    changed = [f for f in written(released["before"], released["after"]) if not python_bytecode(f)]
    shown = "\n  ".join(changed[:12]) + ("\n  ..." if len(changed) > 12 else "")
    why = (
        "\n(.nbi/.nbc: numba's on-disk cache, kept beside the compiled module when it is "
        "decorated @njit(cache=True), e.g. privfair/components/microaggregation/kernel.py's "
        "_CACHE = True)"
        if any(numba_cache(f) for f in changed)
        else ""
    )
    assert changed == [], (
        f"a release from the installed wheel wrote {len(changed)} files into site-packages:\n  "
        f"{shown}{why}"
    )
