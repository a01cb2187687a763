"""The driver's resident memory in each phase of one ``privfair run``.

Usage (from the repository root)::

    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/adult_like.py --rows 10000000 \\
        --spec adult_fair_mdav --set block_rows=50000 --set trace_sample=2000 --out scale
    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/phase_memory.py \\
        scale/adult_fair_mdav_10m.yaml --store scale/store --engine local --workers 2

Runs ``python -m privfair.cli run SPEC --progress ARGS...`` in a fresh interpreter and samples
the RSS of that process (the driver; pool workers and a JVM are not counted) every 0.1 s, and
its private part: the RSS less its file-backed pages (``memory_info().shared`` on Linux), which
is what the driver holds itself; pages of a memory-mapped file are the kernel's page cache, dropped
under pressure and read again from the file (``privfair.components.core.memory.mapped``; run with
``TMPDIR`` on a disk: a ``tmpfs`` holds its files in memory, as shared pages this does not
count). Each sample is charged to the phase that was running when it was taken: the phase named by the next
progress line the run printed (``✓ <phase>`` as a phase ends, ``stage › <phase>: <step>`` within
one). Prints a Markdown table: each phase, its peak RSS, its peak private RSS and when it ended;
and the run's
``guarantees: ...`` line. Linux or macOS (``psutil``).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import threading
import time

import psutil

# "✓ validate  3 min" / "stage › validate: expectation suites run 4/5 (80%)": the phase's name
_TAIL = re.compile(r"\s+(\d+ min|\d+(\.\d+)? ?s\b|\d+/\d+|\(\d+%\)).*$")


def phase_name(line: str) -> str:
    """The phase a progress line names, without its time, counts or share."""
    return _TAIL.sub("", line.strip())[:90]


def charge(samples: list[tuple[float, ...]], lines: list[tuple[float, str]]) -> list[tuple]:
    """(phase, peak of each sampled value..., end s) for each phase, in order: a sample
    ``(t, value, ...)`` belongs to the first line printed after it (samples after the last line
    to the last phase).

    >>> charge([(0.5, 1.0), (1.5, 3.0), (1.7, 2.0)], [(1.0, "✓ ingest"), (2.0, "✓ protect")])
    [('✓ ingest', 1.0, 1.0), ('✓ protect', 3.0, 2.0)]
    >>> charge([(0.5, 2.0, 1.0), (0.7, 1.5, 1.2)], [(1.0, "✓ ingest")])
    [('✓ ingest', 2.0, 1.2, 1.0)]
    """
    out: dict[str, list] = {}
    i = 0
    for t, *values in samples:
        while i < len(lines) - 1 and lines[i][0] < t:
            i += 1
        if not lines:
            break
        name = lines[i][1]
        peaks = out.setdefault(name, [0.0] * len(values))
        out[name] = [max(a, b) for a, b in zip(peaks, values, strict=True)]
    ends = {name: t for t, name in lines}
    return [(name, *peaks, ends[name]) for name, peaks in out.items()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="more `privfair run` arguments")
    a = ap.parse_args(argv)
    cmd = [sys.executable, "-m", "privfair.cli", "run", a.spec, "--progress", *a.args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    start = time.perf_counter()
    lines: list[tuple[float, str]] = []

    def read() -> None:  # progress bars end their lines with \r, phases with \n
        buf = ""
        while ch := proc.stderr.read(1):
            if ch in "\r\n":
                if buf.strip():
                    name = phase_name(buf)
                    if not lines or lines[-1][1] != name:
                        lines.append((time.perf_counter() - start, name))
                    else:
                        lines[-1] = (time.perf_counter() - start, name)
                buf = ""
            else:
                buf += ch

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    driver = psutil.Process(proc.pid)
    samples: list[tuple[float, float, float]] = []
    while proc.poll() is None:
        try:
            m = driver.memory_info()
            private = m.rss - getattr(m, "shared", 0)
            samples.append((time.perf_counter() - start, m.rss / 1e9, private / 1e9))
        except psutil.Error:
            break
        time.sleep(0.1)
    out = proc.stdout.read()
    reader.join(timeout=5)
    wall = time.perf_counter() - start
    print(f"`{' '.join(cmd[1:])}`: exit {proc.returncode}, {wall:.0f} s\n")
    print("| phase (as the run names it) | driver peak RSS | peak private RSS | ended at |")
    print("|---|---|---|---|")
    for name, peak, private, end in charge(samples, lines):
        print(f"| {name} | {peak:.2f} GB | {private:.2f} GB | {end:.0f} s |")
    if samples:
        top = max(s[1] for s in samples), max(s[2] for s in samples)
        print(f"| **the run** | **{top[0]:.2f} GB** | **{top[1]:.2f} GB** | {wall:.0f} s |")
    print()
    print("\n".join(ln for ln in out.splitlines() if "guarantees:" in ln))
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
