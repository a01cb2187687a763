"""Releases that break one microaggregation guarantee each, for the test battery.

Same signature as ``privfair.components.core.corruptions``: ``(guarantee, input_table, outputs,
sidecars, rng) -> (outputs, sidecars)`` or None when no release can break the guarantee.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from privfair.components.core.corruptions import set_cells
from privfair.components.microaggregation import guarantees as G
from privfair.schemas.roles import Role, read_roles

__all__ = [
    "break_group_size_range",
    "break_qi_values",
    "break_representatives",
    "break_sums",
    "break_fairlet_composition",
    "break_fairlet_count",
    "break_labels_direction",
    "break_local_fairness",
    "break_parity",
    "break_minimal_correction",
    "break_seed_nearest",
]


def _role(table: pa.Table, role: Role) -> str:
    return read_roles(table).with_role(role)[0].name


def _lineage_col(sidecars, name: str, values) -> dict:
    lin = sidecars["lineage"]
    i = lin.schema.get_field_index(name)
    return {
        **sidecars,
        "lineage": lin.set_column(
            i, lin.schema.field(i), pa.array(values, lin.schema.field(i).type)
        ),
    }


def break_group_size_range(g: G.GroupSizeRange, input_table, outputs, sidecars, rng):
    """Move one row into a group of its own."""
    if g.min_size <= 1:
        return None
    grp = sidecars["lineage"].column("group").to_numpy().copy()
    grp[0] = grp.max() + 1
    return outputs, _lineage_col(sidecars, "group", grp)


def break_qi_values(g, input_table, outputs, sidecars, rng):
    """Shift one published numeric QI cell (group means, unchanged QIs and sums all break)."""
    data = outputs["data"]
    qis = list(g.quasi_identifiers) or read_roles(data).quasi_identifiers
    q = qis[0]
    v = data.column(q)[0].as_py()
    return {
        **outputs,
        "data": set_cells(data, q, np.array([0]), v + 0.5 if isinstance(v, float) else v + 1),
    }, sidecars


def break_representatives(g: G.GroupRepresentatives, input_table, outputs, sidecars, rng):
    """Publish a null for a whole group one of whose members has a value in a nominal QI (the
    members still agree: only the rule "a null only where every member is null" catches it);
    a release without such a group gets a numeric cell shifted (``break_qi_values``)."""
    data = outputs["data"]
    roles = read_roles(input_table)
    lin = sidecars["lineage"]
    row_id = lin.column("row_id").to_numpy()
    grp = lin.column("group").to_numpy()
    for q in g.quasi_identifiers or roles.quasi_identifiers:
        if q in g.decimals or q in g.ordinal or q not in data.column_names:
            continue
        valued = input_table.column(q).is_valid().to_numpy(zero_copy_only=False)[row_id]
        if valued.any():
            rows = np.flatnonzero(grp == grp[np.flatnonzero(valued)[0]])
            return {**outputs, "data": set_cells(data, q, rows, None)}, sidecars
    return break_qi_values(g, input_table, outputs, sidecars, rng)


def break_sums(g: G.MeanPreservation, input_table, outputs, sidecars, rng):
    """Shift one published cell by more than the rounding the guarantee allows."""
    data = outputs["data"]
    q = g.quasi_identifiers[0] if g.quasi_identifiers else None
    if q is None:
        return None
    allowed = data.num_rows * 0.5 * 10.0 ** -g.decimals[q] if q in g.decimals else 0.0
    v = data.column(q)[0].as_py()
    shift = 2 * allowed + 1  # past the bound whatever the rounding already used
    new = v + shift if isinstance(v, float) else v + int(np.ceil(shift))
    return {**outputs, "data": set_cells(data, q, np.array([0]), new)}, sidecars


def break_fairlet_composition(g: G.FairletComposition, input_table, outputs, sidecars, rng):
    """Swap row 0's protected value for the other one."""
    data = outputs["data"]
    p = _role(data, Role.PROTECTED)
    values = data.column(p).to_pylist()
    other = next(v for v in input_table.column(p).unique().to_pylist() if v != values[0])
    return {**outputs, "data": set_cells(data, p, np.array([0]), other)}, sidecars


def break_fairlet_count(g: G.FairletCount, input_table, outputs, sidecars, rng):
    """Drop the last fairlet from the table and the lineage."""
    grp = sidecars["lineage"].column("group").to_numpy()
    keep = pa.array(np.flatnonzero(grp != grp.max()))
    return {**outputs, "data": outputs["data"].take(keep)}, {
        **sidecars,
        "lineage": sidecars["lineage"].take(keep),
    }


def _labels(outputs, input_table, sidecars):
    data = outputs["data"]
    lab = _role(data, Role.LABEL)
    row_id = sidecars["lineage"].column("row_id").to_numpy()
    y_in = np.asarray(input_table.column(lab).to_pylist(), dtype=object)[row_id]
    y_out = np.asarray(data.column(lab).to_pylist(), dtype=object)
    values = sorted(input_table.column(lab).unique().to_pylist(), key=str)
    return data, lab, y_in, y_out, values


def break_labels_direction(g: G.CorrectionDirection, input_table, outputs, sidecars, rng):
    """Flip a label that the declared direction never changes (a positive input label for
    positive correction, a negative one for negative correction, any one for none)."""
    data, lab, y_in, y_out, values = _labels(outputs, input_table, sidecars)
    positive = read_roles(input_table)[lab].positive
    pos = positive[0] if positive else values[-1]
    want = {"positive": pos, "negative": None, "none": None}[g.direction]
    if g.direction == "negative":
        want = next(v for v in values if v != pos)
    rows = np.flatnonzero((y_in == y_out) & ((y_in == want) if want is not None else True))
    if not len(rows):
        return None
    r = rows[0]
    other = next(v for v in values if v != y_out[r])
    return {**outputs, "data": set_cells(data, lab, np.array([r]), other)}, sidecars


def break_minimal_correction(g: G.MinimalCorrection, input_table, outputs, sidecars, rng):
    """Flip one more label than the correction needed."""
    data, lab, y_in, y_out, values = _labels(outputs, input_table, sidecars)
    r = int(np.flatnonzero(y_in == y_out)[0])
    other = next(v for v in values if v != y_out[r])
    return {**outputs, "data": set_cells(data, lab, np.array([r]), other)}, sidecars


def _polarise(input_table, outputs, sidecars):
    """Every unfavoured row negative, every favoured row positive (PR_U = 0, PR_F = 1)."""
    data = outputs["data"]
    lab, p = _role(data, Role.LABEL), _role(data, Role.PROTECTED)
    roles = read_roles(input_table)
    pos = (roles[lab].positive or (None,))[0]
    values = sorted(input_table.column(lab).unique().to_pylist(), key=str)
    pos = pos if pos is not None else values[-1]
    neg = next(v for v in values if v != pos)
    y = np.asarray(input_table.column(lab).to_pylist(), dtype=object)
    s = np.asarray(input_table.column(p).to_pylist(), dtype=object)
    pr = {v: float(np.mean(y[s == v] == pos)) for v in set(s.tolist())}
    fav = max(pr, key=lambda v: (pr[v], str(v)))
    prot = np.asarray(data.column(p).to_pylist(), dtype=object)
    new = np.where(prot == fav, pos, neg)
    i = data.schema.get_field_index(lab)
    f = data.schema.field(i)
    return {**outputs, "data": data.set_column(i, f, pa.array(new.tolist(), f.type))}, sidecars


def break_local_fairness(g: G.LocalFairness, input_table, outputs, sidecars, rng):
    """Polarise the labels: upr = 0 < tau * fpr in every group with a favoured row."""
    return None if g.tau == 0 else _polarise(input_table, outputs, sidecars)


def break_parity(g: G.DemographicParityBound, input_table, outputs, sidecars, rng):
    """Polarise the labels: PR_U = 0 < ratio * PR_F = ratio."""
    return None if g.ratio == 0 else _polarise(input_table, outputs, sidecars)


def break_seed_nearest(g: G.SeedNearest, input_table, outputs, sidecars, rng):
    """Record a second seed in the first group."""
    lin = sidecars["lineage"]
    seed = lin.column("is_seed").to_numpy(zero_copy_only=False).copy()
    grp = lin.column("group").to_numpy()
    first = np.flatnonzero((grp == grp[0]) & ~seed)
    if not len(first):
        return None
    seed[first[0]] = True
    return outputs, _lineage_col(sidecars, "is_seed", seed)
