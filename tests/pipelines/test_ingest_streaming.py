"""Ingest streams a large file into a memory map instead of decoding it whole
(``memory.mapped_batches``, ``memory.mapped_parquet``), and the table it reads is the one
``read_csv`` / ``read_table`` read: the same values and the same types, a column widened over
the whole file included. The threshold is set to one row here, so small files take the path a
10M-row file takes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from privfair.components.core import memory
from privfair.io.ingest import load_dataset, read_csv, table_fingerprint
from privfair.schemas.errors import InputError
from privfair.schemas.spec import DatasetSpec

CONVERT = pacsv.ConvertOptions(strings_can_be_null=True)


@pytest.fixture
def every_table_mapped(monkeypatch):
    monkeypatch.setattr(memory, "RELEASE_ROWS", 1)


def _csv(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def _spec(file: Path) -> DatasetSpec:
    return DatasetSpec.model_validate(
        {
            "path": str(file),
            "columns": {"x": {"role": "quasi_identifier", "kind": "numeric"}},
            "unlabelled": "keep",
        }
    )


def test_a_streamed_csv_is_the_table_read_csv_reads(tmp_path, every_table_mapped):
    """Integers, floats, strings with empty cells, booleans and timestamps, over several of the
    reader's blocks: equal to ``read_csv``'s table, and held in a map."""
    rows = [
        f"{i},{i / 7:.4f},{'' if i % 11 == 0 else chr(97 + i % 5)},{'true' if i % 2 else 'false'},"
        f"2024-01-{1 + i % 28:02d}T00:00:00"
        for i in range(120_000)
    ]
    path = _csv(tmp_path / "t.csv", ["x,f,s,b,ts", *rows])
    got = read_csv(path)
    expected = pacsv.read_csv(path, convert_options=CONVERT)
    assert got.num_rows == 120_000 and got.column("x").num_chunks > 1
    assert got.equals(expected)
    assert memory._in_maps(got)


def test_a_column_widened_further_down_is_read_as_read_csv_widens_it(tmp_path, every_table_mapped):
    """The streaming reader types a column from the first block; an integer column with a
    decimal 2 MB further down is a float column for ``read_csv``, and for ingest."""
    path = _csv(tmp_path / "t.csv", ["x,s", *(f"{i},a" for i in range(300_000)), "1.5,"])
    got = read_csv(path)
    assert got.schema.field("x").type == pa.float64()
    assert got.equals(pacsv.read_csv(path, convert_options=CONVERT))


def test_a_malformed_csv_is_still_refused_naming_the_file(tmp_path, every_table_mapped):
    path = _csv(tmp_path / "bad.csv", ["x,s", *(f"{i},a" for i in range(300_000)), "1,a,extra"])
    with pytest.raises(InputError, match=r"bad\.csv.*csv"):
        load_dataset(_spec(path))
    assert not list(Path(memory.tempfile.gettempdir()).glob("privfair-*.arrow"))


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_ingest_holds_a_large_file_in_a_map(fmt, tmp_path, every_table_mapped):
    """``load_dataset`` of a file returns its rows in a map (the run keeps them there,
    ``memory.mapped`` does not write them again), equal to the file read whole."""
    t = pa.table({"x": [float(i % 97) for i in range(5_000)], "s": ["a", None] * 2_500})
    if fmt == "csv":
        path = tmp_path / "t.csv"
        pacsv.write_csv(t, path)
    else:
        path = tmp_path / "t.parquet"
        pq.write_table(t, path, row_group_size=1_000)
    table, record = load_dataset(_spec(path))
    assert memory._in_maps(table)
    assert table.num_rows == record["rows"] == 5_000
    assert table.column("x").to_pylist() == t.column("x").to_pylist()
    assert table.column("s").to_pylist() == t.column("s").to_pylist()


def test_batches_below_the_threshold_stay_in_memory_and_a_full_folder_reads_again(
    monkeypatch, tmp_path
):
    schema = pa.schema([("x", pa.int64())])

    def stream(n: int):
        return (
            pa.record_batch([pa.array(range(i, i + 10))], schema=schema) for i in range(0, n, 10)
        )

    small = memory.mapped_batches(schema, stream(30), lambda: pytest.fail("read again"), 31)
    assert small.num_rows == 30 and not memory._in_maps(small)
    large = memory.mapped_batches(schema, stream(100), lambda: pytest.fail("read again"), 25)
    assert large.column("x").to_pylist() == list(range(100)) and memory._in_maps(large)
    monkeypatch.setattr(memory.tempfile, "tempdir", str(tmp_path / "missing"))
    again = pa.Table.from_batches(list(stream(100)), schema)
    assert memory.mapped_batches(schema, stream(100), lambda: again, 25) is again


def test_a_fingerprint_does_not_depend_on_how_the_rows_are_cut(monkeypatch):
    """The same rows in one chunk, in chunks cut elsewhere, or as the zero-offset slice of a
    longer array (whose buffers the IPC writer pads otherwise) have one fingerprint; other
    rows have another."""
    monkeypatch.setattr(memory, "CHUNK_ROWS", 64)
    longer = pa.table({"x": list(range(500)), "s": ["ab", "c", None, "d"] * 125})
    rows = longer.slice(0, 300)
    fresh = pa.table({"x": list(range(300)), "s": (["ab", "c", None, "d"] * 75)})
    cut = pa.Table.from_batches(fresh.to_batches(max_chunksize=37))
    assert table_fingerprint(rows) == table_fingerprint(fresh) == table_fingerprint(cut)
    assert table_fingerprint(longer.slice(1, 300)) != table_fingerprint(fresh)


def test_a_source_is_reordered_into_a_map_a_piece_at_a_time(monkeypatch, every_table_mapped):
    """A database or lakehouse table's rows are taken in the order of their values,
    ``CHUNK_ROWS`` at a time into a map: the same table as one ``take``."""
    from privfair.components.core.order import published_order
    from privfair.io.connectors import _in_value_order

    monkeypatch.setattr(memory, "CHUNK_ROWS", 100)
    t = pa.table({"x": [(i * 37) % 101 for i in range(1_000)], "s": ["b", "a", None, "c"] * 250})
    got = _in_value_order(t)
    assert got.equals(t.take(published_order(t))) and memory._in_maps(got)
    assert _in_value_order(got) is got  # in order already


def test_a_table_up_to_one_chunk_keeps_the_fingerprint_it_had():
    """Up to ``CHUNK_ROWS`` rows the stream is the one it was before ingest streamed (the whole
    table combined, one batch): the versions of releases of such sources do not move."""
    import hashlib

    t = pa.Table.from_batches(
        pa.table({"x": [1.5, None, 3.0] * 700, "s": ["a", None, "bc"] * 700}).to_batches(100)
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t.combine_chunks())
    assert table_fingerprint(t) == hashlib.sha256(sink.getvalue()).hexdigest()
