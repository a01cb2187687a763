"""The exact contingency counts MST and PreFair measure, counted by the current execution engine
(``privfair.components.core.engine.current_engine``): in this process (Arrow's hash aggregation) or on
Spark (a distributed ``groupBy().count()``).

The records are the ``rows x d`` matrix of public-domain codes (``domain.encode_table``); it
becomes one Arrow table of integer columns per run, so a returned combination of values *is*
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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from privfair.components.core.engine import current_engine

__all__ = ["Marginals", "SparseCounts", "codes_table", "column_name"]

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
        ``rows x d`` integer codes (the compositor's records).
    sizes
        The declared domain size of every attribute.

    Attributes
    ----------
    table : pa.Table
        The codes as an Arrow table (``codes_table``), built once.
    calls : int
        How many engine calls the counts took.
    """

    def __init__(self, codes: np.ndarray, sizes: Sequence[int]):
        self.sizes = [int(s) for s in sizes]
        self.table = codes_table(codes)
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
