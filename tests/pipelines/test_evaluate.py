"""``privfair evaluate``: the papers' protocol (stratified folds, the component on the training
folds only, classifiers scored on the untouched test fold beside the same classifiers trained on
the raw fold), for any algorithm whose first output is a table with the label."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from privfair.cli import main
from privfair.evaluation.evaluate import METRICS, cost_of_protection, evaluate, parse_grid
from privfair.run.flow import ingest
from privfair.schemas.errors import InputError, SpecError
from privfair.spec.catalogue import load_spec, with_params

SPECS = Path(__file__).resolve().parents[2] / "pipelines" / "specs"


@pytest.fixture(scope="module")
def german():
    spec = load_spec(SPECS / "german_fair_mdav.yaml")
    return spec, ingest(spec).table


def test_the_component_sees_the_training_folds_only(german):
    spec, table = german
    seen = []

    def apply(train, params):
        seen.append(train)
        return train  # no protection: both arms must then score the same

    ev = evaluate(spec, table, folds=4, classifiers=["lr"], apply=apply, progress=lambda m: None)
    n = table.num_rows
    assert [t.num_rows for t in seen] == [n - n // 4] * 4
    rows = ev.summary.to_pylist()
    none = {r["metric"]: r["mean"] for r in rows if r["protection"] == "none"}
    ours = {r["metric"]: r["mean"] for r in rows if r["protection"] == "fair_mdav"}
    assert none == pytest.approx(ours, nan_ok=True)


def test_a_grid_gives_every_combination_with_intervals(german):
    spec, table = german
    ev = evaluate(
        spec,
        table,
        grid={"k": [5, 10]},
        folds=3,
        classifiers=["lr", "gnb"],
        progress=lambda m: None,
    )
    rows = ev.summary.to_pylist()
    assert len(rows) == 2 * 2 * 2 * len(METRICS)
    assert {r["grid"] for r in rows} == {'{"k": 5}', '{"k": 10}'}
    for r in rows:
        if not math.isnan(r["mean"]):
            assert r["ci_low"] - 1e-12 <= r["mean"] <= r["ci_high"] + 1e-12
            assert r["folds"] == 3
            if r["metric"] != "eodds":
                assert 0 <= r["mean"] <= 1
    assert ev.folds.num_rows == 2 * 3 * 2 * 2 * len(METRICS)


def test_the_protected_attribute_can_be_left_out_of_the_features(german):
    spec, table = german
    kw = dict(folds=2, classifiers=["gnb"], progress=lambda m: None)
    assert "sex" in evaluate(spec, table, **kw).features
    assert "sex" not in evaluate(spec, table, drop_protected=True, **kw).features


def test_one_hot_level_shares_fill_the_nominal_blocks(german):
    """Microaggregation's ``publish: onehot`` output (level shares instead of the nominal
    columns) is encoded into the same features as the raw test fold."""
    spec, table = german
    spec = with_params(spec, {"publish": "onehot"})
    ev = evaluate(spec, table, folds=2, classifiers=["lr"], progress=lambda m: None)
    acc = [r["mean"] for r in ev.summary.to_pylist() if r["metric"] == "accuracy"]
    assert len(acc) == 2 and all(0.5 < a <= 1 for a in acc)


def test_the_protected_arm_can_be_scored_on_a_protected_test_fold(german):
    """With ``protect_test`` the component also runs on the test fold; its rows are scored
    against their input rows' true labels through the lineage (Fair-MDAV relabels them)."""
    spec, table = german
    ev = evaluate(
        spec, table, folds=2, classifiers=["lr"], protect_test=True, progress=lambda m: None
    )
    acc = {r["protection"]: r["mean"] for r in ev.summary.to_pylist() if r["metric"] == "accuracy"}
    assert set(acc) == {"none", "fair_mdav"} and all(0.5 < a <= 1 for a in acc.values())
    synth = load_spec(SPECS / "compas_prefair.yaml")
    with pytest.raises(InputError, match="lineage"):
        evaluate(
            synth,
            ingest(synth).table,
            folds=2,
            classifiers=["lr"],
            protect_test=True,
            progress=lambda m: None,
        )


def test_prefair_conditional_measures_are_scored_per_admissible_stratum():
    """With ``admissible`` columns declared, CDP/CTPRB/CTNRB are scored given their joint value
    on the test fold; the "none" arm's value is recomputed here from its own predictions."""
    from sklearn.naive_bayes import GaussianNB

    from privfair.components.core.inputs import group_indicator, outcome_indicator
    from privfair.components.core.metrics import fairness_measures
    from privfair.evaluation.evaluate import CONDITIONAL, Features, stratified_folds
    from privfair.schemas.roles import Role, read_roles

    spec = load_spec(SPECS / "compas_prefair.yaml")
    table = ingest(spec).table
    ev = evaluate(spec, table, folds=2, classifiers=["gnb"], progress=lambda m: None)
    got = {(r["protection"], r["metric"], r["fold"]): r["value"] for r in ev.folds.to_pylist()}
    assert {m for (_, m, _) in got} == set(METRICS) | set(CONDITIONAL)

    roles = read_roles(table)
    label, prot = roles.with_role(Role.LABEL)[0], roles.with_role(Role.PROTECTED)[0]
    y = outcome_indicator(table.column(label.name), label)
    s = group_indicator(table.column(prot.name), prot)
    admissible = [c.name for c in roles.with_role(Role.ADMISSIBLE)]
    joint = np.unique(
        np.stack([table.column(c).to_numpy(zero_copy_only=False) for c in admissible], 1),
        axis=0,
        return_inverse=True,
    )[1].reshape(-1)
    features = [c for c in table.column_names if c != label.name]
    for k, (train, test) in enumerate(stratified_folds(y, s, 2, 0)):
        enc = Features.fit(table.take(train), features)
        pred = (
            GaussianNB()
            .fit(enc.transform(table.take(train)), y[train])
            .predict(enc.transform(table.take(test)))
        )
        want = fairness_measures(s[test], pred, y=y[test], strata=joint[test])
        for m in ("tprb", "tnrb", *CONDITIONAL):
            assert got[("none", m, k)] == pytest.approx(want[m]), m


def test_a_report_algorithm_is_refused():
    spec = load_spec(SPECS / "adult_atr.yaml")
    table = ingest(spec).table.slice(0, 3000)
    with pytest.raises(InputError, match="table release with the label"):
        evaluate(spec, table, folds=2, classifiers=["gnb"], progress=lambda m: None)


def test_unknown_classifier_and_bad_grid_are_named(german):
    spec, table = german
    with pytest.raises(SpecError, match="--classifiers"):
        evaluate(spec, table, classifiers=["svm"], progress=lambda m: None)
    with pytest.raises(SpecError, match="--grid"):
        parse_grid(["k"])
    with pytest.raises(SpecError, match="component.params"):
        evaluate(
            spec, table, grid={"k": [0]}, folds=2, classifiers=["gnb"], progress=lambda m: None
        )


def test_cli_writes_the_tables_and_the_page(tmp_path, capsys):
    code = main(
        [
            "evaluate",
            str(SPECS / "german_dmondrian.yaml"),
            "--folds",
            "3",
            "--classifiers",
            "lr",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    folder = tmp_path / "german_dmondrian"
    summary = pq.read_table(folder / "summary.parquet").to_pylist()
    assert {r["protection"] for r in summary} == {"none", "dmondrian"}
    html = (folder / "evaluation.html").read_text()
    assert "<svg" in html and "dmondrian" in html
    assert not list(folder.glob(".*.tmp"))
    assert "evaluation:" in capsys.readouterr().out
    assert np.isfinite([r["mean"] for r in summary if r["metric"] == "accuracy"]).all()


def test_cost_of_protection_is_a_stratified_holdout_recomputed_here(german, tmp_path):
    """The report's numbers: the component on the first fold's 75 % alone, LR on its output and
    on the raw 75 %, both scored on the untouched 25 %; rebuilt here with scikit-learn."""
    from sklearn.linear_model import LogisticRegression

    from privfair.components.core.inputs import group_indicator, outcome_indicator
    from privfair.components.core.metrics import demographic_parity_difference
    from privfair.evaluation.evaluate import Features, stratified_folds
    from privfair.schemas.roles import Role, read_roles
    from privfair.spec.catalogue import algorithm_of

    spec, table = german
    cost = cost_of_protection(spec, table, evaluations=tmp_path)
    assert cost["status"] == "measured" and cost["grid"] is None
    roles = read_roles(table)
    label, prot = roles.with_role(Role.LABEL)[0], roles.with_role(Role.PROTECTED)[0]
    y = outcome_indicator(table.column(label.name), label)
    s = group_indicator(table.column(prot.name), prot)
    train, test = next(iter(stratified_folds(y, s, 4, 0)))
    assert cost["train_rows"] == len(train)
    features = [c for c in table.column_names if c != label.name]
    enc = Features.fit(table.take(train), features)
    published = algorithm_of(spec)(table.take(train), spec.params).outputs["data"]
    x_test = enc.transform(table.take(test))
    for arm, (x, yy) in {
        "none": (enc.transform(table.take(train)), y[train]),
        "fair_mdav": (enc.transform(published), outcome_indicator(published[label.name], label)),
    }.items():
        pred = LogisticRegression(max_iter=1000).fit(x, yy).predict(x_test)
        assert cost["holdout"][arm]["accuracy"] == pytest.approx(np.mean(pred == y[test]))
        assert cost["holdout"][arm]["dpar"] == pytest.approx(
            demographic_parity_difference(pred.astype(int), sensitive_features=s[test])
        )


def test_cost_of_protection_names_why_it_does_not_apply(tmp_path):
    spec = load_spec(SPECS / "adult_atr.yaml")
    cost = cost_of_protection(spec, ingest(spec).table.slice(0, 2000), evaluations=tmp_path)
    assert cost["status"] == "not applicable"
    assert "a report, not a table to train on" in cost["reason"]


def test_the_report_shows_only_an_evaluation_of_its_own_spec_and_input(german, tmp_path):
    from privfair.evaluation.evaluate import find_evaluation, write

    spec, table = german
    ev = evaluate(
        spec,
        table,
        grid={"k": [5]},
        folds=2,
        classifiers=["gnb"],
        input_fingerprint="input-1",
        progress=lambda m: None,
    )
    write(ev, tmp_path / spec.name)
    found = find_evaluation(spec, "input-1", tmp_path)
    assert found["stale"] is False and found["grid"] == {"k": [5]}
    assert {r["metric"] for r in found["rows"]} == {"accuracy", "dpar"}
    assert find_evaluation(spec, "input-2", tmp_path)["stale"] is True
    other = with_params(spec, {"k": 20})
    assert "another version" in find_evaluation(other, "input-1", tmp_path)["reason"]
    assert find_evaluation(spec, "input-1", tmp_path / "nowhere") is None


def test_a_classifier_that_predicts_one_class_is_flagged_degenerate():
    """A constant prediction scores the base rate and dPar 0: the cost of protection names
    the arm instead of letting it read as a fair, accurate classifier."""
    import numpy as np

    from privfair.evaluation.evaluate import degenerate, score_predictions

    y = np.array([True, False, True, False])
    s = np.array([0, 0, 1, 1])
    const = score_predictions(y, np.zeros(4, dtype=bool), s)
    mixed = score_predictions(y, y.copy(), s)
    assert const["positive_rate"] == 0.0 and const["dpar"] == 0.0
    flags = degenerate({"none": mixed, "mst": const})
    assert list(flags) == ["mst"] and "positive class for 0.0%" in flags["mst"]
    # the declared rule, not only a constant: positive for 0.1 % of a 10 % base rate, at the
    # majority rate's accuracy (an LR on an imbalanced label)
    n = 1000
    y = np.zeros(n, dtype=bool)
    y[:100] = True
    rare = np.zeros(n, dtype=bool)
    rare[0] = True
    near = score_predictions(y, rare, np.arange(n) % 2)
    assert 0 < near["positive_rate"] < 0.01
    assert "positive class for 0.1%" in degenerate({"lr": near})["lr"]


def test_cli_names_an_arm_that_predicts_one_class_in_every_fold(tmp_path, capsys, monkeypatch):
    """``privfair evaluate`` says which arm is degenerate (mean positive rate 0 or 1) instead
    of printing its base-rate accuracy and dPar 0 as if they meant something."""
    import types

    import pyarrow as pa

    import privfair.evaluation.evaluate as E

    rows = [
        {"protection": p, "classifier": "lr", "grid": "{}", "metric": m, "mean": v}
        | {"ci_low": v, "ci_high": v}
        for p, m, v in [
            ("none", "accuracy", 0.7),
            ("none", "positive_rate", 0.4),
            ("mst", "accuracy", 0.7),
            ("mst", "positive_rate", 0.0),
        ]
    ]
    fake = types.SimpleNamespace(summary=pa.Table.from_pylist(rows), seconds=0.0)
    monkeypatch.setattr(E, "evaluate", lambda *a, **k: fake)
    monkeypatch.setattr(E, "write", lambda ev, folder: {"evaluation.html": folder / "e.html"})
    spec = str(SPECS / "german_dmondrian.yaml")
    assert main(["evaluate", spec, "--folds", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "degenerate: mst lr {}: predicts only the negative class in every fold" in out
    assert "degenerate: none" not in out


def test_the_cost_of_protection_at_scale_runs_on_a_seeded_sample_and_says_so():
    from privfair.evaluation.evaluate import cost_of_protection
    from privfair.run.flow import ReleasePlan
    from privfair.spec.catalogue import load_spec

    spec = load_spec("pipelines/specs/german_fair_mdav.yaml")
    table = ReleasePlan.of(spec).ingest().table
    a = cost_of_protection(spec, table, max_rows=600)
    b = cost_of_protection(spec, table, max_rows=600)
    assert a["sample"] == {"rows": 600, "of": 1000, "seed": 0}
    assert "sample of 600 of the 1,000 input rows" in a["split"]
    assert a["status"] == "measured" and a["train_rows"] == 600 - 600 // 4
    assert a["holdout"] == b["holdout"]  # seeded: the same sample, the same numbers
    whole = cost_of_protection(spec, table, max_rows=1000)
    assert "sample" not in whole and whole["train_rows"] == 1000 - 1000 // 4
