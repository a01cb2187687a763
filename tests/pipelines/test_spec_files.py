"""Spec and data files that are not what they should be: a spec that is not UTF-8 or names a key
twice, a CSV that is not UTF-8, are clear errors (exit 2, the file named, no traceback); empty
CSV cells are nulls."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from _shared import TOY_COLUMNS, run_cli

from privfair.io.ingest import load_dataset
from privfair.schemas.errors import SpecError
from privfair.schemas.spec import DatasetSpec, load_spec

SPECS = Path(__file__).resolve().parents[2] / "pipelines" / "specs"
GERMAN = SPECS / "german_fair_mdav.yaml"


def csv_bytes(n: int = 30) -> bytes:
    rows = ["x,c,PA,y"]
    for i in range(n):
        rows.append(f"{i % 7}.5,{'abc'[i % 3]},{int(i % 3 != 0)},{(i // 2) % 2}")
    return ("\n".join(rows) + "\n").encode()


def test_a_spec_that_is_not_utf8_is_a_spec_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "latin1.yaml"
    text = GERMAN.read_text().replace("German Credit", "Crédit allemand")
    spec.write_bytes(text.encode("latin-1"))
    with pytest.raises(SpecError) as e:
        load_spec(spec)
    assert e.value.source == str(spec) and "must be UTF-8" in e.value.rule

    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 2, err + out
    assert err.startswith(f"privfair: error: {spec}: ") and "must be UTF-8" in err
    assert "0xe9" in err and "line 3" in err
    assert not store.exists()


@pytest.mark.parametrize(
    "old, new, key",
    [
        ("schedule:", "name: german_again\nschedule:", "name"),
        ("    k: 10\n", "    k: 10\n    k: 5\n", "component.params.k"),
    ],
    ids=["top-level", "nested"],
)
def test_a_duplicated_yaml_key_is_a_spec_error_naming_it(
    old: str, new: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = GERMAN.read_text()
    assert text.count(old) == 1
    spec = tmp_path / "dup.yaml"
    spec.write_text(text.replace(old, new))
    with pytest.raises(SpecError) as e:
        load_spec(spec)
    assert e.value.key == key and "duplicated key" in e.value.rule

    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(tmp_path / "store"))
    assert code == 2, err + out
    assert f"spec key '{key}': duplicated key" in err and str(spec) in err


def write_csv_spec(tmp_path: Path, data: bytes) -> Path:
    (tmp_path / "input.csv").write_bytes(data)
    spec = {
        "name": "csv_files",
        "dataset": {"path": "input.csv", "format": "csv", "columns": TOY_COLUMNS},
        "component": {"name": "fair_mdav", "params": {"k": 3, "tau": 1.0}},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_a_csv_that_is_not_utf8_is_an_input_error_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = csv_bytes().replace(b",b,", ",caf\u00e9,".encode("latin-1"), 1)
    spec = write_csv_spec(tmp_path, data)
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "run", str(spec), "--store", str(store))
    assert code == 2, err + out
    assert err.startswith("privfair: error:"), err
    assert "input.csv is not UTF-8 text" in err and "0xe9" in err and "Traceback" not in err
    assert not store.exists()


def test_empty_csv_cells_of_string_columns_are_nulls(tmp_path: Path) -> None:
    data = b"x,c,note\n1.5,a,\n2.5,,hello\n3.5,b,\n"
    (tmp_path / "t.csv").write_bytes(data)
    ds = DatasetSpec(
        path=str(tmp_path / "t.csv"),
        columns={
            "x": {"role": "quasi_identifier", "kind": "numeric"},
            "c": {"role": "quasi_identifier", "kind": "nominal"},
            "note": {"role": "public", "kind": "nominal"},
        },
    )
    table, info = load_dataset(ds)
    assert table["note"].to_pylist() == [None, "hello", None]
    assert table["c"].to_pylist() == ["a", None, "b"]
    assert info["dataset"] == "t.csv"  # an absolute path is recorded by its file name


def test_a_column_name_too_long_for_yaml_is_named(tmp_path):
    """A plain YAML key over 1024 characters is a syntax error: the message names the column
    (its start) and the limit instead of a bare YAML error."""
    from privfair.schemas.errors import SpecError
    from privfair.spec.catalogue import load_spec as load

    name = "c" * 1100
    spec = tmp_path / "long.yaml"
    spec.write_text(
        "name: longcol\ndataset:\n  path: x.csv\n  columns:\n"
        f"    {name}: {{role: quasi_identifier}}\n"
        "component: {name: mdav, params: {k: 2}}\n"
    )
    with pytest.raises(SpecError) as e:
        load(spec)
    assert "ccccc" in str(e.value) and "1024" in str(e.value) and e.value.key == "line 5"
