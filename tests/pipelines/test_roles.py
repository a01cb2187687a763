"""Roles mean what they say, end to end through ``privfair run`` / ``privfair validate``.

A loan-application CSV as an analyst would hand it over: an ``application_id`` (role
``private``: never published), income (numeric QI), region (nominal QI), gender (protected),
approved (label, "yes"/"no"), and free-text ``notes`` with missing values (role ``sensitive``,
passed through). What the spec does not say about a column is refused, not guessed:

* a column the spec gives role ``private`` is dropped (one whose role comes from elsewhere is
  refused unless ``private: drop``); dropped, it is in no file of the release and the release
  guarantees so (``roles.private columns_absent``);
* a column ``columns`` does not list is refused unless ``unlabelled: drop|keep``; kept, it is
  published unchanged (C6);
* a declared value the data do not hold, a missing protected value or a favoured value the
  data contradict is an exit 2 that says what the data hold.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _shared import read_latest

from privfair.cli import main

N = 40
IDS = [f"APP-{58213 + 97 * i}" for i in range(N)]
PIPE = "applications"


# --- the data and the spec -----------------------------------------------------------------------
def applications(
    n: int = N,
    *,
    branch: bool = False,
    missing_gender: tuple[int, ...] = (),
    approved=None,
    gender=None,
) -> str:
    """The CSV: men (even rows) approved 70% of the time, women 30% (gender = M is the group
    the data favour); ``notes`` is empty on every fifth row (from row 3); ``branch`` an extra
    column the spec does not list."""
    approved = approved or (lambda i: "yes" if (i // 2) % 10 < (7 if i % 2 == 0 else 3) else "no")
    gender = gender or (lambda i: "M" if i % 2 == 0 else "F")
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    header = ["application_id", "income", "region", "gender", "approved", "notes"]
    w.writerow(header + (["branch"] if branch else []))
    for i in range(n):
        row = [
            IDS[i],
            20_000 + (i * 7_919 % 61) * 1_000,
            ("north", "south", "east")[i * 5 % 3],
            "" if i in missing_gender else gender(i),
            approved(i),
            "" if i % 5 == 3 else f"called back on day {i}, documents complete",
        ]
        w.writerow(row + ([f"BR-{i % 4}{i % 7}"] if branch else []))
    return out.getvalue()


def spec_text(
    *,
    private: str | None = None,
    unlabelled: str | None = None,
    favoured: str = "M",
    positive: str = '"yes"',
    params: str = "{k: 4, tau: 1.0}",
) -> str:
    """The spec, as YAML text (so that quoting is what the test writes)."""
    policy = "".join(
        f"  {key}: {value}\n"
        for key, value in (("private", private), ("unlabelled", unlabelled))
        if value is not None
    )
    return (
        f"name: {PIPE}\n"
        "dataset:\n"
        "  path: applications.csv\n"
        f"{policy}"
        "  columns:\n"
        "    application_id: {role: private, kind: nominal}\n"
        "    income: {role: quasi_identifier, kind: numeric}\n"
        "    region: {role: quasi_identifier, kind: nominal}\n"
        f"    gender: {{role: protected, kind: binary, favoured: {favoured}}}\n"
        f"    approved: {{role: label, kind: binary, positive: {positive}}}\n"
        "    notes: {role: sensitive, kind: nominal}\n"
        "component:\n"
        "  name: fair_mdav\n"
        f"  params: {params}\n"
    )


def project(tmp_path: Path, csv_text: str, spec: str) -> Path:
    """The CSV and the spec beside it; returns the spec's path."""
    folder = tmp_path / "project"
    folder.mkdir(exist_ok=True)
    (folder / "applications.csv").write_text(csv_text)
    (folder / "spec.yaml").write_text(spec)
    return folder / "spec.yaml"


def run(tmp_path: Path, spec: Path, capsys) -> tuple[int, str, str]:
    code = main(["run", str(spec), "--store", str(tmp_path / "store")])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def validate(folder: Path, spec: Path, capsys) -> tuple[int, str]:
    """``privfair validate`` on a release; the input is found in the spec's folder (the manifest
    records the dataset path as written in the spec: relative)."""
    code = main(["validate", str(folder), "--data-dir", str(spec.parent)])
    cap = capsys.readouterr()
    return code, cap.out + cap.err


def release_folder(tmp_path: Path) -> Path:
    base = tmp_path / "store" / PIPE
    return base / read_latest(base)


def manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def assert_refused(tmp_path: Path, spec: Path, capsys, *needles: str) -> str:
    code, out, err = run(tmp_path, spec, capsys)
    assert code == 2, err + out
    assert err.startswith("privfair: error:") and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    store = tmp_path / "store"
    assert not store.exists() or not list(store.rglob("manifest.json"))
    return err


def failed_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("FAIL")]


def rewrite(path: Path, change) -> None:
    """Rewrite a Parquet file through ``change(table) -> table``, keeping its metadata."""
    table = pq.read_table(path)
    pq.write_table(change(table), path)


def strings_in(path: Path) -> set[str]:
    """Every text a file holds: a Parquet file's column names, cells (its pages are compressed,
    so a byte search would miss them) and metadata; any other file's text."""
    if path.suffix != ".parquet":
        return {path.read_bytes().decode("utf-8", errors="replace")}
    table = pq.read_table(path)
    out = set(table.column_names)
    for col in table.columns:
        out |= {str(v) for v in col.to_pylist() if v is not None}
    for meta in [table.schema.metadata or {}, *(f.metadata or {} for f in table.schema)]:
        out |= {x.decode("utf-8", errors="replace") for kv in meta.items() for x in kv}
    return out


def holds(path: Path, needle: str) -> bool:
    return any(needle in s for s in strings_in(path)) or needle.encode() in path.read_bytes()


# --- (a) private columns ---------------------------------------------------------------------------
def test_a_column_the_spec_declares_private_is_dropped_without_private_drop(tmp_path, capsys):
    """``role: private`` in the spec's own ``columns`` is the drop (issue 43): the release
    publishes without it and guarantees it absent; ``private: drop`` is not needed."""
    spec = project(tmp_path, applications(), spec_text())
    code, out, err = run(tmp_path, spec, capsys)
    assert code == 0, err + out
    folder = release_folder(tmp_path)
    assert "application_id" not in pq.read_schema(folder / "shared" / "data.parquet").names
    man = manifest(folder)
    assert man["input"]["dropped_columns"]["private"] == ["application_id"]
    absent = [g for g in man["contract"] if g["kind"] == "columns_absent"]
    assert absent and absent[0]["columns"] == ["application_id"]


def test_a_dropped_private_column_is_in_no_file_of_the_release(tmp_path, capsys):
    spec = project(tmp_path, applications(), spec_text(private="drop"))
    code, out, err = run(tmp_path, spec, capsys)
    assert code == 0, err + out
    assert out.startswith(f"published: {PIPE} ")
    folder = release_folder(tmp_path)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    names = {p.relative_to(folder).as_posix() for p in files}
    assert {
        "manifest.json",
        "report.html",
        "shared/data.parquet",
        "internal/lineage.parquet",
    } <= names

    # the control: the search does find what a release holds (a note, in a compressed page)
    assert holds(folder / "shared" / "data.parquet", "called back on day 7, documents complete")
    # no value of the column anywhere; its name is published only where the release says what
    # it guarantees (the spec and contract in manifest.json, the contract copy in data.parquet's
    # metadata, the validation results): never as a column
    for path in files:
        for value in (IDS[0], IDS[17], IDS[-1], "APP-"):
            assert not holds(path, value), f"{path.relative_to(folder)} holds {value}"
        if path.suffix == ".parquet":  # no output or sidecar has the column
            assert "application_id" not in pq.read_schema(path).names, path

    man = manifest(folder)
    assert man["input"]["dropped_columns"] == {"private": ["application_id"], "unlabelled": []}
    absent = [g for g in man["contract"] if g["kind"] == "columns_absent"]
    assert absent == [
        {"id": "roles.private", "kind": "columns_absent", "columns": ["application_id"]}
    ]
    (result,) = [r for r in man["validation"]["results"] if r["kind"] == "columns_absent"]
    assert result["id"] == "roles.private" and result["passed"] is True
    assert "roles.private" in (folder / "report.html").read_text()


# --- (b) the guarantee is checked on the files ----------------------------------------------------
def test_putting_the_private_column_back_fails_validate(tmp_path, capsys):
    spec = project(tmp_path, applications(), spec_text(private="drop"))
    assert run(tmp_path, spec, capsys)[0] == 0
    folder = release_folder(tmp_path)
    code, out = validate(folder, spec, capsys)
    assert code == 0 and not failed_lines(out), out  # the control: the release as published

    rows = pq.read_metadata(folder / "shared" / "data.parquet").num_rows
    rewrite(
        folder / "shared" / "data.parquet",
        lambda t: t.append_column("application_id", pa.array(IDS[:rows])),
    )
    code, out = validate(folder, spec, capsys)
    assert code == 1, out
    guarantees = [line for line in failed_lines(out) if not line.startswith("FAIL  schema")]
    assert len(guarantees) == 1, out
    assert "roles.private" in guarantees[0] and "columns_absent" in guarantees[0]
    assert "application_id" in guarantees[0]


# --- (c) unlabelled columns -----------------------------------------------------------------------
def test_an_unlisted_column_is_refused_by_default(tmp_path, capsys):
    spec = project(tmp_path, applications(branch=True), spec_text(private="drop"))
    assert_refused(tmp_path, spec, capsys, "spec key 'dataset.unlabelled'", "branch")


def test_a_kept_unlisted_column_is_published_unchanged(tmp_path, capsys):
    spec = project(
        tmp_path, applications(branch=True), spec_text(private="drop", unlabelled="keep")
    )
    code, out, err = run(tmp_path, spec, capsys)
    assert code == 0, err + out
    folder = release_folder(tmp_path)
    data = pq.read_table(folder / "shared" / "data.parquet")
    row_id = pq.read_table(folder / "internal" / "lineage.parquet").column("row_id").to_pylist()
    branch = [row[6] for row in csv.reader(io.StringIO(applications(branch=True)))][1:]
    assert data.column("branch").to_pylist() == [branch[i] for i in row_id]
    (c6,) = [g for g in manifest(folder)["contract"] if g["id"] == "C6"]
    assert "branch" in c6["columns"]
    assert manifest(folder)["input"]["dropped_columns"]["unlabelled"] == []

    rewrite(
        folder / "shared" / "data.parquet",
        lambda t: t.set_column(
            t.schema.get_field_index("branch"),
            t.schema.field("branch"),
            pa.array(["BR-99", *t.column("branch").to_pylist()[1:]]),
        ),
    )
    code, out = validate(folder, spec, capsys)
    assert code == 1, out
    (line,) = [line for line in failed_lines(out) if not line.startswith("FAIL  schema")]
    assert "C6" in line and "attributes_preserved" in line


def test_a_dropped_unlisted_column_is_not_published(tmp_path, capsys):
    spec = project(
        tmp_path, applications(branch=True), spec_text(private="drop", unlabelled="drop")
    )
    code, out, err = run(tmp_path, spec, capsys)
    assert code == 0, err + out
    folder = release_folder(tmp_path)
    assert "branch" not in pq.read_schema(folder / "shared" / "data.parquet").names
    assert manifest(folder)["input"]["dropped_columns"]["unlabelled"] == ["branch"]


# --- (d) missing free text ------------------------------------------------------------------------
def test_missing_free_text_stays_missing(tmp_path, capsys):
    spec = project(tmp_path, applications(), spec_text(private="drop"))
    assert run(tmp_path, spec, capsys)[0] == 0
    folder = release_folder(tmp_path)
    notes = pq.read_table(folder / "shared" / "data.parquet").column("notes")
    assert pa.types.is_string(notes.type) or pa.types.is_large_string(notes.type)
    row_id = pq.read_table(folder / "internal" / "lineage.parquet").column("row_id").to_pylist()
    missing = [i % 5 == 3 for i in row_id]
    assert sum(missing) > 0
    assert [v is None for v in notes.to_pylist()] == missing
    assert "" not in notes.to_pylist()


# --- (e)-(g) declared values ----------------------------------------------------------------------
def test_an_unquoted_yes_is_explained(tmp_path, capsys):
    spec = project(tmp_path, applications(), spec_text(private="drop", positive="yes"))
    assert_refused(
        tmp_path,
        spec,
        capsys,
        "column 'approved'",
        "the declared positive value True does not occur",
        "values: ['no', 'yes']",
        "quote the value",
    )


def test_a_missing_protected_value_is_counted(tmp_path, capsys):
    spec = project(tmp_path, applications(missing_gender=(5, 12)), spec_text(private="drop"))
    assert_refused(
        tmp_path,
        spec,
        capsys,
        "column 'gender'",
        "the protected attribute has missing values",
        f"2 of {N} rows have no value; drop or fill them first",
    )


def test_a_favoured_value_not_in_the_data_lists_the_values(tmp_path, capsys):
    spec = project(tmp_path, applications(), spec_text(private="drop", favoured="X"))
    assert_refused(
        tmp_path,
        spec,
        capsys,
        "column 'gender'",
        "the declared favoured value 'X' does not occur",
        "values: ['F', 'M']",
    )


def test_the_wrong_favoured_group_is_refused_with_the_rates(tmp_path, capsys):
    spec = project(tmp_path, applications(), spec_text(private="drop", favoured="F"))
    assert_refused(
        tmp_path,
        spec,
        capsys,
        "column 'gender'",
        "the declared favoured value 'F' is not the group the data favour",
        "'F': 0.300",
        "'M': 0.700",
        "favoured: 'M'",
        "favoured: auto",
    )


def test_favoured_auto_follows_the_data(tmp_path, capsys):
    spec = project(tmp_path, applications(), spec_text(private="drop", favoured="auto"))
    code, out, err = run(tmp_path, spec, capsys)
    assert code == 0, err + out
    metrics = manifest(release_folder(tmp_path))["metrics"]
    assert metrics["favoured_value"] == "M"
    assert metrics["parity_before"] == pytest.approx(0.3 - 0.7)


# --- (h) what the protection did, per group -------------------------------------------------------
def test_a_reversed_gap_and_the_drops_are_reported(tmp_path, capsys):
    """22 men, 18 women, (1,1)-fairlets: four men are dropped; every woman whose fairlet
    partner was approved is relabelled, which lifts the women's rate above the men's."""
    text = applications(
        gender=lambda i: "M" if i % 2 == 0 or i >= 36 else "F",
        approved=lambda i: "yes" if (i % 2 == 0 or i >= 36) == (i % 3 != 0) else "no",
    )
    spec = project(tmp_path, text, spec_text(private="drop", params="{k: 2, tau: 1.0}"))
    code, out, err = run(tmp_path, spec, capsys)
    assert code == 0, err + out
    lines = out.splitlines()
    (reverse,) = [x for x in lines if x.strip().startswith("warning: the gap reverses")]
    assert "'gender'" in reverse
    metrics = manifest(release_folder(tmp_path))["metrics"]
    dropped = metrics["dropped_by_group"]
    assert sum(dropped.values()) == metrics["dropped_rows"] > 0
    (headline,) = [x for x in lines if "rows dropped per protected group:" in x]
    assert all(f"{g}={n}" in headline for g, n in dropped.items())
    assert dropped == {"M": 4, "F": 0}
    assert metrics["parity_before"] < 0 < metrics["parity_after"]
    assert "  group the published labels favour: F" in lines
    # four of 22 men is above the default max_drop_share (5%): said too
    assert "  warning: 4 of 22 rows with gender = 'M' dropped (18.2%, above 5%)" in lines
