"""MST's and PreFair's marginals through the execution engine (``privfair.components.core.engine``): the
dense counts built from ``group_counts`` equal NumPy's own count of the codes, exactly, on the
family's example and on Adult; a real local Spark session gives the same counts as this
process, and a PreFair release run on Spark keeps its contract. On the local engine the codes
are a ``TableFrame`` encoded batch by batch: the whole table's code matrix is built here only
as NumPy's reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from privfair.components.core.checks import check_contract
from privfair.components.core.descriptor import resolve
from privfair.components.core.engine import Engine, LocalEngine, using
from privfair.components.core.frames import TableFrame
from privfair.components.synthesis import MST, PREFAIR
from privfair.components.synthesis.accounting import plan
from privfair.components.synthesis.compression import Compression
from privfair.components.synthesis.domain import encode_table
from privfair.components.synthesis.examples import mst_example, prefair_example
from privfair.components.synthesis.marginals import Marginals, encode_frame
from privfair.components.synthesis.params import MSTParams
from privfair.components.synthesis.selection import candidate_pairs
from privfair.components.synthesis.synthesize import encode_input, one_way_counts, pair_counts
from privfair.run.flow import ingest
from privfair.schemas.errors import InputError
from privfair.spec.catalogue import load_spec

SPEC_DIR = Path(__file__).resolve().parents[2] / "pipelines" / "specs"

# (input, algorithm, selector): MST and both PreFair selectors on the example, MST and
# Greedy-PreFair on Adult (the spec's roles and bins)
CASES = [
    ("example", "mst", "mst"),
    ("example", "prefair", "greedy"),
    ("example", "prefair", "exponential"),
    ("adult", "mst", "mst"),
    ("adult", "prefair", "greedy"),
]


@pytest.fixture(scope="module")
def adult():
    """Adult with the synthesis family's roles and the adult_prefair spec's parameters."""
    spec = load_spec(SPEC_DIR / "adult_prefair.yaml")
    return ingest(spec).table, spec.params


def _input(which: str, algorithm: str, selector: str, request):
    if which == "example":
        table, params = mst_example(0) if algorithm == "mst" else prefair_example(0)
        if algorithm == "prefair":
            params = params.model_copy(update={"selector": selector})
        return table, params
    table, params = request.getfixturevalue("adult")
    if algorithm == "mst":
        shared = {k: v for k, v in params.model_dump().items() if k in MSTParams.model_fields}
        params = MSTParams(**shared)
    return table, params


class _Counting(Engine):
    """An engine that records every ``group_counts`` call and passes it on."""

    def __init__(self, inner: Engine):
        self.inner = inner
        self.name, self.workers = inner.name, inner.workers
        self.calls: list[int] = []

    def group_counts(self, table, keys):
        self.calls.append(len(keys))
        return self.inner.group_counts(table, keys)


def _marginals(table, params, selector: str) -> dict:
    """What a run counts, through the current engine: every 1-way marginal over the declared
    domain, then every pair the selection scores over the compressed codes (the compression
    the exact 1-way counts would give; a release compresses its noisy ones) and over the
    declared domains."""
    enc = encode_input(table, params, selector)
    _, steps = plan(params.epsilon, params.delta, len(enc.sizes), selector, params.split)
    marginals = Marginals(enc.codes, enc.sizes)
    one = one_way_counts(marginals)
    compressions = [Compression.of(y, steps["one_way"].scale) for y in one]
    pairs = candidate_pairs(enc.idx, greedy_filter=selector == "greedy")
    return {
        "frame": enc.codes,
        # NumPy's reference: the code matrix of the whole table, which a run never builds
        "codes": encode_table(table, enc.domains, clamp=params.out_of_domain == "clamp")[0],
        "sizes": enc.sizes,
        "compressions": compressions,
        "pairs": pairs,
        "one_way": one,
        "two_way": pair_counts(marginals, pairs, compressions),
        "declared": [marginals.dense(p) for p in pairs],
        "calls": marginals.calls,
    }


def _reference_pair(codes, i, j, maps) -> np.ndarray:
    """NumPy's count of ``(maps[i][codes_i], maps[j][codes_j])``: one ``np.add.at``."""
    a, b = maps[i][codes[:, i]], maps[j][codes[:, j]]
    out = np.zeros((int(maps[i].max()) + 1, int(maps[j].max()) + 1), dtype=np.int64)
    np.add.at(out, (a, b), 1)
    return out.ravel()


def _assert_equal_counts(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.int64
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize(("which", "algorithm", "selector"), CASES)
def test_local_engine_marginals_equal_numpy(which, algorithm, selector, request):
    table, params = _input(which, algorithm, selector, request)
    engine = _Counting(LocalEngine())
    with using(engine):
        got = _marginals(table, params, selector)
    codes, sizes = got["codes"], got["sizes"]
    n = codes.shape[0]
    # one path on every engine: the local run counts a lazily encoded frame of the table
    assert isinstance(got["frame"], TableFrame) and got["frame"].num_rows == n
    _assert_equal_counts(
        got["one_way"], [np.bincount(codes[:, i], minlength=k) for i, k in enumerate(sizes)]
    )
    maps = [c.codes for c in got["compressions"]]
    ident = [np.arange(k) for k in sizes]
    _assert_equal_counts(
        got["two_way"], [_reference_pair(codes, i, j, maps) for i, j in got["pairs"]]
    )
    _assert_equal_counts(
        got["declared"], [_reference_pair(codes, i, j, ident) for i, j in got["pairs"]]
    )
    assert all(int(t.sum()) == n for t in got["one_way"] + got["two_way"])
    # batched: one engine call for the d 1-way marginals, one for all the pairs
    assert engine.calls == [len(sizes), len(got["pairs"])] and got["calls"] == 2
    if which == "adult":  # the compressed case is exercised: some values merged
        assert any(len(c.merged) for c in got["compressions"])


@pytest.mark.parametrize("clamp", [False, True], ids=["refused", "clamped"])
def test_a_frame_in_small_batches_encodes_as_the_whole_table(clamp):
    """``encode_frame`` of a ``TableFrame`` in batches of 37 rows gives the counts of the
    whole table's code matrix (``encode_table``), and a value outside its declared bins the
    same clamped count or the same ``InputError``, word for word."""
    table, params = mst_example(0)
    enc = encode_input(table, params, "mst")
    name = next(n for n, d in enc.domains.items() if d.edges is not None)
    top = enc.domains[name].edges[-1]
    col = table.column(name)
    out = np.arange(len(col)) % 50 == 3  # every 50th row past the last bin edge
    wide = pc.if_else(pa.array(out), pa.scalar(top + 10).cast(col.type), col)
    table = table.set_column(table.schema.get_field_index(name), table.schema.field(name), wide)
    domains = enc.domains
    if not clamp:
        with pytest.raises(InputError) as whole:
            encode_table(table, domains)
        with pytest.raises(InputError) as batched:
            encode_frame(TableFrame(table, batch_rows=37), domains)
        assert str(batched.value) == str(whole.value)
        return
    matrix, clamped = encode_table(table, domains, clamp=True)
    frame, got = encode_frame(TableFrame(table, batch_rows=37), domains, clamp=True)
    assert got == clamped and clamped[name] == int(out.sum())
    marginals = Marginals(frame, enc.sizes)
    d = len(enc.sizes)
    for i, k in enumerate(enc.sizes):
        np.testing.assert_array_equal(marginals.dense((i,)), np.bincount(matrix[:, i], minlength=k))
    ident = [np.arange(k) for k in enc.sizes]
    for i, j in [(0, d - 1), (1, 2)]:
        np.testing.assert_array_equal(marginals.dense((i, j)), _reference_pair(matrix, i, j, ident))


def test_a_release_counts_in_two_engine_calls():
    """A run asks the engine twice for its mechanism: the 1-way marginals, then every scored
    pair (the tree's 2-way marginals are among those already counted); the owner's fidelity
    asks once more, for the pairs the selection did not score (greedy PreFair scores 12 of
    the example's 15)."""
    table, params = prefair_example(0)
    engine = _Counting(LocalEngine())
    with using(engine):
        result = PREFAIR(table, params)
    d = table.num_columns
    assert engine.calls[0] == d and len(engine.calls) == 3
    assert engine.calls[1] < d * (d - 1) // 2 == engine.calls[1] + engine.calls[2]
    assert result.metrics["fair_tree"] is True


@pytest.mark.slow
@pytest.mark.parametrize(
    ("which", "algorithm", "selector"), [CASES[0], CASES[2], CASES[4]], ids=lambda x: str(x)
)
def test_spark_marginals_equal_local(spark_engine, which, algorithm, selector, request):
    table, params = _input(which, algorithm, selector, request)
    with using(LocalEngine()):
        local = _marginals(table, params, selector)
    spark = _Counting(spark_engine)
    with using(spark):
        got = _marginals(table, params, selector)
    assert spark.calls == [len(local["sizes"]), len(local["pairs"])]
    assert got["pairs"] == local["pairs"]
    for key in ("one_way", "two_way", "declared"):
        _assert_equal_counts(got[key], local[key])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1], ids=["greedy", "exponential"])
def test_prefair_release_on_spark_keeps_its_contract(spark_engine, seed):
    table, params = prefair_example(seed)
    spark = _Counting(spark_engine)
    with using(spark):
        result = PREFAIR(table, params)
    # the mechanism's two jobs, and the owner's fidelity's for the pairs no selection scored
    # (exponential PreFair scores every pair: none left)
    assert len(spark.calls) == (3 if seed == 0 else 2)
    frames = resolve(PREFAIR.evidence)(table, result.outputs, result.sidecars, params)
    failed = [r.to_dict() for r in check_contract(result.contract, frames) if not r.passed]
    assert not failed
    assert result.metrics["fair_tree"] is True
    assert result.outputs["data"].schema.names == table.schema.names


def test_mst_release_contract_under_local_engine():
    table, params = mst_example(0)
    with using(LocalEngine()):
        result = MST(table, params)
    frames = resolve(MST.evidence)(table, result.outputs, result.sidecars, params)
    assert all(r.passed for r in check_contract(result.contract, frames))
