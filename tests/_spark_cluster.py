"""A real Spark standalone cluster for the tests: a master and one worker started with pyspark's own
``spark-class``, the worker running as another OS user (``privfair-spark``, created if missing),
as on any real cluster: executors cannot read the driver's private files, and what they write
belongs to another user.

Everything listens on 127.0.0.1 on free ports; the worker has its own work and scratch folders;
``start`` waits until the master lists the worker ``ALIVE`` (its web UI's ``/json``) and
``stop`` ends exactly the processes it started (each in its own process group, by id).

The executors' Python: a user other than root often cannot run this interpreter (pyenv's lives
under ``/root``, mode 0700). ``worker_python`` then makes a virtual environment of a system
Python of the same minor version that reads this environment's site-packages (a ``.pth``), in a
folder every user can read; a real cluster has its own Python with privfair installed, named by
``PYSPARK_PYTHON`` (or ``--conf spark.pyspark.python=...``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from pathlib import Path

USER = "privfair-spark"


class Unavailable(Exception):
    """Why no cluster can run here (a skip's reason)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def ensure_user(name: str = USER) -> tuple[int, int]:
    """(uid, gid) of the system user ``name``, created (``useradd --system``) if missing."""
    import pwd

    try:
        pw = pwd.getpwnam(name)
        return pw.pw_uid, pw.pw_gid
    except KeyError:
        pass
    if os.geteuid() != 0:
        raise Unavailable(f"the cluster's worker runs as the user '{name}': creating it needs root")
    if shutil.which("useradd") is None:
        raise Unavailable("no useradd (Debian's passwd package) to create the worker's user")
    subprocess.run(
        ["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin"]
        + [name],
        check=True,
        capture_output=True,
    )
    pw = pwd.getpwnam(name)
    return pw.pw_uid, pw.pw_gid


def _as_user(name: str, argv: list[str], check: bool = False, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["setpriv", f"--reuid={name}", f"--regid={name}", "--init-groups", "--", *argv],
        capture_output=True,
        text=True,
        check=check,
        **kw,
    )


def worker_python(root: Path, name: str = USER) -> str:
    """An interpreter the user ``name`` can run that imports privfair and its dependencies:
    this one if it can, else a virtual environment of a system Python of the same minor
    version reading this environment's site-packages, made under ``root``."""
    probe = ["-c", "import privfair.components.core.engine, pyarrow, pyspark"]
    real = Path(sys.executable).resolve()
    # every folder on the way must be searchable by others (a JVM's exec checks what a
    # shell's may let through)
    if all(p.stat().st_mode & 0o001 for p in real.parents) and (
        _as_user(name, [sys.executable, *probe], cwd="/").returncode == 0
    ):
        return sys.executable
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = shutil.which(minor, path="/usr/local/bin:/usr/bin:/bin")
    if base is None:
        raise Unavailable(
            f"the user '{name}' cannot run {sys.executable} and there is no system {minor}"
        )
    venv = root / "worker-python"
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = sysconfig.get_paths()["purelib"]
    site = venv / "lib" / minor / "site-packages"
    (site / "privfair_env.pth").write_text(f"import site; site.addsitedir({purelib!r})\n")
    python = str(venv / "bin" / "python")
    got = _as_user(name, [python, *probe], cwd="/")
    if got.returncode != 0:
        raise Unavailable(f"the user '{name}' cannot import privfair: {got.stderr[-500:]}")
    return python


@dataclasses.dataclass
class Cluster:
    """A running standalone master and worker (``start``), stopped by ``stop``."""

    root: Path
    master_port: int
    master_ui: int
    worker_port: int
    worker_ui: int
    python: str
    user: str = USER
    procs: list[subprocess.Popen] = dataclasses.field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def env(self) -> dict[str, str]:
        """The environment of a driver (``privfair run``) using this cluster: the executors'
        Python, and the driver bound to 127.0.0.1 where the executors call it back."""
        return {**os.environ, "PYSPARK_PYTHON": self.python, "SPARK_LOCAL_IP": "127.0.0.1"}

    def state(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.master_ui}/json", timeout=5) as r:
            return json.loads(r.read())

    def alive_workers(self) -> list[dict]:
        try:
            return [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]
        except OSError:
            return []

    def log(self, which: str) -> str:
        path = self.root / f"{which}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def _spawn(self, which: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        out = open(self.root / f"{which}.log", "wb")  # noqa: SIM115 - closed with the process
        try:
            proc = subprocess.Popen(
                argv,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stopped with its children
                cwd=self.root,
            )
        finally:
            out.close()
        self.procs.append(proc)
        return proc

    @classmethod
    def start(cls, root: Path, cores: int = 2, memory: str = "2g", timeout: float = 90) -> Cluster:
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise Unavailable("no Java runtime: install it with .ci/deps")
        if shutil.which("setpriv") is None:
            raise Unavailable("no setpriv (util-linux) to run the worker as another user")
        uid, gid = ensure_user()
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o755)
        closed = [str(p) for p in root.resolve().parents if not p.stat().st_mode & 0o001]
        if closed:
            raise RuntimeError(f"the worker's user cannot reach {root}: {closed} are 0700-like")
        python = worker_python(root)
        cluster = cls(root, _free_port(), _free_port(), _free_port(), _free_port(), python)
        home = spark_home()
        base_env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_"))}
        base_env |= {"SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
        master_dir = root / "master"
        master_dir.mkdir(exist_ok=True)
        cluster._spawn(
            "master",
            [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master"]
            + ["--host", "127.0.0.1", "--port", str(cluster.master_port)]
            + ["--webui-port", str(cluster.master_ui)],
            base_env | {"SPARK_LOG_DIR": str(master_dir), "SPARK_PID_DIR": str(master_dir)},
        )
        # the worker's own folders, its user's alone
        work = root / "worker"
        for d in (work, work / "work", work / "local", work / "home"):
            d.mkdir(exist_ok=True)
            os.chown(d, uid, gid)
            os.chmod(d, 0o700)
        worker_env = base_env | {
            "HOME": str(work / "home"),
            "USER": cluster.user,
            "SPARK_WORKER_DIR": str(work / "work"),
            "SPARK_LOCAL_DIRS": str(work / "local"),
            "SPARK_LOG_DIR": str(work / "home"),
            "PYSPARK_PYTHON": python,
            "TMPDIR": str(work / "local"),
        }
        try:
            cluster._wait(lambda: _listening(cluster.master_port), timeout, "master to listen")
            cluster._spawn(
                "worker",
                ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--init-groups", "--"]
                + [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker"]
                + ["--host", "127.0.0.1", "--port", str(cluster.worker_port)]
                + ["--webui-port", str(cluster.worker_ui), "--cores", str(cores)]
                + ["--memory", memory, "--work-dir", str(work / "work"), cluster.url],
                worker_env,
            )
            cluster._wait(lambda: cluster.alive_workers(), timeout, "worker to register")
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def start_connect(self, timeout: float = 180) -> tuple[str, subprocess.Popen]:
        """A Spark Connect server on this cluster, started with pyspark's own
        ``sbin/start-connect-server.sh`` (``--wait``: in the foreground, so its process is
        ours to stop): its ``sc://`` URL once it accepts connections, and its process (``end``
        it: an application of the cluster, it holds the worker's cores while it runs)."""
        port = _free_port()
        home = spark_home()
        folder = self.root / "connect"
        folder.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_"))}
        env |= {
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(folder),
            "SPARK_PID_DIR": str(folder),
            "PYSPARK_PYTHON": self.python,
        }
        proc = self._spawn(
            "connect",
            [str(home / "sbin" / "start-connect-server.sh"), "--wait", "--master", self.url]
            + ["--conf", f"spark.connect.grpc.binding.port={port}"]
            + ["--conf", "spark.connect.grpc.binding.address=127.0.0.1"]
            + ["--conf", "spark.ui.enabled=false", "--conf", "spark.driver.memory=2g"],
            env,
        )
        self._wait(lambda: _listening(port), timeout, "Spark Connect server to listen")
        return f"sc://127.0.0.1:{port}", proc

    def _wait(self, ready, timeout: float, what: str) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if ready():
                return
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(
                        f"waiting for the {what}: a cluster process ended ({p.args[:3]}, "
                        f"exit {p.returncode})\nmaster: {self.log('master')}\n"
                        f"worker: {self.log('worker')}\nconnect: {self.log('connect')}"
                    )
            time.sleep(0.3)
        raise RuntimeError(
            f"the {what} took over {timeout:g} s\nmaster: {self.log('master')}\n"
            f"worker: {self.log('worker')}"
        )

    def end(self, p: subprocess.Popen) -> None:
        """End one process this cluster started, and its process group, by id."""
        if p.poll() is None:
            with _quiet():
                os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                with _quiet():
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(15)
        with _quiet():  # children it left behind in its group (a worker's executors)
            os.killpg(p.pid, signal.SIGKILL)
        if p in self.procs:
            self.procs.remove(p)

    def stop(self) -> None:
        """End the processes ``start`` (and ``start_connect``) began, latest first: the worker
        before the master, its executors in its process group."""
        for p in reversed(list(self.procs)):
            self.end(p)


class _quiet:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is not None and issubclass(kind, ProcessLookupError | PermissionError)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def start_or_skip(root: Path | None = None):
    """``Cluster.start``, or ``pytest.skip`` with the reason when none can run here (in CI,
    ``CI`` set, a missing Java is an error, as for the local Spark tests)."""
    import pytest

    root = root or Path(tempfile.mkdtemp(prefix="privfair-cluster-"))
    try:
        return Cluster.start(root)
    except Unavailable as e:
        if os.environ.get("CI") and "Java" in str(e):
            pytest.fail(str(e))
        pytest.skip(str(e))
