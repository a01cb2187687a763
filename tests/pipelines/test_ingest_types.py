"""Ingest takes the Arrow types pandas, polars and DuckDB write and normalises them once, for
every family: a dictionary (a pandas Categorical), large and view strings, timestamps with a
zone. Every algorithm publishes from such a file what it publishes from the plain one; an
ordered Categorical gives an ordinal column its domain order. And the null policy of a spec:
refuse, drop or impute, recorded in the owner's manifest."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from _shared import columns_of

from privfair.components.core.descriptor import resolve
from privfair.components.core.registry import algorithms
from privfair.io.ingest import load_dataset, normalise_type
from privfair.schemas.errors import InputError, SpecError
from privfair.schemas.spec import DatasetSpec

ALGORITHMS = algorithms()
WIDE = (
    lambda a: a.dictionary_encode(),
    lambda a: a.cast(pa.large_string()),
    lambda a: a.cast(pa.string_view()),
)


def _widen(table: pa.Table) -> pa.Table:
    """Every string column as a dictionary, a large string or a string view, in turn."""
    cols, k = [], 0
    for f, col in zip(table.schema, table.columns, strict=True):
        if pa.types.is_string(f.type):
            col = pa.chunked_array([WIDE[k % 3](c) for c in col.chunks])
            k += 1
        cols.append(col)
    return pa.table(cols, names=table.column_names)


def _spec(tmp_path: Path, name: str, algo, params, columns: dict, file: str) -> Path:
    spec = {
        "name": name,
        "dataset": {"path": file, "columns": columns, "unlabelled": "keep"},
        "component": {"name": algo.name, "params": params.model_dump(mode="json")},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize("algo", ALGORITHMS, ids=[a.name for a in ALGORITHMS])
def test_every_family_publishes_from_wide_arrow_types(algo, tmp_path: Path):
    from privfair.run.flow import run_release
    from privfair.spec.catalogue import load_spec

    table, params = resolve(algo.example)(3)
    plain = pa.table(table.columns, names=table.column_names)
    wide = _widen(plain)
    assert wide.schema != plain.schema
    pq.write_table(plain, tmp_path / "plain.parquet")
    pq.write_table(wide, tmp_path / "wide.parquet")
    assert pq.read_schema(tmp_path / "wide.parquet") != plain.schema
    cols = columns_of(table)
    out = {}
    for kind in ("plain", "wide"):
        spec = load_spec(_spec(tmp_path, f"types_{kind}", algo, params, cols, f"{kind}.parquet"))
        res = run_release(spec, tmp_path / "store")
        assert res.status == "published" and res.validation.passed, kind
        out[kind] = [
            pq.read_table(p).to_pylist()
            for p in sorted((Path(res.path) / "shared").glob("*.parquet"))
        ]
    if algo.replayable:
        assert out["wide"] == out["plain"]


def test_types_are_normalised_once():
    assert normalise_type(pa.dictionary(pa.int32(), pa.string_view())) == pa.string()
    assert normalise_type(pa.large_list(pa.large_string())) == pa.list_(pa.string())
    assert normalise_type(pa.timestamp("ns", "America/New_York")) == pa.timestamp("ns")
    assert normalise_type(pa.int16()) == pa.int16()


def test_a_timestamp_with_a_zone_keeps_its_instant(tmp_path: Path):
    ts = pa.array([0, 3_600_000_000], pa.timestamp("us", "Asia/Tokyo"))
    pq.write_table(pa.table({"t": ts, "x": [1, 2]}), tmp_path / "t.parquet")
    ds = DatasetSpec(
        path=str(tmp_path / "t.parquet"),
        columns={"x": {"role": "quasi_identifier"}},
        unlabelled="keep",
    )
    table, _ = load_dataset(ds)
    assert table.schema.field("t").type == pa.timestamp("us")
    assert table.column("t").cast(pa.int64()).to_pylist() == [0, 3_600_000_000]


def test_an_ordered_categorical_gives_an_ordinal_its_order(tmp_path: Path):
    import pandas as pd

    levels = ["low", "mid", "high"]
    frame = pd.DataFrame(
        {"level": pd.Categorical(["high", "low", "mid", "low"], categories=levels, ordered=True)}
    )
    frame.to_parquet(tmp_path / "c.parquet")
    ds = DatasetSpec(
        path=str(tmp_path / "c.parquet"),
        columns={"level": {"role": "quasi_identifier", "kind": "ordinal"}},
    )
    from privfair.schemas.roles import read_roles

    table, _ = load_dataset(ds)
    assert table.schema.field("level").type == pa.string()
    assert read_roles(table)["level"].domain == tuple(levels)


def _nulls(tmp_path: Path, **policy) -> tuple[pa.Table, dict]:
    t = pa.table(
        {"x": [1.0, None, 3.0, None, 10.0], "c": ["a", "b", None, "b", "a"], "y": [0, 1, 0, 1, 1]}
    )
    pq.write_table(t, tmp_path / "n.parquet")
    cols = {
        "x": {"role": "quasi_identifier", **({"nulls": policy.pop("x")} if "x" in policy else {})},
        "c": {
            "role": "quasi_identifier",
            "kind": "nominal",
            **({"nulls": policy.pop("c")} if "c" in policy else {}),
        },
        "y": {"role": "label", "kind": "binary"},
    }
    return load_dataset(DatasetSpec(path=str(tmp_path / "n.parquet"), columns=cols, **policy))


def test_the_null_policy_refuses_drops_or_imputes_and_says_so(tmp_path: Path):
    with pytest.raises(
        InputError, match="column 'x': has nulls and the spec refuses them .*2 null"
    ):
        _nulls(tmp_path, nulls="refuse")
    table, rec = _nulls(tmp_path, nulls="drop")
    assert table.num_rows == 2 and rec["nulls"]["*"]["dropped_rows"] == 3
    assert rec["nulls"]["x"] == {"policy": "drop", "nulls": 2} and rec["rows"] == 2
    table, rec = _nulls(tmp_path, x={"impute": "median"}, c={"impute": "mode"})
    assert table.column("x").to_pylist() == [1.0, 3.0, 3.0, 3.0, 10.0]
    assert table.column("c").to_pylist() == ["a", "b", "a", "b", "a"]  # tie a/b: the smallest
    assert rec["nulls"]["x"]["imputed_with"] == 3.0 and rec["nulls"]["c"]["policy"] == "impute mode"
    table, _ = _nulls(tmp_path, x={"impute": "value", "value": -1})
    assert table.column("x").to_pylist()[1] == -1.0
    with pytest.raises(SpecError, match="impute: mean needs a numeric column"):
        _nulls(tmp_path, c={"impute": "mean"})
    table, rec = _nulls(tmp_path)  # keep: the default, nothing recorded
    assert table.column("x").null_count == 2 and "nulls" not in rec
