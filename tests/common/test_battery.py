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

from components.core.checks import check_contract, check_guarantee
from components.core.descriptor import resolve
from components.core.order import published_order
from components.core.registry import algorithms, kind_checks
from schemas.errors import InputError
from schemas.roles import read_roles

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
    table, params = resolve(algo.example)(3)
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
