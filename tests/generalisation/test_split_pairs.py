"""dSabre's ``split_pairs`` deviation (off by default): a two-row leaf (1, 1, 0, 0) or
(0, 0, 1, 1), which the paper's halving cannot split, is split into its two rows when both pass
the halving's own test (tau <= t, k). Without it the class count is capped at
|R| - min(a, b) - min(c, d) (a ceiling, whatever t)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfair.components.core.checks import check_contract
from privfair.components.generalisation.audit import evidence
from privfair.components.generalisation.contract import dsabre_contract
from privfair.components.generalisation.dmondrian import _tau
from privfair.components.generalisation.dsabre import _pair_split, dichotomize, dsabre
from privfair.components.generalisation.examples import table as random_table
from privfair.components.generalisation.examples import toy_table
from privfair.components.generalisation.inputs import prepare
from privfair.components.generalisation.measures import t_max
from privfair.components.generalisation.params import DSabreParams
from privfair.schemas.errors import SpecError

P_TOY = 8 / 17  # Ex. 22's p- (toy table: counts (4, 4, 4, 5))


def _cap(root) -> int:
    a, b, c, d = root
    return a + b + c + d - min(a, b) - min(c, d)


def _split_expected(leaves, t, p_minus):
    """The default leaves with each pair leaf replaced by its rows where both pass tau <= t."""
    out = []
    for leaf in leaves:
        pair = _pair_split(*leaf)
        if pair and all(_tau(*h, p_minus) <= t + 1e-12 for h in pair):
            out += list(pair)
        else:
            out.append(leaf)
    return out


def test_toy_at_t_max_reaches_one_row_per_class():
    """Ex. 22's counts at t = max(p-, 1 - p-): the paper's Dichotomize stops at its ceiling of
    17 - 4 - 4 = 9 classes; the deviation splits every pair, 17 classes of one row."""
    t = max(P_TOY, 1 - P_TOY)
    paper = dichotomize((4, 4, 4, 5), t, 1, P_TOY)
    assert len(paper) == _cap((4, 4, 4, 5)) == 9
    split = dichotomize((4, 4, 4, 5), t, 1, P_TOY, split_pairs=True)
    assert len(split) == 17 and all(sum(leaf) == 1 for leaf in split)


def test_toy_below_t_max_is_the_papers():
    """A single row has tau = p- or 1 - p-: below max(p-, 1 - p-) no pair may be split."""
    for t in (0.1, 0.25, 0.5):
        assert dichotomize((4, 4, 4, 5), t, 1, P_TOY, split_pairs=True) == dichotomize(
            (4, 4, 4, 5), t, 1, P_TOY
        )


def test_k_above_one_never_splits_a_pair():
    assert dichotomize((1, 1, 0, 0), 1.0, 2, 0.5, split_pairs=True) == [(1, 1, 0, 0)]


COUNTS = st.tuples(*[st.integers(0, 40)] * 4).filter(lambda r: sum(r) > 0)


@settings(max_examples=300, deadline=None)
@given(root=COUNTS, share=st.floats(0.0, 1.0), k=st.integers(1, 3))
def test_split_refines_the_papers_leaves(root, share, k):
    """The deviation only ever replaces a pair leaf by its two rows, and only when both have
    tau <= t; every leaf sums back to the root; the paper's leaves respect the ceiling."""
    a, b, c, d = root
    p_minus = (a + c) / sum(root)
    t = share * t_max(p_minus)
    paper = dichotomize(root, t, k, p_minus)
    split = dichotomize(root, t, k, p_minus, split_pairs=True)
    assert len(paper) <= _cap(root)
    assert tuple(map(sum, zip(*split, strict=True))) == root
    assert split == (_split_expected(paper, t, p_minus) if k == 1 else paper)


def test_release_follows_the_option_and_its_checker_too():
    """End to end on a random table at t_max: the contract is rebuilt from the params (C9
    carries split_pairs), every guarantee holds, and the paper's C9 does not hold on it."""
    table = random_table(7)
    prep = prepare(table, None)
    t = float(t_max(prep.p_minus))
    params = DSabreParams(t=t, split_pairs=True, utility_queries=0)
    result = dsabre(table, params)
    assert result.contract == dsabre_contract(params, table)
    frames = evidence(table, result.outputs, result.sidecars, params)
    failed = [(r.id, r.message) for r in check_contract(result.contract, frames) if not r.passed]
    assert not failed, failed
    paper = DSabreParams(t=t, utility_queries=0)
    c9 = [g for g in dsabre_contract(paper, table) if g.id == "C9"]
    assert dsabre(table, paper).metrics["classes"] <= _cap(prep.counts)
    if any(_pair_split(*leaf) for leaf in dichotomize(prep.counts, t, 1, prep.p_minus)):
        assert not check_contract(c9, frames)[0].passed
    assert result.metrics["classes"] == table.num_rows


def test_option_written_out_only_when_set():
    """Off by default and then absent from the params and the contract (existing releases
    keep their bytes); recorded when a spec sets it."""
    off, on = DSabreParams(t=0.3), DSabreParams(t=0.3, split_pairs=True)
    assert "split_pairs" not in off.model_dump(mode="json")
    assert on.model_dump(mode="json")["split_pairs"] is True
    c9_off = [g for g in dsabre_contract(off, toy_table()) if g.id == "C9"][0]
    c9_on = [g for g in dsabre_contract(on, toy_table()) if g.id == "C9"][0]
    assert "split_pairs" not in c9_off.model_dump(mode="json")
    assert c9_on.model_dump(mode="json")["split_pairs"] is True


def test_bad_value_is_a_spec_error_naming_it():
    from pathlib import Path

    from privfair.spec.catalogue import load_spec, with_params

    spec = load_spec(Path(__file__).parents[2] / "pipelines" / "specs" / "german_dsabre.yaml")
    with pytest.raises(SpecError, match="split_pairs"):
        with_params(spec, {"split_pairs": "maybe"})


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), share=st.floats(0.5, 1.0) | st.just(1.0))
def test_contract_holds_with_pairs_split(seed, share):
    """Every guarantee of a split-pairs release holds on random tables (C9 with the option,
    Theorem 23's bound through C6 included), t from half of t_max up to t_max exactly. Below
    t_max, t is cut to 6 decimals as in ``test_properties``: a t within TOL (1e-12) below a
    class's tau lets dMondrian's cuts and Dichotomize's splits through while C6 audits
    without that tolerance (dMondrian fails C6 alike there)."""
    table = random_table(seed)
    prep = prepare(table, None)
    top = float(t_max(prep.p_minus))
    t = top if share == 1.0 else max(math.floor(share * top * 1e6) / 1e6, prep.tau_r)
    params = DSabreParams(t=t, split_pairs=True, utility_queries=0, audit_random_itemsets=200)
    result = dsabre(table, params)
    frames = evidence(table, result.outputs, result.sidecars, params)
    failed = [(r.id, r.message) for r in check_contract(result.contract, frames) if not r.passed]
    assert not failed, failed
