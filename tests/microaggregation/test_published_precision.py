"""The published precision of a numeric quasi-identifier is a public parameter, not read off the
input, and an ordered-Categorical ordinal quasi-identifier is released.

A numeric QI is published as its group's mean rounded to ``decimals`` (``MDAVParams`` /
``FairMDAVParams``). It used to be rounded to the input's own precision, "the fewest decimals
found in the input": one person aged 31.25 among whole ages moved every published age from 0
decimals to 2, which the published table and the contract (C4, C13) showed. The attacker
holds two inputs that differ in that one person's precision and compares what each release
says; now both publish the decimals the spec declares (default: 0 for an integer column, 2 for
a float one). The validator's C4 / C13 read those decimals from the contract rebuilt from the
spec and the input, never from the release.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from privfair.components.core.checks import check_contract
from privfair.components.microaggregation.audit import evidence
from privfair.components.microaggregation.fair_mdav import fair_mdav
from privfair.components.microaggregation.mdav import contract, mdav
from privfair.components.microaggregation.params import (
    DEFAULT_FLOAT_DECIMALS,
    FairMDAVParams,
    MDAVParams,
)
from privfair.schemas.errors import InputError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles

N = 40


def _people(age_of_first: float) -> pa.Table:
    """Whole ages stored as floats (as a CSV column with one fractional value reads), the
    first person's age ``age_of_first``; an integer column ``hours``."""
    rng = np.random.default_rng(3)
    ages = rng.integers(18, 80, N).astype(float)
    ages[0] = age_of_first
    table = pa.table(
        {
            "age": pa.array(ages, pa.float64()),
            "hours": pa.array(rng.integers(10, 60, N), pa.int64()),
            "sex": pa.array(["F", "M"] * (N // 2)),
            "y": pa.array(rng.integers(0, 2, N), pa.int64()),
        }
    )
    roles = TableRoles.of(
        [
            ColumnRole("age", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
            ColumnRole("hours", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
            ColumnRole("sex", Role.PROTECTED, Kind.BINARY, favoured="M"),
            ColumnRole("y", Role.LABEL, Kind.BINARY, positive=1),
        ]
    )
    return attach_roles(table, roles)


def _decimals_said(result) -> list[dict]:
    """The decimals every guarantee of the release's contract states (C4, C13)."""
    return [g.decimals for g in result.contract if hasattr(g, "decimals")]


def _places(values: np.ndarray) -> int:
    """The fewest decimals that write every value."""
    for d in range(10):
        if np.allclose(values * 10.0**d, np.rint(values * 10.0**d), rtol=0, atol=1e-6):
            return d
    return 10


PARAMS = {
    "mdav": lambda **p: MDAVParams(k=4, **p),
    "fair_mdav": lambda **p: FairMDAVParams(k=4, tau=0.5, **p),
}
RUNS = {"mdav": mdav, "fair_mdav": fair_mdav}


@pytest.mark.parametrize("name", RUNS)
def test_one_persons_precision_does_not_change_the_published_decimals(name):
    params = PARAMS[name]()
    said = []
    for first in (31.0, 31.25):
        table = _people(first)
        result = RUNS[name](table, params)
        said.append(_decimals_said(result))
        data = result.outputs["data"]
        assert data.schema.field("age").type == pa.float64()
        assert data.schema.field("hours").type == pa.int64()
        assert _places(data.column("age").to_numpy()) <= DEFAULT_FLOAT_DECIMALS
        frames = evidence(table, result.outputs, result.sidecars, params)
        assert all(c.passed for c in check_contract(result.contract, frames))
    assert said[0] and said[0] == said[1]
    assert all(d == {"age": DEFAULT_FLOAT_DECIMALS, "hours": 0} for d in said[0])


def test_declared_decimals_are_published_and_the_contract_is_rebuilt_from_the_spec():
    table = _people(31.25)
    params = MDAVParams(k=4, decimals={"age": 1})
    result = mdav(table, params)
    age = result.outputs["data"].column("age").to_numpy()
    assert _places(age) <= 1
    rebuilt = contract(params, table)  # what the validator checks: spec + input
    assert [g.decimals for g in rebuilt if hasattr(g, "decimals")] == _decimals_said(result)
    assert all(d == {"age": 1, "hours": 0} for d in _decimals_said(result))
    frames = evidence(table, result.outputs, result.sidecars, params)
    assert all(c.passed for c in check_contract(rebuilt, frames))
    # one number applies to every float QI; an integer QI stays integers
    zero = mdav(table, MDAVParams(k=4, decimals=0))
    assert all(d == {"age": 0, "hours": 0} for d in _decimals_said(zero))


@pytest.mark.parametrize(
    "decimals, key", [({"hours": 2}, "decimals.hours"), ({"sex": 1}, "decimals.sex")]
)
def test_decimals_for_an_integer_or_a_non_numeric_column_are_refused_naming_the_key(decimals, key):
    with pytest.raises(InputError) as e:
        mdav(_people(31.0), MDAVParams(k=4, decimals=decimals))
    assert e.value.column == key


def test_decimals_out_of_range_are_refused():
    with pytest.raises(ValueError):
        MDAVParams(k=4, decimals=-1)
    with pytest.raises(ValueError):
        MDAVParams(k=4, decimals={"age": 10})


def _ordinal_spec(name: str, k: int):
    """MDAV over an ordinal ``edu`` (its order from the frame's ordered Categorical), ``age``,
    ``sex`` protected and ``y`` the label, of the in-memory dataset ``name``."""
    from privfair import api

    return api.spec(
        name,
        component="mdav",
        params={"k": k},
        dataset_name=name,
        columns={
            "edu": {"role": "quasi_identifier", "kind": "ordinal"},
            "age": {"role": "quasi_identifier"},
            "sex": {"role": "protected", "kind": "nominal", "favoured": "M"},
            "y": {"role": "label", "kind": "binary", "positive": 1},
        },
    )


def test_an_ordered_categorical_ordinal_qi_is_released_through_the_api(tmp_path):
    """A pandas DataFrame whose ordinal QI is an ordered Categorical (the order from its
    categories) releases with MDAV and validates: the evidence reads the published levels
    through the encoding instead of as numbers (it raised EvidenceError)."""
    from privfair import api

    rng = np.random.default_rng(0)
    n = 60
    frame = pd.DataFrame(
        {
            "edu": pd.Categorical(
                rng.choice(["low", "mid", "high"], n),
                categories=["low", "mid", "high"],
                ordered=True,
            ),
            "age": rng.integers(18, 80, n),
            "sex": rng.choice(["F", "M"], n),
            "y": rng.integers(0, 2, n),
        }
    )
    spec = _ordinal_spec("ordinal_mdav", k=3)
    release = api.run(spec, frame, store=tmp_path / "store")
    assert release.status == "published" and release.passed
    edu = release.table().column("edu").to_pylist()
    assert set(edu) <= {"low", "mid", "high"}
    assert api.validate(release, frame).passed


def test_a_domain_read_off_the_input_names_only_published_levels(tmp_path):
    """An ordered Categorical's categories are the levels the input holds: one person's rare
    level ("phd", averaged away into its group's lower median) must not be named by the
    published column's domain. The copy's ``privfair.domain`` lists only published levels,
    and the release still validates."""
    import json

    import pyarrow.parquet as pq

    from privfair import api

    rng = np.random.default_rng(0)
    n = 60
    levels = ["low", "mid", "high", "phd"]
    edu = rng.choice(levels[:3], n).astype(object)
    ages = rng.integers(18, 80, n)
    edu[0], ages[0] = "phd", 40  # the only holder, in the middle of the ages
    frame = pd.DataFrame(
        {
            "edu": pd.Categorical(edu, categories=levels, ordered=True),
            "age": ages,
            "sex": rng.choice(["F", "M"], n),
            "y": rng.integers(0, 2, n),
        }
    )
    spec = _ordinal_spec("ordinal_rare", k=5)
    release = api.run(spec, frame, store=tmp_path / "store")
    assert release.passed
    copy = pq.read_table(f"{release.shared}/data.parquet")
    published = set(copy.column("edu").to_pylist())
    assert "phd" not in published
    domain = json.loads(copy.schema.field("edu").metadata[b"privfair.domain"])
    assert "phd" not in domain and set(domain) == published
    assert api.validate(release, frame).passed


def test_decimals_coarser_than_the_values_round_the_mean_not_the_values():
    """Two members 0.6404 and -0.1321 (mean 0.25415) at the default 2 decimals publish 0.25, and
    the group's sum stays within half a unit per row (C13): the values were rounded to 0.64 and
    -0.13 before averaging, which published 0.26 (found by the property test)."""
    table = attach_roles(
        pa.table(
            {
                "num0": [0.1257302210933933, -0.1321048632913019, 0.6404226504432821, 0.1049],
                "PA": [0, 1, 0, 0],
                "y": [0, 1, 1, 0],
            }
        ),
        TableRoles.of(
            [
                ColumnRole("num0", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
                ColumnRole("PA", Role.PROTECTED, Kind.BINARY, favoured=1),
                ColumnRole("y", Role.LABEL, Kind.BINARY, positive=1),
            ]
        ),
    )
    params = FairMDAVParams(k=2, tau=0.0, correction="positive", grouping="fairlet")
    result = fair_mdav(table, params)
    assert result.outputs["data"].column("num0").to_pylist() == [0.25, 0.25]
    frames = evidence(table, result.outputs, result.sidecars, params)
    assert [c.guarantee.id for c in check_contract(result.contract, frames) if not c.passed] == []
