"""The public domain of every synthesised column, and the codes the mechanisms work on.

DP synthesis may only use domains that are public metadata (spec A16): a domain read off the
private data would itself leak (which rare values occur). So every column must declare one:

- a string (nominal or ordinal) column: its levels, the role's ``domain``; a null is a value of
  its own, the last code (a public rule, not a fact about the data);
- a binary column: ``domain`` if declared, else the levels 0 and 1;
- a numeric column: its bins, ``component.params.bins``. A synthetic value is drawn uniformly
  within its bin, independently of everything else, which keeps every conditional
  independence of the codes (spec 2.4).

A column without a declared domain is refused, naming the column and where to declare it.

>>> import pyarrow as pa
>>> d = ColumnDomain("age", pa.int64(), edges=(0.0, 18.0, 65.0, 120.0))
>>> d.size, d.encode(pa.chunked_array([[5, 30, 70]])).tolist()
(3, [0, 1, 2])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.errors import InputError
from schemas.roles import Kind, TableRoles, attach_roles, read_roles

__all__ = ["ColumnDomain", "public_domains", "encode_table", "decode_table", "MISSING"]

MISSING = "<missing>"


@dataclass(frozen=True)
class ColumnDomain:
    """The public domain of one column: ``levels`` (one per code) or bin ``edges`` (k + 1 edges
    give k codes), plus a last code for a null when ``missing``."""

    name: str
    arrow_type: pa.DataType
    levels: tuple | None = None
    edges: tuple[float, ...] | None = None
    missing: bool = False

    @property
    def size(self) -> int:
        base = len(self.levels) if self.levels is not None else len(self.edges) - 1
        return base + int(self.missing)

    def labels(self) -> list[str]:
        """A readable label per code (bins as ``[lo, hi)``)."""
        if self.levels is not None:
            out = [str(v) for v in self.levels]
        else:
            e = self.edges
            out = [f"[{_num(e[i])}, {_num(e[i + 1])})" for i in range(len(e) - 1)]
        return out + ([MISSING] if self.missing else [])

    def encode(self, column: pa.ChunkedArray, clamp: bool = False) -> np.ndarray:
        """The code of every value: -1 for a value outside the domain (or a null the domain
        has no code for); with ``clamp`` a numeric value outside the bins takes the first or
        last bin."""
        n = len(column)
        nulls = column.is_null().to_numpy(zero_copy_only=False)
        if self.levels is not None:
            values = pa.array(self.levels, type=self.arrow_type)
            codes = pc.index_in(column, value_set=values).to_numpy(zero_copy_only=False)
            codes = np.where(np.isnan(codes.astype(float)), -1, codes).astype(np.int64)
        else:
            x = column.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
            edges = np.asarray(self.edges)
            codes = np.searchsorted(edges, x, side="right").astype(np.int64) - 1
            k = len(edges) - 1
            if clamp:
                codes = np.clip(codes, 0, k - 1)
            codes[(codes < 0) | (codes >= k)] = -1
        codes = codes.reshape(n)
        codes[nulls] = self.size - 1 if self.missing else -1
        return codes

    def decode(self, codes: np.ndarray, rng: np.random.Generator) -> pa.Array:
        """The values of ``codes`` in the column's Arrow type (a bin's value drawn uniformly
        within it)."""
        codes = np.asarray(codes, dtype=np.int64)
        null = codes == self.size - 1 if self.missing else np.zeros(len(codes), bool)
        if self.levels is not None:
            values = pa.array(self.levels, type=self.arrow_type)
            safe = np.where(null, 0, codes)
            out = values.take(pa.array(safe))
            return pc.if_else(pa.array(null), pa.nulls(len(codes), self.arrow_type), out)
        lo = np.asarray(self.edges[:-1])[codes]
        hi = np.asarray(self.edges[1:])[codes]
        if pa.types.is_integer(self.arrow_type):
            a, b = np.ceil(lo), np.ceil(hi) - 1  # the integers of [lo, hi)
            vals = a + np.floor(rng.random(len(codes)) * (b - a + 1))
            return pa.array(vals.astype(np.int64)).cast(self.arrow_type)
        vals = lo + rng.random(len(codes)) * (hi - lo)
        return pa.array(vals).cast(self.arrow_type)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def public_domains(table: pa.Table, roles: TableRoles, bins: Mapping[str, tuple]) -> dict:
    """``{column: ColumnDomain}`` in column order, from the roles' declared ``domain`` and the
    numeric ``bins``; ``InputError`` naming the column (or ``bins.<col>``) when one is missing
    or does not fit the column."""
    for col in bins:
        if col not in table.column_names:
            raise InputError(
                f"bins.{col}", "bins are declared for a column the table does not have"
            )
    out = {}
    for c in roles:
        t = table.schema.field(c.name).type
        edges = bins.get(c.name)
        numeric = pa.types.is_integer(t) or pa.types.is_floating(t)
        if edges is not None:
            if c.domain is not None or c.kind is not Kind.NUMERIC or not numeric:
                raise InputError(
                    f"bins.{c.name}",
                    "bins are for numeric columns without declared levels",
                    f"kind {c.kind.value}, type {t}",
                )
            if pa.types.is_integer(t):
                lo, hi = np.ceil(edges[:-1]), np.ceil(edges[1:]) - 1
                if np.any(hi < lo):
                    raise InputError(
                        f"bins.{c.name}", "every bin of an integer column must hold an integer"
                    )
            out[c.name] = ColumnDomain(c.name, t, edges=tuple(float(e) for e in edges))
        elif c.domain is not None:
            out[c.name] = _levels(c.name, t, tuple(c.domain))
        elif c.kind is Kind.BINARY and (pa.types.is_integer(t) or pa.types.is_boolean(t)):
            levels = (False, True) if pa.types.is_boolean(t) else (0, 1)
            out[c.name] = ColumnDomain(c.name, t, levels=levels)
        else:
            where = (
                "declare its bins in component.params.bins"
                if c.kind is Kind.NUMERIC
                else "declare its levels as the column's 'domain' (dataset.columns)"
            )
            raise InputError(
                c.name,
                "a synthesised column needs a public domain, not one read off the data",
                where,
            )
        d = out[c.name]
        if not d.missing and table.column(c.name).null_count:
            raise InputError(
                c.name,
                "a numeric or binary column must have a value in every row",
                f"{table.column(c.name).null_count} nulls",
            )
    return out


def _levels(name: str, t: pa.DataType, levels: tuple) -> ColumnDomain:
    if len(set(levels)) != len(levels):
        raise InputError(name, "the declared domain repeats a value")
    try:
        pa.array(list(levels), type=t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
        raise InputError(
            name, f"the declared domain does not fit the column type {t}", str(e)
        ) from None
    string = pa.types.is_string(t) or pa.types.is_large_string(t)
    return ColumnDomain(name, t, levels=levels, missing=string)


def encode_table(
    table: pa.Table, domains: Mapping[str, ColumnDomain], clamp: bool = False
) -> tuple[np.ndarray, dict[str, int]]:
    """The ``rows x columns`` code matrix and, per column, how many numeric values were clamped.

    A value outside its declared domain is an ``InputError`` naming the column, the declared
    domain and how many rows (never the values: an error is read outside the data owner's
    area); numeric values are clamped instead when ``clamp``."""
    cols, clamped = [], {}
    for name, d in domains.items():
        col = table.column(name)
        strict = d.encode(col)
        bad = strict < 0
        if bad.any() and clamp and d.edges is not None:
            codes = d.encode(col, clamp=True)
            clamped[name] = int(bad.sum())
        elif bad.any():
            if d.edges is not None:
                hint = f"bins [{_num(d.edges[0])}, {_num(d.edges[-1])})"
                fix = "widen the bins or set out_of_domain: clamp"
            else:
                hint = f"{len(d.levels)} levels"
                fix = "add the value to the column's declared domain"
            raise InputError(
                name,
                "a value lies outside the declared public domain",
                f"{int(bad.sum())} rows; declared {hint}; {fix}",
            )
        else:
            codes = strict
        cols.append(codes)
    matrix = np.stack(cols, axis=1) if cols else np.zeros((table.num_rows, 0), np.int64)
    return np.ascontiguousarray(matrix), clamped


def decode_table(
    codes: np.ndarray, domains: Mapping[str, ColumnDomain], schema: pa.Schema, rng
) -> pa.Table:
    """The synthetic table: each column decoded into its input type, in the input's order and
    with the input's roles in its field metadata, and nothing else of the input's schema: its
    schema-level metadata is a fact about the private file (a pandas-written Parquet file
    records its RangeIndex, whose ``stop`` is the exact row count) and is not carried over.

    >>> import pyarrow as pa
    >>> t = pa.table({"x": [1, 2, 3]}).replace_schema_metadata({"pandas": '{"stop": 3}'})
    >>> d = {"x": ColumnDomain("x", pa.int64(), levels=(1, 2, 3))}
    >>> out = decode_table(np.array([[0], [2]]), d, t.schema, np.random.default_rng(0))
    >>> out.column("x").to_pylist(), out.schema.metadata
    ([1, 3], None)
    """
    arrays = [d.decode(codes[:, i], rng) for i, d in enumerate(domains.values())]
    fields = [pa.field(f.name, f.type, f.nullable) for f in schema]
    return attach_roles(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), read_roles(schema))
