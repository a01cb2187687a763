"""The release flow as four orchestrator-neutral, *path-based* steps.

Each step reads its inputs from files, writes its outputs as files into a work folder and returns
a small JSON-able dict of paths and numbers, so Airflow can hand the dicts through XCom (never a
table) and Dagster can keep them as asset values. The steps reuse exactly the functions of
``privfair run`` (``pipelines.stages`` and ``pipelines.run.build_candidate``), so a release they
publish has the same version id and byte-identical ``data.parquet``::

    ingest_step   -> raw.parquet (typed, roles in the schema), input.json (input record)
    protect_step  -> data.parquet, lineage.parquet, contract.json, params.json, metrics.json,
                     result.json (component, timings, warnings), spec.json (the effective spec);
                     a version already published in the store is reused, not recomputed
    validate_step -> a complete candidate in the store's staging area (built and validated by
                     ``build_candidate``: data, lineage, Great Expectations results, manifest,
                     report); quarantined when a guarantee fails; validation.json in the work dir
    publish_step  -> the candidate atomically renamed into ``<store>/<pipeline>/<version>``

``publish_step`` is idempotent (an existing version is left alone and reported as ``exists``) and
never publishes a failed candidate: it raises ``ContractViolation`` after quarantining it.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from components.core.result import ComponentResult
from pipelines.release import (
    STAGING,
    Candidate,
    Store,
    repair_latest,
    sweep_staging,
)
from pipelines.run import build_candidate, dumps, parquet_bytes
from pipelines.stages import Ingested, ingest, protect, version_id
from pipelines.validate import validate_release
from schemas.contracts import GUARANTEE_LIST
from schemas.errors import ContractViolation
from schemas.spec import PipelineSpec, load_spec, parse_spec

Paths = dict[str, Any]


# --- small file helpers ------------------------------------------------------------------------
def _write(path: Path, data: bytes) -> str:
    """Write ``data`` aside, then rename into place (a retried step never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return str(path)


def _read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


def _store(store: Store | str | Path) -> Store:
    return store if isinstance(store, Store) else Store.open(store)


def as_spec(spec: PipelineSpec | str | Path) -> PipelineSpec:
    """A spec object from an object, a YAML spec file or a ``spec.json`` written by a step."""
    if isinstance(spec, PipelineSpec):
        return spec
    path = Path(spec)
    if path.suffix == ".json":
        return parse_spec(_read_json(path), source=str(path))
    return load_spec(path)


def _ingested_paths(ingested: Paths | str | Path) -> Paths:
    if isinstance(ingested, dict):
        return ingested
    raw = Path(ingested)
    return {"raw": str(raw), "input": str(raw.with_name("input.json"))}


def load_ingested(ingested: Paths | str | Path) -> Ingested:
    p = _ingested_paths(ingested)
    return Ingested(pq.read_table(p["raw"]), _read_json(p["input"]))


def load_result(protected: Paths) -> ComponentResult:
    """The component's result, rebuilt from the files ``protect_step`` wrote."""
    meta = _read_json(protected["result"])
    return ComponentResult(
        component=meta["component"],
        table=pq.read_table(protected["data"]),
        lineage=pq.read_table(protected["lineage"]),
        contract=GUARANTEE_LIST.validate_json(Path(protected["contract"]).read_bytes()),
        params=_read_json(protected["params"]),
        metrics=_read_json(protected["metrics"]),
        timings=meta.get("timings", {}),
        warnings=meta.get("warnings", []),
    )


def _violation(
    failed: list[str], results: list[dict], where: str | None, reused: str | None = None
) -> ContractViolation:
    details = "\n".join(
        f"  {r['id']} {r['kind']}: {r['message']}" for r in results if not r["passed"]
    )
    if reused:
        tail = f"\nthe published release {reused} does not pass validation any more"
    elif where:
        tail = f"\ncandidate quarantined at {where}"
    else:
        tail = "\nnothing was published"
    return ContractViolation(failed, f"{details}{tail}")


# --- the steps ---------------------------------------------------------------------------------
def ingest_step(
    spec: PipelineSpec | str | Path, work_dir: str | Path, data_dir: str | Path | None = None
) -> Paths:
    """Load the spec's dataset (typed, roles attached, input checked) into ``raw.parquet``."""
    spec = as_spec(spec)
    work = Path(work_dir)
    ing = ingest(spec, data_dir)
    return {
        "pipeline": spec.name,
        "raw": _write(work / "raw.parquet", parquet_bytes(ing.table)),
        "input": _write(work / "input.json", dumps(ing.input)),
        "rows": ing.table.num_rows,
        "columns": ing.table.num_columns,
        "dataset": ing.input.get("dataset"),
        "fingerprint": ing.input["fingerprint"],
        "version": version_id(spec, ing.input["fingerprint"]),
    }


def _published_dir(store: Store | str | Path | None, pipeline: str, version: str) -> Path | None:
    """The local folder of ``pipeline/version`` if that release is already published."""
    if store is None:
        return None
    st = _store(store)
    if not st.local or not st.exists(pipeline, version, "manifest.json"):
        return None
    return Path(st.path(pipeline, version))


def protect_step(
    spec: PipelineSpec | str | Path,
    ingested: Paths | str | Path,
    work_dir: str | Path,
    store: Store | str | Path | None = None,
) -> Paths:
    """Run the spec's component on the ingested table; write its result as files.

    ``ingested`` is ``ingest_step``'s dict or the path of its ``raw.parquet``. With ``store``,
    a version that is already published there is not recomputed (as ``privfair run`` skips it):
    the dict points at the published ``data.parquet`` / ``lineage.parquet`` and the manifest's
    contract, params and metrics, and says ``reused``. The version id covers the input, the spec
    and the code, and components are deterministic, so this is what the component would give."""
    spec = as_spec(spec)
    work = Path(work_dir)
    src = _ingested_paths(ingested)
    info = _read_json(src["input"])
    version = version_id(spec, info["fingerprint"])
    out: Paths = {
        "pipeline": spec.name,
        "version": version,
        "work": str(work),
        "raw": str(src["raw"]),
        "input": str(src["input"]),
        "spec": _write(work / "spec.json", dumps(spec.model_dump(mode="json"))),
        "reused": None,
    }
    published = _published_dir(store, spec.name, version)
    if published is not None:
        man = _read_json(published / "manifest.json")
        contract = GUARANTEE_LIST.validate_python(man["contract"])
        meta = {
            "component": man["component"],
            "timings": man.get("timings", {}),
            "warnings": man.get("warnings", []),
        }
        data, lineage = published / "data.parquet", published / "lineage.parquet"
        rows_in, rows_out = info["rows"], pq.read_metadata(data).num_rows
        out["reused"] = str(published)
        out["data"], out["lineage"] = str(data), str(lineage)
        params, metrics = man["params"], man["metrics"]
    else:
        ing = load_ingested(src)
        result = protect(spec, ing.table)
        contract = result.contract
        meta = {
            "component": result.component,
            "timings": result.timings,
            "warnings": result.warnings,
        }
        out["data"] = _write(work / "data.parquet", parquet_bytes(result.table))
        out["lineage"] = _write(work / "lineage.parquet", parquet_bytes(result.lineage))
        rows_in, rows_out = ing.table.num_rows, result.table.num_rows
        params, metrics = result.params, result.metrics
    out.update(
        {
            "contract": _write(
                work / "contract.json", GUARANTEE_LIST.dump_json(contract, indent=2)
            ),
            "params": _write(work / "params.json", dumps(params)),
            "metrics": _write(work / "metrics.json", dumps(metrics)),
            "result": _write(work / "result.json", dumps(meta)),
            "rows_in": rows_in,
            "rows_out": rows_out,
            "guarantees": len(contract),
        }
    )
    return out


def validate_step(
    protected: Paths,
    store: Store | str | Path,
    work_dir: str | Path | None = None,
    *,
    raise_on_failure: bool = True,
) -> Paths:
    """Build the release candidate in the store's staging area exactly as ``privfair run`` does
    (``build_candidate``: writes data, lineage, validation results, manifest and report, and
    validates what was written), and record the outcome in ``validation.json``.

    On failure the candidate is quarantined (``<store>/<pipeline>/.quarantine/...``) and, with
    ``raise_on_failure``, ``ContractViolation`` is raised; otherwise the dict says
    ``passed: False``. On success the dict names the staged candidate for ``publish_step``.

    When ``protect_step`` reused a published release, that release's files are validated again
    (``validate_release``, nothing written to the store) and no candidate is staged."""
    spec = as_spec(protected["spec"])
    ing = load_ingested(protected)
    result = load_result(protected)
    version = protected["version"]
    st = _store(store)
    work = Path(work_dir or protected.get("work") or Path(protected["data"]).parent)
    cand = None
    if protected.get("reused"):
        validation = validate_release(
            ing.table,
            result.table,
            result.lineage,
            result.contract,
            result.params.get("scaling", "minmax"),
            None,
        )
    else:
        sweep_staging(st, spec.name, older_than_s=3600)
        cand = Candidate(st, spec.name, version)
        try:
            validation, _ = build_candidate(spec, ing, result, cand)
        except BaseException:
            cand.discard()
            raise
    summary = validation.summary()
    out: Paths = {
        "pipeline": spec.name,
        "version": version,
        "passed": validation.passed,
        "failed": validation.failed,
        "checked": len(validation.results),
        "candidate": cand.name if cand is not None else None,
        "quarantine": None,
        "reused": protected.get("reused"),
    }
    if not validation.passed and cand is not None:
        out["candidate"] = None
        out["quarantine"] = cand.quarantine()
    out["results"] = _write(work / "validation.json", dumps({**summary, **out}))
    if not validation.passed and raise_on_failure:
        raise _violation(validation.failed, summary["results"], out["quarantine"], out["reused"])
    return out


def _staged(store: Store, pipeline: str, version: str, name: str | None) -> Candidate | None:
    """Re-attach the candidate ``validate_step`` staged (None if it is gone or incomplete)."""
    if not name or not store.exists(pipeline, STAGING, name, "manifest.json"):
        return None
    return Candidate.attach(store, pipeline, version, name)


def publish_step(protected: Paths, validated: Paths | None, store: Store | str | Path) -> Paths:
    """Atomically publish the validated candidate as ``<store>/<pipeline>/<version>``.

    * ``validated`` failed -> nothing is published; ``ContractViolation`` is raised.
    * the version already exists -> nothing is rewritten; status ``exists``.
    * no staged candidate (``validated`` is None, or it was swept) -> the candidate is built and
      validated here, as ``privfair run`` would (quarantine + ``ContractViolation`` on failure).
    """
    spec = as_spec(protected["spec"])
    version = protected["version"]
    st = _store(store)
    if validated is not None and not validated["passed"]:
        results = _read_json(validated["results"]).get("results", [])
        raise _violation(
            validated["failed"], results, validated.get("quarantine"), validated.get("reused")
        )
    cand = _staged(st, spec.name, version, (validated or {}).get("candidate"))
    if st.exists(spec.name, version, "manifest.json"):
        if cand is not None:
            cand.discard()
        repair_latest(st, spec.name)  # a crash between rename and `latest` may have left it behind
        status = "exists"
    else:
        if cand is None:
            validated = validate_step(protected, st, raise_on_failure=True)
            cand = _staged(st, spec.name, version, validated["candidate"])
            if cand is None:  # pragma: no cover - validate_step just staged it
                raise RuntimeError(f"candidate {validated['candidate']} vanished from staging")
        try:
            status = "published" if cand.publish() else "exists"
        except BaseException:
            cand.discard()
            raise
    path = st.path(spec.name, version)
    out: Paths = {"pipeline": spec.name, "version": version, "path": path, "status": status}
    if st.local:
        for key, name in (("manifest", "manifest.json"), ("report", "report.html")):
            if st.exists(spec.name, version, name):
                out[key] = st.path(spec.name, version, name)
    return out
