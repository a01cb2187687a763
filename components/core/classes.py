"""The equivalence classes of a table: rows with equal cells over some columns, nested cells (a
generalised label: a list, a struct) included. The published-table checks (k-anonymity,
``privfair.components.core.checks``) and the re-identification risk
(``privfair.components.core.risk``) read them from here.

>>> import pandas as pd
>>> class_sizes(pd.DataFrame({"a": [1, 1, 2]}), ["a"])
array([2, 1])
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["hashable", "published_frame", "class_ids", "class_sizes"]


def _freeze(v):
    """A hashable form of a cell: Arrow list and struct cells (numpy arrays, lists, dicts) as
    tuples, so a table of generalised labels can be grouped."""
    if isinstance(v, dict):
        return tuple((k, _freeze(x)) for k, x in v.items())
    if isinstance(v, list | tuple | np.ndarray):
        return tuple(_freeze(x) for x in v)
    return v


def _arrow_codes(arr: pa.Array) -> np.ndarray:
    """A dense code per cell of ``arr``: equal cells (nulls included), equal codes. A struct is
    coded from its fields' codes and its validity, a list from its values' codes joined as text
    (a generalised label's value set: 0.1 s for Adult's 48,842 rows, where freezing each cell
    as a tuple took 6 s), without a Python object per row; other nested cells are frozen one by
    one.

    >>> _arrow_codes(pa.array([["a", "b"], None, ["a", "b"], [], ["b"]]))
    array([0, 1, 0, 2, 3])
    """
    if pa.types.is_struct(arr.type):
        parts = [_arrow_codes(child) for child in arr.flatten()]  # flatten: slice-aware
        parts.append(arr.is_valid().to_numpy(zero_copy_only=False).astype(np.int64))
        ids = np.zeros(len(arr), dtype=np.int64)
        for part in parts:  # hashed, not sorted: pairs of codes renumbered field by field
            ids = pd.factorize(ids * (int(part.max(initial=0)) + 1) + part, sort=False)[0]
        return ids.astype(np.int64, copy=False)
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        offsets = arr.offsets.to_numpy(zero_copy_only=False)
        values = _arrow_codes(arr.flatten())  # flatten: the values of the slice's cells only
        text = pa.array(values).cast(pa.string())  # a code's digits: no separator inside
        lists = pa.ListArray.from_arrays(
            pa.array(offsets - offsets[0], pa.int32()), text, mask=arr.is_null()
        )
        joined = pc.binary_join(lists, ",")
        return (
            pc.dictionary_encode(joined, null_encoding="encode")
            .indices.to_numpy(zero_copy_only=False)
            .astype(np.int64)
        )
    if pa.types.is_nested(arr.type):
        return pd.Series(arr.to_pylist(), dtype=object).map(_freeze).factorize()[0]
    codes = pc.dictionary_encode(arr, null_encoding="encode").indices
    return codes.to_numpy(zero_copy_only=False).astype(np.int64)


def hashable(frame: pd.DataFrame, columns) -> pd.DataFrame:
    """``frame[columns]`` with every nested cell (list, struct) in a hashable form: a frozen
    tuple in an object column, a dense code in an Arrow-backed one (``published_frame``)."""
    out = frame[list(columns)]
    nested = [
        c
        for c in columns
        if out[c].dtype == object
        and out[c].map(lambda v: isinstance(v, dict | list | np.ndarray)).any()
    ]
    arrow = [
        c
        for c in columns
        if isinstance(out[c].dtype, pd.ArrowDtype)
        and pa.types.is_nested(out[c].dtype.pyarrow_dtype)
    ]
    if nested or arrow:
        out = out.copy()
        for c in nested:
            out[c] = out[c].map(_freeze)
        for c in arrow:
            out[c] = _arrow_codes(pa.array(out[c].array))
    return out


def published_frame(table: pa.Table) -> pd.DataFrame:
    """``table`` as the pandas frame the published-table checks read: flat columns as pandas
    makes them, nested ones (a generalised label: struct, list) Arrow-backed (``pd.ArrowDtype``)
    rather than a dict or array per row (~0.65 GB per million rows of Adult's labels)."""

    def mapper(t: pa.DataType):
        return pd.ArrowDtype(t) if pa.types.is_nested(t) else None

    return table.to_pandas(types_mapper=mapper)


def _codes(frame: pd.DataFrame | pa.Table, flat: pd.DataFrame | None, c: str) -> np.ndarray:
    """Column ``c``'s dense codes (equal cells, equal codes; missing values a value of their
    own), from a pandas ``frame`` (``flat``: its ``hashable`` columns) or an Arrow table, whose
    columns are converted one at a time as ``published_frame`` converts them."""
    if flat is not None:
        return pd.factorize(flat[c], use_na_sentinel=False, sort=False)[0]
    col = frame.column(c)
    if pa.types.is_nested(col.type):
        return _arrow_codes(col.combine_chunks())
    return pd.factorize(col.to_pandas(), use_na_sentinel=False, sort=False)[0]


def class_ids(frame: pd.DataFrame | pa.Table, columns: list[str]) -> np.ndarray:
    """Each row's equivalence class over ``columns`` (missing values a value of their own), as a
    dense code in order of first appearance. The per-column codes (pandas' factorize) are
    combined one column at a time, so that one code array is held at a time, not one per column
    (~1 GB for 12 QIs of 10M rows); of an Arrow table, one column is converted at a time.

    >>> frame = pd.DataFrame({"a": [1.0, None, -0.0, 0.0], "b": ["x", None, "y", "y"]})
    >>> class_ids(frame, ["a", "b"])
    array([0, 1, 2, 2])
    >>> class_ids(pa.Table.from_pandas(frame), ["a", "b"])
    array([0, 1, 2, 2])
    """
    columns = list(dict.fromkeys(columns))  # a column named twice splits no class further
    flat = hashable(frame, columns) if isinstance(frame, pd.DataFrame) else None
    ids = np.zeros(len(frame) if flat is not None else frame.num_rows, dtype=np.int64)
    n_ids = 1
    for c in columns:
        codes = _codes(frame, flat, c)
        n_codes = int(codes.max()) + 1 if len(codes) else 1
        if n_ids * n_codes >= 2**62:  # renumber before the product overflows
            ids, first = pd.factorize(ids, sort=False)
            n_ids = len(first)
        ids = ids * n_codes + codes
        n_ids *= n_codes
        del codes
    return pd.factorize(ids, sort=False)[0].astype(np.int64, copy=False)


def class_sizes(frame: pd.DataFrame | pa.Table, columns: list[str]) -> np.ndarray:
    """The size of each equivalence class of ``frame`` over ``columns`` (missing values a value
    of their own), in order of first appearance: ``groupby(columns, dropna=False, sort=False)
    .size()`` (``class_ids`` counted).

    >>> frame = pd.DataFrame({"a": [1.0, None, -0.0, 0.0], "b": ["x", None, "y", "y"]})
    >>> class_sizes(frame, ["a", "b"])
    array([1, 1, 2])
    """
    return np.bincount(class_ids(frame, columns)).astype(np.int64)
