"""One release end to end: ingest -> protect -> validate -> publish (or quarantine)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from components.core.result import ComponentResult
from pipelines.release import Candidate, Store, repair_latest, sweep_staging
from pipelines.stages import Ingested, ingest, protect, version_id
from pipelines.validate import Validation, validate_release
from pipelines.version import code_version
from schemas.contracts import GUARANTEE_LIST
from schemas.errors import ContractViolation
from schemas.spec import PipelineSpec

# The metrics a person looks at first (CLI summary, Dagster materialisation metadata).
HEADLINE_METRICS = (
    "input_rows",
    "output_rows",
    "dropped_rows",
    "groups",
    "relabelled",
    "dpar_before",
    "dpar_after",
    "t_pa_exact",
)


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, indent=2, sort_keys=True, default=_json_default).encode()


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


@dataclass
class Outcome:
    status: str  # published | exists | quarantined
    pipeline: str
    version: str
    path: str
    validation: Validation | None = None
    metrics: dict = field(default_factory=dict)


def manifest(
    spec: PipelineSpec, ing: Ingested, result: ComponentResult, validation: Validation, version: str
) -> dict:
    return {
        "pipeline": spec.name,
        "version": version,
        # microseconds: repair_latest orders releases by this stamp
        "published_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "code_version": code_version(),
        "spec": spec.model_dump(mode="json"),
        "spec_fingerprint": spec.fingerprint(),
        "component": result.component,
        "params": result.params,
        "contract": GUARANTEE_LIST.dump_python(result.contract, mode="json"),
        "validation": validation.summary(),
        "metrics": result.metrics,
        "timings": result.timings,
        "warnings": result.warnings,
        "input": ing.input,
        "files": {
            "data": "data.parquet",
            "lineage": "lineage.parquet",
            "report": "report.html",
            **validation.artefacts,
        },
    }


def build_candidate(
    spec: PipelineSpec, ing: Ingested, result: ComponentResult, cand: Candidate
) -> tuple[Validation, dict]:
    """Write the candidate's files, validate what was written, and write the manifest."""
    cand.write("data.parquet", parquet_bytes(result.table))
    cand.write("lineage.parquet", parquet_bytes(result.lineage))
    published = cand.read_table("data.parquet")
    lineage = cand.read_table("lineage.parquet")
    validation = validate_release(
        ing.table,
        published,
        lineage,
        result.contract,
        result.params.get("scaling", "minmax"),
        cand.local_dir if cand.store.local else None,
    )
    man = manifest(spec, ing, result, validation, cand.version)
    cand.write("manifest.json", dumps(man))
    from pipelines.report import render_report

    cand.write("report.html", render_report(man, published, ing.table, lineage).encode())
    return validation, man


def run_release(
    spec: PipelineSpec,
    store_uri: str | Path,
    data_dir: str | Path | None = None,
    crash_after: str | None = None,
) -> Outcome:
    """Publish one release of ``spec``. Idempotent: an existing version is not rewritten.
    A failed validation quarantines the candidate and raises ``ContractViolation``."""
    store = Store.open(store_uri)
    ing = ingest(spec, data_dir)
    version = version_id(spec, ing.input["fingerprint"])
    sweep_staging(store, spec.name, older_than_s=3600)
    if store.exists(spec.name, version, "manifest.json"):
        repair_latest(
            store, spec.name
        )  # a crash between rename and `latest` may have left it behind
        return Outcome("exists", spec.name, version, store.path(spec.name, version))
    result = protect(spec, ing.table)
    cand = Candidate(store, spec.name, version)
    try:
        validation, man = build_candidate(spec, ing, result, cand)
        if not validation.passed:
            where = cand.quarantine()
            details = "\n".join(
                f"  {r.id} {r.kind}: {r.message}" for r in validation.results if not r.passed
            )
            raise ContractViolation(
                validation.failed, f"{details}\ncandidate quarantined at {where}"
            )
        if crash_after == "validate":
            import os

            os._exit(17)
        published = cand.publish(crash_after=crash_after)
    except BaseException:
        cand.discard()
        raise
    status = "published" if published else "exists"
    return Outcome(
        status, spec.name, version, store.path(spec.name, version), validation, result.metrics
    )
