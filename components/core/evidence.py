"""The audit frame: one row per INPUT row, joining the input, a published table and the lineage
sidecar that maps each published row to the input row it comes from.

Only the input, the published table and the lineage are read: nothing the algorithm reported
about itself. Columns:

    __row_id      input row position              __retained   is the row published?
    __out_count   published rows claiming it      __<field>    each other lineage field
                                                               (``group``, ``rank``...; -1 if dropped)
    __in_col__<c>, __out_col__<c>   the audited columns' raw values (None where dropped)
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from privfair.schemas.errors import InputError

__all__ = ["lineage_audit", "published_positions"]


def published_positions(n_in: int, lineage: pa.Table, n_published: int):
    """(out_count per input row, retained mask, position of the first published row of each
    retained input row), checking that the lineage fits the tables."""
    if lineage.num_rows != n_published:
        raise InputError(
            "row_id",
            "the lineage sidecar must have one row per published row",
            f"{lineage.num_rows} lineage rows, {n_published} published rows",
        )
    if "row_id" not in lineage.column_names:
        raise InputError("row_id", "the lineage sidecar has no row_id column")
    row_id = lineage.column("row_id").to_numpy(zero_copy_only=False).astype(np.int64)
    if len(row_id) and (row_id.min() < 0 or row_id.max() >= n_in):
        raise InputError(
            "row_id", "lineage row ids must be input row positions", f"range [0, {n_in})"
        )
    out_count = np.bincount(row_id, minlength=n_in).astype(np.int64)
    first = np.full(n_in, -1, dtype=np.int64)
    first[row_id[::-1]] = np.arange(len(row_id))[::-1]
    retained = first >= 0
    return out_count, retained, first[retained]


def _objects(col: pa.ChunkedArray) -> np.ndarray:
    """The Python values of ``col`` (``to_pylist``'s, None for a null) in an object array. A
    string column shares one object per distinct value and a null-free number or boolean
    column is boxed in C: a Python object built per row costs ~1 s and ~0.5 GB per 10M rows."""
    t = col.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        # one object per distinct value: pandas 3 reads strings as its ``str`` dtype, whose
        # ``to_numpy(dtype=object)`` builds an object per row
        codes = pc.dictionary_encode(col.combine_chunks()) if len(col) else None
        if codes is None:
            return np.empty(0, dtype=object)
        values = np.array([*codes.dictionary.to_pylist(), None], dtype=object)
        idx = codes.indices.fill_null(len(codes.dictionary)).to_numpy(zero_copy_only=False)
        return values[idx]
    if col.null_count == 0 and (
        pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
    ):
        return col.to_numpy().astype(object)
    return np.asarray(col.to_pylist(), dtype=object)


def _audited(col: pa.ChunkedArray, at: np.ndarray | None = None) -> np.ndarray | pd.Series:
    """An audited column as the frame holds it: ``col``'s values at positions ``at`` (-1: no
    value, None), or all of them. Strings go from Arrow to pandas' ``str`` column as they are,
    the column ``pd.DataFrame`` makes of their Python objects, without building an object per
    row (~3.5 GB transient for four string columns of 10M rows); other types as ``_objects``."""
    t = col.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if at is not None:
            col = col.take(pa.array(at, mask=at < 0))
        return col.to_pandas() if col.null_count < len(col) else _objects(col)
    values = _objects(col)
    if at is None:
        return values
    full = np.full(len(at), None, dtype=object)
    full[at >= 0] = values[at[at >= 0]]
    return full


def lineage_audit(
    input_table: pa.Table,
    published: pa.Table,
    lineage: pa.Table,
    columns: Iterable[str],
    positions: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> pd.DataFrame:
    """The audit frame (module docstring) with ``__in_col__`` / ``__out_col__`` for ``columns``
    (an input column absent from the published table gets only ``__in_col__``); ``positions``:
    ``published_positions`` of these tables, when the caller has it already."""
    n_in = input_table.num_rows
    if positions is None:
        positions = published_positions(n_in, lineage, published.num_rows)
    out_count, retained, pos = positions
    cols: dict[str, np.ndarray] = {
        "__row_id": np.arange(n_in, dtype=np.int64),
        "__retained": retained,
        "__out_count": out_count,
    }
    for name in lineage.column_names:
        if name == "row_id":
            continue
        values = lineage.column(name).to_numpy(zero_copy_only=False)
        if values.dtype == bool:
            arr = np.zeros(n_in, dtype=bool)
        elif np.issubdtype(values.dtype, np.integer):
            arr = np.full(n_in, -1, dtype=np.int64)
        else:
            arr = np.full(n_in, None, dtype=object)
        arr[retained] = values[pos]
        cols[f"__{name}"] = arr
    at = np.full(n_in, -1, dtype=np.int64)
    at[retained] = pos
    for c in columns:
        if c in input_table.column_names:
            cols[f"__in_col__{c}"] = _audited(input_table.column(c))
        if c in published.column_names:
            cols[f"__out_col__{c}"] = _audited(published.column(c), at)
    # copy=False: a column per array, not one block per dtype copied from them (for 10M rows
    # the copy briefly holds every column twice)
    return pd.DataFrame(cols, copy=False)
