"""Issue 22 through ``privfair run`` for the generalisation family: a t below tau(R) is bad input
(exit 2, naming t and tau(R)) unless the spec accepts one class; a pandas ordered Categorical
(an Arrow dictionary column) publishes; a PD attribute with more values than groups is published
as its groups."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from _shared import read_latest

from privfair.cli import main
from privfair.components.generalisation.examples import table as random_table
from privfair.components.generalisation.examples import toy_table


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _spec(tmp_path: Path, name: str, dataset: dict, component: str, params: dict) -> Path:
    path = tmp_path / f"{name}.yaml"
    spec = {"name": name, "dataset": dataset, "component": {"name": component, "params": params}}
    path.write_text(yaml.safe_dump(spec))
    return path


GERMAN = {
    "name": "german",
    "quasi_identifiers": ["credit_history", "purpose", "credit_amount", "employment"],
}


@pytest.mark.parametrize("component", ["dmondrian", "dsabre"])
def test_t_below_tau_r_exits_2_naming_t(tmp_path, component):
    spec = _spec(tmp_path, f"german_{component}_low_t", GERMAN, component, {"t": 0.03})
    code, out, err = cli("run", str(spec), "--store", str(tmp_path / "store"))
    assert code == 2, (out, err)
    assert "'t'" in err and "tau(R) = 0.05" in err and "single_class: allow" in err
    assert not (tmp_path / "store" / f"german_{component}_low_t" / "latest").exists()


@pytest.mark.parametrize("component", ["dmondrian", "dsabre"])
def test_t_below_tau_r_publishes_one_class_when_allowed(tmp_path, component):
    name = f"german_{component}_one_class"
    spec = _spec(tmp_path, name, GERMAN, component, {"t": 0.03, "single_class": "allow"})
    code, out, err = cli("run", str(spec), "--store", str(tmp_path / "store"))
    assert code == 0, (out, err)
    version = read_latest(tmp_path / "store" / name)
    data = pq.read_table(tmp_path / "store" / name / version / "shared" / "data.parquet")
    assert len({str(v) for v in data.column("purpose").to_pylist()}) == 1


TOY_COLUMNS = {
    "purpose": {"role": "quasi_identifier", "kind": "ordinal"},
    "emp": {"role": "quasi_identifier", "kind": "ordinal", "domain": ["no", "yes"]},
    "sex": {"role": "protected", "kind": "nominal", "unfavoured": ["female"]},
    "dec": {"role": "label", "kind": "nominal", "positive": ["+"]},
}


@pytest.mark.parametrize("component", ["dmondrian", "dsabre"])
def test_a_pandas_ordered_categorical_publishes(tmp_path, component):
    """Written by pandas 3: strings as large_string, purpose an ordered Categorical (an Arrow
    dictionary) whose categories give its order, so the spec declares none."""
    df = pd.concat([toy_table().to_pandas()] * 4, ignore_index=True)
    df["purpose"] = pd.Categorical(df["purpose"], categories=["housing", "car"], ordered=True)
    df.to_parquet(tmp_path / "toy.parquet")
    dataset = {"path": str(tmp_path / "toy.parquet"), "columns": TOY_COLUMNS}
    spec = _spec(tmp_path, f"toy_{component}", dataset, component, {"t": 0.25})
    code, out, err = cli("run", str(spec), "--store", str(tmp_path / "store"))
    assert code == 0, (out, err)
    assert f"published: toy_{component}" in out


@pytest.mark.parametrize("component", ["dmondrian", "dsabre"])
def test_a_three_valued_pd_attribute_publishes_as_its_groups(tmp_path, component):
    random_table(4, 200).to_pandas().to_parquet(tmp_path / "groups.parquet")
    dataset = {
        "path": str(tmp_path / "groups.parquet"),
        "columns": {
            "age": {"role": "quasi_identifier", "kind": "numeric"},
            "level": {
                "role": "quasi_identifier",
                "kind": "ordinal",
                "domain": ["none", "basic", "middle", "high"],
            },
            "region": {"role": "quasi_identifier", "kind": "nominal"},
            "group": {"role": "protected", "kind": "nominal", "favoured": ["a"]},
            "decision": {"role": "label", "kind": "binary", "positive": [1]},
        },
    }
    params = {"t": 0.3, "single_class": "allow"}
    spec = _spec(tmp_path, f"groups_{component}", dataset, component, params)
    code, out, err = cli("run", str(spec), "--store", str(tmp_path / "store"))
    assert code == 0, (out, err)
