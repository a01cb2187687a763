"""What a new user's own settings break (issue 22): every mistake in a command line or a spec's
execution is exit 2 with a message naming the option, key or URL, its value and the rule, never a
traceback with exit 1 (exit 1 means only that a guarantee failed); and a checker that raises is an
error of the run, never a failed guarantee (nothing published, nothing quarantined)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from _shared import TOY_COLUMNS, run_cli

from privfair.schemas.errors import SpecError

REPO = Path(__file__).resolve().parents[2]
N = 30  # rows of the toy table; 12 of them have the negative label


def toy_csv(n: int = N, negatives: int | None = None) -> str:
    rng = np.random.default_rng(0)
    x = [round(float(v), 3) for v in rng.normal(size=n)]
    c = [str(v) for v in rng.choice(["a", "b", "c"], n)]
    pa_ = [int(i % 3 != 0) for i in range(n)]
    y = [int(v) for v in (rng.random(n) < np.where(np.arange(n) % 3 != 0, 0.7, 0.3))]
    if negatives is not None:  # the first `negatives` rows negative, the rest positive
        y = [0 if i < negatives else 1 for i in range(n)]
    rows = zip(x, c, pa_, y, strict=True)
    return "x,c,PA,y\n" + "".join(f"{a},{b},{p},{q}\n" for a, b, p, q in rows)


def toy_spec(tmp_path: Path, csv: str | None = None, **params) -> Path:
    (tmp_path / "toy.csv").write_text(csv or toy_csv())
    spec = {
        "name": "toy_errors",
        "dataset": {"path": str(tmp_path / "toy.csv"), "format": "csv", "columns": TOY_COLUMNS},
        "component": {"name": "fair_mdav", "params": {"k": 3, "tau": 1.0, **params}},
    }
    path = tmp_path / "toy_errors.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def assert_error(code: int, err: str, *needles: str) -> None:
    """Exit 2, one ``privfair: error:`` line naming every needle, no traceback."""
    assert code == 2, err
    assert err.startswith("privfair: error:"), err
    assert "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)


def assert_nothing_published(store: Path) -> None:
    """No release, no ``latest``, no quarantined candidate, no staging left."""
    if store.exists():
        left = [p.relative_to(store) for p in store.rglob("*")]
        assert not left, left


# --- the Spark master --------------------------------------------------------------------------


def run_on_master(tmp_path: Path, capsys, master: str) -> tuple[int, str, float]:
    spec = toy_spec(tmp_path)
    t0 = time.monotonic()
    code, _, err = run_cli(
        capsys,
        "run",
        str(spec),
        "--store",
        str(tmp_path / "store"),
        "--engine",
        "spark",
        "--master",
        master,
        "--set",
        "block_rows=12",  # the blocks go to the engine
    )
    return code, err, time.monotonic() - t0


@pytest.mark.parametrize(
    "master, rule",
    [
        ("banana", "Spark takes local, local[N]"),
        ("spark://nowhere", "'nowhere' is not HOST:PORT"),
        ("spark://nowhere:http", "'nowhere:http' is not HOST:PORT"),
        ("spark://host:70777", "port 70777 is not between 1 and 65535"),
        ("local[0]", "local[0] runs no thread"),
        ("local[two]", "Spark takes local, local[N]"),
        ("http://host:7077", "Spark takes local, local[N]"),
    ],
)
def test_a_malformed_master_is_refused_before_spark_starts(tmp_path, capsys, master, rule):
    code, err, seconds = run_on_master(tmp_path, capsys, master)
    assert_error(code, err, "execution.master", f"'{master}' is not a Spark master URL", rule)
    assert seconds < 15
    assert_nothing_published(tmp_path / "store")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "host, why",
    [("nowhere.invalid", "the host name does not resolve"), ("127.0.0.1", "nothing listens")],
)
def test_an_unreachable_master_is_named_within_seconds(tmp_path, capsys, host, why):
    master = f"spark://{host}:{_closed_port() if host == '127.0.0.1' else 7077}"
    code, err, seconds = run_on_master(tmp_path, capsys, master)
    assert_error(code, err, "execution.master", f"cannot reach the Spark master at '{master}'", why)
    assert seconds < 15
    assert_nothing_published(tmp_path / "store")


def test_master_forms_spark_takes_are_accepted():
    from privfair.components.core.engine import make_engine, master_endpoints

    for ok in ("local", "local[2]", "local[*]", "local[4,2]", "local-cluster[2,1,1024]", "yarn"):
        assert master_endpoints(ok) == []
    assert master_endpoints("k8s://https://10.0.0.1:6443") == []
    assert master_endpoints("spark://a:7077,[::1]:7078") == [("a", 7077), ("::1", 7078)]
    with pytest.raises(SpecError, match="execution.master"):
        make_engine("spark", "banana")


@pytest.mark.slow
def test_a_master_that_never_answers_is_given_up_after_the_connect_timeout(tmp_path):
    """Something listens on the master's port but never speaks Spark: Spark alone retries for
    a minute, then ends in a Java stack and a traceback with exit 1. The session start is
    bounded ($PRIVFAIR_SPARK_CONNECT_TIMEOUT): exit 2 naming the URL. A subprocess, so the
    abandoned session start cannot hold this test session's Spark lock."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.5)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])  # accepted, never answered
            except TimeoutError:
                continue
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    master = f"spark://127.0.0.1:{server.getsockname()[1]}"
    spec = toy_spec(tmp_path)
    env = {**os.environ, "PRIVFAIR_SPARK_CONNECT_TIMEOUT": "3"}
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "privfair.cli", "run", str(spec), "--store"]
            + [str(tmp_path / "store"), "--engine", "spark", "--master", master]
            + ["--set", "block_rows=12"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=150,
        )
    finally:
        stop.set()
        for s in held:
            s.close()
        server.close()
    seconds = time.monotonic() - t0
    assert proc.returncode == 2, proc.stderr[-3000:]
    # the JVM may still print its start-up lines after ours
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith("privfair: error:")]
    assert len(ours) == 1, proc.stderr[-3000:]
    assert ours[0].startswith("privfair: error: execution.master"), ours
    assert f"no Spark session on '{master}' within 3 s" in ours[0]
    assert "Traceback" not in proc.stderr
    assert seconds < 45  # Spark alone gives up after 60 s
    assert_nothing_published(tmp_path / "store")


# --- privfair evaluate ---------------------------------------------------------------------------


def evaluate_cli(tmp_path: Path, capsys, *more: str, spec: Path | None = None):
    spec = spec or toy_spec(tmp_path)
    out = tmp_path / "evaluations"
    code, _, err = run_cli(capsys, "evaluate", str(spec), "--out", str(out), *more)
    return code, err, out


@pytest.mark.parametrize(
    "folds, rule",
    [
        ("1", "must be a whole number of at least 2"),
        ("0", "must be a whole number of at least 2"),
        ("-3", "must be a whole number of at least 2"),
        ("31", "31 folds need at least 31 rows of each class of the label 'y'"),
        ("13", "13 folds need at least 13 rows of each class of the label 'y'"),
    ],
)
def test_folds_that_cannot_split_the_input_are_refused(tmp_path, capsys, folds, rule):
    """Fewer than two folds; more folds than rows (30); more than the smaller class (12
    negative rows), which leaves a test fold without one class."""
    code, err, out = evaluate_cli(tmp_path, capsys, "--folds", folds, "--classifiers", "lr")
    assert_error(code, err, "'--folds'", folds, rule)
    if int(folds) > 2:
        assert "12 negative rows (of 30)" in err
    assert not out.exists()


def test_folds_up_to_the_smaller_class_run(tmp_path, capsys):
    code, err, out = evaluate_cli(tmp_path, capsys, "--folds", "12", "--classifiers", "lr")
    assert code == 0, err
    assert json.loads((out / "toy_errors" / "evaluation.json").read_text())["folds"] == 12


def test_a_label_with_one_class_cannot_be_evaluated(tmp_path, capsys):
    spec = toy_spec(tmp_path, toy_csv(negatives=0))
    code, err, out = evaluate_cli(tmp_path, capsys, "--classifiers", "lr", spec=spec)
    assert_error(code, err, "column 'y'", "both label classes", "all 30 rows are positive")
    assert not out.exists()


@pytest.mark.parametrize(
    "value, rule",
    [
        (",", "names no classifier; give one or more of lr, rf"),
        ("", "names no classifier"),
        ("lr,lr", "names 'lr' twice"),
        ("lr,banana", "unknown classifier 'banana'"),
    ],
)
def test_classifiers_name_at_least_one_known_classifier_once(tmp_path, capsys, value, rule):
    code, err, out = evaluate_cli(tmp_path, capsys, "--classifiers", value)
    assert_error(code, err, "'--classifiers'", rule)
    assert not out.exists()


@pytest.mark.parametrize("seed", ["-1", str(2**32)])
def test_a_seed_numpy_cannot_take_is_refused(tmp_path, capsys, seed):
    code, err, out = evaluate_cli(tmp_path, capsys, "--seed", seed, "--classifiers", "lr")
    assert_error(code, err, "'--seed'", f"got {seed}", "from 0 to 2147483647")
    assert not out.exists()


@pytest.mark.parametrize(
    "grid, rule",
    [
        (["k=3,3"], "'k=3,3' lists k=3 twice"),
        (["k=3", "k=4"], "'k' is given twice"),
        (["k=3,"], "has an empty value for 'k'"),
        (["=3"], "expects key=v1,v2,..., got '=3'"),
        (["k=["], "the value '[' is not YAML"),
    ],
)
def test_a_grid_that_repeats_or_cannot_be_read_is_refused(tmp_path, capsys, grid, rule):
    code, err, out = evaluate_cli(tmp_path, capsys, "--classifiers", "lr", "--grid", *grid)
    assert_error(code, err, "'--grid'", rule)
    assert not out.exists()


def test_an_evaluations_folder_under_a_file_is_refused_before_the_run(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    spec = toy_spec(tmp_path)
    code, _, err = run_cli(
        capsys, "evaluate", str(spec), "--out", str(tmp_path / "afile"), "--classifiers", "lr"
    )
    assert_error(code, err, str(tmp_path / "afile"), "not a folder", "--out")
    assert "evaluate toy_errors" not in err  # refused before any fold ran


def test_a_small_class_makes_the_cost_of_protection_not_applicable(tmp_path, capsys):
    """The report's hold-out is one fold of four: with 3 negative rows a test fold may lack
    the class. The release is still published; the section says why it does not apply."""
    spec = toy_spec(tmp_path, toy_csv(negatives=3))
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 0, err
    man = json.loads((store / "toy_errors" / out.split()[2] / "manifest.json").read_text())
    cost = man["cost_of_protection"]
    assert cost["status"] == "not applicable", cost
    assert "the hold-out is one fold of 4: 4 folds need at least 4 rows" in cost["reason"]


# --- privfair run --set --------------------------------------------------------------------------


@pytest.mark.parametrize("pair", ["k=[", "k={a"])
def test_a_set_value_that_is_not_yaml_is_named(tmp_path, capsys, pair):
    spec = toy_spec(tmp_path)
    store = tmp_path / "store"
    code, _, err = run_cli(capsys, "run", str(spec), "--store", str(store), "--set", pair)
    assert_error(code, err, "'--set'", f"'{pair}': the value is not YAML")
    assert_nothing_published(store)


# --- a checker that raises -----------------------------------------------------------------------


def raising_checker(g, frame):
    raise KeyError("__group")


def test_a_checker_that_raises_is_an_error_of_the_run(tmp_path, capsys, monkeypatch):
    """k-anonymity's checker raises on its evidence: no verdict, so exit 2 naming the
    guarantee and the error; nothing published and no candidate quarantined as failed."""
    import privfair.components.core.checks as checks

    monkeypatch.setattr(checks, "check_k_anonymity", raising_checker)
    spec = toy_spec(tmp_path)
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert_error(code, err, "guarantee C4 (k_anonymity)", "KeyError: '__group'", "checker raised")
    assert "guarantees failed" not in err and "quarantined" not in err
    assert_nothing_published(store)


def test_a_checker_that_raises_on_a_published_release_is_no_verdict(tmp_path, capsys, monkeypatch):
    """``privfair validate`` of a good release while a checker raises: exit 2, not FAIL."""
    import privfair.components.core.checks as checks

    spec = toy_spec(tmp_path)
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 0, err
    latest = store / "toy_errors" / "latest"
    monkeypatch.setattr(checks, "check_k_anonymity", raising_checker)
    code, out, err = run_cli(capsys, "validate", str(latest))
    assert_error(code, err, "guarantee C4 (k_anonymity)", "KeyError: '__group'")
    assert "FAIL" not in out
    monkeypatch.undo()
    assert run_cli(capsys, "validate", str(latest))[0] == 0


def test_an_evidence_builder_that_raises_is_an_error_of_the_run(tmp_path, capsys, monkeypatch):
    import privfair.components.microaggregation.audit as audit

    def broken(*args, **kwargs):
        raise RuntimeError("lineage has no row_id")

    monkeypatch.setattr(audit, "evidence", broken)
    spec = toy_spec(tmp_path)
    store = tmp_path / "store"
    code, _, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert_error(
        code, err, "the evidence of 'fair_mdav' could not be built", "RuntimeError: lineage"
    )
    assert_nothing_published(store)
