"""The built-in datasets (``privfair.schemas.datasets``) and loading/validating tables (``privfair.io.ingest``).

Counts are those of fair-mdav.md section 4.1 and /work/shared/data/README.md.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from privfair.components.microaggregation.fair_mdav import fair_mdav
from privfair.components.microaggregation.params import FairMDAVParams
from privfair.io.ingest import load_dataset, validate_table
from privfair.schemas.datasets import DATASETS
from privfair.schemas.errors import DataSourceError, InputError, SpecError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles, read_roles
from privfair.schemas.spec import DatasetSpec

_CACHE: dict[str, pa.Table] = {}


def prepared(name: str) -> pa.Table:
    """The prepared built-in dataset, computed once per test session."""
    if name not in _CACHE:
        d = DATASETS[name]
        data = Path(os.environ["PRIVFAIR_DATA_DIR"])
        _CACHE[name] = d.prepare({f.name: data / f.name for f in d.files})
    return _CACHE[name]


def count(table: pa.Table, column: str, value: object) -> int:
    return pc.sum(pc.equal(table[column], value)).as_py()


# --- the three datasets ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "rows", "protected", "unfavoured", "label", "positives", "n_qi"),
    [
        ("adult", 48_842, "sex", 16_192, "income", 11_687, 12),
        ("compas", 6_907, "race", 4_529, "no_recid", 3_711, 6),
        ("german", 1_000, "sex", 310, "credit", 700, 20),
    ],
)
def test_counts(name, rows, protected, unfavoured, label, positives, n_qi) -> None:
    t = prepared(name)
    roles = read_roles(t)
    assert t.num_rows == rows
    prot, lab = roles.single(Role.PROTECTED), roles.single(Role.LABEL)
    # value sets are tuples now (a scalar is normalised to a 1-tuple)
    assert prot.name == protected and prot.favoured == (1,)
    assert lab.name == label and lab.positive == (1,)
    assert count(t, protected, 0) == unfavoured
    assert count(t, protected, 1) == rows - unfavoured
    assert count(t, label, 1) == positives
    assert count(t, label, 0) == rows - positives
    assert len(roles.quasi_identifiers) == n_qi
    assert t.schema.field(protected).type == pa.int8()
    assert t.schema.field(label).type == pa.int8()


def test_australian_counts() -> None:
    """690 rows, 14 anonymised attributes, 307 approved (australian.doc)."""
    t = prepared("australian")
    roles = read_roles(t)
    assert t.num_rows == 690 and len(roles.quasi_identifiers) == 14
    assert roles.single(Role.LABEL).name == "approved" and count(t, "approved", 1) == 307
    assert not roles.with_role(Role.PROTECTED)
    assert t.schema.field("A2").type == pa.float64() and t.schema.field("A4").type == pa.string()


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_column_has_its_role_in_order(name: str) -> None:
    t = prepared(name)
    roles = read_roles(t)
    assert roles == DATASETS[name].roles
    assert roles.names == t.column_names
    # QIs first, then the protected attribute (where the dataset has one), then the label.
    kinds = [c.role for c in roles]
    assert kinds[-1] is Role.LABEL
    head = kinds[:-2] if kinds[-2] is Role.PROTECTED else kinds[:-1]
    assert all(r is Role.QUASI_IDENTIFIER for r in head)
    for c in roles:
        t_ = t.schema.field(c.name).type
        if c.kind is Kind.NUMERIC:
            assert t_ in (pa.int64(), pa.float64()), c.name
        elif c.kind is Kind.NOMINAL:
            assert t_ == pa.string(), c.name
        else:
            assert c.kind is Kind.BINARY and t_ == pa.int8(), c.name
            assert set(t[c.name].to_pylist()) == {0, 1}
    validate_table(t)


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_roles_survive_parquet_round_trip(name: str, tmp_path: Path) -> None:
    t = prepared(name)
    pq.write_table(t, tmp_path / f"{name}.parquet")
    back = pq.read_table(tmp_path / f"{name}.parquet")
    assert read_roles(back) == read_roles(t)
    assert back.equals(t)


def test_adult_columns_and_missing_values() -> None:
    t = prepared("adult")
    assert t.column_names == [
        "age",
        "workclass",
        "education",
        "education-num",
        "marital-status",
        "occupation",
        "relationship",
        "race",
        "capital-gain",
        "capital-loss",
        "hours-per-week",
        "native-country",
        "sex",
        "income",
    ]
    roles = read_roles(t)
    assert [c.name for c in roles if c.kind is Kind.NUMERIC] == [
        "age",
        "education-num",
        "capital-gain",
        "capital-loss",
        "hours-per-week",
    ]
    # '?' -> null only in the three nominal columns; rows with nulls are kept.
    nulls = {c: t[c].null_count for c in t.column_names if t[c].null_count}
    assert nulls == {"workclass": 2_799, "occupation": 2_809, "native-country": 857}
    assert "?" not in set(t["workclass"].to_pylist())
    # Test-file labels lose their trailing '.'; train 7,841 + test 3,846 positives.
    assert count(t.slice(0, 32_561), "income", 1) == 7_841
    assert count(t.slice(32_561), "income", 1) == 3_846
    assert t["age"][32_561].as_py() == 25  # first row of adult.test, after its header line


def test_compas_preparation() -> None:
    t = prepared("compas")
    assert t.column_names == [
        "sex",
        "age",
        "priors_count",
        "days_b_screening_arrest",
        "jailtime",
        "c_charge_degree",
        "race",
        "no_recid",
    ]
    p_u = count(t, "race", 0) / t.num_rows
    assert math.isclose(p_u, 0.6557, abs_tol=5e-5)
    pr = {
        g: count(t.filter(pc.equal(t["race"], g)), "no_recid", 1) / count(t, "race", g)
        for g in (0, 1)
    }
    assert math.isclose(pr[0], 0.5056, abs_tol=5e-5)
    assert math.isclose(pr[1], 0.5976, abs_tol=5e-5)
    assert count(t, "sex", 1) == 5_579 and count(t, "c_charge_degree", 1) == 4_506
    # .dt.days floors: 206 records leave jail earlier on the day they entered -> -1.
    assert pc.min(t["jailtime"]).as_py() == -1 and count(t, "jailtime", -1) == 206
    assert pc.max(t["jailtime"]).as_py() == 799


def test_german_preparation() -> None:
    t = prepared("german")
    status = pc.value_counts(t["status"]).to_pylist()
    assert {d["values"]: d["counts"] for d in status} == {
        "single": 548,
        "divorced": 360,
        "married": 92,
    }
    assert t["checking"][0].as_py() == "A11"  # nominal QIs keep their codes
    assert count(t, "phone", 1) == 404 and count(t, "foreigner", 1) == 963
    roles = read_roles(t)
    nominal = [c.name for c in roles if c.kind is Kind.NOMINAL]
    assert nominal == [
        "checking",
        "credit_history",
        "purpose",
        "savings",
        "employment",
        "status",
        "other_debtors",
        "property",
        "other_inst",
        "housing",
        "job",
    ]
    assert [c.name for c in roles if c.kind is Kind.BINARY and c.role is Role.QUASI_IDENTIFIER] == [
        "phone",
        "foreigner",
    ]


def test_prepare_is_deterministic() -> None:
    d = DATASETS["german"]
    data = Path(os.environ["PRIVFAIR_DATA_DIR"])
    assert d.prepare({"german.data": data / "german.data"}).equals(prepared("german"))


# --- load_dataset ----------------------------------------------------------------------------


def test_load_builtin_records_its_input() -> None:
    table, record = load_dataset(DatasetSpec(name="compas"))
    assert table.equals(prepared("compas"))
    raw = DATASETS["compas"].files[0]
    assert record["dataset"] == "compas"
    assert record["files"] == {raw.name: raw.sha256}
    assert record["rows"] == 6_907
    assert len(record["fingerprint"]) == 64


def test_unknown_builtin_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="dataset.name"):
        load_dataset(DatasetSpec(name="census"))


def test_builtin_columns_override() -> None:
    """A built-in dataset's ``columns:`` override is honoured; a column the dataset does not
    have is a spec error naming ``dataset.columns.<col>``."""
    spec = DatasetSpec(name="german", columns={"foreigner": {"role": "public", "kind": "binary"}})
    table, _ = load_dataset(spec)
    roles = read_roles(table)
    assert table.column_names == prepared("german").column_names
    assert roles["foreigner"].role is Role.PUBLIC and roles["foreigner"].kind is Kind.BINARY
    assert "foreigner" not in roles.quasi_identifiers
    assert len(roles.quasi_identifiers) == 19
    with pytest.raises(SpecError) as e:
        load_dataset(
            DatasetSpec(name="german", columns={"nosuchcolumn": {"role": "quasi_identifier"}})
        )
    assert e.value.key == "dataset.columns.nosuchcolumn"
    assert "nosuchcolumn" in str(e.value)


def test_quasi_identifier_subset_and_exclude() -> None:
    """``quasi_identifiers`` keeps only the QIs it lists and drops the others (an explicit
    choice: they are not demoted to ``ignored``, which the default ``unlabelled: refuse`` would
    then refuse); ``exclude`` drops columns at ingest."""
    spec = DatasetSpec(name="compas", quasi_identifiers=["age", "sex", "jailtime"])
    table, record = load_dataset(spec)
    assert table.column_names == ["sex", "age", "jailtime", "race", "no_recid"]
    roles = read_roles(table)
    assert roles.quasi_identifiers == ["sex", "age", "jailtime"]
    assert roles.with_role(Role.IGNORED) == []
    assert roles.single(Role.PROTECTED).name == "race"
    assert roles.single(Role.LABEL).name == "no_recid"
    # the kept columns are the prepared dataset's, untouched
    full = prepared("compas")
    for name in table.column_names:
        assert table[name].equals(full[name]), name
    assert record["rows"] == full.num_rows
    # the default policies accept it: nothing is private or unlabelled
    assert record["dropped_columns"] == {"private": [], "unlabelled": []}
    table, _ = load_dataset(DatasetSpec(name="compas", exclude=["jailtime", "sex"]))
    assert table.column_names == [
        "age",
        "priors_count",
        "days_b_screening_arrest",
        "c_charge_degree",
        "race",
        "no_recid",
    ]
    assert read_roles(table).quasi_identifiers == [
        "age",
        "priors_count",
        "days_b_screening_arrest",
        "c_charge_degree",
    ]


@pytest.mark.parametrize(
    ("kwargs", "column", "rule"),
    [
        ({"quasi_identifiers": ["age", "salary"]}, "salary", "not a column of dataset compas"),
        ({"quasi_identifiers": ["age", "race"]}, "race", "not a quasi-identifier"),
        ({"exclude": ["nope"]}, "nope", "not a column of dataset compas"),
        ({"quasi_identifiers": ["age"], "exclude": ["age"]}, "age", "both"),
    ],
)
def test_bad_selection(kwargs: dict, column: str, rule: str) -> None:
    with pytest.raises(InputError) as e:
        load_dataset(DatasetSpec(name="compas", **kwargs))
    assert e.value.column == column
    assert rule in str(e.value)


_COLUMNS = {
    "x": {"role": "quasi_identifier"},
    "colour": {"role": "quasi_identifier", "kind": "nominal"},
    "g": {"role": "protected", "kind": "binary", "favoured": 1},
    "y": {"role": "label", "kind": "binary", "positive": 1},
    "note": {"role": "ignored", "kind": "nominal"},
}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_load_custom_file_relative_to_cwd(
    fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative ``dataset.path`` of a spec parsed from data (no spec file) is taken relative to
    the current directory and recorded as written. ``id`` (not listed in ``columns``) and
    ``note`` (role ``ignored``) are unlabelled: refused by default, dropped with
    ``unlabelled: drop``, passed on in file order with ``unlabelled: keep``."""
    raw = pa.table(
        {
            "id": [1, 2, 3, 4],
            "x": [1.5, 2.0, 3.5, 4.0],
            "colour": ["red", "blue", "red", "green"],
            "note": ["a", "b", "c", "d"],
            "g": [0, 1, 1, 0],
            "y": [0, 1, 1, 1],  # g = 1 has the higher positive rate, as declared
        }
    )
    (tmp_path / "d").mkdir()
    path = tmp_path / "d" / f"t.{fmt}"
    if fmt == "csv":
        pacsv.write_csv(raw, path)
    else:
        pq.write_table(raw, path)
    monkeypatch.chdir(tmp_path)
    written = f"d/t.{fmt}"

    with pytest.raises(SpecError) as e:  # the default: unlabelled: refuse
        load_dataset(DatasetSpec(path=written, format=fmt, columns=_COLUMNS))
    assert e.value.key == "dataset.unlabelled"
    assert "id, note" in e.value.rule

    spec = DatasetSpec(path=written, format=fmt, columns=_COLUMNS, unlabelled="drop")
    table, record = load_dataset(spec)
    assert table.column_names == ["x", "colour", "g", "y"]  # file order
    roles = read_roles(table)
    assert roles.quasi_identifiers == ["x", "colour"]
    assert roles["colour"].kind is Kind.NOMINAL
    assert roles.single(Role.PROTECTED).favoured == (1,)
    # as written in the spec: relative, never the local absolute path
    assert record["dataset"] == written
    assert str(tmp_path) not in str(record)
    assert record["rows"] == 4 and list(record["files"]) == [f"t.{fmt}"]
    assert record["dropped_columns"] == {"private": [], "unlabelled": ["id", "note"]}

    spec = DatasetSpec(path=written, format=fmt, columns=_COLUMNS, unlabelled="keep")
    table, record = load_dataset(spec)
    assert table.column_names == ["id", "x", "colour", "note", "g", "y"]
    roles = read_roles(table)
    assert roles["id"].role is Role.IGNORED and roles["id"].kind is Kind.NUMERIC
    assert roles["note"].role is Role.IGNORED and roles["note"].kind is Kind.NOMINAL
    assert table["id"].to_pylist() == [1, 2, 3, 4]
    assert table["note"].to_pylist() == ["a", "b", "c", "d"]
    assert record["dropped_columns"] == {"private": [], "unlabelled": []}

    # the same relative path from another directory is not found (it is not resolved against
    # anything but the cwd, --data-dir and $PRIVFAIR_DATA_DIR)
    monkeypatch.chdir(tmp_path / "d")
    monkeypatch.delenv("PRIVFAIR_DATA_DIR", raising=False)
    with pytest.raises(DataSourceError, match="not found"):
        load_dataset(DatasetSpec(path=written, format=fmt, columns=_COLUMNS, unlabelled="drop"))


def test_custom_file_missing_column(tmp_path: Path) -> None:
    pacsv.write_csv(pa.table({"x": [1, 2], "g": [0, 1], "y": [0, 1]}), tmp_path / "t.csv")
    spec = DatasetSpec(path=str(tmp_path / "t.csv"), format="csv", columns=_COLUMNS)
    with pytest.raises(InputError) as e:
        load_dataset(spec)
    assert e.value.column == "colour"


# --- validate_table --------------------------------------------------------------------------


def _table(columns: dict[str, list], roles: list[ColumnRole]) -> pa.Table:
    return attach_roles(pa.table(columns), TableRoles.of(roles))


_G = ColumnRole("g", Role.PROTECTED, Kind.BINARY, favoured=1)
_Y = ColumnRole("y", Role.LABEL, Kind.BINARY, positive=1)
_X = ColumnRole("x", Role.QUASI_IDENTIFIER, Kind.NUMERIC)


def test_valid_small_table_passes() -> None:
    """A valid table passes; the same table with one bad value does not, so passing is not
    vacuous (the rules do read this table's roles and values)."""
    good = {"x": [1.0, 2.0], "g": [0, 1], "y": [1, 0]}
    assert validate_table(_table(good, [_X, _G, _Y])) is None
    with pytest.raises(InputError, match="NaN or infinite") as e:
        validate_table(_table({**good, "x": [1.0, math.inf]}, [_X, _G, _Y]))
    assert e.value.column == "x"


def test_empty_table() -> None:
    t = _table({"x": pa.array([], pa.float64()), "g": pa.array([], pa.int8())}, [_X, _G])
    with pytest.raises(InputError, match="table is empty") as e:
        validate_table(t)
    assert e.value.column is None


def test_duplicate_column_names() -> None:
    t = pa.Table.from_arrays([pa.array([1, 2]), pa.array([3, 4])], names=["dup", "dup"])
    with pytest.raises(InputError, match="unique") as e:
        validate_table(t)
    assert e.value.column == "dup" and "'dup'" in str(e.value)


@pytest.mark.parametrize("bad", ["g", "y"])
def test_nulls_in_protected_or_label(bad: str) -> None:
    """A binary protected attribute or label is the microaggregation family's rule now: ingest's
    generic rules let the table through, the family refuses it when it runs."""
    cols = {"x": [1.0, 2.0, 3.0], "g": [0, 1, 1], "y": [1, 0, 1]}
    cols[bad] = [0, None, 1]
    table = _table(cols, [_X, _G, _Y])
    validate_table(table)
    with pytest.raises(InputError) as e:
        fair_mdav(table, FairMDAVParams(k=2))
    what = "protected attribute" if bad == "g" else "label"
    assert e.value.rule == f"the {what} has missing values"
    assert e.value.detail.startswith("1 of 3 rows have no value; drop or fill them first: set ")
    assert e.value.column == bad and f"'{bad}'" in str(e.value)


def test_numeric_qi_of_non_numeric_type() -> None:
    t = _table({"x": ["1", "2"], "g": [0, 1], "y": [1, 0]}, [_X, _G, _Y])
    with pytest.raises(InputError, match="numeric type") as e:
        validate_table(t)
    assert e.value.column == "x" and "'x'" in str(e.value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_or_inf_in_numeric_qi(value: float) -> None:
    t = _table({"x": [1.0, value], "g": [0, 1], "y": [1, 0]}, [_X, _G, _Y])
    with pytest.raises(InputError, match="NaN or infinite") as e:
        validate_table(t)
    assert e.value.column == "x" and "'x'" in str(e.value)


@pytest.mark.parametrize(
    ("bad", "values", "found"),
    [("g", [1, 1, 1], "found 1: [1]"), ("y", [0, 1, 2], "found 3: [0, 1, 2]")],
)
def test_protected_or_label_not_binary(bad: str, values: list[int], found: str) -> None:
    """As above: a family rule, checked when the component runs, not at ingest."""
    cols = {"x": [1.0, 2.0, 3.0], "g": [0, 1, 1], "y": [1, 0, 1]}
    cols[bad] = values
    table = _table(cols, [_X, _G, _Y])
    validate_table(table)
    with pytest.raises(InputError, match="must have exactly two distinct values") as e:
        fair_mdav(table, FairMDAVParams(k=2))
    assert e.value.column == bad and f"'{bad}'" in str(e.value)
    assert found in str(e.value)
