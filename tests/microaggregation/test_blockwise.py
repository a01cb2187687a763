"""One block at a time (``privfair.components.microaggregation.blockwise``): the blocks'
protections, numbered and put in canonical order, publish exactly the component's rows and
lineage, for Fair-MDAV (fairlets, MDAV grouping, every correction and publication form) and
blocked or not."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfair.components.microaggregation.blocking import block_sizes, split_blocks
from privfair.components.microaggregation.blockwise import (
    FLAGS,
    GROUP,
    LINEAGE,
    RANK,
    ROW,
    SEED,
    number_groups,
    plan_of,
    protect_block,
    with_positions,
)
from privfair.components.microaggregation.columns import publish_order_typed
from privfair.components.microaggregation.encoding import encode_qis, indicator
from privfair.components.microaggregation.fair_mdav import fair_mdav
from privfair.components.microaggregation.params import FairMDAVParams
from privfair.schemas.errors import InputError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles


def table(n_rows: int, seed: int = 3) -> pa.Table:
    """Two numeric QIs (one with ties), a nominal and an ordinal one, a string protected
    attribute, a boolean label and a column copied through."""
    rng = np.random.default_rng(seed)
    prot = np.where(rng.random(n_rows) < 0.35, "F", "U")
    y = np.where(prot == "F", rng.random(n_rows) < 0.6, rng.random(n_rows) < 0.3)
    roles = TableRoles.of(
        [
            ColumnRole("x", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
            ColumnRole("z", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
            ColumnRole("c", Role.QUASI_IDENTIFIER, Kind.NOMINAL),
            ColumnRole("o", Role.QUASI_IDENTIFIER, Kind.ORDINAL, domain=("lo", "mid", "hi")),
            ColumnRole("PA", Role.PROTECTED, Kind.BINARY, favoured="auto"),
            ColumnRole("y", Role.LABEL, Kind.BINARY, positive=True),
            ColumnRole("note", Role.PUBLIC, Kind.NOMINAL),
        ]
    )
    return attach_roles(
        pa.table(
            {
                "x": rng.normal(40, 12, n_rows).round(1),
                "z": rng.integers(0, 5, n_rows),
                "c": pa.array(rng.choice(["a", "b", "c", "d"], n_rows)).dictionary_encode(),
                "o": rng.choice(["lo", "mid", "hi"], n_rows),
                "PA": prot,
                "y": y,
                "note": rng.choice(["p", "q", None], n_rows),
            }
        ),
        roles,
    )


def blockwise(t: pa.Table, params: FairMDAVParams) -> tuple[pa.Table, pa.Table]:
    """The release as the executors would make it: split, each block protected on its own,
    groups numbered, canonical order."""
    plan = plan_of(t, params)
    rows = with_positions(t)
    if params.block_rows is None or t.num_rows <= params.block_rows:
        blocks = np.zeros(t.num_rows, dtype=np.int64)
    else:
        enc = encode_qis(t, plan.roles, params.scaling)
        part = (
            indicator(t.column(plan.protected), plan.favoured, list(plan.pa_values))
            if params.grouping == "fairlet"
            else np.zeros(t.num_rows, dtype=np.int8)
        )
        bu, bf = block_sizes(params.grouping, plan.k, plan.m, plan.n)
        blocks = split_blocks(enc.numeric, enc.codes, part, bu, bf, params.block_rows)
    # each block reaches its executor in an order of its own
    outs = [
        protect_block(
            plan,
            rows.filter(pa.array(blocks == b)).take(
                np.random.default_rng(b).permutation(int((blocks == b).sum()))
            ),
        )
        for b in np.unique(blocks)
    ]
    done = number_groups(outs)
    lineage = pa.table(
        {
            "row_id": done.column(ROW),
            "group": done.column(GROUP),
            "rank": done.column(RANK),
            "is_seed": done.column(SEED),
        }
    )
    data = done.drop_columns([*LINEAGE, *FLAGS])
    return publish_order_typed(data, lineage)


def same(t: pa.Table, params: FairMDAVParams) -> None:
    """The blocks publish the component's bytes; an input the component refuses, the plan
    refuses with the same words."""
    try:
        r = fair_mdav(t, params)
    except InputError as e:
        with pytest.raises(InputError) as refused:
            plan_of(t, params)
        assert str(refused.value) == str(e)
        return
    data, lineage = blockwise(t, params)
    # the stamp (component, params, contract) is the run's, made once for the whole table
    assert data.equals(r.outputs["data"].replace_schema_metadata(None), check_metadata=True)
    assert lineage.equals(r.sidecars["lineage"])


@settings(max_examples=40, deadline=None)
@given(
    n_rows=st.integers(8, 300),
    seed=st.integers(0, 10_000),
    block_rows=st.one_of(st.none(), st.integers(8, 120)),
    grouping=st.sampled_from(["fairlet", "mdav"]),
    correction=st.sampled_from(["positive", "negative"]),
    publish=st.sampled_from(["schema", "onehot"]),
    tau=st.sampled_from([0.0, 0.7, 1.0]),
)
def test_blocks_publish_the_component_release(
    n_rows, seed, block_rows, grouping, correction, publish, tau
):
    params = FairMDAVParams(
        k=4,
        tau=tau,
        grouping=grouping,
        correction=correction,
        publish=publish,
        block_rows=block_rows,
    )
    same(table(n_rows, seed), params)


def test_adult_blocked(builtin_table):
    t = builtin_table("adult").slice(0, 6000)
    same(t, FairMDAVParams(k=5, tau=0.8, block_rows=700))


def test_random_relabel_order_is_refused():
    t = table(40)
    plan = plan_of(t, FairMDAVParams(k=4, relabel_order="random"))
    with pytest.raises(ValueError, match="whole table"):
        protect_block(plan, with_positions(t))


def plans_equal(a, b) -> None:
    """Two plans hold the same facts (the template's arrays compared by value)."""
    for f in ("params", "k", "m", "n", "schema", "protected", "label", "pa_values", "favoured"):
        assert getattr(a, f) == getattr(b, f), f
    assert a.label_values == b.label_values and a.label_out == b.label_out
    ta, tb = a.template, b.template
    assert ta.numeric_names == tb.numeric_names and ta.nominal == tb.nominal
    assert ta.domains == tb.domains
    np.testing.assert_array_equal(ta.offset, tb.offset)
    np.testing.assert_array_equal(ta.scale, tb.scale)


@settings(max_examples=40, deadline=None)
@given(
    n_rows=st.integers(0, 200),
    seed=st.integers(0, 10_000),
    k=st.integers(2, 12),
    grouping=st.sampled_from(["fairlet", "mdav"]),
    favoured=st.sampled_from(["auto", "F", "U"]),
    nulls=st.sets(st.sampled_from(["PA", "y", "o", "c", "x"]), max_size=2),
    batch_rows=st.integers(1, 64),
)
def test_frame_plan_is_the_table_plan(n_rows, seed, k, grouping, favoured, nulls, batch_rows):
    """The plan from counts and ranges alone (what a cluster sends back) is the plan of the
    rows, or the same refusal."""
    from privfair.components.core.frames import TableFrame
    from privfair.components.microaggregation.blockwise import plan_of_frame

    t = table(n_rows, seed)
    meta = {f.name: f.metadata for f in t.schema}
    meta["PA"] = {**meta["PA"], b"privfair.favoured": f'["{favoured}"]'.encode()}
    for name in nulls:  # a null in the first row
        col = t.column(name).to_pylist()
        if col:
            col[0] = None
        t = t.set_column(
            t.schema.get_field_index(name),
            t.schema.field(name),
            pa.array(col, t.schema.field(name).type),
        )
    t = pa.table(t.columns, schema=pa.schema([f.with_metadata(meta[f.name]) for f in t.schema]))
    params = FairMDAVParams(k=k, grouping=grouping, block_rows=50)
    try:
        want = plan_of(t, params)
    except InputError as e:
        with pytest.raises(InputError) as refused:
            plan_of_frame(TableFrame(t, batch_rows), params)
        assert str(refused.value) == str(e)
        return
    plans_equal(plan_of_frame(TableFrame(t, batch_rows), params), want)
