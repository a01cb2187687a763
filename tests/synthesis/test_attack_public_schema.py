"""The attacker reads a DP release's published schema: nothing in it may come from the input.

A DP synthetic table's schema is public (``data.parquet``: each field's Arrow type and roles,
``privfair.domain`` among them, and the contract in the schema metadata). Two ways it was read
off the private data:

- an ``ordinal`` column without a declared ``domain`` took a pandas ordered Categorical's
  categories as its domain (``privfair.io.ingest``), published as ``privfair.domain``: a
  Categorical built from the values holds exactly the values that occur, so one person's rare
  level was in the domain of D and not of D minus that person. Such a column is now refused
  (``InputError`` naming it: exit 2), as a column with no domain is;
- each column kept the input's inferred Arrow type: one fractional age in a CSV file turns the
  column from ``int64`` to ``double``, in the published schema and the contract's types. The
  published type is now the spec's (``domain.published_type``: integer bins give ``int64``).

The attacker holds two neighbouring inputs (one person apart) and compares the schemas of their
releases: they must be identical, types and field metadata included.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from privfair.components.synthesis.params import MSTParams, PreFairParams
from privfair.components.synthesis.synthesize import mst, prefair
from privfair.io.ingest import load_dataset
from privfair.schemas.errors import InputError
from privfair.schemas.spec import DatasetSpec

N = 400
EDUCATION = ["basic", "secondary", "degree"]
COLUMNS = {
    "age": {"role": "admissible", "kind": "numeric"},
    "edu": {"role": "admissible", "kind": "ordinal"},
    "sex": {"role": "protected", "kind": "nominal", "favoured": "M", "domain": ["F", "M"]},
    "y": {"role": "label", "kind": "binary", "positive": 1},
}
BINS = {"age": {"start": 0, "stop": 100, "step": 10}}
RUNS = {
    "mst": lambda t: mst(t, MSTParams(epsilon=1.0, bins=BINS, iters=20, seed=0)),
    "prefair": lambda t: prefair(
        t, PreFairParams(epsilon=1.0, bins=BINS, iters=20, seed=0, independence_alpha=1e-9)
    ),
}


def _frame(rare: bool, fractional: bool) -> pd.DataFrame:
    """The people; with ``rare``, the first one has the rare level ``doctorate`` (a level of the
    Categorical only then, as pandas builds it from the values); with ``fractional``, the first
    one's age is 31.5 (the others are whole)."""
    rng = np.random.default_rng(7)
    edu = list(rng.choice(EDUCATION, N))
    levels = list(EDUCATION)
    if rare:
        edu[0] = "doctorate"
        levels.append("doctorate")
    ages = rng.integers(18, 80, N).astype(object)
    if fractional:
        ages[0] = 31.5
    return pd.DataFrame(
        {
            "age": list(ages),
            "edu": pd.Categorical(edu, categories=levels, ordered=True),
            "sex": rng.choice(["F", "M"], N),
            "y": rng.integers(0, 2, N),
        }
    )


def _ingest_csv(frame: pd.DataFrame, folder, columns) -> pa.Table:
    """The frame written to CSV and read as a spec's file (types inferred by the reader)."""
    path = folder / "people.csv"
    frame.to_csv(path, index=False)
    return load_dataset(DatasetSpec(path=str(path), columns=columns))[0]


def _ingest_memory(frame: pd.DataFrame, columns) -> pa.Table:
    """The frame handed over in memory (the Python API), its Categorical kept."""
    ds = DatasetSpec.model_validate(
        {"source": {"kind": "memory", "dataset": "people"}, "columns": columns}
    )
    return load_dataset(ds, table=pa.Table.from_pandas(frame, preserve_index=False))[0]


def _declared(levels: list[str]) -> dict:
    return {**COLUMNS, "edu": {**COLUMNS["edu"], "domain": levels}}


def _schema(result) -> pa.Schema:
    return result.outputs["data"].schema


@pytest.mark.parametrize("name", RUNS)
def test_one_fractional_value_does_not_change_the_published_schema(tmp_path, name):
    columns = _declared([*EDUCATION, "doctorate"])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    whole = _ingest_csv(_frame(rare=True, fractional=False), tmp_path / "a", columns)
    frac = _ingest_csv(_frame(rare=True, fractional=True), tmp_path / "b", columns)
    assert whole.schema.field("age").type != frac.schema.field("age").type  # int64 / double
    a, b = RUNS[name](whole), RUNS[name](frac)
    assert _schema(a).equals(_schema(b), check_metadata=True)  # contract (types) included
    assert _schema(a).field("age").type == pa.int64()  # integer bins: int64, from the spec
    assert [g.types for g in a.contract if g.kind == "synthetic_schema"] == [
        ("int64", "string", "string", "int64")
    ]


@pytest.mark.parametrize("name", RUNS)
def test_one_rare_categorical_level_does_not_change_the_published_schema(name):
    """With the domain declared, the Categorical's categories (which hold the rare level only
    in D) are not read: D and D without that person publish the same schema."""
    columns = _declared([*EDUCATION, "doctorate"])
    with_rare = _frame(rare=True, fractional=False)
    without = _frame(rare=False, fractional=False).iloc[1:]  # D minus the first person
    a = RUNS[name](_ingest_memory(with_rare, columns))
    b = RUNS[name](_ingest_memory(without, columns))
    assert _schema(a).equals(_schema(b), check_metadata=True)
    assert _schema(a).field("edu").type == pa.string()
    assert _schema(a).field("edu").metadata[b"privfair.domain"] == (
        b'["basic", "secondary", "degree", "doctorate"]'
    )


@pytest.mark.parametrize("name", RUNS)
@pytest.mark.parametrize("rare", [True, False])
def test_a_domain_from_the_inputs_categories_is_refused_naming_the_column(name, rare):
    """No declared domain: the order an ordered Categorical gives is the input's (its
    categories are the values that occur), so the column is refused as one without a domain:
    an InputError naming it (exit 2), for D and for D minus the rare person alike."""
    table = _ingest_memory(_frame(rare=rare, fractional=False), COLUMNS)
    with pytest.raises(InputError) as e:
        RUNS[name](table)
    assert e.value.column == "edu" and "domain" in e.value.detail
