"""``privfair.dagster.PrivfairRelease`` in a real ``dg`` project, driven by the ``dg`` command.

One project per module, in a temp folder, with the repository's venv (nothing downloaded): a
``pyproject.toml`` with ``[tool.dg]`` (a project whose root module is ``userproj``), the
user's own assets in ``userproj/defs/people.py`` (``people`` and ``people_report``, taken from
the README's example ``pipelines/examples/dagster_definitions.py.txt``) and the README's
``pipelines/examples/dagster_defs.yaml`` as ``userproj/defs/people_k5/defs.yaml``. The
project's ``definitions.py`` loads the defs folder and runs in process (a run is then one
process, not one per step).

``dg list components`` lists the type (privfair's ``dagster_dg_cli.registry_modules`` entry
point); ``dg check defs`` accepts the file and, on a bad one, names the attribute and its line;
``dg scaffold defs`` writes a file ``dg check defs`` accepts and that publishes as written;
``dg launch`` publishes the release with every check passed, the version ``privfair run
--input`` gives the same rows and spec, downstream of ``people``; a guarantee that cannot hold
fails its check and keeps ``people_report``, downstream of the release, from running; the
other attributes (a spec file, ``asset_key``, ``owners``, ``tags``, ``store``, ``checks`` on
the published table) do what they say.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from _dg_project import RUNS, write_project

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
EXAMPLES = REPO / "pipelines" / "examples"
DEFINITIONS = EXAMPLES / "dagster_definitions.py.txt"
DEFS_YAML = EXAMPLES / "dagster_defs.yaml"
TYPE = "privfair.dagster.PrivfairRelease"
RELEASE = "published/people_k5"


def user_assets(definitions: str, names: tuple[str, ...] = ("people", "people_report")) -> str:
    """The module of the user's own assets: the imports and the named functions of the README's
    ``definitions.py``, as they are printed there."""
    tree = ast.parse(definitions)
    lines = definitions.splitlines()
    parts = [
        ast.get_source_segment(definitions, n)
        for n in tree.body
        if isinstance(n, ast.Import | ast.ImportFrom) and "privfair" not in ast.unparse(n)
    ]
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and n.name in names:
            start = min([d.lineno for d in n.decorator_list] + [n.lineno])
            parts.append("\n\n" + "\n".join(lines[start - 1 : n.end_lineno]))
    assert len(parts) >= 2 + len(names), parts
    return "\n".join(parts) + "\n"


class Project:
    """The temp ``dg`` project and its commands."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env
        self.defs_yaml = root / "userproj" / "defs" / "people_k5" / "defs.yaml"
        self.store = Path(env["PRIVFAIR_STORE"])

    def run(self, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(a) for a in args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def dg(self, *args: str) -> subprocess.CompletedProcess:
        return self.run(BIN / "dg", *args)

    def runs(self) -> list[dict]:
        return json.loads(ok(self.run(BIN / "python", "-c", RUNS)).stdout.splitlines()[-1])


def explain(proc: subprocess.CompletedProcess) -> str:
    return (
        f"\n$ {' '.join(str(a) for a in proc.args)}\n(exit {proc.returncode})\n"
        f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
    )


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, explain(proc)
    return proc


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    base = tmp_path_factory.mktemp("dg_project")
    root = base / "userproj_project"
    write_project(root, user_assets(DEFINITIONS.read_text()), DEFS_YAML.read_text())
    home = base / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "PRIVFAIR_S"))}
    env.update(
        PATH=os.pathsep.join([str(BIN), env.get("PATH", "")]),
        VIRTUAL_ENV=str(BIN.parent),
        DAGSTER_HOME=str(home),
        PRIVFAIR_STORE=str(base / "releases"),
        DAGSTER_DISABLE_TELEMETRY="1",
        # the project's own ledger: the session's holds other tests' German releases, and a
        # German release under another grouping is refused (republish: refuse)
        XDG_STATE_HOME=str(base / "state"),
    )
    return Project(root, env)


def test_the_example_is_the_readmes():
    readme = (REPO / "README.md").read_text()
    section = readme.split("## In your Dagster project", 1)
    assert len(section) == 2, "README has no section 'In your Dagster project'"
    body = section[1].split("\n## ", 1)[0]
    for path in (DEFINITIONS, DEFS_YAML):
        assert path.read_text().strip() in body, f"README does not print {path.name} as it is"


def test_dg_lists_the_component_type(project):
    listed = json.loads(ok(project.dg("list", "components", "--json")).stdout)
    items = {i["key"]: i for i in listed["items"]}
    assert TYPE in items, sorted(items)
    assert "release" in items[TYPE]["summary"]


def test_check_defs_accepts_the_example_and_the_release_is_downstream(project):
    out = ok(project.dg("check", "defs"))
    assert "All definitions loaded successfully" in out.stdout + out.stderr
    listed = json.loads(ok(project.dg("list", "defs", "--json")).stdout)
    assets = {a["asset_key"]: a for a in listed["assets"]}
    assert assets[RELEASE]["dependency_keys"] == ["people"]  # the lineage edge
    assert assets[RELEASE]["group_name"] == "privacy"
    assert "privfair" in assets[RELEASE]["kinds"]
    assert assets["people_report"]["dependency_keys"] == [RELEASE]
    checks = {c["key"] for c in listed["asset_checks"]}
    assert {f"{RELEASE}:contract", f"{RELEASE}:spec_0_k_anonymity"} <= checks
    assert "people:columns_absent" in checks  # the `checks` attribute, on the user's asset
    assert [r["name"] for r in listed["resources"]] == ["privfair"]


@pytest.mark.parametrize(
    ("edit", "attribute", "line", "rule"),
    [
        (
            ("  key_prefix: published", "  key_prefx: published"),
            "attributes.key_prefx",
            23,
            "'key_prefx' was unexpected",
        ),
        (
            ("params: {k: 5}", "params: {k: five}"),
            "attributes.spec.component.params.k",
            18,
            "spec.component.params.k': Input should be a valid integer",
        ),
        (
            ("columns_absent, columns:", "columns_absent, colums:"),
            "attributes.checks.0.demands.0",
            28,
            "colums: unknown key",
        ),
        (  # found when the definitions are built: named with the file, not a line
            ("  input:\n    asset: people             # read through its own IO manager\n", ""),
            "input",
            None,
            "gives roles only (its rows are handed over): give the upstream asset",
        ),
    ],
    ids=["unknown-attribute", "spec-key", "check-demand", "input-missing"],
)
def test_check_defs_names_the_bad_attribute(project, edit, attribute, line, rule):
    good = project.defs_yaml.read_text()
    assert edit[0] in good
    project.defs_yaml.write_text(good.replace(edit[0], edit[1], 1))
    try:
        proc = project.dg("check", "defs")
    finally:
        project.defs_yaml.write_text(good)
    assert proc.returncode != 0, explain(proc)
    said = proc.stdout + proc.stderr
    # schema errors name the type before the attribute, resolution errors do not
    where = rf"defs\.yaml:{line} - (?:{re.escape(TYPE)} )?{re.escape(attribute)}\b"
    if line is None:
        where = rf"defs\.yaml: PrivfairRelease attribute '{attribute}'"
    assert re.search(where, said), explain(proc)
    assert rule in said, explain(proc)


def test_scaffold_writes_a_defs_yaml_that_checks(project):
    target = project.root / "userproj" / "defs" / "credit"
    try:
        ok(project.dg("scaffold", "defs", TYPE, "credit"))
        text = (target / "defs.yaml").read_text()
        assert text.startswith(f"type: {TYPE}\n")
        assert "    name: credit\n" in text
        assert "# input:" in text and "# checks:" in text  # the other attributes, commented
        said = ok(project.dg("check", "defs"))
        assert "All definitions loaded successfully" in said.stdout + said.stderr
        # and it works as written: the built-in German Credit data, published
        ok(project.dg("launch", "--assets", "credit"))
        run = project.runs()[-1]
        assert run["status"] == "SUCCESS" and set(run["materialized"]) == {"credit"}, run
        assert run["checks"] and all(run["checks"].values()), run["checks"]
        version = run["materialized"]["credit"]["metadata"]["privfair/version"]
        assert (project.store / "credit" / version / "manifest.json").is_file()
    finally:
        shutil.rmtree(target, ignore_errors=True)


def test_launch_publishes_with_checks_passed_and_the_version_of_privfair_run(project):
    ok(project.dg("launch", "--assets", "*"))
    (run,) = project.runs()[-1:]
    assert run["status"] == "SUCCESS"
    assert set(run["materialized"]) == {"people", RELEASE, "people_report"}
    release = run["materialized"][RELEASE]
    version = release["metadata"]["privfair/version"]
    assert release["metadata"]["privfair/status"] == "published"
    assert release["tags"]["dagster/data_version"] == version
    assert "dagster/input_data_version/people" in release["tags"]  # read from `people`
    assert run["materialized"]["people_report"]["metadata"]["rows"] == "300"
    checks = run["checks"]
    assert checks and all(checks.values()), checks
    assert {f"{RELEASE}:contract", f"{RELEASE}:spec_0_k_anonymity", "people:columns_absent"} <= set(
        checks
    )
    assert (project.store / "people_k5" / version / "shared" / "data.parquet").is_file()

    # the same rows (the user's asset called as a function) and spec through the command line
    work = project.root.parent / "cli"
    work.mkdir()
    spec = yaml.safe_load(project.defs_yaml.read_text())["attributes"]["spec"]
    (work / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    code = textwrap.dedent(
        f"""
        import runpy
        runpy.run_path({str(project.root / "userproj" / "defs" / "people.py")!r})["people"]()\\
            .to_parquet({str(work / "rows.parquet")!r})
        """
    )
    ok(project.run(BIN / "python", "-c", code))
    cli = ok(
        project.run(
            BIN / "privfair",
            "run",
            work / "spec.yaml",
            "--input",
            work / "rows.parquet",
            "--store",
            work / "store",
        )
    )
    assert re.search(rf"^published: people_k5 {version}$", cli.stdout, re.M), explain(cli)


def test_a_guarantee_that_cannot_hold_blocks_the_downstream_asset(project):
    good = project.defs_yaml.read_text()
    folder = project.store / "people_k5"
    before = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    assert "- {kind: k_anonymity, k: 5}" in good
    project.defs_yaml.write_text(
        good.replace("- {kind: k_anonymity, k: 5}", "- {kind: k_anonymity, k: 50}")
    )
    try:
        proc = project.dg("launch", "--assets", "*")
    finally:
        project.defs_yaml.write_text(good)
    assert proc.returncode != 0, explain(proc)
    run = project.runs()[-1]
    said = json.dumps(run, indent=1) + explain(proc)
    assert run["status"] == "FAILURE", said
    assert run["checks"].get(f"{RELEASE}:spec_0_k_anonymity") is False, said
    assert run["checks"].get(f"{RELEASE}:contract") is False, said
    assert run["checks"].get(f"{RELEASE}:C4_k_anonymity") is True, said  # MDAV's k = 5 holds
    assert RELEASE not in run["materialized"], said
    assert "people_report" not in run["materialized"], said  # blocked
    # no new version: the candidate is quarantined
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == before
    assert any((folder / ".quarantine").iterdir())


VARIANT = """\
type: privfair.dagster.PrivfairRelease
attributes:
  spec: people_k5.yaml
  input: {asset: people}
  asset_key: published/people_k5
  group: privacy
  owners: [team:privacy]
  tags: {domain: crm}
  store: variant_releases
  checks:
    - demands:
        - {kind: k_anonymity, k: 5, quasi_identifiers: [age, region]}
"""


def test_a_spec_file_a_key_a_store_and_checks_on_the_published_table(project):
    """The other attributes: ``spec`` as a file beside the ``defs.yaml``, ``asset_key``,
    ``owners``, ``tags``, ``store`` relative to the project root, and ``checks`` without an
    ``asset``: privfair's checker on the published table, read through privfair's IO manager."""
    good = project.defs_yaml.read_text()
    spec_file = project.defs_yaml.with_name("people_k5.yaml")
    spec = yaml.safe_load(good)["attributes"]["spec"]
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    project.defs_yaml.write_text(VARIANT)
    try:
        listed = json.loads(ok(project.dg("list", "defs", "--json")).stdout)
        launched = project.dg("launch", "--assets", "*")
    finally:
        project.defs_yaml.write_text(good)
        spec_file.unlink()
    assets = {a["asset_key"]: a for a in listed["assets"]}
    release = assets[RELEASE]
    assert release["dependency_keys"] == ["people"]
    assert release["owners"] == [{"team": "privacy"}]  # team:privacy, as dg lists it
    tags = {t["key"]: t["value"] for t in release["tags"]}
    assert tags == {"domain": "crm", "privfair/family": "microaggregation"}
    assert f"{RELEASE}:k_anonymity" in {c["key"] for c in listed["asset_checks"]}
    ok(launched)
    run = project.runs()[-1]
    assert run["status"] == "SUCCESS", run
    assert run["checks"][f"{RELEASE}:k_anonymity"] is True, run["checks"]
    version = run["materialized"][RELEASE]["metadata"]["privfair/version"]
    assert (project.root / "variant_releases" / "people_k5" / version / "manifest.json").is_file()
