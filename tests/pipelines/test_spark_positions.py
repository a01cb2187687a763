"""Each row's input position on the Spark engine (``privfair.io.positions``): a frame read
with ``spark.read.parquet`` given ``with_positions``' column, sorted by it, holds the rows of
the table the local ingest reads from the same file or folder, in that table's order, for a
file Spark splits into several tasks and for a folder of parts (an empty one among them),
under names with a space, a non-ASCII character, a ``%`` and a ``+``; this process reads no
byte of the files meanwhile. A CSV, which Spark's reader does not number, is refused."""

from __future__ import annotations

import builtins
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privfair.components.core import memory
from privfair.components.core.engine import using
from privfair.io.files import read_parquet_folder
from privfair.io.ingest import file_names
from privfair.io.positions import with_positions
from privfair.schemas.errors import DataSourceError, InputError, SpecError

#: A split size small enough that a file of a few row groups is read by several tasks.
SPLIT = 16 * 1024


def _rows(n: int, start: int = 0) -> pa.Table:
    """``n`` rows of several types (nulls in two columns), the ``id`` column ``start ..``."""
    rng = np.random.default_rng(start + n)
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "x": rng.normal(size=n),
            "s": pa.array([None if i % 7 == 0 else f"v{i}é" for i in ids.tolist()], pa.string()),
            "b": pa.array([None if i % 5 == 0 else bool(i % 2) for i in ids.tolist()], pa.bool_()),
        }
    )


@pytest.fixture
def small_splits(spark_engine):
    """The session's Spark reading files in splits of ``SPLIT`` bytes (restored after)."""
    conf = spark_engine.spark.conf
    keys = {"spark.sql.files.maxPartitionBytes": str(SPLIT), "spark.sql.files.openCostInBytes": "0"}
    before = {k: conf.get(k) for k in keys}
    for k, v in keys.items():
        conf.set(k, v)
    yield spark_engine.spark
    for k, v in before.items():
        conf.set(k, v)


@pytest.fixture
def driver_blind(monkeypatch):
    """``blind(root)``: from then on, this process opening a file under ``root`` (Python's
    ``open``, pyarrow's Parquet readers, privfair's memory-mapped reader) fails the test, as
    in ``test_spark_sources``. Spark's JVM and its Python workers are not affected."""
    roots: list[str] = []

    def guard(fn):
        def guarded(source, *a, **kw):
            p = str(getattr(source, "path", source))
            if any(p.startswith(r) for r in roots):
                raise AssertionError(f"the driver read {p}")
            return fn(source, *a, **kw)

        return guarded

    monkeypatch.setattr(builtins, "open", guard(builtins.open))
    for mod, name in [
        (pq, "read_table"),
        (pq, "ParquetFile"),
        (pq, "read_schema"),
        (pa, "memory_map"),
        (pa, "OSFile"),
        (memory, "mapped_parquet"),
    ]:
        monkeypatch.setattr(mod, name, guard(getattr(mod, name)))

    def blind(root: Path) -> None:
        roots.append(str(root.resolve()))

    return blind


def _uri(path: Path) -> str:
    """``path`` as Spark reads it: ``file://`` and the path as it is. Hadoop takes the string
    as a path, without decoding escapes: ``Path.as_uri()``'s ``%20`` for a space (or its
    escapes of a non-ASCII character, a ``%``, a ``+``) would name another file."""
    return "file://" + str(path.resolve())


def _positioned(spark_engine, path: Path) -> tuple[pa.Table, int]:
    """The frame of ``path`` with its positions, sorted by them and collected here (the test's
    check only), and the number of tasks Spark reads it in."""
    with using(spark_engine):
        df = spark_engine.spark.read.parquet(_uri(path))
        got = with_positions(df, path, file_names(path))
        table = got.orderBy("__row").toArrow()
    return table, df.rdd.getNumPartitions()


def _same_rows(got: pa.Table, want: pa.Table) -> None:
    """``got`` is ``want`` row for row, its ``__row`` (int64) each row's index in ``want``."""
    assert got.schema.field("__row").type == pa.int64()
    assert got["__row"].to_pylist() == list(range(want.num_rows))
    assert got.select(want.column_names).to_pylist() == want.to_pylist()


def test_a_file_split_into_several_tasks_is_numbered_as_pyarrow_reads_it(
    spark_engine, small_splits, tmp_path, driver_blind
):
    """One file of 12 row groups under a name with a space, non-ASCII characters, a ``%`` and
    a ``+``, read by Spark in several tasks: sorted by position it is ``read_table``'s table."""
    folder = tmp_path / "in dép"
    folder.mkdir()
    path = folder / "a b é%41+ü.parquet"
    want = _rows(6000)
    pq.write_table(want, path, row_group_size=500)
    assert pq.ParquetFile(path).metadata.num_row_groups == 12
    local = pq.read_table(path)
    driver_blind(folder)
    got, tasks = _positioned(spark_engine, path)
    assert tasks >= 3, tasks  # the premise: the file is split
    _same_rows(got, local)


def test_a_folders_parts_are_numbered_in_part_name_order(
    spark_engine, small_splits, tmp_path, driver_blind
):
    """A folder of 3 parts of 2600, 0 and 900 rows (written in reverse name order, beside a
    writer's ``_SUCCESS``), the big one split: sorted by position it is the table the local
    ingest reads (``read_parquet_folder``: parts in name order, each part's rows in order)."""
    folder = tmp_path / "d é x"
    folder.mkdir()
    sizes = {"part-0 ä.parquet": 2600, "part-1 é.parquet": 0, "part-2%20+.parquet": 900}
    for i, (name, n) in reversed(list(enumerate(sizes.items()))):
        pq.write_table(_rows(n, 10_000 * i), folder / name, row_group_size=300)
    (folder / "_SUCCESS").write_bytes(b"")
    local = read_parquet_folder(folder)
    assert local.num_rows == 3500
    assert list(file_names(folder)) == [f"d é x/{n}" for n in sizes]
    driver_blind(folder)
    got, tasks = _positioned(spark_engine, folder)
    assert tasks >= 3, tasks
    _same_rows(got, local)


def test_a_projection_keeps_the_positions_of_the_read(spark_engine, small_splits, tmp_path):
    """Spark resolves ``_metadata`` through a projection (the ingest's typed select): the
    positions of the projected frame are those of the read, row for row."""
    path = tmp_path / "t.parquet"
    pq.write_table(_rows(2000), path, row_group_size=250)
    with using(spark_engine):
        df = spark_engine.spark.read.parquet(_uri(path)).select("s", "id")
        got = with_positions(df, path, file_names(path)).orderBy("__row").toArrow()
    _same_rows(got, pq.read_table(path).select(["s", "id"]))


def test_a_file_the_listing_does_not_hold_is_refused(spark_engine, tmp_path):
    """A part the executors read that is none of ``names`` (the folder changed after it was
    listed): ``DataSourceError``, no position guessed."""
    folder = tmp_path / "f"
    folder.mkdir()
    for i in range(2):
        pq.write_table(_rows(10, 10 * i), folder / f"part-{i}.parquet")
    names = file_names(folder)
    names.pop("f/part-1.parquet")
    df = spark_engine.spark.read.parquet(_uri(folder))
    with using(spark_engine), pytest.raises(DataSourceError, match="part-1.parquet"):
        with_positions(df, folder, names)


def test_a_column_of_the_positions_name_is_refused(spark_engine, tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"__row": [1, 2]}), path)
    df = spark_engine.spark.read.parquet(_uri(path))
    with pytest.raises(InputError, match="__row"):
        with_positions(df, path, file_names(path))


def test_a_csv_on_the_cluster_has_no_position_and_is_refused(spark_engine, tmp_path):
    """Spark's CSV source gives ``_metadata`` no ``row_index``: the frame ``csv_frame`` reads
    is refused with a ``SpecError`` on ``dataset.path`` naming the file."""
    from privfair.io.files import csv_frame

    path = tmp_path / "t é.csv"
    path.write_text("a,b\n1,x\n2,y\n", encoding="utf-8")
    spark = spark_engine.spark
    raw = spark.read.option("header", True).csv(_uri(path))
    fields = raw.select(raw.metadataColumn("_metadata").alias("m")).schema["m"].dataType
    assert "file_path" in fields.fieldNames() and "row_index" not in fields.fieldNames()
    with using(spark_engine):
        df, _ = csv_frame(spark, _uri(path), path.name)
        with pytest.raises(SpecError) as e:
            with_positions(df, path, file_names(path))
    assert e.value.key == "dataset.path"
    assert "t é.csv is a CSV" in str(e.value) and "Parquet" in str(e.value)
