"""The exact contingency counts MST, PreFair and AIM measure, counted by the current execution
engine (``privfair.components.core.engine.current_engine``): in this process (Arrow's hash
aggregation) or on Spark (a distributed ``groupBy().count()``).

The records are the ``rows x d`` public-domain codes (``domain.encode_table``), as Arrow
integer columns, so a returned combination of values *is*
a cell index. The engine answers sparsely (only the combinations present); ``Marginals`` keeps
those answers and turns them into the dense count vectors the mechanisms add noise to, over
the declared domain or, through a ``Compression``'s code map, over the compressed codes (the
counts of the merged values summed). Each request counts every clique it lacks in one engine
call (on Spark each call is one job), so a phase asks for all its marginals at once.

>>> codes = np.array([[0, 1], [0, 1], [2, 0]])
>>> m = Marginals(codes, [3, 2])
>>> m.count([(0,), (1,), (0, 1)])
>>> m.dense((0,)).tolist(), m.dense((0, 1)).tolist(), m.calls
([2, 0, 1], [0, 2, 0, 0, 1, 0], 1)
>>> m.dense((0, 1), maps=[np.array([0, 1, 1]), np.array([0, 1])]).tolist()
[0, 2, 1, 0]

A run's input is a frame (``privfair.components.core.frames``): an Arrow table's
``TableFrame``, or a ``SparkFrame`` whose rows stay on a Spark cluster (``privfair.io.ingest``).
It is encoded where its rows are (``encode_frame``: the same ``ColumnDomain.encode`` on every
Arrow batch, in this process or on the executors) and its code frame counted there:
``Marginals`` takes that frame in place of the matrix, so no process ever holds the ``rows x
d`` codes, and the driver of a Spark run never holds a record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa

from privfair.components.core.engine import current_engine
from privfair.components.core.frames import Frame

__all__ = ["Marginals", "SparseCounts", "codes_table", "column_name", "encode_frame"]

Clique = tuple[int, ...]


def column_name(i: int) -> str:
    """The Arrow column holding attribute ``i``'s codes (positional: no name of the input
    reaches the engine, so none needs quoting)."""
    return f"c{i}"


def codes_table(codes: np.ndarray) -> pa.Table:
    """The code matrix as an Arrow table, one int64 column per attribute (``column_name``).

    Parameters
    ----------
    codes
        ``rows x d`` integer codes, every one within its attribute's domain.

    Returns
    -------
    pa.Table
        ``d`` columns ``c0 .. c{d-1}``.
    """
    codes = np.asarray(codes, dtype=np.int64)
    return pa.table({column_name(i): codes[:, i] for i in range(codes.shape[1])})


@dataclass(frozen=True)
class SparseCounts:
    """The engine's answer for one clique: ``cells[k][r]`` is the code of the clique's k-th
    attribute in the r-th combination present, ``count[r]`` its number of rows (every
    combination once)."""

    clique: Clique
    cells: tuple[np.ndarray, ...]
    count: np.ndarray


class Marginals:
    """The exact counts of attribute cliques of one code matrix, counted through the current
    engine and kept.

    Parameters
    ----------
    codes
        ``rows x d`` integer codes, or a frame of them (``encode_frame``: the compositor's
        records), counted batch by batch or where its rows are.
    sizes
        The declared domain size of every attribute.

    Attributes
    ----------
    table : pa.Table or Frame
        The codes as an Arrow table (``codes_table``, built once), or the frame.
    calls : int
        How many engine calls the counts took.
    """

    def __init__(self, codes: np.ndarray, sizes: Sequence[int]):
        self.sizes = [int(s) for s in sizes]
        self.table = codes if isinstance(codes, Frame) else codes_table(codes)
        if self.table.num_columns != len(self.sizes):
            raise ValueError(f"{self.table.num_columns} code columns for {len(sizes)} sizes")
        self.calls = 0
        self._sparse: dict[Clique, SparseCounts] = {}

    def count(self, cliques: Sequence[Sequence[int]]) -> None:
        """Count every clique of ``cliques`` not counted yet, all in one engine call.

        Parameters
        ----------
        cliques
            Tuples of attribute indices (a 1-way marginal ``(i,)``, a 2-way one ``(i, j)``).
        """
        missing = [c for c in dict.fromkeys(tuple(c) for c in cliques) if c not in self._sparse]
        if not missing:
            return
        keys = [tuple(column_name(i) for i in c) for c in missing]
        answers = current_engine().group_counts(self.table, keys)
        self.calls += 1
        for clique, cols, got in zip(missing, keys, answers, strict=True):
            self._sparse[clique] = SparseCounts(
                clique,
                tuple(_ints(got.column(c)) for c in cols),
                _ints(got.column("count")),
            )

    def sparse(self, clique: Sequence[int]) -> SparseCounts:
        """The engine's answer for ``clique`` (counted now if it was not yet)."""
        clique = tuple(clique)
        self.count([clique])
        return self._sparse[clique]

    def dense(self, clique: Sequence[int], maps: Sequence[np.ndarray] | None = None) -> np.ndarray:
        """The count vector of ``clique``, cells in C order (the first attribute's code major).

        Parameters
        ----------
        clique
            The attribute indices.
        maps
            Optional, one per attribute of the table: ``maps[i][v]`` the code that declared
            value ``v`` of attribute ``i`` is counted under (a ``Compression``'s ``codes``);
            the cells then range over those codes and merged values' counts are summed.

        Returns
        -------
        np.ndarray
            int64 counts of length ``prod(sizes)`` over the clique's (mapped) domains, summing
            to the row count.
        """
        s = self.sparse(clique)
        index = np.zeros(len(s.count), dtype=np.int64)
        cells = 1
        for i, v in zip(s.clique, s.cells, strict=True):
            if maps is None:
                code, size = v, self.sizes[i]
            else:
                m = np.asarray(maps[i], dtype=np.int64)
                code, size = m[v], int(m.max()) + 1 if len(m) else 0
            index = index * size + code
            cells *= size
        out = np.zeros(cells, dtype=np.int64)
        np.add.at(out, index, s.count)
        return out


def _ints(column: pa.ChunkedArray) -> np.ndarray:
    return column.to_numpy().astype(np.int64, copy=False)


def _encode_batch(table: pa.Table, domains: Mapping, clamp: bool) -> pa.Table:
    """One batch's codes (``c<i>``, as ``domain.encode_table`` gives them) and, per column, a
    flag of each value outside its declared domain (``b<i>``, before any clamping)."""
    cols, flags = {}, {}
    for i, d in enumerate(domains.values()):
        col = table.column(d.name)
        strict = d.encode(col)
        bad = strict < 0
        codes = d.encode(col, clamp=True) if clamp and d.edges is not None and bad.any() else strict
        cols[column_name(i)] = pa.array(codes, pa.int64())
        flags[f"b{i}"] = pa.array(bad.astype(np.int8), pa.int8())
    return pa.table(cols | flags)


def encode_frame(
    frame: Frame, domains: Mapping, clamp: bool = False
) -> tuple[Frame, dict[str, int]]:
    """``domain.encode_table`` of a frame (an Arrow table's ``TableFrame``, or a ``SparkFrame``
    whose rows stay on the cluster): the code frame (``c0 .. c{d-1}``, int64, kept for the
    counts that follow) and the clamped counts, or the same ``InputError`` for a value outside
    its declared domain (the column and how many rows, from one sum of the batches' flags).

    The encoding is ``ColumnDomain.encode`` itself, run on every Arrow batch where the rows
    are, so every code is the one ``encode_table`` gives; a column whose type cannot be read in
    its declared levels' type is refused here first (on the schema, before any row is read).
    A ``TableFrame``'s encoding is lazy: it runs batch by batch on every pass that reads the
    codes (the sum of the flags here, then one per engine call of the counts), so no code
    matrix of the rows is ever held; a ``SparkFrame``'s is persisted on the executors.
    """
    from privfair.components.synthesis.domain import encode_table

    encode_table(frame.schema.empty_table(), domains, clamp)  # type errors, named as locally
    d = len(domains)
    flagged = pa.schema(
        [(column_name(i), pa.int64()) for i in range(d)] + [(f"b{i}", pa.int8()) for i in range(d)]
    )
    mapped = frame.map_batches(partial(_encode_batch, domains=dict(domains), clamp=clamp), flagged)
    mapped = mapped.persist()  # every count that follows reads these codes
    bad = mapped.sums([f"b{i}" for i in range(d)], "encoding the input")
    clamped = {}
    for i, (name, dom) in enumerate(domains.items()):
        n = bad[f"b{i}"]
        if not n:
            continue
        if clamp and dom.edges is not None:
            clamped[name] = n
            continue
        mapped.unpersist()
        raise _outside(name, dom, n)
    codes = mapped.with_schema(pa.schema([(column_name(i), pa.int64()) for i in range(d)]))
    return codes, clamped


def _outside(name: str, d, n: int):
    """The ``InputError`` of ``domain.encode_table`` for ``n`` values of ``name`` outside ``d``."""
    from privfair.components.synthesis.domain import _num
    from privfair.schemas.errors import InputError

    if d.edges is not None:
        hint = f"bins [{_num(d.edges[0])}, {_num(d.edges[-1])})"
        fix = "widen the bins or set out_of_domain: clamp"
    else:
        hint = f"{len(d.levels)} levels"
        fix = "add the value to the column's declared domain"
    return InputError(
        name,
        "a value lies outside the declared public domain",
        f"{n} rows; declared {hint}; {fix}",
    )
