"""Shared test setup: the real benchmark files, and no test touching the user's cache.

``PRIVFAIR_DATA_DIR`` defaults to ``<repo>/../shared/data`` unless already set.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

# tests/ itself holds the shared helpers (``_shared``) of the test folders below it
sys.path.insert(0, str(Path(__file__).resolve().parent))
# Test modules are named ``tests.<folder>.<module>`` (--import-mode=importlib); a worker process
# that unpickles one of their functions imports it by that name. Only ``tests`` is made
# importable (a link in a folder of its own), not the repository root: its folder names
# (``components``, ``pipelines``, ``schemas``) are not importable, as in an installation.
_TESTS_ROOT = Path(tempfile.mkdtemp(prefix="privfair-tests-root-"))
(_TESTS_ROOT / "tests").symlink_to(Path(__file__).resolve().parent, target_is_directory=True)
sys.path.insert(1, str(_TESTS_ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(_TESTS_ROOT), os.environ.get("PYTHONPATH", "")) if p
)

os.environ.setdefault(
    "PRIVFAIR_DATA_DIR", str((Path(__file__).parents[1] / ".." / "shared" / "data").resolve())
)
# release reports read the evaluations folder: never a developer's own evaluations/
os.environ["PRIVFAIR_EVALUATIONS"] = tempfile.mkdtemp(prefix="privfair-evaluations-")
# the data owner's ledger (``privfair.budget.ledger.default_url``) of the session's module fixtures:
# never the developer's own; each test gets a fresh one (``_isolated_cache``)
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="privfair-state-")
os.environ.pop("PRIVFAIR_LEDGER", None)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Point the download cache and the data owner's ledger at fresh temp dirs and forget any
    mirror, for every test: one test's releases are not another's earlier releases."""
    monkeypatch.setenv("PRIVFAIR_CACHE_DIR", str(tmp_path_factory.mktemp("privfair-cache")))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("privfair-state")))
    monkeypatch.delenv("PRIVFAIR_DATA_MIRROR", raising=False)


@pytest.fixture(scope="session")
def builtin_table():
    """Load a built-in dataset (``privfair.io.ingest.load_dataset``) once per session.

    Returns a callable ``name -> pa.Table``; call it inside the test, so the isolated cache
    above is already in place.
    """
    from privfair.io.ingest import load_dataset
    from privfair.schemas.spec import DatasetSpec

    cache: dict = {}

    def load(name: str):
        if name not in cache:
            cache[name] = load_dataset(DatasetSpec(name=name))[0]
        return cache[name]

    return load


@pytest.fixture(scope="session")
def spark_engine():
    """One Spark session (``local[2]``) for the session's Spark tests. Without Java the tests
    are skipped, except in CI (``CI`` set), where `.ci/deps` installs it: there it is an error."""
    import shutil

    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        msg = "no Java runtime: install it with .ci/deps (apt-get install openjdk-17-jre-headless)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    from privfair.components.core.engine import SparkEngine

    engine = SparkEngine("local[2]")
    engine.spark  # noqa: B018 - started here, so the first test does not pay for it
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def browser():
    """Debian's headless chromium driven by Playwright (its own browser download is not
    available here); skipped with the reason when the binary is absent."""
    from _shared import CHROMIUM, CHROMIUM_ARGS

    if not CHROMIUM.exists():
        pytest.skip(
            f"no chromium at {CHROMIUM}: install it with .ci/deps (apt-get install chromium)"
        )
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is a dev dependency")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def postgres_url():
    """A PostgreSQL server started for the session (``_postgres.postgres_server``); its URL.
    Skipped without the server binaries, except in CI (``CI`` set), where it is an error."""
    from _postgres import binaries, postgres_server

    if binaries() is None:
        msg = "no PostgreSQL server (initdb, pg_ctl): install it with .ci/deps (postgresql)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    with postgres_server() as url:
        yield url
