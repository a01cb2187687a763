"""The cost of protection measured in a second process (``pipelines.cost``): the record a run
writes is the one it would have measured itself, a second process that dies is replaced by a
measurement here, and a run that stops early leaves no process behind."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pipelines import cost
from pipelines.catalogue import load_spec
from pipelines.evaluate import cost_of_protection
from pipelines.flow import ReleasePlan, ingest, run_release

SPECS = Path(__file__).resolve().parents[2] / "pipelines" / "specs"


@pytest.fixture(scope="module")
def german():
    spec = load_spec(SPECS / "german_fair_mdav.yaml")
    ing = ingest(spec)
    return spec, ing


@pytest.fixture
def always_beside(monkeypatch):
    """German is below the size at which a run measures beside itself: lower it."""
    monkeypatch.setattr(cost, "BACKGROUND_ROWS", 0)
    monkeypatch.setattr(cost, "_cores", lambda: 2)


def _not_here(monkeypatch) -> None:
    """A measurement in this process fails: what passes was measured by the second one."""
    import pipelines.evaluate

    def refuse(*args, **kwargs):
        raise AssertionError("measured in the run's own process")

    monkeypatch.setattr(pipelines.evaluate, "holdout_cost", refuse)


def _pending(spec, ing, tmp_path) -> cost.PendingCost:
    plan = ReleasePlan.of(spec, tmp_path / "store")
    return cost.PendingCost.start(plan, ing.table, ing.input["fingerprint"])


def test_the_second_process_measures_what_this_one_would(
    german, tmp_path, always_beside, monkeypatch
):
    spec, ing = german
    with monkeypatch.context() as m:
        _not_here(m)
        with _pending(spec, ing, tmp_path) as pending:
            assert pending.background
            beside = pending.result()
    assert beside["status"] == "measured"
    assert beside == cost_of_protection(spec, ing.table, input_fingerprint=ing.input["fingerprint"])


def test_a_small_input_is_measured_here(german, tmp_path):
    spec, ing = german
    assert ing.table.num_rows < cost.BACKGROUND_ROWS
    with _pending(spec, ing, tmp_path) as pending:
        assert not pending.background
        assert pending.result()["status"] == "measured"


def test_a_spark_spec_is_measured_here(german, tmp_path, always_beside):
    """A second process would start a second Spark session: the cost stays on the run's."""
    spec, ing = german
    spark = spec.model_copy(
        update={"execution": spec.execution.model_copy(update={"engine": "spark"})}
    )
    plan = ReleasePlan.of(spark, tmp_path / "store")
    assert not cost.PendingCost.start(plan, ing.table, ing.input["fingerprint"]).background


def test_a_second_process_that_dies_is_replaced_by_a_measurement_here(
    german, tmp_path, always_beside, monkeypatch
):
    spec, ing = german
    monkeypatch.setattr(sys, "executable", "/bin/false")  # the child exits at once, silent
    with _pending(spec, ing, tmp_path) as pending:
        assert pending.background
        got = pending.result()
    assert got == cost_of_protection(spec, ing.table, input_fingerprint=ing.input["fingerprint"])


def test_close_stops_a_measurement_still_running(german, tmp_path, always_beside):
    spec, ing = german
    pending = _pending(spec, ing, tmp_path)
    proc = pending._proc
    assert proc is not None
    pending.close()
    assert proc.poll() is not None  # killed, and reaped
    assert not pending.background


def test_a_run_writes_the_record_measured_beside_it(german, tmp_path, always_beside, monkeypatch):
    spec, ing = german
    with monkeypatch.context() as m:
        _not_here(m)
        out = run_release(spec, tmp_path / "store")
    man = json.loads((Path(out.path) / "manifest.json").read_text())
    assert man["cost_of_protection"] == cost_of_protection(
        spec, ing.table, input_fingerprint=ing.input["fingerprint"]
    )
