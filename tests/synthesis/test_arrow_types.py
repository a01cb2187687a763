"""Ordinary Arrow types in and out (issue 22): a pandas ordered Categorical (an Arrow
dictionary column) crashed MST and PreFair ("Array type doesn't match type of values set"), a
``string_view`` column too ("index_in has no kernel"). Every string layout and a dictionary
column is accepted and compared by its values. The synthetic table's types are the spec's
(``domain.published_type``), whatever the input's layout: a dictionary column comes back a plain
``string`` column of its declared levels (a Categorical's index width follows its number of
categories, a fact about the input)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privfair.components.core.checks import check_contract, check_guarantee
from privfair.components.core.descriptor import resolve
from privfair.components.core.registry import kind_checks
from privfair.components.synthesis.audit import evidence
from privfair.components.synthesis.examples import BINS, EXAMPLE_ALPHA, JOBS, REGIONS, example_table
from privfair.components.synthesis.params import MSTParams, PreFairParams
from privfair.components.synthesis.synthesize import mst, prefair
from privfair.schemas.errors import InputError
from privfair.schemas.roles import ColumnRole, Kind, Role, attach_roles, read_roles

ANSWERS = ("no", "yes")
NOMINAL = {"region": REGIONS, "job": JOBS, "income": ANSWERS}
PUBLISHED = {
    "sex": pa.int64(),
    "region": pa.string(),
    "hours": pa.int64(),
    "job": pa.string(),
    "age": pa.int64(),
    "income": pa.string(),
}


def _base(seed: int) -> pa.Table:
    """The example with a string label (so the label's type changes too)."""
    t = example_table(seed)
    income = pa.array([ANSWERS[v] for v in t.column("income").to_pylist()])
    t = t.set_column(t.schema.get_field_index("income"), "income", income)
    roles = read_roles(example_table(seed)).replace(
        ColumnRole("income", Role.LABEL, Kind.NOMINAL, domain=ANSWERS, positive="yes")
    )
    return attach_roles(t, roles)


def _retype(t: pa.Table, make) -> pa.Table:
    """``t`` with each nominal column rebuilt by ``make(name, values)``, roles kept."""
    roles = read_roles(t)
    for name in NOMINAL:
        i = t.schema.get_field_index(name)
        arr = make(name, t.column(name).to_pylist())
        t = t.set_column(i, t.schema.field(i).with_type(arr.type), arr)
    return attach_roles(t, roles)


def _categorical(name, values):
    """A pandas ordered Categorical, as a user's DataFrame holds it."""
    dtype = pd.CategoricalDtype(list(NOMINAL[name]), ordered=True)
    return pa.array(pd.Series(values, dtype=dtype))


def _parquet_categorical(name, values):
    """The same, written to Parquet by pandas and read back (dictionary<string, int32>)."""
    buf = io.BytesIO()
    frame = pd.DataFrame({name: pd.Series(values, dtype=pd.CategoricalDtype(NOMINAL[name]))})
    frame.to_parquet(buf)
    return pq.read_table(io.BytesIO(buf.getvalue())).column(name).combine_chunks()


LAYOUTS = {
    "dictionary-ordered": _categorical,
    "dictionary-parquet": _parquet_categorical,
    "large_string": lambda n, v: pa.array(v, pa.large_string()),
    "string_view": lambda n, v: pa.array(v, pa.string_view()),
    "string": lambda n, v: pa.array(v, pa.string()),
}

RUNS = {
    "mst": (mst, MSTParams),
    "greedy": (prefair, lambda **k: PreFairParams(independence_alpha=EXAMPLE_ALPHA, **k)),
    "exponential": (
        prefair,
        lambda **k: PreFairParams(selector="exponential", independence_alpha=EXAMPLE_ALPHA, **k),
    ),
}


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_string_layout_runs_and_keeps_its_type(layout, run):
    fn, make = RUNS[run]
    table = _retype(_base(0), LAYOUTS[layout])
    params = make(epsilon=2.0, bins=BINS, nulls=("job",), seed=0, iters=80)
    result = fn(table, params)
    data = result.outputs["data"]
    # the spec's types, whatever the input's layout (integer bins: int64; levels: string)
    assert dict(zip(data.column_names, data.schema.types, strict=True)) == PUBLISHED
    assert set(n for n in data.column_names if data.column(n).null_count) <= {"job"}
    frames = evidence(table, result.outputs, result.sidecars, params)
    failed = [r.to_dict() for r in check_contract(result.contract, frames) if not r.passed]
    assert not failed
    for name, levels in NOMINAL.items():
        col = data.column(name).combine_chunks()
        assert {v for v in col.to_pylist() if v is not None} <= set(levels)
    # fairness metrics read the values (a dictionary compared as values, not as indices)
    fair = result.metrics["fairness"]["synthetic"]["region->income"]
    assert fair is not None and fair["dp"] is not None


def test_a_dictionary_narrower_than_the_declared_domain_publishes_plain_strings():
    """An int8-indexed Categorical holding 2 of 200 declared levels: the index width is the
    input's (it follows the categories it holds), the published column a ``string`` one whose
    values are declared levels."""
    levels = tuple(f"j{i}" for i in range(200))
    t = _base(0)
    i = t.schema.get_field_index("job")
    arr = pa.DictionaryArray.from_arrays(
        pa.array([0, 1] * 400, pa.int8()), pa.array(levels[:2], pa.string())
    )
    t = t.set_column(i, t.schema.field(i).with_type(arr.type), arr)
    roles = read_roles(_base(0)).replace(
        ColumnRole("job", Role.ADMISSIBLE, Kind.NOMINAL, domain=levels)
    )
    result = mst(attach_roles(t, roles), MSTParams(epsilon=1.0, bins=BINS, iters=20))
    job = result.outputs["data"].column("job")
    assert job.type == pa.string() and set(job.to_pylist()) <= set(levels)


def test_bins_on_a_dictionary_column_are_refused_naming_the_key():
    t = _base(0)
    roles = read_roles(t)
    i = t.schema.get_field_index("age")
    arr = t.column("age").combine_chunks().dictionary_encode()
    t = attach_roles(t.set_column(i, t.schema.field(i).with_type(arr.type), arr), roles)
    with pytest.raises(InputError) as e:
        mst(t, MSTParams(epsilon=1.0, bins=BINS, nulls=("job",)))
    assert e.value.column == "bins.age" and "dictionary" in e.value.rule


@pytest.mark.parametrize("layout", ["dictionary-ordered", "string_view"])
def test_every_checker_still_catches_its_corruption_on_these_types(layout):
    """The validator reads these columns as well as the run does: each kind's corruption,
    applied to a release of a dictionary or string_view table, fails its checker."""
    table = _retype(_base(1), LAYOUTS[layout])
    params = PreFairParams(epsilon=4.0, bins=BINS, nulls=("job",), seed=1, iters=80)
    result = prefair(table, params)
    checks = kind_checks()
    for g in result.contract:
        corrupt = resolve(checks[g.kind].corrupt)
        broken = corrupt(
            g, table, dict(result.outputs), dict(result.sidecars), np.random.default_rng(1)
        )
        if broken is None:
            continue
        verdict = check_guarantee(g, evidence(table, *broken, params))
        assert not verdict.passed, g.title
