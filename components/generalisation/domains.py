"""PND attributes as integer ranks over their active domains, and generalised labels as Arrow.

Both algorithms work on ranks, as the paper's implementation does (a column store of integer
indexes that respect each domain's order, spec section 2.6):

- the *active domain* of an attribute is the set of its values present in the input
  (spec AMB-3); its order is the natural one for a numeric column, the declared ``domain`` of an
  ordinal (or nominal) column, and otherwise the lexicographic order of the values (AMB-4: this
  choice changes results, so it is reported as a warning);
- a missing value of a nominal attribute is a value of its own, ordered last (AMB-21); a
  numeric or ordinal attribute must be complete (an interval cannot hold a missing value);
- a *label* is a rank interval ``[lo, hi]``: it denotes every active-domain value between the
  two, observed in its class or not (spec 2.4);
- a dictionary column (a pandas Categorical) is read through its values (``plain``); an ordered
  one whose chunks share their categories gives the order when no ``domain`` is declared (the
  categories present, in category order), so an ordinal attribute stored as an ordered
  Categorical needs no declaration. A declared ``domain`` always wins. ``string_view`` values
  are read as ``string``; the published labels hold the values' plain type.

Published form of a label (``to_arrow``): a numeric or ordinal attribute becomes
``struct<lo, hi>`` of the input's type (``lo == hi``: the original value); a nominal attribute
becomes ``list<value>``, the value set ``domain[lo..hi]`` in domain order (one element: the
original value). ``from_arrow`` reads a published column back into ranks against the input's
domain, marking as invalid (-1) any label that is not such an interval.

>>> import pyarrow as pa
>>> d = Domain.of("size", pa.chunked_array([["M", "S", "L", "M"]]), "ordinal", ("S", "M", "L"))
>>> d.values, d.ranks.tolist()
(['S', 'M', 'L'], [1, 0, 2, 1])
>>> col = d.to_arrow(np.array([0, 1, 1, 2]), np.array([1, 1, 2, 2]))
>>> col.to_pylist()[0]
{'lo': 'S', 'hi': 'M'}
>>> d.from_arrow(col)[0].tolist(), d.from_arrow(col)[1].tolist()
([0, 1, 1, 2], [1, 1, 2, 2])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core.inputs import null_options
from privfair.schemas.errors import InputError
from privfair.schemas.roles import Kind

__all__ = ["Domain", "LABEL_META", "plain"]

LABEL_META = b"privfair.generalised"  # field metadata: "interval", "value_set" or "groups"


def plain(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``values`` with a dictionary read through its values and a view type as its ordinary
    type (``string_view`` as ``string``, ``binary_view`` as ``binary``); other types as they are.

    >>> plain(pa.array(["b", "a", "b"]).dictionary_encode()).to_pylist()
    ['b', 'a', 'b']
    >>> plain(pa.array(["x"], pa.string_view())).type
    DataType(string)
    """
    t = values.type
    if pa.types.is_dictionary(t):
        values = values.cast(t.value_type)
        t = values.type
    if t == pa.string_view():
        return values.cast(pa.string())
    if t == pa.binary_view():
        return values.cast(pa.binary())
    return values


def _categories(column: pa.ChunkedArray) -> list | None:
    """The categories of an ordered dictionary column whose chunks share them, else None."""
    t = column.type
    if not (pa.types.is_dictionary(t) and t.ordered) or column.num_chunks == 0:
        return None
    first = column.chunk(0).dictionary
    if any(not c.dictionary.equals(first) for c in column.chunks[1:]):
        return None
    return plain(first).to_pylist()


def _sort_key(v: Any) -> tuple:
    return (v is None, str(type(v)), v if v is not None else "")


@dataclass(frozen=True)
class Domain:
    """One PND attribute: its active domain in order and each input row's rank in it.

    ``order``: how the order was obtained (``natural``, ``declared``, ``categories`` (an
    ordered Categorical's) or ``lexicographic``).
    """

    name: str
    kind: str
    values: list
    ranks: np.ndarray
    order: str
    arrow_type: pa.DataType

    @property
    def size(self) -> int:
        return len(self.values)

    @property
    def interval(self) -> bool:
        """Published as an interval (numeric, ordinal) rather than a value set (nominal)."""
        return self.kind in (Kind.NUMERIC, Kind.ORDINAL)

    @classmethod
    def of(
        cls, name: str, column: pa.ChunkedArray, kind: str, declared: tuple | None = None
    ) -> Domain:
        """The active domain of ``column`` and its ranks (errors name the column)."""
        kind = Kind(kind)
        categories = _categories(column)
        column = plain(column)
        t = column.type
        if kind is Kind.NUMERIC:
            if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
                raise InputError(name, "a numeric PND attribute must have a numeric type", str(t))
            if column.null_count:
                raise InputError(
                    name,
                    "a numeric PND attribute must have no missing values",
                    f"{column.null_count} nulls; give it kind 'nominal' to generalise the "
                    f"missing value as a value of its own, or {null_options(name)}",
                )
            arr = column.to_numpy()
            if np.issubdtype(arr.dtype, np.floating) and np.isnan(arr).any():
                raise InputError(name, "a numeric PND attribute must have no NaN values")
            uniq, ranks = np.unique(arr, return_inverse=True)
            return cls(name, kind, uniq.tolist(), ranks.astype(np.int64), "natural", t)
        present = set(pc.unique(column).to_pylist())
        if declared is not None:
            unknown = sorted({str(v) for v in present if v not in set(declared)})
            if unknown:
                raise InputError(
                    name, "values outside the declared domain", f"not in domain: {unknown[:5]}"
                )
            order = [v for v in dict.fromkeys(declared) if v in present]
            how = "declared"
        elif categories is not None:
            order = [v for v in categories if v in present]
            order += [None] if None in present else []  # a missing value last (AMB-21)
            how = "categories"
        elif kind is Kind.ORDINAL:
            raise InputError(name, "an ordinal PND attribute needs its domain order ('domain')")
        else:
            order = sorted(present, key=_sort_key)
            how = "lexicographic"
        if kind is Kind.ORDINAL and None in present:
            raise InputError(
                name,
                "an ordinal PND attribute must have no missing values",
                f"{column.null_count} nulls; {null_options(name)}",
            )
        ranks = _ranks(column, pa.array(order, type=t))
        return cls(name, kind, order, ranks, how, t)

    # --- published form --------------------------------------------------------------------
    def to_arrow(self, lo: np.ndarray, hi: np.ndarray) -> pa.Array:
        """The published column of labels ``[lo, hi]`` (module docstring)."""
        values = pa.array(self.values, type=self.arrow_type)
        if self.interval:
            return pa.StructArray.from_arrays(
                [values.take(pa.array(lo)), values.take(pa.array(hi))], names=["lo", "hi"]
            )
        width = hi - lo + 1
        offsets = np.concatenate([[0], np.cumsum(width)]).astype(np.int32)
        idx = np.repeat(lo, width) + (np.arange(offsets[-1]) - np.repeat(offsets[:-1], width))
        return pa.ListArray.from_arrays(
            pa.array(offsets), values.take(pa.array(idx)), type=self._list_type()
        )

    def _list_type(self) -> pa.DataType:
        # Parquet's name for a list's child: a release read back from Parquet keeps its bytes
        return pa.list_(pa.field("element", self.arrow_type))

    def field(self, base: pa.Field) -> pa.Field:
        """The published field: ``base``'s name and metadata, the label type, and its form."""
        meta = dict(base.metadata or {})
        meta[LABEL_META] = b"interval" if self.interval else b"value_set"
        t = (
            pa.struct([("lo", self.arrow_type), ("hi", self.arrow_type)])
            if self.interval
            else self._list_type()
        )
        return pa.field(base.name, t, metadata=meta)

    def from_arrow(self, column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi) ranks of a published column; -1 on both where a cell is not a label over
        this domain (unknown value, wrong type, a value set that is not a contiguous slice)."""
        n = len(column)
        lo = np.full(n, -1, dtype=np.int64)
        hi = np.full(n, -1, dtype=np.int64)
        domain = pa.array(self.values, type=self.arrow_type)
        # chunk by chunk: a row's label is read from its own cell, and a 10M-row release read
        # back holds ten 1M-row chunks whose concatenation (4.2 GB of value-set labels) and
        # per-element ranks would otherwise be made at once
        start = 0
        for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
            stop = start + len(chunk)
            self._read_labels(chunk, domain, lo[start:stop], hi[start:stop])
            start = stop
        return lo, hi

    def _read_labels(self, column: pa.Array, domain: pa.Array, lo: np.ndarray, hi: np.ndarray):
        """``from_arrow`` of one array, written into ``lo`` and ``hi`` (views, all -1)."""
        t = column.type
        if pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
            try:  # a lakehouse reader's list view: the same lists
                column = column.cast(pa.large_list(t.value_field))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                return
            t = column.type
        if self.interval and pa.types.is_struct(t) and {"lo", "hi"} <= {f.name for f in t}:
            a = _ranks(pc.struct_field(column, "lo"), domain)
            b = _ranks(pc.struct_field(column, "hi"), domain)
            ok = (a >= 0) & (b >= 0) & (a <= b) & np.asarray(column.is_valid())
            lo[ok], hi[ok] = a[ok], b[ok]
        elif not self.interval and (pa.types.is_list(t) or pa.types.is_large_list(t)):
            flat = column.flatten()
            offsets = column.offsets.to_numpy()
            offsets = offsets - offsets[0]  # a slice's offsets start where the slice does
            width = np.diff(offsets)
            r = _ranks(flat, domain)
            valid = np.asarray(column.is_valid()) & (width > 0)
            starts = offsets[:-1]
            if len(r):
                # a contiguous ascending slice: each element is the previous one plus one
                step_ok = np.ones(len(r), dtype=bool)
                step_ok[1:] = r[1:] == r[:-1] + 1
                step_ok[starts[width > 0]] = True
                # the rows of the offending elements (element i is in the row whose cumulated
                # width first exceeds i): no per-element row index for millions of elements
                bad_el = np.flatnonzero((r < 0) | ~step_ok)
                valid[np.searchsorted(np.cumsum(width), bad_el, side="right")] = False
                first = np.where(width > 0, r[np.minimum(starts, len(r) - 1)], -1)
                last = np.where(width > 0, r[np.maximum(offsets[1:] - 1, 0)], -1)
                lo[valid], hi[valid] = first[valid], last[valid]


def _ranks(values: pa.Array | pa.ChunkedArray, domain: pa.Array) -> np.ndarray:
    """Rank of each value in ``domain`` (a null matches a null domain value); -1 if absent.

    Both are read through ``plain`` (a dictionary by its values, a view type as its ordinary
    type); ``string`` and ``large_string`` compare with each other. A published column whose
    type cannot be compared with the domain's holds no label of it: every rank is -1, which C2
    (truthful generalisation) reports."""
    values, domain = plain(values), plain(domain)
    try:
        idx = pc.index_in(values, value_set=domain, skip_nulls=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return np.full(len(values), -1, dtype=np.int64)
    return idx.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
