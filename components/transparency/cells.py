"""From an input table to the report's decision cells (spec 7.2-7.3, steps 1-6).

Roles (schema metadata): ``public`` columns are the QID attributes an adversary knows (at least
one); ``sensitive`` columns are the private attributes the report must not give away (at least
one); the ``label`` column is the decision; an ``admissible`` column, if any, is a frequency
weight (records) or the cell population (cells); ``quasi_identifier`` columns are model
features only (``decisions: model``) and never reach the report. A column of any other role is
refused, naming it. Numeric public or private attributes are discretised by ``bins``.

Input rules, each breach an ``InputError`` naming the column: a column is read as its values
whatever its Arrow encoding (a dictionary, as a pandas Categorical gives, is decoded to its
values, a ``string_view`` or ``binary_view`` to ``string`` or ``binary``, a run-end encoded
column to its values: ``decoded``), so an encoding never changes the report; an attribute holds
one value per record (no list, struct, map or union); an attribute's name is not one of the
report's own fields (``announced_d1``, ``scope``, ...) nor starts with ``__`` (the evidence's
columns); every column named in ``bins`` is a public or private attribute.

A *cell* is one combination of public and private values (a decision region, not a person):
``population(x)`` is the weight of its records, ``D_1(x)`` their weighted positive rate, and
``P(x) = population(x) / sum population`` the prior the adversary is assumed to know (A2).
Cells are ordered by their public values, then their private values (domain order; binned
attributes by region), which fixes the solver's tie-breaks (A6).

Records are counted through the current execution engine (``privfair.components.core.engine``): one
``group_counts`` call over each record's attribute values (a binned attribute's region index),
its decision and its weight, so that on Spark the cells are a distributed group-by; the
populations, rules and orders are then read off the counts on the driver, never off the rows.
The engine's rows come back in no set order: they are sorted before any sum, so every engine
gives the same cells (bit for bit: unweighted and integer-weighted populations are exact;
fractional weights are summed per distinct weight, ``count * weight``, which may differ from
a row-by-row sum in the last bits). What stays row-level, on the driver: the input checks
(vectorised), the binning of numeric attributes (``numpy.searchsorted``) and, with
``decisions: model``, the classifier, trained on the records and deciding each one
(``model.decide``): a model is fitted on rows, not on counts. Pre-aggregated cells
(``decisions: cells``) are not aggregated at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core.engine import current_engine
from privfair.components.core.inputs import member, null_options, require_role, table_roles
from privfair.components.transparency.fields import RULE_FIELDS, SUMMARY_FIELDS
from privfair.components.transparency.params import ATRParams
from privfair.schemas.errors import InputError
from privfair.schemas.roles import Kind, Role, TableRoles

__all__ = ["Cells", "build_cells", "count_cells", "decoded", "key_codes", "region_labels"]

RESERVED = frozenset((*RULE_FIELDS, "population", *SUMMARY_FIELDS))
"""Field names of the report's own tables: an attribute so named would clash in them."""


@dataclass
class Cells:
    """The report's cells in deterministic order, with their groups and true rule."""

    keys: pa.Table
    public: list[str]
    private: list[str]
    population: np.ndarray
    d1: np.ndarray
    group: np.ndarray
    decisions: np.ndarray | None = None  # per record (records input)
    model: dict | None = None
    split: np.ndarray | None = None  # per record: True = training row
    warnings: list[str] = field(default_factory=list)

    @property
    def p(self) -> np.ndarray:
        return self.population / self.population.sum()


def region_labels(cuts: tuple[float, ...]) -> list[str]:
    """Readable names of the regions (-inf, c1), [c1, c2), ..., [ck, inf).

    >>> region_labels((100.0, 200.0))
    ['<100', '[100, 200)', '>=200']
    """
    fmt = lambda c: f"{c:g}"  # noqa: E731
    if not cuts:
        return ["all"]
    out = [f"<{fmt(cuts[0])}"]
    out += [f"[{fmt(a)}, {fmt(b)})" for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    return out + [f">={fmt(cuts[-1])}"]


def _discretise(table: pa.Table, name: str, cuts: tuple[float, ...]) -> np.ndarray:
    """Per row, the index of its region of ``region_labels(cuts)``."""
    values = table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
    if np.isnan(values).any():
        raise InputError(name, "a binned attribute must have no missing values", null_options(name))
    if list(cuts) != sorted(set(cuts)):
        raise InputError(name, "bins must be strictly increasing", f"bins: {list(cuts)}")
    return np.searchsorted(np.asarray(cuts, dtype=np.float64), values, side="right")


def _grouped(
    table: pa.Table, roles: TableRoles, name: str, params: ATRParams
) -> pa.Array | pa.ChunkedArray:
    """What the rows are grouped by for a public or private attribute: a binned attribute's
    region index (int64), else the column itself; an attribute that cannot make finite
    decision regions is refused."""
    t = table.column(name).type
    numeric = pa.types.is_integer(t) or pa.types.is_floating(t)
    if name in params.bins:
        if not numeric:
            raise InputError(name, "bins apply to a numeric attribute", f"type {t}")
        return pa.array(_discretise(table, name, tuple(params.bins[name])), pa.int64())
    if numeric and roles[name].kind is Kind.NUMERIC:
        raise InputError(
            name,
            "a numeric public or private attribute needs bins (finite decision regions)",
            f"give component.params.bins.{name}: [cut points]",
        )
    return table.column(name)


def _coded(
    values: pa.Array | pa.ChunkedArray, roles: TableRoles, name: str, params: ATRParams
) -> tuple[np.ndarray, list]:
    """(code per value, the attribute's value order) of grouped values (``_grouped``).

    A binned attribute's code is its region index, its order the regions' labels. Otherwise
    the order is the declared domain's values that occur, then the others by their text (a
    missing value reads ``<missing>``), and a value's code its place in that order: one lookup
    per distinct value, the values themselves coded by Arrow's ``index_in``.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if name in params.bins:
        codes = values.to_numpy(zero_copy_only=False).astype(np.int64)
        return codes, region_labels(tuple(params.bins[name]))
    distinct = pc.unique(values)  # in order of first occurrence
    shown = ["<missing>" if v is None else v for v in distinct.to_pylist()]
    declared = roles[name].domain
    present = set(shown)
    order = [v for v in declared if v in present] if declared else sorted(present, key=str)
    order += sorted(present - set(order), key=str)
    at = key_codes(shown, order)
    found = pc.index_in(values, value_set=distinct, skip_nulls=False)
    return at[found.to_numpy(zero_copy_only=False)], order


def key_codes(values: list, order: list) -> np.ndarray:
    """Each value's place in ``order``.

    >>> key_codes(["b", "a", "b"], ["a", "b"]).tolist()
    [1, 0, 1]
    """
    index = {v: i for i, v in enumerate(order)}
    return np.fromiter((index[v] for v in values), dtype=np.int64, count=len(values))


def _plain_type(t: pa.DataType) -> pa.DataType:
    """The type ``_plain`` reads a column of type ``t`` as."""
    if pa.types.is_dictionary(t) or pa.types.is_run_end_encoded(t):
        return _plain_type(t.value_type)
    if pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_binary_view(t):
        return pa.binary()
    return t


def _plain(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """``col`` as its values: a dictionary decoded, a view as its plain type, a run-end encoded
    column expanded (nested as far as they go)."""
    t = col.type
    if pa.types.is_dictionary(t):
        return _plain(col.cast(t.value_type))
    if pa.types.is_run_end_encoded(t):
        return _plain(pc.run_end_decode(col))
    if pa.types.is_string_view(t):
        return col.cast(pa.string())
    if pa.types.is_binary_view(t):
        return col.cast(pa.binary())
    return col


def decoded(table: pa.Table) -> pa.Table:
    """``table`` with every column read as its values (``_plain``), each field keeping its
    name, its metadata (the column's role) and its nullability.

    >>> t = pa.table({"g": pa.array(["F", "M", "F"]).dictionary_encode()})
    >>> decoded(t).schema.field("g").type, decoded(t).column("g").to_pylist()
    (DataType(string), ['F', 'M', 'F'])
    """
    for i, f in enumerate(table.schema):
        col = _plain(table.column(i))
        if col.type != f.type:
            table = table.set_column(i, f.with_type(col.type), col)
    return table


def _roles(table: pa.Table, params: ATRParams) -> tuple[TableRoles, list, list, str, str | None]:
    roles = table_roles(table)
    allowed = {Role.PUBLIC, Role.SENSITIVE, Role.LABEL, Role.ADMISSIBLE}
    if params.decisions == "model":
        allowed.add(Role.QUASI_IDENTIFIER)
    for c in roles:
        if c.role not in allowed:
            raise InputError(
                c.name,
                f"a '{c.role.value}' column has no place in a transparency report",
                "roles: public (QID), sensitive (private attributes), label (decision), "
                "admissible (weight or population), quasi_identifier (model features, "
                "with decisions: model); drop it with dataset.exclude",
            )
        t = _plain_type(table.schema.field(c.name).type)
        if pa.types.is_nested(t):
            raise InputError(
                c.name,
                "a column of a transparency report holds one value per record",
                f"type {t}: a list, struct, map or union has no place in a decision cell",
            )
    public = [c.name for c in require_role(roles, Role.PUBLIC, count=None)]
    private = [c.name for c in require_role(roles, Role.SENSITIVE, count=None)]
    for name in public + private:
        if name in RESERVED or name.startswith("__"):
            raise InputError(
                name,
                "an attribute may not bear the name of a field of the report's tables",
                f"reserved: {', '.join(sorted(RESERVED))} and names starting with '__'; "
                "rename the column",
            )
    for name in params.bins:
        if name not in public + private:
            raise InputError(
                name,
                "bins apply to a public or sensitive attribute",
                f"attributes: {', '.join(public + private)}",
            )
    (label,) = require_role(roles, Role.LABEL, count=1)
    weights = roles.with_role(Role.ADMISSIBLE)
    if len(weights) > 1:
        raise InputError(weights[1].name, "at most one admissible (weight) column")
    return roles, public, private, label.name, weights[0].name if weights else None


def _numbers(table: pa.Table, name: str, what: str, lo: float, hi: float | None) -> np.ndarray:
    col = table.column(name)
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        raise InputError(name, f"the {what} must be numeric", f"type {col.type}")
    if col.null_count:
        raise InputError(name, f"the {what} must have no missing values", null_options(name))
    x = col.to_numpy(zero_copy_only=False).astype(np.float64)
    if np.isnan(x).any() or (x < lo).any() or (hi is not None and (x > hi).any()):
        bad = x[np.isnan(x) | (x < lo) | ((x > hi) if hi is not None else False)][:3]
        rng = f"[{lo:g}, {hi:g}]" if hi is not None else f">= {lo:g}"
        raise InputError(name, f"the {what} must lie in {rng}", f"e.g. {bad.tolist()}")
    return x


def _binary_decisions(table: pa.Table, name: str, roles: TableRoles) -> np.ndarray:
    col = table.column(name)
    if col.null_count:
        raise InputError(name, "the decision must have no missing values", null_options(name))
    distinct = sorted(set(pc.unique(col).to_pylist()), key=str)
    if len(distinct) > 2:
        raise InputError(name, "decisions must be binary", f"{len(distinct)} distinct values")
    positive = roles[name].positive
    if positive is None:
        raise InputError(name, "the decision needs its positive value ('positive')")
    for v in positive:
        if v not in distinct and len(distinct) == 2:
            raise InputError(name, f"the declared positive value {v!r} does not occur")
    return member(col, positive).astype(np.float64)


def count_cells(
    grouped: dict[str, pa.Array | pa.ChunkedArray],
    decisions: np.ndarray,
    weights: np.ndarray | None,
    roles: TableRoles,
    params: ATRParams,
) -> tuple[np.ndarray, dict[str, list], np.ndarray, np.ndarray]:
    """The records' cells, counted through the current engine.

    Parameters
    ----------
    grouped : dict of str to pyarrow array
        Per public then private attribute (in that order), what each record is grouped by
        (``_grouped``: the column, or a binned attribute's region index).
    decisions : numpy.ndarray
        Each record's decision, 0 or 1.
    weights : numpy.ndarray or None
        Each record's frequency weight (None: every record weighs 1).
    roles, params
        The input's roles (declared domains) and the component's parameters (bins).

    Returns
    -------
    codes : numpy.ndarray
        One row per cell, in cell order: each attribute's code (its place in ``orders``).
    orders : dict of str to list
        Per attribute, its values in code order.
    population, positive : numpy.ndarray
        Per cell, the weight of its records and of its positive decisions.

    Notes
    -----
    One ``group_counts`` call over (attributes, decision[, weight]); the counted rows come
    back in the engine's order and are sorted by all their columns before any sum, so every
    engine gives the same floats. The columns are renamed ``a0, a1, ...``: a column named
    ``count``, or a name Spark reads as a path (``a.b``), cannot clash.
    """
    names = list(grouped)
    cols = {f"a{j}": grouped[n] for j, n in enumerate(names)}
    cols["decision"] = pa.array(decisions.astype(np.int8), pa.int8())
    if weights is not None:
        cols["weight"] = pa.array(weights, pa.float64())
    (counts,) = current_engine().group_counts(pa.table(cols), [tuple(cols)])
    n = counts.column("count").to_numpy().astype(np.float64)
    coded = [_coded(counts.column(f"a{j}"), roles, name, params) for j, name in enumerate(names)]
    codes = np.column_stack([c for c, _ in coded])
    dec = counts.column("decision").to_numpy().astype(np.float64)
    w = counts.column("weight").to_numpy() if weights is not None else np.ones(len(n))
    rows = np.lexsort((n, w, dec, *codes.T[::-1]))
    cells, inv = np.unique(codes[rows], axis=0, return_inverse=True)  # lexicographic = cell order
    inv = inv.ravel()
    mass = (n * w)[rows]
    population = np.bincount(inv, weights=mass, minlength=len(cells))
    positive = np.bincount(inv, weights=mass * dec[rows], minlength=len(cells))
    orders = {name: order for name, (_, order) in zip(names, coded, strict=True)}
    return cells, orders, population, positive


def build_cells(table: pa.Table, params: ATRParams) -> Cells:
    """The cells of ``table`` (module docstring); every bad input an ``InputError``."""
    roles, public, private, label, weight = _roles(table, params)
    table = decoded(table)
    names = public + private
    grouped = {name: _grouped(table, roles, name, params) for name in names}
    warnings = []
    if len(private) > 1:
        warnings.append(
            "several private attributes: the guarantee bounds the confidence about their joint "
            f"value ({', '.join(private)}), not about each one separately (A3)"
        )
    model = split = decisions = None
    if params.decisions == "cells":
        if weight is None:
            raise InputError(
                None, "pre-aggregated cells need a population column (role admissible)"
            )
        population = _numbers(table, weight, "population", 0.0, None)
        d1 = _numbers(table, label, "decision rule D_1", 0.0, 1.0)
        coded = [_coded(grouped[name], roles, name, params) for name in names]
        orders = {name: order for name, (_, order) in zip(names, coded, strict=True)}
        codes = np.column_stack([c for c, _ in coded])
        if len(np.unique(codes, axis=0)) != len(codes):
            raise InputError(None, "cell keys must be unique", f"over {', '.join(names)}")
        order = np.lexsort(codes.T[::-1])
        population, d1, codes = population[order], d1[order], codes[order]
    else:
        if params.decisions == "model":
            from privfair.components.transparency.model import decide

            # row-level by nature: a classifier is fitted on the records and decides each one
            decisions, model, split = decide(table, roles, label, params)
        else:
            decisions = _binary_decisions(table, label, roles)
        w = _numbers(table, weight, "weight", 0.0, None) if weight else None
        codes, orders, population, positive = count_cells(grouped, decisions, w, roles, params)
        d1 = np.divide(positive, population, out=np.zeros_like(positive), where=population > 0)
    keys = {name: [orders[name][c] for c in codes[:, j]] for j, name in enumerate(names)}
    if population.sum() <= 0:
        raise InputError(None, "the cells have no mass", "every population is zero")
    group = np.unique(codes[:, : len(public)], axis=0, return_inverse=True)[1].ravel()
    empty = np.bincount(group, weights=population) <= 0
    if empty.any():
        first = int(np.flatnonzero(group == np.flatnonzero(empty)[0])[0])
        where = ", ".join(f"{n} = {keys[n][first]}" for n in public)
        raise InputError(
            None,
            "a QID group has no mass (every cell's population is zero)",
            f"{int(empty.sum())} such groups, e.g. {where}; leave them out of the cells",
        )
    key_table = pa.table({n: pa.array([str(v) for v in keys[n]]) for n in names})
    return Cells(
        key_table, public, private, population, d1, group, decisions, model, split, warnings
    )
