"""The execution engines (``privfair.components.core.engine``): a process pool and a real local Spark
session give the same blocks, counts and releases as one process, Spark's workers run this
environment's interpreter, and bad engine settings are named."""

from __future__ import annotations

import re
import socket
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _shared import TOY_COLUMNS, run_cli

from privfair.components.core.engine import LocalEngine, make_engine, worker_python
from privfair.schemas.errors import PrivfairError, SpecError
from privfair.schemas.spec import parse_spec

pytestmark = pytest.mark.slow

SCHEMA = pa.schema([("b", pa.int64()), ("s", pa.float64()), ("n", pa.int64())])


def _sum(t: pa.Table) -> pa.Table:  # module-level: picklable by reference for the pool
    import pyarrow.compute as pc

    return pa.table(
        {
            "b": [t.column("b")[0].as_py()],
            "s": [pc.sum(t.column("x")).as_py()],
            "n": [t.num_rows],
        }
    )


def blocks_table(n: int = 5000, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "b": rng.integers(0, 13, n),
            "x": rng.normal(size=n),
            "c": rng.choice(["u", "v", "w"], n),
            "d": rng.integers(0, 4, n),
        }
    )


def test_local_pool_equals_one_process():
    t = blocks_table()
    one = LocalEngine(1).map_blocks(t, "b", _sum, SCHEMA)
    two = LocalEngine(2).map_blocks(t, "b", _sum, SCHEMA)
    assert one.equals(two)
    assert one.column("b").to_pylist() == list(range(13))


def test_spark_blocks_and_counts_equal_local(spark_engine):
    from privfair.components.core.engine import _example_sum

    t = blocks_table().rename_columns(["b", "x", "c", "d"])
    schema = pa.schema([("b", pa.int64()), ("s", pa.float64())])
    local = LocalEngine(1).map_blocks(t, "b", _example_sum, schema)
    spark = spark_engine.map_blocks(t, "b", _example_sum, schema)
    assert spark.column("b").equals(local.column("b"))
    np.testing.assert_allclose(spark.column("s").to_numpy(), local.column("s").to_numpy())
    # a data null in a key is its own group, never mistaken for a column a set leaves out
    c = t.column("c").to_pylist()
    c[::17] = [None] * len(c[::17])
    t = t.set_column(2, "c", pa.array(c))
    keys = [("c",), ("c", "d"), ("b", "d")]
    for lo, sp in zip(
        LocalEngine().group_counts(t, keys), spark_engine.group_counts(t, keys), strict=True
    ):
        cols = [c for c in lo.column_names if c != "count"]
        assert sp.sort_by([(c, "ascending") for c in cols]).equals(
            lo.sort_by([(c, "ascending") for c in cols])
        )


def test_spark_workers_run_this_interpreter(spark_engine):
    t = pa.table({"b": [0, 1, 1]})
    schema = pa.schema([("b", pa.int64()), ("python", pa.string()), ("pyarrow", pa.string())])
    got = spark_engine.map_blocks(t, "b", worker_python, schema)
    assert set(got.column("python").to_pylist()) == {sys.executable}
    assert set(got.column("pyarrow").to_pylist()) == {pa.__version__}


def _toy_spec(tmp_path: Path, n: int = 3000) -> Path:
    rng = np.random.default_rng(1)
    pa_ = (rng.random(n) < 0.4).astype(int)
    y = np.where(pa_ == 1, rng.random(n) < 0.6, rng.random(n) < 0.3).astype(int)
    pq.write_table(
        pa.table(
            {
                "x": rng.normal(50, 10, n).round(1),
                "c": rng.choice(["a", "b", "c"], n),
                "PA": pa_,
                "y": y,
            }
        ),
        tmp_path / "toy.parquet",
    )
    import yaml

    spec = {
        "name": "toy_blocked",
        "dataset": {"path": "toy.parquet", "columns": TOY_COLUMNS},
        "component": {"name": "fair_mdav", "params": {"k": 5, "block_rows": 700}},
        "execution": {"engine": "local", "workers": 2},
    }
    path = tmp_path / "toy_blocked.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_release_through_spark_is_the_local_release(tmp_path, capsys, spark_engine):
    """``privfair run --engine spark``: the same version and the same published bytes as the
    spec's own local engine, every guarantee re-checked on the merged output."""
    spec = _toy_spec(tmp_path)
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(tmp_path / "local"))
    assert code == 0, err
    held = next(line for line in out.splitlines() if "guarantees:" in line)
    n_held, n_all = held.split()[1].split("/")
    assert n_held == n_all, held
    code, out2, err = run_cli(
        capsys, "run", str(spec), "--store", str(tmp_path / "spark"), "--engine", "spark"
    )
    assert code == 0, err
    assert held in out2
    version = out.split()[2]
    assert out2.split()[2] == version  # the engine is not part of the version
    for f in ("shared/data.parquet", "internal/lineage.parquet"):
        a = pq.read_table(tmp_path / "local" / "toy_blocked" / version / f)
        b = pq.read_table(tmp_path / "spark" / "toy_blocked" / version / f)
        assert a.equals(b), f
    import json

    man = json.loads((tmp_path / "spark" / "toy_blocked" / version / "manifest.json").read_text())
    assert man["execution"]["engine"] == "spark"
    assert man["execution"]["master"] == "local[2]"


def _record_engine_calls(monkeypatch, cls) -> list[tuple[int | None, str]]:
    """(workers, phase) of every ``map_parts`` call on ``cls`` (``map_blocks`` makes one):
    the phase is the release step the call came from, read off the stack."""
    import traceback

    calls: list[tuple[int | None, str]] = []
    inner = cls.map_parts
    steps = ("validate_release", "cost_of_protection", "protect")

    def recording(self, *args, **kwargs):
        names = [f.name for f in traceback.extract_stack()]
        calls.append((self.workers, next((s for s in steps if s in names), "?")))
        return inner(self, *args, **kwargs)

    monkeypatch.setattr(cls, "map_parts", recording)
    return calls


def test_a_run_validates_and_measures_on_the_spec_s_engine(tmp_path, capsys, monkeypatch):
    """The spec's engine serves the whole run, not only the grouping: the by-group guarantees
    are checked on the 2-process pool the spec names, and so is the cost of protection's
    re-run (before, both ran in the driver on one process)."""
    calls = _record_engine_calls(monkeypatch, LocalEngine)
    spec = _toy_spec(tmp_path)
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    assert code == 0, err
    assert {phase for _, phase in calls} == {"protect", "validate_release", "cost_of_protection"}
    assert {workers for workers, _ in calls} == {2}, calls
    code, out, err = run_cli(
        capsys,
        "validate",
        str(tmp_path / "s" / "toy_blocked" / "latest"),
        "--data-dir",
        str(tmp_path),
    )
    assert code == 0, err
    assert calls[-1] == (2, "validate_release")


def test_engine_settings_are_checked():
    with pytest.raises(PrivfairError, match="execution.master"):
        make_engine("local", master="local[2]")
    with pytest.raises(PrivfairError, match="execution.engine"):
        make_engine("dask")
    with pytest.raises(PrivfairError, match="execution.workers"):
        LocalEngine(0)
    with pytest.raises(Exception, match="execution.*master"):
        parse_spec(
            {
                "name": "x",
                "dataset": {"name": "adult"},
                "component": {"name": "mdav", "params": {"k": 5}},
                "execution": {"engine": "local", "master": "local[2]"},
            }
        )


def test_spark_unused_starts_nothing_and_says_so(tmp_path, capsys):
    """An algorithm without a blocked form (or without its block size) sends nothing to Spark:
    no session is started for it, and the run says everything ran in-process."""
    from privfair.components.core.engine import SparkEngine

    engine = SparkEngine("local[3]")
    assert engine._session is None and engine.workers == 3
    engine.close()
    spec = _toy_spec(tmp_path)
    text = spec.read_text().replace("block_rows: 700", "tau: 1.0")
    spec.write_text(text)
    code, out, err = run_cli(
        capsys, "run", str(spec), "--store", str(tmp_path / "s"), "--engine", "spark"
    )
    assert code == 0, err
    assert "warning: the spark engine ran nothing: fair_mdav ran in this process" in out


def test_blocks_sent_to_a_pool_carry_only_their_rows():
    import pickle

    from privfair.components.core.engine import split_by_key

    t = pa.table({"b": np.repeat(np.arange(100), 10_000), "x": np.arange(1_000_000.0)})
    _, block = split_by_key(t, "b")[3]
    assert len(pickle.dumps(block)) > 4_000_000  # the slice drags the whole column along
    _, small = split_by_key(t, "b", compact=True)[3]
    assert small.equals(block) and len(pickle.dumps(small)) < 200_000


def test_blocks_of_a_many_chunk_table_are_the_blocks_of_its_one_chunk_copy():
    """The pool takes each block batch by batch (``engine.BatchTaker``): the same rows, in the
    same order, as Arrow's take on the table made one chunk, for rows in any order."""
    from privfair.components.core.engine import BatchTaker, _compact_blocks

    parts = [blocks_table(3000, seed) for seed in range(4)]
    chunked = pa.concat_tables(parts)
    assert chunked.column("x").num_chunks == 4
    one = chunked.combine_chunks()
    got, want = list(_compact_blocks(chunked, "b")), list(_compact_blocks(one, "b"))
    assert len(got) == len(want) == 13
    assert all(ka == kb and a.equals(b) for (ka, a), (kb, b) in zip(got, want, strict=True))
    rows = pa.array(np.random.default_rng(1).permutation(chunked.num_rows)[:2500])
    assert BatchTaker(chunked).take(rows).equals(one.take(rows))


def test_a_spark_connect_token_is_named_nowhere():
    """A Spark Connect URL's token authenticates the driver; the manifest (which travels with the
    shareable copy), the logs and the error messages name the server without it."""
    from privfair.components.core.engine import SparkEngine

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    url = f"sc://127.0.0.1:{port}/;use_ssl=false;token=tok-s3cr3t"
    with pytest.raises(PrivfairError) as err:
        SparkEngine(url)
    assert "tok-s3cr3t" not in str(err.value) and "token=<hidden>" in str(err.value)
    with pytest.raises(SpecError) as bad:
        SparkEngine("sc://:1/;token=tok-s3cr3t")
    assert "tok-s3cr3t" not in str(bad.value)


def test_a_running_session_is_what_the_manifest_names():
    """A process that already runs a Spark session reuses it (Spark's getOrCreate): the master
    the release records is that session's, not the one asked for, and the run says so."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from privfair.components.core.engine import SparkEngine

    session = SparkSession.getActiveSession()  # another test's, or one of our own
    ours = session is None
    if ours:
        session = SparkSession.builder.master("local[1]").appName("privfair-test").getOrCreate()
    running = session.sparkContext.master
    asked = "local[3]" if running != "local[3]" else "local[2]"
    try:
        engine = SparkEngine(asked)
        with pytest.warns(
            UserWarning, match=rf"'{re.escape(asked)}' asked for.*'{re.escape(running)}'"
        ):
            assert engine.spark is session
        assert engine.describe()["master"] == running
        engine.close()
        assert SparkSession.getActiveSession() is session  # not stopped: not the engine's
    finally:
        if ours:
            session.stop()
