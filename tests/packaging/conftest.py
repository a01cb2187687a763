"""Session fixtures of the packaging tests: the wheel, the lock as constraints and the
environments with each orchestrator's extra, built once and shared by every module here."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from tests.packaging._venvs import (
    REPO,
    Venv,
    make_venv,
    ok,
    outside_repo,
    run,
    sources,
)


# --- the wheel -------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def uv() -> str:
    found = shutil.which("uv")
    if found is None:
        pytest.skip("uv is not on PATH: the packaging tests build and install with uv")
    return found


@pytest.fixture(scope="session")
def wheel(uv, tmp_path_factory) -> tuple[Path, list[str], dict[str, str]]:
    """The wheel, built once from the repository root: (its path, its entries, the sources
    listed just before the build)."""
    out = outside_repo(tmp_path_factory.mktemp("dist"))
    listed = sources()
    ok(run([uv, "build", "--wheel", "--out-dir", out], cwd=REPO))
    (whl,) = out.glob("privfair-*.whl")
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
    return whl, names, listed


@pytest.fixture(scope="session")
def constraints(uv, tmp_path_factory) -> Path:
    """The lock's versions, every extra included, as a constraints file."""
    path = outside_repo(tmp_path_factory.mktemp("lock")) / "constraints.txt"
    proc = ok(
        run(
            [uv, "export", "--frozen", "--no-hashes", "--all-extras", "--no-emit-project"],
            cwd=REPO,
        )
    )
    path.write_text(proc.stdout)
    return path


# --- fresh environments ----------------------------------------------------------------------
@pytest.fixture(scope="session")
def with_dagster(uv, tmp_path_factory, wheel, constraints) -> Venv:
    return make_venv(uv, tmp_path_factory, "dagster", f"{wheel[0]}[dagster]", constraints)


@pytest.fixture(scope="session")
def with_airflow(uv, tmp_path_factory, wheel, constraints) -> Venv:
    return make_venv(uv, tmp_path_factory, "airflow", f"{wheel[0]}[airflow]", constraints)
