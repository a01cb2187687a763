"""One battery for every registered algorithm (scikit-learn's ``parametrize_with_checks``,
OpenDP's ``test_algorithms.py``): its contract holds on its example inputs, the outline names
the same checks as the real contract, a rerun is byte-identical, bad input names the column,
and every checker catches the corruption its kind defines. Family folders add only the paper's
golden values."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfair.components.core.checks import check_contract, check_guarantee
from privfair.components.core.descriptor import resolve
from privfair.components.core.order import published_order
from privfair.components.core.registry import algorithms, kind_checks
from privfair.schemas.errors import InputError
from privfair.schemas.roles import read_roles

ALGORITHMS = algorithms()
IDS = [a.name for a in ALGORITHMS]
SEEDS = st.integers(min_value=0, max_value=2**16)


def _run(algo, seed):
    table, params = resolve(algo.example)(seed)
    return table, params, algo(table, params)


def _frames(algo, table, params, outputs, sidecars):
    return resolve(algo.evidence)(table, outputs, sidecars, params)


def _bytes(t: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(t, buf)
    return buf.getvalue()


@pytest.mark.parametrize("algo", ALGORITHMS, ids=IDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=SEEDS)
def test_contract_holds_on_examples(algo, seed):
    table, params, result = _run(algo, seed)
    assert set(result.outputs) == set(algo.outputs)
    assert set(result.sidecars) == set(algo.sidecars)
    assert result.contract == algo.required_contract(params, table)
    frames = _frames(algo, table, params, result.outputs, result.sidecars)
    failed = [r.to_dict() for r in check_contract(result.contract, frames) if not r.passed]
    assert not failed


@pytest.mark.parametrize("algo", ALGORITHMS, ids=IDS)
@settings(max_examples=10, deadline=None)
@given(seed=SEEDS)
def test_outline_matches_the_contract(algo, seed):
    """The data-free outline names the same guarantees (ids and kinds, in order) as the
    contract the algorithm owes on data: orchestrators name their checks from it."""
    table, params = resolve(algo.example)(seed)
    real = algo.required_contract(params, table)
    assert [(g.id, g.kind) for g in algo.outline(params)] == [(g.id, g.kind) for g in real]


ROW_LEVEL = [a for a in ALGORITHMS if a.row_level]


@pytest.mark.parametrize("algo", ROW_LEVEL, ids=[a.name for a in ROW_LEVEL])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=SEEDS)
def test_row_order_is_a_function_of_the_published_values(algo, seed):
    """A row-level release is published in its canonical order (``published_order`` of its
    first output is the identity): row order says nothing of the input order nor of the
    algorithm's internal order; the lineage sidecar keeps the map (issue 21)."""
    _, _, result = _run(algo, seed)
    first = result.outputs[algo.outputs[0]]
    assert published_order(first).tolist() == list(range(first.num_rows))


@pytest.mark.parametrize("algo", ALGORITHMS, ids=IDS)
def test_rerun_is_byte_identical(algo):
    table, params, first = _run(algo, 7)
    second = algo(table, params)
    if not algo.replayable:
        # DP noise comes from a cryptographic generator: a rerun draws fresh noise (so the
        # noise is really there), owes the same contract and publishes the same schemas
        assert first.contract == second.contract
        for name in algo.outputs:
            assert first.outputs[name].schema.equals(second.outputs[name].schema)
        for name in algo.sidecars:
            assert first.sidecars[name].schema.equals(second.sidecars[name].schema)
        noisy = [_bytes(first.sidecars[n]) != _bytes(second.sidecars[n]) for n in algo.sidecars]
        assert any(noisy)
        return
    for name in algo.outputs:
        assert _bytes(first.outputs[name]) == _bytes(second.outputs[name])
    for name in algo.sidecars:
        assert _bytes(first.sidecars[name]) == _bytes(second.sidecars[name])


@pytest.mark.parametrize("algo", ALGORITHMS, ids=IDS)
def test_column_without_role_is_named(algo):
    table, params = resolve(algo.example)(3)
    bad = table.append_column("stray", pa.array(np.arange(table.num_rows)))
    with pytest.raises(InputError) as e:
        algo(bad, params)
    assert e.value.column == "stray"


@pytest.mark.parametrize("algo", ALGORITHMS, ids=IDS)
def test_empty_table_is_refused(algo):
    """A release of no rows is refused, except a DP synthesis's: whether it exists must not
    depend on anyone having a row (an empty partition is released from the noisy counts)."""
    table, params = resolve(algo.example)(3)
    if algo.cost is not None:
        result = algo(table.slice(0, 0), params)
        assert result.outputs["data"].schema.names == table.schema.names
        return
    with pytest.raises(InputError, match="empty"):
        algo(table.slice(0, 0), params)


@pytest.mark.parametrize("algo", ALGORITHMS, ids=IDS)
def test_non_numeric_numeric_qi_is_named(algo):
    table, params = resolve(algo.example)(3)
    roles = read_roles(table)
    numeric = [
        c
        for c in roles.quasi_identifiers
        if pa.types.is_integer(table.schema.field(c).type)
        or pa.types.is_floating(table.schema.field(c).type)
    ]
    if not numeric:
        pytest.skip("no numeric quasi-identifier in this algorithm's example")
    c = numeric[0]
    i = table.schema.get_field_index(c)
    bad = table.set_column(
        i,
        table.schema.field(i).with_type(pa.string()),
        pa.array([str(v) for v in table.column(c).to_pylist()]),
    )
    with pytest.raises(InputError) as e:
        algo(bad, params)
    assert e.value.column == c


def _corruptible(algo):
    """(algorithm, seed, guarantee index) for every guarantee of the example contracts whose
    kind defines a corruption."""
    checks = kind_checks()
    out = []
    for seed in (0, 1, 2, 5):
        table, params = resolve(algo.example)(seed)
        for i, g in enumerate(algo.required_contract(params, table)):
            if checks[g.kind].corrupt:
                out.append(
                    pytest.param(
                        algo, seed, i, id=f"{algo.name}-{seed}-{g.title.replace(' ', '-')}"
                    )
                )
    return out


@pytest.mark.parametrize(
    ("algo", "seed", "index"), [p for a in ALGORITHMS for p in _corruptible(a)]
)
def test_each_checker_catches_its_corruption(algo, seed, index):
    table, params, result = _run(algo, seed)
    g = result.contract[index]
    corrupt = resolve(kind_checks()[g.kind].corrupt)
    broken = corrupt(
        g, table, dict(result.outputs), dict(result.sidecars), np.random.default_rng(seed)
    )
    if broken is None:
        pytest.skip(f"no release can break {g.title} with these parameters")
    outputs, sidecars = broken
    frames = _frames(algo, table, params, outputs, sidecars)
    verdict = check_guarantee(g, frames)
    assert not verdict.passed, f"{g.title} still holds after its corruption: {verdict.message}"
    # the untouched release passes the same check
    assert check_guarantee(g, _frames(algo, table, params, result.outputs, result.sidecars)).passed


def test_every_kind_has_a_checker_and_a_corruption_or_a_reason():
    """A kind without a corruption must be one no published file can break (its checker reads
    only the parameters and the input)."""
    unexplained = [
        k for k, kc in kind_checks().items() if kc.corrupt is None and not kc.unbreakable
    ]
    assert not unexplained


def _numeric_fields(params) -> list[str]:
    """The parameters whose value in the example is a plain number (not a flag)."""
    return [
        k
        for k, v in params.model_dump().items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    ]


@pytest.mark.parametrize("algo", ALGORITHMS, ids=IDS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")], ids=str)
def test_every_numeric_parameter_refuses_non_finite_values(algo, bad):
    """NaN compares false with everything and an infinite budget never calibrates: every
    numeric parameter refuses them, naming itself."""
    from pydantic import ValidationError

    _, params = resolve(algo.example)(0)
    fields = _numeric_fields(params)
    assert fields, f"{algo.name}'s example sets no numeric parameter"
    for name in fields:
        with pytest.raises(ValidationError) as e:
            type(params).model_validate({**params.model_dump(), name: bad})
        assert name in str(e.value)


def _degenerate(table: pa.Table, how: str) -> pa.Table:
    """The example made degenerate but still of the same schema and roles."""
    roles = read_roles(table)
    if how == "tiny":
        return table.slice(0, max(2, table.num_rows // 8))
    target = {"constant_label": "label", "constant_protected": "protected"}.get(how)
    names = [c.name for c in roles if c.role.value == target] if target else []
    if how == "constant_first_column":
        names = [table.column_names[0]]
    for n in names:
        i = table.schema.get_field_index(n)
        col = table.column(n)
        first = col.drop_null()[0] if col.null_count < len(col) else None
        if first is None:
            continue
        table = table.set_column(
            i, table.schema.field(i), pa.array([first.as_py()] * table.num_rows, col.type)
        )
    return table


@pytest.mark.parametrize("algo", ALGORITHMS, ids=IDS)
@pytest.mark.parametrize(
    "how", ["tiny", "constant_label", "constant_protected", "constant_first_column"]
)
def test_no_checker_raises_on_a_degenerate_input(algo, how):
    """On an input the algorithm accepts, however degenerate (a handful of rows, one label,
    one protected value, a constant column), every checker returns a verdict: a checker that
    raises would be an error of the run, never a verdict. An input the algorithm refuses is
    refused with an InputError naming what is wrong."""
    for seed in (0, 1):
        table, params = resolve(algo.example)(seed)
        bad = _degenerate(table, how)
        try:
            result = algo(bad, params)
        except InputError:
            continue  # refused up front, with a named rule: fine
        frames = _frames(algo, bad, params, result.outputs, result.sidecars)
        frames.setdefault("published", next(iter(result.outputs.values())).to_pandas())
        for r in check_contract(result.contract, frames):
            assert r.kind  # a verdict, pass or fail


@pytest.mark.parametrize("algo", ALGORITHMS, ids=IDS)
def test_the_new_user_hr_table(algo):
    """The new-user trial's table (``tests/_hr.py``: 2,000 employees, gender M/F/X, 10 %
    promoted with a bias against F and X, nulls in the department, weekly review dates, an
    id), with the roles and parameters a spec would give each algorithm: a release whose
    contract holds, or (``_hr.REFUSES``) a refusal naming the column it cannot take, never a
    skip and never another error."""
    from _hr import REFUSES, hr_input, hr_table

    raw = hr_table()
    assert raw.num_rows == 2000 and set(raw["gender"].to_pylist()) == {"M", "F", "X"}
    assert raw["department"].null_count > 0
    try:
        table, params = hr_input(algo.name)
    except KeyError:
        pytest.fail(f"give {algo.name} the HR table's roles and parameters in tests/_hr.py")
    refused = REFUSES.get(algo.name)
    if refused is not None:
        with pytest.raises(InputError) as e:
            algo(table, params)
        assert e.value.column == refused, str(e.value)
        return
    result = algo(table, params)
    assert result.contract == algo.required_contract(params, table)
    frames = _frames(algo, table, params, result.outputs, result.sidecars)
    failed = [r.to_dict() for r in check_contract(result.contract, frames) if not r.passed]
    assert not failed
