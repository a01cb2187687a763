"""Every bad-input rule gives a clear error naming the column (or spec key) and the rule, both
through the component API and through ``privfair run`` (exit 2, nothing published)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import yaml
from pydantic import ValidationError

from privfair.cli import main
from privfair.components.microaggregation.fair_mdav import fair_mdav
from privfair.components.microaggregation.mdav import mdav
from privfair.components.microaggregation.params import FairMDAVParams, MDAVParams
from privfair.io.ingest import load_dataset
from privfair.schemas.errors import InputError, SpecError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles
from privfair.schemas.spec import DatasetSpec
from privfair.spec.catalogue import parse_spec

N = 30
ROLES = TableRoles.of(
    [
        ColumnRole("x", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
        ColumnRole("c", Role.QUASI_IDENTIFIER, Kind.NOMINAL),
        ColumnRole("PA", Role.PROTECTED, Kind.BINARY, favoured=1),
        ColumnRole("y", Role.LABEL, Kind.BINARY, positive=1),
    ]
)
COLUMNS = {
    "x": {"role": "quasi_identifier", "kind": "numeric"},
    "c": {"role": "quasi_identifier", "kind": "nominal"},
    "PA": {"role": "protected", "kind": "binary", "favoured": 1},
    "y": {"role": "label", "kind": "binary", "positive": 1},
}


def good_columns() -> dict[str, list]:
    rng = np.random.default_rng(0)
    return {
        "x": [round(float(v), 3) for v in rng.normal(size=N)],
        "c": [str(v) for v in rng.choice(["a", "b", "c"], N)],
        "PA": [int(i % 3 != 0) for i in range(N)],
        # PA = 1 is the favoured group in the data, as the roles declare
        "y": [int(v) for v in (rng.random(N) < np.where(np.arange(N) % 3 != 0, 0.7, 0.3))],
    }


def table_of(cols: dict[str, list], roles: TableRoles = ROLES) -> pa.Table:
    return attach_roles(pa.table(cols), roles)


# --- the CLI harness ------------------------------------------------------------------------------


def csv_text(cols: dict[str, list], header: list[str] | None = None) -> str:
    names = header or list(cols)
    rows = zip(*cols.values(), strict=True)
    cell = lambda v: "" if v is None else str(v)  # noqa: E731
    return "\n".join([",".join(names), *(",".join(cell(v) for v in r) for r in rows)]) + "\n"


def write_spec(
    tmp_path: Path,
    csv: str,
    params: dict | None = None,
    columns: dict | None = None,
    dataset: dict | None = None,
    extra: dict | None = None,
) -> Path:
    data = tmp_path / "data.csv"
    data.write_text(csv)
    spec = {
        "name": "bad_input",
        "dataset": {
            "path": str(data),
            "format": "csv",
            "columns": columns or COLUMNS,
            **(dataset or {}),
        },
        "component": {"name": "fair_mdav", "params": params or {"k": 3, "tau": 1.0}},
        **(extra or {}),
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run_cli(tmp_path: Path, spec: Path, capsys, *more: str) -> tuple[int, str]:
    store = tmp_path / "store"
    code = main(["run", str(spec), "--store", str(store), *more])
    err = capsys.readouterr().err
    return code, err


def assert_nothing_published(tmp_path: Path) -> None:
    store = tmp_path / "store"
    if store.exists():
        assert not list(store.rglob("manifest.json"))
        assert not list(store.rglob("data.parquet"))
        assert not list(store.rglob("latest"))


def assert_cli_rejects(tmp_path, capsys, spec: Path, *needles: str, more: tuple = ()) -> str:
    code, err = run_cli(tmp_path, spec, capsys, *more)
    assert code == 2, err
    assert err.startswith("privfair: error:"), err
    for needle in needles:
        assert needle in err, (needle, err)
    assert_nothing_published(tmp_path)
    return err


def test_good_csv_publishes(tmp_path, capsys):
    """The control: the same harness with valid data exits 0 and publishes."""
    spec = write_spec(tmp_path, csv_text(good_columns()))
    code, err = run_cli(tmp_path, spec, capsys)
    assert code == 0, err
    owner = [p for p in (tmp_path / "store").rglob("manifest.json") if p.parent.name != "shared"]
    assert len(owner) == 1


# --- table rules ----------------------------------------------------------------------------------


def with_values(column: str, values: list) -> dict[str, list]:
    cols = good_columns()
    cols[column] = values
    return cols


TABLE_CASES = {
    # name: (columns, column named in the error, rule text)
    "null_protected": (
        with_values("PA", [None] + good_columns()["PA"][1:]),
        "PA",
        "the protected attribute has missing values",
    ),
    "null_label": (
        with_values("y", good_columns()["y"][:-1] + [None]),
        "y",
        "the label has missing values",
    ),
    "non_binary_protected": (
        with_values("PA", [i % 3 for i in range(N)]),
        "PA",
        "two distinct values",
    ),
    "non_binary_label": (with_values("y", [i % 4 for i in range(N)]), "y", "two distinct values"),
    "protected_one_value": (with_values("PA", [1] * N), "PA", "two distinct values"),
    "label_one_value": (with_values("y", [0] * N), "y", "two distinct values"),
    "numeric_qi_not_numeric": (
        with_values("x", [f"v{i}" for i in range(N)]),
        "x",
        "numeric quasi-identifier must have a numeric type",
    ),
    "nan_in_numeric_qi": (
        with_values("x", [float("nan")] + good_columns()["x"][1:]),
        "x",
        "numeric quasi-identifier",
    ),
    "inf_in_numeric_qi": (
        with_values("x", good_columns()["x"][:-1] + [float("inf")]),
        "x",
        "numeric quasi-identifier",
    ),
    "minus_inf_in_numeric_qi": (
        with_values("x", [float("-inf")] + good_columns()["x"][1:]),
        "x",
        "numeric quasi-identifier",
    ),
}


@pytest.mark.parametrize("case", list(TABLE_CASES))
@pytest.mark.parametrize("component", ["fair_mdav", "fair_mdav_grouping_mdav", "mdav"])
def test_table_rule_component_api(case, component):
    cols, column, rule = TABLE_CASES[case]
    table = table_of(cols)
    # plain MDAV passes protected attribute and label through, but still reports fairness
    # metrics on them, so the binary rules apply to it as well
    with pytest.raises(InputError) as e:
        if component == "mdav":
            mdav(table, MDAVParams(k=3))
        elif component == "fair_mdav":
            fair_mdav(table, FairMDAVParams(k=3))
        else:
            fair_mdav(table, FairMDAVParams(k=3, grouping="mdav"))
    assert e.value.column == column
    assert rule in e.value.rule, e.value.rule
    assert f"column '{column}'" in str(e.value)
    if case.startswith("null_"):  # how many rows, and what to do about them
        assert e.value.detail.startswith(f"1 of {N} rows have no value; drop or fill them first")
        assert f"dataset.columns.{column}.nulls" in e.value.detail


@pytest.mark.parametrize("case", list(TABLE_CASES))
def test_table_rule_cli(tmp_path, capsys, case):
    cols, column, rule = TABLE_CASES[case]
    spec = write_spec(tmp_path, csv_text(cols))
    # (the CSV reader reads "nan" as a null, which the same numeric-QI rule family rejects)
    needles = [f"column '{column}'", rule]
    if case.startswith("null_"):  # the empty CSV cell is a missing value, counted
        needles.append(f"1 of {N} rows have no value; drop or fill them first")
    assert_cli_rejects(tmp_path, capsys, spec, *needles)


def test_empty_table_component_api():
    empty = table_of(
        {
            k: pa.array([], type=t)
            for k, t in (
                ("x", pa.float64()),
                ("c", pa.string()),
                ("PA", pa.int64()),
                ("y", pa.int64()),
            )
        }
    )
    for run in (
        lambda: fair_mdav(empty, FairMDAVParams(k=3)),
        lambda: fair_mdav(empty, FairMDAVParams(k=3, grouping="mdav")),
        lambda: mdav(empty, MDAVParams(k=3)),
    ):
        with pytest.raises(InputError) as e:
            run()
        assert e.value.column is None and "table is empty" in e.value.rule
        assert str(e.value).startswith("table: table is empty")


def test_empty_table_cli(tmp_path, capsys):
    spec = write_spec(tmp_path, "x,c,PA,y\n")
    assert_cli_rejects(tmp_path, capsys, spec, "table is empty")


@pytest.mark.parametrize("k", [31, 100])
def test_fewer_rows_than_k_component_api(k):
    table = table_of(good_columns())
    for run in (
        lambda: fair_mdav(table, FairMDAVParams(k=k)),
        lambda: fair_mdav(table, FairMDAVParams(m=k - 5, n=5)),
        lambda: fair_mdav(table, FairMDAVParams(k=k, grouping="mdav")),
        lambda: mdav(table, MDAVParams(k=k)),
    ):
        with pytest.raises(InputError) as e:
            run()
        assert "fewer rows than k" in e.value.rule
        assert f"k = {k}" in str(e.value) and f"{N} rows" in str(e.value)


def test_fewer_rows_than_k_cli(tmp_path, capsys):
    spec = write_spec(tmp_path, csv_text(good_columns()), params={"k": 31})
    assert_cli_rejects(tmp_path, capsys, spec, "fewer rows than k", "k = 31")


def test_too_few_of_one_protected_group(tmp_path, capsys):
    """Enough rows, but fewer favoured rows than n: no fairlet can be formed (spec 1.3)."""
    cols = with_values("PA", [1, 1] + [0] * (N - 2))
    cols["y"] = [1, 1] + [0] * (N - 3) + [1]  # PA = 1 stays the favoured value
    with pytest.raises(InputError) as e:
        fair_mdav(table_of(cols), FairMDAVParams(m=2, n=3))
    assert e.value.column == "PA" and "too few rows to form one (2,3)-fairlet" in e.value.rule
    spec = write_spec(tmp_path, csv_text(cols), params={"m": 2, "n": 3})
    assert_cli_rejects(tmp_path, capsys, spec, "'PA'", "too few rows to form one (2,3)-fairlet")


def test_duplicate_column_names_component_api():
    """The components read roles from the field metadata only (no ``roles=`` argument any more):
    a table with two fields called 'x', each carrying a role, is refused naming 'x'."""
    good = good_columns()
    fields = [
        pa.field(name, pa.array(good[src]).type, metadata=ROLES[src].to_metadata())
        for name, src in (("x", "x"), ("x", "x"), ("PA", "PA"), ("y", "y"))
    ]
    table = pa.Table.from_arrays(
        [pa.array(good["x"]), pa.array(good["x"]), pa.array(good["PA"]), pa.array(good["y"])],
        schema=pa.schema(fields),
    )
    assert table.column_names == ["x", "x", "PA", "y"]
    with pytest.raises(InputError) as e:
        fair_mdav(table, FairMDAVParams(k=3))
    assert e.value.column == "x" and "column names must be unique" in e.value.rule
    with pytest.raises(InputError) as e:
        mdav(table, MDAVParams(k=3))
    assert e.value.column == "x" and "unique" in e.value.rule
    roles = TableRoles.of([ROLES["x"], ROLES["PA"], ROLES["y"]])
    with pytest.raises(InputError) as e:
        attach_roles(table, roles)
    assert e.value.column == "x" and "unique" in e.value.rule


def test_duplicate_column_names_cli(tmp_path, capsys):
    good = good_columns()
    cols = {"x": good["x"], "x2": good["x"], "c": good["c"], "PA": good["PA"], "y": good["y"]}
    text = csv_text(cols, header=["x", "x", "c", "PA", "y"])
    spec = write_spec(tmp_path, text)
    assert_cli_rejects(tmp_path, capsys, spec, "'x'", "column names must be unique")


# --- parameter and spec rules ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "key", "rule"),
    [
        ({"k": 1}, "k", "greater than or equal to 2"),
        ({"k": 0}, "k", "greater than or equal to 2"),
        ({"k": 3, "tau": 1.5}, "tau", "less than or equal to 1"),
        ({"k": 3, "tau": -0.1}, "tau", "greater than or equal to 0"),
        ({"k": 3, "kk": 2}, "kk", "Extra inputs are not permitted"),
    ],
)
def test_params_component_api(params, key, rule):
    with pytest.raises(ValidationError) as e:
        FairMDAVParams(**params)
    (err,) = e.value.errors()
    assert err["loc"] == (key,)
    assert rule in err["msg"]


def test_mdav_k_below_two_component_api():
    with pytest.raises(ValidationError) as e:
        MDAVParams(k=1)
    assert e.value.errors()[0]["loc"] == ("k",)


@pytest.mark.parametrize(
    ("params", "key", "rule"),
    [
        ({"k": 1}, "component.params.k", "greater than or equal to 2"),
        ({"k": 3, "tau": 1.5}, "component.params.tau", "less than or equal to 1"),
        ({"k": 3, "tau": -0.5}, "component.params.tau", "greater than or equal to 0"),
        ({"k": 3, "kk": 4}, "component.params.kk", "unknown parameter of component 'fair_mdav'"),
        ({"k": 3, "scaling": "raw"}, "component.params.scaling", "'minmax', 'zscore' or 'none'"),
    ],
)
def test_params_cli(tmp_path, capsys, params, key, rule):
    spec = write_spec(tmp_path, csv_text(good_columns()), params=params)
    assert_cli_rejects(tmp_path, capsys, spec, f"spec key '{key}'", rule)


@pytest.mark.parametrize(
    ("value", "rule"), [("1", "greater than or equal to 2"), ("2.5", "less than or equal to 1")]
)
def test_params_cli_set_override(tmp_path, capsys, value, rule):
    spec = write_spec(tmp_path, csv_text(good_columns()))
    key = "k" if value == "1" else "tau"
    assert_cli_rejects(
        tmp_path, capsys, spec, f"'component.params.{key}'", rule, more=("--set", f"{key}={value}")
    )


@pytest.mark.parametrize(
    ("extra", "dataset", "key"),
    [
        ({"guarantee": []}, None, "guarantee"),  # misspelt top-level key
        ({"schedul": "@daily"}, None, "schedul"),
        (None, {"qis": ["x"]}, "dataset.qis"),
        (
            {"guarantees": [{"kind": "k_anonymity", "k": 3, "kk": 1}]},
            None,
            "guarantees.0.kk",
        ),
    ],
)
def test_unknown_spec_key(tmp_path, capsys, extra, dataset, key):
    spec = write_spec(tmp_path, csv_text(good_columns()), extra=extra, dataset=dataset)
    raw = yaml.safe_load(spec.read_text())
    with pytest.raises(SpecError) as e:
        parse_spec(raw)  # the resolved spec: the guarantees are typed by the registered kinds
    assert e.value.key == key
    assert e.value.rule == "unknown key"
    assert_cli_rejects(tmp_path, capsys, spec, f"spec key '{e.value.key}'", "unknown key")


def test_unknown_component(tmp_path, capsys):
    """The envelope accepts any component name; resolving it against the registry does not."""
    spec = write_spec(tmp_path, csv_text(good_columns()))
    raw = yaml.safe_load(spec.read_text())
    raw["component"]["name"] = "fair_mdv"
    spec.write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(SpecError) as e:
        parse_spec(raw)
    assert e.value.key == "component.name"
    assert "unknown component 'fair_mdv'" in e.value.rule and "fair_mdav" in e.value.rule
    assert_cli_rejects(
        tmp_path, capsys, spec, "spec key 'component.name'", "unknown component 'fair_mdv'"
    )


def test_unknown_column_in_column_roles(tmp_path, capsys):
    columns = {**COLUMNS, "age": {"role": "quasi_identifier"}}
    spec = write_spec(tmp_path, csv_text(good_columns()), columns=columns)
    raw = yaml.safe_load(spec.read_text())
    with pytest.raises(InputError) as e:
        load_dataset(DatasetSpec.model_validate(raw["dataset"]))
    assert e.value.column == "age" and "not a column of data.csv" in e.value.rule
    assert_cli_rejects(tmp_path, capsys, spec, "'age'", "not a column")


def test_unknown_column_in_quasi_identifiers(tmp_path, capsys):
    spec = write_spec(
        tmp_path, csv_text(good_columns()), dataset={"quasi_identifiers": ["x", "height"]}
    )
    raw = yaml.safe_load(spec.read_text())
    with pytest.raises(InputError) as e:
        load_dataset(DatasetSpec.model_validate(raw["dataset"]))
    assert e.value.column == "height" and "not a column of dataset" in e.value.rule
    assert_cli_rejects(tmp_path, capsys, spec, "'height'", "not a column of dataset")


def test_unknown_column_in_builtin_quasi_identifiers(tmp_path, capsys):
    """The same rule on a built-in dataset (german)."""
    with pytest.raises(InputError) as e:
        load_dataset(DatasetSpec(name="german", quasi_identifiers=["age", "shoe_size"]))
    assert e.value.column == "shoe_size" and "not a column of dataset german" in e.value.rule
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "german_bad",
                "dataset": {"name": "german", "quasi_identifiers": ["age", "shoe_size"]},
                "component": {"name": "fair_mdav", "params": {"k": 10}},
            }
        )
    )
    assert_cli_rejects(tmp_path, capsys, spec, "'shoe_size'", "not a column of dataset german")


def test_non_qi_in_quasi_identifiers(tmp_path, capsys):
    spec = write_spec(
        tmp_path, csv_text(good_columns()), dataset={"quasi_identifiers": ["x", "PA"]}
    )
    assert_cli_rejects(tmp_path, capsys, spec, "'PA'", "not a quasi-identifier", "protected")
