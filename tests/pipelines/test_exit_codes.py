"""Exit codes that mean what the README says (issue 43): 0 released, 1 a guarantee failed (the
candidate quarantined), 2 bad input, spec or environment (an optional package not installed
included, naming its ``pip install 'privfair[EXTRA]'``), 3 an internal error: one line naming
the phase and a log file (mode 0600, outside the store) with the traceback; nothing published
or quarantined. A side measurement (the cost of protection) never fails a release."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from _shared import TOY_COLUMNS, run_cli

N = 30


def toy_csv(path: Path, label_values: int = 2) -> Path:
    rng = np.random.default_rng(0)
    rows = ["x,c,PA,y"]
    for i in range(N):
        y = i % label_values if label_values > 2 else int(rng.random() < 0.6)
        rows.append(f"{rng.normal():.3f},{rng.choice(['a', 'b', 'c'])},{int(i % 3 != 0)},{y}")
    path.write_text("\n".join(rows) + "\n")
    return path


def toy_spec(
    tmp_path: Path, algo: str = "fair_mdav", columns: dict | None = None, **dataset
) -> Path:
    params = {"k": 3, "tau": 1.0} if algo == "fair_mdav" else {"k": 3}
    if "path" not in dataset and "source" not in dataset:
        dataset = {"path": str(toy_csv(tmp_path / "toy.csv")), "format": "csv", **dataset}
    spec = {
        "name": "toy_exit",
        "dataset": {**dataset, "columns": columns or TOY_COLUMNS},
        "component": {"name": algo, "params": params},
        "republish": "allow",
    }
    path = tmp_path / "toy_exit.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def assert_nothing_published(store: Path) -> None:
    """No release, no ``latest``, no quarantined candidate, no staging left."""
    if store.exists():
        left = [p.relative_to(store) for p in store.rglob("*")]
        assert not left, left


def the_log(err: str) -> Path:
    assert err.count("\n") == 1 and err.endswith("\n"), err  # one line
    assert "Traceback" not in err, err
    log = Path(err.rsplit("traceback in ", 1)[1].strip())
    assert log.is_file(), err
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    return log


# --- 3: an internal error ------------------------------------------------------------------------


def test_an_internal_error_while_protecting_is_exit_3_naming_the_phase_and_a_log(
    tmp_path, capsys, monkeypatch
):
    import privfair.run.flow as flow

    def broken(*args, **kwargs):
        raise KeyError("__row")

    monkeypatch.setattr(flow, "protect", broken)
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "run", str(toy_spec(tmp_path)), "--store", str(store))
    assert code == 3, err
    assert err.startswith("privfair: internal error in phase 'protect (fair_mdav)'"), err
    assert "KeyError: '__row'" in err and "nothing was published or quarantined" in err
    log = the_log(err)
    state = Path(__import__("os").environ["XDG_STATE_HOME"])
    assert log.parent == state / "privfair" / "logs"
    assert not log.is_relative_to(store)
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "in broken" in text
    assert "privfair run" in text and "phase 'protect (fair_mdav)'" in text
    assert_nothing_published(store)


def test_an_internal_error_after_the_candidate_was_written_removes_it(
    tmp_path, capsys, monkeypatch
):
    """The candidate exists (written, validated) when the report fails: it is removed, not
    quarantined, and the run says which phase it was in."""
    import privfair.run.flow as flow

    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(flow, "_reports", broken)
    store = tmp_path / "store"
    code, _, err = run_cli(capsys, "run", str(toy_spec(tmp_path)), "--store", str(store))
    assert code == 3, err
    assert "phase 'stage › report'" in err and "ZeroDivisionError" in err, err
    assert "quarantined at" not in err
    the_log(err)
    assert_nothing_published(store)


def test_an_internal_error_of_another_command_is_exit_3(tmp_path, capsys, monkeypatch):
    import privfair.release.store as release

    def broken(*args, **kwargs):
        raise TypeError("'NoneType' object is not subscriptable")

    monkeypatch.setattr(release, "list_releases", broken)
    code, out, err = run_cli(capsys, "releases", "--store", str(tmp_path / "store"))
    assert code == 3, err
    assert err.startswith("privfair: internal error in privfair releases, before its first phase")
    assert "TypeError" in the_log(err).read_text()


def test_the_log_is_written_where_the_state_folder_cannot_be(tmp_path, capsys, monkeypatch):
    import privfair.run.flow as flow

    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "afile"))  # a file: no folder under it
    monkeypatch.setattr(flow, "protect", lambda *a, **k: 1 / 0)
    code, _, err = run_cli(capsys, "run", str(toy_spec(tmp_path)), "--store", str(tmp_path / "s"))
    assert code == 3, err
    log = the_log(err)
    assert not log.is_relative_to(tmp_path)


# --- 2: an optional package that is not installed ------------------------------------------------


def test_a_missing_sqlite_driver_names_the_extra(tmp_path, capsys, monkeypatch):
    (tmp_path / "raw.db").write_bytes(b"")  # a database file is there; its driver is not
    monkeypatch.setitem(sys.modules, "adbc_driver_sqlite", None)
    monkeypatch.setitem(sys.modules, "adbc_driver_sqlite.dbapi", None)
    spec = toy_spec(tmp_path, source={"kind": "sql", "url": "sqlite:///raw.db", "table": "t"})
    store = tmp_path / "store"
    code, _, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 2, err
    assert err.startswith("privfair: error:") and "Traceback" not in err, err
    assert "pip install 'privfair[sql]'" in err and "adbc_driver_sqlite" in err, err
    assert_nothing_published(store)


def test_a_missing_package_anywhere_names_its_extra(tmp_path, capsys, monkeypatch):
    """A ``ModuleNotFoundError`` of an optional package outside the connectors (a target, the
    Spark engine) is exit 2 too; one of an installed package's hidden submodule is a bug."""
    import privfair.run.flow as flow

    def needs(name):
        def run(*args, **kwargs):
            __import__(name)

        return run

    monkeypatch.setitem(sys.modules, "deltalake", None)
    monkeypatch.setattr(flow, "protect", needs("deltalake"))
    code, _, err = run_cli(capsys, "run", str(toy_spec(tmp_path)), "--store", str(tmp_path / "s"))
    assert code == 2, err
    assert "pip install 'privfair[delta]'" in err, err

    monkeypatch.setattr(flow, "protect", needs("pyspark.sql.connect"))  # hidden by pipelines
    code, _, err = run_cli(capsys, "run", str(toy_spec(tmp_path)), "--store", str(tmp_path / "t"))
    assert code == 3, err
    assert "privfair[" not in err


# --- the cost of protection never fails a release ------------------------------------------------

NUMERIC_PROTECTED = {
    "x": {"role": "quasi_identifier", "kind": "numeric"},
    "c": {"role": "quasi_identifier", "kind": "nominal", "domain": ["a", "b", "c"]},
    "gender": {"role": "protected", "kind": "nominal", "unfavoured": 2},
    "y": {"role": "label", "kind": "binary", "positive": 1},
}


def gender_csv(path: Path, n: int = 300) -> Path:
    rng = np.random.default_rng(0)
    rows = ["x,c,gender,y"]
    for i in range(n):
        g = i % 3 + 1  # coded 1 / 2 / 3: published as its groups
        rows.append(
            f"{int(rng.integers(18, 80))},{rng.choice(['a', 'b', 'c'])},{g},"
            f"{int(rng.random() < (0.45 if g == 2 else 0.65))}"
        )
    path.write_text("\n".join(rows) + "\n")
    return path


def dmondrian_spec(tmp_path: Path) -> Path:
    spec = {
        "name": "toy_exit",
        "dataset": {
            "path": str(gender_csv(tmp_path / "gender.csv")),
            "format": "csv",
            "columns": NUMERIC_PROTECTED,
        },
        "component": {"name": "dmondrian", "params": {"t": 0.3}},
        "republish": "allow",
    }
    path = tmp_path / "toy_exit.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def manifest(store: Path, out: str) -> dict:
    version = out.split()[2]
    return json.loads((store / "toy_exit" / version / "manifest.json").read_text())


def test_a_numeric_protected_attribute_published_as_groups_is_measured(tmp_path, capsys):
    """dMondrian publishes gender coded 1/2/3 as "protected" / "unprotected": the cost of
    protection compares both arms on those groups instead of casting them to numbers."""
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "run", str(dmondrian_spec(tmp_path)), "--store", str(store))
    assert code == 0, err
    cost = manifest(store, out)["cost_of_protection"]
    assert cost["status"] == "measured", cost
    assert cost["compared_as_groups"] == ["gender"]
    assert set(cost["holdout"]) == {"none", "dmondrian"}
    assert all(0 <= arm["accuracy"] <= 1 for arm in cost["holdout"].values())


def test_a_numeric_protected_attribute_is_evaluated_on_its_groups(tmp_path, capsys):
    from privfair.evaluation.evaluate import evaluate
    from privfair.run.flow import ingest
    from privfair.spec.catalogue import load_spec

    spec = load_spec(dmondrian_spec(tmp_path))
    ev = evaluate(spec, ingest(spec).table, folds=3, classifiers=["lr"])
    assert ev.meta["compared_as_groups"] == ["gender"]
    assert {r["protection"] for r in ev.summary.to_pylist()} == {"none", "dmondrian"}


def test_a_failing_side_measurement_is_recorded_and_the_release_published(
    tmp_path, capsys, monkeypatch
):
    import privfair.evaluation.evaluate as evaluate

    def broken(*args, **kwargs):
        raise RuntimeError("the classifier would not fit")

    monkeypatch.setattr(evaluate, "holdout_cost", broken)
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "run", str(toy_spec(tmp_path)), "--store", str(store))
    assert code == 0, err
    assert out.startswith("published:"), out
    man = manifest(store, out)
    cost = man["cost_of_protection"]
    assert cost["status"] == "failed", cost
    assert cost["error"] == "RuntimeError: the classifier would not fit"
    assert man["validation"]["status"] == "passed"
    report = (store / "toy_exit" / out.split()[2] / "report.html").read_text()
    assert "the classifier would not fit" in report


# --- 2, not 1: a label microaggregation cannot read as two groups --------------------------------

THREE_VALUED = {
    "x": {"role": "quasi_identifier", "kind": "numeric"},
    "c": {"role": "quasi_identifier", "kind": "nominal"},
    "y": {"role": "label", "kind": "binary", "positive": 1},
}


@pytest.mark.parametrize(
    "algo, pa_role",
    [
        ("mdav", None),
        ("mdav", {"role": "sensitive"}),
        ("mdav", {"role": "protected", "kind": "binary", "favoured": 1}),
        ("fair_mdav", {"role": "protected", "kind": "binary", "favoured": 1}),
    ],
)
def test_a_three_valued_label_is_bad_input(tmp_path, capsys, algo, pa_role):
    columns = dict(THREE_VALUED) | ({"PA": pa_role} if pa_role else {})
    csv = toy_csv(tmp_path / "toy.csv", label_values=3)
    exclude = {"exclude": ["PA"]} if pa_role is None else {}
    spec = toy_spec(tmp_path, algo, columns, path=str(csv), format="csv", **exclude)
    store = tmp_path / "store"
    code, _, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 2, err
    assert err.startswith("privfair: error: column 'y'"), err
    assert "exactly two distinct values" in err and "[0, 1, 2]" in err, err
    assert "guarantees failed" not in err and "quarantined" not in err
    assert_nothing_published(store)
