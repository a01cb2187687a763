"""Great Expectations layer: every guarantee kind is a GX expectation calling its pure checker,
the suites survive a JSON round trip (or the guard says what was lost), violations fail the right
expectation naming the offending groups, and results and Data Docs are written to the release."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pytest

from components.microaggregation.audit import build_audit
from components.microaggregation.checks import CHECKS, check_contract
from pipelines import expectations as E
from pipelines.flow import ingest, protect
from pipelines.validate import validate_release
from schemas import contracts as C
from schemas.errors import PrivfairError
from schemas.roles import Role, read_roles
from pipelines.catalogue import load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def german():
    spec = load_spec(ROOT / "pipelines" / "specs" / "german_fair_mdav.yaml")
    return spec, ingest(spec, os.environ["PRIVFAIR_DATA_DIR"])


@pytest.fixture(scope="module")
def releases(german):
    """German through Fair-MDAV (shipped spec), plain MDAV, and Fair-MDAV without
    microaggregation: together they declare every guarantee kind that has a checker."""
    spec, ing = german
    raw = spec.model_dump(mode="json")
    raw.update(name="german_mdav", component={"name": "mdav", "params": {"k": 10}})
    specs = {
        "fair_mdav": spec,
        "mdav": parse_spec(raw),
        "fair_mdav_raw_qis": spec.with_params({"microaggregate": False}),
    }
    return {name: protect(s, ing.table) for name, s in specs.items()}


@pytest.fixture(scope="module")
def fair(releases):
    return releases["fair_mdav"]


def _validate(ing, res, published=None, lineage=None, out_dir=None):
    return validate_release(
        ing.table,
        res.table if published is None else published,
        res.lineage if lineage is None else lineage,
        res.contract,
        res.params.get("scaling", "minmax"),
        out_dir,
    )


def _plain(obj):
    return json.loads(json.dumps(obj, default=lambda o: o.item()))


def _set_column(table: pa.Table, name: str, values) -> pa.Table:
    i = table.schema.get_field_index(name)
    field = table.schema.field(name)
    return table.set_column(i, field, pa.array(values, field.type))


def _failed(v, kind: str):
    found = [r for r in v.results if r.kind == kind and not r.passed]
    assert found, f"no failed {kind} result in {v.failed}"
    return found


# --- the mechanism ------------------------------------------------------------------------------
def test_one_registered_expectation_per_checker():
    from great_expectations.expectations.registry import get_expectation_impl

    assert set(E.EXPECTATIONS) == set(CHECKS)
    for kind, cls in E.EXPECTATIONS.items():
        assert get_expectation_impl(cls.expectation_type) is cls
        assert cls.batch() == CHECKS[kind][0]
        assert set(cls.mirrored_fields()) == set(cls.guarantee_model.model_fields) - {"id", "kind"}
        assert E.GUARANTEE_TYPES[cls.expectation_type] == kind
    assert E.EXPECTATIONS["k_anonymity"].expectation_type == "expect_table_k_anonymous"
    assert E.EXPECTATIONS["fairlet_composition"].expectation_type == "expect_fairlet_composition"
    assert E.EXPECTATIONS["t_closeness"].expectation_type == "expect_t_closeness"


def test_shipped_releases_exercise_every_kind(releases):
    assert {g.kind for r in releases.values() for g in r.contract} == set(CHECKS)


def test_register_refuses_a_class_that_does_not_mirror_its_guarantee(monkeypatch):
    from great_expectations.expectations import registry

    # defining an Expectation subclass registers it with GX: keep that out of the real registry
    monkeypatch.setattr(
        registry, "_registered_expectations", dict(registry._registered_expectations)
    )
    with pytest.raises(PrivfairError, match=r"missing \['k'\]"):

        @E.register
        class ExpectKAnonymousWithoutK(E.GuaranteeExpectation):
            guarantee_model: ClassVar[type] = C.KAnonymity
            quasi_identifiers: tuple[str, ...] = ()

    with pytest.raises(PrivfairError, match="no checker for guarantee kind 'alpha_protection'"):

        @E.register
        class ExpectAlphaProtectionWithoutChecker(E.GuaranteeExpectation):
            guarantee_model: ClassVar[type] = C.AlphaProtection
            measure: str
            alpha: float

    assert "alpha_protection" not in E.EXPECTATIONS


def test_expectation_fields_round_trip_to_the_guarantee(releases):
    for res in releases.values():
        for g in res.contract:
            e = E.expectation_for(g)
            assert e.guarantee_id == g.id
            assert e.to_guarantee() == g


def test_pipelines_validate_imports_great_expectations_lazily():
    code = "import sys, pipelines.validate; sys.exit('great_expectations' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


# --- valid releases -------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["fair_mdav", "mdav", "fair_mdav_raw_qis"])
def test_every_guarantee_compiles_and_passes(german, releases, variant):
    _, ing = german
    res = releases[variant]
    suites = E.compile_suites(res.contract, res.table, ing.table, res.lineage)
    assert {b: E.count_held(s) for b, s in suites.items()} == E.count_declared(res.contract)

    v = _validate(ing, res)
    assert v.passed, v.failed
    head = v.results[: len(res.contract)]
    assert [(r.id, r.kind) for r in head] == [(g.id, g.kind) for g in res.contract]
    assert all(r.id == E.BUILTIN_ID for r in v.results[len(res.contract) :])

    # one source of truth: the expectations report exactly what the pure checkers report
    audit = build_audit(ing.table, res.table, res.lineage)
    pure = check_contract(
        res.contract, res.table.to_pandas(), audit, scaling=res.params.get("scaling", "minmax")
    )
    assert [_plain(r.to_dict()) for r in head] == [_plain(r.to_dict()) for r in pure]


def test_suites_hold_the_contract_plus_the_builtins(german, fair):
    _, ing = german
    suites = E.compile_suites(fair.contract, fair.table, ing.table, fair.lineage)
    builtins = E.builtin_expectations(fair.contract, fair.table, ing.table, fair.lineage)
    total = sum(len(s.expectations) for s in suites.values())
    assert total == len(fair.contract) + len(builtins)

    columns = E.expected_columns(fair.contract, ing.table)
    assert set(columns) == set(fair.table.column_names)
    roles = read_roles(ing.table)
    n_binary = len(roles.with_role(Role.PROTECTED)) + len(roles.with_role(Role.LABEL))
    # column set + row count + not-null per column + value set and type of protected and label
    assert len(builtins) == 2 + len(columns) + 2 * n_binary
    assert all(e.expectation_type in E.GUARANTEE_TYPES for e in suites["audit"].expectations)

    v = _validate(ing, fair)
    assert len(v.results) == len(fair.contract) + len(builtins)


# --- violations -------------------------------------------------------------------------------
def test_flipped_label_fails_local_fairness_naming_the_group(german, fair, tmp_path):
    _, ing = german
    audit = build_audit(ing.table, fair.table, fair.lineage)
    r = audit[audit["__retained"].to_numpy()]
    target = None
    for gid, grp in r.groupby("__group"):
        u, f = grp[grp["__pa_out"] == 0], grp[grp["__pa_out"] == 1]
        a, b = int((u["__y_out"] == 1).sum()), int((f["__y_out"] == 1).sum())
        if a >= 1 and (a - 1) * len(f) < b * len(u):  # one positive fewer breaks upr >= fpr
            target = (int(gid), int(u.loc[u["__y_out"] == 1, "__row_id"].iloc[0]))
            break
    assert target is not None
    gid, row_id = target
    pos = int(np.flatnonzero(fair.lineage.column("row_id").to_numpy() == row_id)[0])
    label = read_roles(fair.table).single(Role.LABEL).name
    values = fair.table.column(label).to_pylist()
    values[pos] = 1 - values[pos]

    v = _validate(ing, fair, published=_set_column(fair.table, label, values), out_dir=tmp_path)
    assert not v.passed
    (lf,) = _failed(v, "local_fairness")
    assert [o["group"] for o in lf.offending] == [gid]
    assert lf.n_offending == 1 and "1 groups with upr" in lf.message
    (mc,) = _failed(v, "minimal_correction")
    assert gid in [o["group"] for o in mc.offending]

    # the GX result itself lists observed value, message and offending groups
    doc = json.loads((tmp_path / v.artefacts["ge_results"]).read_text())
    assert doc["success"] is False
    gx = [
        x
        for x in doc["suites"]["audit"]["results"]
        if x["expectation_config"]["type"] == "expect_local_fairness"
    ]
    assert len(gx) == 1 and gx[0]["success"] is False
    assert gx[0]["result"]["offending"][0]["group"] == gid
    assert gx[0]["result"]["message"] == lf.message
    assert "observed_value" in gx[0]["result"]


def test_merged_groups_fail_fairlet_composition_naming_the_group(german, fair):
    _, ing = german
    group = fair.lineage.column("group").to_numpy().copy()
    group[group == 1] = 0
    lineage = fair.lineage.set_column(
        fair.lineage.schema.get_field_index("group"), "group", pa.array(group)
    )
    v = _validate(ing, fair, lineage=lineage)
    assert not v.passed
    (fc,) = _failed(v, "fairlet_composition")
    assert fc.offending == [{"group": 0, "m_g": 6, "n_g": 14}]
    (count,) = _failed(v, "fairlet_count")
    assert count.observed["groups"] == count.expected["groups"] - 1


def test_dropped_column_fails_the_column_set(german, fair):
    _, ing = german
    dropped = fair.contract[[g.kind for g in fair.contract].index("k_anonymity")]
    column = dropped.quasi_identifiers[0]
    v = _validate(ing, fair, published=fair.table.drop_columns([column]))
    assert not v.passed
    (cs,) = _failed(v, "expect_table_columns_to_match_set")
    assert cs.id == E.BUILTIN_ID
    assert cs.offending == [{"missing": column}]
    assert column in cs.message
    (ka,) = _failed(v, "k_anonymity")
    assert column in ka.message


def test_null_label_fails_not_null(german, fair):
    _, ing = german
    label = read_roles(fair.table).single(Role.LABEL).name
    values = fair.table.column(label).to_pylist()
    values[5] = None
    v = _validate(ing, fair, published=_set_column(fair.table, label, values))
    assert not v.passed
    (nn,) = _failed(v, "expect_column_values_to_not_be_null")
    assert nn.id == E.BUILTIN_ID
    assert nn.n_offending == 1
    assert nn.offending[0]["column"] == label
    assert f"column '{label}'" in nn.message


def test_kind_without_checker_fails_without_running(german, fair):
    _, ing = german
    extra = C.DifferentialPrivacy(id="DP", epsilon=1.0, delta=0.0)
    with pytest.raises(PrivfairError, match="differential_privacy"):
        E.compile_suites([*fair.contract, extra], fair.table, ing.table, fair.lineage)
    v = validate_release(ing.table, fair.table, fair.lineage, [*fair.contract, extra])
    assert v.failed == ["DP differential_privacy"]
    assert "no checker" in v.results[len(fair.contract)].message


# --- the silent-loss guard -----------------------------------------------------------------------
def test_round_trip_keeps_every_guarantee(german, fair):
    _, ing = german
    suites = E.compile_suites(fair.contract, fair.table, ing.table, fair.lineage)
    reloaded = E.round_trip(fair.contract, suites)
    guarantees = {}
    for s in reloaded.values():
        for e in s.expectations:
            index = (e.meta or {}).get(E.META_KEY, {}).get("index")
            if index is not None:
                guarantees[index] = e.to_guarantee()
    assert [guarantees[i] for i in range(len(fair.contract))] == list(fair.contract)


def test_guard_raises_when_gx_silently_drops_an_unknown_expectation(german, fair):
    _, ing = german
    suites = E.compile_suites(fair.contract, fair.table, ing.table, fair.lineage)
    texts = E.suites_to_json(suites)
    doc = json.loads(texts["audit"])
    for e in doc["expectations"]:
        if e["type"] == "expect_local_fairness":
            e["type"] = "expect_local_fairness_from_a_newer_version"
    texts["audit"] = json.dumps(doc)

    dropped: dict = {}
    reloaded = E.load_suites(texts, dropped=dropped)  # GX itself does not raise ...
    n_audit = len(suites["audit"].expectations)
    assert len(reloaded["audit"].expectations) == n_audit - 1  # ... it drops the expectation
    assert "not found" in dropped["audit"][0]
    with pytest.raises(
        PrivfairError,
        match=rf"suite audit holds {n_audit - 1} of {n_audit} declared guarantees: "
        r"missing kinds \['local_fairness'\]",
    ):
        E.check_suites(fair.contract, reloaded, dropped)


def test_guard_raises_when_an_expectation_class_is_not_registered(german, fair, monkeypatch):
    from great_expectations.expectations import registry

    _, ing = german
    monkeypatch.delitem(registry._registered_expectations, "expect_fairlet_count")
    suites = E.compile_suites(fair.contract, fair.table, ing.table, fair.lineage)
    with pytest.raises(PrivfairError, match=r"missing kinds \['fairlet_count'\]"):
        E.round_trip(fair.contract, suites)
    with pytest.raises(PrivfairError, match="suite audit holds"):
        _validate(ing, fair)


# --- artefacts -------------------------------------------------------------------------------
def test_results_and_data_docs_written_to_out_dir(german, fair, tmp_path):
    _, ing = german
    v = _validate(ing, fair, out_dir=tmp_path)
    assert v.passed
    assert v.artefacts == {
        "ge_results": "validation/ge_results.json",
        "data_docs": "validation/data_docs/index.html",
    }
    doc = json.loads((tmp_path / "validation" / "ge_results.json").read_text())
    assert doc["success"] is True
    assert set(doc["suites"]) == {"published", "audit"}
    n = sum(len(s["results"]) for s in doc["suites"].values())
    assert n == len(v.results)

    assert (tmp_path / v.artefacts["data_docs"]).is_file()
    pages = {p.name: p for p in (tmp_path / "validation" / "data_docs").rglob("*.html")}
    assert {"privfair_published.html", "privfair_audit.html"} <= set(pages)
    audit_page = next(
        p for name, p in pages.items() if name.endswith("audit.html") and "validations" in p.parts
    )
    text = " ".join(re.sub(r"<[^>]+>", " ", audit_page.read_text()).split())
    assert "Guarantee C1 fairlet_composition ( m=3, n=7 )" in text
    assert "every group is an exact fairlet" in text
    assert v.summary()["artefacts"] == v.artefacts


def test_no_artefacts_without_out_dir(german, fair, tmp_path, monkeypatch):
    _, ing = german
    monkeypatch.chdir(tmp_path)
    v = _validate(ing, fair)
    assert v.artefacts == {}
    assert list(tmp_path.iterdir()) == []
