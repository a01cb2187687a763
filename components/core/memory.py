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
only slow a small release down. ``collect(rows)`` collects the cycles alone, for tables of at
least ``COLLECT_ROWS`` rows (a phase's evidence frames are tens of megabytes from there).

A table the run keeps from one phase to the next (the input, the published table and its
sidecars) need not sit in the process's own memory at all: ``mapped(table)`` moves it into a
memory-mapped Arrow IPC file. Its pages are then the kernel's page cache, read in when a phase
reads them and dropped, not swapped, when memory runs short; the process's private memory is
what its phases compute. The file is written to the temporary folder (``TMPDIR``: keep it on
a disk, not a ``tmpfs``, which holds its files in memory), readable by this user only, and
removed as soon as it is mapped: no name points at it while it is read, and it is gone when the
process ends, however it ends.

>>> release(0)  # a small table: nothing to do
False
>>> t = pa.table({"x": [1, 2, 3]})
>>> mapped(t) is t  # a small table stays in memory
True
"""

from __future__ import annotations

import bisect
import ctypes
import ctypes.util
import functools
import gc
import itertools
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

__all__ = [
    "CHUNK_ROWS",
    "COLLECT_ROWS",
    "RELEASE_ROWS",
    "collect",
    "mapped",
    "mapped_batches",
    "mapped_column",
    "mapped_parquet",
    "mapped_take",
    "release",
]

log = logging.getLogger(__name__)

#: the smallest table whose phases hand their freed memory back
RELEASE_ROWS = 1_000_000
#: the smallest table whose phases' cyclic garbage is collected as soon as they end (``collect``)
COLLECT_ROWS = 100_000
#: rows per chunk of a column made piece by piece (``mapped_column``): Parquet's default row
#: group, so a release's bytes do not depend on it
CHUNK_ROWS = 1 << 20


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def collect(rows: int) -> bool:
    """Collect the cyclic garbage a phase over a table of ``rows`` rows left, when it has at
    least ``COLLECT_ROWS`` rows; True if it did. Below that the garbage is a few megabytes, and
    a full collection (~0.25 s once Great Expectations is loaded) would cost a small release
    more than waiting for the collector's own turn."""
    if rows < COLLECT_ROWS:
        return False
    gc.collect()
    return True


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


def _maps(rows: int, min_rows: int | None) -> bool:
    """Whether a table of ``rows`` rows is mapped: at least ``min_rows`` (default
    ``RELEASE_ROWS``), and not on Windows, which cannot remove a mapped file."""
    return rows >= (RELEASE_ROWS if min_rows is None else min_rows) and os.name != "nt"


def mapped(table: pa.Table, min_rows: int | None = None) -> pa.Table:
    """``table`` read back from a memory-mapped Arrow IPC stream of it, when it has at least
    ``min_rows`` rows (default ``RELEASE_ROWS``); else ``table`` itself.

    The result is equal to ``table`` (schema and metadata included) and its buffers are views
    of the mapped file: no copy of its data is left in the process's heap once the caller drops
    ``table``. The stream format keeps each chunk's own dictionary (the file format needs one
    per column). The file (``privfair-*.arrow`` in ``tempfile.gettempdir()``, mode 0600) is
    unlinked before this returns; on Windows, which cannot remove a mapped file, the table is
    returned as it is. Where the file cannot be written (the temporary folder full or not
    writable) the table is returned as it is, with a warning naming the folder: the mapping
    saves memory, it is not what makes a release right.

    Examples
    --------
    >>> t = pa.table({"x": list(range(5)), "s": ["a", "b", "a", "c", "b"]})
    >>> m = mapped(t, min_rows=1)
    >>> m.equals(t), m is t
    (True, False)
    """
    if not _maps(table.num_rows, min_rows):
        return table
    if _in_maps(table):  # mapped already (a component maps its columns as it makes them)
        return table
    return _mapped(table.schema, lambda: table.to_batches(), lambda: table)


def _in_maps(table: pa.Table) -> bool:
    """True when every buffer of ``table`` lies in a memory-mapped file this module made (read
    from ``/proc/self/maps``: the unlinked ``privfair-*.arrow`` files); False where that
    cannot be read."""
    try:
        with open("/proc/self/maps") as f:
            spans = sorted(
                (int(a, 16), int(b, 16))
                for line in f
                if line.rstrip().endswith(".arrow (deleted)") and "/privfair-" in line
                for a, b in [line.split(None, 1)[0].split("-")]
            )
    except (OSError, ValueError):
        return False
    if not spans:
        return False
    starts = [a for a, _ in spans]
    for column in table.columns:
        for chunk in column.chunks:
            arrays = [chunk, chunk.dictionary] if pa.types.is_dictionary(chunk.type) else [chunk]
            for buf in (b for a in arrays for b in a.buffers() if b is not None and b.size):
                i = bisect.bisect_right(starts, buf.address) - 1
                if i < 0 or buf.address + buf.size > spans[i][1]:
                    return False
    return True


def mapped_parquet(
    path: str, filesystem: pafs.FileSystem | None = None, min_rows: int | None = None
) -> pa.Table:
    """The Parquet file at ``path``, equal to ``pq.read_table(path)``, memory-mapped as
    ``mapped`` maps a table when it has at least ``min_rows`` rows (default ``RELEASE_ROWS``).

    The file is decoded one row group at a time into the mapped stream, so the process never
    holds more than one row group of it: reading a 10M-row release back whole and mapping it
    afterwards would hold all of it (4.2 GB for dMondrian's value-set labels) at once.

    Examples
    --------
    >>> import io
    >>> buf = io.BytesIO()
    >>> pq.write_table(pa.table({"x": list(range(6))}), buf, row_group_size=2)
    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.parquet"
    >>> _ = p.write_bytes(buf.getvalue())
    >>> mapped_parquet(str(p), min_rows=1).column("x").to_pylist()
    [0, 1, 2, 3, 4, 5]
    """
    fs = filesystem or pafs.LocalFileSystem()
    with fs.open_input_file(path) as source:
        pf = pq.ParquetFile(source)
        if not _maps(pf.metadata.num_rows, min_rows):
            return pq.read_table(path, filesystem=fs)
        groups = (pf.read_row_group(i) for i in range(pf.num_row_groups))
        return _mapped(
            pf.schema_arrow,
            lambda: (b for g in groups for b in g.to_batches()),
            lambda: pq.read_table(path, filesystem=fs),
        )


def mapped_batches(
    schema: pa.Schema,
    batches: Iterator[pa.RecordBatch],
    unmapped: Callable[[], pa.Table],
    min_rows: int | None = None,
) -> pa.Table:
    """The table of the record ``batches`` a reader streams (a CSV file, a database cursor, a
    lakehouse scan: its row count unknown until the end), memory-mapped as ``mapped`` maps a
    table once it has at least ``min_rows`` rows (default ``RELEASE_ROWS``).

    Batches are held in memory until they reach ``min_rows``; from there they and every later
    batch go straight into the map, so a large source is never whole in the process's memory
    and a small one is never written out. ``unmapped()`` reads the source again, whole, where
    the map cannot be written (``mapped``: a full or unwritable temporary folder); the
    batches already taken are dropped.

    Examples
    --------
    >>> schema = pa.schema([("x", pa.int64())])
    >>> stream = (pa.record_batch([pa.array([i, i])], schema=schema) for i in range(3))
    >>> t = mapped_batches(schema, stream, lambda: None, min_rows=3)
    >>> t.column("x").to_pylist(), t.num_rows
    ([0, 0, 1, 1, 2, 2], 6)
    """
    head: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        head.append(batch)
        rows += batch.num_rows
        if _maps(rows, min_rows):
            break
    else:
        return pa.Table.from_batches(head, schema)
    return _mapped(schema, lambda: itertools.chain(head, batches), unmapped)


def mapped_take(table: pa.Table, rows, min_rows: int | None = None) -> pa.Table:
    """``table.take(rows)`` (``rows``: positions, a NumPy or Arrow integer array), memory-mapped
    as ``mapped`` maps a table when it has at least ``min_rows`` rows (default
    ``RELEASE_ROWS``): taken ``CHUNK_ROWS`` rows at a time into the map, each piece one chunk,
    so the reordered copy is never whole in the process's memory (a 10M-row Fair-MDAV release
    put in its published order is 1.7 GB).

    Examples
    --------
    >>> t = pa.table({"x": [10, 11, 12, 13]})
    >>> mapped_take(t, [3, 1, 0, 2], min_rows=1).column("x").to_pylist()
    [13, 11, 10, 12]
    """
    if not _maps(len(rows), min_rows):
        return table.take(rows)
    step = CHUNK_ROWS

    def pieces() -> Iterator[pa.RecordBatch]:
        for i in range(0, len(rows), step):
            yield from table.take(rows[i : i + step]).combine_chunks().to_batches()

    return _mapped(table.schema, pieces, lambda: table.take(rows))


def mapped_column(
    name: str,
    type: pa.DataType,
    chunks: Callable[[], Iterable[pa.Array]],
    rows: int,
    min_rows: int | None = None,
) -> pa.ChunkedArray:
    """The column ``chunks()`` makes (``rows`` rows of ``type``), memory-mapped as ``mapped``
    maps a table, a chunk at a time, when it has at least ``min_rows`` rows: the column is
    never whole in the process's memory. ``chunks`` is called again if the map cannot be
    written (the column is then made in memory).

    Examples
    --------
    >>> col = mapped_column("x", pa.int64(), lambda: (pa.array([i, i]) for i in range(3)), 6, 1)
    >>> col.to_pylist(), col.num_chunks
    ([0, 0, 1, 1, 2, 2], 3)
    """
    schema = pa.schema([pa.field(name, type)])

    def batches() -> Iterable[pa.RecordBatch]:
        return (pa.record_batch([c], schema=schema) for c in chunks())

    if not _maps(rows, min_rows):
        return pa.chunked_array(list(chunks()), type)
    whole = _mapped(schema, batches, lambda: pa.Table.from_batches(list(batches()), schema))
    return whole.column(0)


def _mapped(
    schema: pa.Schema,
    batches: Callable[[], Iterable[pa.RecordBatch]],
    unmapped: Callable[[], pa.Table],
) -> pa.Table:
    """The batches written to an unlinked, memory-mapped IPC stream and read back; on a write
    that fails (``OSError``: a full disk, a folder that is not writable), ``unmapped()``."""
    folder = tempfile.gettempdir()
    try:
        fd, path = tempfile.mkstemp(prefix="privfair-", suffix=".arrow", dir=folder)
    except OSError as e:
        return _unmapped(folder, e, unmapped)
    os.close(fd)
    try:
        try:
            with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
                for batch in batches():
                    writer.write_batch(batch)
        except OSError as e:
            return _unmapped(folder, e, unmapped)
        with pa.memory_map(path) as source:
            return pa.ipc.open_stream(source).read_all()
    finally:
        os.unlink(path)


def _unmapped(folder: str, error: OSError, unmapped: Callable[[], pa.Table]) -> pa.Table:
    log.warning(
        "the temporary folder %s could not hold a memory-mapped copy of a table (%s): the "
        "table stays in the process's memory; set TMPDIR to a folder on a disk with room",
        folder,
        error.strerror or error,
    )
    return unmapped()
