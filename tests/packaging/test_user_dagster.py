"""A user's own Dagster project on the built wheel (issue 45, "Must show"): a fresh virtual
environment outside the repository with ``privfair[dagster]`` (the session fixture
``with_dagster``) and a project folder of the user's, in two forms.

* **Python**: the README's ``definitions.py`` (``pipelines/examples/dagster_definitions.py.txt``
  as the wheel ships it: the user's asset ``people``, ``release_assets`` merged into their
  ``Definitions``, ``build_privfair_checks`` on ``people``, ``people_report`` downstream),
  materialised by ``dagster asset materialize -f definitions.py --select '*'``: the release is
  published with every check passed, downstream of ``people``, with the version ``privfair run
  --input`` gives the same rows in the same environment. The same file with a guarantee the
  rows cannot give (``k: 50``, in a folder, instance and store of its own) fails that check and
  ``contract``, publishes nothing, and ``people_report`` does not run.
* **Component**: a ``dg`` project with ``people`` in ``defs/people.py`` and the README's
  ``defs.yaml``: ``dg list components`` lists ``privfair.dagster.PrivfairRelease`` (the wheel's
  entry point), ``dg check defs`` accepts it, ``dg launch`` publishes the same version.

Each run goes in process (run config ``execution: in_process``), so a run is one process.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml
from _dg_project import RUNS, write_project
from _shared import published_versions

from tests.packaging._venvs import REPO, Venv, empty_dir, explain, ok, run

pytestmark = pytest.mark.slow

EXAMPLES = REPO / "pipelines" / "examples"
DEFINITIONS = "dagster_definitions.py.txt"
DEFS_YAML = "dagster_defs.yaml"
RELEASE = "published/people_k5"
DEMAND = '"guarantees": [{"kind": "k_anonymity", "k": 5}]'
STRICT = '"guarantees": [{"kind": "k_anonymity", "k": 50}]'  # MDAV's classes hold 5 to 9 rows
IN_PROCESS = json.dumps({"execution": {"config": {"in_process": {}}}})

#: the release's parents in the project's asset graph, and the rows and spec of the release
#: written where the command line reads them
GRAPH_AND_ROWS = """\
import json
import sys

import dagster as dg

sys.path.insert(0, ".")
import definitions

node = definitions.defs.resolve_asset_graph().get(dg.AssetKey(["published", "people_k5"]))
definitions.people().to_parquet("rows.parquet")
with open("spec.yaml", "w") as f:
    json.dump(definitions.SPEC, f)  # JSON is YAML
print(json.dumps({
    "parents": sorted(k.to_user_string() for k in node.parent_keys),
    "checks": sorted(k.name for k in node.check_keys),
}))
"""


def _runs(venv: Venv, root: Path, env: dict[str, str]) -> list[dict]:
    proc = ok(run([venv.python, "-c", RUNS], cwd=root, env=env))
    return json.loads(proc.stdout.splitlines()[-1])


def _folder(venv: Venv, tmp_path_factory, name: str, definitions: str) -> dict:
    """A user's project folder with ``definitions.py``, its own DAGSTER_HOME and store, and
    its one materialisation of every asset."""
    root = empty_dir(tmp_path_factory, name)
    (root / "definitions.py").write_text(definitions)
    home = root / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = venv.env(DAGSTER_HOME=str(home), PRIVFAIR_STORE=str(root / "releases"))
    materialise = [venv.bin("dagster"), "asset", "materialize", "-f", "definitions.py"]
    proc = run([*materialise, "--select", "*", "--config-json", IN_PROCESS], cwd=root, env=env)
    return {"root": root, "env": env, "proc": proc}


@pytest.fixture(scope="module")
def shipped(with_dagster: Venv) -> dict[str, str]:
    """The examples as the wheel ships them, the README's text."""
    where = with_dagster.site / "privfair" / "examples"
    out = {name: (where / name).read_text() for name in (DEFINITIONS, DEFS_YAML)}
    for name, text in out.items():
        assert text == (EXAMPLES / name).read_text(), name
    return out


@pytest.fixture(scope="module")
def project(with_dagster: Venv, shipped, tmp_path_factory) -> dict:
    return _folder(with_dagster, tmp_path_factory, "dagster-project", shipped[DEFINITIONS])


@pytest.fixture(scope="module")
def strict(with_dagster: Venv, shipped, tmp_path_factory) -> dict:
    text = shipped[DEFINITIONS]
    assert DEMAND in text
    return _folder(with_dagster, tmp_path_factory, "dagster-strict", text.replace(DEMAND, STRICT))


def test_the_release_is_published_downstream_with_privfair_runs_version(project, with_dagster):
    ok(project["proc"])
    root, env = project["root"], project["env"]
    (r,) = _runs(with_dagster, root, env)
    assert r["status"] == "SUCCESS", r
    assert set(r["materialized"]) == {"people", RELEASE, "people_report"}, r
    assert r["checks"] and all(r["checks"].values()), r["checks"]
    assert {f"{RELEASE}:contract", f"{RELEASE}:spec_0_k_anonymity", "people:columns_absent"} <= set(
        r["checks"]
    )
    release = r["materialized"][RELEASE]
    version = release["metadata"]["privfair/version"]
    assert published_versions(root / "releases", "people_k5") == [version]
    assert release["tags"]["dagster/data_version"] == version
    assert "dagster/input_data_version/people" in release["tags"]  # its input was `people`
    assert r["materialized"]["people_report"]["metadata"]["rows"] == "300"

    facts = json.loads(
        ok(run([with_dagster.python, "-c", GRAPH_AND_ROWS], cwd=root, env=env)).stdout
    )
    assert facts["parents"] == ["people"]  # the lineage edge
    assert {"contract", "spec_0_k_anonymity"} <= set(facts["checks"])
    cli = ok(
        run(
            [
                with_dagster.bin("privfair"),
                "run",
                root / "spec.yaml",
                "--input",
                root / "rows.parquet",
                "--store",
                root / "cli_releases",
            ],
            cwd=root,
            env=env,
        )
    )
    assert f"published: people_k5 {version}" in cli.stdout, explain(cli)


def test_a_guarantee_that_cannot_hold_blocks_the_downstream_asset(strict, with_dagster):
    proc = strict["proc"]
    assert proc.returncode != 0, explain(proc)
    (r,) = _runs(with_dagster, strict["root"], strict["env"])
    said = json.dumps(r, indent=1) + explain(proc)
    assert r["status"] == "FAILURE", said
    assert r["checks"].get(f"{RELEASE}:spec_0_k_anonymity") is False, said
    assert r["checks"].get(f"{RELEASE}:contract") is False, said
    assert r["checks"].get("people:columns_absent") is True, said
    assert set(r["materialized"]) == {"people"}, said  # people_report did not run
    assert published_versions(strict["root"] / "releases", "people_k5") == []


def test_the_component_in_a_dg_project_gives_the_same_release(
    with_dagster, shipped, project, tmp_path_factory
):
    root = empty_dir(tmp_path_factory, "dg-project")
    # the user's asset as the README's definitions.py writes it
    text = shipped[DEFINITIONS]
    people = text[text.index('@dg.asset(group_name="crm")') : text.index("\n\n\n@dg.asset(ins=")]
    header = "import random\n\nimport dagster as dg\nimport pandas as pd\n\n\n"
    write_project(root, header + people + "\n", shipped[DEFS_YAML])
    home = root / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = with_dagster.env(DAGSTER_HOME=str(home), PRIVFAIR_STORE=str(root / "releases"))
    dg = with_dagster.bin("dg")

    listed = json.loads(ok(run([dg, "list", "components", "--json"], cwd=root, env=env)).stdout)
    assert "privfair.dagster.PrivfairRelease" in {i["key"] for i in listed["items"]}
    ok(run([dg, "check", "defs"], cwd=root, env=env))
    ok(run([dg, "launch", "--assets", "*"], cwd=root, env=env))
    (r,) = _runs(with_dagster, root, env)
    assert r["status"] == "SUCCESS" and all(r["checks"].values()), r
    version = r["materialized"][RELEASE]["metadata"]["privfair/version"]
    # the same spec and rows as the Python project's: the same release
    (python_version,) = published_versions(project["root"] / "releases", "people_k5")
    assert version == python_version
    assert yaml.safe_load(shipped[DEFS_YAML])["attributes"]["spec"] == _spec_of(text)


def _spec_of(definitions: str) -> dict:
    """The ``SPEC`` mapping a ``definitions.py`` assigns, as a literal."""
    (node,) = [
        n
        for n in ast.parse(definitions).body
        if isinstance(n, ast.Assign)
        and [t.id for t in n.targets if isinstance(t, ast.Name)] == ["SPEC"]
    ]
    return ast.literal_eval(node.value)
