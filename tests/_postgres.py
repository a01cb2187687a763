"""A throw-away PostgreSQL server for the ledger tests: ``initdb`` + ``pg_ctl start`` on a temp
folder and a free port, stopped (and removed) afterwards.

The binaries are found on PATH or in Debian's ``/usr/lib/postgresql/*/bin``. PostgreSQL refuses
to run as root, so as root the server runs as ``nobody`` (``runuser``) in a folder it owns.
Without the binaries the tests skip with the reason, except in CI (``CI`` set: `.ci/deps`
installs ``postgresql``), where they fail.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, or None."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(d, "initdb").exists() and Path(d, "pg_ctl").exists():
            return Path(d)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a server; yield its URL (``postgresql://privfair@127.0.0.1:PORT/postgres``)."""
    bindir = binaries()
    if bindir is None:
        raise FileNotFoundError("no PostgreSQL server binaries (initdb, pg_ctl)")
    root = Path(tempfile.mkdtemp(prefix="privfair-pg-"))
    as_root = os.getuid() == 0
    prefix: list[str] = []
    if as_root:  # pg_ctl refuses root: run it as nobody, in a folder nobody owns
        import pwd

        nobody = pwd.getpwnam("nobody")
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
        prefix = ["runuser", "-u", "nobody", "--"]
    data, port = root / "data", _free_port()
    env = {**os.environ, "LC_ALL": "C"}
    subprocess.run(
        [
            *prefix,
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            "privfair",
            "--auth=trust",
            "-E",
            "UTF8",
        ],
        check=True,
        capture_output=True,
        env=env,
        cwd=root,
    )
    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run(
        [
            *prefix,
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            opts,
            "-l",
            str(root / "log"),
            "-w",
            "start",
        ],
        check=True,
        capture_output=True,
        env=env,
        cwd=root,
    )
    try:
        yield f"postgresql://privfair@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            env=env,
            cwd=root,
        )
        shutil.rmtree(root, ignore_errors=True)


def new_database(server: str, rows=None, schema: str = "raw", table: str = "people") -> str:
    """A fresh database on ``server`` (its URL), holding ``schema.table`` = ``rows`` if given."""
    import uuid

    import adbc_driver_postgresql.dbapi as pg

    name = f"t{uuid.uuid4().hex[:10]}"
    with pg.connect(server, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    url = server.rsplit("/", 1)[0] + f"/{name}"
    if rows is not None:
        with pg.connect(url) as conn:
            with conn.cursor() as cur:
                cur.execute(f"CREATE SCHEMA {schema}")
                cur.adbc_ingest(table, rows, mode="create", db_schema_name=schema)
            conn.commit()
    return url
