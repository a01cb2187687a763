"""Transparency reports through the pipeline: the shipped Adult and Australian specs publish
three public tables with every guarantee passing, the model card and training split are in the
owner's manifest, no public table carries an internal field, the shareable copy holds only the
declared metrics and figures (no C*, no exact positive rate, no trade-off sweep on the true
rules), and a tampered report fails validation."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from privfair.run.flow import revalidate, run_release
from privfair.spec.catalogue import load_spec
from privfair.spec.settings import DEFAULT_SPECS_DIR

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
        cols = set(pq.read_schema(path / "shared" / f"{name}.parquet").names)
        assert not cols & INTERNAL, name


def test_a_tampered_report_fails_validation(published, tmp_path):
    import shutil

    import pyarrow as pa

    path, _ = published
    copy = tmp_path / "release"
    shutil.copytree(path, copy)
    rules = pq.read_table(copy / "shared" / "decision_rules.parquet")
    d1 = rules.column("announced_d1").to_pylist()
    d1[0] = 1.0 - d1[0] if d1[0] not in (0.0, 1.0) else 0.5
    i = rules.schema.get_field_index("announced_d1")
    pq.write_table(
        rules.set_column(i, rules.schema.field(i), pa.array(d1)),
        copy / "shared" / "decision_rules.parquet",
    )
    v = revalidate(copy)
    assert not v.passed


OWNER_METRICS = ("c_star_global", "beta_min_global", "cases", "max_abs_change", "records",
                 "unprotectable_groups", "model", "positive_rate", "accuracy_train",
                 "accuracy_test", "train_rows", "test_rows")  # fmt: skip


def test_the_shareable_copy_holds_only_what_follows_from_the_announced_mapping(published):
    """Its manifest carries the declared metrics (none computed from the true rules or the
    input), its report the declared figures (no trade-off sweep over the true rules)."""
    from privfair.components.transparency import ATR

    path, _ = published
    pub = json.loads((path / "shared" / "manifest.json").read_text())
    assert set(pub["metrics"]) == set(ATR.public.metrics)

    def keys(d: dict) -> set[str]:
        return {k for k, v in d.items() for k in (k, *(keys(v) if isinstance(v, dict) else ()))}

    assert not keys(pub["metrics"]) & set(OWNER_METRICS)
    report = (path / "shared" / "report.html").read_text()
    assert 'id="fig-privacy_by_group"' in report and 'id="fig-fairness_intervals"' in report
    assert 'id="fig-tradeoff"' not in report
    assert 'id="fig-tradeoff"' in (path / "report.html").read_text()  # the owner's report
