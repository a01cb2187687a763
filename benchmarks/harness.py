"""What the benchmark scripts share: the machine a run was measured on, the code of another
revision exported beside the working tree (so the previous code is measured in the same run),
and a command run with its process tree's peak memory sampled."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import platform
import subprocess
import tarfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
