"""Ordinary Arrow types (issue 22): the columns pandas 3, polars and lakehouse readers hand over
(``large_string``, ``string_view``, dictionary, i.e. a pandas Categorical, ordered or not) run
through dMondrian and dSabre, their evidence and their checkers.

Before issue 22 a dictionary PND attribute crashed the run (``ArrowIndexError``), a dictionary or
``string_view`` PD attribute was refused as if a PD group were missing, and a ``string_view``
column crashed Arrow's take and sort kernels.
"""

from __future__ import annotations

import io

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from privfair.components.core.checks import check_contract
from privfair.components.generalisation.audit import evidence
from privfair.components.generalisation.contract import contract
from privfair.components.generalisation.dmondrian import dmondrian
from privfair.components.generalisation.domains import Domain
from privfair.components.generalisation.dsabre import dsabre
from privfair.components.generalisation.examples import table as random_table
from privfair.components.generalisation.examples import toy_table
from privfair.components.generalisation.params import DMondrianParams, DSabreParams
from privfair.schemas.roles import ColumnRole, Kind, Role, attach_roles, read_roles

ALGOS = [("dmondrian", dmondrian, DMondrianParams), ("dsabre", dsabre, DSabreParams)]


def _dictionary(c: pa.ChunkedArray, ordered: bool = False) -> pa.ChunkedArray:
    """Dictionary-encoded; ordered: categories sorted, as pandas sorts them by default (so the
    order they give is the lexicographic one the plain column gets)."""
    if not ordered:
        return c.dictionary_encode()
    categories = pa.array(sorted(v for v in set(c.to_pylist()) if v is not None), c.type)
    indices = pc.index_in(c, value_set=categories).combine_chunks().cast(pa.int32())
    return pa.chunked_array([pa.DictionaryArray.from_arrays(indices, categories, ordered=True)])


TYPES = {
    "large_string": lambda c: c.cast(pa.large_string()),
    "string_view": lambda c: c.cast(pa.string_view()),
    "dictionary": _dictionary,
    "ordered_dictionary": lambda c: _dictionary(c, ordered=True),
}


def _retyped(table: pa.Table, names, convert) -> pa.Table:
    fields, cols = [], []
    for f, c in zip(table.schema, table.columns, strict=True):
        if f.name in names:
            c = convert(c)
            f = f.with_type(c.type)
        fields.append(f)
        cols.append(c)
    return pa.Table.from_arrays(cols, schema=pa.schema(fields, metadata=table.schema.metadata))


CASES = [
    ("toy", "purpose"),  # ordinal PND, declared order
    ("toy", "sex"),  # binary PD attribute, published unchanged
    ("toy", "dec"),  # decision
    ("random", "level"),  # ordinal PND
    ("random", "region"),  # nominal PND with nulls
    ("random", "group"),  # three-valued PD attribute, published as its groups
]


@pytest.mark.parametrize("type_name", list(TYPES))
@pytest.mark.parametrize(("source", "column"), CASES)
@pytest.mark.parametrize(("name", "algo", "P"), ALGOS)
def test_a_column_of_each_type_runs_and_validates(type_name, source, column, name, algo, P):
    base = toy_table() if source == "toy" else random_table(3, 120)
    table = _retyped(base, {column}, TYPES[type_name])
    params = P(t=0.3, utility_queries=50, audit_random_itemsets=20, single_class="allow")
    result = algo(table, params)
    reference = algo(base, params)
    # the same classes as with plain strings
    assert (
        result.sidecars["lineage"].column("class").to_pylist()
        == reference.sidecars["lineage"].column("class").to_pylist()
    )
    frames = evidence(table, result.outputs, result.sidecars, params)
    failed = [
        r.to_dict() for r in check_contract(contract(params, table, name), frames) if not r.passed
    ]
    assert not failed
    # the release survives Parquet and validates from the file, as the pipeline reads it
    buf = io.BytesIO()
    pq.write_table(result.table, buf)
    back = pq.read_table(io.BytesIO(buf.getvalue()))
    frames = evidence(table, {"data": back}, result.sidecars, params)
    assert all(r.passed for r in check_contract(contract(params, table, name), frames))


@pytest.mark.parametrize("type_name", list(TYPES))
@pytest.mark.parametrize(("name", "algo", "P"), ALGOS)
def test_labels_read_back_in_another_string_type_still_validate(type_name, name, algo, P):
    """A lakehouse reader may hand the published labels back as ``large_string``,
    ``string_view`` or dictionary values: they are still the same labels."""
    table = random_table(5, 100)
    params = P(t=0.3, utility_queries=0, audit_random_itemsets=20, single_class="allow")
    result = algo(table, params)
    data = result.table
    fields, cols = [], []
    for f, c in zip(data.schema, data.columns, strict=True):
        if pa.types.is_struct(f.type) and pa.types.is_string(f.type.field("lo").type):
            t = TYPES[type_name](pa.chunked_array([pa.array(["x"])])).type
            c = c.cast(pa.struct([("lo", t), ("hi", t)]))
        elif pa.types.is_list(f.type) and pa.types.is_string(f.type.value_type):
            t = TYPES[type_name](pa.chunked_array([pa.array(["x"])])).type
            c = c.cast(pa.list_(pa.field("element", t)))
        elif pa.types.is_string(f.type):
            c = TYPES[type_name](c)
        fields.append(f.with_type(c.type))
        cols.append(c)
    retyped = pa.Table.from_arrays(cols, schema=pa.schema(fields))
    frames = evidence(table, {"data": retyped}, result.sidecars, params)
    failed = [
        r.to_dict() for r in check_contract(contract(params, table, name), frames) if not r.passed
    ]
    assert not failed


@pytest.mark.parametrize(("name", "algo", "P"), ALGOS)
def test_a_pandas_ordered_categorical_gives_the_domain_order(name, algo, P):
    """An ordinal PND attribute stored as a pandas ordered Categorical needs no ``domain``: its
    categories are the order (the values present, in category order)."""
    df = toy_table().to_pandas()
    df["purpose"] = pd.Categorical(df["purpose"], categories=["housing", "car"], ordered=True)
    df["emp"] = pd.Categorical(df["emp"], categories=["no", "maybe", "yes"], ordered=True)
    table = pa.Table.from_pandas(df, preserve_index=False)
    roles = read_roles(toy_table())
    roles = roles.replace(ColumnRole("purpose", Role.QUASI_IDENTIFIER, Kind.ORDINAL))
    roles = roles.replace(ColumnRole("emp", Role.QUASI_IDENTIFIER, Kind.ORDINAL))
    table = attach_roles(table, roles)
    result = algo(table, P(t=0.25, utility_queries=0))
    reference = algo(toy_table(), P(t=0.25, utility_queries=0))
    assert (
        result.table.column("purpose").to_pylist() == reference.table.column("purpose").to_pylist()
    )
    assert result.table.column("emp").to_pylist() == reference.table.column("emp").to_pylist()
    assert not [w for w in result.warnings if "lexicographic" in w]


def test_a_categorical_against_a_declared_order_follows_the_declaration():
    col = pa.chunked_array([pa.array(["b", "a", "c", "a"]).dictionary_encode()])
    d = Domain.of("x", col, "ordinal", ("c", "b", "a"))
    assert d.values == ["c", "b", "a"] and d.ranks.tolist() == [1, 2, 0, 2]
    assert d.arrow_type == pa.string()
