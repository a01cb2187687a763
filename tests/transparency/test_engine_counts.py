"""ATR cells counted through the execution engine (issue 14, part 2).

``build_cells`` aggregates records with one ``current_engine().group_counts`` call. Here:

- on the family's example records and on the Australian credit data of
  ``pipelines/specs/australian_atr.yaml``, the cells counted by ``LocalEngine`` equal, exactly,
  a direct row-by-row numpy reference (the aggregation the component did before: per-row key
  values, ``np.unique`` over the rows, ``np.bincount`` of the weights and decisions);
- with the records projected in batches of 97 rows (a ``TableFrame``), the cells are the
  same, every projection seeing at most 97 records;
- the whole ATR run gives the same tables, to the bit, as a run whose cells come from that
  reference (everything after the cells is the committed code);
- inside ``using(spark_engine)`` the run gives the LocalEngine run's tables and its contract
  passes (``evidence`` + ``check_contract``, the rebuilt cells counted by Spark too).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from privfair.components.core.checks import check_contract
from privfair.components.core.engine import LocalEngine, using
from privfair.components.transparency import atr as atr_module
from privfair.components.transparency.atr import atr
from privfair.components.transparency.audit import evidence
from privfair.components.transparency.cells import Cells, build_cells, region_labels
from privfair.components.transparency.examples import atr_example, golden_cells, records
from privfair.components.transparency.params import ATRParams
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles, read_roles
from tests.transparency._reports import shipped_report

# --- the inputs ---------------------------------------------------------------------------------


def _australian(builtin_table) -> tuple[pa.Table, ATRParams]:
    """The Australian credit data with the family's role presets (as the pipeline's ingest
    attaches them) and the params of ``australian_atr.yaml``."""
    return shipped_report(builtin_table, "australian_atr")


def _weighted(seed: int, fractional: bool = False) -> tuple[pa.Table, ATRParams]:
    """Weighted records with a binned public attribute and missing values in a nominal one."""
    rng = np.random.default_rng(seed)
    n = 300
    weights = rng.random(n) * 3 if fractional else rng.integers(0, 5, n).astype(np.float64)
    roles = TableRoles.of(
        [
            ColumnRole("gender", Role.PUBLIC, Kind.NOMINAL),
            ColumnRole("age", Role.PUBLIC, Kind.NUMERIC),
            ColumnRole("income", Role.SENSITIVE, Kind.ORDINAL, domain=("low", "mid", "high")),
            ColumnRole("approved", Role.LABEL, Kind.BINARY, positive="yes"),
            ColumnRole("weight", Role.ADMISSIBLE, Kind.NUMERIC),
        ]
    )
    data = pa.table(
        {
            "gender": rng.choice(np.array(["F", "M", None], dtype=object), n).tolist(),
            "age": rng.integers(18, 80, n).astype(np.float64),
            "income": rng.choice(["low", "mid", "high", "other"], n).tolist(),
            "approved": rng.choice(["yes", "no"], n).tolist(),
            "weight": weights,
        }
    )
    params = ATRParams(delta=0.8, bins={"age": (30.0, 50.0)}, include_population=True)
    return attach_roles(data, roles), params


EXAMPLES = {
    **{f"records-{s}": (lambda s=s: (records(s), ATRParams(delta=0.9))) for s in (0, 1, 2)},
    "records-5000": lambda: (records(11, 5000), ATRParams(fidelity="alpha", alpha=0.8)),
    **{f"atr_example-{s}": (lambda s=s: atr_example(s)) for s in (0, 3, 4, 6)},
    "weighted": lambda: _weighted(7),
}


def _case(name: str, builtin_table) -> tuple[pa.Table, ATRParams]:
    return _australian(builtin_table) if name == "australian" else EXAMPLES[name]()


CASES = [*EXAMPLES, "australian"]


# --- the reference: the row-by-row aggregation ---------------------------------------------------


def _reference_cells(table: pa.Table, params: ATRParams) -> Cells:
    """The cells straight from the rows: each row's key values in Python, ``np.unique`` over
    the rows' codes, ``np.bincount`` of weights and decisions (no engine involved)."""
    roles = read_roles(table)
    public = [c.name for c in roles if c.role is Role.PUBLIC]
    private = [c.name for c in roles if c.role is Role.SENSITIVE]
    names = public + private
    (label,) = [c.name for c in roles if c.role is Role.LABEL]
    weight = next((c.name for c in roles if c.role is Role.ADMISSIBLE), None)
    values, orders = {}, {}
    for n in names:
        if n in params.bins:
            cuts = np.asarray(params.bins[n], dtype=np.float64)
            labels = region_labels(tuple(params.bins[n]))
            x = table.column(n).to_numpy(zero_copy_only=False).astype(np.float64)
            values[n] = [labels[i] for i in np.searchsorted(cuts, x, side="right")]
            orders[n] = labels
            continue
        values[n] = ["<missing>" if v is None else v for v in table.column(n).to_pylist()]
        present, domain = set(values[n]), roles[n].domain
        order = [v for v in domain if v in present] if domain else sorted(present, key=str)
        orders[n] = order + sorted(present - set(order), key=str)
    codes = np.column_stack(
        [np.array([orders[n].index(v) for v in values[n]], dtype=np.int64) for n in names]
    )
    decisions = model = split = None
    if params.decisions == "cells":
        population = np.asarray(table.column(weight).to_pylist(), dtype=np.float64)
        d1 = np.asarray(table.column(label).to_pylist(), dtype=np.float64)
        order = np.lexsort(codes.T[::-1])
        population, d1, codes = population[order], d1[order], codes[order]
    else:
        if params.decisions == "model":
            from privfair.components.transparency.model import decide

            decisions, model, split = decide(table, roles, label, params)
        else:
            positive = set(roles[label].positive)
            decisions = np.array([v in positive for v in table.column(label).to_pylist()], float)
        w = (
            np.asarray(table.column(weight).to_pylist(), dtype=np.float64)
            if weight
            else np.ones(table.num_rows)
        )
        codes, inv = np.unique(codes, axis=0, return_inverse=True)
        population = np.bincount(inv.ravel(), weights=w, minlength=len(codes))
        mass = np.bincount(inv.ravel(), weights=w * decisions, minlength=len(codes))
        d1 = np.divide(mass, population, out=np.zeros_like(mass), where=population > 0)
    group = np.unique(codes[:, : len(public)], axis=0, return_inverse=True)[1].ravel()
    keys = pa.table(
        {n: [str(orders[n][c]) for c in codes[:, j]] for j, n in enumerate(names)},
        schema=pa.schema([(n, pa.string()) for n in names]),
    )
    warnings = (
        [
            "several private attributes: the guarantee bounds the confidence about their joint "
            f"value ({', '.join(private)}), not about each one separately (A3)"
        ]
        if len(private) > 1
        else []
    )
    if params.decisions != "model":  # only a model's decisions are per record
        decisions = None
    return Cells(keys, public, private, population, d1, group, decisions, model, split, warnings)


def _same_cells(got: Cells, want: Cells) -> None:
    assert got.keys.equals(want.keys)
    assert (got.public, got.private, got.warnings) == (want.public, want.private, want.warnings)
    for field in ("population", "d1", "group"):
        a, b = getattr(got, field), getattr(want, field)
        assert a.dtype == b.dtype and np.array_equal(a, b), field  # exact, not approximate
    if want.decisions is None:
        assert got.decisions is None
    else:
        assert np.array_equal(got.decisions, want.decisions)
    if want.split is not None:
        assert np.array_equal(got.split, want.split) and got.model == want.model


def _tables(result) -> dict[str, pa.Table]:
    return {**result.outputs, **result.sidecars}


def _identical(got: pa.Table, want: pa.Table) -> bool:
    """Same schema (metadata included) and same values, bit for bit."""
    return got.schema.equals(want.schema, check_metadata=True) and got.equals(want)


class _Spy:
    """Wraps an engine's ``group_counts``, recording the key sets of each call."""

    def __init__(self, engine, monkeypatch) -> None:
        self.calls: list[list[tuple[str, ...]]] = []
        inner = engine.group_counts

        def group_counts(table, keys):
            self.calls.append([tuple(k) for k in keys])
            return inner(table, keys)

        monkeypatch.setattr(engine, "group_counts", group_counts)


# --- 1. LocalEngine counts = the row reference; ATR outputs unchanged --------------------------


@pytest.mark.parametrize("name", CASES)
def test_local_engine_cells_equal_the_row_reference(name, builtin_table):
    table, params = _case(name, builtin_table)
    with using(LocalEngine()):
        got = build_cells(table, params)
    _same_cells(got, _reference_cells(table, params))


@pytest.mark.parametrize("name", ["records-5000", "weighted", "atr_example-3"])
def test_local_cells_are_counted_from_bounded_batches(name, builtin_table, monkeypatch):
    """On the local engine the records reach the engine as a ``TableFrame``, projected batch
    by batch (never the whole table at once): with batches of 97 rows, every projection sees
    at most 97 records, they are all seen once, and the cells are the row reference's.
    (``decisions: model``, Australian's, decides each record on the whole table: row-level.)"""
    from privfair.components.core import frames
    from privfair.components.transparency import cells as cells_module

    table, params = _case(name, builtin_table)
    monkeypatch.setattr(frames.TableFrame.__init__, "__defaults__", (97,))
    seen, real = [], cells_module.project

    def project(batch, layout):
        seen.append(batch.num_rows)
        return real(batch, layout)

    monkeypatch.setattr(cells_module, "project", project)
    engine = LocalEngine()
    spy = _Spy(engine, monkeypatch)
    with using(engine):
        got = build_cells(table, params)
    assert len(spy.calls) == 1 and max(seen) <= 97 and sum(seen) == table.num_rows
    _same_cells(got, _reference_cells(table, params))


def test_one_group_counts_call_with_one_key_set(builtin_table, monkeypatch):
    table, params = _australian(builtin_table)
    engine = LocalEngine()
    spy = _Spy(engine, monkeypatch)
    with using(engine):
        build_cells(table, params)
    # A1, A8, A10's region, the decision: one job on Spark
    assert spy.calls == [[("a0", "a1", "a2", "decision")]]


def test_pre_aggregated_cells_are_counted_once_each(monkeypatch):
    """Pre-aggregated cells go through the one count too (so a frame of them is read on its
    cluster): each cell is counted once, its population and D_1 taken as given."""
    engine = LocalEngine()
    spy = _Spy(engine, monkeypatch)
    with using(engine):
        got = build_cells(golden_cells(), ATRParams(decisions="cells"))
    assert spy.calls == [[("a0", "a1", "decision", "weight")]]
    _same_cells(got, _reference_cells(golden_cells(), ATRParams(decisions="cells")))


@pytest.mark.parametrize("name", [*CASES, "golden_cells"])
def test_atr_outputs_identical_to_the_row_aggregation(name, builtin_table, monkeypatch):
    if name == "golden_cells":
        table, params = golden_cells(), ATRParams(delta=0.9, decisions="cells")
    else:
        table, params = _case(name, builtin_table)
    new = atr(table, params)
    monkeypatch.setattr(atr_module, "build_cells", _reference_cells)
    old = atr(table, params)
    for key, want in _tables(old).items():
        assert _identical(_tables(new)[key], want), key
    assert new.metrics == old.metrics and new.warnings == old.warnings


def test_australian_stored_values(builtin_table):
    """Values of the Australian report stored from a run of the committed row-by-row code
    (before the cells were counted through the engine)."""
    table, params = _australian(builtin_table)
    r = atr(table, params)
    assert (r.metrics["records"], r.metrics["cells"], r.metrics["groups"]) == (690, 12, 2)
    cells = r.sidecars["audit_cells"]
    assert cells.column("population").to_pylist() == [
        79.0, 22.0, 5.0, 38.0, 45.0, 33.0, 183.0, 39.0, 1.0, 95.0, 71.0, 79.0
    ]  # fmt: skip
    assert cells.column("d1_true").to_pylist()[:6] == [
        1 / 79, 0.0, 0.2, 24 / 38, 43 / 45, 1.0
    ]  # fmt: skip
    summary = r.outputs["privacy_summary"]
    assert summary.column("A1").to_pylist() == ["0", "1", None]
    # beta*_g as published is recomputed from the announced rules (issue 21): the solver's
    # optimum [0.5644122383252819, 0.6147202403304544] to the last bit
    assert summary.column("max_adversary_confidence").to_pylist() == [
        0.5644122383252819, 0.6147202403304545, 0.6147202403304545
    ]  # fmt: skip
    assert r.sidecars["audit_groups"].column("beta_star").to_pylist() == [
        0.5644122383252819, 0.6147202403304544
    ]  # fmt: skip
    assert r.metrics["c_star_global"] == 0.7
    rules = r.outputs["decision_rules"].slice(0, 3).to_pylist()
    assert [(x["A8"], x["A10"], x["announced_d1"]) for x in rules] == [
        ("0", "<1", 0.11265822784810112), ("0", "[1, 6)", 0.0), ("0", ">=6", 0.10000000000000003)
    ]  # fmt: skip


def test_fractional_weights_sum_per_distinct_weight():
    """Fractional weights are summed as ``count * weight`` per distinct weight: equal to the
    row-by-row sum up to the last bits of the floats (the documented difference)."""
    table, params = _weighted(3, fractional=True)
    got, want = build_cells(table, params), _reference_cells(table, params)
    assert got.keys.equals(want.keys) and np.array_equal(got.group, want.group)
    np.testing.assert_allclose(got.population, want.population, rtol=1e-14, atol=0)
    np.testing.assert_allclose(got.d1, want.d1, rtol=1e-14, atol=1e-15)


# --- 2. Spark: the same outputs, and the contract holds ----------------------------------------


@pytest.mark.parametrize("name", ["records-0", "weighted", "fractional", "australian"])
def test_spark_gives_the_local_outputs_and_passes_the_contract(
    name, builtin_table, spark_engine, monkeypatch
):
    if name == "fractional":
        table, params = _weighted(3, fractional=True)
    else:
        table, params = _case(name, builtin_table)
    with using(LocalEngine()):
        local = atr(table, params)
    spy = _Spy(spark_engine, monkeypatch)
    with using(spark_engine):
        distributed = atr(table, params)
        frames = evidence(table, distributed.outputs, distributed.sidecars, params)
    assert len(spy.calls) == 2  # the run's cells and the evidence's rebuilt cells
    for key, want in _tables(local).items():
        assert _identical(_tables(distributed)[key], want), key
    assert distributed.metrics == local.metrics
    results = check_contract(distributed.contract, frames)
    assert results and all(c.passed for c in results), [c for c in results if not c.passed]
