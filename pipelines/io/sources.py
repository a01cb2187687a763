"""Finding the raw files of the built-in datasets, and proving they are the right bytes.

``locate`` looks for a file, in this order:

1. the explicit ``data_dir`` argument;
2. the directory in the environment variable ``PRIVFAIR_DATA_DIR``;
3. the user cache: ``$PRIVFAIR_CACHE_DIR``, else ``$XDG_CACHE_HOME/privfair``, else
   ``~/.cache/privfair``;
4. a download of ``RawFile.url`` into the cache. ``PRIVFAIR_DATA_MIRROR`` (a base URL), when
   set, replaces the URL's directory part: ``<mirror>/<file name>`` is downloaded instead.

The sha256 is always verified, wherever the file was found. A download goes to a temporary file
in the cache directory and is moved into place (``os.replace``) only once verified, so a failed
or corrupted download leaves nothing in the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from privfair.schemas.datasets import RawFile
from privfair.schemas.errors import DataSourceError

ENV_DATA_DIR = "PRIVFAIR_DATA_DIR"
ENV_CACHE_DIR = "PRIVFAIR_CACHE_DIR"
ENV_MIRROR = "PRIVFAIR_DATA_MIRROR"
DOWNLOAD_TIMEOUT = 60.0
_CHUNK = 1 << 20


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def fingerprint_digests(digests: Mapping[str, str]) -> str:
    """sha256 over the ``name<TAB>digest`` lines of the files, sorted by name."""
    h = hashlib.sha256()
    for name in sorted(digests):
        h.update(f"{name}\t{digests[name]}\n".encode())
    return h.hexdigest()


def fingerprint(paths: dict[str, Path]) -> str:
    """One digest for a set of files: sha256 over the sorted (name, file sha256) pairs.

    It depends on the names and the contents only, not on where the files are.
    """
    return fingerprint_digests({name: sha256_file(p) for name, p in paths.items()})


def cache_dir() -> Path:
    """The user cache: ``$PRIVFAIR_CACHE_DIR``, else ``$XDG_CACHE_HOME/privfair``, else
    ``~/.cache/privfair``."""
    if d := os.environ.get(ENV_CACHE_DIR):
        return Path(d).expanduser()
    if d := os.environ.get("XDG_CACHE_HOME"):
        return Path(d).expanduser() / "privfair"
    return Path.home() / ".cache" / "privfair"


def source_url(raw: RawFile) -> str:
    """The URL to download: ``raw.url``, or ``<PRIVFAIR_DATA_MIRROR>/<name>`` when set."""
    mirror = os.environ.get(ENV_MIRROR)
    if mirror:
        return f"{mirror.rstrip('/')}/{raw.name}"
    return raw.url


def _verify(raw: RawFile, path: Path, where: str) -> None:
    """A ``DataSourceError`` naming the file and both digests if ``path`` is not ``raw``."""
    actual = sha256_file(path)
    if actual != raw.sha256:
        raise DataSourceError(
            f"checksum mismatch for {raw.name} ({where}: {path}): "
            f"expected sha256 {raw.sha256}, got {actual}. "
            "The file is corrupted or a different version; replace or delete it."
        )


def _how_to_fix(raw: RawFile, searched: list[Path]) -> str:
    where = ", ".join(str(p) for p in searched) or "(nowhere)"
    return (
        f"No local copy of {raw.name} was found (searched: {where}). "
        f"Download {raw.url} (sha256 {raw.sha256}) into a directory and set the environment "
        f"variable {ENV_DATA_DIR} to it (e.g. `export {ENV_DATA_DIR}=/path/to/data`), "
        f"or pass data_dir=..., or set {ENV_MIRROR} to a base URL that serves the file."
    )


def _download(raw: RawFile, url: str, dest_dir: Path, timeout: float) -> Path:
    """Download ``url`` into ``dest_dir/raw.name`` through a verified temporary file."""
    try:
        dest_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{raw.name}.", suffix=".part", dir=dest_dir)
    except OSError as e:
        raise DataSourceError(f"cannot write to the cache directory {dest_dir}: {e}") from None
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            while chunk := resp.read(_CHUNK):
                h.update(chunk)
                out.write(chunk)
        actual = h.hexdigest()
        if actual != raw.sha256:
            raise DataSourceError(
                f"checksum mismatch for {raw.name} downloaded from {url}: "
                f"expected sha256 {raw.sha256}, got {actual}. Nothing was written to the cache."
            )
        target = dest_dir / raw.name
        os.replace(tmp, target)
        return target
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def locate(
    raw: RawFile,
    data_dir: str | Path | None = None,
    *,
    download: bool = True,
    timeout: float = DOWNLOAD_TIMEOUT,
) -> Path:
    """The local path of ``raw``, verified against its sha256 (see the module docstring).

    Raises ``DataSourceError`` on a checksum mismatch (naming the file and both digests) and when
    no copy can be found or downloaded (naming ``PRIVFAIR_DATA_DIR`` and how to set it).
    """
    searched: list[Path] = []
    candidates: list[tuple[str, Path]] = []
    if data_dir is not None:
        candidates.append(("data_dir", Path(data_dir).expanduser()))
    if env_dir := os.environ.get(ENV_DATA_DIR):
        candidates.append((ENV_DATA_DIR, Path(env_dir).expanduser()))
    cache = cache_dir()
    candidates.append(("cache", cache))
    for where, directory in candidates:
        path = directory / raw.name
        searched.append(directory)
        if path.is_file():
            _verify(raw, path, where)
            return path
    if not download:
        raise DataSourceError(f"{_how_to_fix(raw, searched)} Downloading is disabled.")
    url = source_url(raw)
    try:
        return _download(raw, url, cache, timeout)
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as e:
        reason = e.reason if type(e) is urllib.error.URLError else e
        raise DataSourceError(
            f"cannot download {raw.name} from {url}: {reason}. {_how_to_fix(raw, searched)}"
        ) from None
