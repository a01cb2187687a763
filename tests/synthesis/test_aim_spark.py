"""AIM with its input left on the Spark cluster (issue 46), on the suite's ``local[2]`` session:
the exact candidate marginals its private selection scores, counted from a ``SparkFrame`` of
the codes, are the Arrow path's, all in one engine call; an AIM release run on a frame reads
the records through that one call alone (its measurements, its scores, the owner's fidelity)
and keeps its contract; and a release of ``adult_aim`` (scaled down with ``--set``) of a
Parquet file on the Spark engine publishes the local engine's version and shared files, byte
for byte, while this process never reads the file.

OpenDP's noise takes no seed, so two releases never share their noisy bytes; to compare the
two engines' releases whole, both draw their noise from one seeded stand-in for OpenDP's
Gaussian and noisy-max samplers (the same privacy maps, so the same ledger and filter): given
the same exact counts in the same order, they then publish the same bytes."""

from __future__ import annotations

import builtins
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from privfair.components.core.checks import check_contract
from privfair.components.core.engine import Engine, LocalEngine, SparkFrame, using
from privfair.components.synthesis import AIM
from privfair.components.synthesis.aim import aim, candidate_marginals, initial_scales
from privfair.components.synthesis.audit import aim_evidence
from privfair.components.synthesis.compression import Compression
from privfair.components.synthesis.domain import encode_table
from privfair.components.synthesis.marginals import Marginals
from privfair.components.synthesis.synthesize import encode_input, one_way_counts

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "pipelines" / "specs" / "adult_aim.yaml"
#: test_aim.py's scaled-down settings (epsilon 8: at a few thousand rows and epsilon 1 the
#: 1-way noise swamps most cells)
SCALED = {"epsilon": 8.0, "rounds": 40, "round_iters": 40, "iters": 300, "seed": 1}


class _Counting(Engine):
    """An engine that records the number of key sets of every ``group_counts`` call."""

    def __init__(self, inner: Engine):
        self.inner = inner
        self.name, self.workers = inner.name, inner.workers
        self.calls: list[int] = []

    def group_counts(self, table, keys):
        self.calls.append(len(keys))
        return self.inner.group_counts(table, keys)


@pytest.fixture(scope="module")
def sample():
    """2,000 Adult rows (a seeded sample) with adult_aim's roles and its params, scaled down."""
    from privfair.run.flow import ingest
    from privfair.spec.catalogue import load_spec

    spec = load_spec(SPEC)
    table = ingest(spec).table
    rows = np.sort(np.random.default_rng(46).choice(table.num_rows, 2000, replace=False))
    return table.take(rows), spec.params.model_copy(update=SCALED)


def _frame(spark_engine, table: pa.Table) -> SparkFrame:
    return SparkFrame(
        spark_engine.spark.createDataFrame(table.replace_schema_metadata(None)), table.schema
    )


def test_candidate_marginals_from_a_frame_are_the_arrow_paths(spark_engine, sample):
    """Every pair's exact 2-way table over the compressed codes, counted on the executors from
    the frame of the codes, is the one counted from the code matrix here (and NumPy's own
    count of it), and all pairs take one engine call."""
    table, params = sample
    local = encode_input(table, params, "mst")
    d = len(local.sizes)
    sigma, _ = initial_scales(8.0, 16 * d, params.select_share)
    # the compression exact 1-way counts would give (a release compresses its noisy ones)
    compressions = [
        Compression.of(y, sigma) for y in one_way_counts(Marginals(local.codes, local.sizes))
    ]
    assert any(len(c.merged) for c in compressions)  # merged values are summed
    pairs = [(i, j) for i in range(d) for j in range(i + 1, d)]
    with using(LocalEngine()):
        want = candidate_marginals(Marginals(local.codes, local.sizes), pairs, compressions)
    spark = _Counting(spark_engine)
    with using(spark):
        on_cluster = encode_input(_frame(spark_engine, table), params, "mst")
        assert isinstance(on_cluster.codes, SparkFrame)
        got = candidate_marginals(
            Marginals(on_cluster.codes, on_cluster.sizes), pairs, compressions
        )
    assert spark.calls == [len(pairs)]
    assert list(got) == list(want) == pairs
    maps = [c.codes for c in compressions]
    # NumPy's reference: the whole table's code matrix, which a run never builds
    matrix = encode_table(table, local.domains, clamp=params.out_of_domain == "clamp")[0]
    for (i, j), w in want.items():
        g = got[(i, j)]
        assert g.dtype == np.int64 and g.sum() == table.num_rows
        np.testing.assert_array_equal(g, w)
        ref = np.zeros((compressions[i].size, compressions[j].size), dtype=np.int64)
        np.add.at(ref, (maps[i][matrix[:, i]], maps[j][matrix[:, j]]), 1)
        np.testing.assert_array_equal(g, ref.ravel())


def test_an_aim_release_on_a_frame_counts_once_and_keeps_its_contract(spark_engine, sample):
    """AIM run on a ``SparkFrame``: one engine call counts every clique it reads (the d 1-way
    marginals and every pair), the owner's fidelity reads those same counts, its measurements
    have the local release's shape, and its contract holds on evidence rebuilt from the
    frame."""
    table, params = sample
    params = params.model_copy(update={"rounds": 20, "round_iters": 20, "iters": 100})
    frame = _frame(spark_engine, table)
    spark = _Counting(spark_engine)
    with using(spark):
        result = aim(frame, params)
        frames = aim_evidence(frame, result.outputs, result.sidecars, params)
    d = table.num_columns
    assert spark.calls == [d + d * (d - 1) // 2]
    failed = [r.to_dict() for r in check_contract(result.contract, frames) if not r.passed]
    assert not failed
    m = result.metrics
    assert m["fairness"]["input"] is None and m["owner_notes"]
    assert 0 <= m["fidelity"]["two_way_tvd"] <= 1 and len(m["fidelity"]["one_way"]) == d
    assert m["rounds"]["run"] >= 1 and result.outputs["data"].schema.names == table.column_names
    assert AIM.counts_input


# --- a release of a Parquet file: the cluster's is the local engine's, byte for byte ----------
def _seeded_noise(monkeypatch, seed: int) -> None:
    """OpenDP's Gaussian and noisy-max measurements, their privacy maps kept (so the filter
    and the ledger charge what they charge), their noise drawn from a seeded generator."""
    import opendp.measurements as dpm

    rng = np.random.default_rng(seed)
    real_gaussian, real_max = dpm.make_gaussian, dpm.make_noisy_max

    def then_gaussian(scale, k=None, MO="ZeroConcentratedDivergence"):
        def make(domain, metric):
            real = real_gaussian(domain, metric, scale=scale)
            return dpm.make_user_measurement(
                domain,
                metric,
                real.output_measure,
                lambda x: (np.asarray(x, float) + rng.normal(0.0, scale, len(x))).tolist(),
                real.map,
            )

        return dpm._PartialConstructor(make)

    def then_noisy_max(output_measure, scale, negate=False):
        def make(domain, metric):
            real = real_max(domain, metric, output_measure, scale=scale, negate=negate)
            return dpm.make_user_measurement(
                domain,
                metric,
                real.output_measure,
                lambda x: int(np.argmax(np.asarray(x, float) + rng.gumbel(0.0, scale, len(x)))),
                real.map,
            )

        return dpm._PartialConstructor(make)

    monkeypatch.setattr(dpm, "then_gaussian", then_gaussian)
    monkeypatch.setattr(dpm, "then_noisy_max", then_noisy_max)


class _DriverRead(AssertionError):
    """The driver opened the input file."""


def _refuse_reading(monkeypatch, path: Path) -> None:
    """Every way this process reads a Parquet file (Python's ``open``, pyarrow's readers,
    ``load_dataset``) fails for ``path``."""
    import privfair.io.ingest as ingest
    import privfair.run.flow as flow

    target = path.resolve()

    def guard(fn, where):
        def wrapped(source, *a, **k):
            if isinstance(source, str | Path) and Path(source).resolve() == target:
                raise _DriverRead(f"{where} read {target} in the driver")
            return fn(source, *a, **k)

        return wrapped

    for name in ("read_table", "ParquetFile", "read_schema", "read_metadata"):
        monkeypatch.setattr(pq, name, guard(getattr(pq, name), f"pyarrow.parquet.{name}"))
    monkeypatch.setattr(builtins, "open", guard(builtins.open, "open"))
    real_load = ingest.load_dataset

    def load_dataset(ds, *a, **k):
        if ds.path is not None and Path(ds.path).name == target.name:
            raise _DriverRead(f"load_dataset read {target} in the driver")
        return real_load(ds, *a, **k)

    monkeypatch.setattr(ingest, "load_dataset", load_dataset)
    if hasattr(flow, "load_dataset"):
        monkeypatch.setattr(flow, "load_dataset", load_dataset)


@pytest.fixture(scope="module")
def parquet_spec(sample, tmp_path_factory):
    """adult_aim's spec on the sample written as a Parquet ``dataset.path`` (its roles in
    ``dataset.columns``; no dataset budget, so the two releases of one test fit)."""
    from privfair.io.ingest import _column_spec
    from privfair.schemas.roles import read_roles

    table, _ = sample
    root = tmp_path_factory.mktemp("aim-parquet")
    pq.write_table(table.replace_schema_metadata(None), root / "adult.parquet")
    raw = yaml.safe_load(SPEC.read_text())
    raw.pop("budget")
    cols = {
        c.name: _column_spec(c).model_dump(mode="json", exclude_none=True)
        for c in read_roles(table)
    }
    raw["dataset"] = {"path": "adult.parquet", "columns": cols, "unlabelled": "keep"}
    spec = root / "adult_aim.yaml"
    spec.write_text(yaml.safe_dump(raw))
    return spec, root / "adult.parquet"


def _shared(folder: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted((folder / "shared").iterdir())}


def test_an_aim_release_on_spark_is_the_local_release_and_never_read_here(
    spark_engine, parquet_spec, tmp_path, capsys, monkeypatch
):
    """``privfair run adult_aim.yaml --set ...`` on the local engine, then the same spec on the
    Spark engine (the suite's session): the same version and the same shared files (data,
    manifest, report), byte for byte, and every exact count the same. The Spark release runs
    with every read of the input file in this process refused: it succeeding proves the
    executors alone read it (the same refusal stops the local release at once)."""
    import json

    from _shared import run_cli

    from privfair import api

    spec, data = parquet_spec
    sets = [a for k, v in SCALED.items() for a in ("--set", f"{k}={v}")]
    with monkeypatch.context() as m:  # the guard catches this process reading the file
        _refuse_reading(m, data)
        code, _, err = run_cli(capsys, "run", str(spec), *sets, "--store", str(tmp_path / "r"))
    assert code != 0 and f"read {data.resolve()} in the driver" in err, err
    counted: dict[str, dict] = {}
    count = Marginals.count

    def recorded(self, cliques):
        count(self, cliques)
        # (codes..., count) of every cell present, sorted: the engines order rows differently
        counted[type(self.table).__name__] = {
            c: sorted(zip(*(v.tolist() for v in s.cells), s.count.tolist(), strict=True))
            for c, s in self._sparse.items()
        }

    monkeypatch.setattr(Marginals, "count", recorded)
    with monkeypatch.context() as m:
        _seeded_noise(m, 46)
        code, out, err = run_cli(capsys, "run", str(spec), *sets, "--store", str(tmp_path / "l"))
    assert code == 0, err
    version = out.split()[2]
    # the two stores share one key: a release's public id is keyed by its store's
    # (``release.store.store_secret``), and with one key it is the release's alone
    key = tmp_path / "s" / ".privfair"
    key.mkdir(parents=True, mode=0o700)
    shutil.copy2(tmp_path / "l" / ".privfair" / "secret", key / "secret")
    with monkeypatch.context() as m:
        _seeded_noise(m, 46)
        _refuse_reading(m, data)
        release = api.run(spec, store=tmp_path / "s", params=SCALED, spark=spark_engine.spark)
    assert release.version == version
    local = tmp_path / "l" / "adult_aim" / version
    assert _shared(Path(release.path)) == _shared(local)
    assert set(_shared(local)) == {"data.parquet", "manifest.json", "report.html"}
    man = json.loads((Path(release.path) / "manifest.json").read_text())
    assert man["execution"]["engine"] == "spark"
    assert man["metrics"]["fairness"]["input"] is None  # the rows were never here
    # the owner's fidelity, from the counts on the cluster, is the local one from the codes
    want = json.loads((local / "manifest.json").read_text())["metrics"]["fidelity"]
    got = man["metrics"]["fidelity"]
    assert got["one_way"] == want["one_way"] and got["two_way"] == want["two_way"]
    for k in ("one_way_tvd", "two_way_tvd", "acd"):
        assert got[k] == pytest.approx(want[k], rel=1e-12)
    assert man["validation"]["status"] == "passed"
    d = len(man["metrics"]["fidelity"]["one_way"])
    assert counted["SparkFrame"] == counted["TableFrame"]
    assert len(counted["TableFrame"]) == d * (d + 1) // 2
