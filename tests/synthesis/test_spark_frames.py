"""A table whose rows stay on Spark (``privfair.components.core.engine.SparkFrame``), on the
suite's ``local[2]`` session: its counts are the Arrow path's, nulls included; MST's encoding on
the executors gives the codes (and the refusals) of ``domain.encode_table``; a Parquet file
ingested as a frame (``privfair.io.ingest.load_frame``) has the record and schema
``load_dataset`` gives it. The release through a cluster whose executors alone can read the
file is ``tests/pipelines/test_spark_cluster.py``'s."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from privfair.components.core.engine import LocalEngine, RowsOnCluster, SparkFrame, using
from privfair.components.synthesis.domain import declared_domains, encode_table
from privfair.components.synthesis.inputs import synthesis_roles
from privfair.components.synthesis.marginals import Marginals, encode_frame
from privfair.io.ingest import _column_spec, load_dataset, load_frame
from privfair.schemas.errors import InputError
from privfair.schemas.roles import read_roles
from privfair.spec.catalogue import load_spec, parse_spec

SPECS = Path(__file__).resolve().parents[2] / "pipelines" / "specs"


def _sorted(t: pa.Table) -> list[tuple]:
    rows = [tuple(r.values()) for r in t.to_pylist()]
    return sorted(rows, key=lambda r: tuple((v is None, str(v)) for v in r))


def test_a_frames_counts_are_the_arrow_counts_nulls_included(spark_engine):
    t = pa.table(
        {
            "a": pa.array([1, None, 1, 2, None, 2, 2], pa.int64()),
            "s": pa.array(["x", "y", None, "x", None, "y", "x"]),
            "b": pa.array([True, False, None, True, True, None, False]),
        }
    )
    keys = [("a",), ("s",), ("b",), ("a", "s"), ("s", "b"), ("a", "s", "b")]
    frame = SparkFrame(spark_engine.spark.createDataFrame(t), t.schema)
    got = spark_engine.group_counts(frame, keys)
    want = LocalEngine().group_counts(t, keys)
    for k, g, w in zip(keys, got, want, strict=True):
        assert g.schema == w.schema, k
        assert _sorted(g) == _sorted(w), k
    assert frame.num_rows == 7
    assert frame.null_counts() == {"a": 2, "s": 2, "b": 2}
    with pytest.raises(RowsOnCluster):
        frame.column("a")
    with pytest.raises(Exception, match="spark engine"):
        LocalEngine().group_counts(frame, keys)


@pytest.fixture(scope="module")
def adult():
    """1500 Adult rows with adult_mst's roles (workclass, occupation and native-country hold
    nulls, a declared null level) and its params."""
    spec = load_spec(SPECS / "adult_mst.yaml")
    from privfair.run.flow import ingest

    return ingest(spec).table.slice(0, 1500), spec.params


def _frame(spark_engine, table: pa.Table) -> SparkFrame:
    return SparkFrame(
        spark_engine.spark.createDataFrame(table.replace_schema_metadata(None)), table.schema
    )


def test_encoding_on_the_executors_gives_the_codes_of_encode_table(spark_engine, adult):
    table, params = adult
    roles = synthesis_roles(table, fair=False)
    frame = _frame(spark_engine, table)
    domains = declared_domains(frame, roles, params)  # null counts: one aggregate
    assert domains == declared_domains(table, roles, params)
    codes, clamped = encode_table(table, domains)
    with using(spark_engine):
        got, got_clamped = encode_frame(frame, domains)
        sizes = [d.size for d in domains.values()]
        d = len(sizes)
        cliques = [(i,) for i in range(d)] + [(i, j) for i in range(d) for j in range(i + 1, d)]
        on_spark = Marginals(got, sizes)
        on_spark.count(cliques)
    local = Marginals(codes, sizes)
    with using(LocalEngine()):
        local.count(cliques)
    assert got_clamped == clamped == {}
    assert (codes[:, 1] == domains["workclass"].size - 1).any()  # a null level is counted
    for c in cliques:
        assert np.array_equal(on_spark.dense(c), local.dense(c)), c


def test_a_value_outside_the_domain_is_refused_or_clamped_as_locally(spark_engine, adult):
    table, params = adult
    bins = {**params.model_dump(mode="json")["bins"], "age": [30, 40, 50, 60]}
    narrow = type(params).model_validate({**params.model_dump(mode="json"), "bins": bins})
    roles = synthesis_roles(table, fair=False)
    domains = declared_domains(table, roles, narrow)
    frame = _frame(spark_engine, table)
    with pytest.raises(InputError) as local:
        encode_table(table, domains)
    with using(spark_engine), pytest.raises(InputError) as spark:
        encode_frame(frame, domains)
    assert str(spark.value) == str(local.value)
    codes, clamped = encode_table(table, domains, clamp=True)
    with using(spark_engine):
        got, got_clamped = encode_frame(frame, domains, clamp=True)
        m = Marginals(got, [d.size for d in domains.values()])
        age = list(domains).index("age")
        dense = m.dense((age,))
    assert got_clamped == clamped and clamped["age"] > 0
    assert np.array_equal(dense, np.bincount(codes[:, age], minlength=len(dense)))


def test_a_parquet_file_ingested_as_a_frame_has_load_datasets_record(spark_engine, adult, tmp_path):
    table, _ = adult
    path = tmp_path / "adult.parquet"
    pq.write_table(table.replace_schema_metadata(None), path)
    cols = {
        c.name: _column_spec(c).model_dump(mode="json", exclude_none=True)
        for c in read_roles(table)
    }
    raw = yaml.safe_load((SPECS / "adult_mst.yaml").read_text())
    raw["dataset"] = {"path": str(path), "columns": cols, "unlabelled": "keep"}
    ds = parse_spec(raw).dataset
    want, want_record = load_dataset(ds)
    with using(spark_engine):
        frame, record = load_frame(ds, spark_engine.spark)
    assert record == want_record
    assert frame.schema.equals(want.schema, check_metadata=True)
    assert frame.num_rows == want.num_rows == 1500
