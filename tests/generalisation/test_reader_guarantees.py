"""Every guarantee of a generalisation release means what a reader of its published columns takes
it to mean (issue 22, "guarantees weaker than the release says").

A reader forms q-blocks from what is published: the PND labels and the published PD value. The
bound of Theorems 10/20/23 is about two PD groups (protected, unprotected); Adult's race has five
values. Before this issue the release published the five raw values: at t = 0.1, k = 5 a reader's
q-blocks over the published columns broke t (dMondrian: 16 of 35, dSabre: 1,864 of 3,629, worst
0.66 beyond t) and some held a single row, while every guarantee "held", because the validator
keyed its q-blocks on the group, not on the published value. Now the PD attribute is published
as the two groups when it has more values than groups, k covers the q-blocks (labels and PD
group), and the validator reads q-blocks from the published values: a release that publishes a
PD value the bound does not cover fails.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from privfair.components.core.checks import check_contract
from privfair.components.generalisation.audit import evidence
from privfair.components.generalisation.contract import contract
from privfair.components.generalisation.dmondrian import dmondrian
from privfair.components.generalisation.dsabre import dsabre
from privfair.components.generalisation.examples import table as random_table
from privfair.components.generalisation.params import DMondrianParams, DSabreParams
from privfair.run.flow import ingest
from privfair.schemas.roles import read_roles
from privfair.spec.catalogue import load_spec
from privfair.spec.settings import DEFAULT_SPECS_DIR

ALGOS = [("dmondrian", dmondrian, DMondrianParams), ("dsabre", dsabre, DSabreParams)]


def reader_q_blocks(published: pa.Table, decision: str, negative, p_minus: float, t: float):
    """What a reader computes from the published table alone: the q-blocks over every published
    column but the decision, each with its negative-decision share. Returns (q-blocks, how many
    are farther than ``t`` from ``p_minus``, the largest distance, the smallest q-block)."""
    df = published.to_pandas()
    cols = [c for c in published.column_names if c != decision]
    key = df[cols].astype(str).agg("|".join, axis=1)
    neg = df[decision].isin(negative)
    g = pd.DataFrame({"k": key, "neg": neg}).groupby("k")["neg"].agg(["mean", "size"])
    dist = (g["mean"] - p_minus).abs()
    return len(g), int((dist > t + 1e-9).sum()), float(dist.max()), int(g["size"].min())


@pytest.fixture(scope="module")
def adult():
    """Adult as the shipped spec ingests it: race (five values) the PD attribute, favoured
    White; income <=50K the negative decision."""
    return ingest(load_spec(DEFAULT_SPECS_DIR / "adult_dmondrian.yaml")).table


@pytest.fixture(scope="module")
def adult_releases(adult):
    out = {}
    for name, algo, P in ALGOS:
        params = P(t=0.1, k=5, utility_queries=0, audit_random_itemsets=0)
        out[name] = (params, algo(adult, params))
    return out


@pytest.mark.parametrize("name", ["dmondrian", "dsabre"])
def test_adult_race_q_blocks_over_the_published_columns_are_t_close(adult, adult_releases, name):
    params, result = adult_releases[name]
    assert len(set(adult.column("race").to_pylist())) == 5
    p_minus = result.metrics["p_minus"]
    t_eff = result.metrics["t_eff"]
    assert t_eff == pytest.approx(0.1)
    blocks, breaking, worst, smallest = reader_q_blocks(result.table, "income", [0], p_minus, t_eff)
    assert breaking == 0, f"{breaking} of {blocks} q-blocks break t (worst {worst:.3f})"
    assert smallest >= 5, f"a q-block of {smallest} rows despite k = 5"
    # the PD attribute is published as the two groups the bound is about, and says so
    assert set(result.table.column("race").to_pylist()) == {"protected", "unprotected"}
    role = read_roles(result.table)["race"]
    assert role.unfavoured == ("protected",) and role.favoured is None
    meta = json.loads(result.table.schema.field("race").metadata[b"privfair.pd_groups"])
    assert meta["favoured"] == ["White"]
    assert meta["published_values"] == ["protected", "unprotected"]
    protected = np.array(result.table.column("race").to_pylist()) == "protected"
    raw = np.array(adult.column("race").to_pylist())[
        result.sidecars["lineage"].column("row_id").to_numpy()
    ]
    assert (protected == (raw != "White")).all()


@pytest.mark.parametrize("name", ["dmondrian", "dsabre"])
def test_the_adult_release_passes_its_contract(adult, adult_releases, name):
    params, result = adult_releases[name]
    frames = evidence(adult, result.outputs, result.sidecars, params)
    failed = [r.to_dict() for r in check_contract(result.contract, frames) if not r.passed]
    assert not failed


def _with_raw_pd(input_table: pa.Table, result, pd_name: str) -> dict:
    """The release with the PD attribute's raw input values published again (what the release
    published before issue 22), row by row through the lineage."""
    data = result.table
    rows = result.sidecars["lineage"].column("row_id")
    raw = input_table.column(pd_name).take(rows)
    i = data.schema.get_field_index(pd_name)
    field = input_table.schema.field(pd_name)
    return {**result.outputs, "data": data.set_column(i, field, raw)}


@pytest.mark.parametrize("name", ["dmondrian", "dsabre"])
def test_a_release_publishing_race_raw_fails_validation(adult, adult_releases, name):
    """The issue's release: five raw race values under a bound on two groups. The PD check and
    the q-blocks over the published columns fail, and so does k over the q-blocks."""
    params, result = adult_releases[name]
    outputs = _with_raw_pd(adult, result, "race")
    frames = evidence(adult, outputs, result.sidecars, params)
    wanted = {"C1.pd", "C4", "C7"}
    checked = [g for g in result.contract if g.id in wanted]
    assert {g.id for g in checked} == wanted
    verdicts = {r.id: r for r in check_contract(checked, frames)}
    assert not verdicts["C1.pd"].passed, verdicts["C1.pd"].message
    assert not verdicts["C4"].passed, verdicts["C4"].message
    assert not verdicts["C7"].passed, verdicts["C7"].message


def test_a_binary_pd_attribute_is_published_unchanged(builtin_table):
    """German's sex (two values, each one group) already is the granularity of the bound."""
    table = ingest(load_spec(DEFAULT_SPECS_DIR / "german_dmondrian.yaml")).table
    params = DMondrianParams(t=0.15, utility_queries=0)
    result = dmondrian(table, params)
    rows = result.sidecars["lineage"].column("row_id")
    assert result.table.column("sex").equals(table.column("sex").take(rows))
    assert result.table.schema.field("sex").equals(table.schema.field("sex"), check_metadata=True)


@pytest.mark.parametrize(("name", "algo", "P"), ALGOS)
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_three_valued_pd_published_as_groups_on_random_tables(name, algo, P, seed):
    """The examples' PD attribute has three values (favoured a): published as the groups; the
    reader's q-blocks are within t_eff and hold at least k rows."""
    table = random_table(seed, 150)
    params = P(t=0.2, k=3, utility_queries=0, single_class="allow")
    result = algo(table, params)
    assert set(result.table.column("group").to_pylist()) <= {"protected", "unprotected"}
    _, breaking, _, smallest = reader_q_blocks(
        result.table, "decision", [0], result.metrics["p_minus"], result.metrics["t_eff"]
    )
    assert breaking == 0 and smallest >= 3
    frames = evidence(table, result.outputs, result.sidecars, params)
    assert all(r.passed for r in check_contract(contract(params, table, name), frames))
