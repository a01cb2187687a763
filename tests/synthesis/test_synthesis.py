"""MST and PreFair end to end: the Adult releases keep every promise (the ledger equal to the
budget, the fair tree, the model's and the data's independence), MST's own tree fails the
fairness checks when it is unfair, and bad input gets an error naming the column or key."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import ValidationError

from privfair.components.core.checks import check_contract, check_guarantee
from privfair.components.synthesis.accounting import rho_budget
from privfair.components.synthesis.audit import evidence
from privfair.components.synthesis.contract import contract
from privfair.components.synthesis.examples import BINS, example_table, prefair_example
from privfair.components.synthesis.params import MSTParams, PreFairParams
from privfair.components.synthesis.public_domains import ADULT_NULLS
from privfair.components.synthesis.synthesize import mst, prefair
from privfair.run.flow import ingest
from privfair.schemas.errors import InputError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles, read_roles
from privfair.spec.catalogue import load_spec

SPEC_DIR = Path(__file__).resolve().parents[2] / "pipelines" / "specs"


@pytest.fixture(scope="module")
def adult():
    spec = load_spec(SPEC_DIR / "adult_prefair.yaml")
    return ingest(spec).table, spec.params


def _verdicts(table, params, result, guarantees):
    frames = evidence(table, result.outputs, result.sidecars, params)
    return {g.kind: check_guarantee(g, frames) for g in guarantees}


def test_adult_prefair_keeps_every_promise(adult):
    table, params = adult
    result = prefair(table, params)
    frames = evidence(table, result.outputs, result.sidecars, params)
    failed = [r.to_dict() for r in check_contract(result.contract, frames) if not r.passed]
    assert not failed
    ledger = result.sidecars["ledger"].to_pandas()
    assert ledger["rho"].sum() == pytest.approx(rho_budget(1.0, 1e-9), rel=1e-12)
    assert len(ledger) == 13 + 12 + 12
    assert result.metrics["fair_tree"] is True
    assert result.outputs["data"].schema.names == table.schema.names
    # nulls only in the three columns Adult documents unknowns for (the presets' null levels)
    data = result.outputs["data"]
    assert {n for n in data.column_names if data.column(n).null_count} <= set(ADULT_NULLS)


def test_mst_tree_on_adult_fails_the_fairness_checks(adult):
    """At epsilon = 10 MST's tree is essentially Adult's maximum spanning tree, which joins
    income to relationship, marital-status or sex without an admissible attribute between:
    the PreFair fairness checks, run on MST's release, fail (the tree, the model and the
    synthetic data), while MST's own contract holds."""
    table, prefair_params = adult
    shared = {k: v for k, v in prefair_params.model_dump().items() if k in MSTParams.model_fields}
    params = MSTParams(**(shared | {"epsilon": 10.0}))
    result = mst(table, params)
    own = _verdicts(table, params, result, result.contract)
    assert all(r.passed for r in own.values())
    fairness = [
        g
        for g in contract(prefair_params, table)
        if g.kind in ("fair_tree", "model_independence", "synthetic_independence")
    ]
    verdicts = _verdicts(table, params, result, fairness)
    assert result.metrics["fair_tree"] is False
    assert not verdicts["fair_tree"].passed
    assert not verdicts["model_independence"].passed
    assert not verdicts["synthetic_independence"].passed


# --- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "value"), [("epsilon", 0.0), ("epsilon", -1.0), ("delta", 0.0), ("delta", 1.0)]
)
def test_bad_privacy_parameters_are_refused(field, value):
    with pytest.raises(ValidationError, match=field):
        PreFairParams(**({"epsilon": 1.0, field: value}))


def test_a_column_without_a_public_domain_is_named():
    table, params = prefair_example(0)
    bins = {k: v for k, v in BINS.items() if k != "hours"}
    with pytest.raises(InputError) as e:
        prefair(table, params.model_copy(update={"bins": bins}))
    assert e.value.column == "hours" and "public domain" in e.value.rule


def test_a_nominal_column_without_levels_is_named():
    table, params = prefair_example(0)
    roles = read_roles(table).replace(ColumnRole("job", Role.ADMISSIBLE, Kind.NOMINAL))
    with pytest.raises(InputError) as e:
        prefair(attach_roles(table, roles), params)
    assert e.value.column == "job" and "domain" in e.value.detail


def test_no_admissible_attribute_is_refused():
    table, params = prefair_example(0)
    roles = TableRoles.of(
        ColumnRole(c.name, Role.IGNORED, c.kind, domain=c.domain)
        if c.role is Role.ADMISSIBLE
        else c
        for c in read_roles(table)
    )
    with pytest.raises(InputError, match="admissible"):
        prefair(attach_roles(table, roles), params)


def test_an_outcome_cannot_also_be_protected():
    """A column has one role: declaring the outcome protected as well is refused up front."""
    with pytest.raises(InputError, match="only one role"):
        TableRoles.of([ColumnRole("income", Role.LABEL), ColumnRole("income", Role.PROTECTED)])


def test_another_family_role_is_named():
    table, params = prefair_example(0)
    roles = read_roles(table).replace(ColumnRole("age", Role.QUASI_IDENTIFIER, Kind.NUMERIC))
    with pytest.raises(InputError) as e:
        prefair(attach_roles(table, roles), params)
    assert e.value.column == "age" and "roles" in e.value.rule


def _with_age(table: pa.Table, value: int) -> pa.Table:
    i = table.schema.get_field_index("age")
    ages = table.column("age").to_pylist()
    ages[0] = value
    return table.set_column(i, table.schema.field(i), pa.array(ages, pa.int64()))


def test_a_value_outside_the_domain_is_refused_or_clamped_and_counted():
    table, params = prefair_example(0)
    bad = _with_age(table, 120)
    with pytest.raises(InputError) as e:
        prefair(bad, params)
    assert e.value.column == "age" and "outside the declared public domain" in e.value.rule
    result = prefair(bad, params.model_copy(update={"out_of_domain": "clamp"}))
    assert result.metrics["clamped"] == {"age": 1}


def test_a_bin_for_a_missing_column_is_named():
    table, params = prefair_example(0)
    with pytest.raises(InputError) as e:
        prefair(table, params.model_copy(update={"bins": {**BINS, "salary": (0.0, 1.0)}}))
    assert e.value.column == "bins.salary"


def test_bins_must_increase():
    with pytest.raises(ValidationError, match="strictly increasing"):
        MSTParams(epsilon=1.0, bins={"age": (0.0, 10.0, 5.0)})


def test_the_example_runs_with_a_public_row_count():
    table, params = prefair_example(2)
    result = prefair(table, params.model_copy(update={"rows": 123}))
    assert result.outputs["data"].num_rows == 123
    fixed = params.model_copy(update={"rows": 123})
    frames = evidence(table, result.outputs, result.sidecars, fixed)
    assert all(r.passed for r in check_contract(contract(fixed, table), frames))


def test_example_table_roles():
    t = example_table(0)
    assert [c.role for c in read_roles(t)].count(Role.PROTECTED) == 2


def test_the_false_alarm_rate_of_fair_4_is_the_release_s_to_choose():
    """``independence_alpha`` is FAIR-4's level, Bonferroni over the outcome-protected pairs:
    the contract carries it, and the check compares the lowest p-value with it."""
    table, params = prefair_example(0)
    result = prefair(table, params)
    frames = evidence(table, result.outputs, result.sidecars, params)
    for alpha in (1e-3, 0.25):
        chosen = params.model_copy(update={"independence_alpha": alpha})
        g = next(g for g in contract(chosen, table) if g.kind == "synthetic_independence")
        r = check_guarantee(g, frames)
        pairs = len(g.outcomes) * len(g.protected)
        assert g.alpha == alpha and r.expected == alpha / pairs
        assert r.passed == (r.observed >= alpha / pairs)
    with pytest.raises(ValidationError):
        PreFairParams(epsilon=1.0, independence_alpha=0.0)
