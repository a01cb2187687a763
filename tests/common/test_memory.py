"""Freed memory goes back to the operating system between the phases of a large release
(``components.core.memory``)."""

from __future__ import annotations

import pytest

from components.core import memory

MB = 1 << 20


def resident_bytes() -> int | None:
    """This process's resident set size in bytes (Linux), or None where it cannot be read."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


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
