"""The Python API (``privfair.api``): a release of a table held in memory, its typed result,
re-validation against the same table, export, evaluation, and the README's "Python API"
example executed as printed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from privfair import api
from privfair.components.core.registry import algorithm
from privfair.schemas.errors import ContractViolation, DataSourceError, InputError, SpecError
from privfair.schemas.roles import read_roles
from tests._shared import run_cli

ROOT = Path(__file__).resolve().parents[2]

COLUMNS = {
    "x": {"role": "quasi_identifier", "kind": "numeric"},
    "c": {"role": "quasi_identifier", "kind": "nominal"},
    "PA": {"role": "protected", "kind": "binary", "favoured": 1},
    "y": {"role": "label", "kind": "binary", "positive": 1},
}


def frame(n: int = 40, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "x": rng.integers(18, 70, n),
            "c": rng.choice(["a", "b", "c"], n),
            "PA": np.tile([0, 1], n // 2),
            "y": np.tile([0, 0, 1, 1], n // 4),
        }
    )


def toy(**more) -> object:
    more.setdefault("dataset_name", "toy")
    return api.spec("toy", component="mdav", params={"k": 4}, columns=COLUMNS, **more)


def test_a_frame_is_released_and_read_back_typed(tmp_path):
    df = frame()
    rel = api.run(toy(), df, store=tmp_path)
    assert isinstance(rel, api.Release)
    assert (rel.status, rel.passed, rel.pipeline) == ("published", True, "toy")
    assert rel.verdicts and all(isinstance(v, api.Verdict) and v.passed for v in rel.verdicts)
    assert {v.kind for v in rel.verdicts} >= {"k_anonymity", "group_size_range"}
    assert Path(rel.report).is_file() and Path(rel.shared, "manifest.json").is_file()
    data = rel.table()
    assert data.num_rows == len(df)
    assert read_roles(data).names == ["x", "c", "PA", "y"]  # roles travel with the table
    assert rel.to_pandas().groupby(["x", "c"]).size().min() >= 4
    assert set(rel.outputs) == {"data"}
    assert list(rel.headline) == [m.label for m in algorithm("mdav").headline]
    assert rel.headline["input rows"] == len(df) and rel.headline["groups"] == rel.metrics["groups"]
    with pytest.raises(KeyError, match="outputs: data"):
        rel.table("lineage")  # a sidecar is not an output


def test_the_input_is_recorded_as_given_in_memory_and_fingerprinted_by_content(tmp_path):
    df = frame()
    first = api.run(toy(), df, store=tmp_path)
    assert first.input["source"] == {"kind": "memory", "pin": None}
    assert first.input["dataset"] == "table given in memory (Python API)"
    # the same values as an Arrow table (no pandas metadata), in other chunks: same version
    arrow = pa.Table.from_pandas(df, preserve_index=False).replace_schema_metadata(None)
    chunked = pa.Table.from_batches(arrow.to_batches(max_chunksize=7))
    again = api.run(toy(), chunked, store=tmp_path)
    assert (again.status, again.version) == ("exists", first.version)
    changed = df.copy()
    changed.loc[0, "x"] += 1
    other = api.run(toy(), changed, store=tmp_path)
    assert other.status == "published" and other.version != first.version
    # nothing of the input's identity reaches the shareable copy
    shared = Path(first.shared, "manifest.json").read_text()
    assert first.input["fingerprint"] not in shared and first.version not in shared


def test_validate_needs_the_same_table_and_the_cli_says_so(tmp_path, capsys):
    df = frame()
    rel = api.run(toy(), df, store=tmp_path)
    ok = api.validate(rel, df)
    assert isinstance(ok, api.Revalidation) and ok.passed and not ok.failed
    assert [v.id for v in ok.verdicts] == [v.id for v in rel.verdicts]
    latest = api.open_release(Path(rel.path).parent / "latest")
    assert latest.version == rel.version and latest.status == "open"
    code, _, err = run_cli(capsys, "validate", rel.path)
    assert code == 2
    assert "given in memory" in err and "privfair.api.validate(release, table)" in err
    changed = df.copy()
    changed.loc[3, "c"] = "z"
    with pytest.raises(DataSourceError, match="fingerprint .* differs"):
        api.validate(rel, changed)
    with pytest.raises(DataSourceError, match="given in memory"):
        api.validate(rel)


def test_a_broken_guarantee_raises_and_publishes_nothing(tmp_path):
    s = toy(demands=[{"kind": "k_anonymity", "k": 30}])
    with pytest.raises(ContractViolation, match="k_anonymity"):
        api.run(s, frame(), store=tmp_path)
    assert not list(Path(tmp_path, "toy").glob("[0-9a-f]*"))


def test_bad_specs_and_inputs_name_the_key_or_column(tmp_path):
    with pytest.raises(SpecError, match="component.params|k"):
        api.spec("toy", component="mdav", params={"k": 1}, columns=COLUMNS)
    with pytest.raises(SpecError, match="'component.name'.*unknown"):
        api.describe("nope")
    with pytest.raises(InputError, match="not a table privfair can read"):
        api.run(toy(), {"x": [1]}, store=tmp_path)
    with pytest.raises(InputError, match="column 'x'"):
        api.run(toy(), frame().drop(columns="x"), store=tmp_path)
    builtin = api.load_spec(ROOT / "pipelines" / "specs" / "german_fair_mdav.yaml")
    with pytest.raises(SpecError, match="'dataset.name'.*roles are not in the spec"):
        api.run(builtin, frame(), store=tmp_path)
    no_roles = api.spec("bare", component="mdav", params={"k": 4}, dataset_name="toy")
    with pytest.raises(SpecError, match="'dataset.columns'"):
        api.run(no_roles, frame(), store=tmp_path)


def test_roles_carried_by_the_table_need_no_columns(tmp_path):
    published = api.run(toy(), frame(), store=tmp_path).table()  # roles in its fields
    again = api.run(
        api.spec("again", component="mdav", params={"k": 4}, dataset_name="published"),
        published,
        store=tmp_path,
    )
    assert again.passed and read_roles(again.table()).names == ["x", "c", "PA", "y"]


def test_a_file_spec_releases_a_frame_and_takes_overrides(tmp_path):
    spec_file = tmp_path / "file.yaml"
    spec_file.write_text(
        json.dumps(
            {
                "name": "from_file",
                "dataset": {"path": "absent.csv", "columns": COLUMNS},
                "component": {"name": "mdav", "params": {"k": 4}},
            }
        )
    )
    rel = api.run(spec_file, frame(), store=tmp_path / "s", params={"k": 5})
    assert rel.params["k"] == 5 and rel.input["source"]["kind"] == "memory"
    assert rel.to_pandas().groupby(["x", "c"]).size().min() >= 5


def test_arrow_c_stream_objects_are_read(tmp_path):
    class Stream:  # what polars and other Arrow libraries export
        def __init__(self, t: pa.Table):
            self.t = t

        def __arrow_c_stream__(self, requested_schema=None):
            return self.t.__arrow_c_stream__(requested_schema)

    t = pa.Table.from_pandas(frame(), preserve_index=False)
    assert api.as_table(Stream(t)).equals(t)
    assert api.as_table(t.to_batches()[0]).num_rows == t.num_rows


def test_evaluate_on_a_frame(tmp_path):
    ev = api.evaluate(
        toy(), frame(80), grid={"k": [4, 6]}, folds=2, classifiers=("lr",), out=tmp_path
    )
    assert isinstance(ev, api.Evaluated) and ev.spec == "toy"
    rows = ev.summary.to_pylist()
    assert {r["grid"] for r in rows if r["protection"] != "none"} == {'{"k": 4}', '{"k": 6}'}
    assert {r["classifier"] for r in rows} == {"lr"}
    assert Path(ev.files["evaluation.html"]).is_file()
    with pytest.raises(SpecError, match="--folds"):
        api.evaluate(toy(), frame(), folds=1, classifiers=("lr",))


def readme_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the README's Python API section holds one python block"
    return blocks[0]


def test_the_readme_example_runs_as_printed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRIVFAIR_STORE", str(tmp_path / "releases"))
    namespace: dict = {}
    exec(compile(readme_block(), "README.md (Python API)", "exec"), namespace)
    rel = namespace["release"]
    assert rel.passed and rel.status == "published"
    assert namespace["checked"].passed
    assert Path(namespace["copy"], "manifest.json").is_file()


def test_a_dp_release_of_a_frame_is_charged_to_the_dataset_it_names(tmp_path, capsys):
    """A DP release of a frame is charged to the dataset its spec names; a frame naming none
    is refused before anything is charged (the ledger could not tell whose rows it holds)."""
    rng = np.random.default_rng(1)
    n = 300
    df = pd.DataFrame(
        {
            "a": rng.choice(["x", "y", "z"], n),
            "sex": rng.choice(["F", "M"], n),
            "y": rng.integers(0, 2, n),
        }
    )
    s = api.spec(
        "dp_toy",
        component="mst",
        params={"epsilon": 1.0},
        columns={
            "a": {"role": "admissible", "kind": "nominal", "domain": ["x", "y", "z"]},
            "sex": {"role": "protected", "kind": "nominal", "favoured": "M", "domain": ["F", "M"]},
            "y": {"role": "label", "kind": "binary", "positive": 1},
        },
    )
    with pytest.raises(SpecError, match="names no dataset"):
        api.run(s, df, store=tmp_path)
    code, out, _ = run_cli(capsys, "budget", "--store", str(tmp_path), "--json")
    assert code == 0 and "no ledger yet" in out
    named = api.spec(
        "dp_toy",
        component="mst",
        params={"epsilon": 1.0},
        columns=s.dataset.columns,
        dataset_name="survey",
    )
    rel = api.run(named, df, store=tmp_path)
    assert rel.passed and set(rel.to_pandas().columns) == {"a", "sex", "y"}
    code, out, _ = run_cli(capsys, "budget", "--store", str(tmp_path), "--json")
    assert code == 0
    assert [b["dataset"] for b in json.loads(out)["blocks"]] == ["survey"]


def test_a_release_opened_by_a_relative_path_stays_readable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rel = api.run(toy(), frame(), store="rel_store")
    assert Path(rel.path).is_absolute()
    opened = api.open_release("rel_store/toy/latest")
    assert (opened.version, opened.path) == (rel.version, rel.path)
    monkeypatch.chdir(ROOT)
    assert opened.table().num_rows == rel.table().num_rows == 40


def test_the_cli_refuses_an_in_memory_spec_naming_the_api(tmp_path, capsys):
    spec_file = tmp_path / "mem.yaml"
    spec_file.write_text(
        json.dumps(
            {
                "name": "mem",
                "dataset": {"source": {"kind": "memory"}, "columns": COLUMNS},
                "component": {"name": "mdav", "params": {"k": 4}},
            }
        )
    )
    code, _, err = run_cli(capsys, "run", str(spec_file), "--store", str(tmp_path / "s"))
    assert code == 2 and "privfair.api.run(spec, table)" in err
    spec_file.write_text(spec_file.read_text().replace('"memory"}', '"memory", "url": "x"}'))
    code, _, err = run_cli(capsys, "run", str(spec_file), "--store", str(tmp_path / "s"))
    assert code == 2 and "'url' is not a key of a memory source" in err


def test_a_release_prints_like_the_cli(tmp_path):
    rel = api.run(toy(), frame(), store=tmp_path)
    text = str(rel)
    assert text.startswith(f"published: toy {rel.version}\n")
    held = sum(v.passed for v in rel.verdicts)
    assert f"guarantees: {held}/{len(rel.verdicts)} hold" in text and "input rows: 40" in text
    assert "metrics" not in repr(rel) and rel.version in repr(rel)  # a short repr


def test_the_flow_refuses_a_table_for_a_spec_that_reads_a_file(tmp_path):
    from privfair.run.flow import run_release
    from privfair.spec.catalogue import parse_spec

    s = parse_spec(
        {
            "name": "f",
            "dataset": {"path": "f.csv", "columns": COLUMNS},
            "component": {"name": "mdav", "params": {"k": 4}},
        }
    )
    with pytest.raises(SpecError, match="'dataset': a table was handed over"):
        run_release(s, tmp_path, table=api.as_table(frame()))


def test_an_in_memory_spec_is_refused_in_the_orchestrated_specs_folder(tmp_path):
    from privfair.spec.catalogue import load_specs

    (tmp_path / "mem.yaml").write_text(
        json.dumps(
            {
                "name": "mem",
                "dataset": {"source": {"kind": "memory"}, "columns": COLUMNS},
                "component": {"name": "mdav", "params": {"k": 4}},
            }
        )
    )
    with pytest.raises(SpecError, match=r"mem\.yaml: spec key 'dataset.source.kind'"):
        load_specs(tmp_path)
