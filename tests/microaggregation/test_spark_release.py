"""Fair-MDAV on a Spark cluster with the driver holding no row (issue 46), on the suite's
``local[2]`` session: the executors read the Parquet input, split it, protect each block and
write the release in its published order; the parts, read in order, are the local run's data
and lineage, and the metrics, warnings and contract are the local run's (the information loss
to within float rounding). Parameters off the plan are refused naming them."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privfair.components.core.engine import SparkFrame, using
from privfair.components.microaggregation.fair_mdav import fair_mdav
from privfair.components.microaggregation.params import FairMDAVParams
from privfair.components.microaggregation.spark_release import protect_on_spark
from privfair.io.ingest import file_names
from privfair.io.positions import with_positions
from privfair.schemas.errors import InputError
from tests.microaggregation.test_blockwise import table  # noqa: I001


def _on_cluster(spark_engine, t: pa.Table, tmp_path) -> SparkFrame:
    """``t`` written as a Parquet file the executors read, with each row's input position."""
    path = tmp_path / "input.parquet"
    pq.write_table(t.replace_schema_metadata(None), path, row_group_size=97)
    df = spark_engine.spark.read.parquet("file://" + str(path))
    return SparkFrame(with_positions(df, path, file_names(path)), t.schema)


def _read(folder, parts) -> pa.Table:
    return pa.concat_tables([pq.read_table(folder / name) for name, _ in parts])


def _same_metrics(got: dict, want: dict) -> None:
    il_got, il_want = got.pop("information_loss"), want.pop("information_loss")
    assert got == want or _nan_equal(got, want)
    for key in ("il", "il_attr", "sse"):
        assert math.isclose(il_got[key], il_want[key], rel_tol=1e-12), key
    assert il_got["per_attribute"].keys() == il_want["per_attribute"].keys()
    for a, v in il_want["per_attribute"].items():
        assert math.isclose(il_got["per_attribute"][a], v, rel_tol=1e-12, abs_tol=1e-300), a


def _nan_equal(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_nan_equal(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return a == b


def released(spark_engine, t, params, tmp_path, **kw):
    frame = _on_cluster(spark_engine, t, tmp_path)
    out = tmp_path / "release"
    with using(spark_engine):
        r = protect_on_spark(frame, params, "file://" + str(out), **kw)
    data = _read(out, r.parts)
    lineage = _read(out, [(name.replace("part-", "lineage-"), n) for name, n in r.parts])
    return r, data, lineage


@pytest.mark.parametrize(
    "params",
    [
        FairMDAVParams(k=4, tau=0.7, block_rows=60),
        FairMDAVParams(k=5, tau=1.0, block_rows=90, grouping="mdav", correction="negative"),
        FairMDAVParams(k=4, tau=0.8, block_rows=70, publish="onehot"),
        FairMDAVParams(k=3, tau=0.5, block_rows=50, microaggregate=False),
    ],
    ids=["fairlets", "mdav-negative", "onehot", "no-microaggregation"],
)
def test_cluster_release_is_the_local_release(spark_engine, tmp_path, params):
    t = table(700, 11)
    r, data, lineage = released(
        spark_engine, t, params, tmp_path, rows_per_part=200, local_rows=250
    )
    want = fair_mdav(t, params)
    assert data.equals(want.outputs["data"].replace_schema_metadata(None), check_metadata=True)
    assert lineage.equals(want.sidecars["lineage"])
    n = data.num_rows
    assert [rows for _, rows in r.parts] == [min(200, n - a) for a in range(0, n, 200)]
    _same_metrics(dict(r.metrics), dict(want.metrics))
    assert r.warnings == want.warnings
    assert r.contract == want.contract


def test_adult(spark_engine, tmp_path, builtin_table):
    t = builtin_table("adult").slice(0, 8000)
    params = FairMDAVParams(k=5, tau=0.8, block_rows=900)
    r, data, lineage = released(spark_engine, t, params, tmp_path, local_rows=3000)
    want = fair_mdav(t, params)
    assert data.equals(want.outputs["data"].replace_schema_metadata(None), check_metadata=True)
    assert lineage.equals(want.sidecars["lineage"])
    _same_metrics(dict(r.metrics), dict(want.metrics))


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"block_rows": None}, "block_rows"),
        ({"relabel_order": "random"}, "relabel_order"),
        ({"scaling": "zscore"}, "scaling"),
    ],
)
def test_off_the_plan_is_refused(spark_engine, tmp_path, change, key):
    params = FairMDAVParams(k=4, block_rows=60).model_copy(update=change)
    with pytest.raises(InputError) as e:
        released(spark_engine, table(50), params, tmp_path)
    assert e.value.column == key or key in str(e.value)


@pytest.mark.parametrize("name", ["block", "__row", "__x0", "group"])
def test_a_column_named_like_the_plans_own_is_refused(spark_engine, tmp_path, name):
    """A column the plan's own columns would replace on the cluster is refused, never
    overwritten: its values would otherwise be published as the plan's."""
    t = table(50)
    t = t.rename_columns([name if c == "note" else c for c in t.column_names])
    with pytest.raises(InputError) as e:
        released(spark_engine, t, FairMDAVParams(k=4, block_rows=60), tmp_path)
    assert e.value.column == name
