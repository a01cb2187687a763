"""Immutable, versioned releases in a store (a local folder or any ``pyarrow.fs`` URI).

Layout::

    <store>/<pipeline>/<version>/<output>.parquet  each public output (roles + contract in metadata)
                                 internal/*.parquet  validator sidecars (lineage...): internal
                                 manifest.json     spec, params, contract, results, metrics, input, code
                                 validation/...    Great Expectations results and Data Docs
                                 report.html       the human report
    <store>/<pipeline>/latest                      text file naming the newest published version
    <store>/<pipeline>/.staging/...                candidates being written (never read)
    <store>/<pipeline>/.quarantine/<version>-<ts>  candidates that failed validation

Publishing writes everything into a staging folder, then renames it to ``<version>`` (one
atomic rename on a local disk) and only then moves ``latest`` (written aside, then renamed).
A crash at any point leaves either no release or a complete one; staging leftovers are ignored
by readers and swept by the next run. Two runs racing on the same version: the rename of the
loser fails because the target exists, and it discards its candidate.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

STAGING = ".staging"
QUARANTINE = ".quarantine"
LATEST = "latest"


@dataclass(frozen=True)
class Store:
    """A release store: a local folder, or a ``pyarrow.fs`` URI (``s3://bucket/prefix`` ...)."""

    fs: pafs.FileSystem
    root: str

    @classmethod
    def open(cls, uri: str | Path) -> Store:
        text = str(uri)
        if "://" in text and not text.startswith("file://"):
            fs, path = pafs.FileSystem.from_uri(text)
            return cls(fs, path.rstrip("/"))
        path = Path(text.removeprefix("file://")).expanduser().resolve()
        path.mkdir(parents=True, exist_ok=True)
        return cls(pafs.LocalFileSystem(), path.as_posix())

    @property
    def local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def exists(self, *parts: str) -> bool:
        return self.fs.get_file_info(self.path(*parts)).type != pafs.FileType.NotFound

    def read_text(self, *parts: str) -> str:
        with self.fs.open_input_stream(self.path(*parts)) as f:
            return f.read().decode()

    def write_bytes(self, data: bytes, *parts: str) -> None:
        self.fs.create_dir(self.path(*parts[:-1]), recursive=True)
        with self.fs.open_output_stream(self.path(*parts)) as f:
            f.write(data)


class Candidate:
    """A release being written into staging; ``publish`` or ``quarantine`` ends it."""

    def __init__(self, store: Store, pipeline: str, version: str) -> None:
        self.store, self.pipeline, self.version = store, pipeline, version
        self.name = f"{version}-{uuid.uuid4().hex[:8]}"
        self.parts = (pipeline, STAGING, self.name)
        store.fs.create_dir(store.path(*self.parts), recursive=True)

    @classmethod
    def attach(cls, store: Store, pipeline: str, version: str, name: str) -> Candidate:
        """Re-open a candidate another step staged as ``<pipeline>/.staging/<name>``."""
        cand = cls.__new__(cls)
        cand.store, cand.pipeline, cand.version, cand.name = store, pipeline, version, name
        cand.parts = (pipeline, STAGING, name)
        return cand

    @property
    def local_dir(self) -> Path:
        """The staging folder on local disk (for tools that write files themselves)."""
        if not self.store.local:
            raise RuntimeError("local_dir is only available on a local store")
        return Path(self.store.path(*self.parts))

    def write(self, name: str, data: bytes) -> None:
        self.store.write_bytes(data, *self.parts, *name.split("/"))

    def read_table(self, name: str) -> pa.Table:
        """Read back a Parquet file as written into the candidate (any store)."""
        return pq.read_table(
            self.store.path(*self.parts, *name.split("/")), filesystem=self.store.fs
        )

    def publish(self, crash_after: str | None = None) -> bool:
        """Move the candidate into place, then ``latest``. Returns False if this version was
        already published (the candidate is discarded). ``crash_after`` is a fault-injection
        hook for tests: 'rename' exits the process after the rename, before ``latest``."""
        target = self.store.path(self.pipeline, self.version)
        src = self.store.path(*self.parts)
        if self.store.exists(self.pipeline, self.version):
            self.discard()
            return False
        try:
            if self.store.local:
                os.rename(src, target)  # atomic; fails if another run published first
            else:
                self.store.fs.move(src, target)
        except OSError:
            if self.store.exists(self.pipeline, self.version):
                self.discard()
                return False
            raise
        if crash_after == "rename":
            os._exit(17)
        set_latest(self.store, self.pipeline, self.version)
        return True

    def quarantine(self) -> str:
        ts = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        dest = (self.pipeline, QUARANTINE, f"{self.version}-{ts}-{self.name[-8:]}")
        self.store.fs.create_dir(self.store.path(*dest[:-1]), recursive=True)
        self.store.fs.move(self.store.path(*self.parts), self.store.path(*dest))
        return self.store.path(*dest)

    def discard(self) -> None:
        if self.store.exists(*self.parts):
            self.store.fs.delete_dir(self.store.path(*self.parts))


def set_latest(store: Store, pipeline: str, version: str) -> None:
    """Point ``latest`` at ``version``: written aside, then renamed over the old pointer."""
    tmp = (pipeline, STAGING, f"latest-{uuid.uuid4().hex[:8]}")
    store.write_bytes(version.encode(), *tmp)
    store.fs.move(store.path(*tmp), store.path(pipeline, LATEST))


def latest(store: Store, pipeline: str) -> str | None:
    return store.read_text(pipeline, LATEST).strip() if store.exists(pipeline, LATEST) else None


def sweep_staging(store: Store, pipeline: str, older_than_s: float = 0.0) -> int:
    """Remove staging leftovers of crashed runs (older than ``older_than_s``)."""
    if not store.exists(pipeline, STAGING):
        return 0
    now, n = time.time(), 0
    for info in store.fs.get_file_info(pafs.FileSelector(store.path(pipeline, STAGING))):
        mtime = info.mtime.timestamp() if info.mtime else 0.0
        if now - mtime >= older_than_s:
            if info.type == pafs.FileType.Directory:
                store.fs.delete_dir(info.path)
            else:
                store.fs.delete_file(info.path)
            n += 1
    return n


def repair_latest(store: Store, pipeline: str) -> str | None:
    """After a crash between rename and ``latest``: point ``latest`` at the newest published
    version if it is missing or names an older one."""
    versions = list_versions(store, pipeline)
    if not versions:
        return None
    newest = max(versions, key=lambda v: v["published_at"])["version"]
    if latest(store, pipeline) != newest:
        set_latest(store, pipeline, newest)
    return newest


def list_versions(store: Store, pipeline: str) -> list[dict]:
    out = []
    if not store.exists(pipeline):
        return out
    for info in store.fs.get_file_info(pafs.FileSelector(store.path(pipeline))):
        name = info.base_name
        if info.type != pafs.FileType.Directory or name.startswith("."):
            continue
        if not store.exists(pipeline, name, "manifest.json"):
            continue
        m = json.loads(store.read_text(pipeline, name, "manifest.json"))
        out.append(
            {
                "pipeline": pipeline,
                "version": name,
                "published_at": m.get("published_at", ""),
                "rows": sum(int(o.get("rows") or 0) for o in (m.get("outputs") or {}).values())
                or None,
                "status": m.get("validation", {}).get("status", "?"),
            }
        )
    return out


def list_releases(store: Store) -> list[dict]:
    """Every published release in the store, newest first, with ``latest`` marked."""
    rows = []
    if not store.exists():
        return rows
    for info in store.fs.get_file_info(pafs.FileSelector(store.root)):
        if info.type != pafs.FileType.Directory or info.base_name.startswith("."):
            continue
        cur = latest(store, info.base_name)
        for r in list_versions(store, info.base_name):
            r["latest"] = r["version"] == cur
            rows.append(r)
    return sorted(rows, key=lambda r: (r["pipeline"], r["published_at"]), reverse=True)
