"""The report's reruns measured in a second process (``privfair.release.beside``): the records a run
writes are the ones it would have measured itself, a second process that dies is replaced by a
measurement here, and a run that stops early leaves no process behind."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import privfair.components.generalisation.figures as gen_figures
import privfair.evaluation.evaluate
from privfair.evaluation.evaluate import cost_of_protection
from privfair.release import beside
from privfair.run.flow import ReleasePlan, ingest, run_release
from privfair.spec.catalogue import load_spec

SPECS = Path(__file__).resolve().parents[2] / "pipelines" / "specs"


@pytest.fixture(scope="module")
def german():
    spec = load_spec(SPECS / "german_fair_mdav.yaml")
    return spec, ingest(spec)


@pytest.fixture(scope="module")
def german_dmondrian():
    spec = load_spec(SPECS / "german_dmondrian.yaml")
    return spec, ingest(spec)


@pytest.fixture
def always_beside(monkeypatch):
    """German is below the size at which a run measures beside itself: lower it."""
    monkeypatch.setattr(beside, "BACKGROUND_ROWS", 0)
    monkeypatch.setattr(beside, "_cores", lambda: 2)


def _not_here(monkeypatch) -> None:
    """A rerun in this process fails: what passes was measured by the second one."""

    def refuse(*args, **kwargs):
        raise AssertionError("measured in the run's own process")

    monkeypatch.setattr(privfair.evaluation.evaluate, "holdout_cost", refuse)
    monkeypatch.setattr(gen_figures, "sweep", refuse)


def _start(spec, ing, tmp_path) -> beside.Beside:
    plan = ReleasePlan.of(spec, tmp_path / "store")
    return beside.Beside.start(plan, ing.table, ing.input["fingerprint"])


def _cost_here(spec, ing) -> dict:
    return cost_of_protection(spec, ing.table, input_fingerprint=ing.input["fingerprint"])


def _sweep_here(spec, ing) -> list:
    return gen_figures.sweep(spec.component.name, spec.params.model_dump(mode="json"), ing.table)


def test_the_second_process_measures_what_this_one_would(
    german_dmondrian, tmp_path, always_beside, monkeypatch
):
    spec, ing = german_dmondrian
    with monkeypatch.context() as m:
        _not_here(m)
        with _start(spec, ing, tmp_path) as b:
            assert b.background
            cost, measures = b.cost_of_protection(), b.input_measures()
    assert cost["status"] == "measured"
    assert cost == _cost_here(spec, ing)
    assert measures == {"utility_against_t": _sweep_here(spec, ing)}
    assert len(measures["utility_against_t"]) >= 4


def test_a_small_input_is_measured_here(german, tmp_path):
    spec, ing = german
    assert ing.table.num_rows < beside.BACKGROUND_ROWS
    with _start(spec, ing, tmp_path) as b:
        assert not b.background
        assert b.cost_of_protection()["status"] == "measured"
        assert b.input_measures() is None  # Fair-MDAV's report reruns nothing else


def test_a_spark_spec_is_measured_here(german, tmp_path, always_beside):
    """A second process would start a second Spark session: the reruns stay on the run's."""
    spec, ing = german
    ex = spec.execution.model_copy(update={"engine": "spark"})
    plan = ReleasePlan.of(spec.model_copy(update={"execution": ex}), tmp_path / "store")
    assert not beside.Beside.start(plan, ing.table, ing.input["fingerprint"]).background


def test_a_second_process_that_dies_is_replaced_by_a_measurement_here(
    german_dmondrian, tmp_path, always_beside, monkeypatch
):
    spec, ing = german_dmondrian
    monkeypatch.setattr(sys, "executable", "/bin/false")  # the child exits at once, silent
    with _start(spec, ing, tmp_path) as b:
        assert b.background
        assert b.cost_of_protection() == _cost_here(spec, ing)
        assert b.input_measures() == {"utility_against_t": _sweep_here(spec, ing)}


def test_a_measurement_that_fails_in_the_second_process_is_made_here(
    german_dmondrian, tmp_path, always_beside, monkeypatch
):
    """A failure the second process alone meets (here: a stand-in that fails every record)
    costs a second measurement, not a different record or error."""
    spec, ing = german_dmondrian
    fake = tmp_path / "failing-python"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import pickle, sys\n"
        "sys.stdin.buffer.read()\n"
        "fail = (False, RuntimeError('no such family here'))\n"
        "sys.stdout.buffer.write(pickle.dumps({'cost': fail, 'input': fail}))\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    with _start(spec, ing, tmp_path) as b:
        assert b.background
        assert b.cost_of_protection() == _cost_here(spec, ing)
        assert b.input_measures() == {"utility_against_t": _sweep_here(spec, ing)}


def test_close_stops_measurements_still_running(german, tmp_path, always_beside):
    spec, ing = german
    b = _start(spec, ing, tmp_path)
    proc = b._proc
    assert proc is not None
    b.close()
    assert proc.poll() is not None  # killed, and reaped
    assert not b.background


def test_a_run_writes_the_records_measured_beside_it(
    german_dmondrian, tmp_path, always_beside, monkeypatch
):
    """The manifest keeps both records, and the report's utility figure is drawn from the
    manifest's (this process could not have measured it)."""
    spec, ing = german_dmondrian
    cost, sweep = _cost_here(spec, ing), _sweep_here(spec, ing)
    with monkeypatch.context() as m:
        _not_here(m)
        out = run_release(spec, tmp_path / "store")
    release = Path(out.path)
    man = json.loads((release / "manifest.json").read_text())
    assert man["cost_of_protection"] == cost
    assert man["input_measures"] == {"utility_against_t": json.loads(json.dumps(sweep))}
    report = (release / "report.html").read_text()
    assert 'id="fig-utility_against_t"' in report
    assert "could not be drawn" not in report
    shared = json.loads((release / "shared" / "manifest.json").read_text())
    assert "input_measures" not in shared and "cost_of_protection" not in shared


def test_an_input_measure_that_fails_is_the_figure_s_to_report(
    german_dmondrian, tmp_path, monkeypatch
):
    """As before the second process: the figure measures it, and says why it could not."""
    spec, ing = german_dmondrian

    def broken(*args, **kwargs):
        raise ValueError("no sweep today")

    monkeypatch.setattr(gen_figures, "sweep", broken)
    out = run_release(spec, tmp_path / "store")
    release = Path(out.path)
    assert "input_measures" not in json.loads((release / "manifest.json").read_text())
    assert "no sweep today" in (release / "report.html").read_text()


def test_the_orchestrators_validate_task_measures_beside_its_validation(
    german_dmondrian, tmp_path, always_beside, monkeypatch
):
    """The Airflow and Dagster path (protect, then validate in another task) starts the
    measurements with the candidate and writes the same records."""
    from privfair.run import tasks

    spec, ing = german_dmondrian
    cost, sweep = _cost_here(spec, ing), _sweep_here(spec, ing)
    raw = tasks.ingest_task(spec, tmp_path / "w" / "raw")
    prot = tasks.protect_task(spec, raw.as_dict(), tmp_path / "w" / "prot")
    with monkeypatch.context() as m:
        _not_here(m)
        val = tasks.validate_task(prot.as_dict(), tmp_path / "store")
    published = tasks.publish_task(prot, val, tmp_path / "store")
    man = json.loads((Path(published.path) / "manifest.json").read_text())
    assert man["cost_of_protection"] == cost
    assert man["input_measures"] == {"utility_against_t": json.loads(json.dumps(sweep))}
