"""The ordinary Arrow types a user's table brings, for the family's column work.

A nominal quasi-identifier or a pass-through column may come as a dictionary (a pandas
``Categorical``), a ``large_string`` or a view type (``string_view``, ``binary_view``: what
Polars and DuckDB write). Arrow's compute kernels do not all accept the last two (``take``,
``filter``, ``index_in`` and ``sort_indices`` have no view kernel in pyarrow 2x), so the family
reads every such column through its *plain* form (the values, with offsets: dictionary ->
its value type, ``string_view`` -> ``large_string``, ``binary_view`` -> ``large_binary``) and
publishes it back in the input's own type: the released table keeps the user's schema.

>>> import pyarrow as pa
>>> v = pa.chunked_array([pa.array(["b", None, "a"], pa.string_view())])
>>> plain_type(v.type), take(v, pa.array([2, 0])).type
(DataType(large_string), DataType(string_view))
>>> take(v, pa.array([2, 0])).to_pylist()
['a', 'b']
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "plain_type",
    "plain",
    "has_view",
    "take",
    "levels_as",
    "publish_order_typed",
    "in_input_order",
]

_VIEWS = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}


def plain_type(t: pa.DataType) -> pa.DataType:
    """The type the family computes on: a dictionary's value type, a view type's offset form."""
    if pa.types.is_dictionary(t):
        return plain_type(t.value_type)
    return _VIEWS.get(t, t)


def has_view(t: pa.DataType) -> bool:
    """A view type, bare or as a dictionary's values (kernels without a view form refuse it)."""
    if pa.types.is_dictionary(t):
        return has_view(t.value_type)
    return t in _VIEWS


def plain(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """``col`` in its plain type (the same values)."""
    t = plain_type(col.type)
    return col if t == col.type else col.cast(t)


def take(col: pa.ChunkedArray | pa.Array, indices: pa.Array) -> pa.ChunkedArray | pa.Array:
    """``col.take(indices)`` in ``col``'s own type, for view types too."""
    if not has_view(col.type):
        return col.take(indices)
    return plain(col).take(indices).cast(col.type)


def _dictionary(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The input's dictionary (one for every chunk)."""
    if isinstance(col, pa.Array):
        return col.dictionary
    if col.num_chunks == 0:
        return pa.array([], col.type.value_type)
    return col.unify_dictionaries().chunk(0).dictionary


def levels_as(
    levels: tuple, codes: np.ndarray, t: pa.DataType, source: pa.ChunkedArray | None = None
) -> pa.Array:
    """``[levels[c] if c >= 0 else None for c in codes]`` as an array of type ``t``.

    An *ordered* dictionary ``t`` keeps ``source``'s dictionary (its declared category order,
    which publication keeps, ``privfair.components.core.order``); any other type is built in its plain
    form and cast (an unordered dictionary is re-encoded on publication anyway).
    """
    missing = codes < 0
    if pa.types.is_dictionary(t) and t.ordered and source is not None:
        dictionary = _dictionary(source)
        at = pc.index_in(
            pa.array(list(levels), type=plain_type(t)), value_set=plain(dictionary)
        ).to_numpy(zero_copy_only=False)
        idx = at[np.where(missing, 0, codes)] if len(levels) else np.zeros(len(codes))
        indices = pa.array(idx.astype(np.int64), mask=missing).cast(t.index_type)
        return pa.DictionaryArray.from_arrays(indices, dictionary, ordered=True)
    values = pa.array(list(levels), type=plain_type(t))
    index = pa.array(codes, mask=missing) if missing.any() else pa.array(codes)
    out = values.take(index) if len(codes) else pa.array([], plain_type(t))
    return out if out.type == t else out.cast(t)


def publish_order_typed(data: pa.Table, lineage: pa.Table) -> tuple[pa.Table, pa.Table]:
    """``privfair.components.core.order.publish_in_order`` for a table with view columns: they are
    ordered by their values in their plain form, then published in their own type."""
    from privfair.components.core.order import publish_in_order

    views = [(i, f) for i, f in enumerate(data.schema) if has_view(f.type)]
    for i, f in views:
        data = data.set_column(i, f.with_type(plain_type(f.type)), plain(data.column(i)))
    data, lineage = publish_in_order(data, lineage)
    for i, f in views:
        data = data.set_column(i, f, data.column(i).cast(f.type))
    return data, lineage


def in_input_order(
    cols: dict[str, pa.Array], roles: list, names: list[str]
) -> tuple[dict[str, pa.Array], list]:
    """The published columns and their roles in the input's column order ``names`` (a reader
    expects the layout of the table they gave; the algorithm builds the QIs first). Columns
    the input lacks keep their relative order after the others. Checkers and the C11 replay
    read columns by name, never by position.

    >>> from types import SimpleNamespace as R
    >>> cols, roles = in_input_order({"b": 1, "a": 2, "z": 3}, [R(name="b"), R(name="a")], ["a", "b"])
    >>> list(cols), [r.name for r in roles]
    (['a', 'b', 'z'], ['a', 'b'])
    """
    rank = {n: i for i, n in enumerate(names)}
    keys = sorted(cols, key=lambda n: rank.get(n, len(rank)))  # stable: extras keep their order
    by_name = {r.name: r for r in roles}
    return {k: cols[k] for k in keys}, [by_name[k] for k in keys if k in by_name]
