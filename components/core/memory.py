"""Freed memory handed back to the operating system between the phases of a large release.

A phase of a 10M-row release frees gigabytes, but the allocators keep part of it: objects in
reference cycles wait for the garbage collector, Arrow's memory pool (mimalloc by default)
keeps freed pages for reuse, and glibc's ``malloc`` keeps the freed chunks of its heap mapped.
The process's resident memory, which is what a container limit or the OOM killer counts, then
carries one phase's garbage into the next phase's peak. Measured on a 10M-row Fair-MDAV
release before its whole-table evidence is built: 4.45 GB resident after collection, 3.98 GB
after both allocators returned what they held free (``benchmarks/README.md``).

``release(rows)`` does all three, for tables of at least ``RELEASE_ROWS`` rows: below that the
allocators hold little and a full collection (~0.2 s with Great Expectations loaded) would
only slow a small release down.

>>> release(0)  # a small table: nothing to do
False
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import sys

import pyarrow as pa

__all__ = ["RELEASE_ROWS", "release"]

#: the smallest table whose phases hand their freed memory back
RELEASE_ROWS = 1_000_000


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def release(rows: int) -> bool:
    """Collect garbage and return the freed memory of Arrow's pool and of ``malloc`` to the
    operating system, when the table has at least ``RELEASE_ROWS`` rows; True if it did."""
    if rows < RELEASE_ROWS:
        return False
    gc.collect()
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    return True
