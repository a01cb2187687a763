"""The order a row-level release is published in: a function of its published values only.

Row order is an output (DESIGN, "The disclosure boundary"). A table published in the order an
algorithm produced it tells whoever can replay the algorithm (MDAV groups in creation order,
members by distance to the seed) or knows the input order (a row published at its input
position) which row is whose, whatever the rows hold. So a row-level family publishes its table
sorted by its own values (``published_order``: a stable lexicographic sort over every column)
and permutes its ``lineage`` sidecar, which keeps the map to the input rows, the same way
(``publish_in_order``). Rows equal in every published column are interchangeable: any order of
them gives the same bytes, so the release says nothing of the input order nor of the
algorithm's internal order, and a re-run gives the same bytes.

>>> import pyarrow as pa
>>> data = pa.table({"x": [2.0, 1.0, 2.0], "y": ["b", "a", "a"]})
>>> lineage = pa.table({"row_id": [7, 3, 5], "group": [1, 0, 1]})
>>> data, lineage = publish_in_order(data, lineage)
>>> data.to_pydict(), lineage.column("row_id").to_pylist()
({'x': [1.0, 2.0, 2.0], 'y': ['a', 'a', 'b']}, [3, 5, 7])
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core.memory import CHUNK_ROWS, mapped_take

__all__ = ["canonical_chunks", "published_form", "published_order", "publish_in_order"]

_SIGNED = {2: np.int16, 4: np.int32, 8: np.int64}


def _array(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous array (a chunked column combined; a single chunk as it is)."""
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return col.chunk(0)
        return col.combine_chunks() if col.num_chunks else pa.array([], col.type)
    return col


def _float_key(arr: pa.Array) -> pa.Array:
    """The column itself when Arrow's float order is exact on it (no NaN, no -0.0: equal
    values are equal bits), else the bits of each float as a signed integer whose order is
    the floats' order: negative values have every bit but the sign flipped, so -0.0 sorts just
    before +0.0 and every bit pattern (NaN payloads too) has a key of its own. Nulls stay
    null."""
    x = arr.to_numpy(zero_copy_only=False)  # a null reads as NaN
    odd = np.isnan(x) | (np.signbit(x) & (x == 0))
    if arr.null_count:
        odd &= np.asarray(arr.is_valid())
    if not odd.any():
        return arr
    width = arr.type.bit_width // 8
    bits = arr.fill_null(0).to_numpy(zero_copy_only=False).view(_SIGNED[width])
    top = np.array(np.iinfo(_SIGNED[width]).max, dtype=_SIGNED[width])
    key = bits ^ ((bits >> (8 * width - 1)) & top)
    mask = np.asarray(arr.is_null()) if arr.null_count else None
    return pa.array(key, mask=mask)


def _dense_rank(keys: list[pa.Array]) -> np.ndarray:
    """Rank (0, 1, ...) of each row of ``keys`` among their distinct rows, in the order of
    ``_sort``: equal rows share a rank. Every key is exact (``_keys``), so equality is
    ``==`` and two nulls are equal."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if len(keys) == 1:
        # one key: sort its distinct values only (list elements repeat a small domain)
        values = pc.unique(keys[0]).drop_null()
        values = values.take(pc.sort_indices(values))
        rank = pc.index_in(keys[0], value_set=values).fill_null(len(values))
        return rank.to_numpy(zero_copy_only=False).astype(np.int64)
    order = _sort(keys)
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for k in keys:
        s = k.take(pa.array(order))
        a, b = s.slice(1), s.slice(0, n - 1)
        differ = pc.fill_null(pc.not_equal(a, b), False)
        one_null = pc.xor(pc.is_null(a), pc.is_null(b))
        new[1:] |= np.asarray(differ) | np.asarray(one_null)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.cumsum(new) - 1
    return rank


def _list_key(arr: pa.Array) -> pa.Array:
    """A string per list that orders lists lexicographically by their elements (a prefix
    first) and is equal only for equal lists: each element's dense rank among all elements,
    zero-padded to one width, concatenated. A null list stays null; an empty list is ''."""
    flat = arr.flatten()
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False)
    rank = _dense_rank(_keys(flat)) if len(flat) else np.zeros(0, dtype=np.int64)
    width = len(str(int(rank.max()))) if len(rank) else 1
    digits = pc.utf8_lpad(pa.array(rank).cast(pa.string()), width=width, padding="0")
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int64())
    mask = arr.is_null() if arr.null_count else None
    lists = pa.LargeListArray.from_arrays(offsets, digits, mask=mask)
    return pc.binary_join(lists, "")


def _keys(col: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    """The sort keys of one column, each an exact Arrow-sortable array (equal keys only for
    equal values): a dictionary column by its values, a struct by its validity then its fields,
    a list by ``_list_key``, a float by ``_float_key``; a null-typed column has none."""
    arr = _array(col)
    t = arr.type
    if pa.types.is_null(t):
        return []
    if isinstance(t, pa.ExtensionType):
        return _keys(arr.storage)
    if pa.types.is_dictionary(t):
        return _keys(arr.cast(t.value_type))
    if pa.types.is_struct(t):
        out = [arr.is_null()] if arr.null_count else []
        for child in arr.flatten():
            out += _keys(child)
        return out
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [_list_key(arr)]
    if pa.types.is_floating(t):
        return [_float_key(arr)]
    if pa.types.is_map(t) or pa.types.is_union(t):
        raise TypeError(f"no canonical order for a column of type {t}")
    return [arr]


def _sort(keys: list[pa.Array]) -> np.ndarray:
    """Stable ascending sort over ``keys`` (first key first), nulls last (Arrow's default
    placement on every version privfair supports)."""
    table = pa.table({f"k{i}": k for i, k in enumerate(keys)})
    order = pc.sort_indices(table, sort_keys=[(f"k{i}", "ascending") for i in range(len(keys))])
    return order.to_numpy().astype(np.int64, copy=False)


def published_order(table: pa.Table) -> np.ndarray:
    """The canonical publication order of ``table``: row positions sorted by its values.

    Parameters
    ----------
    table : pyarrow.Table
        A release as it is published.

    Returns
    -------
    numpy.ndarray of int64
        ``table.take(order)`` is ``table`` in canonical order: a stable lexicographic sort over
        every column, in column order. A dictionary column sorts by its values, a struct by its
        fields (null structs last), a list lexicographically by its elements (a prefix before
        its extensions), a float by its bits (-0.0 before +0.0; NaNs after infinity, each
        payload apart); nulls last. Equal keys mean equal values, so only rows equal in every
        column tie, and they keep their relative order (stable).

    Raises
    ------
    TypeError
        A map or union column (no canonical order defined).

    Notes
    -----
    Vectorised (Arrow's ``sort_indices``; list columns are ranked element-wise and keyed by a
    string of fixed-width ranks): no per-row Python work, so it serves releases of millions of
    rows.

    Examples
    --------
    >>> import pyarrow as pa
    >>> t = pa.table({
    ...     "band": pa.array([{"lo": 3, "hi": 5}, {"lo": 1, "hi": 9}, {"lo": 3, "hi": 4}]),
    ...     "purpose": pa.array([["car", "tv"], ["car"], ["car", "tv"]]),
    ...     "y": pa.array(["b", "a", "a"]).dictionary_encode()})
    >>> published_order(t).tolist()
    [1, 2, 0]
    >>> published_order(t.take([1, 2, 0])).tolist()
    [0, 1, 2]
    """
    n = table.num_rows
    keys = [k for name in table.column_names for k in _keys(table.column(name))]
    if n <= 1 or not keys:
        return np.arange(n, dtype=np.int64)
    return _sort(keys)


def _canonical_dictionaries(table: pa.Table) -> pa.Table:
    """Every unordered dictionary column re-encoded in order of first appearance: its
    dictionary then depends on the published values alone (not on the input's dictionary, which
    may hold values of unpublished rows, nor on the algorithm's order). An ordered dictionary
    (a declared category order) is kept."""
    for i, f in enumerate(table.schema):
        if pa.types.is_dictionary(f.type) and not f.type.ordered:
            col = _array(table.column(i)).cast(f.type.value_type).dictionary_encode()
            table = table.set_column(i, f, col.cast(f.type))
    return table


def publish_in_order(data: pa.Table, lineage: pa.Table) -> tuple[pa.Table, pa.Table]:
    """``data`` in its canonical order (``published_order``) and ``lineage``, one row per row of
    ``data``, permuted the same way, so that lineage row i still describes published row i.

    Parameters
    ----------
    data : pyarrow.Table
        The public output of a row-level release.
    lineage : pyarrow.Table
        Its sidecar (``row_id``...), aligned with ``data``.

    Returns
    -------
    (pyarrow.Table, pyarrow.Table)
        Both in ``canonical_chunks`` (bytes independent of how they were assembled); the
        unordered dictionary columns of ``data`` re-encoded in order of first appearance. The
        schemas (field metadata, roles) are kept.

    Raises
    ------
    ValueError
        ``lineage`` does not have one row per row of ``data``.

    Examples
    --------
    >>> import pyarrow as pa
    >>> data, lineage = publish_in_order(pa.table({"x": [3, 1, 2]}), pa.table({"row_id": [0, 1, 2]}))
    >>> data.column("x").to_pylist(), lineage.column("row_id").to_pylist()
    ([1, 2, 3], [1, 2, 0])
    """
    if lineage.num_rows != data.num_rows:
        raise ValueError(
            f"the lineage has {lineage.num_rows} rows for {data.num_rows} published rows"
        )
    order = published_order(data)
    if not np.array_equal(order, np.arange(data.num_rows)):
        # a large release is reordered into a map a piece at a time, not copied whole
        data, lineage = mapped_take(data, order), mapped_take(lineage, order)
    return published_form(data, lineage)


def published_form(data: pa.Table, lineage: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The last step of ``publish_in_order``, for ``data`` (and ``lineage``) already in
    canonical order: its unordered dictionaries re-encoded in order of first appearance, both
    in ``canonical_chunks``. For a component that materialises its columns in an order it
    computed (``published_order`` of stand-in columns that sort as its published ones do)
    rather than sorting the finished table."""
    return canonical_chunks(_canonical_dictionaries(data)), canonical_chunks(lineage)


def canonical_chunks(table: pa.Table, rows: int = CHUNK_ROWS) -> pa.Table:
    """``table`` with every column in chunks of ``rows`` rows (the last one shorter; one chunk
    for a shorter table), whatever chunks it came in.

    ``rows`` is Parquet's default row group, so each row group is written from one chunk, as
    from a table in one chunk: the bytes are the same. A column in one chunk, or already so
    cut, is cut without a copy (slices of it), so a memory-mapped column stays mapped; only a
    column cut elsewhere is combined first.

    >>> t = canonical_chunks(pa.table({"x": pa.chunked_array([[1], [2, 3, 4], [5]])}), rows=2)
    >>> [len(c) for c in t.column("x").chunks]
    [2, 2, 1]
    """
    n = table.num_rows
    starts = range(0, n, rows)
    want = [min(rows, n - a) for a in starts]
    columns = []
    for col in table.columns:
        if [len(c) for c in col.chunks] != want:
            whole = _array(col)
            col = pa.chunked_array([whole.slice(a, rows) for a in starts] or [whole], col.type)
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=table.schema)
