"""The parameter reference (``privfair.components.core.reference``): ``privfair describe`` for every
algorithm, and ``components/PARAMETERS.md`` regenerated and compared (it cannot drift)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field

from privfair.components.core import reference
from privfair.components.core.descriptor import Algorithm, Params
from privfair.components.core.registry import algorithms
from tests._shared import run_cli

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "components" / "PARAMETERS.md"
NAMES = [a.name for a in algorithms()]


def test_the_checked_in_reference_is_what_the_code_generates(capsys):
    code, out, _ = run_cli(capsys, "describe", "--markdown")
    assert code == 0
    assert PAGE.read_text(encoding="utf-8") == out, (
        "components/PARAMETERS.md is stale: uv run privfair describe --markdown > "
        "components/PARAMETERS.md"
    )
    assert "(components/PARAMETERS.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", NAMES)
def test_describe_shows_every_parameter_with_its_meaning(capsys, name):
    algo = next(a for a in algorithms() if a.name == name)
    code, out, _ = run_cli(capsys, "describe", name)
    assert code == 0 and out.startswith(f"{name}: {algo.title}\n")
    for field_name, info in algo.params.model_fields.items():
        line = next((ln for ln in out.splitlines() if ln.startswith(f"  {field_name}: ")), None)
        assert line is not None, f"{name}.{field_name} missing"
        meaning = " ".join(info.description.split())
        assert f"      {meaning}" in out.splitlines()
        assert ("= required" in line) == info.is_required()
    section = PAGE.read_text(encoding="utf-8").split(f"\n## {name}\n", 1)[1].split("\n## ")[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| `")]
    top = [r.split("`")[1] for r in rows if not any(c in r.split("`")[1] for c in ".[")]
    assert top == list(algo.params.model_fields)


def test_types_defaults_and_ranges_come_from_the_model():
    by = {a.name: {p.name: p for p in reference.parameters(a)} for a in algorithms()}
    tau = by["fair_mdav"]["tau"]
    assert (tau.type, tau.default, tau.range) == ("float", "1.0", "≥ 0.0, ≤ 1.0")
    assert by["fair_mdav"]["relabel_order"].type == "'nearest' | 'random'"
    assert by["prefair"]["selector"].default == '"greedy"'
    assert by["atr"]["decisions"].default == '"label"'
    assert by["mst"]["delta"].default == "1e-09"
    assert by["mst"]["epsilon"].default == "required"
    assert by["mst"]["rows"].range == "> 0, ≤ 100000000"
    # the fields of structured parameters, each with its meaning
    assert by["atr"]["fairness[].p"].range == "> 0, ≤ 1"
    assert by["atr"]["fairness[].type"].type == "'SP' | 'CSP' | 'PR'"
    assert by["prefair"]["bins.*.step"].meaning == "the width of every bin"


def test_the_list_names_every_algorithm_and_an_unknown_one_is_refused(capsys):
    code, out, _ = run_cli(capsys, "describe")
    assert code == 0
    listed = [ln.split()[0] for ln in out.splitlines() if ln and not ln.startswith(" ")]
    assert set(NAMES) <= set(listed)
    code, _, err = run_cli(capsys, "describe", "mdav2")
    assert code == 2 and "'component.name'" in err and "mdav" in err


def test_a_parameter_without_a_meaning_is_refused():
    class Bare(Params):
        k: int = Field(2, ge=2)

    algo = Algorithm("bare", "Bare", Bare, run="x:y", contract="x:y", evidence="x:y", example="x:y")
    with pytest.raises(ValueError, match=r"Bare\.k has no description"):
        reference.parameters(algo)
    assert "Bare.k has no description" not in reference.markdown(algorithms())
