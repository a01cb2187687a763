"""What the benchmark scripts share: where things are (the repository, the shipped specs, the
``results/`` folder every script writes to), the machine a run was measured on, the code of
another revision exported beside the working tree (so the previous code is measured in the same
run), a command run with its process tree's peak memory sampled, the lines ``privfair run``
prints that a benchmark reads, a throw-away PostgreSQL server, and the private names of privfair
the benchmarks still use (``private``: one place, until their owners make them public).

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
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
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


def private(module: str, name: str):
    """``module.name`` where ``name`` is private (a leading underscore) and a benchmark still
    needs it. Every such use goes through here, so that they are listed in one place
    (``PRIVATE``) until the module's owner makes them public."""
    if (module, name) not in PRIVATE:
        raise KeyError(f"{module}.{name}: not a private name the benchmarks are known to use")
    return getattr(importlib.import_module(module), name)


#: the private names of privfair the benchmarks use, and by which scripts
PRIVATE = {
    ("privfair.evaluation.evaluate", "_classifier"): (
        "reproduce_fair_mdav_protocols",
        "reproduce_prefair_dp",
    ),
    ("privfair.evaluation.evaluate", "_folds"): (
        "reproduce_fair_mdav_protocols",
        "reproduce_fairness_peers",
        "reproduce_prefair_dp",
    ),
    ("privfair.evaluation.evaluate", "_groups"): ("reproduce_fairness_peers",),
    ("privfair.evaluation.evaluate", "_interval"): (
        "reproduce_fair_mdav_protocols",
        "reproduce_fairness_peers",
        "reproduce_prefair",
    ),
    ("privfair.evaluation.evaluate", "_score"): ("reproduce_fair_mdav_protocols",),
    ("privfair.evaluation.evaluate", "_strata"): ("reproduce_prefair_dp",),
    ("privfair.release.targets", "_catalog"): ("bench_tables",),
}

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
