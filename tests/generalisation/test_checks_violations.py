"""The validator fails tables that violate each contract of spec section 3, on real releases of
German credit and on the paper's toy example; the C6 audit finds violations on the original
table (positive control) and none on the release."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from privfair.components.core.checks import check_contract
from privfair.components.generalisation import checks as K
from privfair.components.generalisation import corruptions as X
from privfair.components.generalisation import guarantees as G
from privfair.components.generalisation.audit import (
    as_labels,
    build_audit,
    evidence,
    original_audit,
)
from privfair.components.generalisation.contract import dmondrian_contract, dsabre_contract
from privfair.components.generalisation.dmondrian import dmondrian
from privfair.components.generalisation.dsabre import dsabre
from privfair.components.generalisation.examples import toy_table
from privfair.components.generalisation.params import DMondrianParams, DSabreParams
from privfair.run.flow import ingest
from privfair.spec.catalogue import load_spec
from privfair.spec.settings import DEFAULT_SPECS_DIR


@pytest.fixture(scope="module")
def german():
    return ingest(load_spec(DEFAULT_SPECS_DIR / "german_dmondrian.yaml")).table


@pytest.fixture(scope="module", params=["dmondrian", "dsabre"])
def release(request, german):
    if request.param == "dmondrian":
        params = DMondrianParams(t=0.15, utility_queries=0)
        return german, params, dmondrian(german, params), dmondrian_contract(params, german)
    params = DSabreParams(t=0.15, utility_queries=0)
    return german, params, dsabre(german, params), dsabre_contract(params, german)


def test_release_passes_every_contract(release):
    table, params, result, contract = release
    frames = evidence(table, result.outputs, result.sidecars, params)
    failed = [r.to_dict() for r in check_contract(contract, frames) if not r.passed]
    assert not failed


@pytest.mark.parametrize("name", ["german_dmondrian", "adult_dmondrian"])
def test_c6_finds_violations_on_the_original_table(name):
    """Positive control: the raw table is not bd_f(0.15)-protective."""
    table = ingest(load_spec(DEFAULT_SPECS_DIR / f"{name}.yaml")).table
    g = G.BoundedDiscrimination(id="C6", t=0.15, random_itemsets=500)
    r = K.check_bounded_discrimination(g, original_audit(table))
    assert not r.passed
    assert r.n_offending > 0 and r.observed["tau"] > 0.15


def test_c6_on_the_release_finds_none_and_reaches_towards_the_bound(release):
    table, params, result, contract = release
    (g,) = [g for g in contract if g.kind == "bounded_discrimination"]
    r = K.check_bounded_discrimination(
        g, build_audit(table, result.table, result.sidecars["lineage"])
    )
    assert r.passed, r.message
    # Fig. 6: after sanitisation no itemset exceeds RD 0.3 or RR 3 at t = 0.15
    assert r.observed["RD"][1] <= 0.3 + 1e-9 and r.observed["RR"][1] <= 3 + 1e-9
    assert r.observed["tau"] <= 0.15 + 1e-9


def _frames(table, result, outputs=None, sidecars=None):
    return build_audit(
        table, (outputs or result.outputs)["data"], (sidecars or result.sidecars)["lineage"]
    )


def test_publishing_the_raw_values_fails_c3_c4_c6(german):
    """The input published under a release's lineage: its classes are not labelled by
    [min, max], its q-blocks are not t-close and its itemsets break the bounds."""
    params = DMondrianParams(t=0.15, utility_queries=0)
    result = dmondrian(german, params)
    contract = {g.id: g for g in dmondrian_contract(params, german)}
    # in the release's row order, so that its lineage maps each row to its own input row
    order = result.sidecars["lineage"].column("row_id")
    frame = _frames(german, result, outputs={"data": as_labels(german).take(order)})
    for cid in ("C3", "C4", "C6"):
        r = check_contract([contract[cid]], {"audit": frame})[0]
        assert not r.passed, cid
    # C2 holds: the original values are (degenerate) truthful labels; raw string cells are not
    assert check_contract([contract["C2"]], {"audit": frame})[0].passed
    raw = _frames(german, result, outputs={"data": german.take(order)})
    assert not check_contract([contract["C2"]], {"audit": raw})[0].passed


@pytest.mark.parametrize(
    ("cid", "corrupt"),
    [
        ("C2", X.break_truthful_generalisation),
        ("C3", X.break_class_labels),
        ("C4", X.break_decision_closeness),
        ("C5", X.break_leaf_closeness),
        ("C6", X.break_bounded_discrimination),
        ("C8", X.break_disjoint_classes),
    ],
)
def test_each_contract_fails_on_its_violation_dmondrian(german, cid, corrupt):
    params = DMondrianParams(t=0.15, utility_queries=0, k=3)
    result = dmondrian(german, params)
    contract = {g.id: g for g in dmondrian_contract(params, german)}
    g = contract[cid]
    outputs, sidecars = corrupt(g, german, dict(result.outputs), dict(result.sidecars), None)
    assert not check_contract([g], {"audit": _frames(german, result, outputs, sidecars)})[0].passed
    assert check_contract([g], {"audit": _frames(german, result)})[0].passed


def test_class_size_and_dichotomy_fail_on_their_violations(german):
    params = DSabreParams(t=0.15, utility_queries=0, k=5)
    result = dsabre(german, params)
    contract = {g.id: g for g in dsabre_contract(params, german)}
    for cid, corrupt in (("C7", X.break_class_size), ("C9", X.break_dichotomy_leaves)):
        g = contract[cid]
        outputs, sidecars = corrupt(g, german, dict(result.outputs), dict(result.sidecars), None)
        frame = _frames(german, result, outputs, sidecars)
        assert not check_contract([g], {"audit": frame})[0].passed, cid


def test_leaf_closeness_recomputes_t_eff(german):
    """C5 reads t_eff against max(t, tau(R)) from the input: a manifest claiming a larger
    t_eff (a looser bound) fails."""
    params = DMondrianParams(t=0.03, utility_queries=0, single_class="allow")
    result = dmondrian(german, params)
    frame = _frames(german, result)
    honest = G.LeafCloseness(id="C5", t=0.03, t_eff=0.0516129032258064)
    assert K.check_leaf_closeness(honest, frame).passed
    assert not K.check_leaf_closeness(honest.model_copy(update={"t_eff": 0.3}), frame).passed


def test_below_tau_r_a_split_release_fails_c5(german):
    """t < tau(R) allows no cut: a release with two classes there is refused."""
    params = DMondrianParams(t=0.03, utility_queries=0, single_class="allow")
    result = dmondrian(german, params)
    (g,) = [g for g in dmondrian_contract(params, german) if g.id == "C5"]
    cls = result.sidecars["lineage"].column("class").to_numpy().copy()
    cls[:500] = 1
    lin = result.sidecars["lineage"]
    bad = {"lineage": lin.set_column(1, lin.schema.field(1), pa.array(cls))}
    assert not K.check_leaf_closeness(g, _frames(german, result, sidecars=bad)).passed


def test_toy_release_label_tampering_is_caught():
    """A published label naming a value outside the input's domain is not a label (C2)."""
    table = toy_table()
    params = DMondrianParams(t=0.25, utility_queries=0)
    result = dmondrian(table, params)
    data = result.table
    i = data.schema.get_field_index("purpose")
    values = data.column("purpose").to_pylist()
    values[0] = {"lo": "housing", "hi": "boat"}
    data = data.set_column(i, data.schema.field(i), pa.array(values, data.schema.field(i).type))
    (g,) = [g for g in dmondrian_contract(params, table) if g.id == "C2"]
    frame = build_audit(table, data, result.sidecars["lineage"])
    r = K.check_truthful_generalisation(g, frame)
    assert not r.passed and r.n_offending == 1


def test_value_set_must_be_a_contiguous_slice():
    """A nominal label is the domain slice [lo..hi]: a set with a gap is not a label."""
    from privfair.components.generalisation.examples import table as random_table

    table = random_table(4, 60)
    params = DMondrianParams(t=0.3, utility_queries=0)
    result = dmondrian(table, params)
    data = result.table
    i = data.schema.get_field_index("region")
    values = data.column("region").to_pylist()
    values[0] = ["east", "south"]  # skips 'north' in the lexicographic order
    data = data.set_column(i, data.schema.field(i), pa.array(values, data.schema.field(i).type))
    frame = build_audit(table, data, result.sidecars["lineage"])
    row = result.sidecars["lineage"].column("row_id")[0].as_py()  # the input row of row 0
    assert (frame["__lo__region"].to_numpy()[row], frame["__hi__region"].to_numpy()[row]) == (
        -1,
        -1,
    )
    g = G.TruthfulGeneralisation(id="C2", attributes=("region",))
    assert not K.check_truthful_generalisation(g, frame).passed


def test_determinism_c10(german):
    """C10: identical inputs give identical dMondrian output; dSabre's for an identical seed,
    and another seed may give another assignment of the same leaf vectors."""
    p = DMondrianParams(t=0.2, utility_queries=0)
    assert dmondrian(german, p).table.equals(dmondrian(german, p).table)
    s = DSabreParams(t=0.2, utility_queries=0, seed=3)
    a, b = dsabre(german, s), dsabre(german, s)
    assert a.table.equals(b.table) and a.sidecars["lineage"].equals(b.sidecars["lineage"])
    c = dsabre(german, s.model_copy(update={"seed": 4}))
    assert c.metrics["classes"] == a.metrics["classes"]
    assert not np.array_equal(
        c.sidecars["lineage"].column("class").to_numpy(),
        a.sidecars["lineage"].column("class").to_numpy(),
    )
