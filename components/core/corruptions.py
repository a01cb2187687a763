"""Releases that break one shared guarantee each, for the test battery (``tests/common``).

Each function takes ``(guarantee, input_table, outputs, sidecars, rng)`` and returns
``(outputs, sidecars)`` changed so that the guarantee no longer holds, or None when no release
can break it (e.g. a t-closeness bound of 1). They change the published files only, the way a
bug or a tampering would, and never the evidence the validator builds from them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privfair.schemas import contracts as C

__all__ = [
    "set_cells",
    "break_k_anonymity",
    "break_partition",
    "break_t_closeness",
    "break_attributes_preserved",
    "break_columns_absent",
    "break_parity_gap",
    "break_retention",
    "break_reidentification_risk",
    "break_l_diversity",
]


def set_cells(table: pa.Table, column: str, rows: np.ndarray, value) -> pa.Table:
    """``table`` with ``column`` set to ``value`` on ``rows`` (type and field metadata kept)."""
    i = table.schema.get_field_index(column)
    f = table.schema.field(i)
    values = table.column(column).to_pylist()
    for r in np.atleast_1d(rows):
        values[int(r)] = value
    return table.set_column(i, f, pa.array(values, type=f.type))


def _different(table: pa.Table, column: str, current):
    """A value of ``column``'s type different from ``current`` (another value of the column
    when there is one)."""
    others = [
        v for v in pc.unique(table.column(column)).to_pylist() if v != current and v is not None
    ]
    if others:
        return others[0]
    t = table.schema.field(column).type
    if pa.types.is_floating(t):
        return (current or 0.0) + 0.5
    if pa.types.is_integer(t):
        return (current or 0) + 1
    if pa.types.is_boolean(t):
        return not current
    return f"{current}~"


def break_k_anonymity(g: C.KAnonymity, input_table, outputs, sidecars, rng):
    """Make row 0 of the published table unique on its first quasi-identifier."""
    if g.k <= 1:
        return None
    name, table = next(iter(outputs.items()))
    qi = g.quasi_identifiers[0]
    col = table.column(qi)
    if pa.types.is_floating(col.type) or pa.types.is_integer(col.type):
        value = (pc.max(col).as_py() or 0) + 1
    else:
        value = f"{col[0].as_py()}~unique"
    return {**outputs, name: set_cells(table, qi, np.array([0]), value)}, sidecars


def break_partition(g: C.Partition, input_table, outputs, sidecars, rng):
    """Claim the same input row for two published rows."""
    lin = sidecars["lineage"]
    if lin.num_rows < 2:
        return None
    ids = lin.column("row_id").to_numpy().copy()
    ids[1] = ids[0]
    i = lin.schema.get_field_index("row_id")
    return outputs, {**sidecars, "lineage": lin.set_column(i, "row_id", pa.array(ids, pa.int64()))}


def break_t_closeness(g: C.TCloseness, input_table, outputs, sidecars, rng):
    """Give every row of the first class the attribute value rarest in the reference."""
    name, table = next(iter(outputs.items()))
    lin = sidecars["lineage"]
    classes = lin.column(g.within).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(classes == classes[0])
    ref_table = table if g.reference == "output" else input_table
    counts = pc.value_counts(ref_table.column(g.attribute)).to_pylist()
    if len(counts) < 2:
        return None
    rare = min(counts, key=lambda d: (d["counts"], str(d["values"])))
    if 1 - rare["counts"] / ref_table.num_rows <= g.t + 1e-9:
        return None
    return {**outputs, name: set_cells(table, g.attribute, rows, rare["values"])}, sidecars


def break_attributes_preserved(g: C.AttributesPreserved, input_table, outputs, sidecars, rng):
    """Change one published cell of the first preserved column."""
    name, table = next(iter(outputs.items()))
    c = g.columns[0]
    return {
        **outputs,
        name: set_cells(table, c, np.array([0]), _different(table, c, table.column(c)[0].as_py())),
    }, sidecars


def break_columns_absent(g: C.ColumnsAbsent, input_table, outputs, sidecars, rng):
    """Publish a column named like the first private one (the guarantee is about names)."""
    if not g.columns:
        return None
    name, table = next(iter(outputs.items()))
    c = g.columns[0]
    values = pa.array([f"{c}-{i}" for i in range(table.num_rows)])
    return {**outputs, name: table.append_column(c, values)}, sidecars


def break_parity_gap(g: C.ParityGap, input_table, outputs, sidecars, rng):
    """Give every protected-group row the positive label and every favoured row another one:
    a gap of 1. Under ``direction: no_reversal`` the gap of 1 points against the input's
    (so it breaks the direction even where ``max`` is 1)."""
    against = g.direction == "no_reversal" and bool(g.input_sign)
    if (g.max >= 1 and not against) or not g.positive:
        return None
    name, table = next(iter(outputs.items()))
    if g.protected not in table.column_names or g.label not in table.column_names:
        return None
    from privfair.components.core.checks import _groups

    prot, fav = _groups(g, table.column(g.protected).to_pandas())
    if not prot.any() or not fav.any():
        return None
    negative = _different(table, g.label, g.positive[0])
    up, down = (fav, prot) if against and g.input_sign > 0 else (prot, fav)
    table = set_cells(table, g.label, np.flatnonzero(up), g.positive[0])
    table = set_cells(table, g.label, np.flatnonzero(down), negative)
    return {**outputs, name: table}, sidecars


def break_retention(g: C.Retention, input_table, outputs, sidecars, rng):
    """Drop every published row of the first protected value (and its lineage)."""
    if g.min_share <= 0 or "lineage" not in sidecars:
        return None
    name, table = next(iter(outputs.items()))
    lin = sidecars["lineage"]
    values = input_table.column(g.protected).take(lin.column("row_id"))
    first = values[0]
    keep = pc.invert(pc.equal(values, first)) if first.is_valid else pc.is_valid(values)
    return {**outputs, name: table.filter(keep)}, {**sidecars, "lineage": lin.filter(keep)}


def _unique(t: pa.DataType, i: int, top):
    """A value of type ``t`` that no published cell holds (``top``: the column's largest flat
    value), the ``i``-th of its kind; None where the type has no room for it."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return f"~unique{i}"
    if pa.types.is_floating(t):
        return float(top or 0) + 1.0 + i
    if pa.types.is_integer(t):
        value = int(top or 0) + 1 + i
        bits = t.bit_width - (0 if pa.types.is_unsigned_integer(t) else 1)
        return value if value < 2**bits else None
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = _unique(t.value_type, i, None)
        return None if inner is None else [inner]
    return None


def _make_unique(table: pa.Table, columns, rows: np.ndarray) -> pa.Table | None:
    """``table`` with each of ``rows`` given a value of one of ``columns`` no other row has
    (the first column whose type has room for them; a struct's first field, a list's one
    value), so each of those rows is a class of its own over any background holding it."""
    for c in columns:
        col = table.column(c)
        t = col.type
        field_name = t.field(0).name if pa.types.is_struct(t) else None
        inner = t.field(0).type if field_name is not None else t
        flat = pc.struct_field(col, [0]) if field_name is not None else col
        top = (
            pc.max(flat).as_py()
            if (pa.types.is_integer(inner) or pa.types.is_floating(inner))
            else None
        )
        values = [_unique(inner, i, top) for i in range(len(rows))]
        if any(v is None for v in values):
            continue
        cells = col.to_pylist()
        for r, v in zip(rows, values, strict=True):
            if field_name is not None:
                cells[int(r)] = {**(cells[int(r)] or {}), field_name: v}
            else:
                cells[int(r)] = v
        i = table.schema.get_field_index(c)
        return table.set_column(i, table.schema.field(i), pa.array(cells, type=t))
    return None


def break_reidentification_risk(g: C.ReidentificationRisk, input_table, outputs, sidecars, rng):
    """Prosecutor: make row 0 a class of its own (risk 1); marketer: every row (classes / rows
    = 1). None for a bound of 1, which no release exceeds."""
    if g.max >= 1 or not g.background:
        return None
    name, table = next(iter(outputs.items()))
    if table.num_rows == 0 or any(c not in table.column_names for c in g.background):
        return None
    rows = np.arange(1 if g.model == "prosecutor" else table.num_rows)
    broken = _make_unique(table, g.background, rows)
    return None if broken is None else ({**outputs, name: broken}, sidecars)


def break_l_diversity(g: C.LDiversity, input_table, outputs, sidecars, rng):
    """Give every row of row 0's class (over the background) row 0's value of the column: that
    class holds one value (l = 1). None for l = 1, which every class meets."""
    if g.l <= 1:
        return None
    name, table = next(iter(outputs.items()))
    if table.num_rows == 0 or g.column not in table.column_names:
        return None
    from privfair.components.core.classes import class_ids

    cols = [c for c in g.background if c != g.column and c in table.column_names]
    ids = class_ids(table, cols) if cols else None
    rows = np.flatnonzero(ids == ids[0]) if ids is not None else np.arange(table.num_rows)
    return {
        **outputs,
        name: set_cells(table, g.column, rows, table.column(g.column)[0].as_py()),
    }, sidecars
