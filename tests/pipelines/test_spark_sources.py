"""Inputs the Spark engine's executors read for the count-based families (MST, PreFair): a
Parquet dataset folder and a CSV ``dataset.path`` give the frame and input record
``load_dataset`` gives for the same files (their sha256 computed on the executors, the types
``read_csv`` infers), and a whole MST release of each on the suite's ``local[2]`` session is
byte for byte the local engine's while this process never reads a byte of the input.

OpenDP's noise takes no seed, so two MST releases never share their noisy bytes; the release
tests replace it with a noise drawn from a generator seeded by the step's number
(``fixed_noise``): each release is then a function of the exact counts it read and the spec,
and two engines' releases are the same bytes exactly when they counted the same table."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from privfair.components.core.engine import using
from privfair.io.identity import identity_of
from privfair.io.ingest import _column_spec, load_dataset, load_frame
from privfair.schemas.errors import InputError
from privfair.schemas.roles import read_roles
from privfair.spec.catalogue import load_spec, parse_spec

REPO = Path(__file__).resolve().parents[2]
SPECS = REPO / "pipelines" / "specs"


@pytest.fixture(scope="module")
def adult() -> pa.Table:
    """1000 Adult rows with adult_mst's roles (three columns hold nulls)."""
    from privfair.run.flow import ingest

    return ingest(load_spec(SPECS / "adult_mst.yaml")).table.slice(0, 1000)


def _columns(table: pa.Table) -> dict:
    return {
        c.name: _column_spec(c).model_dump(mode="json", exclude_none=True)
        for c in read_roles(table)
    }


def _spec_raw(table: pa.Table, path: str, name: str) -> dict:
    raw = yaml.safe_load((SPECS / "adult_mst.yaml").read_text())
    raw.pop("budget")
    raw["name"] = name
    raw["dataset"] = {"path": path, "columns": _columns(table), "unlabelled": "keep"}
    return raw


def _folder(table: pa.Table, folder: Path, cuts=(0, 400, 650, 1000)) -> Path:
    """``table`` as a Parquet dataset folder: a part per slice between ``cuts``, written in
    reverse name order, with the files a writer leaves beside them (skipped by both readers)."""
    folder.mkdir(parents=True)
    plain = table.replace_schema_metadata(None)
    for i in reversed(range(len(cuts) - 1)):
        pq.write_table(
            plain.slice(cuts[i], cuts[i + 1] - cuts[i]), folder / f"part-{i:05d}.parquet"
        )
    (folder / "_SUCCESS").write_bytes(b"")
    (folder / ".staging").write_bytes(b"not a part")
    return folder


# --- a Parquet dataset folder --------------------------------------------------------------------
def test_a_parquet_folder_is_read_locally_by_part_name_then_row(adult, tmp_path):
    """The local ingest of a folder: its parts in name order, each part's rows in order; the
    record's ``files`` holds every part by ``<folder>/<part>`` (a writer's ``_SUCCESS`` and a
    hidden file are not parts) and the fingerprint hashes them."""
    from privfair.io.sources import fingerprint_digests, sha256_file

    folder = _folder(adult, tmp_path / "adult")
    ds = parse_spec(_spec_raw(adult, str(folder), "adult_folder")).dataset
    table, record = load_dataset(ds)
    assert table.select(adult.column_names).to_pylist() == adult.to_pylist()
    parts = sorted(folder.glob("part-*.parquet"))
    want = {f"adult/{p.name}": sha256_file(p) for p in parts}
    assert record["files"] == want and len(want) == 3
    assert record["fingerprint"] == fingerprint_digests(want)
    assert record["dataset"] == "adult" and record["rows"] == 1000


def test_a_parquet_folder_ingested_as_a_frame_has_load_datasets_record(
    spark_engine, adult, tmp_path
):
    """In a folder whose name has a space and a non-ASCII letter: Spark reads a path by its
    spelling, not by a URI's escapes (``files.spark_uri``)."""
    folder = _folder(adult, tmp_path / "adult é x")
    ds = parse_spec(_spec_raw(adult, str(folder), "adult_folder")).dataset
    want, want_record = load_dataset(ds)
    with using(spark_engine):
        frame, record = load_frame(ds, spark_engine.spark)
    assert record == want_record
    assert frame.schema.equals(want.schema, check_metadata=True)
    assert frame.num_rows == want.num_rows == 1000
    assert frame.null_counts() == {n: want[n].null_count for n in want.column_names}


def test_parts_that_disagree_are_refused_alike_by_both_engines(spark_engine, adult, tmp_path):
    """A part whose column has another type: the local ingest and the executors (reading each
    part's footer) refuse it with the same message, naming both parts."""
    folder = _folder(adult, tmp_path / "adult")
    odd = pq.read_table(folder / "part-00001.parquet")
    i = odd.schema.get_field_index("age")
    pq.write_table(
        odd.set_column(i, "age", odd["age"].cast(pa.float64())),
        odd_path := folder / "part-00001.parquet",
    )
    ds = parse_spec(_spec_raw(adult, str(folder), "adult_folder")).dataset
    with pytest.raises(InputError) as local:
        load_dataset(ds)
    with using(spark_engine), pytest.raises(InputError) as spark:
        load_frame(ds, spark_engine.spark)
    assert str(spark.value) == str(local.value)
    assert f"part '{odd_path.name}' has" in str(local.value) and "age: double" in str(local.value)


def test_a_column_spark_reads_in_another_type_is_refused_naming_it(spark_engine, adult, tmp_path):
    """An unsigned integer (Spark widens uint8 to int16): the frame would not hold the table
    pyarrow reads, nor publish its schema; exit 2 naming the column, in a file or a folder."""
    from privfair.schemas.errors import SpecError

    t = adult.append_column("n", pa.array(range(1000), pa.uint16()).cast(pa.uint8(), safe=False))
    folder = _folder(t, tmp_path / "adult")
    for path in (folder, folder / "part-00000.parquet"):
        ds = parse_spec(_spec_raw(adult, str(path), "adult_u8")).dataset
        assert load_dataset(ds)[0].schema.field("n").type == pa.uint8()
        with using(spark_engine), pytest.raises(SpecError) as e:
            load_frame(ds, spark_engine.spark)
        assert e.value.key == "dataset.columns.n" and "(uint8) as int16" in str(e.value)


def test_a_folder_with_subfolders_is_refused(adult, tmp_path):
    folder = _folder(adult, tmp_path / "adult")
    (folder / "year=2024").mkdir()
    ds = parse_spec(_spec_raw(adult, str(folder), "adult_folder")).dataset
    with pytest.raises(InputError, match=r"has subfolders \(year=2024\)"):
        load_dataset(ds)


def test_a_folders_identity_meets_its_parts_and_itself_after_a_rewrite(adult, tmp_path):
    """The ledger's atoms of a folder: the folder's own and every part's; a release of one part
    file alone, or of the folder after its parts were rewritten under other names, meets it."""
    folder = _folder(adult, tmp_path / "adult")
    whole = set(
        identity_of(parse_spec(_spec_raw(adult, "adult", "a")).dataset, base_dir=tmp_path).atoms
    )
    part = folder / "part-00001.parquet"
    alone = identity_of(parse_spec(_spec_raw(adult, str(part), "b")).dataset).atoms
    assert set(alone) <= whole and len(whole) == 4
    for p in folder.glob("part-*.parquet"):
        p.rename(p.with_name("x" + p.name))
    again = identity_of(parse_spec(_spec_raw(adult, "adult", "a")).dataset, base_dir=tmp_path).atoms
    assert set(again) & whole == {f"file:{folder.resolve()}"}


# --- whole releases, the driver reading nothing of the input -------------------------------------
@pytest.fixture
def fixed_noise(monkeypatch):
    """OpenDP's noise replaced by a Gaussian (and Gumbel) noise of the planned scale drawn from
    a generator seeded by the step's number, added to the exact answer the engine counted."""
    from privfair.components.synthesis import accounting as A

    init = A.Compositor.__init__

    def keep(self, records, steps):
        init(self, records, steps)
        self.kept = records

    def gaussian(self, phase, query, fn, scale):
        step = A.Step(phase, "gaussian", scale, 1.0, A.step_rho("gaussian", scale))
        exact = np.asarray(fn(self.kept), dtype=float).ravel()
        out = exact + np.random.default_rng(len(self.ledger)).normal(0.0, scale, exact.size)
        self._record(step, query, step.rho, exact.size)
        return out

    def noisy_max(self, phase, query, fn, scale):
        step = A.Step(phase, "noisy_max", scale, 1.0, A.step_rho("noisy_max", scale))
        exact = np.asarray(fn(self.kept), dtype=float).ravel()
        noisy = exact + np.random.default_rng(len(self.ledger)).gumbel(0.0, scale, exact.size)
        self._record(step, query, step.rho, 1)
        return int(np.argmax(noisy))

    monkeypatch.setattr(A.Compositor, "__init__", keep)
    monkeypatch.setattr(A.Compositor, "gaussian", gaussian)
    monkeypatch.setattr(A.Compositor, "noisy_max", noisy_max)


@pytest.fixture
def driver_blind(monkeypatch):
    """``blind(root)``: from then on, this process opening any file under ``root`` (Python's
    ``open``, pyarrow's Parquet and CSV readers, privfair's memory-mapped reader) fails the
    test. Spark's JVM and its Python workers (other processes) are not affected."""
    import pyarrow.csv as pacsv

    from privfair.components.core import memory

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
        (pacsv, "read_csv"),
        (pacsv, "open_csv"),
        (memory, "mapped_parquet"),
    ]:
        monkeypatch.setattr(mod, name, guard(getattr(mod, name)))

    def blind(root: Path) -> None:
        roots.append(str(root.resolve()))

    return blind


def _release_files(folder: Path) -> dict[str, bytes]:
    """Every file of a release but its manifest (which records the engine), its report and
    its validation folder (Great Expectations' results and data docs record when they ran):
    the published data and the owner's sidecars."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
        and p.name != "manifest.json"
        and "report" not in p.name
        and p.relative_to(folder).parts[0] != "validation"
    }


def _differing(a: dict[str, bytes], b: dict[str, bytes]) -> list[str]:
    """The files that are not the same bytes in both releases (or in one of them only)."""
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def _run(spec: Path, store: Path, spark=None):
    from privfair import api

    release = api.run(spec, store=store, params={"seed": 11}, spark=spark)
    return release, _release_files(Path(release.path))


def test_mst_on_a_parquet_folder_on_the_cluster_is_the_local_release(
    spark_engine, adult, tmp_path, fixed_noise, driver_blind
):
    """The folder released on the local engine, then on Spark with this process unable to open
    any part: the same version, the same input record and every published file the same
    bytes (the ledger's steps, the synthetic data, the sidecars)."""
    data = tmp_path / "data"
    _folder(adult, data / "adult")
    spec = data / "adult_mst_folder.yaml"
    spec.write_text(yaml.safe_dump(_spec_raw(adult, "adult", "adult_mst_folder")))
    local, local_files = _run(spec, tmp_path / "local")
    driver_blind(data / "adult")
    with pytest.raises(AssertionError, match="the driver read"):
        load_dataset(load_spec(spec).dataset, base_dir=data)  # the premise: blind here
    spark, spark_files = _run(spec, tmp_path / "spark", spark=spark_engine.spark)
    assert spark.version == local.version
    lm, sm = (json.loads((Path(r.path) / "manifest.json").read_text()) for r in (local, spark))
    assert sm["execution"]["engine"] == "spark" and lm["execution"]["engine"] == "local"
    assert sm["input"] == lm["input"] and len(lm["input"]["files"]) == 3
    assert sm["validation"]["status"] == lm["validation"]["status"] == "passed"
    assert "shared/data.parquet" in local_files
    assert _differing(spark_files, local_files) == []


def test_mst_does_not_depend_on_its_inputs_row_order(adult, tmp_path, fixed_noise):
    """Why a frame is counted and never ordered: the same rows in another order (one file,
    shuffled) give every published file of the folder's release, byte for byte."""
    data = tmp_path / "data"
    _folder(adult, data / "adult")
    order = np.random.default_rng(3).permutation(adult.num_rows)
    pq.write_table(adult.take(order).replace_schema_metadata(None), data / "shuffled.parquet")
    for path in ("adult", "shuffled.parquet"):
        (data / f"{Path(path).stem}.yaml").write_text(
            yaml.safe_dump(_spec_raw(adult, path, "adult_mst_order"))
        )
    _, folder_files = _run(data / "adult.yaml", tmp_path / "a")
    _, shuffled_files = _run(data / "shuffled.yaml", tmp_path / "b")
    assert "shared/data.parquet" in folder_files
    assert _differing(folder_files, shuffled_files) == []


# --- a CSV file --------------------------------------------------------------------------------
def _spark_csv(spark_engine, path: Path) -> pa.Table:
    """The executors' ``csv_frame`` of ``path``, collected here (the test's check only)."""
    from privfair.io.files import csv_frame

    with using(spark_engine):
        df, schema = csv_frame(spark_engine.spark, path.resolve().as_uri(), path.name)
    got = df.toArrow()
    return pa.Table.from_arrays(got.columns, schema=schema)  # Spark's layouts, the same types


def _csv_both(spark_engine, path: Path) -> tuple[pa.Table, pa.Table]:
    """(``read_csv``'s table, the executors' ``csv_frame``) of ``path``."""
    from privfair.io.files import read_csv

    return read_csv(path), _spark_csv(spark_engine, path)


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_a_csvs_cells_are_typed_on_the_executors_as_read_csv_types_them(spark_engine, tmp_path):
    """Each of pyarrow's inferred types a column can take on the cluster: int64 (a null
    spelling among them), float64 (ints and exponents among them), bool (``0`` and ``1``
    among them), null, and strings (a quoted comma, a doubled quote, a padded ``NA``)."""
    path = _write_csv(
        tmp_path / "t.csv",
        ["i", "f", "b", "n", "s"],
        [
            ["1", "1.5", "true", "", "a, b"],
            ["NA", "2", "0", "NA", 'say "hi"'],
            ["-7", "1e-05", "FALSE", "", " NA"],
            ["007", ".5", "1", "null", "7"],
        ],
    )
    local, got = _csv_both(spark_engine, path)
    assert [str(t) for t in local.schema.types] == ["int64", "double", "bool", "null", "string"]
    assert got.equals(local)


@pytest.mark.parametrize(
    "cell", ["+1", "0x1A", " 7", "inf", "9223372036854775807", "2020-01-01", "12:30"]
)
def test_a_column_the_cluster_cannot_type_surely_is_refused_naming_it(spark_engine, tmp_path, cell):
    """pyarrow reads each of these as a number, a date or a time; the executors do not guess
    its type: exit 2 naming the column and the two ways to release the file."""
    from privfair.schemas.errors import SpecError

    path = _write_csv(tmp_path / "t.csv", ["ok", "odd"], [["a", cell], ["b", "1"]])
    with pytest.raises(SpecError) as e:
        _csv_both(spark_engine, path)
    assert e.value.key == "dataset.columns.odd" and "Parquet" in str(e.value)
    assert "local engine" in str(e.value)


def test_a_quoted_line_break_and_a_ragged_row_are_refused(spark_engine, tmp_path):
    """A quoted line break (which ``read_csv`` reads, and a line-split read would cut) is
    refused; a row wider than the header fails on both paths."""
    from privfair.io.files import read_csv
    from privfair.schemas.errors import SpecError

    broken = _write_csv(tmp_path / "b.csv", ["a", "b"], [["x\ny", "1"]])
    with pytest.raises(SpecError, match="odd number of quote characters"):
        _csv_both(spark_engine, broken)
    ragged = tmp_path / "r.csv"
    ragged.write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(pa.ArrowInvalid, match="Expected 2 columns, got 3"):
        read_csv(ragged)
    with pytest.raises(InputError, match="another number of fields than the header's 2"):
        _spark_csv(spark_engine, ragged)


_LETTERS = "abcxyz"
#: cells on the edges of pyarrow's types: signs, padding, hex, infinities, 19 digits, bools in
#: and out of its spellings, null spellings, dates and times
_TRICKY = [
    *(" 1", "1 ", "+1", "-0", "007", "0x1A", "1.", ".5", "1e5", "1E+05", "1e400", "-"),
    *("inf", "-Infinity", "nan", "NA", " NA", "null", "N/A", "9223372036854775807"),
    *("9223372036854775808", "true", "True", "tRuE", " true", "0", "1", "2020-01-01"),
    *("12:30", "2020-01-01 10:00", "1_000", "abc"),
]


@st.composite
def _csvs(draw, cells=None):
    """A small CSV: 1 to 4 named columns, 1 to 6 rows; each column of ints, floats, strings
    (quoted commas and spaces among them) or a mix, any cell possibly empty; with ``cells``,
    every cell drawn from it instead."""
    ncols = draw(st.integers(1, 4))
    header = draw(
        st.lists(
            st.text(_LETTERS, min_size=1, max_size=3), min_size=ncols, max_size=ncols, unique=True
        )
    )
    ints = st.integers(-(10**12), 10**12).map(str)
    floats = st.floats(-1e6, 1e6, allow_nan=False).map(repr) | st.floats(-1e3, 1e3).map(
        lambda x: f"{x:.3f}"
    )
    words = st.text(_LETTERS + " ,", min_size=1, max_size=6).filter(lambda s: s[0] in _LETTERS)
    kinds = [ints, floats, words, ints | floats, ints | words]
    columns = [cells if cells is not None else draw(st.sampled_from(kinds)) for _ in header]
    nrows = draw(st.integers(1, 6))
    rows = [[draw(c | st.just("")) for c in columns] for _ in range(nrows)]
    return header, rows


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(csv=_csvs())
def test_random_small_csvs_are_the_same_table_on_both_paths(spark_engine, tmp_path_factory, csv):
    from privfair.io.files import read_csv

    path = _write_csv(tmp_path_factory.mktemp("csv") / "t.csv", *csv)
    try:
        local = read_csv(path)
    except pa.ArrowInvalid:
        return  # a row that is empty in every column: a line pyarrow skips (as Spark does)
    _, got = _csv_both(spark_engine, path)
    assert got.equals(local), (got.to_pydict(), local.to_pydict())


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    csv=_csvs(cells=st.sampled_from(_TRICKY) | st.text("0123456789+-.eE: xTtrufalsNA", max_size=5))
)
@example(csv=(["a"], [[" "]]))  # a line of blanks: Spark's reader skips it, read_csv reads it
def test_any_cells_give_the_same_table_or_a_refusal_never_another(
    spark_engine, tmp_path_factory, csv
):
    """Cells of numbers' and dates' characters: the cluster's table is ``read_csv``'s, or the
    read is refused (``SpecError``) naming a column; never another table."""
    from privfair.io.files import read_csv
    from privfair.schemas.errors import SpecError

    path = _write_csv(tmp_path_factory.mktemp("csv") / "t.csv", *csv)
    try:
        local = read_csv(path)
    except pa.ArrowInvalid:
        return
    try:
        _, got = _csv_both(spark_engine, path)
    except SpecError as e:  # a column's type, or a line Spark's reader would skip
        assert e.key.startswith("dataset.columns.") or e.key == "dataset.path", e
        return
    assert got.equals(local), (got.to_pydict(), local.to_pydict())


def _adult_csv(adult: pa.Table, path: Path) -> Path:
    """``adult`` as a CSV (nulls as empty cells), as pyarrow writes it."""
    import pyarrow.csv as pacsv

    path.parent.mkdir(parents=True, exist_ok=True)
    pacsv.write_csv(adult.replace_schema_metadata(None), path)
    return path


def test_a_csv_ingested_as_a_frame_has_load_datasets_record(spark_engine, adult, tmp_path):
    """Adult's rows as a CSV: the frame on the executors has ``load_dataset``'s record (the
    file's sha256 computed there), schema (read_csv's types, the spec's roles) and counts."""
    path = _adult_csv(adult, tmp_path / "adult.csv")
    ds = parse_spec(_spec_raw(adult, str(path), "adult_csv")).dataset
    want, want_record = load_dataset(ds)
    with using(spark_engine):
        frame, record = load_frame(ds, spark_engine.spark)
    assert record == want_record and record["files"].keys() == {"adult.csv"}
    assert frame.schema.equals(want.schema, check_metadata=True)
    assert frame.num_rows == want.num_rows == 1000
    assert frame.null_counts() == {n: want[n].null_count for n in want.column_names}
    assert sum(frame.null_counts().values()) > 0  # the empty cells are nulls on both


def test_a_csv_that_is_not_utf8_is_refused_on_the_cluster_as_locally(spark_engine, adult, tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"age\n3\n\xe9\n")
    raw = _spec_raw(adult, str(path), "t")
    raw["dataset"]["columns"] = {"age": {"role": "quasi_identifier", "kind": "nominal"}}
    ds = parse_spec(raw).dataset
    with pytest.raises(InputError, match="t.csv is not UTF-8 text") as local:
        load_dataset(ds)
    with using(spark_engine), pytest.raises(InputError) as spark:
        load_frame(ds, spark_engine.spark)
    assert spark.value.rule == local.value.rule


def test_mst_on_a_csv_on_the_cluster_is_the_local_release(
    spark_engine, adult, tmp_path, fixed_noise, driver_blind
):
    """The CSV released on the local engine, then on Spark with this process unable to open
    it: the same version and input record, every published file the same bytes."""
    data = tmp_path / "data"
    _adult_csv(adult, data / "in" / "adult.csv")
    spec = data / "adult_mst_csv.yaml"
    spec.write_text(yaml.safe_dump(_spec_raw(adult, "in/adult.csv", "adult_mst_csv")))
    local, local_files = _run(spec, tmp_path / "local")
    driver_blind(data / "in")
    with pytest.raises(AssertionError, match="the driver read"):
        load_dataset(load_spec(spec).dataset, base_dir=data)  # the premise: blind here
    spark, spark_files = _run(spec, tmp_path / "spark", spark=spark_engine.spark)
    assert spark.version == local.version
    lm, sm = (json.loads((Path(r.path) / "manifest.json").read_text()) for r in (local, spark))
    assert sm["execution"]["engine"] == "spark" and lm["execution"]["engine"] == "local"
    assert sm["input"] == lm["input"]
    assert sm["validation"]["status"] == lm["validation"]["status"] == "passed"
    assert "shared/data.parquet" in local_files
    assert _differing(spark_files, local_files) == []


def test_a_csvs_delimiter_and_quote_are_the_executors_too(spark_engine, adult, tmp_path):
    """``dataset.csv: {delimiter: ';', quote: "'"}``: the executors split and unquote the
    cells as pyarrow does (a quoted delimiter, a doubled quote)."""
    path = tmp_path / "t.csv"
    path.write_text("k;s;x\na;'p;q';1.5\nb;'it''s';\nc;plain;2\n")
    raw = _spec_raw(adult, str(path), "t")
    raw["dataset"]["columns"] = {"k": {"role": "sensitive", "kind": "nominal"}}
    raw["dataset"]["csv"] = {"delimiter": ";", "quote": "'"}
    ds = parse_spec(raw).dataset
    want, want_record = load_dataset(ds)
    with using(spark_engine):
        frame, record = load_frame(ds, spark_engine.spark)
    assert record == want_record
    assert frame.schema.equals(want.schema, check_metadata=True)
    assert want["s"].to_pylist() == ["p;q", "it's", "plain"]
    got = frame.df.toArrow()  # the test's check only: three rows
    assert got["s"].to_pylist() == want["s"].to_pylist()
    assert got["x"].to_pylist() == want["x"].to_pylist() == [1.5, None, 2.0]
