"""Where things are: the spec folder, the release store, the raw data, the evaluations.

Import-light on purpose (stdlib only): the Airflow DAG processor imports it on every parse.
Nothing defaults to a folder inside the installed package (``site-packages`` for a wheel):

* specs: ``$PRIVFAIR_SPECS_DIR``, default the example specs shipped with the package
  (read only);
* releases: ``$PRIVFAIR_STORE``, default ``releases``; a relative path is taken relative to the
  current directory. The orchestrator commands (``privfair.orchestrate``) pin it to an absolute
  path before they start Dagster or Airflow, whose workers have no meaningful working directory;
* raw data: ``$PRIVFAIR_DATA_DIR``, default none (the checked download cache);
* evaluations: ``$PRIVFAIR_EVALUATIONS``, default ``evaluations`` (relative to the current
  directory, like the store): ``privfair evaluate`` writes there and release reports read it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

DEFAULT_SPECS_DIR = Path(__file__).resolve().parents[1] / "specs"
ENV_STORE = "PRIVFAIR_STORE"
ENV_EVALUATIONS = "PRIVFAIR_EVALUATIONS"


def specs_dir(specs: str | Path | None = None) -> Path:
    """The folder of pipeline specs: ``specs``, else ``$PRIVFAIR_SPECS_DIR``, else the shipped ones."""
    return Path(specs or os.environ.get("PRIVFAIR_SPECS_DIR") or DEFAULT_SPECS_DIR).resolve()


def resolve_store(uri: str | Path | None = None) -> str:
    """The release store URI: ``uri``, else ``$PRIVFAIR_STORE``, else ``releases``. A relative
    local path is made absolute against the current directory; URIs are returned unchanged."""
    text = str(uri or os.environ.get(ENV_STORE) or "releases")
    if "://" in text and not text.startswith("file://"):
        return text
    return str(Path(text.removeprefix("file://")).expanduser().resolve())


def resolve_evaluations(path: str | Path | None = None) -> Path:
    """The evaluations folder: ``path``, else ``$PRIVFAIR_EVALUATIONS``, else ``evaluations``;
    a relative path is taken relative to the current directory."""
    return (
        Path(str(path or os.environ.get(ENV_EVALUATIONS) or "evaluations")).expanduser().resolve()
    )


def resolve_data_dir(data_dir: str | Path | None = None) -> str | None:
    """The raw-data folder: ``data_dir``, else ``$PRIVFAIR_DATA_DIR``, else None (the dataset
    sources fall back to their checked download cache)."""
    text = str(data_dir or os.environ.get("PRIVFAIR_DATA_DIR") or "")
    if not text:
        return None
    return str(Path(text).expanduser().resolve())


def pin_defaults(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the store and evaluations folder set to absolute paths (their defaults, or
    their relative values, taken against the current directory): what an orchestrator started
    here hands to workers that run elsewhere."""
    env[ENV_STORE] = resolve_store(env.get(ENV_STORE))
    env[ENV_EVALUATIONS] = str(resolve_evaluations(env.get(ENV_EVALUATIONS)))
    return env


def safe_name(text: str) -> str:
    """``text`` reduced to ``[A-Za-z0-9_.-]`` (for folder names made of run ids)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "run"
