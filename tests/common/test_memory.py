"""Freed memory goes back to the operating system between the phases of a large release
(``components.core.memory``)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from components.core import memory

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
    """Every table mapped (the threshold at one row) or none: the published files are the
    same bytes and the same guarantees hold."""
    from pipelines.catalogue import load_spec
    from pipelines.flow import run_release

    spec = load_spec(Path(__file__).resolve().parents[2] / f"pipelines/specs/{name}.yaml")
    held = run_release(spec, tmp_path / "held")
    calls = []
    real = memory.mapped

    def spy(table, min_rows=None):
        out = real(table, min_rows)
        calls.append(out is not table)
        return out

    monkeypatch.setattr(memory, "RELEASE_ROWS", 1)
    monkeypatch.setattr(memory, "mapped", spy)
    mapped = run_release(spec, tmp_path / "mapped")
    # the input, the output and lineage after protection and as written, and the component's own
    assert sum(calls) >= 6
    for name in ("shared/data.parquet", "internal/lineage.parquet"):
        assert (Path(held.path) / name).read_bytes() == (Path(mapped.path) / name).read_bytes()
    assert held.validation.summary() == mapped.validation.summary()
