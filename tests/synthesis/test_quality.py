"""The synthetic-data quality report (issue 47, part 2): the public scores follow SDMetrics'
definitions and read only the noisy measurements and the synthetic table
(``tests/synthesis/test_disclosure.py`` recomputes them from the sidecars); the owner's
SDMetrics report and DCR panel are drawn only with the input, and the panel tells a synthesizer
that copies its input from one that does not."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from privfair.components.synthesis import MST
from privfair.components.synthesis.examples import mst_example
from privfair.components.synthesis.figures import figures
from privfair.components.synthesis.quality import (
    column_shape,
    contingency_similarity,
    input_quality,
)


@pytest.fixture(scope="module")
def run():
    table, params = mst_example(1)
    return table, MST(table, params)


def test_the_definitions_are_sdmetrics_own():
    """On exact counts, column_shape and contingency_similarity give SDMetrics' TVComplement,
    KSComplement and ContingencySimilarity of the raw columns."""
    from sdmetrics.column_pairs import ContingencySimilarity
    from sdmetrics.single_column import KSComplement, TVComplement

    rng = np.random.default_rng(0)
    real = pd.DataFrame({"a": rng.integers(0, 4, 500), "b": rng.integers(0, 3, 500)})
    syn = pd.DataFrame({"a": rng.integers(0, 4, 300), "b": (rng.random(300) < 0.2).astype(int)})
    for col, size in (("a", 4), ("b", 3)):
        r, s = (np.bincount(df[col], minlength=size) for df in (real, syn))
        tv = TVComplement.compute(real[col].astype(str), syn[col].astype(str))
        ks = KSComplement.compute(real[col].astype(float), syn[col].astype(float))
        assert column_shape(r, s, ordered=False)["score"] == pytest.approx(tv, abs=1e-6)
        assert column_shape(r, s, ordered=True)["score"] == pytest.approx(ks, abs=1e-6)
    r2, s2 = (np.bincount(df["a"] * 3 + df["b"], minlength=12) for df in (real, syn))
    cs = ContingencySimilarity.compute(real.astype(str), syn.astype(str))
    assert contingency_similarity(r2, s2) == pytest.approx(cs, abs=1e-6)


def test_owner_quality_is_drawn_only_with_the_input(run):
    """With the input the owner's figure holds SDMetrics' scores and the DCR panel; the
    shareable copy's call (no input, the public metrics) draws the public figure only."""
    table, result = run
    public = {"metrics": MST.public.public_metrics(result.metrics)}
    names = [f.name for f in figures(public, dict(result.outputs), None, {})]
    assert "quality" in names and "quality_input" not in names
    owner = {
        f.name: f for f in figures({"metrics": result.metrics}, dict(result.outputs), table, {})
    }
    q = input_quality(table, result.outputs["data"])
    assert f"{q['score']:.3f}" in owner["quality_input"].svg
    assert "DCRBaselineProtection" in owner["quality_input"].svg
    assert q["privacy"]["dcr_overfitting_protection"] is None
    assert "no holdout" in q["privacy"]["overfitting_note"]
    assert q["sample_rows"] == {
        "input": table.num_rows,
        "synthetic": result.outputs["data"].num_rows,
    }


def test_dcr_panel_tells_a_copying_synthesizer(run):
    """The input handed back as its own "synthetic" table: every row at distance 0 from an
    input row, DCRBaselineProtection 0; the MST table is farther from the input than that."""
    table, result = run
    copied = input_quality(table, table.select(result.outputs["data"].column_names))["privacy"]
    assert copied["median_dcr_synthetic"] == 0 and copied["dcr_baseline_protection"] == 0
    mst = input_quality(table, result.outputs["data"])["privacy"]
    assert mst["median_dcr_synthetic"] > 0 and mst["dcr_baseline_protection"] > 0.05


def test_missing_sdmetrics_names_the_extra(run, monkeypatch):
    table, result = run
    monkeypatch.setitem(sys.modules, "sdmetrics.reports.single_table", None)
    owner = {
        f.name: f for f in figures({"metrics": result.metrics}, dict(result.outputs), table, {})
    }
    assert "privfair[quality]" in owner["quality_input"].svg


def test_dcr_panel_is_sdmetrics_own(run):
    """The vectorised DCR and baseline give SDMetrics' DCRBaselineProtection (its pandas cross
    join) exactly, on samples of the example's input with nulls and of its synthetic table."""
    from sdmetrics.single_table import DCRBaselineProtection
    from sdmetrics.single_table.privacy.dcr_utils import calculate_dcr

    from privfair.components.synthesis.quality import _frames, _sample, dcr, dcr_baseline

    table, result = run
    real, syn, meta = _frames(table, result.outputs["data"])
    real, syn = _sample(real, 300, 1), _sample(syn, 200, 1)
    real.loc[::7, real.columns[0]] = np.nan  # nulls on both sides of a column
    syn.loc[::5, real.columns[0]] = np.nan
    np.testing.assert_allclose(
        dcr(syn, real, meta), calculate_dcr(syn, real, meta).to_numpy(), atol=1e-12
    )

    class Seeded(DCRBaselineProtection):
        _seed = 3

    ours = dcr_baseline(real, syn, meta, Seeded)
    state = np.random.get_state()  # noqa: NPY002 (SDMetrics' null mask reads the global one)
    np.random.seed(0)  # noqa: NPY002
    try:
        theirs = Seeded.compute_breakdown(real, syn, meta)
    finally:
        np.random.set_state(state)  # noqa: NPY002
    assert ours["score"] == pytest.approx(theirs["score"], abs=1e-12)
    for k in ("synthetic_data", "random_data_baseline"):
        got, want = ours["median_DCR_to_real_data"][k], theirs["median_DCR_to_real_data"][k]
        assert got == pytest.approx(want, abs=1e-12)
