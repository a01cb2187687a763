"""No path to a non-finite or uncalibratable budget (issue 22): ``epsilon: .inf`` made the run
search for its zCDP budget until killed; ``1e308`` overflowed deep in the run; a bin edge of
``1e308`` published garbage integers and ``rows: 1e12`` exhausted memory. Each is refused up
front with an error naming the parameter (a spec: exit 2 naming ``component.params.<key>``),
and the accounting itself refuses a non-finite budget rather than spinning."""

from __future__ import annotations

import signal
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pydantic import ValidationError

from privfair.components.core.checks import check_contract
from privfair.components.synthesis.accounting import plan, rho_budget
from privfair.components.synthesis.audit import evidence
from privfair.components.synthesis.examples import BINS, prefair_example
from privfair.components.synthesis.params import MAX_ROWS, MSTParams, PreFairParams, noisy_rows
from privfair.components.synthesis.synthesize import prefair
from privfair.schemas.errors import InputError, SpecError
from privfair.spec.catalogue import parse_spec

INF, NAN = float("inf"), float("nan")


@contextmanager
def _within(seconds: float):
    """Fail (rather than hang the suite) when the block runs longer than ``seconds``."""

    def _raise(*_):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


BAD = [
    ("epsilon", INF, "finite number"),
    ("epsilon", "inf", "finite number"),
    ("epsilon", -INF, "finite number"),
    ("epsilon", NAN, "finite number"),
    ("epsilon", 1e308, r"\[0.001, 1000\]"),
    ("epsilon", 1e6, r"\[0.001, 1000\]"),
    ("epsilon", 1e-300, r"\[0.001, 1000\]"),
    ("epsilon", 0.0, r"\[0.001, 1000\]"),
    ("epsilon", -1.0, r"\[0.001, 1000\]"),
    ("delta", 0, "never pure DP"),
    ("delta", 0.0, "never pure DP"),
    ("delta", 5e-324, r"\[1e-300, 0.1\]"),
    ("delta", 0.5, r"\[1e-300, 0.1\]"),
    ("delta", 1.0, r"\[1e-300, 0.1\]"),
    ("delta", INF, "finite number"),
    ("delta", NAN, "finite number"),
    ("split", (NAN, 0.5, 0.5), "finite"),
    ("split", (INF, 0.5, 0.5), "finite"),
    ("split", (1e-300, 0.5, 0.5), "at least 1e-6"),
    ("bins", {"age": (0.0, INF)}, "finite number"),
    ("bins", {"age": (-1e308, 1e308)}, r"finite numbers in \[-1e\+15, 1e\+15\]"),
    ("bins", {"age": {"start": 0, "stop": INF, "step": 1}}, "bins of 'age': stop .*finite"),
    ("bins", {"age": {"start": -1e308, "stop": 1e308, "step": 1e307}}, "bins of 'age': start"),
    ("bins", {"age": {"start": 0, "stop": 10, "step": 5e-324}}, "at most 100,000 bins"),
    ("bins", {"age": {"start": 0, "stop": 10, "step": INF}}, "bins of 'age': step .*finite"),
    ("rows", 10**12, "less than or equal to 100000000"),
    ("rows", 0, "greater than 0"),
    ("nulls", ("job", "job"), "named twice"),
]


@pytest.mark.parametrize(("key", "value", "message"), BAD, ids=[f"{k}={v}" for k, v, _ in BAD])
def test_a_bad_number_is_refused_naming_the_parameter(key, value, message):
    params = {"epsilon": 1.0, key: value}
    with _within(5), pytest.raises(ValidationError, match=message) as e:
        PreFairParams(**params)
    assert e.value.errors()[0]["loc"][0] == key
    with _within(5), pytest.raises(SpecError, match=message) as s:
        parse_spec(
            {
                "name": "p",
                "dataset": {"name": "compas"},
                "component": {"name": "prefair", "params": params},
            }
        )
    assert s.value.key.startswith(f"component.params.{key}")


def test_a_yaml_infinity_is_refused_as_a_spec_key():
    import yaml

    raw = yaml.safe_load(
        "name: p\ndataset: {name: compas}\ncomponent: {name: mst, params: {epsilon: .inf}}"
    )
    with _within(5), pytest.raises(SpecError) as e:
        parse_spec(raw)
    assert e.value.key == "component.params.epsilon" and "finite" in e.value.rule


@pytest.mark.parametrize(
    ("epsilon", "delta", "column"),
    [(INF, 1e-9, "epsilon"), (NAN, 1e-9, "epsilon"), (0.0, 1e-9, "epsilon"), (1.0, 0.0, "delta")],
)
def test_the_accounting_refuses_a_non_finite_budget_rather_than_spinning(epsilon, delta, column):
    """Whatever reaches it (params built without validation, another caller)."""
    with _within(10), pytest.raises(InputError) as e:
        rho_budget(epsilon, delta)
    assert e.value.column == column
    with _within(10), pytest.raises(InputError):
        plan(epsilon, delta, 6, "greedy")


@pytest.mark.parametrize(
    ("epsilon", "delta"), [(1e308, 1e-9), (1.0, 1 - 1e-16), (1e-300, 1e-300), (1e3, 1e-300)]
)
def test_extreme_budgets_end_quickly_in_a_plan_or_a_named_refusal(epsilon, delta):
    """Past what the params accept, the accounting still ends: a finite plan, or an
    ``InputError`` naming epsilon (1e-300 gives rho = 0: no noise scale is finite)."""
    with _within(20):
        try:
            rho, steps = plan(epsilon, delta, 6, "exponential")
        except InputError as e:
            assert e.column == "epsilon"
            return
    assert rho > 0 and all(0 < s.scale < float("inf") for s in steps.values())


@pytest.mark.parametrize("epsilon", [1e-3, 1e3])
def test_the_bounds_of_the_range_run_and_keep_their_promises(epsilon):
    table, params = prefair_example(0)
    params = params.model_copy(update={"epsilon": epsilon, "iters": 60})
    with _within(120):
        result = prefair(table, params)
    frames = evidence(table, result.outputs, result.sidecars, params)
    assert all(r.passed for r in check_contract(result.contract, frames))
    assert 1 <= result.outputs["data"].num_rows <= MAX_ROWS


def test_the_noisy_row_count_is_capped_and_never_fails():
    assert noisy_rows(-1e9) == 1 and noisy_rows(float("nan")) == 1
    assert noisy_rows(float("inf")) == MAX_ROWS and noisy_rows(1e300) == MAX_ROWS
    assert noisy_rows(41.5) == 42


def test_bins_past_an_int32_column_range_publish_int64_values_in_them():
    """The published type is the spec's (integer bins: int64), not the input's int32, so bins
    past int32's range are no overflow: every value lies in its bin, as an int64."""
    table, params = prefair_example(0)
    wide = params.model_copy(update={"bins": {**BINS, "age": (-1e15, 0.0, 1e15)}, "iters": 20})
    table = table.set_column(
        table.schema.get_field_index("age"),
        table.schema.field("age").with_type(pa.int32()),
        table.column("age").cast("int32"),
    )
    age = prefair(table, wide).outputs["data"].column("age")
    assert age.type == pa.int64()
    assert pc.min(age).as_py() >= -1e15 and pc.max(age).as_py() < 1e15


def test_the_default_delta_and_a_documented_epsilon_are_accepted():
    assert MSTParams(epsilon=1.0).delta == 1e-9
    assert MSTParams(epsilon="1").epsilon == 1.0
