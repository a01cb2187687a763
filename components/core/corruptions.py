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
