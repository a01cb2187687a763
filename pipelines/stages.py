"""The release flow as plain functions; the CLI, Dagster and Airflow all drive these.

ingest   -> typed Arrow table with roles, input fingerprint
protect  -> the component's result (table, lineage sidecar, declared contract, metrics)
validate -> every guarantee recomputed from the output (Great Expectations)
publish  -> immutable versioned release, atomically
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from components.microaggregation.checks import unsupported
from components.core.registry import COMPONENTS
from components.core.result import ComponentResult, stamp
from pipelines.ingest import load_dataset
from pipelines.version import code_version
from schemas import contracts as C
from schemas.errors import SpecError
from schemas.roles import read_roles
from schemas.spec import PipelineSpec


@dataclass
class Ingested:
    table: pa.Table
    input: dict[str, Any]


def ingest(spec: PipelineSpec, data_dir: str | Path | None = None) -> Ingested:
    table, info = load_dataset(spec.dataset, data_dir)
    return Ingested(table, info)


def contract_for(spec: PipelineSpec, result: ComponentResult) -> list:
    """The component's declared contract plus the spec's own demands. A demanded k-anonymity
    without QIs applies to every published QI column."""
    qis = tuple(read_roles(result.table).quasi_identifiers)
    demanded = []
    for i, g in enumerate(spec.guarantees):
        if isinstance(g, C.KAnonymity) and not g.quasi_identifiers:
            g = g.model_copy(update={"quasi_identifiers": qis})
        if not g.id:
            g = g.model_copy(update={"id": f"spec.{i}"})
        demanded.append(g)
    return list(result.contract) + demanded


def protect(spec: PipelineSpec, table: pa.Table) -> ComponentResult:
    """Run the spec's component; fail before running if a demanded guarantee has no checker."""
    missing = unsupported(list(spec.guarantees))
    if missing:
        raise SpecError("guarantees", f"no checker for guarantee kind(s) {missing} in this version")
    result = COMPONENTS[spec.component.name](table, spec.params)
    result.contract = contract_for(spec, result)
    result.table = stamp(result.table, result.component, result.params, result.contract)
    return result


def version_id(spec: PipelineSpec, input_fingerprint: str) -> str:
    """Deterministic release version: input fingerprint + spec + code version."""
    h = hashlib.sha256(json.dumps([input_fingerprint, spec.fingerprint(), code_version()]).encode())
    return h.hexdigest()[:16]
