"""Development commands and embedded orchestrator homes (settings live in ``privfair.spec.settings``,
the spec catalogue in ``privfair.spec.catalogue``).

* embedded defaults for ``DAGSTER_HOME`` (``.dagster_home/``) and ``AIRFLOW_HOME``
  (``.airflow_home/``, SQLite, no examples, dags folder = ``dags/``);
* a small command line::

      python -m privfair.orchestrate sigdfl CMD ARGS...   # exec CMD with SIGINT/SIGTERM reset
      python -m privfair.orchestrate dagster-dev [-p 3000] # the Dagster UI (webserver + daemon)
      python -m privfair.orchestrate airflow ARGS...       # airflow with the embedded defaults
      privfair-airflow ARGS...                              # the same, as a console script

A plain ``airflow`` reads ``$AIRFLOW_HOME/airflow.cfg`` (default ``~/airflow``) and finds
no privfair DAG there; ``privfair-airflow`` (``uv run privfair-airflow dags test SPEC``) is
``airflow`` with ``AIRFLOW_HOME`` defaulting to ``./.airflow_home``, the dags folder the
repository's ``dags/`` and the SQLite metadata DB migrated on first use.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from privfair.spec.settings import pin_defaults

# relative to the directory the command starts in (a project's root), never the installation
DEFAULT_DAGS_FOLDER = Path("dags")
DEFAULT_DAGSTER_HOME = Path(".dagster_home")
DEFAULT_AIRFLOW_HOME = Path(".airflow_home")

DAGSTER_YAML = """\
# Written by privfair.orchestrate.ensure_dagster_home: local, private defaults.
# Storage is the default SQLite storage under this folder.
telemetry:
  enabled: false
"""


# --- embedded homes ----------------------------------------------------------------------------
def ensure_dagster_home(home: str | Path | None = None) -> Path:
    """Make sure ``$DAGSTER_HOME`` is set (default ``./.dagster_home``), exists and holds a
    ``dagster.yaml`` with telemetry disabled (SQLite storage is Dagster's default)."""
    path = Path(home or os.environ.get("DAGSTER_HOME") or DEFAULT_DAGSTER_HOME).resolve()
    path.mkdir(parents=True, exist_ok=True)
    cfg = path / "dagster.yaml"
    if not cfg.exists():
        cfg.write_text(DAGSTER_YAML)
    os.environ["DAGSTER_HOME"] = str(path)
    return path


AIRFLOW_CFG = """\
# Written by privfair.orchestrate (privfair's embedded defaults); Airflow fills in the rest.
# The metadata DB is the default SQLite file $AIRFLOW_HOME/airflow.db.
[core]
dags_folder = {dags}
load_examples = False
parallelism = 2

[api]
host = 127.0.0.1
"""


def dags_folder(env: dict | None = None) -> Path:
    """The dags folder privfair's Airflow defaults point at: ``$PRIVFAIR_DAGS_FOLDER``, else
    ``./dags``, resolved when asked (against the current directory then), not at import."""
    given = (os.environ if env is None else env).get("PRIVFAIR_DAGS_FOLDER")
    return Path(given or DEFAULT_DAGS_FOLDER).resolve()


def ensure_airflow_home(home: str | Path | None = None) -> Path:
    """Create the Airflow home (default ``./.airflow_home``) with a minimal ``airflow.cfg``
    holding privfair's defaults, so a plain ``airflow`` with ``AIRFLOW_HOME`` set behaves like
    ``python -m privfair.orchestrate airflow``. An existing ``airflow.cfg`` is left alone."""
    path = Path(home or os.environ.get("AIRFLOW_HOME") or DEFAULT_AIRFLOW_HOME).resolve()
    path.mkdir(parents=True, exist_ok=True)
    cfg = path / "airflow.cfg"
    if not cfg.exists():
        cfg.write_text(AIRFLOW_CFG.format(dags=dags_folder()))
    return path


def airflow_env(home: str | Path | None = None, base: dict | None = None) -> dict[str, str]:
    """Environment for the ``airflow`` CLI with privfair's embedded defaults: ``AIRFLOW_HOME``
    (default ``./.airflow_home``, SQLite metadata DB inside it), no example DAGs, the dags
    folder = the repository's ``dags/``, the API bound to 127.0.0.1 and a small executor pool.
    Values already set in ``base`` (default ``os.environ``) win."""
    env = dict(os.environ if base is None else base)
    if not env.get("AIRFLOW_HOME"):
        env["AIRFLOW_HOME"] = str(Path(home or DEFAULT_AIRFLOW_HOME).resolve())
    env.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    env.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(dags_folder(env)))
    env.setdefault("AIRFLOW__CORE__PARALLELISM", "2")
    env.setdefault("AIRFLOW__API__HOST", "127.0.0.1")
    pin_defaults(env)
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
            print("usage: python -m privfair.orchestrate sigdfl CMD [ARGS...]", file=sys.stderr)
            return 2
        _exec_sigdfl(rest)
    if cmd == "dagster-dev":
        ensure_dagster_home()
        pin_defaults(os.environ)
        _exec_sigdfl(
            [_bin("dagster"), "dev", "-m", "privfair.dagster.definitions", "-h", "127.0.0.1", *rest]
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


def airflow_main() -> int:
    """The ``privfair-airflow`` console script: ``airflow`` with privfair's embedded defaults
    (``python -m privfair.orchestrate airflow ARGS...``); values already in the environment
    win, so a deployment's own ``AIRFLOW_HOME`` or ``AIRFLOW__CORE__DAGS_FOLDER`` is kept."""
    return main(["airflow", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
