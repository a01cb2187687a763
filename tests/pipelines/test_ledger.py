"""The privacy-budget ledger (issue 23): a budget covering three releases allows three and refuses
the fourth (exit 2, nothing published) on SQLite and on PostgreSQL; two runs started at once
with budget for one publish exactly once; a run killed after the charge leaves the charge; the
composed total matches OpenDP's; partitions compose in parallel; the orchestrators' tasks
charge as ``privfair run`` does.

The PostgreSQL tests start a real server (``postgres_url`` in conftest); each test gets a fresh
database.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _ledgered import release_cost, write_dp_spec
from _partitioned import day_keys, write_days
from _shared import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from privfair.budget.ledger import Ledger, compose, default_url, redact

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cost(tmp_path_factory):
    return release_cost(tmp_path_factory.mktemp("cost"))


@pytest.fixture
def pg_ledger(postgres_url, request):
    """A fresh database on the session's PostgreSQL server; its URL."""
    from adbc_driver_postgresql import dbapi

    name = "t_" + request.node.name.lower().replace("[", "_").replace("]", "").replace("-", "_")
    with dbapi.connect(postgres_url, autocommit=True) as conn:
        cur = conn.cursor()
        cur.execute(f"DROP DATABASE IF EXISTS {name}")
        cur.execute(f"CREATE DATABASE {name}")
        cur.close()
    return postgres_url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_url(request, tmp_path):
    """The ledger each parametrised test runs on: a SQLite file, or a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger' / 'ledger.sqlite'}"
    return request.getfixturevalue("pg_ledger")


def _versions(store: Path, pipeline: str) -> list[str]:
    folder = store / pipeline
    if not folder.exists():
        return []
    return sorted(
        p.name
        for p in folder.iterdir()
        if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
    )


def _budget_json(capsys, *args: str) -> dict:
    code, out, err = run_cli(capsys, "budget", "--json", *args)
    assert code == 0, err
    return json.loads(out)


# --- the must-shows ----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["rho", "epsilon"])
def test_budget_of_three_releases_refuses_the_fourth(
    tmp_path, capsys, monkeypatch, cost, ledger_url, kind
):
    """rho = 3.5 x one release's (or the epsilon OpenDP converts it to): four runs over a
    growing input publish three releases; the fourth exits 2 naming what is left, and
    publishes nothing. The ledger's total is OpenDP's composition of the three."""
    from opendp.combinators import make_zCDP_to_approxDP
    from opendp.domains import atom_domain, vector_domain
    from opendp.measurements import make_gaussian
    from opendp.metrics import l2_distance

    from privfair.components.synthesis.accounting import composed_total, epsilon_of

    monkeypatch.setenv("PF_TEST_LEDGER", ledger_url)
    budget = (
        {"rho": 3.5 * cost.rho}
        if kind == "rho"
        else {"epsilon": epsilon_of(3.5 * cost.rho, 1e-8), "delta": 1e-8}
    )
    spec = write_dp_spec(
        tmp_path, partitions=False, budget={**budget, "ledger": "${PF_TEST_LEDGER}"}
    )
    store = tmp_path / "store"
    for days in (1, 2, 3):
        write_days(tmp_path, days)
        code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
        assert code == 0, err
        assert "ledger: charged rho=" in out
    assert len(_versions(store, "toy_dp")) == 3
    man = json.loads(
        (store / "toy_dp" / _versions(store, "toy_dp")[0] / "manifest.json").read_text()
    )
    # the charge reserved before the noise is what the release reports it spent
    assert man["ledger"]["charge"]["rho"] == man["metrics"]["privacy"]["rho"] == cost.rho
    write_days(tmp_path, 4)
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 2
    assert "privacy budget of 'submissions.csv' exhausted" in err
    assert "remaining rho=" in err and "nothing ran" in err
    assert len(_versions(store, "toy_dp")) == 3
    assert not (store / "toy_dp" / ".staging").exists() or not any(
        (store / "toy_dp" / ".staging").iterdir()
    )
    # the ledger's composed total is OpenDP's composition of the three releases
    report = _budget_json(capsys, "--ledger", ledger_url)
    (row,) = report["blocks"]
    assert row["block"] == "*" and row["statuses"] == {"published": 3, "refused": 1}
    assert row["spent_rho"] == pytest.approx(composed_total([cost.rho] * 3), rel=1e-12)
    if kind == "epsilon":
        # a Gaussian of scale s is 1/(2 s^2)-zCDP: the scale whose rho is the ledger's total
        s = math.sqrt(1 / (2 * row["spent_rho"]))
        space = vector_domain(atom_domain(T=float, nan=False)), l2_distance(T=float)
        g = make_gaussian(*space, scale=s)
        eps = make_zCDP_to_approxDP(g).map(1.0).epsilon(1e-8)
        assert row["spent_epsilon"] == pytest.approx(eps, rel=1e-9)
        # tighter than adding the three releases' epsilons
        assert row["spent_epsilon"] < 3 * cost_eps(cost.rho)
        assert row["remaining"]["epsilon"] > 0


def cost_eps(rho: float) -> float:
    from privfair.components.synthesis.accounting import epsilon_of

    return epsilon_of(rho, 1e-8)


def test_concurrent_runs_with_budget_for_one_publish_once(tmp_path, cost, ledger_url):
    """Two real processes started at once, budget for one release: exactly one publishes, the
    other exits 2; the ledger holds one counted charge and one refusal."""
    write_days(tmp_path, 2)
    spec = write_dp_spec(
        tmp_path, partitions=False, budget={"rho": 1.5 * cost.rho, "ledger": ledger_url}
    )
    store = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "privfair.cli", "run", str(spec), "--store", str(store)]
    procs = [
        subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    refused = next(e.decode() for (o, e), p in zip(outs, procs, strict=True) if p.returncode)
    assert "exhausted" in refused
    assert len(_versions(store, "toy_dp")) == 1
    entries = Ledger.open(ledger_url).entries()
    assert sorted(e.status for e in entries) == ["published", "refused"]


def test_a_run_killed_after_the_charge_leaves_the_charge(tmp_path, capsys, cost):
    """The process dies right after reserving (``crash_after="charge"``): nothing is published,
    the entry stays ``reserved`` and counts against the budget."""
    write_days(tmp_path, 1)
    spec = write_dp_spec(tmp_path, partitions=False, budget={"rho": 1.5 * cost.rho})
    store = tmp_path / "store"
    code = (
        "from privfair.spec.catalogue import load_spec\n"
        "from privfair.run.flow import run_release\n"
        f"run_release(load_spec({str(spec)!r}), {str(store)!r}, crash_after='charge')\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
    )
    assert p.returncode == 17, p.stderr.decode()
    assert _versions(store, "toy_dp") == []
    (row,) = _budget_json(capsys, "--store", str(store))["blocks"]
    assert row["statuses"] == {"reserved": 1}
    assert row["spent_rho"] == pytest.approx(cost.rho)
    # the budget had room for one release: the killed run spent it
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 2 and "exhausted" in err


def test_partitions_compose_in_parallel(tmp_path, capsys, cost):
    """Five daily partitions each charge their own block once; a whole-input run re-reads the
    five periods and charges each again; per partition, a budget of 2.5 releases then refuses
    a third read of any of them; a re-run of a published version charges nothing."""
    write_days(tmp_path, 5)
    spec = write_dp_spec(tmp_path, budget={"rho": 2.5 * cost.rho})
    store = tmp_path / "store"
    for key in day_keys(5):
        code, _, err = run_cli(capsys, "run", str(spec), "--store", str(store), "--partition", key)
        assert code == 0, err
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store), "--partition", key)
    assert code == 0 and out.startswith("exists"), err  # reused: not run, not charged
    rows = _budget_json(capsys, "--store", str(store))["blocks"]
    assert [r["block"] for r in rows] == day_keys(5)
    assert all(r["spent_rho"] == pytest.approx(cost.rho) for r in rows)
    code, _, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 0, err
    rows = _budget_json(capsys, "--store", str(store))["blocks"]
    assert all(r["spent_rho"] == pytest.approx(2 * cost.rho) for r in rows)
    code, _, err = run_cli(
        capsys,
        "run",
        str(spec),
        "--store",
        str(store),
        "--partition",
        day_keys(1)[0],
        "--set",
        "iters=21",
    )
    assert code == 2
    assert day_keys(1)[0] in err and "exhausted" in err


# --- what a release records ---------------------------------------------------------------------
def test_manifests_and_report_state_the_charge(tmp_path, capsys, cost):
    """The owner manifest and report show the charge, spent and remaining; the shareable copy
    states this release's charge only (no blocks, no dataset, no ledger); without a budget the
    report says none is declared."""
    write_days(tmp_path, 1)
    spec = write_dp_spec(tmp_path, partitions=False, budget={"rho": 3 * cost.rho})
    store = tmp_path / "store"
    assert run_cli(capsys, "run", str(spec), "--store", str(store))[0] == 0
    folder = store / "toy_dp" / _versions(store, "toy_dp")[0]
    led = json.loads((folder / "manifest.json").read_text())["ledger"]
    assert led["blocks"] == ["*"] and led["budget"]["rho"] == pytest.approx(3 * cost.rho)
    assert led["remaining"]["rho"] == pytest.approx(2 * cost.rho)
    pub = (folder / "shared" / "manifest.json").read_text()
    assert json.loads(pub)["privacy_charge"]["rho"] == cost.rho
    for secret in ("submissions.csv", "ledger.sqlite", '"blocks"', "remaining"):
        assert secret not in pub
    html = (folder / "report.html").read_text()
    assert "Privacy budget and re-publication" in html and "Remaining" in html
    # a spec of the same rows that declares no budget is charged against the recorded cap
    nobudget = write_dp_spec(tmp_path, name="toy_free", partitions=False)
    assert run_cli(capsys, "run", str(nobudget), "--store", str(store))[0] == 0
    folder = store / "toy_free" / _versions(store, "toy_free")[0]
    led = json.loads((folder / "manifest.json").read_text())["ledger"]
    assert led["budget"]["rho"] == pytest.approx(3 * cost.rho)
    assert led["remaining"]["rho"] == pytest.approx(cost.rho)
    # other rows, and no cap for them: the report says no budget caps the release
    other = tmp_path / "other"
    other.mkdir()
    write_days(other, 1)
    free = write_dp_spec(other, name="toy_free", partitions=False)
    assert run_cli(capsys, "run", str(free), "--store", str(tmp_path / "s2"))[0] == 0
    folder = tmp_path / "s2" / "toy_free" / _versions(tmp_path / "s2", "toy_free")[0]
    assert "no budget is declared" in (folder / "report.html").read_text()


def test_a_table_the_run_refuses_is_refused_before_the_charge(tmp_path, capsys):
    """A role MST does not read is refused by the cost itself: no ledger is created."""
    import yaml

    write_days(tmp_path, 1)
    spec = write_dp_spec(tmp_path, partitions=False, budget={"rho": 1})
    raw = yaml.safe_load(spec.read_text())
    raw["dataset"]["columns"]["x"]["role"] = "quasi_identifier"
    spec.write_text(yaml.safe_dump(raw))
    code, _, err = run_cli(capsys, "run", str(spec), "--store", str(tmp_path / "store"))
    assert code == 2 and "column 'x'" in err
    assert not (tmp_path / "store").exists()


def test_bad_ledger_urls_exit_2_without_the_password(tmp_path, capsys, monkeypatch):
    write_days(tmp_path, 1)
    store = str(tmp_path / "store")
    spec = write_dp_spec(tmp_path, partitions=False, budget={"rho": 1, "ledger": "${PF_NOPE}"})
    monkeypatch.delenv("PF_NOPE", raising=False)
    code, _, err = run_cli(capsys, "run", str(spec), "--store", store)
    assert code == 2 and "${PF_NOPE}" in err and "budget.ledger" in err
    url = "postgresql://ann:hunter2@127.0.0.1:1/none"
    spec = write_dp_spec(tmp_path, partitions=False, budget={"rho": 1, "ledger": url})
    code, _, err = run_cli(capsys, "run", str(spec), "--store", store)
    assert code == 2 and redact(url) in err and "hunter2" not in err
    spec = write_dp_spec(tmp_path, partitions=False, budget={"rho": 1, "ledger": "mysql://x/y"})
    code, _, err = run_cli(capsys, "run", str(spec), "--store", store)
    assert code == 2 and "sqlite:///PATH or postgresql://" in err
    assert not (tmp_path / "store" / "toy_dp").exists()


@pytest.mark.parametrize("kind", ["local", "remote"])
def test_tasks_charge_once_and_reuse_charges_nothing(tmp_path, cost, kind):
    """The orchestrators' tasks reserve in protect_task, mark published in publish_task; a
    second run of the same version reuses it and charges nothing, on a local store and on one
    that is not a local folder (a ``pyarrow.fs`` store: it used to draw noise again)."""
    import pyarrow.fs as pafs

    from privfair.release.store import Store
    from privfair.run import tasks

    write_days(tmp_path, 1)
    spec = write_dp_spec(tmp_path, partitions=False, budget={"rho": 1.5 * cost.rho})
    store = tmp_path / "store"
    if kind == "remote":
        store.mkdir()
        store = Store(pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()), "store")
    for i in range(2):
        work = tmp_path / f"work{i}"
        ing = tasks.ingest_task(spec, work)
        prot = tasks.protect_task(spec, ing, work, store)
        val = tasks.validate_task(prot, store)
        pub = tasks.publish_task(prot, val, store)
        assert pub.status == ("published" if i == 0 else "exists")
        assert pub.ledger["charge"]["rho"] == cost.rho
        assert (prot.ledger is None) == (i == 1)
    entries = Ledger.open(default_url()).entries()
    assert [e.status for e in entries] == ["published"]


def test_a_charge_is_given_back_only_when_no_noise_was_drawn(tmp_path, capsys, cost, monkeypatch):
    """A DP run that fails before its mechanism reads a record gives its charge back
    (``released``, saying so); one that fails after keeps it (``failed``): the noise may have
    been drawn."""
    from privfair.components.synthesis import accounting

    write_days(tmp_path, 1)
    spec = write_dp_spec(tmp_path, partitions=False, budget={"rho": 3 * cost.rho})
    store = tmp_path / "store"
    real = accounting.Compositor.__init__

    def before_any_read(self, records, steps):
        raise RuntimeError("the mechanism could not start")

    monkeypatch.setattr(accounting.Compositor, "__init__", before_any_read)
    code, _, _ = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code != 0
    monkeypatch.setattr(accounting.Compositor, "__init__", real)

    def after_the_first_read(self, *args, **kwargs):
        raise RuntimeError("the mechanism broke after a measurement")

    monkeypatch.setattr(accounting.Compositor, "gaussian", after_the_first_read)
    code, _, _ = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code != 0
    entries = Ledger.open(default_url()).entries()
    assert [e.status for e in entries] == ["released", "failed"]
    assert (
        "no noise was drawn" in entries[0].note and "noise may have been drawn" in entries[1].note
    )
    acc = compose([e.rho for e in entries if e.counted], {"rho": 3 * cost.rho})
    assert acc["spent"]["rho"] == pytest.approx(cost.rho)


# --- the arithmetic -----------------------------------------------------------------------------
_rho = st.floats(min_value=1e-6, max_value=0.5, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(_rho, min_size=1, max_size=8), _rho)
def test_composition_arithmetic(rhos, cap):
    """zCDP composes by adding rho; a rho budget fits while the sum does; an (epsilon, delta)
    budget while OpenDP's conversion of the sum does, which never exceeds the sum of the
    releases' epsilons."""
    from privfair.components.synthesis.accounting import epsilon_of, rho_budget

    acc = compose(rhos, {"rho": cap})
    assert acc["spent"]["rho"] == pytest.approx(math.fsum(rhos), rel=1e-12)
    assert acc["fits"] == (math.fsum(rhos) <= cap * (1 + 1e-9))
    eps, delta = epsilon_of(cap, 1e-8), 1e-8
    acc = compose(rhos, {"epsilon": eps, "delta": delta})
    assert acc["spent"]["epsilon"] <= sum(epsilon_of(r, delta) for r in rhos) * (1 + 1e-9)
    assert acc["fits"] == (epsilon_of(math.fsum(rhos), delta) <= eps * (1 + 1e-9))
    assert acc["remaining"]["rho"] == pytest.approx(
        max(0.0, rho_budget(eps, delta) - math.fsum(rhos)), abs=1e-9
    )


def test_budget_command_on_a_store_without_a_ledger(tmp_path, capsys):
    code, out, _ = run_cli(capsys, "budget", "--store", str(tmp_path / "none"))
    assert code == 0 and "no ledger" in out
    assert not (tmp_path / "none").exists()
    code, _, err = run_cli(capsys, "budget", "--ledger", "postgresql://a:pw@127.0.0.1:1/x")
    assert code == 2 and "a:***@" in err and ":pw@" not in err


def test_the_store_ledger_is_the_owners_and_versioned(tmp_path, capsys):
    """The SQLite ledger is created 0600; a ledger of another schema version is refused
    (exit 2 naming the versions), as is a file that is not a ledger."""
    import sqlite3
    import stat

    path = tmp_path / "l" / "ledger.sqlite"
    Ledger.open(f"sqlite:///{path}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE privfair_ledger_meta SET value = '99' WHERE key = 'schema'")
    code, _, err = run_cli(capsys, "budget", "--ledger", f"sqlite:///{path}")
    assert code == 2 and "schema version 99" in err
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database, " * 100)
    code, _, err = run_cli(capsys, "budget", "--ledger", f"sqlite:///{junk}")
    assert code == 2 and "the ledger cannot be used" in err


def test_a_ledger_password_is_in_no_file_of_the_store(tmp_path, capsys, cost, pg_ledger):
    """A PostgreSQL URL with a password (the test server trusts any): the release is charged
    there, and the password is in no manifest, report or ledger record, only ``***``."""
    url = pg_ledger.replace("privfair@", "privfair:s3cretpw@")
    write_days(tmp_path, 1)
    spec = write_dp_spec(tmp_path, partitions=False, budget={"rho": 2 * cost.rho, "ledger": url})
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 0, err
    assert "s3cretpw" not in out + err
    for path in store.rglob("*"):
        if path.is_file():
            assert b"s3cretpw" not in path.read_bytes(), path
    man = json.loads(next(store.glob("toy_dp/*/manifest.json")).read_text())
    assert man["spec"]["budget"]["ledger"] == redact(url) == man["ledger"]["ledger"]
    assert not Path(default_url()[len("sqlite:///") :]).exists()  # charged in PostgreSQL only
    assert [e.status for e in Ledger.open(url).entries()] == ["published"]


_statuses = st.sampled_from(["reserved", "published", "quarantined", "failed", "refused"])


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from("abc*"), min_size=1, max_size=3, unique=True), _rho, _statuses
        ),
        max_size=8,
    ),
    _rho,
)
def test_parallel_composition_arithmetic(releases, cap):
    """Per partition, a block's spent rho is the sum over the releases that read it (or read
    every block, ``*``); per dataset, each release counts once whatever it read; a refused
    attempt counts nothing; a charge fits only if it fits on every block it reads."""
    from privfair.budget.ledger import Entry, Partitioning, spent_on

    keys = Partitioning("keys", "region")

    entries = [
        Entry(
            i * 10 + j,
            f"r{i}",
            "d",
            "record",
            b,
            "p",
            "v",
            None,
            None,
            rho,
            None,
            None,
            None,
            None,
            None,
            None,
            status,
            None,
            "",
            "",
            '["d"]',
            keys.dumps(),
        )
        for i, (blocks, rho, status) in enumerate(releases)
        for j, b in enumerate(blocks)
    ]
    counted = [(set(b), r) for b, r, s in releases if s != "refused"]
    for block in "abc":
        want = math.fsum(r for bs, r in counted if block in bs or "*" in bs)
        assert spent_on(entries, keys, block) == pytest.approx(want)
    assert spent_on(entries, keys, "*", "dataset") == pytest.approx(
        math.fsum(r for _, r in counted)
    )
