"""The guarantees a spec may demand on top of an algorithm's contract that gate a release on
what the protection did: ``parity_gap`` (the published label's demographic parity) and
``retention`` (each protected group keeps a share of its rows). Each is completed from the
input's roles, checked from the published table and the lineage, and fails on a release that
breaks it (its corruption), through the CLI too (exit 1, nothing published)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from privfair.components.core.checks import check_guarantee
from privfair.components.core.descriptor import resolve
from privfair.components.core.registry import algorithms, kind_check
from privfair.schemas import contracts as C
from privfair.schemas.roles import Role, read_roles

REPO = Path(__file__).resolve().parents[2]
ROW_LEVEL = [
    a
    for a in algorithms()
    if a.row_level
    and {Role.PROTECTED, Role.LABEL} <= {c.role for c in read_roles(resolve(a.example)(0)[0])}
]


def _run(algo, seed: int = 0):
    table, params = resolve(algo.example)(seed)
    result = algo(table, params)
    return table, params, result


def _frames(algo, table, params, outputs, sidecars):
    frames = resolve(algo.evidence)(table, outputs, sidecars, params)
    frames.setdefault("published", next(iter(outputs.values())).to_pandas())
    return frames


@pytest.mark.parametrize("algo", ROW_LEVEL, ids=[a.name for a in ROW_LEVEL])
@pytest.mark.parametrize(
    "demand", [C.ParityGap(id="d", max=0.0), C.Retention(id="d", min_share=1.0)]
)
def test_a_demand_holds_or_fails_as_measured_and_its_corruption_breaks_it(algo, demand):
    rng = np.random.default_rng(0)
    for seed in range(3):
        table, params, result = _run(algo, seed)
        g = demand.completed(table)
        lax = g.model_copy(
            update={"max": 1.0} if "max" in type(g).model_fields else {"min_share": 0.0}
        )
        frames = _frames(algo, table, params, result.outputs, result.sidecars)
        assert check_guarantee(lax, frames).passed  # nothing can break the laxest bound
        measured = check_guarantee(g, frames)
        if isinstance(g, C.ParityGap):
            # each published row's group from its input row (through the lineage): independent
            # of how the release writes the protected column
            rows = result.sidecars["lineage"].column("row_id").to_numpy()
            values = table.column(g.protected).to_pandas().iloc[rows].reset_index(drop=True)
            fav = values.isin(g.favoured) if g.favoured else ~values.isin(g.unfavoured)
            pos = result.table.column(g.label).to_pandas().isin(g.positive)
            gap = abs(pos[~fav.to_numpy()].mean() - pos[fav.to_numpy()].mean())
            assert measured.passed == (gap <= 1e-12), (seed, gap, measured.message)
        else:
            kept = set(result.sidecars["lineage"].column("row_id").to_pylist())
            assert measured.passed == (len(kept) == table.num_rows), measured.message
        bounded = g.model_copy(
            update={"max": 0.5} if isinstance(g, C.ParityGap) else {"min_share": 0.5}
        )
        corrupt = resolve(kind_check(g.kind).corrupt)
        broken = corrupt(bounded, table, result.outputs, result.sidecars, rng)
        if broken is None:
            continue
        frames = _frames(algo, table, params, *broken)
        assert not check_guarantee(bounded, frames).passed, (algo.name, seed)


def test_unset_columns_come_from_the_roles(builtin_table):
    table = builtin_table("german")
    g = C.ParityGap(max=0.05).completed(table)
    assert (g.protected, g.label) == ("sex", "credit")
    assert g.favoured and g.positive
    assert C.Retention(min_share=0.9).completed(table).protected == "sex"


def _spec(tmp_path: Path, base: str, demands: list[dict]) -> Path:
    spec = yaml.safe_load((REPO / "pipelines" / "specs" / base).read_text())
    spec["guarantees"] = demands
    path = tmp_path / base
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize(
    ("base", "demand", "code", "said"),
    [
        ("german_fair_mdav.yaml", {"kind": "parity_gap", "max": 0.001}, 1, "spec.0 parity_gap"),
        ("german_fair_mdav.yaml", {"kind": "retention", "min_share": 0.999}, 1, "spec.0 retention"),
        ("german_fair_mdav.yaml", {"kind": "retention", "min_share": 0.5}, 0, ""),
        ("adult_mst.yaml", {"kind": "retention", "min_share": 0.5}, 2, "guarantees.0.kind"),
        ("adult_atr.yaml", {"kind": "parity_gap", "max": 0.1}, 2, "guarantees.0"),
        ("german_fair_mdav.yaml", {"kind": "parity_gap", "max": float("nan")}, 2, "guarantees"),
    ],
)
def test_demands_gate_the_release(tmp_path: Path, capsys, base, demand, code, said):
    from privfair.cli import main

    store = tmp_path / "store"
    rc = main(["run", str(_spec(tmp_path, base, [demand])), "--store", str(store)])
    err = capsys.readouterr().err
    assert rc == code, err
    assert said in err
    published = [p for p in store.glob("*/*/manifest.json") if ".quarantine" not in p.parts]
    assert bool(published) == (code == 0)
