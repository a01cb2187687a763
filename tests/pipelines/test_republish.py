"""Re-publication of releases that are not differentially private (issue 23): a release whose
rows an earlier published release of its pipeline grouped differently is refused under
``republish: refuse`` (the default) and ``new_partitions``, published with a warning under
``allow``; identical outputs are not a re-publication; another pipeline's release of the same
rows is a warning; every release is in the ledger, whatever its family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from _partitioned import day_keys, spec_text, write_days
from _shared import read_latest, run_cli

from privfair.budget.ledger import Ledger, default_url


def _spec(folder: Path, name: str = "toy_daily", partitions: bool = True, **extra) -> Path:
    spec = yaml.safe_load(spec_text(name=name))
    if not partitions:
        del spec["partitions"]
    spec.update(extra)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _run(capsys, spec: Path, store: Path, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "run", str(spec), "--store", str(store), *args)


def _published(store: Path, pipeline: str) -> int:
    folder = store / pipeline
    return sum(
        1
        for p in folder.iterdir()
        if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
    )


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_env(request, monkeypatch):
    """The default store ledger, or a PostgreSQL one given by $PRIVFAIR_LEDGER."""
    if request.param == "postgres":
        from adbc_driver_postgresql import dbapi

        base = request.getfixturevalue("postgres_url")
        name = f"r_{request.node.name.lower().replace('[', '_').replace(']', '')}"
        with dbapi.connect(base, autocommit=True) as conn:
            cur = conn.cursor()
            cur.execute(f"DROP DATABASE IF EXISTS {name}")
            cur.execute(f"CREATE DATABASE {name}")
            cur.close()
        monkeypatch.setenv("PRIVFAIR_LEDGER", base.rsplit("/", 1)[0] + f"/{name}")
    else:
        monkeypatch.delenv("PRIVFAIR_LEDGER", raising=False)
    return request.param


def test_overlap_under_a_new_grouping_is_refused(tmp_path, capsys, ledger_env):
    """MDAV over every row, re-run on an input that grew by a day: the old rows would be grouped
    anew. Refused by default (exit 2, the policy named, nothing published); the ledger records
    both attempts."""
    store = tmp_path / "store"
    spec = _spec(tmp_path, partitions=False)
    write_days(tmp_path, 2)
    assert _run(capsys, spec, store)[0] == 0
    write_days(tmp_path, 3)
    code, _, err = _run(capsys, spec, store)
    assert code == 2
    assert "republish: refuse" in err and "another grouping" in err
    assert _published(store, "toy_daily") == 1
    url = None if ledger_env == "sqlite" else __import__("os").environ["PRIVFAIR_LEDGER"]
    ledger = Ledger.open(url or default_url())
    assert [e.status for e in ledger.entries(pipeline="toy_daily")] == ["published", "refused"]
    assert all(e.policy == "refuse" and e.rho is None for e in ledger.entries())


def test_allow_publishes_and_warns(tmp_path, capsys):
    store = tmp_path / "store"
    spec = _spec(tmp_path, partitions=False, republish="allow")
    write_days(tmp_path, 2)
    assert _run(capsys, spec, store)[0] == 0
    write_days(tmp_path, 3)
    code, out, err = _run(capsys, spec, store)
    assert code == 0, err
    assert "republish: allow" in out and "intersected" in out
    latest = read_latest(store / "toy_daily")
    man = json.loads((store / "toy_daily" / latest / "manifest.json").read_text())
    assert man["ledger"]["policy"] == "allow" and man["ledger"]["intersects"]
    assert "may be intersected" in (store / "toy_daily" / latest / "report.html").read_text()
    assert (
        "intersect" not in (store / "toy_daily" / latest / "shared" / "manifest.json").read_text()
    )


def test_identical_outputs_are_not_a_republication(tmp_path, capsys):
    """A new version (the description changed) that publishes the same bytes is the same
    grouping: published."""
    store = tmp_path / "store"
    write_days(tmp_path, 2)
    spec = _spec(tmp_path, partitions=False)
    assert _run(capsys, spec, store)[0] == 0
    spec = _spec(tmp_path, partitions=False, description="The same release, described anew.")
    code, out, err = _run(capsys, spec, store)
    assert code == 0 and out.startswith("published"), err
    assert _published(store, "toy_daily") == 2


def test_new_partitions(tmp_path, capsys):
    """Only partitions never released are released: new days publish; an old day with other
    params is refused naming the policy; a whole-input run over old days is refused."""
    store = tmp_path / "store"
    write_days(tmp_path, 3)
    spec = _spec(tmp_path, republish="new_partitions")
    d1, d2, d3 = day_keys(3)
    for key in (d1, d2):
        assert _run(capsys, spec, store, "--partition", key)[0] == 0
    code, _, err = _run(capsys, spec, store, "--partition", d1, "--set", "k=6")
    assert code == 2 and "republish: new_partitions" in err and d1 in err
    code, _, err = _run(capsys, spec, store)
    assert code == 2 and "republish: new_partitions" in err and f"new here: {d3}" in err
    assert _run(capsys, spec, store, "--partition", d3)[0] == 0
    assert _published(store, "toy_daily") == 3


def test_another_pipeline_of_the_dataset_is_a_republication(tmp_path, capsys):
    """A second pipeline over the same rows is the same people grouped anew: refused under the
    default policy; under ``allow`` published with a warning naming the first pipeline."""
    store = tmp_path / "store"
    write_days(tmp_path, 2)
    assert _run(capsys, _spec(tmp_path, partitions=False), store)[0] == 0
    other = _spec(tmp_path, name="toy_other", partitions=False)
    code, _, err = _run(capsys, other, store, "--set", "k=6")
    assert code == 2 and "republish: refuse" in err and "toy_daily" in err
    allowed = _spec(tmp_path, name="toy_allowed", partitions=False, republish="allow")
    code, out, err = _run(capsys, allowed, store, "--set", "k=6")
    assert code == 0, err
    assert "republish: allow" in out and "toy_daily" in out and "differenced" in out


def test_the_orchestrators_tasks_apply_the_policy(tmp_path):
    """protect/validate/publish tasks: the first release is entered as published; a second
    grouping of the same rows is refused in validate_task, before anything is staged."""
    from privfair.budget.ledger import RepublishRefused
    from privfair.run import tasks
    from privfair.spec.catalogue import load_spec, with_params

    write_days(tmp_path, 2)
    store = tmp_path / "store"
    spec = load_spec(_spec(tmp_path, partitions=False))
    for i, k in enumerate((5, 6)):
        s = with_params(spec, {"k": k})
        work = tmp_path / f"work{i}"
        prot = tasks.protect_task(s, tasks.ingest_task(s, work), work, store)
        if i == 0:
            pub = tasks.publish_task(prot, tasks.validate_task(prot, store), store)
            assert pub.status == "published" and pub.ledger["policy"] == "refuse"
            assert isinstance(pub.ledger["entry"], int)
        else:
            with pytest.raises(RepublishRefused, match="republish: refuse"):
                tasks.validate_task(prot, store)
    ledger = Ledger.open(default_url())
    assert [e.status for e in ledger.entries()] == ["published", "refused"]
    assert not any((store / "toy_daily" / ".staging").glob("*"))
