"""Transparency reports through the pipeline: the shipped Adult and Australian specs publish
three public tables with every guarantee passing, the model card and training split are in the
manifest, no public table carries an internal field, and a tampered report fails validation."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from pipelines.catalogue import load_spec
from pipelines.flow import revalidate, run_release
from pipelines.settings import DEFAULT_SPECS_DIR

INTERNAL = {"d1_true", "d1_min", "d1_max", "beta_0", "beta_1", "beta_p", "beta_min", "case",
            "true_value", "C_star", "train"}  # fmt: skip


@pytest.fixture(scope="module", params=["adult_atr", "australian_atr"])
def published(request, tmp_path_factory):
    store = tmp_path_factory.mktemp(request.param)
    out = run_release(load_spec(DEFAULT_SPECS_DIR / f"{request.param}.yaml"), store)
    return store / request.param / out.version, out


def test_report_published_with_every_guarantee(published):
    path, out = published
    assert out.status == "published"
    man = json.loads((path / "manifest.json").read_text())
    assert man["validation"]["status"] == "passed"
    assert sorted(man["outputs"]) == ["decision_rules", "fairness", "privacy_summary"]
    ids = {r["id"] for r in man["validation"]["results"]}
    assert {"C0", "C3", "C4", "C8", "C12"} <= ids
    card = man["metrics"]["model"]
    assert card["kind"] == "logistic_regression" and card["train_rows"] + card["test_rows"] > 0
    assert card["accuracy_test"] > 0.75
    training = pq.read_table(path / "internal" / "training.parquet")
    assert training.num_rows == man["metrics"]["records"]
    assert sum(training.column("train").to_pylist()) == card["train_rows"]
    assert man["metrics"]["beta_global"] <= man["metrics"]["c_star_global"] + 1e-12


def test_public_tables_carry_no_internal_field(published):
    path, _ = published
    for name in ("decision_rules", "fairness", "privacy_summary"):
        cols = set(pq.read_schema(path / f"{name}.parquet").names)
        assert not cols & INTERNAL, name


def test_a_tampered_report_fails_validation(published, tmp_path):
    import shutil

    import pyarrow as pa

    path, _ = published
    copy = tmp_path / "release"
    shutil.copytree(path, copy)
    rules = pq.read_table(copy / "decision_rules.parquet")
    d1 = rules.column("announced_d1").to_pylist()
    d1[0] = 1.0 - d1[0] if d1[0] not in (0.0, 1.0) else 0.5
    i = rules.schema.get_field_index("announced_d1")
    pq.write_table(
        rules.set_column(i, rules.schema.field(i), pa.array(d1)), copy / "decision_rules.parquet"
    )
    v = revalidate(copy)
    assert not v.passed
