"""What a user's own data does to the ATR component (issue 22): inputs it cannot report on are
refused before it runs, naming the column and the value; the ordinary Arrow types of a nominal
column (dictionary, as a pandas Categorical gives, large_string, string_view) are read as their
values."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from components.core.checks import CheckResult, check_guarantee
from components.transparency.atr import atr
from components.transparency.audit import evidence
from components.transparency.examples import INCOME, golden_cells, records
from components.transparency.params import ATRParams
from schemas.errors import InputError
from schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles, read_roles

CELLS = ATRParams(delta=0.9, decisions="cells")


def _verdicts(table: pa.Table, params: ATRParams) -> list[CheckResult]:
    """Run the component, rebuild the evidence and run every checker of its contract: none
    may raise."""
    r = atr(table, params)
    frames = evidence(table, r.outputs, r.sidecars, params)
    out = [check_guarantee(g, frames) for g in r.contract]
    assert all(isinstance(c, CheckResult) for c in out)
    return out


def _holds(table: pa.Table, params: ATRParams) -> None:
    failed = [c.to_dict() for c in _verdicts(table, params) if not c.passed]
    assert not failed


def _set(table: pa.Table, name: str, values, type_=None) -> pa.Table:
    i = table.schema.get_field_index(name)
    arr = pa.array(values, type_) if not isinstance(values, pa.Array | pa.ChunkedArray) else values
    return table.set_column(i, table.schema.field(i).with_type(arr.type), arr)


# ------------------------------------------------------------------ refused before it runs


def test_a_fairness_group_absent_from_the_data():
    params = ATRParams(
        decisions="cells",
        fairness=[{"type": "SP", "protected_attribute": "gender", "group_1": "F", "group_2": "X"}],
    )
    with pytest.raises(InputError, match="'X' does not occur") as e:
        atr(golden_cells(), params)
    assert e.value.column == "gender"
    assert "group_2" in str(e.value) and "'F'" in str(e.value) and "'M'" in str(e.value)


def test_a_fairness_group_without_mass():
    """A value whose cells all have population 0 holds no data subject: nothing to compare."""
    none = _set(_set(golden_cells().slice(0, 1), "income_bracket", ["none"]), "population", [0.0])
    t = pa.concat_tables([golden_cells(), none])
    base = {"type": "SP", "protected_attribute": "income_bracket", "group_2": "<100k"}
    _holds(t, ATRParams(decisions="cells", fairness=[base | {"group_1": ">200k"}]))
    with pytest.raises(InputError, match="'none' does not occur") as e:
        atr(t, ATRParams(decisions="cells", fairness=[base | {"group_1": "none"}]))
    assert e.value.column == "income_bracket"
    assert "fairness[0].group_1" in str(e.value)


def test_a_fairness_group_given_as_a_number_that_reads_otherwise():
    """The published key of a value is its text: 1.0 is not the value 1 of an integer column."""
    t = _set(golden_cells(), "gender", [1, 1, 1, 2, 2, 2], pa.int64())
    ok = {"type": "SP", "protected_attribute": "gender", "group_1": 1, "group_2": 2}
    _holds(t, ATRParams(decisions="cells", fairness=[ok]))
    with pytest.raises(InputError, match="1.0") as e:
        atr(t, ATRParams(decisions="cells", fairness=[ok | {"group_1": 1.0}]))
    assert e.value.column == "gender"


def test_a_csp_condition_attribute_absent_is_named():
    params = ATRParams(
        decisions="cells",
        fairness=[
            {
                "type": "CSP",
                "protected_attribute": "gender",
                "group_1": "F",
                "group_2": "M",
                "condition_attribute": "nope",
            }
        ],
    )
    with pytest.raises(InputError) as e:
        atr(golden_cells(), params)
    assert e.value.column == "nope"


@pytest.mark.parametrize("name", ["announced_d1", "max_adversary_confidence", "scope", "__group"])
def test_an_attribute_named_as_a_report_field_is_refused(name):
    t = golden_cells().rename_columns([name, "income_bracket", "d1", "population"])
    roles = read_roles(golden_cells())
    t = attach_roles(
        t,
        TableRoles.of([ColumnRole(name, Role.PUBLIC, Kind.NOMINAL), *roles.columns[1:]]),
    )
    with pytest.raises(InputError, match="report") as e:
        atr(t, CELLS)
    assert e.value.column == name


def test_bins_of_a_column_that_is_no_attribute():
    with pytest.raises(InputError, match="bins") as e:
        atr(records(1, 40), ATRParams(bins={"regoin": (1.0,)}))
    assert e.value.column == "regoin"


@pytest.mark.parametrize(
    "values",
    [
        pa.array([[1], [2]] * 30),
        pa.array([{"a": 1}, {"a": 2}] * 30),
    ],
    ids=["list", "struct"],
)
def test_a_nested_attribute_is_refused(values):
    t = _set(records(1, 60), "region", values)
    with pytest.raises(InputError, match="one value per record") as e:
        atr(t, ATRParams())
    assert e.value.column == "region"


# ------------------------------------------------------------------ ordinary Arrow types


def _encoded(table: pa.Table, name: str, type_: pa.DataType) -> pa.Table:
    col = table.column(name)
    if pa.types.is_dictionary(type_):
        col = col.dictionary_encode()
    return _set(table, name, col.cast(type_))


DICT = pa.dictionary(pa.int32(), pa.string())
TYPES = {
    "dictionary": DICT,
    "ordered_dictionary": pa.dictionary(pa.int8(), pa.large_string(), ordered=True),
    "large_string": pa.large_string(),
    "string_view": pa.string_view(),
}


@pytest.mark.parametrize("column", ["gender", "income", "approved"])
@pytest.mark.parametrize("type_", list(TYPES.values()), ids=list(TYPES))
def test_ordinary_arrow_types_give_the_plain_report(column, type_):
    """A column as a dictionary, large_string or string_view gives the report of its plain
    values, byte for byte (the label read as text, its positive value the text too)."""
    plain = records(5, 80)
    if column == "approved":
        plain = _set(plain, "approved", [str(v) for v in plain.column("approved").to_pylist()])
        roles = read_roles(plain).replace(
            ColumnRole("approved", Role.LABEL, Kind.BINARY, positive="1")
        )
        plain = attach_roles(plain, roles)
    encoded = _encoded(plain, column, type_)
    assert encoded.schema.field(column).type == type_
    want, got = atr(plain, ATRParams()), atr(encoded, ATRParams())
    for name in want.outputs:
        assert got.outputs[name].equals(want.outputs[name]), name
    assert got.metrics == want.metrics
    _holds(encoded, ATRParams())


def test_a_pandas_ordered_categorical():
    """The table pandas gives for an ordered Categorical (an ordered Arrow dictionary of
    large_string) and plain text columns."""
    plain = records(6, 90)
    df = plain.to_pandas()
    df["income"] = pd.Categorical(df["income"], categories=list(INCOME), ordered=True)
    df["gender"] = df["gender"].astype("category")
    t = attach_roles(pa.Table.from_pandas(df, preserve_index=False), read_roles(plain))
    assert pa.types.is_dictionary(t.schema.field("income").type)
    want, got = atr(plain, ATRParams()), atr(t, ATRParams())
    for name in want.outputs:
        assert got.outputs[name].equals(want.outputs[name]), name
    _holds(t, ATRParams())


def test_a_dictionary_model_feature():
    plain = records(7, 120)
    t = _encoded(plain, "region", DICT)
    params = ATRParams(decisions="model")
    want, got = atr(plain, params), atr(t, params)
    assert got.outputs["decision_rules"].equals(want.outputs["decision_rules"])
    _holds(t, params)


def test_a_dictionary_population_column():
    t = _encoded(golden_cells(), "population", pa.dictionary(pa.int8(), pa.float64()))
    want = atr(golden_cells(), CELLS)
    assert atr(t, CELLS).outputs["decision_rules"].equals(want.outputs["decision_rules"])
