"""A DP budget follows the rows, not the spec (issue 42): over any sequence of edited specs
(another spelling of the path, another store, another pipeline, another partitioning, a cap
declared higher or not at all), no row of the dataset is charged more than its cap.

The generator below draws such sequences against a concrete table whose rows each have a day
and a region; every admitted release adds its cost to exactly the rows it read, and the
heaviest row's total is compared with the cap the first release recorded, and with OpenDP's
own composition of the charges on that row.
"""

from __future__ import annotations

import math
import os
from datetime import date, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfair.budget.ledger import BudgetExceeded, Ledger, Partitioning, cap_rho
from privfair.io.identity import identity_of
from privfair.schemas.errors import SpecError
from privfair.schemas.spec import DatasetSpec, PartitionSpec

START = date(2026, 11, 2)  # a Monday
DAYS = 35
REGIONS = ("north", "south", "east")
#: the table: one row per (day, region)
ROWS = [(START + timedelta(days=d), r) for d in range(DAYS) for r in REGIONS]

PARTITIONINGS = {
    "whole": None,
    "day": PartitionSpec(column="submitted", granularity="day", start=START),
    "week": PartitionSpec(column="submitted", granularity="week", start=START),
    "month": PartitionSpec(column="submitted", granularity="month", start=date(2026, 11, 1)),
    "region": PartitionSpec(column="region", keys=list(REGIONS)),
}


def _block_of(kind: str, row: tuple[date, str]) -> str:
    day, region = row
    if kind == "whole":
        return "*"
    if kind == "day":
        return day.isoformat()
    if kind == "week":
        return (day - timedelta(days=day.weekday())).isoformat()
    if kind == "month":
        return day.replace(day=1).isoformat()
    return region


def _spelling(folder: Path, how: str) -> DatasetSpec:
    path = {
        "relative": "people.csv",
        "dotted": "./people.csv",
        "absolute": str(folder / "people.csv"),
        "link": "link.csv",
        "nested": "sub/../people.csv",
    }[how]
    return DatasetSpec(path=path, columns={"x": {"role": "ignored"}})


release = st.tuples(
    st.sampled_from(["relative", "dotted", "absolute", "link", "nested"]),  # the path written
    st.sampled_from(list(PARTITIONINGS)),
    st.integers(0, 10_000),  # which block it releases (modulo the blocks there are)
    st.sampled_from([0.2, 0.35, 0.5]),  # its cost, as a share of the cap
    st.sampled_from(["declared", "none", "higher", "lower"]),  # the budget its spec declares
    st.sampled_from(["p1", "p2", "renamed"]),  # the pipeline (and store: one owner's ledger)
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    f = tmp_path_factory.mktemp("people")
    (f / "people.csv").write_text("x\n1\n")
    (f / "link.csv").symlink_to(f / "people.csv")
    (f / "sub").mkdir()
    return f


class _Cost:
    def __init__(self, rho: float) -> None:
        self.rho, self.epsilon, self.delta = rho, 0.0, 1e-9


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(release, min_size=2, max_size=12))
def test_no_row_is_charged_beyond_its_cap(folder, tmp_path_factory, sequence):
    from privfair.components.synthesis.accounting import composed_total

    cap = {"rho": 1.0}
    ledger = Ledger.open(f"sqlite:///{tmp_path_factory.mktemp('l') / 'ledger.sqlite'}")
    charged = {row: [] for row in ROWS}
    for i, (how, kind, pick, share, declared, pipeline) in enumerate(sequence):
        ds = _spelling(folder, how)
        ident = identity_of(ds, base_dir=folder)
        part = Partitioning.of(PARTITIONINGS[kind])
        blocks = sorted({_block_of(kind, r) for r in ROWS})
        block = blocks[pick % len(blocks)]
        budget = (
            None
            if declared == "none"
            else {"declared": cap, "higher": {"rho": 2.0}, "lower": {"rho": 0.6}}[declared]
        )
        if i == 0:
            budget = cap  # the dataset's first budgeted release records its cap
        try:
            ledger.reserve(
                dataset=ident.name,
                atoms=ident.atoms,
                partitioning=part,
                blocks=[block],
                pipeline=pipeline,
                version=f"v{i}",
                partition=block,
                family="synthesis",
                cost=_Cost(share * cap["rho"]),
                budget=budget,
                per="partition",
                policy=None,
            )
        except (BudgetExceeded, SpecError):
            continue
        for row in ROWS:
            if _block_of(kind, row) == block:
                charged[row].append(share * cap["rho"])
    heaviest = max(charged.values(), key=math.fsum)
    assert math.fsum(heaviest) <= cap_rho(cap) * (1 + 1e-9)
    if heaviest:  # the ledger's sum is OpenDP's sequential composition of the same charges
        assert math.fsum(heaviest) == pytest.approx(composed_total(heaviest), rel=1e-9)


def test_every_spelling_is_one_identity(folder, tmp_path):
    """The spellings the generator draws, a file:// URL and a copy in another folder: one
    atom for the first five, another for the copy (different rows may be there)."""
    from privfair.schemas.spec import SourceSpec

    atoms = {
        identity_of(_spelling(folder, h), base_dir=folder).atoms
        for h in ("relative", "dotted", "absolute", "link", "nested")
    }
    url = SourceSpec(kind="file", url=(folder / "people.csv").as_uri())
    atoms.add(
        identity_of(
            DatasetSpec(source=url, columns={"x": {"role": "ignored"}}), base_dir=tmp_path
        ).atoms
    )
    assert len(atoms) == 1
    (tmp_path / "people.csv").write_text("x\n1\n")
    other = identity_of(
        DatasetSpec(path="people.csv", columns={"x": {"role": "ignored"}}), base_dir=tmp_path
    )
    assert other.atoms not in atoms
    assert os.path.realpath(folder / "people.csv") in next(iter(atoms))[0]


def test_sql_spellings_are_one_identity(tmp_path):
    """A SQLite table read by name in two cases, with its schema, through a query with other
    whitespace, and by a relative and an absolute URL: one atom."""
    from privfair.schemas.spec import SourceSpec

    (tmp_path / "raw.db").write_bytes(b"")
    forms = [
        SourceSpec(kind="sql", url="sqlite:///raw.db", table="people"),
        SourceSpec(kind="sql", url=f"sqlite:///{tmp_path / 'raw.db'}", table="main.People"),
        SourceSpec(kind="sql", url="sqlite:///raw.db", query="SELECT *\n  FROM   people"),
        SourceSpec(
            kind="sql", url="sqlite:///./raw.db", query='select a from "people" where a > 1'
        ),
    ]
    atoms = {
        identity_of(
            DatasetSpec(source=s, columns={"x": {"role": "ignored"}}), base_dir=tmp_path
        ).atoms
        for s in forms
    }
    assert len(atoms) == 1


def test_a_cap_cannot_be_raised_by_a_spec(tmp_path):
    """The first budgeted release records the cap; a spec declaring more is refused naming the
    recorded cap; ``set_cap`` (``privfair budget --set-cap``) changes it, on record."""
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    common = dict(
        dataset="d",
        atoms=("named:d",),
        partitioning=Partitioning(),
        blocks=["*"],
        partition=None,
        family="synthesis",
        per=None,
        policy=None,
    )
    ledger.reserve(pipeline="a", version="1", cost=_Cost(0.4), budget={"rho": 1.0}, **common)
    with pytest.raises(SpecError, match="a spec cannot raise it"):
        ledger.reserve(pipeline="b", version="2", cost=_Cost(0.4), budget={"rho": 5.0}, **common)
    ledger.reserve(pipeline="c", version="3", cost=_Cost(0.4), budget=None, **common)
    with pytest.raises(BudgetExceeded):
        ledger.reserve(pipeline="c", version="4", cost=_Cost(0.4), budget=None, **common)
    ledger.set_cap(["named:d"], {"rho": 2.0}, "partition", "test")
    ledger.reserve(pipeline="c", version="5", cost=_Cost(0.4), budget=None, **common)
    assert [c.budget for c in ledger.caps(["named:d"])] == [{"rho": 2.0}]


def test_a_dp_spec_with_dynamic_keys_is_refused(tmp_path, capsys):
    """Dynamic keys are values read off the private data (a key exists because someone holds
    it): a DP spec lists its keys or cuts on time (exit 2 naming the key, nothing charged)."""
    from _ledgered import write_dp_spec
    from _partitioned import write_days
    from _shared import run_cli

    write_days(tmp_path, 1)
    import yaml

    spec = write_dp_spec(tmp_path, budget={"rho": 1.0})
    raw = yaml.safe_load(spec.read_text())
    raw["partitions"] = {"column": "c", "keys": "dynamic"}
    raw.pop("schedule", None)
    spec.write_text(yaml.safe_dump(raw))
    code, _, err = run_cli(
        capsys, "run", str(spec), "--store", str(tmp_path / "s"), "--partition", "a"
    )
    assert code == 2 and "partitions.keys" in err and "dynamic" in err
    assert not Path(os.environ["XDG_STATE_HOME"], "privfair", "ledger.sqlite").exists() or not (
        Ledger.open(
            f"sqlite:///{Path(os.environ['XDG_STATE_HOME'], 'privfair', 'ledger.sqlite')}"
        ).entries()
    )


def test_an_empty_partition_of_a_dp_spec_is_released_like_any_other(tmp_path, capsys):
    """Whether a DP partition release exists must not depend on the partition having a row
    (an empty day exited 2, a one-person day was released): a day with no rows is released
    from the noisy counts and charged like a full one."""
    from _ledgered import write_dp_spec
    from _partitioned import write_days
    from _shared import run_cli

    write_days(tmp_path, 2)  # 2026-11-02 and -03
    spec = write_dp_spec(tmp_path, budget={"rho": 1.0})
    for day in ("2026-11-03", "2026-11-05"):  # the second has no row
        code, out, err = run_cli(
            capsys, "run", str(spec), "--store", str(tmp_path / "s"), "--partition", day
        )
        assert code == 0, err
        assert out.startswith("published:") and "ledger: charged rho=" in out
    code, out, _ = run_cli(
        capsys, "run", str(spec), "--store", str(tmp_path / "s"), "--partition", "2026-11-05"
    )
    assert code == 0 and out.startswith("exists:")
    assert "ledger: exists, nothing charged" in out and "charged rho=" not in out
    entries = Ledger.open(
        f"sqlite:///{Path(os.environ['XDG_STATE_HOME'], 'privfair', 'ledger.sqlite')}"
    ).entries()
    assert [(e.block, e.status) for e in entries] == [
        ("2026-11-03", "published"),
        ("2026-11-05", "published"),
    ]
