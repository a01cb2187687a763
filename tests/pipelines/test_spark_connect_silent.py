"""A Spark Connect URL (``sc://``) whose port accepts connections but never answers: a Connect
client's session starts without a word to the server and its first request would wait for
ever; the run gives up after ``$PRIVFAIR_SPARK_CONNECT_TIMEOUT`` seconds, exit 2 naming the
master in one line (no Java stack, no Python traceback)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "pipelines" / "specs"


@pytest.fixture
def silent_port():
    """A TCP port on 127.0.0.1 that accepts every connection and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield server.getsockname()[1]
    stop.set()
    t.join(5)
    for c in held:
        c.close()
    server.close()


def test_a_connect_server_that_never_answers_is_given_up_as_exit_2(silent_port, tmp_path):
    pytest.importorskip("pyspark")
    master = f"sc://127.0.0.1:{silent_port}"
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "privfair.cli", "run", str(SPECS / "german_fair_mdav.yaml")]
        + ["--set", "block_rows=300", "--engine", "spark", "--master", master]
        + ["--store", str(tmp_path / "s")],
        cwd=REPO,
        env={**os.environ, "PRIVFAIR_SPARK_CONNECT_TIMEOUT": "6"},
        capture_output=True,
        text=True,
        timeout=150,
    )
    took = time.monotonic() - t0
    assert proc.returncode == 2, proc.stderr[-3000:]
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith("privfair: error:")]
    assert len(ours) == 1, proc.stderr[-3000:]
    assert f"the Spark cluster at '{master}' did not answer within 6 s" in ours[0], ours[0]
    assert "Traceback" not in proc.stderr
    assert not [ln for ln in proc.stderr.splitlines() if ln.lstrip().startswith("at org.")]
    assert not (tmp_path / "s" / "german_fair_mdav").exists()
    # the wait was the timeout's, not gRPC's own (it would wait for ever)
    assert took < 90, took
