"""Tables read through counts alone: a ``Frame`` gives its schema, its row and null counts, a
lazy ``map_batches`` and per-column sums, and never a column's values.

The count-based families (MST, PreFair, AIM, ATR's cells) take a frame as their input and
read it only through the current engine's ``group_counts``, so one code path serves both
engines: a ``SparkFrame`` (``privfair.components.core.engine``) keeps its rows on the Spark
executors, a ``TableFrame`` keeps them in an Arrow table of this process (the local ingest's
table is memory-mapped from disk, so reading its batches costs file-backed pages, not private
memory). ``TableFrame.map_batches`` only records the function: it runs when the frame is
counted or summed, on one batch of at most ``BATCH_ROWS`` rows at a time, so what a count
holds at once is a batch and the counts, whatever the table's row count.

>>> import pyarrow as pa
>>> f = TableFrame(pa.table({"a": [1, None, 1]}), batch_rows=2)
>>> f.num_rows, f.null_counts(), [b.num_rows for b in f.batches()]
(3, {'a': 1}, [2, 1])
>>> f.map_batches(_doubled, pa.schema([("a", pa.int64())])).sums(["a"])
{'a': 4}
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from privfair.schemas.errors import PrivfairError

__all__ = ["BATCH_ROWS", "Frame", "RowsNotRead", "TableFrame", "as_frame", "batch_counts"]

BatchFn = Callable[[pa.Table], pa.Table]

BATCH_ROWS = 1 << 16
"""The most rows a ``TableFrame`` hands a batch function at once (65,536): a batch's codes
or projection cost a few MB, whatever the table's row count."""


def _doubled(t: pa.Table) -> pa.Table:
    return pa.table({"a": pc.multiply(t.column("a"), 2)})


class RowsNotRead(PrivfairError):
    """A step asked a frame for a column's values: a count-based step reads its input through
    the engine's counts alone (a bug of the step, named here, never a silent read)."""


class Frame:
    """What every frame offers: ``schema`` (the Arrow schema privfair works in, roles in the
    field metadata), ``column_names``, ``num_columns``; ``num_rows`` and ``null_counts()``;
    ``with_schema`` (a subset of the columns), ``map_batches(fn, schema)`` (``fn`` on every
    Arrow batch, each in ``schema``'s plain types without roles, giving a frame of
    ``schema``, the same rows), ``sums(names)`` (each column's sum, 0 for no value),
    ``persist()`` / ``unpersist()`` (keep a mapped frame for the counts that follow). Asking
    for a column's values (``column``, ``frame[name]``) raises ``RowsNotRead``."""

    schema: pa.Schema

    @property
    def column_names(self) -> list[str]:
        return list(self.schema.names)

    @property
    def num_columns(self) -> int:
        return len(self.schema)

    @property
    def num_rows(self) -> int:
        raise NotImplementedError

    def null_counts(self) -> dict[str, int]:
        raise NotImplementedError

    def with_schema(self, schema: pa.Schema) -> Frame:
        raise NotImplementedError

    def map_batches(self, fn: BatchFn, schema: pa.Schema) -> Frame:
        raise NotImplementedError

    def sums(self, names: Sequence[str], what: str = "summing columns") -> dict[str, int]:
        raise NotImplementedError

    def min_max(self, names: Sequence[str]) -> dict[str, tuple]:
        """Each column's (minimum, maximum) over its non-null values ((None, None) for a
        column with none): a numeric column's range, not its values."""
        raise NotImplementedError

    def persist(self) -> Frame:
        return self

    def unpersist(self) -> None:
        """Drop what ``persist`` kept."""

    def column(self, name: str):
        raise RowsNotRead(
            f"column '{name}': this step reads its input through the engine's counts alone "
            "(group_counts), never a column's values"
        )

    __getitem__ = column


def _plain(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.remove_metadata() for f in schema])


class TableFrame(Frame):
    """A frame over an Arrow table of this process, read one batch at a time.

    Parameters
    ----------
    table
        The rows (zero-copy: batches are slices of its chunks, at most ``batch_rows`` rows).
    batch_rows
        The most rows of a batch (``BATCH_ROWS``).

    ``map_batches`` is lazy: the frame keeps the chain of functions and applies it to each
    batch as ``batches()`` yields it (a batch of the table in its plain types, without roles,
    as on Spark's executors; each result cast to its declared schema). ``num_rows`` is the
    table's (every function keeps the rows), ``null_counts`` are the table's own column
    counts before any function (no copy) and summed per batch after one.

    >>> t = pa.table({"a": [1, 2, 3]})
    >>> try:
    ...     TableFrame(t).column("a")
    ... except RowsNotRead as e:
    ...     print(str(e)[:34])
    column 'a': this step reads its in
    """

    def __init__(self, table: pa.Table, batch_rows: int = BATCH_ROWS) -> None:
        if batch_rows < 1:
            raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
        self.table = table
        self.schema = table.schema
        self.batch_rows = int(batch_rows)
        self._steps: tuple[tuple[BatchFn, pa.Schema], ...] = ()

    def _chained(self, steps, schema: pa.Schema) -> TableFrame:
        out = TableFrame(self.table, self.batch_rows)
        out._steps, out.schema = steps, schema
        return out

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    def null_counts(self) -> dict[str, int]:
        if not self._steps:
            return {n: self.table.column(n).null_count for n in self.column_names}
        out = dict.fromkeys(self.column_names, 0)
        for b in self.batches():
            for n in out:
                out[n] += b.column(n).null_count
        return out

    def with_schema(self, schema: pa.Schema) -> TableFrame:
        """The frame of ``schema``'s columns (a subset, in its order), with that schema."""
        if not self._steps:
            out = TableFrame(self.table.select(list(schema.names)), self.batch_rows)
            out.schema = schema
            return out
        names = list(schema.names)
        return self._chained((*self._steps, (lambda t: t.select(names), schema)), schema)

    def map_batches(self, fn: BatchFn, schema: pa.Schema) -> TableFrame:
        """``fn`` on every batch, when the frame is read (nothing runs here)."""
        return self._chained((*self._steps, (fn, schema)), schema)

    def batches(self) -> Iterator[pa.Table]:
        """The frame's rows, one table of 1 to ``batch_rows`` rows at a time, in order."""
        given = _plain(self.table.schema)
        for b in self.table.to_batches(max_chunksize=self.batch_rows):
            if not b.num_rows:  # an empty chunk (a concatenation's) holds nothing to count
                continue
            t = pa.Table.from_batches([b]).cast(given)
            for fn, schema in self._steps:
                t = fn(t).cast(_plain(schema))
            yield t

    def sums(self, names: Sequence[str], what: str = "summing columns") -> dict[str, int]:
        """Each column's sum over all batches (0 for a column with no value; ``what`` names
        the step on a cluster, nothing here)."""
        out = dict.fromkeys(names, 0)
        for b in self.batches():
            for n in names:
                out[n] += int(pc.sum(b.column(n)).as_py() or 0)
        return out

    def min_max(self, names: Sequence[str]) -> dict[str, tuple]:
        """Each column's (minimum, maximum) over all batches (Arrow's ``min_max``)."""
        lo: dict[str, list] = {n: [] for n in names}
        hi: dict[str, list] = {n: [] for n in names}
        for b in self.batches():
            for n in names:
                r = pc.min_max(b.column(n))
                if r["min"].is_valid:
                    lo[n].append(r["min"].as_py())
                    hi[n].append(r["max"].as_py())
        return {n: (min(lo[n]), max(hi[n])) if lo[n] else (None, None) for n in names}


def as_frame(table: pa.Table | Frame) -> Frame:
    """``table`` as a frame: a frame itself, an Arrow table a ``TableFrame`` over it."""
    return table if isinstance(table, Frame) else TableFrame(table)


def batch_counts(
    frame: TableFrame, keys: Sequence[Sequence[str]], hold: int = 4 * BATCH_ROWS
) -> list[pa.Table]:
    """For each tuple of column names, the number of rows of each combination of their values
    (a null is a value), read in one pass over ``frame``'s batches.

    Each batch is counted by Arrow's ``group_by(keys).aggregate([([], "count_all")])``, and
    the per-batch counts summed by a second ``group_by(keys)`` whenever they hold more than
    ``hold`` rows and at the end: ``count(v) = sum over batches b of count_b(v)``, so the
    result has the whole table's ``group_by`` rows (a null, a NaN each one group, as there),
    in no set order (neither is Arrow's own for several keys: the consumers sort them), and
    its schema (the keys' types, then ``count`` int64). What it holds at once is one batch
    and at most ``hold`` rows of counts per key set above the distinct combinations.

    >>> f = TableFrame(pa.table({"a": [1, None, 2, None, 1]}), batch_rows=2)
    >>> batch_counts(f, [("a",)])[0].to_pydict()
    {'a': [1, None, 2], 'count': [2, 2, 1]}
    """
    keys = [list(k) for k in keys]
    parts: list[list[pa.Table]] = [[] for _ in keys]
    held = [0] * len(keys)
    seen = False
    for b in frame.batches():
        seen = True
        for k, cols in enumerate(keys):
            got = _count_all(b.select(cols), cols)
            parts[k].append(got)
            held[k] += got.num_rows
            if held[k] > hold:
                parts[k] = [_summed(parts[k], cols)]
                held[k] = parts[k][0].num_rows
    if not seen:  # no batch at all: the empty table's own (empty) counts
        empty = _plain(frame.schema).empty_table()
        return [_count_all(empty.select(cols), cols) for cols in keys]
    return [_summed(p, cols) for p, cols in zip(parts, keys, strict=True)]


def _count_all(table: pa.Table, cols: list[str]) -> pa.Table:
    g = table.group_by(cols, use_threads=False).aggregate([([], "count_all")])
    return g.rename_columns([*cols, "count"])


def _summed(parts: list[pa.Table], cols: list[str]) -> pa.Table:
    if len(parts) == 1:
        return parts[0]
    t = pa.concat_tables(parts)
    g = t.group_by(cols, use_threads=False).aggregate([("count", "sum")])
    return g.rename_columns([*cols, "count"])
