"""Re-check a published release from its own files (and the input it names)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from components.core.result import META_CONTRACT
from pipelines.stages import ingest
from pipelines.validate import Validation, validate_release
from schemas.contracts import GUARANTEE_LIST, contract_from_json
from schemas.errors import DataSourceError, PrivfairError
from schemas.spec import parse_spec


def revalidate(release: Path, data_dir: str | Path | None = None) -> Validation:
    """Recompute every declared guarantee of ``release``. The input is re-loaded from the spec in
    the manifest and must match the fingerprint recorded at publication."""
    mpath = release / "manifest.json"
    if not mpath.exists():
        raise PrivfairError(f"{release}: not a release folder (no manifest.json)")
    man = json.loads(mpath.read_text())
    spec = parse_spec(man["spec"], source=str(mpath))
    ing = ingest(spec, data_dir)
    if ing.input["fingerprint"] != man["input"]["fingerprint"]:
        raise DataSourceError(
            f"input fingerprint {ing.input['fingerprint'][:12]} differs from the release's "
            f"{man['input']['fingerprint'][:12]}: cannot re-check guarantees relative to the input"
        )
    published = pq.read_table(release / "data.parquet")
    lineage = pq.read_table(release / "lineage.parquet")
    contract = GUARANTEE_LIST.validate_python(man["contract"])
    declared = (published.schema.metadata or {}).get(META_CONTRACT)
    if declared is None or contract_from_json(declared) != contract:
        raise PrivfairError(
            f"{release}: the contract in data.parquet does not match the manifest's"
        )
    return validate_release(
        ing.table, published, lineage, contract, man["params"].get("scaling", "minmax")
    )
