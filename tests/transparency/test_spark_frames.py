"""ATR on a table whose rows stay on Spark (issue 46: "ATR counts cells likewise"), on the
suite's ``local[2]`` session.

- The cells of ``pipelines/specs/adult_atr.yaml``'s input (the label deciding: a model is fitted
  on rows; workclass, which holds nulls, a public attribute too) counted from a ``SparkFrame``
  on the executors are the Arrow path's, bit for bit, nulls included, and so is the whole run;
  a float key's two zeros, fractional weights and pre-aggregated cells too; every bad input is
  refused with the Arrow path's error; ``decisions: model`` is refused naming its key.
- A release of a Parquet (or UTF-8 CSV) file with ``--engine spark`` (the caller's session) publishes the
  local release's version and byte-identical published files, while the driver reads no byte
  of the input (pyarrow's and Python's readers refuse the file; the local release, under the
  same guard, fails) and collects nothing from Spark but counts (no result of more than a few
  dozen rows, the input has thousands).
- The attacker of ``test_attack_true_rules.py`` gets nothing back from the cluster's shareable
  copy.
"""

from __future__ import annotations

import builtins
import io
import json
import shutil
import types
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from privfair.components.core import memory
from privfair.components.core.engine import LocalEngine, SparkEngine, SparkFrame, using
from privfair.components.transparency.atr import atr
from privfair.components.transparency.cells import build_cells
from privfair.components.transparency.examples import golden_cells
from privfair.components.transparency.params import ATRParams
from privfair.io.ingest import _column_spec
from privfair.schemas.errors import InputError, SpecError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles, read_roles
from privfair.spec.settings import DEFAULT_SPECS_DIR
from tests.transparency._reports import shipped_report
from tests.transparency.test_attack_true_rules import attack, public_view

OUTPUTS = ("decision_rules", "fairness", "privacy_summary")


def _frame(spark_engine, table: pa.Table) -> SparkFrame:
    """``table``'s rows on the cluster, privfair's schema (its roles) beside them."""
    df = spark_engine.spark.createDataFrame(table.replace_schema_metadata(None))
    return SparkFrame(df, table.schema)


@pytest.fixture(scope="module")
def adult(builtin_table) -> tuple[pa.Table, ATRParams]:
    """adult_atr.yaml's input and params, the label deciding, workclass (nulls) public."""
    table, params = shipped_report(builtin_table, "adult_atr")
    roles = read_roles(table).replace(ColumnRole("workclass", Role.PUBLIC, Kind.NOMINAL))
    table = attach_roles(table, roles).select(["sex", "workclass", "education-num", "income"])
    assert table.column("workclass").null_count > 0
    return table, params.model_copy(update={"decisions": "label"})


def _ipc(table: pa.Table) -> bytes:
    """``table``'s bytes (schema, metadata, values: -0.0 is not 0.0 here, as in a file)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _same_run(got, want) -> None:
    for key, t in {**want.outputs, **want.sidecars}.items():
        assert _ipc({**got.outputs, **got.sidecars}[key]) == _ipc(t), key
    assert got.metrics == want.metrics and got.warnings == want.warnings


class _Counted:
    """Records what each ``SparkEngine.group_counts`` call was given."""

    def __init__(self, monkeypatch) -> None:
        self.given: list[type] = []
        inner = SparkEngine.group_counts

        def group_counts(engine, table, keys):
            self.given.append(type(table))
            return inner(engine, table, keys)

        monkeypatch.setattr(SparkEngine, "group_counts", group_counts)


# --- the cells ----------------------------------------------------------------------------------


def test_cells_counted_on_the_executors_are_the_arrow_paths_nulls_included(
    spark_engine, adult, monkeypatch
):
    table, params = adult
    with using(LocalEngine()):
        want = build_cells(table, params)
        local = atr(table, params)
    counted = _Counted(monkeypatch)
    frame = _frame(spark_engine, table)
    with using(spark_engine):
        got = build_cells(frame, params)
        run = atr(frame, params)
    assert counted.given == [SparkFrame, SparkFrame]  # counted where the rows are
    assert got.keys.equals(want.keys)
    assert "<missing>" in got.keys.column("workclass").to_pylist()  # the nulls' cells
    for name in ("population", "d1", "group"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    _same_run(run, local)
    assert run.metrics["records"] == table.num_rows


def _set(table: pa.Table, name: str, values) -> pa.Table:
    i = table.schema.get_field_index(name)
    return table.set_column(i, table.schema.field(name), pa.array(values, table.schema[i].type))


def _zeros() -> tuple[pa.Table, ATRParams]:
    """A float public attribute holding 0.0 and -0.0 (one value: Spark's group-by merges the
    two zeros, Arrow's keeps them apart), a null, fractional weights and a weight -0.0."""
    roles = TableRoles.of(
        [
            ColumnRole("score", Role.PUBLIC, Kind.NOMINAL),
            ColumnRole("band", Role.SENSITIVE, Kind.NOMINAL),
            ColumnRole("ok", Role.LABEL, Kind.BINARY, positive=True),
            ColumnRole("w", Role.ADMISSIBLE, Kind.NUMERIC),
        ]
    )
    rng = np.random.default_rng(5)
    n = 400
    score = rng.choice(np.array([0.0, -0.0, 1.5, np.nan]), n)
    score[0] = -0.0  # the first zero Arrow meets, the one its group-by would name the cell by
    data = pa.table(
        {
            "score": pa.array(score, pa.float64(), mask=np.isnan(score)),
            "band": rng.choice(["a", "b", "c"], n).tolist(),
            "ok": rng.random(n) < 0.4,
            "w": np.where(rng.random(n) < 0.05, -0.0, rng.random(n) * 3),
        }
    )
    return attach_roles(data, roles), ATRParams(delta=0.8, include_population=True)


def test_zero_signs_and_fractional_weights_count_as_on_arrow(spark_engine):
    table, params = _zeros()
    with using(LocalEngine()):
        local = atr(table, params)
    with using(spark_engine):
        run = atr(_frame(spark_engine, table), params)
    _same_run(run, local)
    assert set(local.outputs["decision_rules"].column("score").to_pylist()) == {
        "0.0",
        "1.5",
        "<missing>",
    }


def test_pre_aggregated_cells_on_a_frame_are_the_arrow_paths(spark_engine):
    """The paper's cells, one population -0.0 (published with ``include_population``)."""
    cells = _set(golden_cells(), "population", [12.0, -0.0, 3.0, 9.0, 7.0, 4.0])
    params = ATRParams(delta=0.9, decisions="cells", include_population=True)
    with using(LocalEngine()):
        local = atr(cells, params)
    with using(spark_engine):
        run = atr(_frame(spark_engine, cells), params)
    _same_run(run, local)
    assert not np.signbit(local.outputs["decision_rules"].column("population")).any()


BAD = {
    "a binned attribute's null": lambda t: _set(
        t, "education-num", [None] + t.column("education-num").to_pylist()[1:]
    ),
    "a missing decision": lambda t: _set(t, "income", t.column("income").to_pylist()[:-1] + [None]),
    "a third decision": lambda t: _set(t, "income", [2] + t.column("income").to_pylist()[1:]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_records_are_refused_with_the_arrow_paths_error(spark_engine, adult, case):
    table, params = adult
    bad = BAD[case](table.slice(0, 300))
    with pytest.raises(InputError) as local:
        build_cells(bad, params)
    with using(spark_engine), pytest.raises(InputError) as spark:
        build_cells(_frame(spark_engine, bad), params)
    assert str(spark.value) == str(local.value)


@pytest.mark.parametrize(
    "case, values",
    [("a negative population", [-1.0, 5, 3, 9, 7, 4]), ("a cell twice", None)],
)
def test_bad_cells_are_refused_with_the_arrow_paths_error(spark_engine, case, values):
    cells = golden_cells()
    if values is None:
        cells = pa.concat_tables([cells, cells.slice(2, 1)])
    else:
        cells = _set(cells, "population", values)
    params = ATRParams(delta=0.9, decisions="cells")
    with pytest.raises(InputError) as local:
        build_cells(cells, params)
    with using(spark_engine), pytest.raises(InputError) as spark:
        build_cells(_frame(spark_engine, cells), params)
    assert str(spark.value) == str(local.value)


def test_a_model_is_refused_on_a_frame_naming_its_key(spark_engine, adult):
    """A classifier is fitted on the records and decides each one: it would need them here."""
    table, params = adult
    model = params.model_copy(update={"decisions": "model"})
    with using(spark_engine), pytest.raises(SpecError) as e:
        build_cells(_frame(spark_engine, table), model)
    assert e.value.key == "component.params.decisions"
    assert "local engine" in e.value.rule


# --- a release on the cluster -------------------------------------------------------------------


class DriverRead(BaseException):
    """The driver opened the input file (a BaseException: no ``except Exception`` hides it)."""


class _Guard:
    """While active: pyarrow's and Python's readers refuse ``path``, and every Spark result
    collected to the driver is measured (its rows)."""

    def __init__(self, monkeypatch, path: Path, spark) -> None:
        self.path = str(path.resolve())
        self.collected: list[int] = []
        mp = monkeypatch
        for owner, name in (
            (pq, "read_table"),
            (pq, "ParquetFile"),
            (memory, "mapped_parquet"),
            (builtins, "open"),
            (io, "open"),
        ):
            mp.setattr(owner, name, self._refusing(getattr(owner, name)))
        cls = type(spark.range(1))
        for name in ("toArrow", "collect", "toPandas", "toLocalIterator"):
            mp.setattr(cls, name, self._measuring(getattr(cls, name)))

    def _mine(self, target) -> bool:
        try:
            return str(Path(target).resolve()) == self.path
        except TypeError:  # a file object or a buffer
            return False

    def _refusing(self, fn):
        def guarded(target, *args, **kwargs):
            if self._mine(target):
                raise DriverRead(f"the driver read {target}")
            return fn(target, *args, **kwargs)

        return guarded

    def _measuring(self, fn):
        def measured(df, *args, **kwargs):
            out = fn(df, *args, **kwargs)
            if isinstance(out, pa.Table):
                self.collected.append(out.num_rows)
            elif isinstance(out, list) or hasattr(out, "shape"):
                self.collected.append(len(out))
            else:  # an iterator would stream rows here: none of our steps asks for one
                raise AssertionError(f"{fn.__name__} streamed rows to the driver")
            return out

        return measured


ROWS = 8000


@pytest.fixture(scope="module", params=["parquet", "csv"])
def releases(request, spark_engine, builtin_table, tmp_path_factory):
    """adult_atr.yaml on the first ``ROWS`` Adult records in a Parquet (or UTF-8 CSV) file, the
    label deciding: (local release folder, cluster release folder, what the cluster run
    collected, the spec, group_counts' inputs), both released into the same store (one store
    secret: the same release id), the local one moved out first."""
    from pyarrow import csv

    from privfair import api

    table, _ = shipped_report(builtin_table, "adult_atr")
    table = table.select(["sex", "education-num", "income"]).slice(0, ROWS)
    root = tmp_path_factory.mktemp("atr-spark")
    data = root / f"adult.{request.param}"
    if request.param == "csv":
        csv.write_csv(table, data)
    else:
        pq.write_table(table.replace_schema_metadata(None), data)
    raw = yaml.safe_load((DEFAULT_SPECS_DIR / "adult_atr.yaml").read_text())
    raw["name"] = "adult_atr_label"
    raw["dataset"] = {
        "path": str(data),
        "columns": {
            c.name: _column_spec(c).model_dump(mode="json", exclude_none=True)
            for c in read_roles(table)
        },
    }
    params = raw["component"]["params"]
    for key in ("model", "train_fraction", "model_seed"):
        del params[key]
    params["decisions"] = "label"
    spec = root / "adult_atr_label.yaml"
    spec.write_text(yaml.safe_dump(raw))
    store = root / "store"
    local = api.run(spec, store=store)
    kept = root / "local"
    shutil.move(store / "adult_atr_label", kept)
    with pytest.MonkeyPatch.context() as mp:
        counted = _Counted(mp)
        guard = _Guard(mp, data, spark_engine.spark)
        on_cluster = api.run(spec, store=store, spark=spark_engine.spark)
        with pytest.raises(DriverRead):  # the guard bites the local engine's ingest
            api.run(spec, store=root / "guarded-local")
    assert on_cluster.version == local.version
    return (
        kept / local.version,
        Path(on_cluster.path),
        guard.collected,
        spec,
        counted.given,
    )


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_release_on_the_cluster_publishes_the_local_release(releases):
    local, spark, _, _, _ = releases
    assert local.name == spark.name  # the same version
    shared, theirs = _files(local / "shared"), _files(spark / "shared")
    assert set(shared) == {*(f"{n}.parquet" for n in OUTPUTS), "manifest.json", "report.html"}
    assert theirs == shared  # byte for byte
    for name in ("audit_cells", "audit_groups", "audit_fairness"):
        f = f"internal/{name}.parquet"
        assert (spark / f).read_bytes() == (local / f).read_bytes(), f
    mine, other = (json.loads((d / "manifest.json").read_text()) for d in (local, spark))
    assert other["execution"]["engine"] == "spark" and mine["execution"]["engine"] == "local"
    for key in ("metrics", "validation", "input", "cost_of_protection", "warnings"):
        assert other[key] == mine[key], key


def test_the_driver_held_no_record_of_the_input(releases):
    """Every group_counts was given a frame (counted where the rows are: the run's cells, the
    evidence's, the owner's trade-off figure); nothing collected from Spark had more rows
    than the cells' counts (sex x band x decision: 12), the input has ``ROWS``."""
    _, _, collected, _, given = releases
    assert given and set(given) == {SparkFrame}
    assert len(given) == 3
    assert collected and max(collected) <= 12 < ROWS


def test_the_attacker_gets_nothing_back_from_the_clusters_shareable_copy(releases):
    """``test_attack_true_rules``'s attacker, on the cluster's shareable copy (its tables and
    public manifest) and every cell's population (A2): no group's true rate, no group's
    rules, neither the true SP nor the true PR comes back (each off by more than 1e-3)."""
    _, spark, _, spec, _ = releases
    from privfair.spec.catalogue import load_spec

    params = load_spec(spec).params
    shared = spark / "shared"
    published = json.loads((shared / "manifest.json").read_text())
    outputs = {n: pq.read_table(shared / f"{n}.parquet") for n in OUTPUTS}
    view = public_view(types.SimpleNamespace(outputs=outputs, metrics=published["metrics"]), params)
    truth = pq.read_table(spark / "internal" / "audit_cells.parquet").to_pydict()
    pop, d1 = np.asarray(truth["population"]), np.asarray(truth["d1_true"])
    sex = np.asarray(truth["sex"])
    rates = {g: float((pop * d1)[sex == g].sum() / pop[sex == g].sum()) for g in ("0", "1")}
    got = attack(view, pop, params)
    assert set(got["rates"]) == {"0", "1"}  # both groups' rates were tried
    for g, r in got["rates"].items():
        assert abs(r - rates[g]) > 1e-3, f"sex = {g}: true rate {rates[g]}"
    assert not got["rules"]
    assert abs(got["sp"] - abs(rates["0"] - rates["1"])) > 1e-3
    assert abs(got["pr"] - rates["0"] / rates["1"]) > 1e-3


# --- what stays on the cluster depends on the decisions ----------------------------------------


def test_only_a_model_that_decides_keeps_the_input_on_the_driver(tmp_path):
    """``decisions: model`` fits a classifier on the records, so its input is ingested here,
    even on the Spark engine; every other source of decisions leaves a file on the cluster
    (``Algorithm.reads_counts_only`` answers from the params, ``cells.counts_only``)."""
    from privfair.release.plan import ReleasePlan
    from privfair.run.flow import on_cluster
    from privfair.spec.catalogue import parse_spec

    data = tmp_path / "input.parquet"
    pq.write_table(pa.table({"x": [1]}), data)
    raw = yaml.safe_load((DEFAULT_SPECS_DIR / "adult_atr.yaml").read_text())
    raw["dataset"] = {"path": str(data), "columns": {"x": {"role": "ignored"}}}
    raw["execution"] = {"engine": "spark", "master": "local[1]"}
    got = {}
    for decisions in ("model", "label"):
        raw["component"]["params"]["decisions"] = decisions
        if decisions != "model":
            for key in ("model", "train_fraction", "model_seed"):
                raw["component"]["params"].pop(key, None)
        got[decisions] = on_cluster(ReleasePlan.of(parse_spec(raw)))
    assert got == {"model": False, "label": True}


def test_the_cost_of_a_report_on_a_large_frame_draws_no_row():
    """ATR publishes a report, not a table to train on: its cost of protection is ``not
    applicable`` and reads no row, so a frame of more rows than the reruns' cap gets the
    record a local table of as many rows gets (the sample it would have said), no draw."""
    from privfair.components.core.inputs import RERUN_ROWS
    from privfair.evaluation.evaluate import cost_sample, holdout_cost, measures_cost
    from privfair.spec.catalogue import algorithm_of, load_spec

    spec = load_spec(DEFAULT_SPECS_DIR / "adult_atr.yaml")
    assert not measures_cost(algorithm_of(spec))
    rows = RERUN_ROWS + 1
    frame = SparkFrame(None, pa.schema([("x", pa.int64())]), rows=rows)
    table, record = cost_sample(frame, draw=False)
    assert table is frame and record == {"rows": RERUN_ROWS, "of": rows, "seed": 0}
    got = holdout_cost(spec, frame, record)
    assert got["status"] == "not applicable" and "report" in got["reason"]
    assert got["sample"] == record
