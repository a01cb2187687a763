"""What MST and PreFair declare public (``Algorithm.public``): every declared metric exists
and is computed without the input, the owner-only ones are not declared, and the public
figures are drawn from the public manifest and the synthetic table alone."""

from __future__ import annotations

import json

import pytest

from privfair.components.synthesis import MST, PREFAIR, PUBLIC
from privfair.components.synthesis.compression import Compression
from privfair.components.synthesis.domain import declared_domains, encode_table
from privfair.components.synthesis.examples import mst_example, prefair_example
from privfair.components.synthesis.figures import OWNER_FIGURES, PUBLIC_FIGURES, figures
from privfair.components.synthesis.model import Measurement
from privfair.components.synthesis.quality import measured_quality
from privfair.components.synthesis.synthesize import measured_fidelity
from privfair.schemas.contracts import contract_to_json
from privfair.schemas.roles import Kind, read_roles

OWNER_ONLY = ("fidelity", "fairness.input", "clamped", "timings_s")


@pytest.fixture(scope="module", params=["mst", "prefair"])
def run(request):
    algo, example = (MST, mst_example) if request.param == "mst" else (PREFAIR, prefair_example)
    table, params = example(1)
    return algo, table, algo(table, params)


def _public_manifest(algo, result) -> dict:
    return {
        "metrics": algo.public.public_metrics(result.metrics),
        "contract": json.loads(contract_to_json(result.contract)),
        "params": result.params,
        "pipeline": "p",
        "component": result.component,
    }


def test_both_algorithms_declare_the_same_disclosure():
    assert MST.public is PUBLIC and PREFAIR.public is PUBLIC
    assert PUBLIC.figures == PUBLIC_FIGURES
    assert not set(PUBLIC_FIGURES) & set(OWNER_FIGURES)
    assert PUBLIC.covers and PUBLIC.does_not_cover


def test_every_public_metric_exists_and_no_owner_metric_is_public(run):
    algo, _, result = run
    public = algo.public.public_metrics(result.metrics)
    for key in algo.public.metrics:
        node = public
        for part in key.split("."):
            assert part in node, key
            node = node[part]
    for key in OWNER_ONLY:
        assert not any(k == key or k.startswith(key + ".") for k in algo.public.metrics)
    assert "fidelity" not in public and set(public["fairness"]) == {"synthetic"}
    assert "timings_s" not in public and "clamped" not in public


def test_public_figures_need_nothing_but_the_public_copy(run):
    """From the public manifest, the synthetic table, no input and no sidecars, exactly the
    public figures are drawn, identical to the owner report's: they read public metrics only."""
    algo, table, result = run
    public = figures(_public_manifest(algo, result), dict(result.outputs), None, {})
    assert [f.name for f in public] == list(PUBLIC_FIGURES)
    owner = figures({"metrics": result.metrics}, dict(result.outputs), table, dict(result.sidecars))
    assert [f.name for f in owner] == [*PUBLIC_FIGURES, *OWNER_FIGURES]
    same = {f.name: (f.svg, f.caption) for f in owner}
    for f in public:
        assert (f.svg, f.caption) == same[f.name]


def test_measured_fidelity_is_post_processing(run):
    """Recomputed from the measurements and compression sidecars and the synthetic table
    alone, it is the reported value, and so is the public quality report: nothing of the
    input enters them."""
    algo, _, result = run
    data = result.outputs["data"]
    meas = result.sidecars["measurements"].to_pandas()
    comp = result.sidecars["compression"].to_pandas()
    names = data.column_names
    params = algo.params(**result.params)
    domains = declared_domains(data, read_roles(data), params)
    syn, _ = encode_table(data, domains)
    compressions = [
        Compression(comp[comp["attribute"] == n].sort_values("code")["compressed"].to_numpy(), ())
        for n in names
    ]
    raw = [meas[meas["query"] == n]["value"].to_numpy() for n in names]
    edges = result.sidecars["tree"].to_pandas()[["a", "b"]].itertuples(index=False)
    tree = [(names.index(a), names.index(b)) for a, b in edges]
    two = [
        Measurement((i, j), meas[meas["query"] == f"{names[i]}|{names[j]}"]["value"].to_numpy(), ())
        for i, j in tree
    ]
    again = measured_fidelity(names, raw, tree, two, syn, compressions)
    assert again == result.metrics["measured_fidelity"]
    roles = read_roles(data)
    ordered = [roles[n].kind in (Kind.NUMERIC, Kind.ORDINAL) for n in names]
    quality = measured_quality(names, ordered, raw, tree, two, syn, compressions)
    assert quality == result.metrics["quality"]
