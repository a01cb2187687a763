"""A Dagster webserver (``dagster dev`` or ``dagster-webserver``) the UI tests start, wait for
and stop by their own process group, so that no process of it is left behind.

The server is started through ``privfair.orchestrate sigdfl`` (default SIGINT/SIGTERM handling:
without it ``dagster dev`` hangs on shutdown under a non-interactive parent) in a session of its
own; its process group is the wrapper's PID (``exec`` keeps it). A marker (a unique
``DAGSTER_HOME=...`` of its environment) also finds a child that started a session of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _live() -> dict[int, int]:
    """pid -> process group of every live (non-zombie) process."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] not in ("Z", "X"):
            out[int(d.name)] = int(fields[2])
    return out


def ours(pgid: int, marker: bytes | None = None) -> set[int]:
    """The server's live processes: its process group, and anything whose environment holds
    ``marker``."""
    pids = set()
    for pid, pgrp in _live().items():
        if pid == os.getpid():
            continue
        if pgrp == pgid:
            pids.add(pid)
        elif marker is not None:
            with contextlib.suppress(OSError):
                if marker in Path(f"/proc/{pid}/environ").read_bytes():
                    pids.add(pid)
    return pids


def stop(
    proc: subprocess.Popen, timeout: float, marker: bytes | None = None
) -> tuple[set[int], set[int]]:
    """SIGTERM to the server's process group, SIGKILL to what is left after ``timeout``
    seconds. Returns (the stragglers killed, the processes still alive afterwards)."""
    pgid = proc.pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while ours(pgid, marker) and time.monotonic() < deadline:
        proc.poll()
        time.sleep(0.5)
    stragglers = ours(pgid, marker)
    for pid in stragglers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=15)
    time.sleep(0.5)
    return stragglers, ours(pgid, marker)


class Server:
    """A running webserver: its URL, its log, and its GraphQL endpoint."""

    def __init__(self, url: str, log: Path, store: Path | None = None) -> None:
        self.url, self.log, self.store = url, log, store

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        req = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=60) as r:
            out = json.loads(r.read())
        assert "errors" not in out, out["errors"]
        return out["data"]

    def log_tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:]


@contextlib.contextmanager
def serving(
    program: list[str],
    cwd: Path,
    env: dict[str, str],
    log: Path,
    start_timeout: float,
    stop_timeout: float,
    store: Path | None = None,
) -> Iterator[Server]:
    """Run ``program`` (the webserver's command, without ``-h``/``-p``) on a free port of
    127.0.0.1 until the block ends: it yields once ``/server_info`` answers, then stops the
    server and asserts that none of its processes is left."""
    port = free_port()
    cmd = [sys.executable, "-m", "privfair.orchestrate", "sigdfl", *program]
    cmd += ["-h", "127.0.0.1", "-p", str(port)]
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    marker = f"DAGSTER_HOME={env['DAGSTER_HOME']}\0".encode() if "DAGSTER_HOME" in env else None
    server = Server(f"http://127.0.0.1:{port}", log, store)
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            assert proc.poll() is None, f"{program[0]} exited early:\n{server.log_tail()}"
            try:
                with urllib.request.urlopen(f"{server.url}/server_info", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            assert time.monotonic() < deadline, f"no /server_info:\n{server.log_tail()}"
            time.sleep(1)
        yield server
    finally:
        killed, left = stop(proc, stop_timeout, marker)
        if killed:
            print(f"{Path(program[0]).name}: SIGKILLed stragglers {sorted(killed)}")
        assert not left, f"processes left behind: {sorted(left)}"
        assert proc.returncode is not None
