"""A blocked release's by-group guarantees checked part by part give the verdicts of the whole
table's evidence: on the untouched releases of the examples and on every corruption of the
battery, for MDAV and Fair-MDAV; through Great Expectations on the engine's worker pool; and on
a blocked Adult-like release."""

from __future__ import annotations

import functools
import json
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfair.components.core.checks import check_guarantee, compose
from privfair.components.core.descriptor import resolve
from privfair.components.core.engine import LocalEngine, using
from privfair.components.core.parts import PART, RESULTS, check_part
from privfair.components.core.registry import algorithm, kind_checks
from privfair.validation.validate import validate_release

ALGOS = ("mdav", "fair_mdav")
SEEDS = (0, 1, 2, 5)


def _blocked(name: str, seed: int):
    algo = algorithm(name)
    table, params = resolve(algo.example)(seed + 40)
    from privfair.components.microaggregation.examples import table as example_table

    table = example_table(seed + 40, n_rows=160)  # several blocks of whole groups
    params = params.model_copy(update={"block_rows": 40})
    return algo, table, params


def _part_verdicts(algo, table, params, outputs, sidecars, contract):
    """{contract position: CheckResult} of the by-group guarantees, checked in parts; None if
    the release cannot be cut into parts (the validator then audits the whole table)."""
    parts = resolve(algo.evidence_parts)(table, outputs, sidecars, params, contract)
    if parts is None or parts.n_parts < 2:
        return None
    kinds = kind_checks()
    idx = [i for i, g in enumerate(contract) if kinds[g.kind].in_parts]
    texts = [contract[i].model_dump_json() for i in idx]
    fn = functools.partial(
        check_part,
        build=parts.build,
        in_schema=table.schema,
        out_schema=outputs["data"].schema,
        lin_schema=sidecars["lineage"].schema,
        params=params,
        guarantees=texts,
    )
    got = LocalEngine().map_parts(parts.rows, parts.n_parts, PART, fn, RESULTS).to_pylist()
    assert not [r for r in got if r["__raised"]], got
    out = {}
    for i, text in zip(idx, texts, strict=True):
        rows = [
            {"part": r[PART], "retained": r["__retained"], "result": json.loads(r["__result"])}
            for r in got
            if r["__guarantee"] == text
        ]
        assert len(rows) == parts.n_parts
        out[i] = compose(contract[i], rows)
    return out


def _whole_verdicts(algo, table, params, outputs, sidecars, contract, idx):
    frames = resolve(algo.evidence)(table, outputs, sidecars, params)
    return {i: check_guarantee(contract[i], frames) for i in idx}


def _same(algo, table, params, outputs, sidecars, contract) -> bool:
    """Parts and whole agree on every guarantee checked in parts (a whole-table rule decided
    from the parts' summaries on everything it reports, sums of floats to their rounding);
    True if the release was cut."""
    parts = _part_verdicts(algo, table, params, outputs, sidecars, contract)
    if parts is None:
        return False
    whole = _whole_verdicts(algo, table, params, outputs, sidecars, contract, parts)
    differ = {
        contract[i].title: (parts[i].message, whole[i].message)
        for i in parts
        if parts[i].passed != whole[i].passed
    }
    assert not differ
    kinds = kind_checks()
    for i in parts:
        if not kinds[contract[i].kind].by_group:
            _same_result(parts[i], whole[i])
    return True


def _same_result(a, b) -> None:
    """Two check results equal field by field, floats to 1e-9 relative (a sum over parts is
    rounded in another order than over the whole table)."""
    da, db = a.to_dict(), b.to_dict()
    assert json.dumps(da, sort_keys=True, default=str) == json.dumps(
        db, sort_keys=True, default=str
    ) or _close(da, db), (da, db)


def _close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-9, abs=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("name", ALGOS)
@pytest.mark.parametrize("seed", SEEDS)
def test_untouched_blocked_release_is_cut_and_agrees(name, seed):
    algo, table, params = _blocked(name, seed)
    result = algo(table, params)
    assert _same(algo, table, params, result.outputs, result.sidecars, result.contract)
    parts = _part_verdicts(algo, table, params, result.outputs, result.sidecars, result.contract)
    assert all(r.passed for r in parts.values())


def _corruptions():
    out = []
    for name in ALGOS:
        for seed in SEEDS:
            algo, table, params = _blocked(name, seed)
            for i, g in enumerate(algo.required_contract(params, table)):
                if kind_checks()[g.kind].corrupt:
                    out.append(pytest.param(name, seed, i, id=f"{name}-{seed}-{g.title}"))
    return out


@pytest.mark.parametrize(("name", "seed", "index"), _corruptions())
def test_every_corruption_gets_the_whole_tables_verdicts(name, seed, index):
    """Each corruption of the battery (of any guarantee, by-group or not): every by-group
    guarantee has the same verdict in parts as on the whole table; a corrupted lineage that no
    longer keeps groups in blocks is not cut (the whole table is audited)."""
    algo, table, params = _blocked(name, seed)
    result = algo(table, params)
    g = result.contract[index]
    broken = resolve(kind_checks()[g.kind].corrupt)(
        g, table, dict(result.outputs), dict(result.sidecars), np.random.default_rng(seed)
    )
    if broken is None:
        pytest.skip(f"no release can break {g.title} with these parameters")
    outputs, sidecars = broken
    _same(algo, table, params, outputs, sidecars, result.contract)


def _by_check(v):
    return [(r.id, r.kind, r.passed) for r in v.results]


@pytest.mark.parametrize("name", ALGOS)
def test_great_expectations_on_a_worker_pool_gives_the_whole_tables_verdicts(name):
    """The validator's path: parts checked on a 2-process pool, the per-part results validated
    by Great Expectations (the ``parts`` suite), every verdict equal to the driver's audit of
    the whole table, on the untouched release and on a broken one."""
    algo, table, params = _blocked(name, 1)
    result = algo(table, params)
    declared = {"manifest": result.contract}
    # a broken representative keeps the lineage, so the release is still cut into parts
    g = next(g for g in result.contract if g.kind in ("group_representatives", "group_means"))
    broken = resolve(kind_checks()[g.kind].corrupt)(
        g, table, dict(result.outputs), dict(result.sidecars), np.random.default_rng(1)
    )
    for outputs, sidecars in ((result.outputs, result.sidecars), broken):
        with using(LocalEngine(2)):
            parts = validate_release(
                algo, params, table, outputs, sidecars, result.contract, declared
            )
        whole = validate_release(
            algo, params, table, outputs, sidecars, result.contract, declared, in_parts=False
        )
        assert _by_check(parts) == _by_check(whole)
        composed = [r for r in parts.results if "parts of whole groups" in r.message]
        assert composed  # really checked in parts
    assert not parts.passed  # the broken release fails, as on the whole table


def test_unblocked_release_is_audited_whole():
    algo = algorithm("fair_mdav")
    table, params = resolve(algo.example)(3)
    result = algo(table, params)
    assert (
        resolve(algo.evidence_parts)(
            table, result.outputs, result.sidecars, params, result.contract
        )
        is None
    )


def test_a_part_is_the_whole_tables_audit_restricted_to_its_rows():
    """The audit frame built for one part on a worker equals the whole table's audit frame on
    the part's rows (every column, the one-hot and scaled ones included)."""
    from privfair.components.core.parts import unpack

    algo, table, params = _blocked("fair_mdav", 2)
    result = algo(table, params)
    parts = resolve(algo.evidence_parts)(
        table, result.outputs, result.sidecars, params, result.contract
    )
    whole = resolve(algo.evidence)(table, result.outputs, result.sidecars, params)["audit"]
    for rows in parts.rows:
        inp, pub, lin, row_ids = unpack(
            rows, table.schema, result.outputs["data"].schema, result.sidecars["lineage"].schema
        )
        audit = parts.build(inp, {"data": pub}, {"lineage": lin}, params, row_ids)["audit"]
        want = whole.set_index("__row_id").loc[row_ids]
        got = audit.set_index("__row_id")
        assert list(got.columns) == list(want.columns)
        for c in got.columns:
            a, b = got[c].to_numpy(), want[c].to_numpy()
            if a.dtype.kind == "f":
                assert np.array_equal(a, b, equal_nan=True), c
            else:  # object columns: missing where the whole has it missing, equal elsewhere
                na = pd.isna(a)
                assert (na == pd.isna(b)).all() and (a[~na] == b[~na]).all(), c


@pytest.mark.parametrize("name", ALGOS)
def test_a_release_cut_in_parts_builds_no_whole_table_audit(name, monkeypatch):
    """Every guarantee of a blocked microaggregation release that reads the audit frame is
    checked in parts (by group, or decided from the parts' summaries), so the validator
    builds no audit frame of every input row: only the published table's frame, which the
    schema checks read too."""
    from privfair.components.microaggregation import audit as A

    algo, table, params = _blocked(name, 2)
    result = algo(table, params)
    kinds = kind_checks()
    left = {kinds[g.kind].frame for g in result.contract if not kinds[g.kind].in_parts}
    assert left <= {"published"}
    built = []
    monkeypatch.setattr(A, "evidence", lambda *a, **k: built.append(1) or {})
    v = validate_release(
        algo,
        params,
        table,
        result.outputs,
        result.sidecars,
        result.contract,
        {"manifest": result.contract},
    )
    assert v.passed and not built
    assert any("parts of whole groups" in r.message for r in v.results)


def test_parts_on_spark_give_the_pools_results(spark_engine):
    """The per-part results computed by Spark's Python workers (blocks exchanged as Parquet,
    schema metadata dropped on the way) are the pool's, row for row."""
    algo, table, params = _blocked("fair_mdav", 0)
    result = algo(table, params)
    parts = resolve(algo.evidence_parts)(
        table, result.outputs, result.sidecars, params, result.contract
    )
    texts = [g.model_dump_json() for g in result.contract if kind_checks()[g.kind].in_parts]
    fn = functools.partial(
        check_part,
        build=parts.build,
        in_schema=table.schema,
        out_schema=result.outputs["data"].schema,
        lin_schema=result.sidecars["lineage"].schema,
        params=params,
        guarantees=texts,
    )
    local = LocalEngine(2).map_parts(parts.rows, parts.n_parts, PART, fn, RESULTS)
    spark = spark_engine.map_parts(parts.rows, parts.n_parts, PART, fn, RESULTS)
    assert spark.to_pylist() == local.to_pylist()
    results = [json.loads(r) for r in local.column("__result").to_pylist()]
    assert all(r["passed"] for r in results if "summary" not in r)
    assert any("summary" in r for r in results)


_TYPED = {
    "i8": pa.array([1, None, 3, 4], pa.int8()),
    "f": pa.array([0.5, 1.5, None, 2.0]),
    "s": pa.array(["a", None, "ccc", "d"]),
    "ls": pa.array(["x", "y", None, "zz"], pa.large_string()),
    "b": pa.array([True, False, None, True]),
    "bin": pa.array([b"1", b"", None, b"22"]),
    "d": pa.array([1, 2, None, 4], pa.date32()),
    "ts": pa.array([1, None, 3, 4], pa.timestamp("us", tz="UTC")),
    "dec": pa.array([Decimal("1.25"), None, Decimal("3.50"), Decimal("0.01")], pa.decimal128(9, 2)),
    "fsb": pa.array([b"ab", b"cd", None, b"ef"], pa.binary(2)),
    "cat": pa.array(["u", "v", "u", None]).dictionary_encode(),
    "lst": pa.array([["a"], [], None, ["b", "c"]], pa.list_(pa.string())),
    "st": pa.array([{"lo": 1, "hi": 2}, None, {"lo": 0, "hi": 0}, {"lo": 5, "hi": 9}]),
    "nul": pa.nulls(4),
}


@given(
    st.lists(st.sampled_from(sorted(_TYPED)), min_size=1, max_size=6, unique=True),
    st.lists(st.sampled_from(sorted(_TYPED)), min_size=1, max_size=6, unique=True),
    st.lists(st.integers(0, 3), min_size=1, max_size=8),
)
@settings(max_examples=60, deadline=None, derandomize=True)
def test_pack_equals_arrows_promoted_concatenation(in_cols, out_cols, row_id):
    """The packed rows hold what Arrow's concatenation with type promotion gives (each side
    null in the other's columns), of every type a release may hold, though the null columns
    share one buffer; the parts made one at a time hold each part's rows of them."""
    from privfair.components.core import parts

    inp = pa.table({c: _TYPED[c] for c in in_cols})
    out = pa.table({c: _TYPED[c].take(pa.array(row_id)) for c in out_cols})
    lin = pa.table({"row_id": pa.array(row_id, pa.int64())})
    part_of_row = np.array([0, 1, 1, 0])
    got = parts.pack(inp, out, lin, part_of_row)
    ins = {f"{parts.IN}{c}": inp.column(c) for c in in_cols}
    ins |= {parts.PART: pa.array(part_of_row), parts.SIDE: pa.array(np.zeros(4, np.int8))}
    ins |= {parts.ROW: pa.array(np.arange(4))}
    outs = {f"{parts.OUT}{c}": out.column(c) for c in out_cols} | {
        f"{parts.LIN}row_id": lin.column("row_id"),
        parts.PART: pa.array(part_of_row[row_id]),
        parts.SIDE: pa.array(np.ones(len(row_id), np.int8)),
        parts.ROW: pa.array(np.array(row_id, np.int64)),
        parts.POS: pa.array(np.arange(len(row_id))),
    }
    want = pa.concat_tables([pa.table(ins), pa.table(outs)], promote_options="default")
    got.validate(full=True)
    assert got.schema == want.schema
    assert got.to_pylist() == want.to_pylist()
    # made one part at a time, from tables of several chunks: each part's rows of the whole
    chunked = [pa.concat_tables([t.slice(0, 2), t.slice(2)]) for t in (inp, out, lin)]
    for p, lazy in enumerate(parts.PackedParts(*chunked, part_of_row)):
        lazy.validate(full=True)
        whole = got.filter(pc.equal(got[parts.PART], p))
        assert lazy.schema == whole.schema
        assert lazy.to_pylist() == whole.to_pylist()


def _audited(name: str, seed: int, broken: int | None):
    """(contract, whole audit frame) of an example release, or of its ``broken``-th corruption
    of a whole-table rule; a retention demand is added to the contract."""
    from privfair.schemas.contracts import Retention

    algo, table, params = _blocked(name, seed)
    result = algo(table, params)
    contract = [*result.contract, Retention(id="R", min_share=0.95).completed(table)]
    outputs, sidecars = result.outputs, result.sidecars
    kinds = kind_checks()
    if broken is not None:
        breakable = [g for g in contract if kinds[g.kind].summarise and kinds[g.kind].corrupt]
        g = breakable[broken % len(breakable)]
        got = resolve(kinds[g.kind].corrupt)(
            g, table, dict(outputs), dict(sidecars), np.random.default_rng(seed)
        )
        if got is not None:
            outputs, sidecars = got
    audit = resolve(algo.evidence)(table, outputs, sidecars, params)["audit"]
    return contract, audit


@given(
    st.sampled_from(ALGOS),
    st.sampled_from(SEEDS),
    st.one_of(st.none(), st.integers(0, 5)),
    st.integers(1, 6),
    st.integers(0, 2**32 - 1),
)
@settings(max_examples=60, deadline=None, derandomize=True)
def test_whole_table_rules_from_any_cut_of_their_evidence(name, seed, broken, n_parts, cut):
    """For any cut of a release's audit frame into parts that keep every group whole, each
    whole-table rule decided from the parts' summaries, sent through JSON as the workers send
    them, reports what its checker reports on the whole frame: verdict, observed values,
    offenders (on untouched and corrupted releases)."""
    from privfair.components.core.checks import compose_summaries, summarise_guarantee
    from privfair.components.core.parts import summary_from_data, summary_to_data

    contract, audit = _audited(name, seed, broken)
    rng = np.random.default_rng(cut)
    group = audit["__group"].to_numpy()
    part = rng.integers(0, n_parts, len(audit))  # rows left out go anywhere
    kept = audit["__retained"].to_numpy()
    of_group = rng.integers(0, n_parts, int(group.max()) + 2)
    part[kept] = of_group[group[kept]]
    kinds = kind_checks()
    for g in (g for g in contract if kinds[g.kind].summarise):
        sent = [
            json.loads(json.dumps(summary_to_data(summarise_guarantee(g, {"audit": a}))))
            for a in (audit[part == p].reset_index(drop=True) for p in range(n_parts))
        ]
        got = compose_summaries(g, [summary_from_data(d) for d in sent])
        _same_result(got, check_guarantee(g, {"audit": audit}))
