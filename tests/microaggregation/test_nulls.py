"""Nulls in a nominal quasi-identifier (issue 22): a group's published value is the mode of its
members' non-null values, a null only for a group whose members are all null, so a row whose
input has a value is never published with a null; and the ``group_representatives`` checker
holds a release to that rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from privfair.components.core.checks import check_contract
from privfair.components.microaggregation.audit import build_audit
from privfair.components.microaggregation.fair_mdav import fair_mdav
from privfair.components.microaggregation.mdav import mdav
from privfair.components.microaggregation.params import FairMDAVParams, MDAVParams
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles

ROLES = [
    ColumnRole("x", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
    ColumnRole("c", Role.QUASI_IDENTIFIER, Kind.NOMINAL),
]
FAIR_ROLES = [
    *ROLES,
    ColumnRole("PA", Role.PROTECTED, Kind.BINARY, favoured="auto"),
    ColumnRole("y", Role.LABEL, Kind.BINARY, positive=1),
]


def mdav_table() -> pa.Table:
    """Two groups of three far apart on ``x``: the first holds two nulls and one 'a' (nulls
    are its most frequent 'value'), the second only nulls."""
    return attach_roles(
        pa.table(
            {
                "x": [1.0, 2.0, 3.0, 100.0, 101.0, 102.0],
                "c": pa.array([None, "a", None, None, None, None], pa.string()),
            }
        ),
        TableRoles.of(ROLES),
    )


def fair_table() -> pa.Table:
    """Three (1, 2)-fairlets far apart on ``x``: the first has two nulls and one 'b', the
    second only nulls, the third only 'a'."""
    return attach_roles(
        pa.table(
            {
                "x": [1.0, 1.5, 2.0, 50.0, 50.5, 51.0, 100.0, 100.5, 101.0],
                "c": pa.array([None, None, "b", None, None, None, "a", "a", "a"], pa.string()),
                "PA": ["F", "F", "U"] * 3,
                "y": [1, 1, 0, 1, 0, 0, 1, 1, 1],
            }
        ),
        TableRoles.of(FAIR_ROLES),
    )


def published_by_input_row(result, column: str) -> list:
    """The published value of ``column`` of each input row (by the lineage)."""
    row_id = result.sidecars["lineage"].column("row_id").to_pylist()
    values = result.outputs["data"].column(column).to_pylist()
    out = [None] * (max(row_id) + 1)
    for r, v in zip(row_id, values, strict=True):
        out[r] = v
    return out


def test_mdav_never_publishes_a_null_for_a_row_with_a_value():
    t = mdav_table()
    r = mdav(t, MDAVParams(k=3))
    # the group of rows 0-2 has one value among its members: everyone gets it; the group of
    # rows 3-5 has none: its nulls stay
    assert published_by_input_row(r, "c") == ["a", "a", "a", None, None, None]


def test_fair_mdav_never_publishes_a_null_for_a_row_with_a_value():
    t = fair_table()
    r = fair_mdav(t, FairMDAVParams(m=1, n=2, tau=0.0))
    assert published_by_input_row(r, "c") == ["b"] * 3 + [None] * 3 + ["a"] * 3


@pytest.mark.parametrize("seed", range(5))
def test_null_only_where_every_member_is_null(seed):
    """On random tables with many nulls: a published null only for a group whose members are
    all null, and the published value otherwise the mode of the members' values."""
    rng = np.random.default_rng(seed)
    n = 60
    c = rng.choice(["a", "b", "c"], n).astype(object)
    c[rng.random(n) < 0.6] = None
    t = attach_roles(
        pa.table({"x": rng.normal(size=n), "c": pa.array(c.tolist(), pa.string())}),
        TableRoles.of(ROLES),
    )
    r = mdav(t, MDAVParams(k=4))
    groups: dict[int, list[tuple]] = {}
    lin = r.sidecars["lineage"]
    for row, group, out in zip(
        lin.column("row_id").to_pylist(),
        lin.column("group").to_pylist(),
        r.outputs["data"].column("c").to_pylist(),
        strict=True,
    ):
        groups.setdefault(group, []).append((c[row], out))
    for members in groups.values():
        (out,) = {o for _, o in members}  # one representative per group
        values = pd.Series([v for v, _ in members if v is not None], dtype=object)
        if values.empty:
            assert out is None
        else:
            counts = values.value_counts()
            assert out == min(counts.index[counts == counts.max()])


def representatives_check(table: pa.Table, published: pa.Table, result):
    (g,) = [x for x in result.contract if x.kind == "group_representatives"]
    audit = build_audit(table, published, result.sidecars["lineage"])
    (res,) = check_contract([g], {"published": published.to_pandas(), "audit": audit})
    return res


def with_c(published: pa.Table, rows: np.ndarray, value) -> pa.Table:
    df = published.to_pandas()
    df.loc[rows, "c"] = value
    return pa.Table.from_pandas(df, schema=published.schema, preserve_index=False)


@pytest.mark.parametrize("algorithm", ["mdav", "fair_mdav"])
def test_checker_refuses_a_null_where_the_input_had_a_value(algorithm):
    """The whole group published as null (members agree, the column's nulls are its most
    frequent entry) fails: the group has a member with a value."""
    if algorithm == "mdav":
        t = mdav_table()
        r = mdav(t, MDAVParams(k=3))
    else:
        t = fair_table()
        r = fair_mdav(t, FairMDAVParams(m=1, n=2, tau=0.0))
    assert representatives_check(t, r.outputs["data"], r).passed
    lin = r.sidecars["lineage"].to_pandas()
    group = int(lin.loc[lin["row_id"] == 0, "group"].iloc[0])
    rows = np.flatnonzero(lin["group"].to_numpy() == group)
    res = representatives_check(t, with_c(r.outputs["data"], rows, None), r)
    assert not res.passed
    assert res.offending == [
        {
            "group": group,
            "reason": "c: a null where members have values (the mode of its non-null values)",
        }
    ]


def test_checker_refuses_a_value_for_an_all_null_group():
    t = mdav_table()
    r = mdav(t, MDAVParams(k=3))
    lin = r.sidecars["lineage"].to_pandas()
    group = int(lin.loc[lin["row_id"] == 3, "group"].iloc[0])
    rows = np.flatnonzero(lin["group"].to_numpy() == group)
    res = representatives_check(t, with_c(r.outputs["data"], rows, "a"), r)
    assert not res.passed
    assert [o["group"] for o in res.offending] == [group]
    assert "not the mode" in res.offending[0]["reason"]


def test_all_null_column_publishes_nulls():
    t = attach_roles(
        pa.table({"x": [1.0, 2.0, 3.0, 4.0], "c": pa.array([None] * 4, pa.string())}),
        TableRoles.of(ROLES),
    )
    r = mdav(t, MDAVParams(k=2))
    assert r.outputs["data"].column("c").to_pylist() == [None] * 4
    assert pd.isna(r.outputs["data"].to_pandas()["c"]).all()
