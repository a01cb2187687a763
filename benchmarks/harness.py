"""What the benchmark scripts share: where things are (the repository, the shipped specs, the
``results/`` folder every script writes to), the machine a run was measured on, the code of
another revision exported beside the working tree (so the previous code is measured in the same
run) and made importable by a child interpreter under that revision's own module names
(``prepare_tree``), a command run with its process tree's peak memory sampled, the lines
``privfair run`` prints that a benchmark reads, and a throw-away PostgreSQL server.

Scripts are run as ``uv run --no-sync python benchmarks/<script>.py``: their folder is on
``sys.path``, so ``import harness`` needs nothing inserted. A child interpreter started with
``python -c`` gets the same through ``child_env`` (``PYTHONPATH``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import glob
import importlib
import io
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: this folder (``benchmarks/``)
HERE = Path(__file__).resolve().parent
#: the repository
ROOT = HERE.parent
#: where every script writes its report (Markdown, JSON, SVG) by default
RESULTS = HERE / "results"


def result(name: str) -> Path:
    """``results/<name>``, the folder made if missing: a script's default ``--out``."""
    RESULTS.mkdir(exist_ok=True)
    return RESULTS / name


def spec_file(name: str) -> Path:
    """The shipped spec ``name`` (``privfair.spec.settings.DEFAULT_SPECS_DIR/<name>.yaml``)."""
    from privfair.spec.settings import DEFAULT_SPECS_DIR

    return Path(DEFAULT_SPECS_DIR) / f"{name}.yaml"


def child_env(*paths: str | Path, **extra: str) -> dict[str, str]:
    """This environment for a child interpreter, ``paths`` then this folder first on its
    ``PYTHONPATH`` (so ``python -c`` code can ``import harness`` and the scripts beside it),
    then the ``PYTHONPATH`` this process was given, plus ``extra``."""
    path = [str(p) for p in paths] + [str(HERE)]
    path += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), **extra}


#: the summary line of ``privfair run``: guarantees held of all, schema checks passed of all
HOLD = re.compile(r"guarantees: (\d+)/(\d+) hold; schema checks: (\d+)/(\d+) pass")


def machine() -> dict[str, str]:
    """Date, usable CPUs, CPU model, host and the versions the numbers depend on."""
    import numpy as np
    import pyarrow as pa

    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpus": str(len(os.sched_getaffinity(0))),
        "cpu": cpu,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pyarrow": pa.__version__,
        "host": platform.node(),
    }


def export_code(rev: str, dest: Path, paths: tuple[str, ...] = ()) -> str:
    """``paths`` of revision ``rev`` (the whole tree when empty) written under ``dest`` with
    ``git archive``; return the commit."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, *paths],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return commit


#: modules of ``pipelines/`` that commit 0346a10 moved into rooms under ``privfair``: the old
#: name (``pipelines.<key>``) of each, by its new name (``privfair.<value>``)
RENAMED = {
    "settings": "spec.settings",
    "catalogue": "spec.catalogue",
    "partitions": "spec.partitions",
    "sources": "io.sources",
    "connectors": "io.connectors",
    "ingest": "io.ingest",
    "identity": "io.identity",
    "validate": "validation.validate",
    "expectations": "validation.expectations",
    "gx_import": "validation.gx_import",
    "evaluate": "evaluation.evaluate",
    "release": "release.store",
    "share": "release.share",
    "targets": "release.targets",
    "catalog_metadata": "release.catalog_metadata",
    "version": "release.version",
    "report": "release.report",
    "beside": "release.beside",
    "ledger": "budget.ledger",
    "admission": "budget.admission",
    "budget": "budget.summary",
    "flow": "run.flow",
    "tasks": "run.tasks",
    "definitions": "dagster.definitions",
}
_OLD_NAME = {f"privfair.{new}": f"pipelines.{old}" for old, new in RENAMED.items()}
#: the environment variable that tells a child which layout its tree has (``Tree.env``)
LAYOUT_VAR = "PRIVFAIR_BENCH_LAYOUT"


def old_name(name: str) -> str:
    """The module called ``name`` today under the names of a tree from before the rename:
    ``privfair.run.flow`` -> ``pipelines.flow``, ``privfair.cli`` -> ``pipelines.cli``,
    ``privfair.components.x`` -> ``components.x``, ``privfair.schemas.x`` -> ``schemas.x``."""
    if name == "privfair":
        return "pipelines"
    for head in ("privfair.components", "privfair.schemas"):
        if name == head or name.startswith(head + "."):
            return name.removeprefix("privfair.")
    for new, old in _OLD_NAME.items():
        if name == new or name.startswith(new + "."):
            return old + name[len(new) :]
    if name.startswith("privfair."):
        return "pipelines." + name.removeprefix("privfair.")
    return name


def renamed(root: Path) -> bool:
    """Whether the tree at ``root`` has the one import root ``privfair`` (commit 0346a10 and
    after): its ``pyproject.toml`` maps ``privfair`` with ``[tool.setuptools] package-dir``;
    a tree exported without it is judged by whether ``pipelines/cli.py`` imports ``privfair``."""
    project = root / "pyproject.toml"
    if project.exists():
        config = tomllib.loads(project.read_text())
        return "privfair" in config.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    cli = root / "pipelines" / "cli.py"
    if not cli.exists():
        raise FileNotFoundError(f"{root}: neither pyproject.toml nor pipelines/cli.py exported")
    return re.search(r"^\s*(from|import) privfair\b", cli.read_text(), re.M) is not None


#: run as ``python -c RUN_MODULE TREE LAYOUT MODULE ARGS...``: check that ``MODULE`` (and its
#: top package) comes from ``TREE``, say where on stderr (``imported: MODULE from PATH``), then
#: run it as ``python -m MODULE ARGS...`` would; a tree
#: from before the rename must not have imported the working tree's ``privfair`` by its exit
RUN_MODULE = """
import atexit, importlib.util, os, runpy, sys
tree, layout, module = sys.argv[1:4]
top = module.split(".")[0]
where = os.path.realpath(importlib.util.find_spec(module).origin)
top_where = os.path.realpath(sys.modules[top].__file__)
for w in (where, top_where):
    assert w.startswith(os.path.realpath(tree) + os.sep), f"{module} imported from {w}, not {tree}"
print(f"imported: {module} from {where}", file=sys.stderr, flush=True)
if layout == "old":
    def _privfair_not_imported():
        if "privfair" in sys.modules:
            print(f"the tree {tree} imported privfair", file=sys.stderr, flush=True)
            os._exit(70)
    atexit.register(_privfair_not_imported)
sys.argv = [where, *sys.argv[4:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


@dataclass(frozen=True)
class Tree:
    """A tree of the code (an exported revision, or the working tree) as a child interpreter
    imports it (``prepare_tree``)."""

    #: the tree's root (``pipelines/``, ``components/``, ``schemas/`` below it)
    root: Path
    #: ``new``: the tree's import root is ``privfair``; ``old``: ``pipelines``, ``components``,
    #: ``schemas`` (before commit 0346a10)
    layout: str
    #: to put first on the child's ``PYTHONPATH``, before anything else
    path: tuple[Path, ...]

    @property
    def top(self) -> str:
        """The tree's top package: ``privfair`` or ``pipelines``."""
        return "privfair" if self.layout == "new" else "pipelines"

    def module(self, name: str) -> str:
        """The tree's name of the module called ``name`` today (``privfair.cli`` ->
        ``pipelines.cli`` in an old tree)."""
        return name if self.layout == "new" else old_name(name)

    def env(self, *paths: str | Path, **extra: str) -> dict[str, str]:
        """``child_env`` for a child of this tree: its ``path`` first, then ``paths``, and
        ``LAYOUT_VAR`` set (``tree_module`` reads it)."""
        return child_env(*self.path, *paths, **{LAYOUT_VAR: self.layout, **extra})

    def command(self, module: str, *args: str) -> list[str]:
        """``python -m <the tree's module> args``, run through ``RUN_MODULE``: the module is
        checked to come from this tree before it runs."""
        mod = self.module(module)
        return [sys.executable, "-c", RUN_MODULE, str(self.root), self.layout, mod, *args]


def prepare_tree(root: Path) -> Tree:
    """Prepare the tree at ``root`` so that a child interpreter imports *its* code.

    - The working tree (``ROOT``): nothing to do; the editable install maps ``privfair`` to it.
    - A tree from before the rename (``renamed`` false): its modules are ``pipelines.*``,
      ``components.*``, ``schemas.*``, and nothing of it imports ``privfair``; the child runs
      them under those names (``Tree.module``) with ``root`` first on ``PYTHONPATH``.
    - A tree from the rename on: ``root/.shim/privfair`` is made a link to ``root/pipelines``,
      and ``root/pipelines/components`` and ``root/pipelines/schemas`` links to
      ``root/components`` and ``root/schemas`` (``root`` is a copy, ``export_code``'s, so it
      may be changed), with ``root/.shim`` first on ``PYTHONPATH``: a path entry on
      ``sys.path`` is searched before setuptools' editable finder on ``sys.meta_path``, so the
      child's ``import privfair`` is this tree's.

    The child should still check where its top package came from (``Tree.command`` does).
    """
    root = Path(root).resolve()
    if root == ROOT:
        return Tree(root, "new", ())
    if not renamed(root):
        return Tree(root, "old", (root,))
    shim = root / ".shim"
    shim.mkdir(exist_ok=True)
    links = {
        shim / "privfair": root / "pipelines",
        root / "pipelines" / "components": root / "components",
        root / "pipelines" / "schemas": root / "schemas",
    }
    for link, target in links.items():
        if not target.is_dir():
            raise FileNotFoundError(f"{target}: not exported (export_code of the whole tree)")
        if not link.is_symlink():
            link.symlink_to(target, target_is_directory=True)
    return Tree(root, "new", (shim,))


def tree_module(name: str):
    """In a child of ``Tree.env``: the module called ``name`` today, imported under the name
    its tree gives it (``old_name`` in a tree from before the rename); ``name`` itself
    elsewhere."""
    if os.environ.get(LAYOUT_VAR) == "old":
        name = old_name(name)
    return importlib.import_module(name)


def imported_from(tree: Path, *modules: str) -> dict[str, str]:
    """Where each of ``modules`` (already imported) was loaded from, each checked to lie inside
    ``tree`` (its real path), else ``AssertionError``."""
    tree = Path(tree).resolve()
    out = {}
    for name in modules:
        where = Path(sys.modules[name].__file__).resolve()
        assert where.is_relative_to(tree), f"{name} imported from {where}, not from {tree}"
        out[name] = str(where)
    return out


def tracked(cmd: list[str], cwd: Path, env: dict) -> dict:
    """Run ``cmd``; wall clock, stdout, stderr, the peak RSS of its process tree, and the top
    process's own peak RSS (``driver_gb``) and peak private RSS (``driver_private_gb``: its RSS
    less file-backed and shared pages, ``memory_info().shared``; pages of a memory-mapped file
    are the kernel's to drop and read again). GiB."""
    import psutil

    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    peak, driver, private = [0], [0], [0]

    def sample() -> None:
        parent = psutil.Process(proc.pid)
        while proc.poll() is None:
            with contextlib.suppress(psutil.Error):
                tree = [parent, *parent.children(recursive=True)]
                total = 0
                for p in tree:
                    with contextlib.suppress(psutil.Error):
                        total += p.memory_info().rss
                peak[0] = max(peak[0], total)
                top = parent.memory_info()
                driver[0] = max(driver[0], top.rss)
                private[0] = max(private[0], top.rss - getattr(top, "shared", 0))
            time.sleep(0.2)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, err = proc.communicate()
    t.join()
    return {
        "rc": proc.returncode,
        "wall_s": time.perf_counter() - start,
        "peak_gb": peak[0] / 2**30,
        "driver_gb": driver[0] / 2**30,
        "driver_private_gb": private[0] / 2**30,
        "stdout": out,
        "stderr": err,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """A throw-away PostgreSQL server (``initdb`` + ``pg_ctl`` on a temp folder and a free
    port; as root it runs as ``nobody``); yield its URL, stop and remove it afterwards. The
    binaries are found on PATH or in Debian's ``/usr/lib/postgresql/*/bin``."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        bindir = Path(found).resolve().parent
    else:
        dirs = [d for d in glob.glob("/usr/lib/postgresql/*/bin") if Path(d, "pg_ctl").exists()]
        if not dirs:
            raise FileNotFoundError("no PostgreSQL server binaries (initdb, pg_ctl)")
        bindir = Path(sorted(dirs)[-1])
    root = Path(tempfile.mkdtemp(prefix="privfair-pg-"))
    prefix: list[str] = []
    if os.getuid() == 0:  # pg_ctl refuses root: run it as nobody, in a folder nobody owns
        import pwd

        nobody = pwd.getpwnam("nobody")
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
        prefix = ["runuser", "-u", "nobody", "--"]
    data, port = root / "data", _free_port()
    env = {**os.environ, "LC_ALL": "C"}

    def pg(*args: str, check: bool = True) -> None:
        subprocess.run([*prefix, *args], check=check, capture_output=True, env=env, cwd=root)

    pg(str(bindir / "initdb"), "-D", str(data), "-U", "privfair", "--auth=trust", "-E", "UTF8")
    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    pg(str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w", "start")
    try:
        yield f"postgresql://privfair@127.0.0.1:{port}/postgres"
    finally:
        pg(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop", check=False)
        shutil.rmtree(root, ignore_errors=True)
