"""``privfair validate`` checks a release's bytes, not only its values (issue 43): a shareable
copy rewritten with the same values (another Parquet compression) is not the release that was
published; ``privfair verify`` refuses the exported copy, and ``validate`` refuses the owner's
release the same way (exit 2: bad data, not a broken guarantee), naming the file."""

from __future__ import annotations

import shutil

import pyarrow.parquet as pq
import yaml
from _partitioned import write_days
from _shared import TOY_COLUMNS, read_latest, run_cli


def _release(tmp_path, capsys):
    write_days(tmp_path, 2)
    spec = {
        "name": "toy_bytes",
        "dataset": {
            "path": "submissions.csv",
            "columns": {**TOY_COLUMNS, "submitted": {"role": "ignored"}},
            "unlabelled": "drop",
        },
        "component": {"name": "mdav", "params": {"k": 5}},
    }
    path = tmp_path / "toy_bytes.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    store = tmp_path / "store"
    code, _, err = run_cli(capsys, "run", str(path), "--store", str(store))
    assert code == 0, err
    return store / "toy_bytes" / read_latest(store / "toy_bytes")


def test_a_copy_rewritten_with_the_same_values_fails_validate_as_verify_does(tmp_path, capsys):
    folder = _release(tmp_path, capsys)
    assert run_cli(capsys, "validate", str(folder), "--data-dir", str(tmp_path))[0] == 0
    data = folder / "shared" / "data.parquet"
    table = pq.read_table(data)
    data.chmod(0o644)
    pq.write_table(table, data, compression="gzip")  # the same values, other bytes
    assert pq.read_table(data).equals(table)

    code, out, err = run_cli(capsys, "export", str(folder), str(tmp_path / "copy"))
    assert code == 2 and "data.parquet" in err
    shutil.copytree(folder / "shared", tmp_path / "copy")
    code, _, verify_err = run_cli(capsys, "verify", str(tmp_path / "copy"))
    assert code == 2 and "data.parquet checksum differs" in verify_err

    code, out, err = run_cli(capsys, "validate", str(folder), "--data-dir", str(tmp_path))
    assert code == 2, out + err
    assert str(data) in err and "shared/data.parquet is not the file that was published" in err
    assert "privfair verify" in err
    # through latest too
    code, _, err = run_cli(
        capsys, "validate", str(folder.parent / "latest"), "--data-dir", str(tmp_path)
    )
    assert code == 2 and "shared/data.parquet" in err


def test_a_file_added_to_the_copy_fails_validate(tmp_path, capsys):
    folder = _release(tmp_path, capsys)
    (folder / "shared" / "notes.txt").write_text("not published")
    code, _, err = run_cli(capsys, "validate", str(folder), "--data-dir", str(tmp_path))
    assert code == 2 and "shared/notes.txt" in err and "not listed" in err
