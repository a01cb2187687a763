"""The ATR component on the paper's worked example (spec 7.4 golden content of O1-O5), its
contract failing on reports that break it, and bad input named by column or parameter."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from privfair.components.core.checks import check_contract, check_guarantee
from privfair.components.transparency.atr import atr
from privfair.components.transparency.audit import evidence
from privfair.components.transparency.examples import golden_cells, records
from privfair.components.transparency.params import ATRParams
from privfair.schemas.errors import InputError
from privfair.schemas.roles import ColumnRole, Kind, Role, attach_roles, read_roles

CELLS = ATRParams(delta=0.9, decisions="cells")


@pytest.fixture(scope="module")
def golden():
    return atr(golden_cells(), CELLS)


def test_o1_decision_rules(golden):
    rules = golden.outputs["decision_rules"].to_pydict()
    assert rules["gender"] == ["F", "F", "F", "M", "M", "M"]
    assert np.allclose(rules["announced_d1"], [0.1, 0.02, 0.9, 0.1, 0.4, 0.9], atol=1e-12)
    assert np.allclose(np.add(rules["announced_d0"], rules["announced_d1"]), 1.0)
    assert "population" not in rules  # include_population is off by default


def test_o2_fairness(golden):
    rows = {(r["measure"], r["condition_value"]): r for r in golden.outputs["fairness"].to_pylist()}
    sp = rows[("SP", None)]
    assert (sp["rate_group_1"], sp["rate_group_2"]) == pytest.approx((0.2, 0.365))
    assert sp["value"] == pytest.approx(0.165) and sp["distortion_bound"] == pytest.approx(0.2)
    assert (sp["true_value_lower"], sp["true_value_upper"]) == pytest.approx((0.0, 0.365))
    assert rows[("CSP", "<100k")]["value"] == pytest.approx(0.0)
    mid = rows[("CSP", "100k-200k")]
    assert mid["value"] == pytest.approx(0.38)
    assert (mid["true_value_lower"], mid["true_value_upper"]) == pytest.approx((0.18, 0.58))
    pr = rows[("PR", None)]
    assert pr["value"] == pytest.approx(0.547945, abs=1e-6)
    assert (pr["true_value_lower"], pr["true_value_upper"]) == pytest.approx(
        (0.215054, 1.132075), abs=1e-6
    )
    assert pr["pr_satisfied_announced"] is False


def test_o3_privacy_summary_and_headline(golden):
    """The adversary's maximum confidence drops from 100 % to 67.5 % at delta = 0.9."""
    s = golden.outputs["privacy_summary"].to_pydict()
    assert s["scope"] == ["group", "group", "global"]
    assert s["gender"] == ["F", "M", None]
    assert s["max_adversary_confidence"] == pytest.approx([0.675, 81 / 127, 0.675], abs=1e-12)
    assert golden.metrics["c_star_global"] == pytest.approx(1.0)
    assert golden.metrics["beta_global"] == pytest.approx(0.675)


def test_o4_o5_audit(golden):
    cells = golden.sidecars["audit_cells"].to_pydict()
    assert cells["conf_announced_a1"][:3] == pytest.approx([0.3, 0.025, 0.675])
    assert cells["conf_announced_a0"][3:] == pytest.approx([0.637795, 0.330709, 0.031496], abs=1e-6)
    groups = golden.sidecars["audit_groups"].to_pydict()
    assert groups["case"] == ["betap", "beta0"]
    assert groups["beta_0"] == pytest.approx([108 / 161, 81 / 127])
    assert groups["beta_1"] == pytest.approx([27 / 44, 4 / 9])
    assert groups["beta_min"] == pytest.approx([0.6, 0.45])
    assert groups["C_star"] == pytest.approx([1.0, 0.72])
    assert groups["S_announced"] == pytest.approx([0.1, 0.1825])


def test_the_missing_case_e1_is_met_at_delta_07():
    """delta = 0.7, female group: the printed Theorem 1 claims 0.587413, unachievable; the
    corrected optimum is beta_min = 0.6 and the contract holds."""
    params = ATRParams(delta=0.7, decisions="cells")
    r = atr(golden_cells(), params)
    assert r.outputs["privacy_summary"].column("max_adversary_confidence")[0].as_py() == (
        pytest.approx(0.6)
    )
    frames = evidence(golden_cells(), r.outputs, r.sidecars, params)
    assert all(c.passed for c in check_contract(r.contract, frames))


def test_the_printed_algorithm_fails_c3():
    """A report announcing the printed algorithm's mapping (E1: [0.3, 0, 0.7] for the female
    group at delta = 0.7, confidence 0.631579) and its claimed 0.587413 is refused."""
    params = ATRParams(delta=0.7, decisions="cells")
    r = atr(golden_cells(), params)
    d1 = np.asarray(r.outputs["decision_rules"].column("announced_d1").to_pylist())
    d1[:3] = [0.3, 0.0, 0.7]
    rules = r.outputs["decision_rules"]
    for name, values in (("announced_d1", d1), ("announced_d0", 1 - d1)):
        i = rules.schema.get_field_index(name)
        rules = rules.set_column(i, rules.schema.field(i), pa.array(values))
    s = r.outputs["privacy_summary"]
    v = s.column("max_adversary_confidence").to_pylist()
    v[0] = 0.587413
    i = s.schema.get_field_index("max_adversary_confidence")
    s = s.set_column(i, s.schema.field(i), pa.array(v))
    outputs = {**r.outputs, "decision_rules": rules, "privacy_summary": s}
    frames = evidence(golden_cells(), outputs, r.sidecars, params)
    (c3,) = [g for g in r.contract if g.id == "C3"]
    verdict = check_guarantee(c3, frames)
    assert not verdict.passed


def test_public_tables_hold_no_internal_field(golden):
    internal = {"d1_true", "d1_min", "d1_max", "beta_0", "beta_1", "beta_p", "case", "true_value"}
    for name, table in golden.outputs.items():
        assert not internal & set(table.column_names), name


def _with(table: pa.Table, column: ColumnRole) -> pa.Table:
    return attach_roles(table, read_roles(table).replace(column))


@pytest.mark.parametrize("delta", [-0.1, 1.5])
def test_delta_outside_unit_interval(delta):
    with pytest.raises(ValueError, match="delta"):
        ATRParams(delta=delta)


def test_alpha_mode_needs_alpha():
    with pytest.raises(ValueError, match="alpha"):
        ATRParams(fidelity="alpha")


def test_decisions_not_binary():
    t = records(1, 50)
    values = t.column("approved").to_pylist()
    values[0] = 2
    t = t.set_column(3, t.schema.field(3), pa.array(values, pa.int8()))
    with pytest.raises(InputError, match="binary") as e:
        atr(t, ATRParams())
    assert e.value.column == "approved"


def test_probabilities_outside_unit_interval():
    t = golden_cells()
    t = t.set_column(2, t.schema.field(2), pa.array([0.0, 0.0, 1.2, 0.0, 0.5, 1.0]))
    with pytest.raises(InputError, match=r"\[0, 1\]") as e:
        atr(t, CELLS)
    assert e.value.column == "d1"


def test_duplicate_cells():
    t = pa.concat_tables([golden_cells(), golden_cells().slice(0, 1)])
    with pytest.raises(InputError, match="unique"):
        atr(t, CELLS)


def test_empty_group_mass():
    t = golden_cells()
    t = t.set_column(3, t.schema.field(3), pa.array([0.0] * 6))
    with pytest.raises(InputError, match="no mass"):
        atr(t, CELLS)


def test_a_group_without_mass():
    t = golden_cells()
    t = t.set_column(3, t.schema.field(3), pa.array([12.0, 5.0, 3.0, 0.0, 0.0, 0.0]))
    with pytest.raises(InputError, match="QID group has no mass") as e:
        atr(t, CELLS)
    assert "gender = M" in str(e.value)


def test_all_zero_lower_bounds_e3():
    """delta = 0: every bound is [0, 1], M1 = M0 = 0 (E3: beta_1 = beta_0 = 0): the optimum
    is beta_min and the report still meets its contract."""
    params = ATRParams(delta=0.0, decisions="cells")
    r = atr(golden_cells(), params)
    assert r.metrics["beta_global"] == pytest.approx(0.6)
    frames = evidence(golden_cells(), r.outputs, r.sidecars, params)
    assert all(c.passed for c in check_contract(r.contract, frames))


def test_private_attribute_also_public_is_refused():
    """One column, one role: the roles model refuses a column listed twice."""
    from privfair.schemas.roles import TableRoles

    with pytest.raises(InputError, match="only one role"):
        TableRoles.of(
            [
                ColumnRole("gender", Role.PUBLIC, Kind.NOMINAL),
                ColumnRole("gender", Role.SENSITIVE, Kind.NOMINAL),
            ]
        )


def test_no_private_attribute():
    t = _with(records(2, 60), ColumnRole("income", Role.PUBLIC, Kind.NOMINAL))
    with pytest.raises(InputError, match="sensitive"):
        atr(t, ATRParams())


def test_numeric_private_attribute_needs_bins():
    t = records(3, 60)
    t = t.append_column("salary", pa.array(np.arange(60, dtype=np.float64) * 1000))
    t = attach_roles(
        t,
        read_roles(t)
        .select(t.column_names[:-1])
        .__class__.of([*read_roles(t).columns, ColumnRole("salary", Role.SENSITIVE, Kind.NUMERIC)]),
    )
    with pytest.raises(InputError, match="bins") as e:
        atr(t, ATRParams())
    assert e.value.column == "salary"
    r = atr(t, ATRParams(bins={"salary": (20000.0, 40000.0)}))
    assert {"<20000", "[20000, 40000)", ">=40000"} <= set(
        r.outputs["decision_rules"].column("salary").to_pylist()
    )


def test_fairness_measure_on_an_unknown_attribute():
    params = ATRParams(
        decisions="cells",
        fairness=[{"type": "SP", "protected_attribute": "nope", "group_1": "F", "group_2": "M"}],
    )
    with pytest.raises(InputError, match="fairness measure") as e:
        atr(golden_cells(), params)
    assert e.value.column == "nope"


def test_csp_needs_its_condition():
    with pytest.raises(ValueError, match="condition_attribute"):
        ATRParams(
            fairness=[{"type": "CSP", "protected_attribute": "g", "group_1": 1, "group_2": 2}]
        )
