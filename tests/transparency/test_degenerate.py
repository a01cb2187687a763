"""What a user's own data does to the ATR component (issue 22): inputs it cannot report on are
refused before it runs, naming the column and the value; valid but degenerate inputs (a public
attribute with one value, a sensitive attribute with one value, a group with one populated
cell) give a report on which every checker returns a verdict; the ordinary Arrow types of a
nominal column (dictionary, as a pandas Categorical gives, large_string, string_view) are read
as their values.

The property tests draw small random tables of those shapes: on each one either the component
refuses the input with an ``InputError``, or every checker of its contract returns a
``CheckResult`` (any float in a cell), and the contract holds (the magnitudes of ``DATA``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfair.components.core.checks import CheckResult, check_contract, check_guarantee
from privfair.components.transparency.atr import atr
from privfair.components.transparency.audit import evidence
from privfair.components.transparency.checks import check_atr_fairness_bounds
from privfair.components.transparency.examples import INCOME, golden_cells, records
from privfair.components.transparency.params import ATRParams
from privfair.schemas.errors import InputError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles, read_roles

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


def _cells(pub, priv, d1, population) -> pa.Table:
    roles = [
        ColumnRole("pub", Role.PUBLIC, Kind.NOMINAL),
        ColumnRole("priv", Role.SENSITIVE, Kind.NOMINAL),
        ColumnRole("d1", Role.LABEL, Kind.NUMERIC, positive=1),
        ColumnRole("population", Role.ADMISSIBLE, Kind.NUMERIC),
    ]
    data = {"pub": pub, "priv": priv, "d1": d1, "population": population}
    return attach_roles(pa.table(data), TableRoles.of(roles))


# ------------------------------------------------------------------ valid but degenerate


def test_a_public_attribute_with_one_value_records():
    """One public value: one QID group, no pair of groups to compare (no default measure);
    the fairness checker reads an empty table and says so."""
    t = records(1, 60)
    t = _set(t, "gender", ["F"] * 60)
    t = t.drop_columns(["region"])
    t = attach_roles(t, read_roles(records(1, 60)).select(t.column_names))
    _holds(t, ATRParams())
    assert atr(t, ATRParams()).outputs["fairness"].num_rows == 0


def test_a_public_attribute_with_one_value_cells():
    _holds(golden_cells().slice(0, 3), CELLS)


def test_a_sensitive_attribute_with_one_value():
    """Every group holds one cell: beta* = 1 everywhere (unprotectable), and said so."""
    t = _set(records(1, 60), "income", ["<100k"] * 60)
    _holds(t, ATRParams())
    r = atr(t, ATRParams())
    assert r.metrics["beta_global"] == pytest.approx(1.0)
    assert any("unprotectable" in w for w in r.warnings)


def test_a_group_with_one_populated_cell():
    t = _set(golden_cells(), "population", [12.0, 0.0, 0.0, 9.0, 7.0, 4.0])
    _holds(t, CELLS)


def test_every_decision_the_same():
    t = _set(records(1, 60), "approved", [0] * 60, pa.int8())
    _holds(t, ATRParams())
    _holds(_set(records(1, 60), "approved", [1] * 60, pa.int8()), ATRParams(delta=1.0))


def test_a_pr_whose_second_group_announces_no_positive_decision():
    """The p%-rule of a group against one whose announced rate is 0 is infinite: published as
    such, and recomputed as such by the checker (inf equals inf)."""
    t = _set(golden_cells(), "d1", [0.5, 0.5, 0.5, 0.0, 0.0, 0.0])
    params = ATRParams(
        delta=1.0,
        decisions="cells",
        fairness=[{"type": "PR", "protected_attribute": "gender", "group_1": "F", "group_2": "M"}],
    )
    assert atr(t, params).outputs["fairness"].column("value").to_pylist() == [np.inf]
    _holds(t, params)


def test_a_pr_interval_end_of_a_group_announced_near_zero():
    """A group announced at rate 0.700001 - 0.7 = 1e-6 below its interval: the p%-rule's upper
    end hi_1 / lo_2 is about 951052.51 and equals the true value up to the rounding of lo_2,
    which C8 allows relative to the end's size."""
    t = _cells(["b", "a"], ["x", "x"], [0.9510525107971749, 0.000001], [0.9510525107971749, 0.5])
    _holds(t, ATRParams(delta=0.3, decisions="cells"))


def test_two_csp_measures_whose_strata_share_a_value():
    """Two private attributes with a common value: the two CSP rows per shared value are told
    apart by their condition attribute."""
    t = records(4, 80)
    t = t.append_column("owner", pa.array(np.where(np.arange(80) % 3, "<100k", "none")))
    roles = read_roles(records(4, 80))
    t = attach_roles(
        t, TableRoles.of([*roles.columns, ColumnRole("owner", Role.SENSITIVE, Kind.NOMINAL)])
    )
    base = {"protected_attribute": "gender", "group_1": "F", "group_2": "M"}
    params = ATRParams(
        fairness=[
            {"type": "CSP", **base, "condition_attribute": "income"},
            {"type": "CSP", **base, "condition_attribute": "owner"},
            {"type": "PR", **base, "p": 0.8},
            {"type": "PR", **base, "p": 0.9},
        ]
    )
    _holds(t, params)


def test_the_same_measure_twice():
    m = {"type": "SP", "protected_attribute": "gender", "group_1": "F", "group_2": "M"}
    _holds(golden_cells(), ATRParams(decisions="cells", fairness=[m, m]))


def test_the_fairness_checker_on_a_frame_without_its_columns():
    """A checker given a frame that lacks a column returns a failed verdict, it does not raise."""
    from privfair.components.transparency.guarantees import FairnessBounds

    g = FairnessBounds(id="C8", fidelity="delta", level=0.9)
    frame = pd.DataFrame({"measure": ["SP"], "value": [0.1], "__value": [0.1], "__true": [0.1]})
    verdict = check_atr_fairness_bounds(g, frame)
    assert not verdict.passed and "lacks" in verdict.message


def test_a_fairness_table_emptied_fails_c8():
    """A report whose fairness rows were dropped fails C8: the evidence holds a row for every
    row the measures give, unpublished ones marked."""
    r = atr(golden_cells(), CELLS)
    outputs = {**r.outputs, "fairness": r.outputs["fairness"].slice(0, 0)}
    (c8,) = [g for g in r.contract if g.id == "C8"]
    frames = evidence(golden_cells(), outputs, r.sidecars, CELLS)
    verdict = check_guarantee(c8, frames)
    assert not verdict.passed and "0 rows published, 5 expected" in verdict.message
    assert check_guarantee(c8, evidence(golden_cells(), r.outputs, r.sidecars, CELLS)).passed


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


# ------------------------------------------------------------------ property: every verdict

LEVELS = {"delta": (0.0, 0.3, 0.5, 0.9, 0.99, 1.0), "alpha": (0.05, 0.5, 0.9, 1.0)}


# Cell rules and populations: the plain values, and any float (subnormal, 1e-300...) or only
# magnitudes that keep every announced outcome mass above 1e-9 of its group's (a rule in
# [1e-3, 1 - 1e-3], a population of at least 1e-3 of the largest): below it, spec A9 against
# C3 is open (``test_an_outcome_of_negligible_mass``).
RULES = st.sampled_from([0.0, 0.25, 0.5, 1.0, 1 / 3])
POPULATIONS = st.sampled_from([0.0, 1.0, 2.0, 5.0, 0.5, 1000.0])
ANY = {"rule": RULES | st.floats(0, 1), "population": POPULATIONS | st.floats(0, 100)}
DATA = {
    "rule": RULES | st.floats(1e-3, 1 - 1e-3),
    "population": st.sampled_from([0.0, 1.0, 2.0, 5.0, 0.5, 100.0]) | st.floats(0.1, 100),
}


@st.composite
def degenerate(draw, magnitudes=ANY):
    """A small table of decision records (or their cells) with attributes of one to three
    values, decisions that may all agree, zero weights, and ordinary Arrow types, with random
    parameters and fairness measures (some naming a value that does not occur)."""
    n = draw(st.integers(1, 24))
    n_pub, n_priv = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    names = [f"pub{i}" for i in range(n_pub)] + [f"priv{i}" for i in range(n_priv)]
    domains = {c: [f"{c[:1]}{v}" for v in range(draw(st.integers(1, 3)))] for c in names}
    cols = {c: draw(st.lists(st.sampled_from(domains[c]), min_size=n, max_size=n)) for c in names}
    mode = draw(st.sampled_from(["label", "cells"]))
    roles = [ColumnRole(c, Role.PUBLIC, Kind.NOMINAL) for c in names[:n_pub]]
    roles += [ColumnRole(c, Role.SENSITIVE, Kind.NOMINAL) for c in names[n_pub:]]
    if mode == "label":
        constant = draw(st.sampled_from([None, 0, 1]))
        label = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
        cols["decision"] = pa.array([constant] * n if constant is not None else label, pa.int8())
        roles.append(ColumnRole("decision", Role.LABEL, Kind.BINARY, positive=1))
        if draw(st.booleans()):
            w = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]), min_size=n, max_size=n))
            cols["weight"] = pa.array(w, pa.float64())
            roles.append(ColumnRole("weight", Role.ADMISSIBLE, Kind.NUMERIC))
    else:
        keys = pd.DataFrame(cols).drop_duplicates()
        cols = {c: keys[c].tolist() for c in names}
        m = len(keys)
        rule, pop = magnitudes["rule"], magnitudes["population"]
        cols["d1"] = pa.array(draw(st.lists(rule, min_size=m, max_size=m)), pa.float64())
        cols["population"] = pa.array(draw(st.lists(pop, min_size=m, max_size=m)), pa.float64())
        roles += [
            ColumnRole("d1", Role.LABEL, Kind.NUMERIC, positive=1),
            ColumnRole("population", Role.ADMISSIBLE, Kind.NUMERIC),
        ]
    table = attach_roles(pa.table(cols), TableRoles.of(roles))
    for c in names:
        type_ = draw(st.sampled_from([None, *TYPES.values()]))
        if type_ is not None:
            table = _encoded(table, c, type_)
    fidelity = draw(st.sampled_from(["delta", "alpha"]))
    level = draw(st.sampled_from(LEVELS[fidelity]))
    measures = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["SP", "CSP", "PR"]))
        attr = draw(st.sampled_from(names))
        values = [*domains[attr] * 4, "absent"]
        m = {
            "type": kind,
            "protected_attribute": attr,
            "group_1": draw(st.sampled_from(values)),
            "group_2": draw(st.sampled_from(values)),
        }
        if kind == "CSP":
            m["condition_attribute"] = draw(st.sampled_from(names))
        measures.append(m)
    params = ATRParams(
        fidelity=fidelity,
        **({"delta": level} if fidelity == "delta" else {"alpha": level}),
        allocation=draw(st.sampled_from(["paper", "nearest"])),
        decisions=mode,
        fairness=measures,
        include_population=draw(st.booleans()),
    )
    return table, params


PROPERTY = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _contract(table: pa.Table, params: ATRParams) -> list[CheckResult] | None:
    """The verdicts of the contract, or None when the component refused the input."""
    try:
        result = atr(table, params)
    except InputError:
        return None  # refused before it ran, naming what is wrong: exit 2
    frames = evidence(table, result.outputs, result.sidecars, params)
    verdicts = check_contract(result.contract, frames)
    assert [type(v) for v in verdicts] == [CheckResult] * len(result.contract)
    return verdicts


@PROPERTY
@given(degenerate())
def test_every_checker_returns_a_verdict_on_every_accepted_input(case):
    """Any float a cell may hold: every checker returns a verdict (a checker that raised
    would be an error of the run, never a verdict)."""
    _contract(*case)


@PROPERTY
@given(degenerate(DATA))
def test_the_contract_holds_on_every_accepted_input(case):
    """The magnitudes data hold: the verdict is that every guarantee holds."""
    verdicts = _contract(*case)
    assert not [v.to_dict() for v in verdicts or [] if not v.passed]


def test_a_cell_of_negligible_mass_checked_by_its_mass():
    """C6 compares a cell's joint mass: the rule of a cell holding 2e-10 of its group's mass
    is only known to within the solver's mass resolution (it announced 0.49999993 for 0.5)."""
    roles = [
        ColumnRole("pub", Role.PUBLIC, Kind.NOMINAL),
        ColumnRole("pub2", Role.PUBLIC, Kind.NOMINAL),
        ColumnRole("priv", Role.SENSITIVE, Kind.NOMINAL),
        ColumnRole("d1", Role.LABEL, Kind.NUMERIC, positive=1),
        ColumnRole("population", Role.ADMISSIBLE, Kind.NUMERIC),
    ]
    data = {
        "pub": ["b", "b", "a", "a", "c", "c", "b", "a", "b"],
        "pub2": ["y", "x", "y", "x", "y", "x", "x", "y", "y"],
        "priv": ["u", "u", "u", "u", "v", "v", "v", "v", "v"],
        "d1": [0.5, 0.23515992075574027, 1, 0.5, 0.5, 0.25, 0.6834039089048308, 0,
               0.7195608979271234],
        "population": [76.19951481318418, 57.84910240087239, 43.40157898925879, 1, 2.00001,
                       2, 5, 1e-8, 5.960464477539063e-8],
    }  # fmt: skip
    t = attach_roles(pa.table(data), TableRoles.of(roles))
    _holds(t, ATRParams(delta=0.5, decisions="cells", allocation="nearest"))


def test_the_p_maximal_cells_of_a_group_of_negligible_mass():
    """A group holding 1e-38 of the mass: its P-maximal cells are found relative to its
    largest cell (an absolute 1e-15 took its empty cell for one)."""
    t = _cells(
        ["b", "a", "b", "b", "a", "a"],
        ["y", "y", "x", "z", "z", "x"],
        [0.25, 0.0, 0.5640227882199641, 0.7363480973102566, 0.0, 1.0],
        [0.0, 1.0, 1.175494351e-38, 1.175494351e-38, 0.85, 2.0],
    )
    _holds(t, ATRParams(fidelity="alpha", alpha=0.05, decisions="cells", allocation="nearest"))


def test_a_rule_of_1e_15_at_alpha_1():
    """At alpha = 1 and D_1 = 1e-15, 1 - (1 - D_1) rounds below D_1: the checkers' fidelity
    interval is widened by that rounding step as the component's is, or the closed-form
    optimum exceeds 1 (C3, C11)."""
    t = _cells(["a", "b", "a", "b"], ["x", "x", "y", "y"], [1e-15, 0.5, 5e-20, 0.0],
               [1.9, 6.5, 0.0, 14.2])  # fmt: skip
    _holds(t, ATRParams(fidelity="alpha", alpha=1.0, decisions="cells"))


@pytest.mark.xfail(
    strict=True,
    reason="open (spec A9, C3): an outcome whose announced mass is positive but at most 1e-9 "
    "of its group's is left out of the published confidence, while the closed-form optimum "
    "counts it (beta_1 = 1 here, published 0.99999998)",
)
def test_an_outcome_of_negligible_mass():
    t = _cells(["a"] * 4, ["x", "y", "z", "w"], [0.0, 0.25, 0.0, 0.0], [1.0, 1e-8, 1e-8, 0.0])
    _holds(t, ATRParams(fidelity="alpha", alpha=0.05, decisions="cells", allocation="nearest"))
