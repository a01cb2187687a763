"""For each synthesis kind, a release that violates it (the test battery feeds these to the
checkers): ``fn(guarantee, input_table, outputs, sidecars, rng) -> (outputs, sidecars)``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.synthesis.selection import tree_path

__all__ = [
    "break_ledger",
    "break_compression",
    "break_structure",
    "break_fair_tree",
    "break_model",
    "break_synthetic",
    "break_schema",
    "break_nulls",
    "break_adaptive_ledger",
    "break_chordal_structure",
]


def _set(table: pa.Table, name: str, values, type_=None) -> pa.Table:
    i = table.schema.get_field_index(name)
    arr = pa.array(values, type=type_ or table.schema.field(i).type)
    return table.set_column(i, table.schema.field(i).with_type(arr.type), arr)


def break_ledger(g, table, outputs, sidecars, rng):
    """The last 2-way step ran with half its planned noise (four times its rho)."""
    ledger = sidecars["ledger"]
    scale = ledger.column("scale").to_numpy().copy()
    rho = ledger.column("rho").to_numpy().copy()
    scale[-1] /= 2
    rho[-1] *= 4
    ledger = _set(_set(ledger, "scale", scale), "rho", rho)
    return outputs, {**sidecars, "ledger": ledger}


def break_compression(g, table, outputs, sidecars, rng):
    """One declared value of the first attribute moved to another compressed code."""
    comp = sidecars["compression"]
    codes = comp.column("compressed").to_numpy().copy()
    codes[0] += 1
    return outputs, {**sidecars, "compression": _set(comp, "compressed", codes)}


def break_structure(g, table, outputs, sidecars, rng):
    """The tree's last edge replaced by one that closes a cycle."""
    tree = sidecars["tree"]
    a, b = tree.column("a").to_pylist(), tree.column("b").to_pylist()
    a[-1], b[-1] = a[0], b[0]
    tree = _set(_set(tree, "a", a), "b", b)
    return outputs, {**sidecars, "tree": tree}


def break_fair_tree(g, table, outputs, sidecars, rng):
    """A spanning tree with a direct protected-outcome edge: the first edge of the tree path
    from an outcome to a protected attribute swapped for that pair."""
    tree = sidecars["tree"]
    edges = list(zip(tree.column("a").to_pylist(), tree.column("b").to_pylist(), strict=True))
    o, p = g.outcomes[0], g.protected[0]
    path = tree_path(edges, o, p)
    first = {path[0], path[1]}
    edges = [e for e in edges if set(e) != first] + [(o, p)]
    new = pa.table(
        {
            "position": pa.array(range(len(edges)), pa.int64()),
            "a": [e[0] for e in edges],
            "b": [e[1] for e in edges],
        }
    )
    return outputs, {**sidecars, "tree": new}


def break_model(g, table, outputs, sidecars, rng):
    """The model gains a clique joining an outcome and a protected attribute, with their joint
    counts from the input (the model is no longer the fair tree)."""
    o, p = g.outcomes[0], g.protected[0]
    _, io = np.unique(
        np.asarray(table.column(o).to_pylist(), dtype=object).astype(str), return_inverse=True
    )
    _, ip = np.unique(
        np.asarray(table.column(p).to_pylist(), dtype=object).astype(str), return_inverse=True
    )
    t = np.zeros((io.max() + 1, ip.max() + 1))
    np.add.at(t, (io, ip), 1.0)
    ii, jj = np.indices(t.shape)
    extra = pa.table(
        {
            "a": [o] * t.size,
            "b": [p] * t.size,
            "code_a": pa.array(ii.ravel(), pa.int64()),
            "code_b": pa.array(jj.ravel(), pa.int64()),
            "count": pa.array(t.ravel(), pa.float64()),
        }
    )
    model = pa.concat_tables([sidecars["model"], extra.cast(sidecars["model"].schema)])
    return outputs, {**sidecars, "model": model}


def break_synthetic(g, table, outputs, sidecars, rng):
    """The first outcome rewritten as a function of the first protected attribute."""
    data = outputs["data"]
    o, p = g.outcomes[0], g.protected[0]
    levels = pc.unique(table.column(o)).drop_null().to_pylist()
    if len(levels) < 2:
        return None
    pv = np.asarray(data.column(p).to_pylist(), dtype=object).astype(str)
    first = pv == pv[0]
    values = [levels[0] if f else levels[1] for f in first]
    if first.all():
        return None
    return {**outputs, "data": _set(data, o, values)}, sidecars


def break_schema(g, table, outputs, sidecars, rng):
    """The synthetic table loses its last row and its first column changes type."""
    data = outputs["data"].slice(0, outputs["data"].num_rows - 1)
    name = data.column_names[0]
    data = _set(data, name, [str(v) for v in data.column(name).to_pylist()], pa.string())
    return {**outputs, "data": data}, sidecars


def break_nulls(g, table, outputs, sidecars, rng):
    """One value of the first column without a declared null level set to null (as a model
    with a null level everywhere would publish it); None when every column declares one."""
    data = outputs["data"]
    name = next((c for c in data.column_names if c not in g.nullable), None)
    if name is None or data.num_rows == 0:
        return None
    i = data.schema.get_field_index(name)
    col = data.column(name).combine_chunks()
    hole = np.zeros(len(col), bool)
    hole[int(rng.integers(len(col)))] = True
    arr = pc.if_else(pa.array(hole), pa.nulls(len(col), col.type), col)
    return {**outputs, "data": data.set_column(i, data.schema.field(i), arr)}, sidecars


def break_adaptive_ledger(g, table, outputs, sidecars, rng):
    """The last 2-way step ran with half its noise (four times its rho)."""
    return break_ledger(g, table, outputs, sidecars, rng)


def break_chordal_structure(g, table, outputs, sidecars, rng):
    """The model gains an edge between two attributes no round selected (the first attribute
    and one it was never measured with), with the input's joint counts."""
    cl = sidecars["cliques"]
    names = table.column_names
    picked = zip(cl.column("a").to_pylist(), cl.column("b").to_pylist(), strict=True)
    have = {frozenset(e) for e in picked}
    pair = next(
        ((a, b) for a in names for b in names if a != b and frozenset((a, b)) not in have), None
    )
    if pair is None:
        return None
    a, b = pair
    extra = pa.table(
        {
            "a": [a],
            "b": [b],
            "code_a": pa.array([0], pa.int64()),
            "code_b": pa.array([0], pa.int64()),
            "count": pa.array([float(table.num_rows)], pa.float64()),
        }
    )
    model = pa.concat_tables([sidecars["model"], extra.cast(sidecars["model"].schema)])
    return outputs, {**sidecars, "model": model}
