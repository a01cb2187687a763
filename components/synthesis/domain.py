"""The public domain of every synthesised column, and the codes the mechanisms work on.

DP synthesis may only use domains that are public metadata (spec A16): a domain read off the
private data would itself leak (which rare values occur). So every column must declare one:

- a string (nominal or ordinal) column: its levels, the role's ``domain``;
- a binary column: ``domain`` if declared, else the levels 0 and 1;
- a numeric column: its bins, ``component.params.bins``. A synthetic value is drawn uniformly
  within its bin, independently of everything else, which keeps every conditional
  independence of the codes (spec 2.4).

A column without a declared domain is refused, naming the column and where to declare it.

**Nulls.** A null is a level of a column's domain only where the release's *public schema*
declares one: the column's ``domain`` lists a null, or the column is named in
``component.params.nulls`` (the only way for a numeric column, whose domain is its bins). The
public schema is what the spec (with the family's dataset presets) declares, nothing else:
never whether the input has a null, nor how many (a fact about the records), and not the Arrow
field's ``nullable`` flag either, which every writer and ingest set for every column (it says
nothing); a field that is *not* nullable refuses a declared null level. A null level is the last
code of its column. A column without one gets no null in the synthetic table, whatever the
noise; an input null there is refused (naming the column and how many rows, never a value).

**Declared, never observed.** A ``domain`` the input supplied (an ``ordinal`` column's order
taken from a pandas ordered Categorical, whose categories are the values that occur: one
person's rare value would be in the published domain) is refused like a missing one, naming
the column: only the spec (``dataset.columns.<col>.domain``, a preset) declares a domain.

**Arrow types.** The synthetic table's type of each column is a function of the spec alone
(``published_type``), never of the input's Arrow type, which a reader infers from the values
(one fractional age in a CSV file turns an integer column into ``double``; a Categorical's
index width follows its number of categories): a numeric column is ``int64`` when every edge
of its bins is an integer, else ``float64``; a column with declared levels takes the type of
those levels (strings: ``string``, integers: ``int64``, numbers: ``float64``, booleans:
``bool``); a binary column without a declared domain is ``int64`` 0/1. The input is read in
any layout: values are compared in a plain type (``value_type``), a dictionary column (a
pandas Categorical) by its values, a ``string`` / ``large_string`` / ``string_view`` column
as ``large_string`` (binary types alike), a numeric column against its bins as ``float64``.

>>> import pyarrow as pa
>>> d = ColumnDomain("age", pa.int64(), edges=(0.0, 18.0, 65.0, 120.0))
>>> d.size, d.encode(pa.chunked_array([[5, 30.5, 70]])).tolist()
(3, [0, 1, 2])
>>> j = ColumnDomain("job", pa.string(), levels=("a", "b"), missing=True)
>>> j.size, j.labels(), j.encode(pa.chunked_array([pa.array(["b", None, "a"]).dictionary_encode()
... ])).tolist()
(3, ['a', 'b', '<missing>'], [1, 2, 0])
>>> j.decode(np.array([2, 1, 0]), None).to_pylist()
[None, 'b', 'a']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core.engine import null_count
from privfair.components.core.inputs import absent_column, null_options
from privfair.schemas.errors import InputError
from privfair.schemas.roles import ColumnRole, Kind, TableRoles, attach_roles, read_roles

__all__ = [
    "ColumnDomain",
    "public_domains",
    "published_type",
    "declared_domains",
    "declared_nulls",
    "value_type",
    "encode_table",
    "decode_table",
    "MISSING",
]

MISSING = "<missing>"


def value_type(t: pa.DataType) -> pa.DataType:
    """The plain type a column's values are compared in: a dictionary's value type, and
    ``large_string`` (``large_binary``) for every string (binary) layout.

    >>> value_type(pa.dictionary(pa.int8(), pa.string())), value_type(pa.string_view())
    (DataType(large_string), DataType(large_string))
    """
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.large_string()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.large_binary()
    return t


@dataclass(frozen=True)
class ColumnDomain:
    """The public domain of one column: ``levels`` (one per code) or bin ``edges`` (k + 1 edges
    give k codes), plus a last code for a null when ``missing`` (declared, never read off the
    data); ``arrow_type`` is the type the synthetic column is published in (``published_type``,
    from the spec)."""

    name: str
    arrow_type: pa.DataType
    levels: tuple | None = None
    edges: tuple[float, ...] | None = None
    missing: bool = False

    @property
    def size(self) -> int:
        base = len(self.levels) if self.levels is not None else len(self.edges) - 1
        return base + int(self.missing)

    @property
    def value_type(self) -> pa.DataType:
        return value_type(self.arrow_type)

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
        if self.edges is None and column.type != self.value_type:
            try:
                column = column.cast(self.value_type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise InputError(
                    self.name,
                    f"the column's values cannot be read as its declared levels' type "
                    f"{self.arrow_type}",
                    str(e),
                ) from None
        nulls = column.is_null().to_numpy(zero_copy_only=False)
        if self.levels is not None:
            values = pa.array(self.levels, type=self.value_type)
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
        within it; the null level, if declared, a null)."""
        codes = np.asarray(codes, dtype=np.int64)
        null = codes == self.size - 1 if self.missing else np.zeros(len(codes), bool)
        safe = np.where(null, 0, codes)
        t = self.arrow_type
        if self.levels is not None:
            index = pa.array(safe, mask=null)
            if pa.types.is_dictionary(t):
                return pa.DictionaryArray.from_arrays(
                    index.cast(t.index_type),
                    pa.array(self.levels, type=t.value_type),
                    ordered=t.ordered,
                )
            out = pa.array(list(self.levels), type=self.value_type).take(index)
            return out if out.type == t else out.cast(t)
        lo = np.asarray(self.edges[:-1])[safe]
        hi = np.asarray(self.edges[1:])[safe]
        if pa.types.is_integer(t):
            a, b = np.ceil(lo), np.ceil(hi) - 1  # the integers of [lo, hi)
            vals = a + np.floor(rng.random(len(codes)) * (b - a + 1))
            return pa.array(vals.astype(np.int64), mask=null).cast(t)
        d = edge_decimals(self.edges)
        if d is None:  # an infinite edge: no grid to draw on
            vals = lo + rng.random(len(codes)) * (hi - lo)
            return pa.array(vals, mask=null).cast(t)
        # a value drawn uniformly among the multiples of 10^-d in [lo, hi): at the precision
        # the public bins are written in (never read off the private input), and in its bin
        g = 10.0**d
        a, b = np.ceil(np.round(lo * g, 6)), np.ceil(np.round(hi * g, 6)) - 1
        steps = a + np.floor(rng.random(len(codes)) * (b - a + 1))
        return pa.array(steps / g, mask=null).cast(t)


MAX_DECIMALS = 6


def edge_decimals(edges: Sequence[float]) -> int | None:
    """The decimals a float column's synthetic values are drawn with: the fewest (at least 1,
    at most ``MAX_DECIMALS``) that write every public bin edge exactly, so values sit on the
    grid the spec's bins are written on (bins 0, 2.5, 5 give one decimal); None when an edge
    is infinite. Derived from the public bins alone: the input's own precision is private (it
    would say, say, that no value has a second decimal).

    >>> edge_decimals((0, 2.5, 5.0)), edge_decimals((0, 10, 20)), edge_decimals((0, 0.125))
    (1, 1, 3)
    """
    e = np.asarray(edges, dtype=float)
    if not np.all(np.isfinite(e)):
        return None
    for d in range(1, MAX_DECIMALS + 1):
        scaled = e * 10.0**d
        if np.all(np.abs(scaled - np.rint(scaled)) <= 1e-9 * np.maximum(np.abs(scaled), 1.0)):
            return d
    return MAX_DECIMALS


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def published_type(column: ColumnRole, edges: Sequence[float] | None = None) -> pa.DataType | None:
    """The Arrow type ``column``'s synthetic values are published in, from the spec alone (its
    declared kind, ``domain`` and ``bins``), never from the input's Arrow type: bins whose every
    edge is an integer give ``int64``, other bins ``float64``; declared levels their own type
    (``_levels_type``); a binary column without a declared domain ``int64`` (0/1). None when the
    spec declares no public domain (the column is refused), or a domain the input supplied.

    >>> from privfair.schemas.roles import Role
    >>> age = ColumnRole("age", Role.IGNORED, Kind.NUMERIC)
    >>> published_type(age, (0, 10, 20)), published_type(age, (0, 2.5, 5))
    (DataType(int64), DataType(double))
    >>> published_type(ColumnRole("y", Role.LABEL, Kind.BINARY))
    DataType(int64)
    >>> published_type(ColumnRole("j", Role.LABEL, Kind.NOMINAL, domain=("a", None)))
    DataType(string)
    >>> published_type(ColumnRole("e", Role.LABEL, Kind.ORDINAL, domain=("a",), domain_from_input=True))
    """
    if edges is not None:
        e = np.asarray(edges, dtype=float)
        integral = bool(np.all(np.isfinite(e)) and np.all(e == np.rint(e)))
        return pa.int64() if integral else pa.float64()
    if column.domain is not None:
        if column.domain_from_input:
            return None
        return _levels_type(tuple(v for v in column.domain if v is not None))
    if column.kind is Kind.BINARY:
        return pa.int64()
    return None


def _levels_type(levels: tuple) -> pa.DataType | None:
    """The type of declared levels: ``bool``, ``int64``, ``float64`` (integers and fractions
    mixed), ``string``, else what Arrow infers (dates...); None when they mix kinds or are
    empty.

    >>> _levels_type(("a", "b")), _levels_type((1, 2)), _levels_type((1, 2.5)), _levels_type((1, "a"))
    (DataType(string), DataType(int64), DataType(double), None)
    """
    if not levels:
        return None
    if all(isinstance(v, bool) for v in levels):
        return pa.bool_()
    if any(isinstance(v, bool) for v in levels):
        return None
    if all(isinstance(v, int) for v in levels):
        return pa.int64()
    if all(isinstance(v, int | float) for v in levels):
        return pa.float64()
    if all(isinstance(v, str) for v in levels):
        return pa.string()
    try:
        t = pa.array(list(levels)).type
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None
    return None if pa.types.is_null(t) else t


def public_domains(
    table: pa.Table,
    roles: TableRoles,
    bins: Mapping[str, tuple],
    nulls: Sequence[str] = (),
) -> dict:
    """``{column: ColumnDomain}`` in column order, from the roles' declared ``domain``, the
    numeric ``bins`` and the columns declared to hold a null level (``nulls``, or a null in
    the declared ``domain``), each in its ``published_type``; ``InputError`` naming the column
    (or ``bins.<col>``, ``nulls.<col>``) when one is missing, was read off the input (an
    ordered Categorical's categories) or does not fit the column, or when the input has a
    null where no null level is declared (how many rows, never a value)."""
    for key, declared in (("bins", bins), ("nulls", nulls)):
        for col in declared:
            if col not in table.column_names:
                raise absent_column(f"{key}.{col}", col, table, key)
    out = {}
    for c in roles:
        f = table.schema.field(c.name)
        t = f.type
        vt = value_type(t)
        edges = bins.get(c.name)
        numeric = pa.types.is_integer(vt) or pa.types.is_floating(vt)
        if c.domain is not None and c.domain_from_input:
            raise InputError(
                c.name,
                "a synthesised column needs a public domain, not one read off the data: this "
                "column's order comes from the input's categories (a pandas ordered "
                "Categorical), which hold the values that occur",
                "declare its levels as the column's 'domain' (dataset.columns)",
            )
        levels = None if c.domain is None else tuple(v for v in c.domain if v is not None)
        missing = c.name in nulls or (c.domain is not None and len(levels) < len(c.domain))
        if edges is not None:
            if c.domain is not None or c.kind is not Kind.NUMERIC or not numeric:
                raise InputError(
                    f"bins.{c.name}",
                    "bins are for numeric columns without declared levels",
                    f"kind {c.kind.value}, type {t}",
                )
            if pa.types.is_dictionary(t):
                raise InputError(
                    f"bins.{c.name}",
                    "bins are for plain numeric columns: declare a dictionary-encoded "
                    "column's levels as its domain",
                    f"type {t}",
                )
            out_type = published_type(c, edges)
            _fits(c.name, out_type, edges)
            d = ColumnDomain(
                c.name, out_type, edges=tuple(float(e) for e in edges), missing=missing
            )
        elif levels is not None:
            d = _levels(c.name, t, levels, missing, published_type(c))
        elif c.kind is Kind.BINARY and (pa.types.is_integer(vt) or pa.types.is_boolean(vt)):
            d = ColumnDomain(c.name, published_type(c), levels=(0, 1), missing=missing)
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
        if d.missing and not f.nullable:
            raise InputError(
                c.name,
                "a null level is declared for a column whose schema does not allow nulls",
                "drop it from component.params.nulls or from the column's domain",
            )
        n_null = null_count(table, c.name)  # one aggregate on the executors for a SparkFrame
        if not d.missing and n_null:
            raise InputError(
                c.name,
                "a null where the declared public domain has no null level",
                f"{n_null} rows; declare one (a null in the column's domain, or the column in "
                f"component.params.nulls), or {null_options(c.name)}",
            )
        out[c.name] = d
    return out


def declared_domains(table: pa.Table, roles: TableRoles, params) -> dict:
    """``public_domains`` of ``table`` with the bins and null levels ``params`` (``MSTParams``)
    declare: what the run encodes on and the validator rebuilds."""
    bins = {c: params.edges(c) for c in params.bins}
    return public_domains(table, roles, bins, params.nulls)


def declared_nulls(roles: TableRoles, nulls: Sequence[str] = ()) -> tuple[str, ...]:
    """The columns whose public domain holds a null level, in column order: named in
    ``nulls`` or with a null in their declared ``domain`` (declarations only, no data).

    >>> from privfair.schemas.roles import ColumnRole, Role
    >>> r = TableRoles.of([ColumnRole("a", Role.LABEL, Kind.NOMINAL, domain=("x", None)),
    ...                    ColumnRole("b", Role.IGNORED), ColumnRole("c", Role.IGNORED)])
    >>> declared_nulls(r, ["c"])
    ('a', 'c')
    """
    return tuple(
        c.name
        for c in roles
        if c.name in nulls or (c.domain is not None and any(v is None for v in c.domain))
    )


def _fits(name: str, t: pa.DataType, edges: Sequence[float]) -> None:
    """Every bin of an integer column holds an integer the column's type can hold."""
    if not pa.types.is_integer(t):
        return
    lo, hi = np.ceil(edges[:-1]), np.ceil(edges[1:]) - 1
    if np.any(hi < lo):
        raise InputError(f"bins.{name}", "every bin of an integer column must hold an integer")
    info = np.iinfo(t.to_pandas_dtype())
    if lo[0] < info.min or hi[-1] > info.max:
        raise InputError(
            f"bins.{name}",
            f"the bins reach past what the column type {t} holds",
            f"[{info.min}, {info.max}]",
        )


def _levels(
    name: str, t: pa.DataType, levels: tuple, missing: bool, published: pa.DataType | None
) -> ColumnDomain:
    """The domain of declared ``levels`` for an input column of type ``t``, published in
    ``published`` (the levels' own type): refused when the levels repeat a value, mix kinds, or
    do not fit the input column's type."""
    if len(set(levels)) != len(levels):
        raise InputError(name, "the declared domain repeats a value")
    if published is None:
        raise InputError(
            name,
            "the declared domain needs values of one kind (strings, numbers or booleans)",
            f"{len(levels)} levels",
        )
    vt = value_type(t)
    try:
        pa.array(list(levels), type=vt)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
        raise InputError(
            name, f"the declared domain does not fit the column type {t}", str(e)
        ) from None
    return ColumnDomain(name, published, levels=levels, missing=missing)


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
    """The synthetic table: each column decoded into its published type (``published_type``:
    from the spec, not the input's type), in the input's order and with the input's roles in
    its field metadata, and nothing else of the input's schema: its schema-level metadata is a
    fact about the private file (a pandas-written Parquet file records its RangeIndex, whose
    ``stop`` is the exact row count) and is not carried over.

    >>> import pyarrow as pa
    >>> t = pa.table({"x": [1.5, 2, 3]}).replace_schema_metadata({"pandas": '{"stop": 3}'})
    >>> d = {"x": ColumnDomain("x", pa.int64(), edges=(0, 2, 4))}
    >>> out = decode_table(np.array([[0], [1]]), d, t.schema, np.random.default_rng(0))
    >>> out.schema.field("x").type, out.schema.metadata
    (DataType(int64), None)
    """
    arrays = [d.decode(codes[:, i], rng) for i, d in enumerate(domains.values())]
    fields = [pa.field(f.name, domains[f.name].arrow_type, f.nullable) for f in schema]
    return attach_roles(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), read_roles(schema))
