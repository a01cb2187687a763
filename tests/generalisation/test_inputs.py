"""Bad input gets a clear error naming the column, parameter or spec key and the rule
(issue: t out of range, non-binary decision, PD attribute listed as PND, PND attribute without
a domain order, k larger than the table, empty table, protected values not in the data), and
published labels read back exactly."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfair.components.generalisation.dmondrian import dmondrian
from privfair.components.generalisation.domains import Domain
from privfair.components.generalisation.dsabre import dsabre
from privfair.components.generalisation.examples import table as random_table
from privfair.components.generalisation.examples import toy_table
from privfair.components.generalisation.params import DMondrianParams, DSabreParams
from privfair.run.flow import ingest
from privfair.schemas.errors import InputError, SpecError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles, read_roles
from privfair.spec.catalogue import parse_spec

ALGOS = [(dmondrian, DMondrianParams), (dsabre, DSabreParams)]


def _with_role(table: pa.Table, column: ColumnRole) -> pa.Table:
    return attach_roles(table, read_roles(table).replace(column))


@pytest.mark.parametrize(("algo", "P"), ALGOS)
@pytest.mark.parametrize("t", [-0.1, 0.6])
def test_t_outside_its_range(algo, P, t):
    """t in [0, max(p-, 1 - p-)] = [0, 9/17] on the toy table (a negative t is refused by the
    params model itself)."""
    if t < 0:
        with pytest.raises(ValueError, match="t"):
            P(t=t)
        return
    with pytest.raises(InputError, match=r"max\(p-, 1 - p-\)") as e:
        algo(toy_table(), P(t=t))
    assert e.value.column == "t"


def test_spec_t_out_of_range_names_the_key():
    with pytest.raises(SpecError) as e:
        parse_spec(
            {
                "name": "x",
                "dataset": {"name": "german"},
                "component": {"name": "dmondrian", "params": {"t": 2}},
            }
        )
    assert e.value.key == "component.params.t"


@pytest.mark.parametrize(("algo", "P"), ALGOS)
def test_non_binary_decision(algo, P):
    t = toy_table()
    values = t.column("dec").to_pylist()
    values[0] = "?"
    t = t.set_column(3, t.schema.field(3), pa.array(values))
    with pytest.raises(InputError, match="binary") as e:
        algo(t, P(t=0.2))
    assert e.value.column == "dec"


def test_pd_attribute_listed_as_pnd():
    """German's PD attribute sex cannot also be a PND attribute: the spec names it."""
    spec = parse_spec(
        {
            "name": "x",
            "dataset": {"name": "german", "quasi_identifiers": ["purpose", "sex"]},
            "component": {"name": "dmondrian", "params": {"t": 0.15}},
        }
    )
    with pytest.raises(InputError, match="not a quasi-identifier") as e:
        ingest(spec)
    assert e.value.column == "sex"


def test_pd_attribute_given_the_pnd_role_leaves_no_pd():
    t = _with_role(toy_table(), ColumnRole("sex", Role.QUASI_IDENTIFIER, Kind.NOMINAL))
    with pytest.raises(InputError, match="protected"):
        dmondrian(t, DMondrianParams(t=0.2))


def test_nominal_pnd_without_order_is_lexicographic_and_logged():
    t = _with_role(toy_table(), ColumnRole("purpose", Role.QUASI_IDENTIFIER, Kind.NOMINAL))
    r = dmondrian(t, DMondrianParams(t=0.25, utility_queries=0))
    assert any("'purpose'" in w and "lexicographic" in w for w in r.warnings)
    # car < housing now: the value set of a generalised cell is in that order
    assert r.table.column("purpose").to_pylist()[0] == ["car", "housing"]


def test_ordinal_pnd_without_order_is_refused():
    t = _with_role(toy_table(), ColumnRole("emp", Role.QUASI_IDENTIFIER, Kind.ORDINAL))
    with pytest.raises(InputError, match="domain order") as e:
        dmondrian(t, DMondrianParams(t=0.25))
    assert e.value.column == "emp"


def test_value_outside_the_declared_domain():
    t = _with_role(
        toy_table(), ColumnRole("emp", Role.QUASI_IDENTIFIER, Kind.ORDINAL, domain=("no",))
    )
    with pytest.raises(InputError, match="declared domain") as e:
        dmondrian(t, DMondrianParams(t=0.25))
    assert e.value.column == "emp"


@pytest.mark.parametrize(("algo", "P"), ALGOS)
def test_k_larger_than_the_table(algo, P):
    with pytest.raises(InputError, match="k is larger") as e:
        algo(toy_table(), P(t=0.25, k=18))
    assert e.value.column == "k"


@pytest.mark.parametrize(("algo", "P"), ALGOS)
def test_empty_table(algo, P):
    with pytest.raises(InputError, match="empty"):
        algo(toy_table().slice(0, 0), P(t=0.25))


@pytest.mark.parametrize(("field", "value"), [("unfavoured", ("woman",)), ("favoured", ("man",))])
def test_protected_values_not_in_the_data(field, value):
    t = _with_role(toy_table(), ColumnRole("sex", Role.PROTECTED, Kind.NOMINAL, **{field: value}))
    with pytest.raises(InputError, match="does not occur") as e:
        dmondrian(t, DMondrianParams(t=0.25))
    assert e.value.column == "sex"


def test_pd_without_protected_values():
    t = _with_role(toy_table(), ColumnRole("sex", Role.PROTECTED, Kind.NOMINAL))
    with pytest.raises(InputError, match="protected values") as e:
        dmondrian(t, DMondrianParams(t=0.25))
    assert e.value.column == "sex"


def test_one_pd_group_only():
    t = _with_role(
        toy_table(), ColumnRole("sex", Role.PROTECTED, Kind.NOMINAL, unfavoured=("female", "male"))
    )
    with pytest.raises(InputError, match="both the protected and the unprotected"):
        dmondrian(t, DMondrianParams(t=0.25))


@pytest.mark.parametrize("role", [Role.SENSITIVE, Role.PUBLIC, Role.IGNORED])
def test_a_column_of_another_role_is_never_passed_through(role):
    t = toy_table().append_column("note", pa.array(["x"] * 17))
    t = attach_roles(t, TableRoles.of([*read_roles(t), ColumnRole("note", role, Kind.NOMINAL)]))
    with pytest.raises(InputError, match="contexts the discrimination bound") as e:
        dsabre(t, DSabreParams(t=0.25))
    assert e.value.column == "note"


def test_numeric_pnd_with_missing_values():
    t = random_table(1, 40)
    values = t.column("age").to_pylist()
    values[3] = None
    t = t.set_column(0, t.schema.field(0), pa.array(values, pa.int64()))
    with pytest.raises(InputError, match="missing") as e:
        dmondrian(t, DMondrianParams(t=0.3))
    assert e.value.column == "age"


# --- labels read back exactly ---------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.sampled_from(["a", "b", "c", None, "d"]), min_size=1, max_size=30),
    data=st.data(),
)
def test_value_sets_round_trip(values, data):
    d = Domain.of("x", pa.chunked_array([pa.array(values, pa.string())]), "nominal")
    lo = np.array([data.draw(st.integers(0, d.size - 1)) for _ in values])
    hi = np.array([data.draw(st.integers(int(a), d.size - 1)) for a in lo])
    back = d.from_arrow(d.to_arrow(lo, hi))
    assert back[0].tolist() == lo.tolist() and back[1].tolist() == hi.tolist()


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=30), data=st.data()
)
def test_intervals_round_trip(values, data):
    d = Domain.of("x", pa.chunked_array([pa.array(values, pa.float64())]), "numeric")
    assert d.ranks.max() == d.size - 1
    lo = np.array([data.draw(st.integers(0, d.size - 1)) for _ in values])
    hi = np.array([data.draw(st.integers(int(a), d.size - 1)) for a in lo])
    back = d.from_arrow(d.to_arrow(lo, hi))
    assert back[0].tolist() == lo.tolist() and back[1].tolist() == hi.tolist()


@pytest.mark.parametrize(("algo", "P"), ALGOS)
def test_a_release_survives_a_parquet_round_trip_byte_for_byte(algo, P):
    """The orchestrators hand the protected table over through Parquet: the types (a list's
    child is Parquet's 'element'), chunks and metadata it comes back with write the same bytes."""
    import io

    import pyarrow.parquet as pq

    result = algo(random_table(2, 80), P(t=0.3, utility_queries=0))

    def write(t: pa.Table) -> bytes:
        buf = io.BytesIO()
        pq.write_table(t, buf)
        return buf.getvalue()

    first = write(result.table)
    back = pq.read_table(io.BytesIO(first))
    assert back.schema.equals(result.table.schema, check_metadata=True)
    assert write(back) == first
