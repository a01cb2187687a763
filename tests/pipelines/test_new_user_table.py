"""What a new user's own table meets (issue 43, part 2): each message names what happened and
what to write, each option does what it says, through ``privfair run`` where it matters.

- a parameter naming a column the spec dropped says it was dropped, and by which policy;
- a null refusal names ``dataset.columns.<col>.nulls`` and its options;
- a column named like a nominal QI's one-hot column is refused at input (exit 2), not by a
  checker that raises;
- fewer rows than k is said before anything about the favoured value;
- ``parity_gap`` with ``direction: no_reversal`` fails a release whose gap changed sign;
- a protected column with no protected group is named in a warning, not blamed on the
  admissible attributes;
- the degenerate-classifier rule (``privfair.components.core.metrics.degenerate_classifier``);
- MST publishes an integer column on integer bins as integers;
- ``role: private`` in the spec's columns is the drop; a role from elsewhere is refused;
- ``dataset.csv`` reads a semicolon, latin-1 CSV, and its keys are checked.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from privfair.cli import main
from privfair.components.core.checks import check_parity_gap
from privfair.components.core.corruptions import break_parity_gap
from privfair.io.ingest import load_dataset
from privfair.schemas import contracts as C
from privfair.schemas.errors import InputError, SpecError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles
from privfair.schemas.spec import DatasetSpec


def _csv(rows: list[list], header: list[str], delimiter: str = ",") -> str:
    out = io.StringIO()
    w = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return out.getvalue()


def _people(n: int = 120, seed: int = 0) -> tuple[list[list], list[str]]:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        sex = str(rng.choice(["F", "M"]))
        rows.append(
            [
                int(rng.integers(18, 80)),
                int(rng.integers(1, 6)),
                str(rng.choice(["Nord", "Sud", "Est"])),
                sex,
                int(rng.random() < (0.2 if sex == "F" else 0.5)),
                "free text",
            ]
        )
    return rows, ["age", "rating", "region", "sex", "income", "notes"]


def _run(tmp_path: Path, spec: dict, text: str, capsys, name: str = "people.csv"):
    (tmp_path / name).write_bytes(text.encode(spec.pop("_encoding", "utf-8")))
    spec.setdefault("dataset", {}).setdefault("path", name)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    code = main(["run", str(path), "--store", str(tmp_path / "store"), "--quiet"])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


MST_COLUMNS = {
    "age": {"role": "admissible", "kind": "numeric"},
    "rating": {"role": "admissible", "kind": "numeric"},
    "region": {"role": "admissible", "kind": "nominal", "domain": ["Nord", "Sud", "Est"]},
    "sex": {"role": "protected", "kind": "binary", "favoured": "M", "domain": ["F", "M"]},
    "income": {"role": "label", "kind": "binary", "positive": 1, "domain": [0, 1]},
}
MST_BINS = {
    "age": {"start": 18, "stop": 80, "step": 1},
    "rating": {"start": 1, "stop": 7, "step": 2},
}


def _mst(columns: dict, **dataset) -> dict:
    return {
        "name": "people_mst",
        "dataset": {"columns": columns, **dataset},
        "component": {"name": "mst", "params": {"epsilon": 1.0, "bins": MST_BINS, "iters": 50}},
        "budget": {"epsilon": 5.0, "delta": 1e-9},
    }


# --- 1a: a column the spec dropped ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("dataset", "columns", "policy"),
    [
        (
            {"unlabelled": "drop"},
            {k: v for k, v in MST_COLUMNS.items() if k != "age"},
            "unlabelled: drop",
        ),
        ({"unlabelled": "drop", "exclude": ["age"]}, MST_COLUMNS, "dataset.exclude"),
    ],
)
def test_bins_of_a_dropped_column_say_it_was_dropped_and_by_what(
    tmp_path, capsys, dataset, columns, policy
):
    rows, header = _people()
    code, out, err = _run(tmp_path, _mst(columns, **dataset), _csv(rows, header), capsys)
    assert code == 2, err
    assert "bins.age" in err and "dropped" in err and policy in err, err
    assert "the table does not have" not in err


# --- 1b: a null refusal names the options --------------------------------------------------------
def test_a_refused_null_names_the_null_options(tmp_path, capsys):
    rows, header = _people(60)
    rows[3][1] = ""  # a null rating: a numeric QI of MDAV
    spec = {
        "name": "people_mdav",
        "dataset": {
            "unlabelled": "drop",
            "columns": {
                "age": {"role": "quasi_identifier", "kind": "numeric"},
                "rating": {"role": "quasi_identifier", "kind": "numeric"},
            },
        },
        "component": {"name": "mdav", "params": {"k": 5}},
    }
    code, out, err = _run(tmp_path, spec, _csv(rows, header), capsys)
    assert code == 2, err
    for needle in ("dataset.columns.rating.nulls", "drop", "impute", "refuse", "keep"):
        assert needle in err, (needle, err)
    spec["dataset"]["columns"]["rating"]["nulls"] = "refuse"
    code, out, err = _run(tmp_path, spec, _csv(rows, header), capsys)
    assert code == 2 and "dataset.columns.rating.nulls" in err and "impute" in err, err


# --- 1c: a one-hot name collision ----------------------------------------------------------------
@pytest.mark.parametrize("publish", ["schema", "onehot"])
def test_a_column_named_like_a_one_hot_level_is_refused_at_input(tmp_path, capsys, publish):
    rows, _ = _people(60)
    rows = [[r[0], r[2], round(0.01 * i, 2), r[3], r[4]] for i, r in enumerate(rows)]
    spec = {
        "name": "people_mdav",
        "dataset": {
            "columns": {
                "age": {"role": "quasi_identifier", "kind": "numeric"},
                "region": {"role": "quasi_identifier", "kind": "nominal"},
                "region=Nord": {"role": "quasi_identifier", "kind": "numeric"},
                "sex": {"role": "sensitive", "kind": "nominal"},
                "income": {"role": "label", "kind": "binary", "positive": 1},
            }
        },
        "component": {"name": "mdav", "params": {"k": 5, "publish": publish}},
    }
    header = ["age", "region", "region=Nord", "sex", "income"]
    code, out, err = _run(tmp_path, spec, _csv(rows, header), capsys)
    assert code == 2, err
    assert "column 'region=Nord'" in err and "one-hot" in err and "'region'" in err, err
    assert "checker raised" not in err


# --- 1d: fewer rows than k first -----------------------------------------------------------------
def test_fewer_rows_than_k_is_said_before_the_favoured_value(tmp_path, capsys):
    rows = [[20 + i, "F" if i < 4 else "M", int(i in (0, 1, 2, 4))] for i in range(8)]
    spec = {
        "name": "eight",
        "dataset": {
            "columns": {
                "age": {"role": "quasi_identifier", "kind": "numeric"},
                # the data favour F: a declared M is wrong too, but 8 rows < k = 10 comes first
                "sex": {"role": "protected", "kind": "binary", "favoured": "M"},
                "income": {"role": "label", "kind": "binary", "positive": 1},
            }
        },
        "component": {"name": "fair_mdav", "params": {"k": 10, "tau": 1.0}},
    }
    code, out, err = _run(tmp_path, spec, _csv(rows, ["age", "sex", "income"]), capsys)
    assert code == 2, err
    assert "fewer rows than k" in err and "k = 10" in err and "8 rows" in err, err
    assert "favoured" not in err


# --- 2: parity_gap direction ---------------------------------------------------------------------
def _parity_input() -> pa.Table:
    # protected F at 0.2, favoured M at 0.6: the input's signed gap is -0.4
    sex = ["F"] * 10 + ["M"] * 10
    y = [1, 1] + [0] * 8 + [1] * 6 + [0] * 4
    roles = TableRoles.of(
        [
            ColumnRole("sex", Role.PROTECTED, Kind.BINARY, favoured="M"),
            ColumnRole("y", Role.LABEL, Kind.BINARY, positive=1),
        ]
    )
    return attach_roles(pa.table({"sex": sex, "y": y}), roles)


def _published(rate_f: float, rate_m: float):
    import pandas as pd

    f = [1] * round(10 * rate_f) + [0] * (10 - round(10 * rate_f))
    m = [1] * round(10 * rate_m) + [0] * (10 - round(10 * rate_m))
    return pd.DataFrame({"sex": ["F"] * 10 + ["M"] * 10, "y": f + m})


def test_no_reversal_fails_a_gap_that_changed_sign_within_max():
    table = _parity_input()
    lax = C.ParityGap(max=0.2).completed(table)
    strict = C.ParityGap(max=0.2, direction="no_reversal").completed(table)
    assert lax.input_sign is None and strict.input_sign == -1
    reversed_ = _published(0.5, 0.4)  # +0.1: within max, the other way round
    assert check_parity_gap(lax, reversed_).passed  # today's behaviour, the default
    r = check_parity_gap(strict, reversed_)
    assert not r.passed and "reversed" in r.message, r.message
    assert check_parity_gap(strict, _published(0.4, 0.5)).passed  # same sign, within max
    assert check_parity_gap(strict, _published(0.5, 0.5)).passed  # parity reverses nothing
    assert not check_parity_gap(strict, _published(0.2, 0.6)).passed  # too large still fails
    # the default dumps as before the option existed; no_reversal carries its input sign
    assert "direction" not in lax.model_dump() and "input_sign" not in lax.model_dump()
    assert C.parse_guarantee(strict.model_dump()) == strict


def test_the_corruption_of_no_reversal_breaks_it_even_at_max_1():
    table = _parity_input()
    g = C.ParityGap(max=1.0, direction="no_reversal").completed(table)
    published = attach_roles(
        pa.table({"sex": _published(0.3, 0.4)["sex"], "y": _published(0.3, 0.4)["y"]}),
        TableRoles.of([ColumnRole("sex", Role.PROTECTED), ColumnRole("y", Role.LABEL)]),
    )
    assert check_parity_gap(g, published.to_pandas()).passed
    broken = break_parity_gap(g, table, {"data": published}, {}, np.random.default_rng(0))
    assert broken is not None
    assert not check_parity_gap(g, broken[0]["data"].to_pandas()).passed


def test_a_release_that_reverses_the_gap_fails_no_reversal_through_the_cli(tmp_path, capsys):
    """Fair-MDAV's positive correction at tau = 1 on German overshoots (the protected group
    ends above the favoured one): ``parity_gap`` alone passes, ``no_reversal`` stops it; the
    run's warning names the reversal and the option."""
    repo = Path(__file__).resolve().parents[2]
    base = yaml.safe_load((repo / "pipelines" / "specs" / "german_fair_mdav.yaml").read_text())
    base["component"]["params"] = {"k": 10, "tau": 1.0, "correction": "positive"}
    results = {}
    for direction in ("any", "no_reversal"):
        spec = dict(base, guarantees=[{"kind": "parity_gap", "max": 0.5, "direction": direction}])
        folder = tmp_path / direction
        folder.mkdir()
        path = folder / "spec.yaml"
        path.write_text(yaml.safe_dump(spec))
        code = main(["run", str(path), "--store", str(folder / "store"), "--quiet"])
        cap = capsys.readouterr()
        results[direction] = (code, cap.out, cap.err)
    code, out, err = results["any"]
    assert code == 0, err
    (warning,) = [x for x in out.splitlines() if "the gap reverses" in x]
    assert "reversal" in warning and "direction: no_reversal" in warning
    code, out, err = results["no_reversal"]
    assert code == 1, out + err
    assert "parity_gap" in out + err


# --- 3: MST's parity n/a says why ----------------------------------------------------------------
def test_a_protected_column_without_a_group_is_named_not_the_admissible_ones(tmp_path, capsys):
    rows, header = _people()
    columns = dict(MST_COLUMNS, sex={"role": "protected", "kind": "binary", "domain": ["F", "M"]})
    code, out, err = _run(tmp_path, _mst(columns, unlabelled="drop"), _csv(rows, header), capsys)
    assert code == 0, err
    assert "warning: protected column 'sex' has no protected group" in out, out
    assert "dataset.columns.sex.favoured" in out
    (line,) = [x for x in out.splitlines() if "in the synthetic table:" in x]
    assert "need an admissible attribute in the spec;" not in line, line


# --- 5: MST integer bins --------------------------------------------------------------------------
def test_mst_publishes_an_integer_column_on_integer_bins_as_integers(tmp_path, capsys):
    rows, header = _people()
    code, out, err = _run(
        tmp_path, _mst(MST_COLUMNS, unlabelled="drop"), _csv(rows, header), capsys
    )
    assert code == 0, err
    data = tmp_path / "store" / "people_mst" / "latest" / "shared" / "data.parquet"
    t = pq.read_table(data)
    for c in ("age", "rating"):  # rating's bins are 2 wide: still whole numbers
        assert pa.types.is_integer(t.schema.field(c).type), t.schema
        assert set(t.column(c).to_pylist()) <= set(range(18 if c == "age" else 1, 80))
    # what ingest dropped is said in the owner's input only: no column name in the data's metadata
    assert b"privfair.dropped_columns" not in (t.schema.metadata or {})


# --- 6: role private ----------------------------------------------------------------------------
def test_a_private_role_from_the_table_itself_is_still_refused():
    roles = TableRoles.of(
        [
            ColumnRole("id", Role.PRIVATE, Kind.NOMINAL),
            ColumnRole("x", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
        ]
    )
    table = attach_roles(pa.table({"id": ["a", "b"], "x": [1.0, 2.0]}), roles)
    ds = DatasetSpec(source={"kind": "memory", "dataset": "t"})
    with pytest.raises(SpecError) as e:
        load_dataset(ds, table=table)
    assert e.value.key == "dataset.private" and "id" in e.value.rule
    # the spec declaring it private is the drop
    ds = DatasetSpec(source={"kind": "memory", "dataset": "t"}, columns={"id": {"role": "private"}})
    out, record = load_dataset(ds, table=table)
    assert out.column_names == ["x"] and record["dropped_columns"]["private"] == ["id"]


# --- 7: CSV options -------------------------------------------------------------------------------
def test_a_semicolon_latin1_csv_is_read_with_dataset_csv(tmp_path):
    rows, header = _people(30)
    rows[4][2] = "Nörd; x"  # a quoted delimiter and a non-ASCII letter
    (tmp_path / "p.csv").write_bytes(_csv(rows, header, delimiter=";").encode("latin-1"))
    columns = {
        "age": {"role": "quasi_identifier"},
        "region": {"role": "quasi_identifier", "kind": "nominal"},
    }
    with pytest.raises((InputError, SpecError)):
        load_dataset(DatasetSpec(path=str(tmp_path / "p.csv"), columns=columns, unlabelled="drop"))
    ds = DatasetSpec(
        path=str(tmp_path / "p.csv"),
        columns=columns,
        unlabelled="drop",
        csv={"delimiter": ";", "encoding": "latin-1"},
    )
    table, _ = load_dataset(ds)
    assert table.num_rows == 30 and table.column("region")[4].as_py() == "Nörd; x"


def test_a_file_source_csv_takes_the_options_too(tmp_path):
    rows, header = _people(20)
    (tmp_path / "p.csv").write_text(_csv(rows, header, delimiter="|"))
    ds = DatasetSpec(
        source={"kind": "file", "url": str(tmp_path / "p.csv")},
        columns={"age": {"role": "quasi_identifier"}},
        unlabelled="drop",
        csv={"delimiter": "|"},
    )
    table, _ = load_dataset(ds)
    assert table.column_names == ["age"] and table.num_rows == 20


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"separator": ";"}, "dataset.csv.separator"),
        ({"delimiter": ";;"}, "dataset.csv.delimiter"),
        ({"quote": "ab"}, "dataset.csv.quote"),
        ({"encoding": "no-such-codec"}, "dataset.csv.encoding"),
    ],
)
def test_dataset_csv_keys_are_checked(tmp_path, capsys, options, key):
    rows, header = _people(20)
    spec = {
        "name": "people_mdav",
        "dataset": {
            "unlabelled": "drop",
            "csv": options,
            "columns": {"age": {"role": "quasi_identifier"}},
        },
        "component": {"name": "mdav", "params": {"k": 5}},
    }
    code, out, err = _run(tmp_path, spec, _csv(rows, header), capsys)
    assert code == 2, err
    assert key in err, err


# --- 4: the degenerate classifier ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("metrics", "degenerate"),
    [
        ({"positive_rate": 0.0, "accuracy": 0.76, "precision": 0.0}, True),
        ({"positive_rate": 0.005, "accuracy": 0.76, "precision": 1.0}, True),  # was not flagged
        ({"positive_rate": 0.995, "accuracy": 0.24, "precision": 0.24}, True),
        # 10 % predicted positive, accuracy 0.765 against a majority rate of 0.76: no better
        ({"positive_rate": 0.1, "accuracy": 0.765, "majority_rate": 0.76}, True),
        ({"positive_rate": 0.2, "accuracy": 0.85, "precision": 0.7}, False),
        ({"positive_rate": 0.02, "accuracy": 0.9, "majority_rate": 0.8}, False),
    ],
)
def test_the_degenerate_rule(metrics, degenerate):
    from privfair.components.core.metrics import degenerate_classifier

    assert (degenerate_classifier(metrics) is not None) == degenerate
