"""Helpers shared by the Dagster definitions, the Airflow DAG file, the demo and the tests.

Import-light on purpose (stdlib only at module level): the Airflow DAG processor imports this
module on every parse of ``dags/privfair_dags.py``.

* where the specs live (``$PRIVFAIR_SPECS_DIR``, default ``pipelines/specs``) and loading them;
* where releases go (``$PRIVFAIR_STORE``, default ``releases``; a relative path is taken
  relative to the repository root, because orchestrator workers have no meaningful cwd);
* the asset-check name of each guarantee a spec declares (``contract_slots``);
* embedded defaults for ``DAGSTER_HOME`` (``.dagster_home/``) and ``AIRFLOW_HOME``
  (``.airflow_home/``, SQLite, no examples, dags folder = ``dags/``);
* a small command line::

      python -m pipelines.orchestrate sigdfl CMD ARGS...   # exec CMD with SIGINT/SIGTERM reset
      python -m pipelines.orchestrate dagster-dev [-p 3000] # the Dagster UI (webserver + daemon)
      python -m pipelines.orchestrate airflow ARGS...       # airflow with the embedded defaults
"""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from schemas.spec import PipelineSpec

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SPECS_DIR = REPO_ROOT / "pipelines" / "specs"
DAGS_FOLDER = REPO_ROOT / "dags"
DEFAULT_DAGSTER_HOME = REPO_ROOT / ".dagster_home"
DEFAULT_AIRFLOW_HOME = REPO_ROOT / ".airflow_home"

DAGSTER_YAML = """\
# Written by pipelines.orchestrate.ensure_dagster_home: local, private defaults.
# Storage is the default SQLite storage under this folder.
telemetry:
  enabled: false
"""

# Spec presets -> cron (Dagster has no '@once'; that spec gets a job but no schedule).
CRON_PRESETS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
}


# --- specs -------------------------------------------------------------------------------------
def specs_dir(specs: str | Path | None = None) -> Path:
    """The folder of pipeline specs: ``specs``, else ``$PRIVFAIR_SPECS_DIR``, else the shipped ones."""
    return Path(specs or os.environ.get("PRIVFAIR_SPECS_DIR") or DEFAULT_SPECS_DIR).resolve()


def load_specs(specs: str | Path | None = None) -> list[tuple[Path, PipelineSpec]]:
    """Every ``*.yaml`` / ``*.yml`` spec of the folder, sorted by file name, validated.

    A malformed spec raises ``SpecError`` naming the file and key (an orchestrator shows it as a
    load / import error) rather than silently dropping a release. Two specs with the same
    ``name`` are an error too (they would publish into the same pipeline folder)."""
    from schemas.errors import SpecError
    from schemas.spec import load_spec

    folder = specs_dir(specs)
    if not folder.is_dir():
        raise SpecError("<dir>", "spec folder does not exist", str(folder))
    files = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    out: list[tuple[Path, PipelineSpec]] = []
    seen: dict[str, Path] = {}
    for path in files:
        spec = load_spec(path)
        if spec.name in seen:
            raise SpecError(
                "name", f"'{spec.name}' is also the name of {seen[spec.name]}", str(path)
            )
        seen[spec.name] = path
        out.append((path, spec))
    return out


def cron_of(schedule: str | None) -> str | None:
    """A spec's schedule as a cron string for Dagster (None: no schedule)."""
    if schedule is None or schedule == "@once":
        return None
    return CRON_PRESETS.get(schedule, schedule)


# --- store and data ----------------------------------------------------------------------------
def resolve_store(uri: str | Path | None = None) -> str:
    """The release store URI: ``uri``, else ``$PRIVFAIR_STORE``, else ``releases``. A relative
    local path is made absolute against the repository root; URIs are returned unchanged."""
    text = str(uri or os.environ.get("PRIVFAIR_STORE") or "releases")
    if "://" in text and not text.startswith("file://"):
        return text
    p = Path(text.removeprefix("file://")).expanduser()
    return str(p if p.is_absolute() else (REPO_ROOT / p).resolve())


def resolve_data_dir(data_dir: str | Path | None = None) -> str | None:
    """The raw-data folder: ``data_dir``, else ``$PRIVFAIR_DATA_DIR``, else None (the dataset
    sources fall back to their checked download cache)."""
    text = str(data_dir or os.environ.get("PRIVFAIR_DATA_DIR") or "")
    if not text:
        return None
    p = Path(text).expanduser()
    return str(p if p.is_absolute() else (REPO_ROOT / p).resolve())


def safe_name(text: str) -> str:
    """``text`` reduced to ``[A-Za-z0-9_.-]`` (for folder names made of run ids)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "run"


# --- asset-check names of a contract -----------------------------------------------------------
def _slot_base(g: Any) -> str:
    gid = str(getattr(g, "id", "") or "").replace("'", "_prime")
    parts = [gid, g.kind]
    if g.kind == "t_closeness":
        parts.append(g.reference)
    name = re.sub(r"[^A-Za-z0-9]+", "_", "_".join(p for p in parts if p)).strip("_")
    return name if name and not name[0].isdigit() else f"g_{name}"


def slot_names(contract: list) -> list[str]:
    """One asset-check name per guarantee, in order: ``<id>_<kind>`` made identifier-safe
    (``C4'`` -> ``C4_prime``; t-closeness also names its reference), ``_2``, ``_3``... on
    repeats. The same contract always gives the same names."""
    names: list[str] = []
    counts: dict[str, int] = {}
    for g in contract:
        base = _slot_base(g)
        counts[base] = counts.get(base, 0) + 1
        names.append(base if counts[base] == 1 else f"{base}_{counts[base]}")
    return names


def declared_contract(spec: PipelineSpec) -> list:
    """The guarantees a spec's release will declare, known from the spec alone (no data): the
    component's contract *shape* from its own ``declared_contract`` (data-dependent values are
    placeholders) followed by the spec's own demands, in the order
    ``pipelines.stages.contract_for`` builds them. ``tests/test_dagster.py`` checks that every
    check name matches the real contract."""
    from components.core.registry import CONTRACTS

    outline = CONTRACTS.get(spec.component.name)
    out = outline(spec.params) if outline is not None else []
    demanded = [
        g if g.id else g.model_copy(update={"id": f"spec.{i}"})
        for i, g in enumerate(spec.guarantees)
    ]
    return out + demanded


# --- embedded homes ----------------------------------------------------------------------------
def ensure_dagster_home(home: str | Path | None = None) -> Path:
    """Make sure ``$DAGSTER_HOME`` is set (default ``<repo>/.dagster_home``), exists and holds a
    ``dagster.yaml`` with telemetry disabled (SQLite storage is Dagster's default)."""
    path = Path(home or os.environ.get("DAGSTER_HOME") or DEFAULT_DAGSTER_HOME).resolve()
    path.mkdir(parents=True, exist_ok=True)
    cfg = path / "dagster.yaml"
    if not cfg.exists():
        cfg.write_text(DAGSTER_YAML)
    os.environ["DAGSTER_HOME"] = str(path)
    return path


AIRFLOW_CFG = """\
# Written by pipelines.orchestrate (privfair's embedded defaults); Airflow fills in the rest.
# The metadata DB is the default SQLite file $AIRFLOW_HOME/airflow.db.
[core]
dags_folder = {dags}
load_examples = False
parallelism = 2

[api]
host = 127.0.0.1
"""


def ensure_airflow_home(home: str | Path | None = None) -> Path:
    """Create the Airflow home (default ``<repo>/.airflow_home``) with a minimal ``airflow.cfg``
    holding privfair's defaults, so a plain ``airflow`` with ``AIRFLOW_HOME`` set behaves like
    ``python -m pipelines.orchestrate airflow``. An existing ``airflow.cfg`` is left alone."""
    path = Path(home or os.environ.get("AIRFLOW_HOME") or DEFAULT_AIRFLOW_HOME).resolve()
    path.mkdir(parents=True, exist_ok=True)
    cfg = path / "airflow.cfg"
    if not cfg.exists():
        cfg.write_text(AIRFLOW_CFG.format(dags=DAGS_FOLDER))
    return path


def airflow_env(home: str | Path | None = None, base: dict | None = None) -> dict[str, str]:
    """Environment for the ``airflow`` CLI with privfair's embedded defaults: ``AIRFLOW_HOME``
    (default ``<repo>/.airflow_home``, SQLite metadata DB inside it), no example DAGs, the dags
    folder = the repository's ``dags/``, the API bound to 127.0.0.1 and a small executor pool.
    Values already set in ``base`` (default ``os.environ``) win."""
    env = dict(os.environ if base is None else base)
    if not env.get("AIRFLOW_HOME"):
        env["AIRFLOW_HOME"] = str(Path(home or DEFAULT_AIRFLOW_HOME).resolve())
    env.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    env.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(DAGS_FOLDER))
    env.setdefault("AIRFLOW__CORE__PARALLELISM", "2")
    env.setdefault("AIRFLOW__API__HOST", "127.0.0.1")
    bindir = str(Path(sys.executable).parent)
    if bindir not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    ensure_airflow_home(env["AIRFLOW_HOME"])
    return env


def airflow_db_ready(env: dict[str, str]) -> bool:
    return (Path(env["AIRFLOW_HOME"]) / "airflow.db").exists()


# --- command line ------------------------------------------------------------------------------
def _exec_sigdfl(argv: list[str]) -> None:
    """Reset SIGINT/SIGTERM to their defaults, then exec ``argv`` (same PID). A server started
    in the background from a non-interactive shell otherwise inherits SIGINT as *ignored*, and
    ``dagster dev`` / ``airflow standalone`` then hang on shutdown or orphan their children."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.execvp(argv[0], argv)


def _bin(name: str) -> str:
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else name


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    cmd, rest = args[0], args[1:]
    if cmd == "sigdfl":
        if not rest:
            print("usage: python -m pipelines.orchestrate sigdfl CMD [ARGS...]", file=sys.stderr)
            return 2
        _exec_sigdfl(rest)
    if cmd == "dagster-dev":
        ensure_dagster_home()
        os.chdir(REPO_ROOT)
        _exec_sigdfl(
            [_bin("dagster"), "dev", "-m", "pipelines.definitions", "-h", "127.0.0.1", *rest]
        )
    if cmd == "airflow":
        env = airflow_env()
        if rest[:2] != ["db", "migrate"] and not airflow_db_ready(env):
            import subprocess

            subprocess.run([_bin("airflow"), "db", "migrate"], env=env, check=True)
        os.environ.update(env)
        _exec_sigdfl([_bin("airflow"), *rest])
    print(f"unknown command '{cmd}' (sigdfl, dagster-dev, airflow)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
