"""Releases that break one generalisation guarantee each, for the test battery.

Each function takes ``(guarantee, input_table, outputs, sidecars, rng)`` and returns
``(outputs, sidecars)`` changed the way a bug or a tampering would, or None when no release can
break the guarantee with these parameters (e.g. a bound that is vacuous at this t).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from privfair.components.generalisation import guarantees as G
from privfair.components.generalisation.inputs import prepare
from privfair.components.generalisation.measures import t_max

__all__ = [
    "break_pd_groups",
    "break_truthful_generalisation",
    "break_class_labels",
    "break_decision_closeness",
    "break_leaf_closeness",
    "break_bounded_discrimination",
    "break_class_size",
    "break_disjoint_classes",
    "break_dichotomy_leaves",
]


def _labels(input_table: pa.Table, data: pa.Table):
    prep = prepare(input_table, None)
    cur = {d.name: d.from_arrow(data.column(d.name)) for d in prep.domains}
    return prep, cur


def _set_labels(data: pa.Table, domain, lo: np.ndarray, hi: np.ndarray) -> pa.Table:
    i = data.schema.get_field_index(domain.name)
    return data.set_column(i, data.schema.field(i), domain.to_arrow(lo, hi))


def _set_column(data: pa.Table, name: str, values: list) -> pa.Table:
    i = data.schema.get_field_index(name)
    f = data.schema.field(i)
    return data.set_column(i, f, pa.array(values, type=f.type))


def _row_ids(sidecars) -> np.ndarray:
    """The input row of each published row (rows are published in an order of their values,
    not in input order)."""
    return sidecars["lineage"].column("row_id").to_numpy()


def _classes(sidecars) -> np.ndarray:
    return sidecars["lineage"].column("class").to_numpy().copy()


def _with_classes(sidecars, classes: np.ndarray) -> dict:
    s = sidecars["lineage"]
    i = s.schema.get_field_index("class")
    return {**sidecars, "lineage": s.set_column(i, s.schema.field(i), pa.array(classes))}


def break_pd_groups(g: G.PublishedGroups, input_table, outputs, sidecars, rng):
    """Publish the PD attribute finer than its groups: its raw input values, row by row (what
    a release of a many-valued PD attribute published before issue 22); for a PD attribute
    published unchanged (two values), each row with the other group's value."""
    prep = prepare(input_table, None)
    source = prep.table.column(prep.pd)
    rows = _row_ids(sidecars)
    if g.groups:
        new = source.take(pa.array(rows))
    else:
        p0 = int(np.flatnonzero(prep.protected)[0])
        u0 = int(np.flatnonzero(~prep.protected)[0])
        new = source.take(pa.array(np.where(prep.protected[rows], u0, p0)))
    data = outputs["data"]
    i = data.schema.get_field_index(prep.pd)
    return {**outputs, "data": data.set_column(i, prep.table.schema.field(prep.pd), new)}, sidecars


def break_truthful_generalisation(g: G.TruthfulGeneralisation, input_table, outputs, sidecars, rng):
    """Publish row 0 with another value of a PND attribute than its own."""
    prep, cur = _labels(input_table, outputs["data"])
    row = _row_ids(sidecars)[0]
    for d in prep.domains:
        if d.name in g.attributes and d.size > 1:
            lo, hi = (x.copy() for x in cur[d.name])
            other = (d.ranks[row] + 1) % d.size
            lo[0] = hi[0] = other
            return {**outputs, "data": _set_labels(outputs["data"], d, lo, hi)}, sidecars
    return None


def break_class_labels(g: G.ClassLabels, input_table, outputs, sidecars, rng):
    """Widen one class's label beyond [min, max] of its values (still holding them)."""
    prep, cur = _labels(input_table, outputs["data"])
    classes = _classes(sidecars)
    for d in prep.domains:
        lo, hi = (x.copy() for x in cur[d.name])
        narrow = (lo > 0) | (hi < d.size - 1)
        if d.name in g.attributes and narrow.any():
            c = classes[np.flatnonzero(narrow)[0]]
            rows = classes == c
            lo[rows], hi[rows] = 0, d.size - 1
            return {**outputs, "data": _set_labels(outputs["data"], d, lo, hi)}, sidecars
    # every label is already global: narrow one member's label to its own value
    row = _row_ids(sidecars)[0]
    for d in prep.domains:
        lo, hi = (x.copy() for x in cur[d.name])
        if d.name in g.attributes and lo[0] < hi[0] and (classes == classes[0]).sum() > 1:
            lo[0] = hi[0] = d.ranks[row]
            return {**outputs, "data": _set_labels(outputs["data"], d, lo, hi)}, sidecars
    return None


def _decisions(input_table):
    prep = prepare(input_table, None)
    values = input_table.column(prep.decision).to_pylist()
    neg = next(v for v, n in zip(values, prep.negative, strict=False) if n)
    pos = next(v for v, n in zip(values, prep.negative, strict=False) if not n)
    return prep, neg, pos


def break_decision_closeness(g: G.DecisionCloseness, input_table, outputs, sidecars, rng):
    """Give every row of row 0's class one decision, so its q-blocks sit far from p-."""
    prep, neg, pos = _decisions(input_table)
    if g.t >= t_max(prep.p_minus) - 1e-9:
        return None
    value = neg if 1 - prep.p_minus > g.t else pos
    classes = _classes(sidecars)
    data = outputs["data"]
    values = data.column(prep.decision).to_pylist()
    for r in np.flatnonzero(classes == classes[0]):
        values[int(r)] = value
    return {**outputs, "data": _set_column(data, prep.decision, values)}, sidecars


def break_leaf_closeness(g: G.LeafCloseness, input_table, outputs, sidecars, rng):
    """Put every protected negative (or positive) row in a class of its own."""
    prep = prepare(input_table, None)
    if g.t_eff >= t_max(prep.p_minus) - 1e-9:
        return None
    cell = 0 if 1 - prep.p_minus > g.t_eff else 1
    classes = _classes(sidecars)
    classes[prep.cell[_row_ids(sidecars)] == cell] = classes.max() + 1
    return outputs, _with_classes(sidecars, classes)


def break_bounded_discrimination(g: G.BoundedDiscrimination, input_table, outputs, sidecars, rng):
    """Publish every protected row with the negative decision, every other with the positive."""
    prep, neg, pos = _decisions(input_table)
    if g.t >= t_max(prep.p_minus) - 1e-9:
        return None
    values = [neg if p else pos for p in prep.protected[_row_ids(sidecars)]]
    return {**outputs, "data": _set_column(outputs["data"], prep.decision, values)}, sidecars


def break_class_size(g: G.ClassSize, input_table, outputs, sidecars, rng):
    """Publish one row with its original PND values, alone in its class."""
    if g.k <= 1 or input_table.num_rows < g.k:
        return None
    prep, cur = _labels(input_table, outputs["data"])
    keys = np.column_stack([np.column_stack(cur[d.name]) for d in prep.domains])
    row_id = _row_ids(sidecars)
    for r in range(min(input_table.num_rows, 200)):
        new = keys.copy()
        for j, d in enumerate(prep.domains):
            new[r, 2 * j] = new[r, 2 * j + 1] = d.ranks[row_id[r]]
        same = (new == new[r]).all(axis=1).sum()
        if same < g.k:
            data = outputs["data"]
            for j, d in enumerate(prep.domains):
                data = _set_labels(data, d, new[:, 2 * j], new[:, 2 * j + 1])
            return {**outputs, "data": data}, sidecars
    return None


def break_disjoint_classes(g: G.DisjointClasses, input_table, outputs, sidecars, rng):
    """Split a class in two ids (two classes with the same labels)."""
    classes = _classes(sidecars)
    sizes = np.bincount(classes)
    if sizes.max() < 2:
        return None
    c = int(np.argmax(sizes))
    rows = np.flatnonzero(classes == c)
    classes[rows[: len(rows) // 2]] = classes.max() + 1
    return outputs, _with_classes(sidecars, classes)


def break_dichotomy_leaves(g: G.DichotomyLeaves, input_table, outputs, sidecars, rng):
    """Merge two classes (or split the only one)."""
    classes = _classes(sidecars)
    uniq = np.unique(classes)
    if len(uniq) >= 2:
        classes[classes == uniq[1]] = uniq[0]
    elif len(classes) >= 2:
        classes[: len(classes) // 2] = uniq[0] + 1
    else:
        return None
    return outputs, _with_classes(sidecars, classes)
