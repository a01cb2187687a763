"""A differentially private spec over the daily toy submissions (``_partitioned``), for the
ledger tests: MST on x (binned), c, PA, y, with a ``budget`` of a given number of releases."""

from __future__ import annotations

from pathlib import Path

import yaml
from _partitioned import spec_text

PARAMS = {
    "epsilon": 1.0,
    "delta": 1e-9,
    "bins": {"x": {"start": 18, "stop": 80, "step": 2}},
    "iters": 20,
}
COLUMNS = {
    "x": {"role": "admissible", "kind": "numeric"},
    "c": {"role": "admissible", "kind": "nominal", "domain": ["a", "b", "c"]},
    "PA": {"role": "protected", "kind": "binary", "favoured": 1},
    "y": {"role": "label", "kind": "binary", "positive": 1},
    "submitted": {"role": "ignored"},
}


def release_cost(folder: Path):
    """The cost of one release of the DP spec (MST over the four toy columns), as the flow
    computes it from the ingested table (written to ``folder``)."""
    from _partitioned import write_days

    from privfair.run.flow import ReleasePlan
    from privfair.spec.catalogue import load_spec

    write_days(folder, 1)
    plan = ReleasePlan.of(load_spec(write_dp_spec(folder, partitions=False)))
    return plan.algo.privacy_cost(plan.spec.params, plan.ingest().table)


def write_dp_spec(folder: Path, name: str = "toy_dp", partitions: bool = True, **extra) -> Path:
    """``folder/<name>.yaml``: MST over ``submissions.csv`` with ``extra`` top-level keys
    (``budget``, ``republish``...); without ``partitions`` the spec reads every row at once."""
    spec = yaml.safe_load(spec_text(name=name, component={"name": "mst", "params": PARAMS}))
    spec["dataset"]["columns"] = COLUMNS
    if not partitions:
        del spec["partitions"]
    spec.update(extra)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path
