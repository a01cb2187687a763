"""What the benchmark scripts share: the machine a run was measured on, and the code of another
revision exported beside the working tree, so the previous code is measured in the same run."""

from __future__ import annotations

import datetime as dt
import io
import os
import platform
import subprocess
import tarfile
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
