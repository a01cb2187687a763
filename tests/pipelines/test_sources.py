"""Finding, downloading and verifying raw files (``privfair.io.sources``).

Downloads are tested against a real HTTP server on 127.0.0.1 serving a temp directory.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from privfair.io.ingest import load_dataset
from privfair.io.sources import cache_dir, fingerprint, locate, sha256_file, source_url
from privfair.schemas.datasets import DATASETS, RawFile
from privfair.schemas.errors import DataSourceError
from privfair.schemas.spec import DatasetSpec

GERMAN = DATASETS["german"].files[0]


DATA_DIR = Path(os.environ["PRIVFAIR_DATA_DIR"])  # set by conftest; read before any monkeypatch


@pytest.fixture
def data_dir() -> Path:
    return DATA_DIR


@pytest.fixture
def no_env_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRIVFAIR_DATA_DIR", raising=False)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("PRIVFAIR_CACHE_DIR", str(d))
    return d


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A ThreadingHTTPServer on 127.0.0.1 (port 0) serving a temp dir: (base URL, dir)."""
    root = tmp_path / "served"
    root.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/files", root
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _serve(root: Path, src: Path, name: str) -> Path:
    (root / "files").mkdir(exist_ok=True)
    return Path(shutil.copyfile(src, root / "files" / name))


# --- digests ---------------------------------------------------------------------------------


def test_sha256_file_matches_sha256sums(data_dir: Path) -> None:
    sums = dict(
        reversed(line.split()) for line in (data_dir / "SHA256SUMS").read_text().splitlines()
    )
    for definition in DATASETS.values():
        for raw in definition.files:
            assert raw.sha256 == sums[raw.name]
            assert sha256_file(data_dir / raw.name) == raw.sha256


def test_fingerprint_depends_on_names_and_contents_not_order(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"alpha")
    b.write_bytes(b"beta")
    fp = fingerprint({"a": a, "b": b})
    assert fp == fingerprint({"b": b, "a": a})
    assert len(fp) == 64
    assert fp != fingerprint({"a": b, "b": a})
    b.write_bytes(b"beta2")
    assert fp != fingerprint({"a": a, "b": b})


# --- local search order ----------------------------------------------------------------------


def test_locate_prefers_explicit_data_dir(tmp_path: Path, data_dir: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copyfile(data_dir / GERMAN.name, mine / GERMAN.name)
    assert locate(GERMAN, mine) == mine / GERMAN.name
    assert locate(GERMAN) == data_dir / GERMAN.name


def test_locate_uses_env_dir_then_cache(
    no_env_dir: None, cache: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache.mkdir()
    shutil.copyfile(data_dir / GERMAN.name, cache / GERMAN.name)
    assert locate(GERMAN, download=False) == cache / GERMAN.name
    monkeypatch.setenv("PRIVFAIR_DATA_DIR", str(data_dir))
    assert locate(GERMAN, download=False) == data_dir / GERMAN.name


def test_cache_dir_fallbacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVFAIR_CACHE_DIR", str(tmp_path / "explicit"))
    assert cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("PRIVFAIR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "privfair"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "privfair"


def test_local_copy_with_wrong_checksum_is_an_error(tmp_path: Path) -> None:
    (tmp_path / GERMAN.name).write_bytes(b"not the german credit data\n")
    with pytest.raises(DataSourceError) as e:
        locate(GERMAN, tmp_path)
    msg = str(e.value)
    assert GERMAN.name in msg
    assert GERMAN.sha256 in msg
    assert sha256_file(tmp_path / GERMAN.name) in msg


def test_nothing_found_and_download_disabled(no_env_dir: None, cache: Path) -> None:
    with pytest.raises(DataSourceError, match="PRIVFAIR_DATA_DIR"):
        locate(GERMAN, download=False)


# --- downloads -------------------------------------------------------------------------------


def test_mirror_replaces_the_url_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    assert source_url(GERMAN) == GERMAN.url
    monkeypatch.setenv("PRIVFAIR_DATA_MIRROR", "http://example.invalid/mirror/")
    assert source_url(GERMAN) == "http://example.invalid/mirror/german.data"


def test_download_verifies_into_empty_cache(
    no_env_dir: None,
    cache: Path,
    served: tuple[str, Path],
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base, root = served
    _serve(root, data_dir / GERMAN.name, GERMAN.name)
    monkeypatch.setenv("PRIVFAIR_DATA_MIRROR", base)
    got = locate(GERMAN)
    assert got == cache / GERMAN.name
    assert sha256_file(got) == GERMAN.sha256
    assert sorted(p.name for p in cache.iterdir()) == [GERMAN.name]
    # The cached copy is found (and verified) without the server.
    (root / "files" / GERMAN.name).unlink()
    assert locate(GERMAN, download=False) == got


def test_load_dataset_through_the_mirror(
    no_env_dir: None,
    cache: Path,
    served: tuple[str, Path],
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base, root = served
    _serve(root, data_dir / GERMAN.name, GERMAN.name)
    monkeypatch.setenv("PRIVFAIR_DATA_MIRROR", base)
    table, record = load_dataset(DatasetSpec(name="german"))
    assert table.num_rows == record["rows"] == 1000
    assert record["files"] == {GERMAN.name: GERMAN.sha256}
    assert record["fingerprint"] == fingerprint({GERMAN.name: cache / GERMAN.name})


def test_corrupted_download_leaves_nothing_in_cache(
    no_env_dir: None,
    cache: Path,
    served: tuple[str, Path],
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base, root = served
    bad = _serve(root, data_dir / GERMAN.name, GERMAN.name)
    bad.write_bytes(bad.read_bytes().replace(b"A11", b"A12", 1))
    monkeypatch.setenv("PRIVFAIR_DATA_MIRROR", base)
    with pytest.raises(DataSourceError) as e:
        locate(GERMAN)
    msg = str(e.value)
    assert GERMAN.name in msg and GERMAN.sha256 in msg and sha256_file(bad) in msg
    assert not cache.exists() or list(cache.iterdir()) == []


def test_no_copy_on_server_names_data_dir_env(
    no_env_dir: None, cache: Path, served: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, _ = served
    monkeypatch.setenv("PRIVFAIR_DATA_MIRROR", base)
    with pytest.raises(DataSourceError, match="PRIVFAIR_DATA_DIR") as e:
        locate(GERMAN)
    assert "404" in str(e.value)
    assert not cache.exists() or list(cache.iterdir()) == []


def test_server_down_names_data_dir_env(
    no_env_dir: None, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _QuietHandler)
    port = server.server_address[1]
    server.server_close()
    monkeypatch.setenv("PRIVFAIR_DATA_MIRROR", f"http://127.0.0.1:{port}/files")
    with pytest.raises(DataSourceError) as e:
        locate(GERMAN, timeout=5)
    msg = str(e.value)
    assert "PRIVFAIR_DATA_DIR" in msg and "export PRIVFAIR_DATA_DIR=" in msg
    assert GERMAN.name in msg
    assert not cache.exists() or list(cache.iterdir()) == []


def test_unknown_raw_file_is_not_invented(no_env_dir: None, cache: Path) -> None:
    raw = RawFile("nowhere.csv", "0" * 64, "file:///nonexistent/privfair/nowhere.csv")
    with pytest.raises(DataSourceError, match="PRIVFAIR_DATA_DIR"):
        locate(raw)
