"""Great Expectations layer: every guarantee kind is a GX expectation calling its pure checker,
the suites survive a JSON round trip (or the guard says what was lost), violations fail the right
expectation naming the offending groups, and results and Data Docs are written to the release."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pytest
from pydantic import Field

from privfair.components.core.checks import check_contract
from privfair.components.core.registry import kind_checks
from privfair.components.microaggregation.audit import build_audit, evidence
from privfair.run.flow import declared_copies, ingest, protect, required_contract
from privfair.schemas import contracts as C
from privfair.schemas.errors import PrivfairError
from privfair.schemas.roles import Role, read_roles
from privfair.spec.catalogue import (
    algorithm_of,
    check_keys,
    load_spec,
    outline,
    parse_spec,
    with_params,
)
from privfair.validation import expectations as E
from privfair.validation.validate import DECLARED_ID, validate_release

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def german():
    spec = load_spec(ROOT / "pipelines" / "specs" / "german_fair_mdav.yaml")
    return spec, ingest(spec, os.environ["PRIVFAIR_DATA_DIR"])


@pytest.fixture(scope="module")
def specs(german):
    """German through Fair-MDAV (shipped spec), plain MDAV, Fair-MDAV without microaggregation
    and Fair-MDAV publishing one-hot shares: together they declare every guarantee kind that has
    a checker."""
    spec, _ = german
    raw = spec.model_dump(mode="json")
    raw.update(name="german_mdav", component={"name": "mdav", "params": {"k": 10}})
    return {
        "fair_mdav": spec,
        "mdav": parse_spec(raw),
        "fair_mdav_raw_qis": with_params(spec, {"microaggregate": False}),
        "fair_mdav_onehot": with_params(spec, {"publish": "onehot"}),
    }


@pytest.fixture(scope="module")
def releases(german, specs):
    _, ing = german
    return {name: protect(s, ing) for name, s in specs.items()}


@pytest.fixture(scope="module")
def fair(releases):
    return releases["fair_mdav"]


APPLICANTS_SPEC = """\
name: applicants_private_dropped
dataset:
  path: applicants.csv
  private: drop
  columns:
    applicant: {role: private, kind: nominal}
    age: {role: quasi_identifier, kind: numeric}
    region: {role: quasi_identifier, kind: nominal}
    sex: {role: protected, kind: binary, favoured: 1}
    hired: {role: label, kind: binary, positive: 1}
component:
  name: fair_mdav
  params: {k: 4, tau: 1.0}
"""


@pytest.fixture(scope="module")
def private_dropped(tmp_path_factory):
    """A release of a small file dataset whose ``private`` column is dropped (``private: drop``):
    no built-in dataset has a private column, so this is how a release owes ``columns_absent``.
    Returns (spec, ingested input, result)."""
    folder = tmp_path_factory.mktemp("applicants")
    rows = ["applicant,age,region,sex,hired"]
    for i in range(24):
        sex = int(i % 2 == 0)
        hired = int((i // 2) % 3 != 0) if sex else int(i % 4 == 1)  # sex = 1 favoured
        rows.append(f"P-{4000 + 7 * i},{20 + (i * 13) % 40},{'nse'[i % 3]},{sex},{hired}")
    (folder / "applicants.csv").write_text("\n".join(rows) + "\n")
    (folder / "spec.yaml").write_text(APPLICANTS_SPEC)
    spec = load_spec(folder / "spec.yaml")
    ing = ingest(spec)
    return spec, ing, protect(spec, ing)


def _validate(ing, res, spec, published=None, lineage=None, out_dir=None, declared=None):
    """Validate ``res`` (optionally with its published table or lineage replaced) against the
    contract rebuilt from ``spec``, the declared copies being the result's contract and the
    copy in the published table's metadata (unless ``declared`` is given)."""
    outputs = {"data": res.outputs["data"] if published is None else published}
    sidecars = {"lineage": res.sidecars["lineage"] if lineage is None else lineage}
    return validate_release(
        algorithm_of(spec),
        spec.params,
        ing.table,
        outputs,
        sidecars,
        required_contract(spec, ing.table),
        declared_copies(res.contract, outputs) if declared is None else declared,
        out_dir,
    )


def _plain(obj):
    return json.loads(json.dumps(obj, default=lambda o: o.item()))


def _checker_fields(r) -> dict:
    """A result's fields without its check name (``key``, which only the validator sets)."""
    return {k: v for k, v in _plain(r.to_dict()).items() if k != "key"}


def _set_column(table: pa.Table, name: str, values) -> pa.Table:
    i = table.schema.get_field_index(name)
    field = table.schema.field(name)
    return table.set_column(i, field, pa.array(values, field.type))


def _failed(v, kind: str):
    found = [r for r in v.results if r.kind == kind and not r.passed]
    assert found, f"no failed {kind} result in {v.failed}"
    return found


# --- the mechanism ------------------------------------------------------------------------------
def _assert_mirrors(cls, model) -> None:
    """``cls`` carries exactly ``model``'s fields (but ``id`` -> ``guarantee_id`` and ``kind``),
    each with the model's type, requiredness and default."""
    base = set(E.GuaranteeExpectation.__fields__)
    assert "guarantee_id" in base
    own = set(cls.__fields__) - base
    assert own == set(model.model_fields) - {"id", "kind"}
    assert set(cls.mirrored_fields()) == own
    for name in own:
        mf, ef = model.model_fields[name], cls.__fields__[name]
        assert cls.__annotations__[name] == mf.annotation, name
        assert ef.required == mf.is_required(), name
        if not mf.is_required():
            assert ef.default == mf.default, name
    assert cls.guarantee_model is model
    assert cls.guarantee_kind() == C.kind_of(model)
    assert (cls.__doc__ or "").strip() == (model.__doc__ or "").strip()


def test_one_generated_expectation_per_registered_kind():
    """Every kind with a checker (shared or a family's) has exactly one generated expectation
    class, registered with GX, whose fields are the guarantee model's fields."""
    from great_expectations.expectations.registry import get_expectation_impl

    checks = kind_checks()
    assert set(E.EXPECTATIONS) == set(checks)
    assert set(checks) <= set(C.guarantee_kinds())
    assert len({cls.expectation_type for cls in E.EXPECTATIONS.values()}) == len(checks)
    for kind, cls in E.EXPECTATIONS.items():
        assert issubclass(cls, E.GuaranteeExpectation)
        assert cls.__module__ == E.__name__  # generated, not hand-written elsewhere
        _assert_mirrors(cls, checks[kind].model)
        assert get_expectation_impl(cls.expectation_type) is cls
        assert cls.batch() == checks[kind].frame
        assert E.GUARANTEE_TYPES[cls.expectation_type] == kind
    assert E.EXPECTATIONS["k_anonymity"].expectation_type == "expect_k_anonymity"
    assert E.EXPECTATIONS["fairlet_composition"].expectation_type == "expect_fairlet_composition"
    assert E.EXPECTATIONS["t_closeness"].expectation_type == "expect_t_closeness"
    assert E.EXPECTATIONS["seed_nearest"].batch() == "audit"
    assert E.EXPECTATIONS["k_anonymity"].batch() == E.PUBLISHED


def test_generate_mirrors_a_new_guarantee_model(monkeypatch):
    """Adding a kind needs no hand-written class: ``generate`` derives one from the model."""
    from great_expectations.expectations import registry

    # defining an Expectation subclass registers it with GX: keep that out of the real registry
    monkeypatch.setattr(
        registry, "_registered_expectations", dict(registry._registered_expectations)
    )

    class SpanBound(C.Guarantee):
        """Every group spans at most ``width`` units of ``attribute``."""

        kind: Literal["span_bound"] = "span_bound"
        attribute: str
        width: float = Field(gt=0)
        mode: Literal["strict", "loose"] = "strict"
        columns: tuple[str, ...] = ()

    cls = E.generate(SpanBound)
    assert cls.__name__ == "ExpectSpanBound"
    assert cls.expectation_type == "expect_span_bound"
    assert registry.get_expectation_impl("expect_span_bound") is cls
    _assert_mirrors(cls, SpanBound)
    assert "span_bound" not in E.EXPECTATIONS  # only registered kinds are in the table

    g = SpanBound(id="X1", attribute="age", width=2.5, columns=("a", "b"))
    e = cls.from_guarantee(g)
    assert (e.guarantee_id, e.attribute, e.width, e.mode) == ("X1", "age", 2.5, "strict")
    assert e.to_guarantee() == g
    # the model's constraints hold for the expectation too (checked by the model itself)
    with pytest.raises(ValueError, match="width"):
        cls(attribute="age", width=0)
    with pytest.raises(ValueError, match="attribute"):
        cls(width=1.0)


def test_generated_expectation_refuses_what_its_guarantee_refuses():
    ka = E.EXPECTATIONS["k_anonymity"]
    assert ka(k=5, quasi_identifiers=["age"]).to_guarantee() == C.KAnonymity(
        k=5, quasi_identifiers=("age",)
    )
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        ka(k=0)
    with pytest.raises(ValueError, match="reference"):
        E.EXPECTATIONS["t_closeness"](attribute="sex", t=0.1, reference="elsewhere")


# what every release owes the input's roles, whatever the algorithm (privfair.run.flow)
ROLE_KINDS = {"columns_absent"}


@pytest.fixture(scope="module")
def other_german_releases():
    """A release of every other shipped German spec (the other families' algorithms)."""
    from privfair.spec.catalogue import load_specs

    out = {}
    for _, spec in load_specs():
        if spec.dataset.name == "german" and algorithm_of(spec).family != "microaggregation":
            out[spec.name] = protect(spec, ingest(spec, os.environ["PRIVFAIR_DATA_DIR"]))
    return out


def test_shipped_releases_exercise_every_kind(releases, other_german_releases, private_dropped):
    """The shipped German specs (Fair-MDAV and its variants, and every other family's German
    spec) declare every kind with a checker of their families but the role kinds, which no
    built-in dataset calls for; the small file release with a private column dropped declares
    those: between them, every kind is exercised by a real release."""
    from privfair.components.core.checks import SHARED_KINDS
    from privfair.components.core.registry import families

    all_releases = [*releases.values(), *other_german_releases.values()]
    shipped = {g.kind for r in all_releases for g in r.contract}
    here = {"microaggregation"} | {
        algorithm_of(load_spec(ROOT / "pipelines" / "specs" / f"{n}.yaml")).family
        for n in other_german_releases
    }
    owed = {k.kind for k in SHARED_KINDS} | {
        k.kind for f in families() if f.name in here for k in f.kinds
    }
    # the gates a spec may demand: the shipped Adult and COMPAS specs demand them, and
    # tests/common/test_demanded_kinds.py breaks each on every row-level algorithm (the risk
    # and l-diversity gates: tests/common/test_reidentification_risk.py, on the German releases)
    demand_kinds = {"parity_gap", "retention", "reidentification_risk", "l_diversity"}
    assert set(kind_checks()) >= ROLE_KINDS | demand_kinds
    assert shipped == owed - ROLE_KINDS - demand_kinds
    _, _, res = private_dropped
    assert {g.kind for g in res.contract} >= ROLE_KINDS
    assert shipped | {g.kind for g in res.contract} == owed - demand_kinds


def test_expectation_fields_round_trip_to_the_guarantee(releases, private_dropped):
    for res in [*releases.values(), private_dropped[2]]:
        for g in res.contract:
            e = E.expectation_for(g)
            assert type(e) is E.EXPECTATIONS[g.kind]
            assert e.guarantee_id == g.id
            assert e.to_guarantee() == g


def test_pipelines_validate_imports_great_expectations_lazily():
    code = "import sys, privfair.validation.validate; sys.exit('great_expectations' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


# --- valid releases -------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["fair_mdav", "mdav", "fair_mdav_raw_qis", "fair_mdav_onehot"])
def test_every_guarantee_compiles_and_passes(german, specs, releases, variant):
    _, ing = german
    spec, res = specs[variant], releases[variant]
    # the contract rebuilt from the spec and the input is the one the algorithm declared
    required = required_contract(spec, ing.table)
    assert required == res.contract
    published, lineage = res.outputs["data"], res.sidecars["lineage"]
    suites = E.compile_suites(required, published, ing.table, lineage)
    held = {b: E.count_held(s) for b, s in suites.items()}
    declared = E.count_declared(required)
    assert set(declared) <= set(held)
    assert held == {b: declared.get(b, Counter()) for b in held}

    v = _validate(ing, res, spec)
    assert v.passed, v.failed
    n = len(required)
    head = v.results[:n]
    assert [(r.id, r.kind) for r in head] == [(g.id, g.kind) for g in required]
    # each guarantee's check name, as Dagster shows it; known from the spec alone
    assert [r.key for r in head] == check_keys(required) == check_keys(outline(spec))
    declaration = v.results[n]
    assert (declaration.id, declaration.kind, declaration.passed) == (
        DECLARED_ID,
        "declared_contract",
        True,
    )
    assert all(r.id == E.BUILTIN_ID for r in v.results[n + 1 :])
    assert v.guarantees == v.results[: n + 1]

    # one source of truth: the expectations report exactly what the pure checkers report
    frames = evidence(ing.table, res.outputs, res.sidecars, spec.params)
    pure = check_contract(required, frames)
    assert [_checker_fields(r) for r in head] == [_checker_fields(r) for r in pure]


def test_a_dropped_private_column_is_guaranteed_absent(private_dropped):
    """``private: drop`` removes the column at ingest, records it in the input's schema
    metadata, and the release owes ``columns_absent`` (id ``roles.private``) over it: the
    contract rebuilt from the spec and the input holds it, it compiles to a GX expectation
    and passes; the published table with the column put back fails it, naming the column."""
    from privfair.io.ingest import private_columns

    spec, ing, res = private_dropped
    assert "applicant" not in ing.table.column_names
    assert private_columns(ing.table) == ["applicant"]
    assert ing.input["dropped_columns"] == {"private": ["applicant"], "unlabelled": []}
    (absent,) = [g for g in res.contract if g.kind == "columns_absent"]
    assert absent == C.ColumnsAbsent(id="roles.private", columns=("applicant",))
    required = required_contract(spec, ing.table)
    assert required == res.contract and absent in required
    assert "applicant" not in res.outputs["data"].column_names

    published, lineage = res.outputs["data"], res.sidecars["lineage"]
    suites = E.compile_suites(required, published, ing.table, lineage)
    held = [
        e for s in suites.values() for e in s.expectations if type(e) is E.EXPECTATIONS[absent.kind]
    ]
    assert [e.to_guarantee() for e in held] == [absent]

    v = _validate(ing, res, spec)
    assert v.passed, v.failed
    (r,) = [r for r in v.results if r.kind == "columns_absent"]
    assert (r.id, r.key, r.passed) == ("roles.private", "roles_private_columns_absent", True)

    leaked = published.append_column(
        "applicant", pa.array([f"P-{i}" for i in range(len(published))])
    )
    v = _validate(ing, res, spec, published=leaked)
    assert not v.passed
    (ca,) = _failed(v, "columns_absent")
    assert ca.offending == [{"column": "applicant"}] and "applicant" in ca.message
    (cs,) = _failed(v, "expect_table_columns_to_match_set")  # and the column set says so too
    assert "applicant" in cs.message


def test_suites_hold_the_contract_plus_the_builtins(german, fair):
    spec, ing = german
    published, lineage = fair.outputs["data"], fair.sidecars["lineage"]
    suites = E.compile_suites(fair.contract, published, ing.table, lineage)
    builtins = E.builtin_expectations(fair.contract, published, ing.table, lineage)
    total = sum(len(s.expectations) for s in suites.values())
    assert total == len(fair.contract) + len(builtins)

    columns = E.expected_columns(fair.contract, ing.table)
    assert set(columns) == set(published.column_names)
    roles = read_roles(ing.table)
    n_binary = len(roles.with_role(Role.PROTECTED)) + len(roles.with_role(Role.LABEL))
    # column set + row count + not-null per column + value set and type of protected and label
    assert len(builtins) == 2 + len(columns) + 2 * n_binary
    assert all(e.expectation_type in E.GUARANTEE_TYPES for e in suites["audit"].expectations)

    v = _validate(ing, fair, spec)
    # one result per guarantee, the declared-contract check, then the built-ins
    assert len(v.results) == len(fair.contract) + 1 + len(builtins)
    assert len(v.schema_checks) == len(builtins)


# --- violations -------------------------------------------------------------------------------
def test_flipped_label_fails_local_fairness_naming_the_group(german, fair, tmp_path):
    spec, ing = german
    published, lineage = fair.outputs["data"], fair.sidecars["lineage"]
    audit = build_audit(ing.table, published, lineage)
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
    pos = int(np.flatnonzero(lineage.column("row_id").to_numpy() == row_id)[0])
    label = read_roles(published).single(Role.LABEL).name
    values = published.column(label).to_pylist()
    values[pos] = 1 - values[pos]

    v = _validate(
        ing, fair, spec, published=_set_column(published, label, values), out_dir=tmp_path
    )
    assert not v.passed
    (lf,) = _failed(v, "local_fairness")
    assert [o["group"] for o in lf.offending] == [gid]
    assert lf.n_offending == 1 and "1 groups with upr" in lf.message
    assert lf.key == "C8_local_fairness"
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
    spec, ing = german
    lin = fair.sidecars["lineage"]
    group = lin.column("group").to_numpy().copy()
    group[group == 1] = 0
    lineage = lin.set_column(lin.schema.get_field_index("group"), "group", pa.array(group))
    v = _validate(ing, fair, spec, lineage=lineage)
    assert not v.passed
    (fc,) = _failed(v, "fairlet_composition")
    assert fc.offending == [{"group": 0, "m_g": 6, "n_g": 14}]
    (count,) = _failed(v, "fairlet_count")
    assert count.observed["groups"] == count.expected["groups"] - 1


def test_dropped_column_fails_the_column_set(german, fair):
    spec, ing = german
    dropped = fair.contract[[g.kind for g in fair.contract].index("k_anonymity")]
    column = dropped.quasi_identifiers[0]
    v = _validate(ing, fair, spec, published=fair.outputs["data"].drop_columns([column]))
    assert not v.passed
    (cs,) = _failed(v, "expect_table_columns_to_match_set")
    assert cs.id == E.BUILTIN_ID
    assert cs.offending == [{"missing": column}]
    assert column in cs.message
    (ka,) = _failed(v, "k_anonymity")
    assert column in ka.message


def test_null_label_fails_not_null(german, fair):
    spec, ing = german
    published = fair.outputs["data"]
    label = read_roles(published).single(Role.LABEL).name
    values = published.column(label).to_pylist()
    values[5] = None
    v = _validate(ing, fair, spec, published=_set_column(published, label, values))
    assert not v.passed
    (nn,) = _failed(v, "expect_column_values_to_not_be_null")
    assert nn.id == E.BUILTIN_ID
    assert nn.n_offending == 1
    assert nn.offending[0]["column"] == label
    assert f"column '{label}'" in nn.message


class DifferentialPrivacy(C.Guarantee):
    """A kind this version has no checker for (never registered)."""

    kind: Literal["differential_privacy"] = "differential_privacy"
    epsilon: float
    delta: float = 0.0


def test_kind_without_checker_fails_without_running(german, fair):
    """A release declaring a guarantee beyond the required ones gets it checked; with no
    checker, it fails (and only it: the required guarantees are all declared)."""
    spec, ing = german
    published, lineage = fair.outputs["data"], fair.sidecars["lineage"]
    extra = DifferentialPrivacy(id="DP", epsilon=1.0)
    with pytest.raises(PrivfairError, match="differential_privacy"):
        E.compile_suites([*fair.contract, extra], published, ing.table, lineage)
    declared = declared_copies([*fair.contract, extra], {"data": published})
    v = _validate(ing, fair, spec, declared=declared)
    assert v.failed == ["DP differential_privacy"]
    assert "no checker" in v.results[len(fair.contract)].message
    assert v.results[len(fair.contract) + 1].kind == "declared_contract"
    assert v.results[len(fair.contract) + 1].passed


def test_declared_copy_lacking_a_required_guarantee_fails(german, fair):
    """The declared contract is only compared with the one rebuilt from the spec: a copy that
    leaves a guarantee out fails ``declared_contract`` naming it (and the guarantee is still
    checked, here passing)."""
    spec, ing = german
    lacking = [g for g in fair.contract if g.id != "C8"]
    assert len(lacking) == len(fair.contract) - 1
    declared = {"manifest.json": lacking, "data.parquet": list(fair.contract)}
    v = _validate(ing, fair, spec, declared=declared)
    assert v.failed == ["declared declared_contract"]
    (dc,) = _failed(v, "declared_contract")
    assert "C8 local_fairness" in dc.message and "manifest.json" in dc.message
    assert [m["copy"] for m in dc.offending] == ["manifest.json"]
    (lf,) = [r for r in v.results if r.kind == "local_fairness"]
    assert lf.passed


# --- the silent-loss guard -----------------------------------------------------------------------
def test_round_trip_keeps_every_guarantee(german, fair):
    _, ing = german
    published, lineage = fair.outputs["data"], fair.sidecars["lineage"]
    suites = E.compile_suites(fair.contract, published, ing.table, lineage)
    reloaded = E.round_trip(fair.contract, suites)
    guarantees = {}
    for s in reloaded.values():
        for e in s.expectations:
            index = (e.meta or {}).get(E.META_KEY, {}).get("index")
            if index is not None:
                assert type(e) is E.EXPECTATIONS[fair.contract[index].kind]
                guarantees[index] = e.to_guarantee()
    assert [guarantees[i] for i in range(len(fair.contract))] == list(fair.contract)


def test_guard_raises_when_gx_silently_drops_an_unknown_expectation(german, fair):
    _, ing = german
    published, lineage = fair.outputs["data"], fair.sidecars["lineage"]
    suites = E.compile_suites(fair.contract, published, ing.table, lineage)
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
    n_declared = sum(E.count_declared(fair.contract)["audit"].values())
    with pytest.raises(
        PrivfairError,
        match=rf"suite audit holds {n_declared - 1} of {n_declared} declared guarantees: "
        r"missing kinds \['local_fairness'\]",
    ):
        E.check_suites(fair.contract, reloaded, dropped)


def test_guard_raises_when_an_expectation_class_is_not_registered(german, fair, monkeypatch):
    from great_expectations.expectations import registry

    spec, ing = german
    published, lineage = fair.outputs["data"], fair.sidecars["lineage"]
    monkeypatch.delitem(registry._registered_expectations, "expect_fairlet_count")
    suites = E.compile_suites(fair.contract, published, ing.table, lineage)
    with pytest.raises(PrivfairError, match=r"missing kinds \['fairlet_count'\]"):
        E.round_trip(fair.contract, suites)
    with pytest.raises(PrivfairError, match="suite audit holds"):
        _validate(ing, fair, spec)


# --- artefacts -------------------------------------------------------------------------------
def test_results_and_data_docs_written_to_out_dir(german, fair, tmp_path):
    spec, ing = german
    v = _validate(ing, fair, spec, out_dir=tmp_path)
    assert v.passed
    assert v.artefacts == {
        "ge_results": "validation/ge_results.json",
        "data_docs": "validation/data_docs/index.html",
    }
    doc = json.loads((tmp_path / "validation" / "ge_results.json").read_text())
    assert doc["success"] is True
    assert set(doc["suites"]) == {"published", "audit"}
    n = sum(len(s["results"]) for s in doc["suites"].values())
    assert n == len(v.results) - 1  # every result but the declared-contract check is GX's

    assert (tmp_path / v.artefacts["data_docs"]).is_file()
    pages = {p.name: p for p in (tmp_path / "validation" / "data_docs").rglob("*.html")}
    assert {"privfair_published.html", "privfair_audit.html"} <= set(pages)
    audit_page = next(
        p for name, p in pages.items() if name.endswith("audit.html") and "validations" in p.parts
    )
    text = " ".join(re.sub(r"<[^>]+>", " ", audit_page.read_text()).split())
    assert "Guarantee C1 fairlet_composition ( m=3, n=7 )" in text
    # the generated class's docstring is the guarantee model's
    assert "Every group holds exactly" in text
    assert v.summary()["artefacts"] == v.artefacts


def test_no_artefacts_without_out_dir(german, fair, tmp_path, monkeypatch):
    spec, ing = german
    monkeypatch.chdir(tmp_path)
    v = _validate(ing, fair, spec)
    assert v.artefacts == {}
    assert list(tmp_path.iterdir()) == []


def test_an_aggregate_release_gets_no_row_level_builtins(german, fair):
    """An algorithm whose outputs are new tables (``row_level=False``: a report, not a table
    release) is checked by its own contract only: no column-set or row-count built-ins."""
    _, ing = german
    published, lineage = fair.outputs["data"], fair.sidecars["lineage"]
    with_rows = E.compile_suites(fair.contract, published, ing.table, lineage)
    without = E.compile_suites(fair.contract, published, ing.table, lineage, builtins=False)

    def builtin(suite):
        return [e for e in suite.expectations if (e.meta or {}).get(E.META_KEY, {}).get("builtin")]

    assert builtin(with_rows[E.PUBLISHED]) and not builtin(without[E.PUBLISHED])
    assert E.count_declared(fair.contract) == {
        b: E.count_held(s) for b, s in without.items() if s.expectations
    }


def test_the_evidence_frames_do_not_outlive_the_validation():
    """GX keeps its last context (and every batch's dataframe) in a module-level project
    manager; the validator lets it go, so a 10M-row release's evidence frames are not still
    held while the cost of protection and the report run."""
    import gc

    import pandas as pd

    from privfair.components.core.descriptor import resolve
    from privfair.components.core.registry import algorithm

    algo = algorithm("fair_mdav")
    table, params = resolve(algo.example)(0)
    result = algo(table, params)
    v = validate_release(
        algo,
        params,
        table,
        result.outputs,
        result.sidecars,
        result.contract,
        declared_copies(result.contract, result.outputs),
    )
    assert v.passed
    gc.collect()
    alive = [
        o for o in gc.get_objects() if isinstance(o, pd.DataFrame) and "__retained" in o.columns
    ]
    assert not alive
