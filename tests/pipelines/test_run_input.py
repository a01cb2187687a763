"""``privfair run SPEC --input FILE``: the rows of a file, the roles of the spec (issue 45).

* a spec whose dataset gives only roles (``dataset: {columns: ...}``) is released from a Parquet
  file with the version ``privfair.api.run`` gives the same rows as a pandas frame: which
  dataset a frame holds is accounting, not what is published;
* the ledger accounts the rows against the file (``file:<real path>``), so the same file under
  another spelling is the same dataset;
* a missing file, and a spec reading a built-in dataset whose roles it does not give, exit 2
  naming the file / the key.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from _shared import run_cli

from privfair import api

SPEC = {
    "name": "rows_handed_over",
    "dataset": {
        "columns": {
            "age": {"role": "quasi_identifier", "kind": "numeric"},
            "sex": {"role": "protected", "kind": "nominal", "favoured": "M"},
            "income": {"role": "label", "kind": "binary", "positive": 1},
        }
    },
    "component": {"name": "mdav", "params": {"k": 5}},
}


@pytest.fixture
def rows(tmp_path):
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 80, 200),
            "sex": np.tile(["F", "M"], 100),
            "income": rng.integers(0, 2, 200),
        }
    )
    path = tmp_path / "rows.parquet"
    frame.to_parquet(path, index=False)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    return frame, path, spec


def test_a_file_of_rows_is_released_with_the_version_of_the_same_frame(rows, tmp_path, capsys):
    frame, path, spec = rows
    code, out, err = run_cli(
        capsys, "run", str(spec), "--input", str(path), "--store", str(tmp_path / "cli")
    )
    assert code == 0, err
    status, _, version = out.splitlines()[0].partition(": ")[2].partition(" ")
    assert out.startswith("published: rows_handed_over ")
    same = api.run(spec, frame, store=tmp_path / "api", dataset="people")
    assert same.version == version.strip()


def test_the_same_file_under_another_spelling_is_one_dataset(rows, tmp_path, capsys, monkeypatch):
    _, path, spec = rows
    code, _, err = run_cli(
        capsys, "run", str(spec), "--input", str(path), "--store", str(tmp_path / "a")
    )
    assert code == 0, err
    stricter = tmp_path / "k7.yaml"
    stricter.write_text(yaml.safe_dump({**SPEC, "component": {"name": "mdav", "params": {"k": 7}}}))
    link = tmp_path / "same_rows.parquet"
    link.symlink_to(path)
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(
        capsys, "run", str(stricter), "--input", "same_rows.parquet", "--store", str(tmp_path / "b")
    )
    # another grouping of the same people, another store, another spelling: refused
    assert code == 2, err
    assert "republish" in err, err


def test_a_missing_file_exits_2_naming_it(rows, tmp_path, capsys):
    _, _, spec = rows
    code, _, err = run_cli(
        capsys,
        "run",
        str(spec),
        "--input",
        str(tmp_path / "absent.parquet"),
        "--store",
        str(tmp_path / "s"),
    )
    assert code == 2
    assert "absent.parquet" in err and "not found" in err


def test_a_built_in_spec_without_roles_exits_2_naming_the_key(rows, tmp_path, capsys):
    from privfair.spec.settings import DEFAULT_SPECS_DIR

    _, path, _ = rows
    code, _, err = run_cli(
        capsys,
        "run",
        f"{DEFAULT_SPECS_DIR}/german_fair_mdav.yaml",
        "--input",
        str(path),
        "--store",
        str(tmp_path / "s"),
    )
    assert code == 2
    assert "dataset.name" in err
