"""The wheel built from this repository and fresh virtual environments outside it, as a user
has them: the helpers of the packaging tests (``conftest.py`` builds the wheel and the
environments once per session)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
VERSION = PROJECT["version"]
DIST_INFO = f"privfair-{VERSION}.dist-info"
#: repository folder -> its place in the wheel (pyproject's ``package-dir``)
MAPPED = {
    "pipelines": "privfair",
    "components": "privfair/components",
    "schemas": "privfair/schemas",
}
K = 5


# --- running things --------------------------------------------------------------------------
def tail(text: str, n: int = 6000) -> str:
    return text if len(text) <= n else "...\n" + text[-n:]


def explain(proc: subprocess.CompletedProcess) -> str:
    cmd = " ".join(str(a) for a in proc.args)
    return (
        f"\n$ {cmd}\n(exit {proc.returncode})\n--- stdout ---\n{tail(proc.stdout)}"
        f"\n--- stderr ---\n{tail(proc.stderr)}"
    )


def run(args, *, cwd, env=None, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, explain(proc)
    return proc


def last_json(proc: subprocess.CompletedProcess):
    ok(proc)
    lines = [x for x in proc.stdout.splitlines() if x.startswith(("{", "["))]
    assert lines, "no JSON line on stdout" + explain(proc)
    return json.loads(lines[-1])


def outside_repo(path: Path) -> Path:
    assert not path.resolve().is_relative_to(REPO), f"{path} is inside the repository"
    return path


@dataclass(frozen=True)
class Venv:
    root: Path
    site: Path  # its site-packages
    home: Path  # HOME and the XDG folders of the user running it

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def bin(self, name: str) -> Path:
        return self.root / "bin" / name

    def env(self, **more: str) -> dict[str, str]:
        """A user's environment: this venv first on PATH, no PYTHONPATH, no privfair,
        orchestrator or virtualenv setting inherited from the test session, HOME and the XDG
        folders in a temp folder (so the ledger is ``$XDG_STATE_HOME/privfair/ledger.sqlite``)."""
        drop = ("PRIVFAIR_", "DAGSTER_", "AIRFLOW", "PYTHON", "VIRTUAL_ENV", "CONDA", "UV_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        dev_bins = {str(REPO / ".venv" / "bin"), str(Path(sys.executable).parent)}
        path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p not in dev_bins]
        env["PATH"] = os.pathsep.join([str(self.root / "bin"), *path])
        env["VIRTUAL_ENV"] = str(self.root)
        env["HOME"] = str(self.home)
        for var, sub in (
            ("XDG_STATE_HOME", "state"),
            ("XDG_CACHE_HOME", "cache"),
            ("XDG_CONFIG_HOME", "config"),
            ("XDG_DATA_HOME", "data"),
        ):
            env[var] = str(self.home / sub)
        env.update(more)
        return env

    def python_c(self, code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
        return run([self.python, "-c", textwrap.dedent(code)], cwd=cwd, env=self.env(**env))


def files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root``, relative path -> (size, mtime_ns)."""
    out = {}
    for p in root.rglob("*"):
        if p.is_file():
            st = p.stat()
            out[p.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


def written(before: dict, after: dict) -> list[str]:
    return sorted(k for k, v in after.items() if before.get(k) != v) + sorted(
        f"(removed) {k}" for k in before.keys() - after.keys()
    )


def python_bytecode(path: str) -> bool:
    """A ``.pyc`` the interpreter writes beside any module it imports (uv installs without
    compiling): Python's doing, not privfair's."""
    return "/__pycache__/" in f"/{path}" and path.endswith(".pyc")


def numba_cache(path: str) -> bool:
    return "/__pycache__/" in f"/{path}" and path.endswith((".nbi", ".nbc"))


def sources() -> dict[str, str]:
    """Every ``.py`` of the mapped folders: its name in the wheel -> its repository path."""
    out = {}
    for folder, target in MAPPED.items():
        for p in sorted((REPO / folder).rglob("*.py")):
            rel = p.relative_to(REPO / folder)
            if "__pycache__" in rel.parts:
                continue
            out[f"{target}/{rel.as_posix()}"] = p.relative_to(REPO).as_posix()
    return out


def make_venv(uv, tmp_path_factory, name: str, wheel: Path, constraints: Path, *more) -> Venv:
    """A venv outside the repository on the running interpreter, with ``wheel`` (a string
    with its extras: ``"<wheel>[dagster]"``) and ``more`` installed at the lock's versions."""
    base = outside_repo(tmp_path_factory.mktemp(name))
    root = base / "venv"
    ok(run([uv, "venv", "--quiet", "--python", sys.executable, root], cwd=base))
    python = root / "bin" / "python"
    ok(
        run(
            [uv, "pip", "install", "--python", python, "--constraint", constraints, wheel, *more],
            cwd=base,
        )
    )
    site = Path(
        ok(
            run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=base)
        ).stdout.strip()
    )
    home = base / "home"
    home.mkdir()
    return Venv(root, site, home)


def empty_dir(tmp_path_factory, name: str) -> Path:
    path = outside_repo(tmp_path_factory.mktemp(name))
    assert not any(path.iterdir())
    return path
