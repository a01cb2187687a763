"""Every command of the README's ``bash`` blocks, run as printed.

The commands are read from README.md (so the README cannot drift from what works), in order,
with the placeholders the README defines replaced: ``DIR`` and ``DIR2`` by temporary release
stores, ``DEST`` by a new folder, ``SPEC`` by a toy daily-partitioned spec, ``<version>`` by
the version the first line published. Left out: ``make demo`` and ``make test`` (the demo and
this suite themselves) and the "Tables in and out" quick start, which
``tests/pipelines/test_readme_tables.py`` runs as printed. A README command none of the tests
below runs fails ``test_every_readme_command_has_a_runner``.

Environment of every run: the repository as working directory, the environment's ``bin`` on
the PATH (an activated environment), the store, evaluations, Dagster and Airflow homes in
temporary folders (the Makefile and the CLI take them from the environment), ``UV_FROZEN``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = str(Path(sys.executable).parent)
PIPELINE = "german_fair_mdav"
SKIPPED = {("make", "demo"), ("make", "test")}  # the demo and the suite themselves
TABLES_SECTION = "Tables in and out: databases and lakehouses"  # test_readme_tables.py


def readme_commands(text: str | None = None) -> list[tuple[str, list[str]]]:
    """``(section, argv)`` of every command in the README's ``bash`` blocks, in order: lines
    joined at a trailing backslash, comments dropped, split as the shell would (quotes).

    >>> readme_commands("## A\\n```bash\\nprivfair x 'a b' \\\\\\n  --y  # note\\n```\\n")
    [('A', ['privfair', 'x', 'a b', '--y'])]
    """
    text = (ROOT / "README.md").read_text() if text is None else text
    out, section = [], ""
    for block in re.finditer(r"^## ([^\n]*)$|^```bash\n(.*?)^```", text, re.M | re.S):
        if block.group(1) is not None:
            section = block.group(1).strip()
            continue
        for line in block.group(2).replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            if argv:
                out.append((section, argv))
    return out


def _kind(section: str, argv: list[str]) -> str:
    if tuple(argv) in SKIPPED:
        return "skipped"
    if section == TABLES_SECTION:
        return "tables"
    if argv[0] == "privfair":
        return "cli"
    if argv == ["make", "ui"] or argv[:3] == ["uv", "run", "dg"]:
        return "dagster"
    if argv[:2] == ["make", "airflow-test"] or argv[:3] == ["uv", "run", "privfair-airflow"]:
        return "airflow"
    if argv[:2] == ["pip", "install"]:
        return "install"  # run by tests/packaging/test_wheel.py, on the built wheel
    return "unknown"


def _commands(kind: str) -> list[list[str]]:
    """The README's commands of one kind, each once, in the order they first appear."""
    seen, out = set(), []
    for section, argv in readme_commands():
        if _kind(section, argv) == kind and tuple(argv) not in seen:
            seen.add(tuple(argv))
            out.append(argv)
    return out


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        # the developer's stores, homes and Airflow settings stay out of the runs
        if not k.startswith(("AIRFLOW", "OPENLINEAGE", "DAGSTER_HOME", "PRIVFAIR_STORE"))
        and k not in ("PRIVFAIR_SPECS", "PRIVFAIR_SPECS_DIR")
    }
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env["UV_FROZEN"] = "1"
    env["PRIVFAIR_EVALUATIONS"] = str(tmp / "evaluations")
    env["PRIVFAIR_WORK_DIR"] = str(tmp / "work")
    return {**env, **extra}


def _run(argv: list[str], env: dict[str, str], timeout: float = 600) -> str:
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    print(f"{time.monotonic() - t0:6.1f} s  {shlex.join(argv)}")
    assert proc.returncode == 0, f"{shlex.join(argv)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _fill(token: str, subst: dict[str, str]) -> str:
    """A README token with its placeholders replaced: ``DIR``, ``DIR2``, ``DEST``, ``SPEC`` as a
    whole token or a path's first part, ``<version>`` anywhere.

    >>> _fill("DIR/x/<version>", {"DIR": "/s", "DIR2": "/t", "<version>": "v1"})
    '/s/x/v1'
    >>> _fill("DIRECTORY", {"DIR": "/s"})
    'DIRECTORY'
    """
    token = re.sub(r"^(DIR2|DIR|DEST|SPEC)(?=/|$)", lambda m: subst[m.group(1)], token)
    return token.replace("<version>", subst.get("<version>", "<version>"))


def _latest(folder: Path) -> str:
    """The version ``latest`` names (a symlink or a text file, whichever the store wrote)."""
    latest = folder / "latest"
    return latest.resolve().name if latest.is_symlink() else latest.read_text().strip()


def _manifest(store: Path, version: str | None = None) -> dict:
    folder = store / PIPELINE
    return json.loads((folder / (version or _latest(folder)) / "manifest.json").read_text())


# --- the README's command list -------------------------------------------------------------------
def test_every_readme_command_has_a_runner():
    """Each command is run by a test below (or named as left out): a README line that no test
    runs fails here. The placeholders are the README's own, defined beside the block."""
    commands = readme_commands()
    unknown = [shlex.join(a) for s, a in commands if _kind(s, a) == "unknown"]
    assert not unknown, f"README commands no test runs: {unknown}"
    kinds = {_kind(s, a) for s, a in commands}
    assert kinds == {"skipped", "tables", "cli", "dagster", "airflow", "install"}
    text = (ROOT / "README.md").read_text()
    words = {w for _, a in commands for t in a for w in re.findall(r"[A-Z][A-Z0-9_]+|<\w+>", t)}
    for placeholder in words & {"DIR", "DIR2", "DEST", "SPEC", "<version>"}:
        assert f"`{placeholder}`" in text, f"{placeholder} is not explained in the README"
    # the release command selects the job, which leaves the evaluation out (test below)
    (dg,) = [a for s, a in commands if a[:3] == ["uv", "run", "dg"]]
    assert "--job" in dg and "--assets" not in dg


def test_the_install_commands_name_declared_extras():
    """``pip install 'privfair[EXTRA]'`` names an extra the package declares (the installs
    themselves run in tests/packaging/test_wheel.py, from the built wheel)."""
    import tomllib

    declared = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    named = set()
    for argv in _commands("install"):
        assert argv[2].split("[")[0] == "privfair", argv
        for extra in re.findall(r"\[([a-z,]+)\]", argv[2]):
            named |= set(extra.split(","))
    assert named and named <= declared, named - declared
    assert (ROOT / "tests" / "packaging" / "test_wheel.py").is_file()


def test_the_release_jobs_leave_the_evaluations_out(tmp_path: Path):
    """``<spec>_job`` of every spec and ``privfair_releases`` select no ``<spec>/evaluation``
    asset: a scheduled release (or the README's ``dg launch --job``) never runs a grid."""
    from privfair.dagster.definitions import RELEASES_JOB, build_defs
    from privfair.spec.settings import DEFAULT_SPECS_DIR

    defs = build_defs(specs_dir=DEFAULT_SPECS_DIR, store=str(tmp_path / "store"))
    evaluations = {k for k in defs.resolve_all_asset_keys() if k.path[-1] == "evaluation"}
    specs = sorted(p.stem for p in Path(DEFAULT_SPECS_DIR).glob("*.yaml"))
    assert {k.path[0] for k in evaluations} == set(specs)
    for job in [f"{s}_job" for s in specs] + [RELEASES_JOB]:
        selected = defs.resolve_job_def(job).asset_layer.selected_asset_keys
        assert selected and not selected & evaluations, job
        if job != RELEASES_JOB:
            assert {k.path[-1] for k in selected} >= {"raw_table", "protected_table", "release"}


# --- the command line ----------------------------------------------------------------------------
@pytest.mark.slow
def test_the_command_line_runs_as_printed(tmp_path: Path):
    from _partitioned import write_days, write_spec

    store, dest = tmp_path / "store", tmp_path / "copy"
    toy = tmp_path / "toy"
    write_days(toy, days=2)
    spec = write_spec(toy)
    env = _env(tmp_path)
    commands = _commands("cli")
    assert commands[0] == ["privfair", "run", f"pipelines/specs/{PIPELINE}.yaml", "--store", "DIR"]
    outputs: dict[str, str] = {}  # the README line (as printed) -> its stdout
    subst = {"DIR": str(store), "DEST": str(dest), "SPEC": str(spec)}
    for argv in commands:
        # <version>: the version `latest` names once the first line has published
        subst["<version>"] = _latest(store / PIPELINE) if (store / PIPELINE).exists() else ""
        filled = [_fill(t, subst) for t in argv]
        outputs[shlex.join(argv)] = _run(filled, env)
    (spark,) = [out for line, out in outputs.items() if "spark" in line]
    (verify,) = [out for line, out in outputs.items() if line.startswith("privfair verify")]
    (listed,) = [out for line, out in outputs.items() if line.startswith("privfair releases")]
    published = _manifest(store)
    assert published["validation"]["status"] == "passed"
    versions = [
        p.name
        for p in (store / PIPELINE).iterdir()
        if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
    ]
    params = [_manifest(store, v)["params"] for v in versions]
    assert any(p["k"] == 20 and p["tau"] == 0.7 for p in params)
    assert published["params"]["k"] != 20
    # another grouping of German's rows: published only because the shipped spec allows it
    (second,) = [out for line, out in outputs.items() if "--set k=20" in line]
    assert "republish: allow" in second
    assert (store / "toy_daily").is_dir()  # the partition's release
    # the Spark line publishes the same release: found already published
    assert spark.startswith(f"exists: {PIPELINE} {published['version']}")
    assert (dest / "manifest.json").is_file()
    assert "every file matches its manifest" in verify
    assert published["version"] in listed
    assert list((tmp_path / "evaluations" / PIPELINE).glob("summary.parquet"))


# --- the orchestrators ---------------------------------------------------------------------------
@pytest.mark.slow
def test_the_dagster_commands_run_as_printed(tmp_path: Path):
    """``dg launch --job`` publishes with the run-config override and runs no evaluation;
    ``make ui`` serves the Dagster UI (probed, then stopped)."""
    import dagster as dg

    home, store = tmp_path / "dagster_home", tmp_path / "store"
    env = _env(tmp_path, DAGSTER_HOME=str(home), PRIVFAIR_STORE=str(store))
    (launch,) = [a for a in _commands("dagster") if a[:3] == ["uv", "run", "dg"]]
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    _run(launch, env)
    man = _manifest(store)
    assert man["params"]["k"] == 20 and man["validation"]["status"] == "passed"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.get_latest_materialization_event(dg.AssetKey([PIPELINE, "release"]))
        assert not instance.get_latest_materialization_event(dg.AssetKey([PIPELINE, "evaluation"]))
    assert not (tmp_path / "evaluations").exists()

    assert ["make", "ui"] in _commands("dagster")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path / "ui.log").open("w")
    proc = subprocess.Popen(
        ["make", "ui"],
        cwd=ROOT,
        env={**env, "UI_PORT": str(port)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # one process group: make, uv, dagster dev and its servers
    )
    try:
        deadline, info = time.monotonic() + 240, None
        while info is None:
            assert proc.poll() is None, (tmp_path / "ui.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (tmp_path / "ui.log").read_text()[-3000:]
            with contextlib.suppress(OSError):
                url = f"http://127.0.0.1:{port}/server_info"
                with urllib.request.urlopen(url, timeout=5) as r:
                    info = json.loads(r.read())
            time.sleep(1)
        assert "dagster_webserver_version" in info
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=45)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.mark.slow
def test_the_airflow_commands_run_as_printed(tmp_path: Path):
    """From an empty ``AIRFLOW_HOME`` and no Airflow settings: ``make airflow-test`` (the
    wrapper writes ``airflow.cfg`` and migrates the SQLite DB on first use) publishes, then
    ``uv run privfair-airflow dags test`` on the same home finds the release published."""
    home, store = tmp_path / "airflow_home", tmp_path / "store"
    env = _env(tmp_path, AIRFLOW_HOME=str(home), PRIVFAIR_STORE=str(store))
    env["PRIVFAIR_CACHE_DIR"] = str(tmp_path / "cache")
    commands = _commands("airflow")
    assert commands == [
        ["make", "airflow-test", f"DAG={PIPELINE}"],
        ["uv", "run", "privfair-airflow", "dags", "test", PIPELINE],
    ]
    _run(commands[0], env, timeout=900)
    assert (home / "airflow.db").is_file()
    man = _manifest(store)
    assert man["validation"]["status"] == "passed"
    _run(commands[1], env, timeout=900)
    assert _latest(store / PIPELINE) == man["version"]
