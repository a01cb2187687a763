"""The disclosure boundary, for every registered algorithm: what its descriptor declares public
exists and is drawn from public data alone, and a differentially private release's shareable
copy leaves no trace of a distinctive input (its row count, its exact shares).

The attacker of the last test holds exactly what a data owner hands out (``privfair export``)
and looks for the input's statistics in it: every integer of the public manifest, the public
report and the Parquet metadata, every float of the public manifest. Before the disclosure
boundary the manifest carried ``input.rows`` and TVDs against the input, and this test failed.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from _shared import columns_of

from privfair.components.core.descriptor import Metric, resolve
from privfair.components.core.registry import algorithms
from privfair.release import share

ALGORITHMS = algorithms()
IDS = [a.name for a in ALGORITHMS]
DP = [a for a in ALGORITHMS if not a.replayable]
DISTINCTIVE_ROWS = 12347  # prime: no share k/12347 of it is a share of another small total


def _public(algo, table, params, result) -> dict:
    summary = {"status": "passed", "checked": 0, "failed": [], "results": []}
    return share.public_manifest(
        _spec_of(algo, params, {}),
        algo,
        "0" * 16,
        "test",
        result.params,
        result.contract,
        result.metrics,
        summary,
        result.outputs,
    )


def _spec_of(algo, params, columns: dict, path: str = "input.parquet"):
    from privfair.spec.catalogue import parse_spec

    return parse_spec(
        {
            "name": f"disclosure_{algo.name}",
            "dataset": {
                "path": path,
                "columns": columns or {"x": {"role": "ignored"}},
                "unlabelled": "keep",
            },
            "component": {"name": algo.name, "params": params.model_dump(mode="json")},
        },
        source="test",
    )


@pytest.mark.parametrize("algo", ALGORITHMS, ids=IDS)
def test_declared_public_metrics_and_figures_exist(algo):
    """Every metric key the descriptor declares public is one the run reports, and every
    declared figure is drawn from the public manifest and outputs alone (no input, no
    sidecars): a typo or a figure that needs private data fails here."""
    table, params = resolve(algo.example)(0)
    result = algo(table, params)
    missing = [k for k in algo.public.metrics if Metric(k, k).get(result.metrics) is None]
    assert not missing, f"{algo.name} declares public metrics it does not report: {missing}"
    if algo.public.figures:
        assert algo.figures is not None
        pub = _public(algo, table, params, result)
        drawn = {f.name for f in resolve(algo.figures)(pub, result.outputs, None, {})}
        assert set(algo.public.figures) <= drawn, (algo.name, drawn)


@pytest.mark.parametrize("algo", ALGORITHMS, ids=IDS)
def test_public_metrics_are_exactly_the_declared_ones(algo):
    table, params = resolve(algo.example)(1)
    result = algo(table, params)
    pub = algo.public.public_metrics(result.metrics)

    def keys(d: dict, prefix: str = "") -> set[str]:
        out = set()
        for k, v in d.items():
            out |= keys(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}"}
        return out

    for key in keys(pub):
        assert any(key == d or key.startswith(f"{d}.") for d in algo.public.metrics), key


def _numbers(text: str) -> list[str]:
    return re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", text)


def _floats(obj) -> list[float]:
    if isinstance(obj, bool):
        return []
    if isinstance(obj, int | float):
        return [float(obj)]
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _floats(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _floats(v)]
    return []


@pytest.mark.parametrize("algo", DP, ids=[a.name for a in DP])
def test_a_dp_export_leaves_no_trace_of_a_distinctive_input(algo, tmp_path: Path):
    from privfair.release.share import export
    from privfair.run.flow import run_release

    table, params = resolve(algo.example)(0)
    if "rows" in type(params).model_fields:  # a public row count: the noisy total could
        params = params.model_copy(update={"rows": 5000})  # equal the input's by chance
    rng = np.random.default_rng(11)
    big = table.take(pa.array(rng.choice(table.num_rows, DISTINCTIVE_ROWS, replace=True)))
    # written by pandas, as users write files: its metadata records the row index's length
    big.to_pandas().to_parquet(tmp_path / "input.parquet")
    spec_file = tmp_path / "spec.yaml"
    spec = _spec_of(algo, params, columns_of(table))
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_defaults=True)))
    from privfair.spec.catalogue import load_spec

    out = run_release(load_spec(spec_file), tmp_path / "store")
    dest, _ = export(out.path, tmp_path / "export")
    assert sorted(p.name for p in dest.iterdir()) == [
        "data.parquet",
        "manifest.json",
        "report.html",
    ]

    # every exact share of the input: each column's values and each pair's cells
    counts = []
    names = big.column_names
    for i, a in enumerate(names):
        counts += big.group_by([a]).aggregate([([], "count_all")])["count_all"].to_pylist()
        for b in names[i + 1 :]:
            g = big.group_by([a, b]).aggregate([([], "count_all")])
            counts += g["count_all"].to_pylist()
    shares = {c / DISTINCTIVE_ROWS for c in counts if 0 < c < DISTINCTIVE_ROWS}

    man_text = (dest / "manifest.json").read_text()
    report = (dest / "report.html").read_text()
    meta = pq.read_schema(dest / "data.parquet").metadata or {}
    meta_text = " ".join(v.decode(errors="replace") for v in meta.values())
    published_rows = pq.read_metadata(dest / "data.parquet").num_rows
    # the model's noisy total is public (a function of the noisy measurements) and is shown
    # rounded: within half a row of the input's count it prints as that count by chance
    noisy = json.loads(man_text).get("metrics", {}).get("model", {}).get("total")
    by_chance = noisy is not None and abs(noisy - DISTINCTIVE_ROWS) < 0.5
    for where, text in (("manifest", man_text), ("report", report), ("metadata", meta_text)):
        if published_rows != DISTINCTIVE_ROWS and not by_chance:  # a noisy count may be any
            assert str(DISTINCTIVE_ROWS) not in _numbers(text), f"the input's rows in the {where}"
    leaked = [
        x for x in _floats(json.loads(man_text)) for s in shares if math.isclose(x, s, abs_tol=1e-9)
    ]
    assert not leaked, f"exact input shares in the public manifest: {leaked[:5]}"
    # and the owner part keeps them (the test can fail: the numbers are there to find)
    owner = json.loads((Path(out.path) / "manifest.json").read_text())
    assert owner["input"]["rows"] == DISTINCTIVE_ROWS
