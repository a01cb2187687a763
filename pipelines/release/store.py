"""Immutable, versioned releases in a store (a local folder or any ``pyarrow.fs`` URI).

Layout::

    <store>/<pipeline>/<version>/shared/          the shareable copy (``privfair.release.share``):
                                   <output>.parquet  each public output (roles + contract in metadata)
                                   manifest.json     the public manifest (its own checksums)
                                   report.html       the public report
                                 internal/*.parquet  validator sidecars (lineage...): owner only
                                 manifest.json     spec, params, contract, results, metrics, input, code
                                 validation/...    Great Expectations results and Data Docs
                                 report.html       the owner's report
    <store>/<pipeline>/latest                      the current version: a relative symlink
                                                   ``latest -> <version>`` on a local store
                                                   (any tool can read through it), a text file
                                                   naming the version on a remote one
    <store>/.privfair/secret                       the store's key (public release ids)
    <store>/<pipeline>/.staging/...                candidates being written (never read)
    <store>/<pipeline>/.quarantine/<version>-<ts>  candidates that failed validation, and
                                                   published releases found incomplete

Publishing writes everything into a staging folder, then renames it to ``<version>`` (one
atomic rename on a local disk) and only then moves ``latest`` (written aside, then renamed:
a symlink made under a temporary name replaces the old pointer in one rename). Stores written
before ``latest`` became a symlink keep their text file until ``latest`` next moves; every
reader (``latest``, ``resolve_release``, ``check_pipeline``) accepts both forms.
A crash at any point leaves either no release or a complete one; staging leftovers are ignored
by readers and swept by the next run. Two runs racing on the same version: the rename of the
loser fails because the target exists, and it discards its candidate.

``latest`` names the version the most recent run of the pipeline produced: a re-run moves it
to its version also when that version was already published (re-running an older spec points
``latest`` back at the older release), and ``privfair promote`` points it at any complete
release. It is only rewritten when it names another version.

The store is checked, not trusted: the manifest records the sha256 and size of every file of
the release but itself (``checksums``); ``verify_release`` says what is wrong with a release
folder (no readable manifest, a listed file missing or changed), and a run that finds its
version in that state moves it to ``.quarantine/`` and builds it again.

On a local store a candidate is written inside a folder only its owner may enter (0700) and,
when published, only ``shared/`` is readable by others (folders 0755, files 0644); the owner
part stays 0700 / 0600 (``owner_modes``).

Nothing is created until something is written (opening or listing a store creates no folder).
A failed run leaves no empty ``.staging/`` or pipeline folder behind (``tidy``). Every failure
of the store itself (the store path is a file or lies below one, a folder that cannot be
written, an unknown URI scheme, ``latest`` that is a folder...) is a ``StoreError`` naming the
path and the rule.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from privfair.components.core import memory
from privfair.release.manifest import MANIFEST, Manifest, ManifestError
from privfair.schemas.errors import StoreError

STAGING = ".staging"
SHARED = "shared"  # the shareable copy inside a release folder
QUARANTINE = ".quarantine"
LATEST = "latest"


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror.lower() if e.strerror[:1].isupper() else e.strerror
    return str(e).strip() or type(e).__name__


@contextlib.contextmanager
def store_io(path: str, doing: str) -> Iterator[None]:
    """Turn a file-system failure (``OSError``, an Arrow error of ``pyarrow.fs``) while
    ``doing`` something at ``path`` into a ``StoreError`` naming both."""
    try:
        yield
    except StoreError:
        raise
    except (OSError, pa.ArrowException) as e:
        raise StoreError(path, f"cannot {doing}: {_reason(e)}") from None


@dataclass(frozen=True)
class Store:
    """A release store: a local folder, or a ``pyarrow.fs`` URI (``s3://bucket/prefix`` ...)."""

    fs: pafs.FileSystem
    root: str

    @classmethod
    def open(cls, uri: str | Path) -> Store:
        """The store at ``uri``; nothing is created (folders appear when a release is written).
        ``StoreError``: an empty or unusable URI, a local path that is a file or lies below one.
        """
        text = str(uri)
        if not text.strip():
            raise StoreError(
                text, "the store must be a folder or a pyarrow.fs URI (s3://...), not empty"
            )
        if "://" in text and not text.startswith("file://"):
            try:
                fs, path = pafs.FileSystem.from_uri(text)
            except (pa.ArrowException, OSError, ValueError) as e:
                scheme = text.split("://", 1)[0]
                raise StoreError(
                    text,
                    f"unknown or unusable store URI scheme '{scheme}://' ({_reason(e)}); give a "
                    "folder, file://, or a pyarrow.fs URI (s3://, gs://, hdfs://...)",
                ) from None
            return cls(fs, path.rstrip("/"))
        path = Path(text.removeprefix("file://")).expanduser().resolve()
        for p in (path, *path.parents):
            if p.exists() and not p.is_dir():
                rule = (
                    "is a file, not a folder"
                    if p == path
                    else f"lies below the file {p} (a store must be a folder)"
                )
                raise StoreError(path.as_posix(), rule)
        return cls(pafs.LocalFileSystem(), path.as_posix())

    @property
    def local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def kind(self, *parts: str) -> pafs.FileType:
        path = self.path(*parts)
        with store_io(path, "look at it"):
            return self.fs.get_file_info(path).type

    def exists(self, *parts: str) -> bool:
        return self.kind(*parts) != pafs.FileType.NotFound

    def read_bytes(self, *parts: str) -> bytes:
        path = self.path(*parts)
        if self.kind(*parts) == pafs.FileType.Directory:
            raise StoreError(path, "is a folder where a file was expected")
        with store_io(path, "read it"), self.fs.open_input_stream(path) as f:
            return f.read()

    def read_text(self, *parts: str) -> str:
        return self.read_bytes(*parts).decode()

    def make_dirs(self, *parts: str) -> None:
        path = self.path(*parts)
        with store_io(path, "create the folder"):
            self.fs.create_dir(path, recursive=True)

    def write_bytes(self, data: bytes, *parts: str) -> None:
        self.make_dirs(*parts[:-1])
        path = self.path(*parts)
        with store_io(path, "write it"), self.fs.open_output_stream(path) as f:
            f.write(data)

    def move(self, src: tuple[str, ...], dest: tuple[str, ...]) -> None:
        with store_io(self.path(*src), f"move it to {self.path(*dest)}"):
            self.fs.move(self.path(*src), self.path(*dest))

    def files(self, *parts: str) -> list[str]:
        """Every file below ``parts``, as a '/'-separated path relative to it, sorted."""
        base = self.path(*parts)
        with store_io(base, "list it"):
            infos = self.fs.get_file_info(pafs.FileSelector(base, recursive=True))
        prefix = len(base.rstrip("/")) + 1
        return sorted(i.path[prefix:] for i in infos if i.type == pafs.FileType.File)

    def sha256(self, *parts: str) -> tuple[str, int]:
        """(hex sha256, size in bytes) of one file, streamed."""
        path = self.path(*parts)
        h, size = hashlib.sha256(), 0
        with store_io(path, "read it"), self.fs.open_input_stream(path) as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
                size += len(chunk)
        return h.hexdigest(), size

    def remove_if_empty(self, *parts: str) -> bool:
        """Remove the folder ``parts`` if it exists and is empty (never raises)."""
        path = self.path(*parts)
        try:
            if self.local:
                os.rmdir(path)
                return True
            info = self.fs.get_file_info(path)
            if info.type != pafs.FileType.Directory:
                return False
            if self.fs.get_file_info(pafs.FileSelector(path)):
                return False
            self.fs.delete_dir(path)
            return True
        except (OSError, pa.ArrowException):
            return False

    def check_pipeline(self, pipeline: str) -> None:
        """``StoreError`` when ``<store>/<pipeline>`` is not a folder, or its ``latest`` is a
        folder (before a run writes anything)."""
        if self.kind(pipeline) not in (pafs.FileType.NotFound, pafs.FileType.Directory):
            raise StoreError(
                self.path(pipeline), "the pipeline folder is a file; a pipeline must be a folder"
            )
        if _latest_is_folder(self, pipeline):
            raise StoreError(
                self.path(pipeline, LATEST),
                "'latest' is a folder; it must be a symlink or a file naming a version",
            )


class Candidate:
    """A release being written into staging; ``publish`` or ``quarantine`` ends it."""

    def __init__(self, store: Store, pipeline: str, version: str) -> None:
        self.store, self.pipeline, self.version = store, pipeline, version
        self.name = f"{version}-{uuid.uuid4().hex[:8]}"
        self.parts = (pipeline, STAGING, self.name)
        for attempt in range(3):  # another run's ``tidy`` may remove an empty .staging meanwhile
            try:
                store.make_dirs(*self.parts)
                break
            except StoreError:
                if attempt == 2:
                    raise
        if store.local:  # nobody but the owner enters a candidate while it is written
            with store_io(store.path(*self.parts), "restrict it to its owner"):
                os.chmod(store.path(*self.parts), 0o700)

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

    def read_mapped(self, name: str) -> pa.Table:
        """``read_table``, memory-mapped one row group at a time when the file is large
        (``memory.mapped_parquet``): what a run keeps from here to its end."""
        return memory.mapped_parquet(
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
                owner_modes(Path(src))
                os.rename(src, target)  # atomic; fails if another run published first
            else:
                self.store.fs.move(src, target)
        except OSError as e:
            if self.store.exists(self.pipeline, self.version):
                self.discard()
                return False
            raise StoreError(target, f"cannot publish the release: {_reason(e)}") from None
        if crash_after == "rename":
            os._exit(17)
        set_latest(self.store, self.pipeline, self.version)
        return True

    def quarantine(self) -> str:
        ts = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        dest = (self.pipeline, QUARANTINE, f"{self.version}-{ts}-{self.name[-8:]}")
        self.store.make_dirs(*dest[:-1])
        self.store.move(self.parts, dest)
        return self.store.path(*dest)

    def discard(self) -> None:
        if self.store.exists(*self.parts):
            with store_io(self.store.path(*self.parts), "remove the candidate"):
                self.store.fs.delete_dir(self.store.path(*self.parts))


def owner_modes(folder: Path) -> None:
    """Permissions of a release folder on a local disk: the shareable copy (``shared/``)
    readable by everyone (folders 0755, files 0644), everything else (sidecars, validation
    results, the owner's manifest and report) by its owner only (0700 / 0600). The release
    folder itself is 0755, so ``shared/`` can be reached."""
    with store_io(str(folder), "set the permissions of the release"):
        for root, dirs, files in os.walk(folder):
            here = Path(root)
            public = here == folder / SHARED or folder / SHARED in here.parents
            for d in dirs:
                os.chmod(here / d, 0o755 if public or (here == folder and d == SHARED) else 0o700)
            for f in files:
                os.chmod(here / f, 0o644 if public else 0o600)
        os.chmod(folder, 0o755)


def store_secret(store: Store) -> bytes:
    """The store's key (``.privfair/secret``, 32 random bytes, created on first use, 0600 on a
    local disk): what makes a release's public id (``privfair.release.share.public_id``) reproducible
    within one store and not a function of the private input alone. Two runs creating it at
    once agree on the first one written."""
    parts = (".privfair", "secret")
    if store.kind(*parts) == pafs.FileType.NotFound:
        tmp = (".privfair", f".secret-{uuid.uuid4().hex[:8]}")
        store.write_bytes(os.urandom(32).hex().encode(), *tmp)
        if store.local:
            os.chmod(store.path(".privfair"), 0o700)
            os.chmod(store.path(*tmp), 0o600)
            try:
                os.link(store.path(*tmp), store.path(*parts))  # never replaces another run's
            except FileExistsError:
                pass
            except OSError as e:
                raise StoreError(
                    store.path(*parts), f"cannot create the store key: {_reason(e)}"
                ) from None
            finally:
                os.unlink(store.path(*tmp))
        else:
            store.move(tmp, parts)
    text = store.read_text(*parts).strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < 16:
        raise StoreError(store.path(*parts), "the store key must hold at least 16 hex bytes")
    return key


def tidy(store: Store, pipeline: str) -> None:
    """After a failed run: remove ``.staging`` if it is empty, then the pipeline folder if that
    is empty (a failed run leaves no empty folder behind; ``.quarantine`` stays)."""
    store.remove_if_empty(pipeline, STAGING)
    store.remove_if_empty(pipeline)


def _latest_link(store: Store, pipeline: str) -> str | None:
    """Where the symlink ``latest`` points (its text, relative), or None if it is not one."""
    if not store.local:
        return None
    path = store.path(pipeline, LATEST)
    return os.readlink(path) if os.path.islink(path) else None


def _latest_is_folder(store: Store, pipeline: str) -> bool:
    """``latest`` is a real folder (a symlink to a version folder is the pointer, not one)."""
    if _latest_link(store, pipeline) is not None:
        return False
    return store.kind(pipeline, LATEST) == pafs.FileType.Directory


def _folder_error(store: Store, pipeline: str) -> StoreError:
    return StoreError(
        store.path(pipeline, LATEST),
        "'latest' is a folder; it must be a symlink or a file naming a version",
    )


def set_latest(store: Store, pipeline: str, version: str) -> bool:
    """Point ``latest`` at ``version``; left untouched (returns False) when it already names it.

    On a local store ``latest`` becomes the relative symlink ``latest -> <version>``, made under
    a temporary name in the pipeline folder and renamed over the old pointer (a symlink or an
    old text file) in one atomic step, so a reader sees the old or the new version, never
    none. Where symlinks cannot be made (a remote ``pyarrow.fs`` store, a file system without
    them) ``latest`` is a text file naming the version, written aside and renamed likewise.

    >>> import tempfile
    >>> st = Store.open(tempfile.mkdtemp())
    >>> st.make_dirs("p", "v1")
    >>> set_latest(st, "p", "v1"), os.readlink(st.path("p", "latest")), latest(st, "p")
    (True, 'v1', 'v1')
    >>> set_latest(st, "p", "v1")
    False
    """
    if _latest_is_folder(store, pipeline):
        raise _folder_error(store, pipeline)
    if latest(store, pipeline) == version:
        return False
    if store.local:
        store.make_dirs(pipeline)
        tmp = store.path(pipeline, f".latest-{uuid.uuid4().hex[:8]}")
        try:
            os.symlink(version, tmp)
        except OSError:  # no symlinks on this file system: the text file below
            pass
        else:
            try:
                with store_io(store.path(pipeline, LATEST), "point it at the new version"):
                    os.replace(tmp, store.path(pipeline, LATEST))
            finally:
                if os.path.lexists(tmp):
                    os.unlink(tmp)
            return True
    tmp_parts = (pipeline, STAGING, f"latest-{uuid.uuid4().hex[:8]}")
    store.write_bytes(version.encode(), *tmp_parts)
    store.move(tmp_parts, (pipeline, LATEST))
    return True


def latest(store: Store, pipeline: str) -> str | None:
    """The version ``latest`` names (None without one), read from the symlink's target or the
    text file; ``StoreError`` if it is a real folder."""
    link = _latest_link(store, pipeline)
    if link is not None:
        return link.rstrip("/").rsplit("/", 1)[-1] or None
    kind = store.kind(pipeline, LATEST)
    if kind == pafs.FileType.NotFound:
        return None
    if kind == pafs.FileType.Directory:
        raise _folder_error(store, pipeline)
    return store.read_text(pipeline, LATEST).strip() or None


def remove_latest(store: Store, pipeline: str) -> None:
    """Remove ``latest`` (symlink or text file), if there is one."""
    path = store.path(pipeline, LATEST)
    if _latest_link(store, pipeline) is not None:
        with store_io(path, "remove it"):
            os.unlink(path)
    elif store.kind(pipeline, LATEST) == pafs.FileType.File:
        with store_io(path, "remove it"):
            store.fs.delete_file(path)


def verify_release(store: Store, pipeline: str, version: str) -> str | None:
    """What is wrong with the release folder ``<pipeline>/<version>``, or None when it is
    complete: its manifest is readable, names this version, and every file it lists
    (``checksums``) is present with its recorded size and sha256."""
    if store.kind(pipeline, version) != pafs.FileType.Directory:
        return "it is not a folder"
    if store.kind(pipeline, version, MANIFEST) != pafs.FileType.File:
        return "manifest.json is missing"
    try:
        man = Manifest.parse(store.read_text(pipeline, version, MANIFEST)).data
    except StoreError as e:
        return f"manifest.json cannot be read: {e}"
    except ManifestError as e:
        return str(e)
    if man.get("version") != version:
        return f"manifest.json names version {man.get('version')!r}"
    sums = man.get("checksums")
    if not isinstance(sums, dict) or not sums:
        return "manifest.json lists no file checksums"
    for name, want in sorted(sums.items()):
        parts = (pipeline, version, *name.split("/"))
        if store.kind(*parts) != pafs.FileType.File:
            return f"{name} is missing"
        try:
            digest, size = store.sha256(*parts)
        except StoreError as e:
            return f"{name} cannot be read: {e.rule}"
        if not isinstance(want, dict) or size != want.get("size"):
            return f"{name} size differs"
        if digest != want.get("sha256"):
            return f"{name} checksum differs"
    return None


def not_intact(folder: Path, man: dict) -> StoreError | None:
    """A ``StoreError`` naming the first file of the local release ``folder`` that is not the
    one published (None: every file is): a file its manifest ``man`` lists (``checksums``)
    missing, or of another size or sha256 (rewritten with other bytes, even when its values
    read the same), or a file of the shareable copy the manifest does not list. What
    ``privfair verify`` refuses in the copy is refused in the release: a release is its
    published bytes, whatever its values (``privfair.run.flow.revalidate`` raises it when every
    guarantee holds: exit 2, bad data, not a broken guarantee). A manifest written before
    checksums were recorded lists none: nothing to compare."""
    sums = man.get("checksums")
    if not isinstance(sums, dict) or not sums:
        return None
    fix = "re-run its spec to quarantine and rebuild it, or restore the file"
    shared = folder / SHARED
    if shared.is_dir():
        for p in sorted(shared.rglob("*")):
            name = p.relative_to(folder).as_posix()
            if p.is_file() and name not in sums:
                return StoreError(
                    str(p),
                    "this file of the shareable copy is not listed in the release's manifest "
                    f"(privfair verify refuses the copy the same way): {fix}",
                )
    for name, want in sorted(sums.items()):
        path = folder / name
        if not path.is_file():
            return StoreError(
                str(path), f"the release's manifest lists this file; it is missing: {fix}"
            )
        h, size = hashlib.sha256(), 0
        with store_io(str(path), "read it"), path.open("rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
                size += len(chunk)
        if (
            not isinstance(want, dict)
            or size != want.get("size")
            or h.hexdigest() != want.get("sha256")
        ):
            copy = " (privfair verify of the shareable copy fails the same way)"
            return StoreError(
                str(path),
                f"{name} is not the file that was published: its bytes differ from the size and "
                "sha256 the release's manifest records (rewritten or damaged since, even if its "
                f"values read the same){copy if name.startswith(SHARED + '/') else ''}: {fix}",
            )
    return None


def checksums(store: Store, *parts: str) -> dict[str, dict]:
    """``{relative file: {"sha256", "size"}}`` for every file below ``parts`` but the
    manifest (the manifest records them)."""
    out = {}
    for name in store.files(*parts):
        if name == MANIFEST:
            continue
        digest, size = store.sha256(*parts, *name.split("/"))
        out[name] = {"sha256": digest, "size": size}
    return out


def quarantine_release(store: Store, pipeline: str, version: str, reason: str) -> str | None:
    """Move the published (but incomplete) ``<pipeline>/<version>`` into ``.quarantine/``;
    ``latest`` is moved off it (to the newest other release, or removed). Returns where it went
    (None if another run moved it first)."""
    ts = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = (pipeline, QUARANTINE, f"{version}-{ts}-{uuid.uuid4().hex[:8]}-incomplete")
    store.make_dirs(*dest[:-1])
    try:
        store.move((pipeline, version), dest)
    except StoreError:
        if store.exists(pipeline, version):
            raise
        return None
    with contextlib.suppress(StoreError):
        store.write_bytes(f"{reason}\n".encode(), *dest, "QUARANTINED.txt")
    if latest(store, pipeline) == version:
        remove_latest(store, pipeline)
        repair_latest(store, pipeline)
    return store.path(*dest)


def resolve_release(path: str | Path) -> Path:
    """A local release folder from ``<store>/<pipeline>/<version>`` or
    ``<store>/<pipeline>/latest`` (the symlink, or the older pointer file naming the version
    folder, is followed to ``<store>/<pipeline>/<version>``)."""
    p = Path(path)
    if p.name == LATEST and p.is_symlink():
        version = os.readlink(p).rstrip("/").rsplit("/", 1)[-1]
        target = p.parent / version
        if not version or version.startswith(".") or not target.is_dir():
            raise StoreError(str(p), f"'latest' names version {version}, which is not there")
        return target
    if p.name == LATEST and p.is_dir():
        raise StoreError(
            str(p), "'latest' is a folder; it must be a symlink or a file naming a version"
        )
    if p.is_file():
        try:
            version = p.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise StoreError(str(p), f"cannot read the pointer file: {e}") from None
        if p.name != LATEST or not version or "/" in version or version.startswith("."):
            raise StoreError(str(p), "not a release folder or a 'latest' pointer file")
        target = p.parent / version
        if not target.is_dir():
            raise StoreError(str(p), f"'latest' names version {version}, which is not there")
        return target
    return p


def sweep_staging(store: Store, pipeline: str, older_than_s: float = 0.0) -> int:
    """Remove staging leftovers of crashed runs (older than ``older_than_s``)."""
    if store.kind(pipeline, STAGING) != pafs.FileType.Directory:
        return 0
    now, n = time.time(), 0
    for info in _entries(store, pipeline, STAGING):
        mtime = info.mtime.timestamp() if info.mtime else 0.0
        if now - mtime >= older_than_s:
            with store_io(info.path, "remove a staging leftover"):
                if info.type == pafs.FileType.Directory:
                    store.fs.delete_dir(info.path)
                else:
                    store.fs.delete_file(info.path)
            n += 1
    return n


def _entries(store: Store, *parts: str) -> list[pafs.FileInfo]:
    """The entries of the folder ``parts`` (none if it does not exist)."""
    if store.kind(*parts) != pafs.FileType.Directory:
        return []
    path = store.path(*parts)
    with store_io(path, "list the folder"):
        return store.fs.get_file_info(pafs.FileSelector(path))


def _summary(store: Store, pipeline: str, folder: tuple[str, ...], version: str) -> dict | None:
    """One row of a listing from the manifest in ``folder`` (None without a manifest)."""
    if store.kind(*folder, MANIFEST) != pafs.FileType.File:
        return None
    try:
        m = dict(Manifest.read(store, *folder).data)
    except (StoreError, ManifestError):
        m = {"validation": {"status": "unreadable manifest"}}
    outputs = m.get("outputs") if isinstance(m.get("outputs"), dict) else {}
    inp = m.get("input") if isinstance(m.get("input"), dict) else {}
    ledger = m.get("ledger") if isinstance(m.get("ledger"), dict) else {}
    return {
        "pipeline": pipeline,
        "version": m.get("version") or version,
        "published_at": m.get("published_at", ""),
        "rows": sum(int(o.get("rows") or 0) for o in outputs.values() if isinstance(o, dict))
        or None,
        "status": (m.get("validation") or {}).get("status", "?"),
        "partition": inp.get("partition"),
        "charge": ledger.get("charge"),
        # compared between versions (``what_differs``), never listed themselves
        "_params": m.get("params") if isinstance(m.get("params"), dict) else {},
        "_input": inp.get("fingerprint"),
        "_code": m.get("code_version"),
    }


def what_differs(rows: list[dict]) -> None:
    """Give each published row ``changes``: what differs from the previous version of its
    pipeline (by ``published_at``; of the same partition for a partitioned pipeline) — the
    parameters that differ (``{name: {"from", "to"}}``), whether the input and the code
    changed — or None for a pipeline's first release. The compared values (input fingerprint,
    code version) stay out of the listing: ``changes`` says only changed or not.

    >>> rows = [
    ...     {"pipeline": "p", "published_at": "1", "partition": None, "_params": {"k": 5},
    ...      "_input": "a", "_code": "c"},
    ...     {"pipeline": "p", "published_at": "2", "partition": None, "_params": {"k": 7},
    ...      "_input": "a", "_code": "d"},
    ... ]
    >>> what_differs(rows)
    >>> rows[0]["changes"], rows[1]["changes"]
    (None, {'params': {'k': {'from': 5, 'to': 7}}, 'input_changed': False, 'code_changed': True})
    """
    last: dict[tuple, dict] = {}
    for r in sorted(rows, key=lambda r: r["published_at"]):
        key = (r["pipeline"], r.get("partition"))
        prev = last.get(key)
        last[key] = r
        if prev is None:
            r["changes"] = None
            continue
        a, b = prev.get("_params") or {}, r.get("_params") or {}
        r["changes"] = {
            "params": {
                k: {"from": a.get(k), "to": b.get(k)}
                for k in sorted(set(a) | set(b))
                if a.get(k) != b.get(k)
            },
            "input_changed": prev.get("_input") != r.get("_input"),
            "code_changed": prev.get("_code") != r.get("_code"),
        }


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
    """The published versions of ``pipeline`` (folders with a manifest), unordered."""
    out = []
    for info in _entries(store, pipeline):
        name = info.base_name
        if info.type != pafs.FileType.Directory or name.startswith(".") or name == LATEST:
            continue
        row = _summary(store, pipeline, (pipeline, name), name)
        if row is not None:
            row["version"] = name
            out.append(row)
    return out


def list_quarantined(store: Store, pipeline: str) -> list[dict]:
    """The candidates (and incomplete releases) of ``pipeline`` in ``.quarantine/``; each row's
    ``quarantined`` names its folder there."""
    out = []
    for info in _entries(store, pipeline, QUARANTINE):
        if info.type != pafs.FileType.Directory:
            continue
        name = info.base_name
        row = _summary(store, pipeline, (pipeline, QUARANTINE, name), name.split("-", 1)[0])
        if row is None:
            row = {
                "pipeline": pipeline,
                "version": name.split("-", 1)[0],
                "published_at": "",
                "rows": None,
                "status": "no manifest",
            }
        row["quarantined"] = name
        out.append(row)
    return out


def list_releases(store: Store, quarantined: bool = False) -> list[dict]:
    """Every published release in the store, newest first, with ``latest`` marked and what
    differs from the previous version (``changes``, ``what_differs``); with
    ``quarantined``, the quarantined candidates too (``quarantined`` names their folder). A store
    that does not exist has none (nothing is created)."""
    rows = []
    for info in _entries(store):
        if info.type != pafs.FileType.Directory or info.base_name.startswith("."):
            continue
        cur = latest(store, info.base_name)
        for r in list_versions(store, info.base_name):
            r["latest"] = r["version"] == cur
            r["quarantined"] = None
            rows.append(r)
        if quarantined:
            for r in list_quarantined(store, info.base_name):
                r["latest"] = False
                rows.append(r)
    what_differs([r for r in rows if not r["quarantined"]])
    for r in rows:
        r.setdefault("changes", None)
        for k in ("_params", "_input", "_code"):
            r.pop(k, None)
    return sorted(rows, key=lambda r: (r["pipeline"], r["published_at"]), reverse=True)


def current_releases(store: Store, pipeline: str | None = None) -> list[dict]:
    """Each partition's current release: per pipeline (``pipeline``, else every one in the
    store) and partition key, the version ``latest`` names when it is of that key (a re-run
    or ``promote`` moves it there), else the newest published one (by ``published_at``). An
    unpartitioned pipeline has one row, its ``latest``. Rows as ``list_releases``' (``partition``
    None without partitions), sorted by pipeline and key; ``latest`` marks the one it names.
    A store or pipeline without releases has none (nothing is created)."""
    names = (
        [pipeline]
        if pipeline is not None
        else [
            i.base_name
            for i in _entries(store)
            if i.type == pafs.FileType.Directory and not i.base_name.startswith(".")
        ]
    )
    rows = []
    for name in sorted(names):
        versions = list_versions(store, name)
        cur = latest(store, name)
        by_key: dict = {}
        for r in sorted(versions, key=lambda r: r["published_at"]):
            by_key[r.get("partition")] = r  # the newest of each key, unless latest names one
        for r in versions:
            if r["version"] == cur:
                by_key[r.get("partition")] = r
        if None in by_key and len(by_key) > 1:  # a pipeline partitioned since: its whole
            by_key.pop(None)  # release is no partition's
        for key in sorted(by_key, key=lambda k: "" if k is None else str(k)):
            r = dict(by_key[key])
            r["latest"] = r["version"] == cur
            for k in ("_params", "_input", "_code"):
                r.pop(k, None)
            rows.append(r)
    return rows


def read_current(store: Store, pipeline: str, output: str = "data") -> pa.Table:
    """The public ``output`` of ``pipeline``'s current releases (``current_releases``) as one
    table: each partition's shareable ``shared/<output>.parquet``, in key order, with the
    column ``privfair_partition`` (its key; as a lakehouse target holds it,
    ``privfair.release.targets.PARTITION_COLUMN``) first. The columns keep their roles (field
    metadata); the schema's own metadata (each release's contract) is dropped: the table is no
    single release. An unpartitioned pipeline gives its ``latest`` output as published.
    ``StoreError`` when the pipeline has no release, or a file is missing or cannot be read."""
    rows = current_releases(store, pipeline)
    if not rows:
        raise StoreError(store.path(pipeline), "no published release of this pipeline")
    tables = []
    for r in rows:
        parts = (pipeline, r["version"], SHARED, f"{output}.parquet")
        if store.kind(*parts) != pafs.FileType.File:
            raise StoreError(store.path(*parts), f"the release has no output '{output}'")
        with store_io(store.path(*parts), "read it"):
            t = pq.read_table(store.path(*parts), filesystem=store.fs)
        if r.get("partition") is None:
            return t
        t = t.replace_schema_metadata(None)
        key = pa.array([str(r["partition"])] * t.num_rows, pa.string())
        tables.append(t.add_column(0, "privfair_partition", key))
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise StoreError(
            store.path(pipeline), f"the partitions' {output} tables do not concatenate: {e}"
        ) from None
