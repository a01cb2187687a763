"""The attacker of recurring releases (issue 42): two shareable copies of one table, the second
after one person joined (or left), differenced to read that person's published values.

A 3,000-row table is released by MDAV (k = 5); one person joins; the owner releases again
through every ordinary route: another spelling of the path, another store, a remote store,
the Python API, another pipeline, a re-partitioning. Each second release must be refused
(``republish: refuse``, the default), so the attacker holds one copy and the difference is
empty. ``test_the_attack_works_when_allowed`` shows the attack recovers the person exactly
when the owner opts out (``republish: allow``): the test can see a leak.
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import yaml
from _shared import run_cli

from privfair.budget.ledger import RepublishRefused

ROWS = 3000
START = date(2026, 11, 2)  # a Monday
COLUMNS = {
    "age": {"role": "quasi_identifier", "kind": "numeric"},
    "zip": {"role": "quasi_identifier", "kind": "numeric"},
    "sex": {"role": "protected", "kind": "binary", "favoured": "M"},
    "diagnosis": {"role": "sensitive", "kind": "nominal"},
    "outcome": {"role": "label", "kind": "binary", "positive": 1},
    "submitted": {"role": "ignored"},
}
PASS_THROUGH = ("sex", "diagnosis", "outcome")
NEWCOMER = {
    "age": 47,
    "zip": 8042,
    "sex": "F",
    "diagnosis": "rare-condition",
    "outcome": 1,
    "submitted": START + timedelta(days=3),
}


def people(extra: bool) -> pa.Table:
    rng = np.random.default_rng(7)
    t = {
        "age": rng.integers(18, 90, ROWS),
        "zip": rng.integers(8000, 8100, ROWS),
        "sex": rng.choice(["F", "M"], ROWS),
        "diagnosis": rng.choice(["flu", "asthma", "diabetes"], ROWS),
        "outcome": rng.integers(0, 2, ROWS),
        "submitted": [START + timedelta(days=int(d)) for d in rng.integers(0, 28, ROWS)],
    }
    table = pa.table(t)
    if extra:
        table = pa.concat_tables(
            [table, pa.table({k: [v] for k, v in NEWCOMER.items()}, schema=table.schema)]
        )
    return table


def write_people(folder: Path, extra: bool) -> Path:
    path = folder / "people.csv"
    pacsv.write_csv(people(extra), path)
    return path


def write_spec(folder: Path, name: str = "people_mdav", path: str = "people.csv", **extra) -> Path:
    spec = {
        "name": name,
        "description": "People released by MDAV.",
        "dataset": {"path": path, "columns": COLUMNS, "unlabelled": "drop"},
        "component": {"name": "mdav", "params": {"k": 5}},
        **extra,
    }
    out = folder / f"{name}.yaml"
    out.write_text(yaml.safe_dump(spec, sort_keys=False))
    return out


def copies(store: Path) -> list[pa.Table]:
    """Every shareable copy published in ``store``: what an attacker may have been handed."""
    found = sorted(store.glob("*/*/shared/data.parquet"), key=lambda p: p.stat().st_mtime)
    return [pq.read_table(p) for p in found if not p.parents[1].is_symlink()]


def difference(first: pa.Table, second: pa.Table) -> Counter:
    """The attacker's multiset difference of the pass-through columns of two copies."""

    def rows(t: pa.Table) -> Counter:
        return Counter(zip(*(t.column(c).to_pylist() for c in PASS_THROUGH), strict=True))

    return rows(second) - rows(first)


@pytest.fixture
def first(tmp_path: Path, capsys) -> tuple[Path, Path]:
    """The first release: 3,000 people, published in ``store``; then one person joins."""
    data = tmp_path / "data"
    data.mkdir()
    write_people(data, extra=False)
    spec = write_spec(data)
    store = tmp_path / "store"
    code, _, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 0, err
    write_people(data, extra=True)
    return data, store


def _refused(capsys, *argv: str) -> str:
    code, out, err = run_cli(capsys, "run", *argv)
    assert code == 2, out + err
    assert "republish: refuse" in err and "another grouping" in err
    return err


def test_the_attack_works_when_allowed(first, capsys):
    """The attack is real: with ``republish: allow`` the second copy is published, and the
    multiset difference of the two copies is the newcomer's pass-through values, exactly."""
    data, store = first
    spec = write_spec(data, name="people_allowed", republish="allow")
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 0, err
    assert "differenced" in out
    a, b = copies(store)
    assert difference(a, b) == Counter({("F", "rare-condition", 1): 1})


@pytest.mark.parametrize("spelling", ["./people.csv", "absolute", "symlink", "same"])
def test_another_spelling_of_the_path(first, capsys, spelling):
    data, store = first
    path = {
        "./people.csv": "./people.csv",
        "absolute": str((data / "people.csv").resolve()),
        "same": "people.csv",
    }.get(spelling)
    if spelling == "symlink":
        (data / "link.csv").symlink_to(data / "people.csv")
        path = "link.csv"
    spec = write_spec(data, path=path)
    _refused(capsys, str(spec), "--store", str(store))
    assert len(copies(store)) == 1


def test_another_store_and_a_remote_store(first, capsys):
    """A new local store, and a store that is not a local folder (a ``pyarrow.fs`` store):
    the owner's ledger is the same."""
    import pyarrow.fs as pafs

    from privfair.release.store import Store
    from privfair.run.flow import run_release
    from privfair.spec.catalogue import load_spec

    data, store = first
    spec = write_spec(data)
    _refused(capsys, str(spec), "--store", str(data.parent / "another-store"))
    remote_root = data.parent / "remote"
    remote_root.mkdir()
    remote = Store(pafs.SubTreeFileSystem(str(remote_root), pafs.LocalFileSystem()), "")
    assert not remote.local
    with pytest.raises(RepublishRefused):
        run_release(load_spec(spec), remote)
    assert not list(remote_root.rglob("data.parquet"))


def test_the_python_api(first):
    """The updated frame through the API: with the spec loaded from its YAML (the frame holds
    that spec's dataset), and with a spec built in code naming the dataset; a frame that names
    nothing is refused outright."""
    import pandas as pd

    from privfair import api
    from privfair.schemas.errors import SpecError

    data, store = first
    frame = pd.read_csv(data / "people.csv")
    with pytest.raises(RepublishRefused):
        api.run(api.load_spec(data / "people_mdav.yaml"), frame, store=store)
    built = api.spec(
        "people_api",
        component="mdav",
        params={"k": 5},
        columns=COLUMNS,
        dataset={"source": {"kind": "memory", "dataset": "people"}, "unlabelled": "drop"},
    )
    first_api = api.run(built, pd.read_csv(data / "people.csv").iloc[:-1], store=store)
    assert first_api.status == "published"
    with pytest.raises(RepublishRefused):
        api.run(built, frame, store=store)
    unnamed = api.spec(
        "people_unnamed",
        component="mdav",
        params={"k": 5},
        columns=COLUMNS,
        dataset={"source": {"kind": "memory"}, "unlabelled": "drop"},
    )
    with pytest.raises(SpecError, match="names no dataset"):
        api.run(unnamed, frame, store=store)


def test_another_pipeline_and_a_removed_person(first, capsys):
    """A renamed pipeline over the grown table; and an erasure request: the person removed
    and the table released again (the difference would be the removed person's values)."""
    data, store = first
    _refused(capsys, str(write_spec(data, name="people_renamed")), "--store", str(store))
    table = people(extra=False)
    pacsv.write_csv(table.slice(1), data / "people.csv")  # the first person asked to be erased
    _refused(capsys, str(write_spec(data)), "--store", str(store))
    assert len(copies(store)) == 1


def test_a_repartitioning(tmp_path, capsys):
    """Day partitions released, then the spec edited to months: every month overlaps released
    days, under another grouping: refused."""
    data = tmp_path / "data"
    data.mkdir()
    write_people(data, extra=False)
    store = tmp_path / "store"
    daily = {"column": "submitted", "granularity": "day", "start": START.isoformat()}
    spec = write_spec(data, partitions=daily)
    code, _, err = run_cli(
        capsys, "run", str(spec), "--store", str(store), "--partition", START.isoformat()
    )
    assert code == 0, err
    monthly = {**daily, "granularity": "month", "start": "2026-11-01"}
    spec = write_spec(data, partitions=monthly)
    _refused(capsys, str(spec), "--store", str(store), "--partition", "2026-11-01")
    # a key partitioning of another column may hold any released row: refused too
    keyed = {"column": "diagnosis", "keys": ["flu", "asthma", "diabetes"]}
    spec = write_spec(data, name="people_by_diagnosis", partitions=keyed)
    _refused(capsys, str(spec), "--store", str(store), "--partition", "flu")
    # a day never released is new rows: published
    code, _, err = run_cli(
        capsys,
        "run",
        str(write_spec(data, partitions=daily)),
        "--store",
        str(store),
        "--partition",
        (START + timedelta(days=1)).isoformat(),
    )
    assert code == 0, err


def test_stricter_demands_on_the_same_rows_are_not_a_republication(first, capsys):
    """The opposite mistake: the same rows, algorithm and parameters with an extra demand
    publish the same values: the same grouping, not a re-publication (it was refused when
    re-publication was judged on the output file's bytes, which carry the contract)."""
    data, store = first
    table = people(extra=False)
    pacsv.write_csv(table, data / "people.csv")
    stricter = write_spec(data, guarantees=[{"kind": "k_anonymity", "k": 5}])
    code, out, err = run_cli(capsys, "run", str(stricter), "--store", str(store))
    assert code == 0, err
    a, b = copies(store)
    assert difference(a, b) == Counter()


def test_no_reachable_ledger_refuses(first, capsys, monkeypatch):
    """A ledger that cannot be opened stops the release (exit 2 naming the setting): the
    check is never skipped."""
    data, store = first
    blocker = data.parent / "blocker"
    blocker.write_text("a file where the ledger's folder would be")
    monkeypatch.setenv("PRIVFAIR_LEDGER", f"sqlite:///{blocker}/ledger.sqlite")
    code, _, err = run_cli(capsys, "run", str(write_spec(data)), "--store", str(store))
    assert code == 2 and "PRIVFAIR_LEDGER" in err
    assert len(copies(store)) == 1
    assert os.environ["PRIVFAIR_LEDGER"].endswith("ledger.sqlite")


def test_the_copy_names_no_column_the_spec_dropped(first):
    """What ingest notes for the owner's messages (the dropped columns and the policy that
    dropped them) stays out of the copy: the input's other column names would tell a
    recipient what else the owner holds (the spec itself, published as written, names what
    its author chose to name)."""
    _, store = first
    (copy,) = [p for p in store.glob("*/*/shared") if not p.parents[0].is_symlink()]
    data = pq.read_table(copy / "data.parquet")
    assert b"privfair.dropped_columns" not in (data.schema.metadata or {})
    assert b"submitted" not in (copy / "data.parquet").read_bytes()


def test_no_output_carries_what_ingest_noted_for_the_owner():
    """adult_dsabre drops the quasi-identifiers it does not list; ingest notes which and why
    in the input's schema metadata (for the owner's messages), and a family that builds its
    output from its input's schema must not carry that note into what it publishes."""
    from privfair.components.core.inputs import META_DROPPED
    from privfair.run.flow import ingest
    from privfair.spec.catalogue import algorithm_of, load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / "pipelines/specs/adult_dsabre.yaml")
    table = ingest(spec).table
    assert META_DROPPED in table.schema.metadata
    result = algorithm_of(spec)(table, spec.params)
    for t in [*result.outputs.values(), *result.sidecars.values()]:
        assert META_DROPPED not in (t.schema.metadata or {})
