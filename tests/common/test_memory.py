"""Freed memory goes back to the operating system between the phases of a large release
(``privfair.components.core.memory``)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privfair.components.core import memory

MB = 1 << 20


def status_bytes(field: str) -> int | None:
    """A size line of ``/proc/self/status`` (``VmRSS``, ``RssAnon``...) in bytes (Linux), or
    None where it cannot be read."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def resident_bytes() -> int | None:
    """This process's resident set size."""
    return status_bytes("VmRSS")


@pytest.mark.skipif(
    memory._malloc_trim() is None or resident_bytes() is None,
    reason="needs glibc's malloc_trim and /proc",
)
def test_release_returns_the_heap_a_phase_freed():
    """~200 MB freed in the middle of malloc's heap (a live block above it keeps ``free`` from
    shrinking the heap) stay resident until ``release`` hands them back."""
    chunks = [bytearray(4000) for _ in range(50_000)]  # zero-filled: every page touched
    pin = bytearray(4000)
    del chunks
    freed = resident_bytes()
    assert memory.release(memory.RELEASE_ROWS)
    after = resident_bytes()
    assert after < freed - 100 * MB, (freed / MB, after / MB)
    del pin


def test_small_tables_are_left_alone():
    assert not memory.release(memory.RELEASE_ROWS - 1)


def private_bytes() -> int | None:
    """This process's resident memory less its file-backed and shared pages."""
    return status_bytes("RssAnon")


def _typed_table(n: int) -> pa.Table:
    """``n`` rows of the column types a release carries, nulls included, in two chunks whose
    dictionaries differ."""
    rng = np.random.default_rng(0)

    def half(m: int, words: list[str]) -> pa.Table:
        return pa.table(
            {
                "x": pa.array(rng.normal(size=m), mask=rng.random(m) < 0.1),
                "i": pa.array(rng.integers(0, 100, m), pa.int32()),
                "s": pa.array(rng.choice(words, m)),
                "d": pa.array(rng.choice(words, m)).dictionary_encode(),
                "t": pa.array(rng.integers(0, 10**9, m), pa.timestamp("us", tz="UTC")),
                "l": pa.array([[1, 2]] * m, pa.list_(pa.int8())),
                "v": pa.array(rng.choice(words, m)).cast(pa.string_view()),
                "m": pa.array(rng.integers(0, 10**6, m)).cast(pa.decimal128(24, 2)),
                "u": pa.array([b"0123456789abcdef"] * m, pa.binary(16)).cast(pa.uuid()),
            }
        ).replace_schema_metadata({"privfair.roles": "{}"})

    return pa.concat_tables([half(n // 2, ["a", "bb"]), half(n - n // 2, ["ccc", "a", "z"])])


def test_a_mapped_table_equals_its_source_and_leaves_no_file():
    t = _typed_table(10_000)
    before = set(Path(tempfile.gettempdir()).glob("privfair-*"))
    m = memory.mapped(t, min_rows=1)
    assert m is not t and m.equals(t, check_metadata=True)
    assert set(Path(tempfile.gettempdir()).glob("privfair-*")) == before
    assert memory.mapped(t, min_rows=len(t) + 1) is t  # below the threshold: left alone


def test_a_mapped_take_is_the_take_in_pieces_of_one_chunk(monkeypatch):
    """``mapped_take``: the rows ``take`` gives (types, nulls, two dictionaries, metadata),
    each piece of ``CHUNK_ROWS`` rows one chunk of the map, and no file left behind (view
    columns have no take: ``publish_order_typed`` orders them in their plain type)."""
    t = _typed_table(10_000).drop_columns(["v"])
    rows = np.random.default_rng(5).permutation(len(t))
    monkeypatch.setattr(memory, "CHUNK_ROWS", 999)
    before = set(Path(tempfile.gettempdir()).glob("privfair-*"))
    m = memory.mapped_take(t, rows, min_rows=1)
    assert m.equals(t.take(rows), check_metadata=True)
    assert [len(c) for c in m.column(0).chunks] == [999] * 10 + [10]
    assert memory._in_maps(m) or not Path("/proc/self/maps").is_file()
    assert set(Path(tempfile.gettempdir()).glob("privfair-*")) == before
    small = memory.mapped_take(t, rows[:5], min_rows=6)  # below the threshold: a plain take
    assert small.equals(t.take(rows[:5]), check_metadata=True)


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="needs /proc/self/maps")
def test_a_table_already_mapped_is_not_written_again(monkeypatch):
    """A table whose every buffer lies in a map ``mapped`` made (a component maps its columns
    as it makes them) is returned as it is; one with a column in the heap is mapped."""
    m = memory.mapped(_typed_table(2_000), min_rows=1)
    calls = []
    real = memory._mapped
    monkeypatch.setattr(memory, "_mapped", lambda *a: calls.append(1) or real(*a))
    assert memory.mapped(m, min_rows=1) is m
    assert memory.mapped(m.slice(10, 500), min_rows=1).equals(m.slice(10, 500))
    assert not calls
    mixed = m.append_column("extra", pa.array(np.arange(len(m))))
    again = memory.mapped(mixed, min_rows=1)
    assert again is not mixed and again.equals(mixed) and calls == [1]


def test_a_mapped_parquet_file_equals_what_read_table_reads(tmp_path):
    """Row group by row group into the map: the same table ``pq.read_table`` gives, each
    row group's dictionaries included."""
    t = _typed_table(10_000)
    path = tmp_path / "t.parquet"
    pq.write_table(t, path, row_group_size=1_500)
    before = set(Path(tempfile.gettempdir()).glob("privfair-*"))
    m = memory.mapped_parquet(str(path), min_rows=1)
    expected = pq.read_table(path)
    assert m.equals(expected, check_metadata=True)
    assert m.schema.metadata == expected.schema.metadata
    assert set(Path(tempfile.gettempdir()).glob("privfair-*")) == before
    assert memory.mapped_parquet(str(path)).equals(expected)  # below the threshold: read


def test_a_temporary_folder_that_cannot_be_written_keeps_the_table_in_memory(
    tmp_path, monkeypatch, caplog
):
    """The mapping saves memory; it is not what makes a release right: a folder it cannot
    write to leaves the table where it was, and says so, naming the folder."""
    t = _typed_table(1_000)
    gone = tmp_path / "no-such-folder"
    monkeypatch.setattr(tempfile, "tempdir", str(gone))
    with caplog.at_level(logging.WARNING, logger=memory.__name__):
        assert memory.mapped(t, min_rows=1) is t
    assert str(gone) in caplog.text and "TMPDIR" in caplog.text


@pytest.mark.skipif(os.name != "posix", reason="needs RLIMIT_FSIZE (POSIX)")
def test_a_full_temporary_folder_keeps_the_table_and_leaves_no_file(tmp_path):
    """A write that fails half way (here the process may not write files over 64 KB, as a
    full disk stops it) leaves no file behind and a table equal to the source."""
    script = f"""
import logging, resource, signal, tempfile
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq
from privfair.components.core import memory
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the failed write is an error, not a kill
tempfile.tempdir = {str(tmp_path)!r}
t = pa.table({{"x": list(range(200_000))}})
pq.write_table(t, {str(tmp_path / "t.parquet")!r}, row_group_size=50_000)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))
logging.basicConfig(level=logging.WARNING)
assert memory.mapped(t, min_rows=1).equals(t)
assert memory.mapped_parquet({str(tmp_path / "t.parquet")!r}, min_rows=1).equals(t)
assert not list(Path({str(tmp_path)!r}).glob("privfair-*"))
"""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("could not hold a memory-mapped copy") == 2, done.stderr


@pytest.mark.skipif(private_bytes() is None or os.name == "nt", reason="needs /proc (Linux)")
def test_a_mapped_table_leaves_the_process_heap():
    """The point of mapping: once the caller drops its copy, ~400 MB of table no longer count
    in the process's private memory (nor in Arrow's pool), though every value reads back."""
    t = pa.table({"x": np.random.default_rng(1).normal(size=50_000_000)})
    total = t.column("x").to_numpy().sum()
    held = private_bytes()
    m = memory.mapped(t, min_rows=1)
    del t
    memory.release(memory.RELEASE_ROWS)
    assert pa.total_allocated_bytes() < 50 * MB
    assert private_bytes() < held - 300 * MB, (held / MB, private_bytes() / MB)
    assert m.column("x").to_numpy().sum() == total


@pytest.mark.parametrize("name", ["german_fair_mdav", "german_dmondrian"])
def test_a_release_of_mapped_tables_is_the_same_release(name, tmp_path, monkeypatch):
    """Every table mapped (the threshold at one row) and made in pieces, or none: the
    published files are the same bytes and the same guarantees hold."""
    from privfair.run.flow import run_release
    from privfair.spec.catalogue import load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / f"pipelines/specs/{name}.yaml")
    held = run_release(spec, tmp_path / "held")
    calls = []
    real = memory._mapped

    def spy(schema, batches, unmapped):
        calls.append(schema)
        return real(schema, batches, unmapped)

    monkeypatch.setattr(memory, "RELEASE_ROWS", 1)
    monkeypatch.setattr(memory, "CHUNK_ROWS", 97)  # label columns made in many pieces
    monkeypatch.setattr(memory, "_mapped", spy)
    mapped = run_release(spec, tmp_path / "mapped")
    # the input, the output and lineage after protection and as written, and the component's own
    assert len(calls) >= 6
    for name in ("shared/data.parquet", "internal/lineage.parquet"):
        assert (Path(held.path) / name).read_bytes() == (Path(mapped.path) / name).read_bytes()
    assert held.validation.summary() == mapped.validation.summary()


def test_canonical_chunks_keep_a_release_s_bytes_and_its_map():
    """A table cut into ``canonical_chunks`` is written as the same Parquet bytes as the table
    in one chunk (each row group from one chunk), however it was cut before; a column in one
    chunk is cut without a copy."""
    from privfair.components.core.order import canonical_chunks
    from privfair.run.flow import parquet_bytes

    n = 2 * memory.CHUNK_ROWS + 12_345
    rng = np.random.default_rng(2)
    labels = pa.array([["a", "b"], ["c"], None, ["a", "b", "c", "d"]])
    whole = pa.table(
        {
            "l": labels.take(pa.array(rng.integers(0, 4, n))),
            "x": pa.array(rng.normal(size=n), mask=rng.random(n) < 0.05),
            "s": pa.array(rng.choice(["u", "v", "w"], n)).dictionary_encode(),
        }
    )
    odd = pa.Table.from_batches(whole.to_batches(max_chunksize=300_001))
    cut = canonical_chunks(odd)
    assert [len(c) for c in cut.column("l").chunks] == [memory.CHUNK_ROWS] * 2 + [12_345]
    assert parquet_bytes(cut) == parquet_bytes(whole)
    one = whole.column("x").chunk(0)
    sliced = canonical_chunks(whole).column("x")
    assert sliced.chunk(1).buffers()[1].address == one.buffers()[1].address  # a view of it
    assert sliced.chunk(1).offset == memory.CHUNK_ROWS


def test_collect_frees_a_phases_cycles_from_collect_rows_on():
    """``collect`` runs a full collection for a table of ``COLLECT_ROWS`` rows or more (a
    cycle left by a phase is gone after it) and leaves a smaller table's to the collector."""
    import gc
    import weakref

    class Node:
        pass

    def cycle() -> weakref.ref:
        a, b = Node(), Node()
        a.other, b.other = b, a
        return weakref.ref(a)

    was = gc.isenabled()
    gc.disable()  # only ``collect`` may collect here
    try:
        small = cycle()
        assert memory.collect(memory.COLLECT_ROWS - 1) is False
        assert small() is not None
        assert memory.collect(memory.COLLECT_ROWS) is True
        assert small() is None
    finally:
        if was:
            gc.enable()
