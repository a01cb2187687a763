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

Records are counted through the current execution engine (``privfair.components.core.engine``):
one ``group_counts`` call over what ``project`` computes from each row alone (each attribute's
value or a binned attribute's region index, the decision, the weight), so that on Spark the
cells are a distributed group-by; everything else is read off the counts on the driver, never
off the rows. The input is read as a frame (``privfair.components.core.frames``) on every
engine and projected where its rows are (``project`` on every Arrow batch,
``Frame.map_batches``): an Arrow table's ``TableFrame`` batch by batch in this process (the
whole table is never projected at once), a ``SparkFrame`` (rows left on a Spark cluster,
``privfair.io.ingest.load_frame``) on the executors, the driver never holding a record; the
cells are those of the whole table's projection, bit for bit.

Every rule is checked in one order on every engine: first what the schema and the params
decide (``_roles``, ``_layout``), then the data rules, on the counts (a binned attribute's
missing value, the decision, the weight: ``count_cells``). The engine's rows come back in no
set order: they are sorted before any sum, so every engine gives the same cells (bit for bit:
unweighted and integer-weighted populations are exact; fractional weights are summed per
distinct weight, ``count * weight``, which may differ from a row-by-row sum in the last bits;
a float key's -0.0 is read as 0.0, as Spark's group-by does). Pre-aggregated cells
(``decisions: cells``) are counted too, each cell once (a key counted twice is refused). What
stays row-level, on the driver: with ``decisions: model``, the classifier, trained on the
records and deciding each one (``model.decide``): a model is fitted on rows, not on counts, so
a ``SparkFrame`` is refused with it (``SpecError``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core.engine import SparkFrame, current_engine
from privfair.components.core.frames import Frame, as_frame
from privfair.components.core.inputs import member, null_options, require_role, table_roles
from privfair.components.transparency.fields import RULE_FIELDS, SUMMARY_FIELDS
from privfair.components.transparency.params import ATRParams
from privfair.schemas.errors import InputError, SpecError
from privfair.schemas.roles import Kind, Role, TableRoles

__all__ = [
    "Cells",
    "Layout",
    "build_cells",
    "count_cells",
    "counts_only",
    "decoded",
    "key_codes",
    "project",
    "region_labels",
    "regions",
]

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
    decisions: np.ndarray | None = None  # per record, with decisions: model
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


@dataclass(frozen=True)
class Layout:
    """What each record (or pre-aggregated cell) is counted by: per public then private
    attribute (``names``, in that order) the column ``a<j>`` (a binned attribute's region
    index, ``regions``; else its values), the column ``decision`` (the label's values; with
    ``decisions: cells`` the rule D_1 as float64) and, with a weight, ``weight`` (float64)."""

    names: tuple[str, ...]
    bins: dict[str, tuple[float, ...]]
    label: str
    weight: str | None
    cells: bool

    def schema(self, given: pa.Schema) -> pa.Schema:
        """The schema of ``project`` of a table of schema ``given``."""
        plain = lambda n: _plain_type(given.field(n).type)  # noqa: E731
        cols = [
            (f"a{j}", pa.int64() if n in self.bins else plain(n)) for j, n in enumerate(self.names)
        ]
        cols.append(("decision", pa.float64() if self.cells else plain(self.label)))
        if self.weight is not None:
            cols.append(("weight", pa.float64()))
        return pa.schema(cols)


def regions(values: pa.Array | pa.ChunkedArray, cuts: tuple[float, ...]) -> pa.Array:
    """Per value, the index of its region of ``region_labels(cuts)``: ``searchsorted(cuts, x,
    side="right")``; null where the value is missing (null or NaN), which ``build_cells``
    refuses.

    >>> regions(pa.array([50, None, 100, 250]), (100.0, 200.0)).to_pylist()
    [0, None, 1, 2]
    """
    x = values.to_numpy(zero_copy_only=False).astype(np.float64)  # a null reads NaN
    at = np.searchsorted(np.asarray(cuts, dtype=np.float64), x, side="right")
    return pa.array(at, pa.int64(), mask=np.isnan(x))


def _canonical(col: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``col`` with a float's -0.0 read as 0.0: Spark's group-by merges the two zeros, Arrow's
    keeps them apart, and a key must be the same cell on every engine."""
    if pa.types.is_floating(col.type):
        return pc.add(col, pa.scalar(0.0, col.type))
    return col


def project(table: pa.Table, layout: Layout) -> pa.Table:
    """The columns ``layout`` counts a table by, computed from its rows alone (no check, no
    state): the same function on every Arrow batch of a frame (``Frame.map_batches``), in
    this process or on the executors, and on a whole table for ``decisions: model``, so no
    two can disagree.

    >>> t = pa.table({"g": ["F", "M"], "age": [20.0, 60.0], "y": ["yes", "no"]})
    >>> project(t, Layout(("g", "age"), {"age": (40.0,)}, "y", None, False)).to_pydict()
    {'a0': ['F', 'M'], 'a1': [0, 1], 'decision': ['yes', 'no']}
    """
    table = decoded(table)
    cols = {
        f"a{j}": regions(table.column(n), layout.bins[n])
        if n in layout.bins
        else _canonical(table.column(n))
        for j, n in enumerate(layout.names)
    }
    label = table.column(layout.label)
    cols["decision"] = _canonical(label.cast(pa.float64()) if layout.cells else label)
    if layout.weight is not None:
        cols["weight"] = _canonical(table.column(layout.weight).cast(pa.float64()))
    return pa.table(cols)


def _layout(
    schema: pa.Schema, roles: TableRoles, names: list[str], label: str, weight: str | None,
    params: ATRParams,
) -> Layout:  # fmt: skip
    """The ``Layout`` of an input of ``schema``, refusing what its schema and the params alone
    decide (before any row is read, on every engine): bins on a non-numeric attribute or not
    strictly increasing, a numeric attribute without bins, a weight, population or rule D_1
    that is not a number, pre-aggregated cells without a population."""
    bins = {}
    for name in names:
        t = _plain_type(schema.field(name).type)
        numeric = pa.types.is_integer(t) or pa.types.is_floating(t)
        if name in params.bins:
            cuts = tuple(float(c) for c in params.bins[name])
            if not numeric:
                raise InputError(name, "bins apply to a numeric attribute", f"type {t}")
            if list(cuts) != sorted(set(cuts)):
                raise InputError(name, "bins must be strictly increasing", f"bins: {list(cuts)}")
            bins[name] = cuts
        elif numeric and roles[name].kind is Kind.NUMERIC:
            raise InputError(
                name,
                "a numeric public or private attribute needs bins (finite decision regions)",
                f"give component.params.bins.{name}: [cut points]",
            )
    cells = params.decisions == "cells"
    if cells and weight is None:
        raise InputError(None, "pre-aggregated cells need a population column (role admissible)")
    numbers = (
        ((weight, "population"), (label, "decision rule D_1")) if cells else ((weight, "weight"),)
    )
    for name, what in numbers:
        t = _plain_type(schema.field(name).type) if name is not None else None
        if t is not None and not (pa.types.is_integer(t) or pa.types.is_floating(t)):
            raise InputError(name, f"the {what} must be numeric", f"type {t}")
    return Layout(tuple(names), bins, label, weight, cells)


def _coded(
    values: pa.Array | pa.ChunkedArray, roles: TableRoles, name: str, layout: Layout
) -> tuple[np.ndarray, list]:
    """(code per value, the attribute's value order) of counted values (``project``).

    A binned attribute's code is its region index, its order the regions' labels. Otherwise
    the order is the declared domain's values that occur, then the others by their text (a
    missing value reads ``<missing>``), and a value's code its place in that order: one lookup
    per distinct value, the values themselves coded by Arrow's ``index_in``.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if name in layout.bins:
        codes = values.to_numpy(zero_copy_only=False).astype(np.int64)
        return codes, region_labels(layout.bins[name])
    distinct = pc.unique(values)  # in order of first occurrence
    shown = ["<missing>" if v is None else v for v in distinct.to_pylist()]
    declared = roles[name].domain
    present = set(shown)
    order = [v for v in declared if v in present] if declared else sorted(present, key=str)
    order += sorted(present - set(order), key=str)
    at = key_codes(shown, order)
    found = pc.index_in(values, value_set=distinct, skip_nulls=False)
    return at[found.to_numpy(zero_copy_only=False)], order


def _numbers(values: pa.Array | pa.ChunkedArray, name: str, what: str, lo: float, hi: float | None):
    """``values`` (a counted column: each distinct value once) as floats, refused when one is
    missing or outside [lo, hi]; the examples are the smallest such values (the engine's rows
    come in no set order)."""
    if values.null_count:
        raise InputError(name, f"the {what} must have no missing values", null_options(name))
    x = values.to_numpy(zero_copy_only=False).astype(np.float64)
    out = np.isnan(x) | (x < lo) | ((x > hi) if hi is not None else False)
    if out.any():
        bad = np.unique(x[out])[:3]  # NaN sorts last
        rng = f"[{lo:g}, {hi:g}]" if hi is not None else f">= {lo:g}"
        raise InputError(name, f"the {what} must lie in {rng}", f"e.g. {bad.tolist()}")
    return x


def _binary_decisions(
    values: pa.Array | pa.ChunkedArray, name: str, roles: TableRoles
) -> np.ndarray:
    """Per counted value of the decision, 1.0 where it is a declared positive value."""
    if values.null_count:
        raise InputError(name, "the decision must have no missing values", null_options(name))
    distinct = sorted(set(values.to_pylist()), key=str)
    if len(distinct) > 2:
        raise InputError(name, "decisions must be binary", f"{len(distinct)} distinct values")
    positive = roles[name].positive
    if positive is None:
        raise InputError(name, "the decision needs its positive value ('positive')")
    for v in positive:
        if v not in distinct and len(distinct) == 2:
            raise InputError(name, f"the declared positive value {v!r} does not occur")
    return member(values, positive).astype(np.float64)


def count_cells(
    table: pa.Table | Frame,
    layout: Layout,
    roles: TableRoles,
    decisions: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, list], np.ndarray, np.ndarray]:
    """The cells of ``table``, counted through the current engine.

    Parameters
    ----------
    table : pyarrow.Table or Frame
        The input (records, or pre-aggregated cells with ``layout.cells``), read as a frame
        (an Arrow table's ``TableFrame``): its rows are projected (``project``) batch by batch
        where they are and counted, never projected whole, nor read here for a
        ``SparkFrame``.
    layout : Layout
        What each row is counted by (``_layout``).
    roles : TableRoles
        The input's roles (declared domains, the decision's positive values).
    decisions : numpy.ndarray, optional
        Each record's decision, 0 or 1, made here (``decisions: model``); it replaces the
        label's values. An Arrow table only, projected whole (the decisions are the
        records' own).

    Returns
    -------
    codes : numpy.ndarray
        One row per cell, in cell order: each attribute's code (its place in ``orders``).
    orders : dict of str to list
        Per attribute, its values in code order.
    population, d1 : numpy.ndarray
        Per cell, the weight of its records and their weighted positive rate D_1 (0 where
        the weight is 0); with ``layout.cells``, the cell's population and D_1 as given.

    Notes
    -----
    One ``group_counts`` call over (attributes, decision[, weight]); every data rule is then
    checked on the counts, in one order on every engine: a binned attribute's missing value,
    then the decision (or D_1 and the population, and that each cell occurs once), then the
    weight. The counted rows come back in the engine's order and are sorted by all their
    columns before any sum, so every engine gives the same floats:
    ``population = sum count * weight`` per cell (exact for integer weights).
    """
    if decisions is None:  # projected batch by batch where the rows are, never whole
        frame = as_frame(table)
        projected = frame.map_batches(partial(project, layout=layout), layout.schema(frame.schema))
    else:  # each record's decision, made here on the whole table (``decisions: model``)
        projected = project(table, layout)
        col = pa.array(decisions.astype(np.int8), pa.int8())
        projected = projected.set_column(len(layout.names), "decision", col)
    keys = tuple(projected.schema.names)
    (counts,) = current_engine().group_counts(projected, [keys])
    names = list(layout.names)
    for j, name in enumerate(names):
        if name in layout.bins and counts.column(f"a{j}").null_count:
            raise InputError(
                name, "a binned attribute must have no missing values", null_options(name)
            )
    n = counts.column("count").to_numpy().astype(np.float64)
    decided = counts.column("decision")
    if layout.cells:
        w = _numbers(counts.column("weight"), layout.weight, "population", 0.0, None)
        dec = _numbers(decided, layout.label, "decision rule D_1", 0.0, 1.0)
    else:
        if decisions is not None:
            dec = decided.to_numpy().astype(np.float64)
        else:
            dec = _binary_decisions(decided, layout.label, roles)
        w = (
            _numbers(counts.column("weight"), layout.weight, "weight", 0.0, None)
            if layout.weight is not None
            else np.ones(len(n))
        )
    coded = [_coded(counts.column(f"a{j}"), roles, name, layout) for j, name in enumerate(names)]
    codes = np.column_stack([c for c, _ in coded])
    rows = np.lexsort((n, w, dec, *codes.T[::-1]))
    cells, inv = np.unique(codes[rows], axis=0, return_inverse=True)  # lexicographic = cell order
    inv = inv.ravel()
    if layout.cells and (len(cells) != len(codes) or (n > 1).any()):
        raise InputError(None, "cell keys must be unique", f"over {', '.join(names)}")
    orders = {name: order for name, (_, order) in zip(names, coded, strict=True)}
    if layout.cells:  # one counted row per cell, already in cell order
        return cells, orders, w[rows], dec[rows]
    mass = (n * w)[rows]
    population = np.bincount(inv, weights=mass, minlength=len(cells))
    positive = np.bincount(inv, weights=mass * dec[rows], minlength=len(cells))
    d1 = np.divide(positive, population, out=np.zeros_like(positive), where=population > 0)
    return cells, orders, population, d1


def counts_only(params: ATRParams) -> bool:
    """Whether ATR with ``params`` reads its input through engine counts alone: every source
    of ``decisions`` but ``model``, whose classifier is fitted on the records themselves.

    >>> counts_only(ATRParams(decisions="label")), counts_only(ATRParams(decisions="model"))
    (True, False)
    """
    return params.decisions != "model"


def build_cells(table: pa.Table | Frame, params: ATRParams) -> Cells:
    """The cells of ``table`` (module docstring); every bad input an ``InputError``.

    A ``SparkFrame`` (rows left on a Spark cluster) is counted where it is and gives the cells
    an Arrow table of the same rows gives; ``decisions: model`` is refused on it
    (``SpecError``): its classifier is fitted on the records and decides each one, here.
    """
    roles, public, private, label, weight = _roles(table, params)
    names = public + private
    layout = _layout(table.schema, roles, names, label, weight, params)
    warnings = []
    if len(private) > 1:
        warnings.append(
            "several private attributes: the guarantee bounds the confidence about their joint "
            f"value ({', '.join(private)}), not about each one separately (A3)"
        )
    model = split = decisions = None
    if not counts_only(params):
        if isinstance(table, SparkFrame):
            raise SpecError(
                "component.params.decisions",
                "'model' fits a classifier on the records and lets it decide each one, which "
                "needs the records here, and this input's rows stay on the Spark cluster: "
                "release it on the local engine (execution.engine: local), or give the "
                "decisions as the label (decisions: label)",
            )
        from privfair.components.transparency.model import decide

        # row-level by nature: a classifier is fitted on the records and decides each one
        decisions, model, split = decide(decoded(table), roles, label, params)
    codes, orders, population, d1 = count_cells(table, layout, roles, decisions)
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
