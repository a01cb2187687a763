"""The release flow, in memory: ingest -> protect -> validate -> publish (or quarantine).

The CLI calls ``run_release``; the file-based task layer (``pipelines.tasks``) that Dagster and
Airflow drive calls the same functions one at a time. Nothing here names an algorithm: the spec
names one, and its descriptor (``components.core.descriptor.Algorithm``) says how to run it,
what it owes (its contract), how to check it (its evidence) and what to show (its metrics).

A release folder ``<store>/<pipeline>/<version>/`` holds each public output as
``<output>.parquet``, each sidecar as ``internal/<sidecar>.parquet`` (never for distribution),
``manifest.json`` (listing both, and the sha256 and size of every other file of the release:
``checksums``), ``validation/`` and ``report.html``. An existing version is reused only when it is
complete (``already_published``); otherwise it is quarantined and built again.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from components.core.descriptor import Algorithm
from components.core.engine import Engine, make_engine, using
from components.core.registry import family_of
from components.core.result import META_CONTRACT, ComponentResult
from pipelines.catalogue import algorithm_of, parse_spec
from pipelines.ingest import load_dataset, private_columns
from pipelines.release import (
    Candidate,
    Store,
    checksums,
    quarantine_release,
    resolve_release,
    set_latest,
    sweep_staging,
    tidy,
    verify_release,
)
from pipelines.validate import Validation, validate_release
from pipelines.version import code_version
from schemas import contracts as C
from schemas.errors import (
    ContractViolation,
    DataSourceError,
    PrivfairError,
    SpecError,
    StoreError,
)
from schemas.spec import PipelineSpec

SIDECAR_DIR = "internal"


# --- small helpers ---------------------------------------------------------------------------------
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


def output_file(name: str) -> str:
    return f"{name}.parquet"


def sidecar_file(name: str) -> str:
    return f"{SIDECAR_DIR}/{name}.parquet"


def violation(
    failed: list[str], results: list[dict], where: str | None = None, reused: str | None = None
) -> ContractViolation:
    """The error of a release whose guarantees do not hold, listing each failed check."""
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


# --- ingest ------------------------------------------------------------------------------------------
@dataclass
class Ingested:
    table: pa.Table
    input: dict[str, Any]


def ingest(spec: PipelineSpec, data_dir: str | Path | None = None) -> Ingested:
    """The spec's input table (roles attached, generic rules checked) and its input record; a
    built-in dataset takes the role presets of the spec's algorithm family; a relative file path
    is resolved against the spec file's folder, then ``data_dir``."""
    presets = family_of(algorithm_of(spec)).dataset_roles
    table, info = load_dataset(spec.dataset, data_dir, presets, base_dir=spec.spec_dir)
    return Ingested(table, info)


# --- the contract ------------------------------------------------------------------------------------
def demands(spec: PipelineSpec, algo: Algorithm, input_table: pa.Table, owed: list) -> list:
    """The spec's demanded guarantees for this input: each column they name must exist (in the
    input, or among the quasi-identifiers the algorithm publishes), and a k-anonymity demand
    without quasi-identifiers applies to the ones the algorithm's own k-anonymity names (else
    the input's)."""
    published_qis: tuple[str, ...] = ()
    for g in owed:
        if isinstance(g, C.KAnonymity) and g.quasi_identifiers:
            published_qis = g.quasi_identifiers
            break
    known = set(input_table.column_names) | set(published_qis)
    out = []
    for i, g in enumerate(spec.demands):
        for f in g.column_fields:
            value = getattr(g, f)
            for name in (value,) if isinstance(value, str) else value:
                if name not in known:
                    raise SpecError(
                        f"guarantees.{i}.{f}",
                        f"no column '{name}' in the input of '{spec.name}'",
                    )
        if isinstance(g, C.KAnonymity) and not g.quasi_identifiers:
            from schemas.roles import read_roles

            qis = published_qis or tuple(read_roles(input_table).quasi_identifiers)
            g = g.model_copy(update={"quasi_identifiers": qis})
        out.append(g)
    return out


def required_contract(spec: PipelineSpec, input_table: pa.Table) -> list:
    """What a release of ``spec`` on ``input_table`` must guarantee: the algorithm's contract
    for the spec's params on this input, then the spec's demands. Computed from the spec and
    the input only, never from what a release says about itself."""
    algo = algorithm_of(spec)
    owed = algo.required_contract(spec.params, input_table)
    return owed + demands(spec, algo, input_table, owed) + role_guarantees(input_table)


def role_guarantees(input_table: pa.Table) -> list:
    """What every release owes the input's roles whatever the algorithm: its ``private``
    columns (refused or dropped at ingest) are in no public output."""
    private = private_columns(input_table)
    return [C.ColumnsAbsent(id="roles.private", columns=tuple(private))] if private else []


def engine_of(spec: PipelineSpec) -> Engine:
    """The engine the spec's ``execution`` names (``components.core.engine.make_engine``)."""
    ex = spec.execution
    return make_engine(ex.engine, ex.master, ex.workers)


def protect(spec: PipelineSpec, ing: Ingested, engine: Engine | None = None) -> ComponentResult:
    """Run the spec's algorithm on ``engine`` (default: the spec's, opened and closed here); its
    declared contract gets the spec's demands appended. A demand naming a missing column is
    refused before anything runs."""
    algo = algorithm_of(spec)
    owed = algo.required_contract(spec.params, ing.table)
    extra = demands(spec, algo, ing.table, owed)
    own = engine is None
    engine = engine_of(spec) if own else engine
    try:
        calls = engine.calls
        with using(engine):
            result = algo(ing.table, spec.params)
        result.execution = engine.describe()
        if engine.name != "local" and engine.calls == calls:
            result.warnings.append(
                f"the {engine.name} engine ran nothing: {algo.name} ran in this process (a "
                "family that runs in blocks takes a parameter for their size)"
            )
    finally:
        if own:
            engine.close()
    result.contract = list(result.contract) + extra + role_guarantees(ing.table)
    return result.stamped()


def version_id(spec: PipelineSpec, input_fingerprint: str) -> str:
    """Deterministic release version: input fingerprint + spec + the code version of the shared
    core and the algorithm's family."""
    package = family_of(algorithm_of(spec)).package
    h = hashlib.sha256(
        json.dumps([input_fingerprint, spec.fingerprint(), code_version(package)]).encode()
    )
    return h.hexdigest()[:16]


# --- validate and publish -----------------------------------------------------------------------------
def declared_copies(manifest_contract: list, outputs: dict[str, pa.Table]) -> dict[str, list]:
    """Every copy of the contract a release carries: the manifest's and each output's."""
    copies = {"manifest.json": list(manifest_contract)}
    for name, t in outputs.items():
        raw = (t.schema.metadata or {}).get(META_CONTRACT)
        copies[output_file(name)] = C.contract_from_json(raw) if raw else []
    return copies


def manifest(
    spec: PipelineSpec,
    ing: Ingested,
    result: ComponentResult,
    validation: Validation,
    version: str,
) -> dict:
    algo = algorithm_of(spec)
    return {
        "pipeline": spec.name,
        "version": version,
        # microseconds: repair_latest orders releases by this stamp
        "published_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "code_version": code_version(family_of(algo).package),
        "spec": spec.model_dump(mode="json"),
        "spec_fingerprint": spec.fingerprint(),
        "component": result.component,
        "family": algo.family,
        "params": result.params,
        "contract": C.contract_to_data(result.contract),
        "validation": validation.summary(),
        "metrics": result.metrics,
        "headline": {m.key: m.label for m in algo.headline},
        "timings": result.timings,
        "execution": result.execution,
        "warnings": result.warnings,
        "input": ing.input,
        "outputs": {
            k: {"file": output_file(k), "rows": t.num_rows} for k, t in result.outputs.items()
        },
        "sidecars": {
            k: {"file": sidecar_file(k), "rows": t.num_rows, "internal": True}
            for k, t in result.sidecars.items()
        },
        "files": {"report": "report.html", **validation.artefacts},
    }


def build_candidate(
    spec: PipelineSpec, ing: Ingested, result: ComponentResult, cand: Candidate
) -> tuple[Validation, dict]:
    """Write the candidate's files, validate what was written (against the contract rebuilt
    from the spec and the input), then write the report and, last, the manifest with the
    checksums of every other file (a candidate with a manifest is complete). A candidate that
    passes also gets the cost of protection measured on a hold-out of the input (see
    ``pipelines.evaluate.cost_of_protection``) for its report."""
    for k, t in result.outputs.items():
        cand.write(output_file(k), parquet_bytes(t))
    for k, t in result.sidecars.items():
        cand.write(sidecar_file(k), parquet_bytes(t))
    outputs = {k: cand.read_table(output_file(k)) for k in result.outputs}
    sidecars = {k: cand.read_table(sidecar_file(k)) for k in result.sidecars}
    algo = algorithm_of(spec)
    validation = validate_release(
        algo,
        spec.params,
        ing.table,
        outputs,
        sidecars,
        required_contract(spec, ing.table),
        declared_copies(result.contract, outputs),
        cand.local_dir if cand.store.local else None,
    )
    man = manifest(spec, ing, result, validation, cand.version)
    if validation.passed:  # a measurement for readers of a release, not a guarantee
        from pipelines.evaluate import cost_of_protection

        man["cost_of_protection"] = cost_of_protection(
            spec, ing.table, input_fingerprint=ing.input["fingerprint"]
        )
    from pipelines.report import render_report

    cand.write("report.html", render_report(man, algo, outputs, ing.table, sidecars).encode())
    man["checksums"] = checksums(cand.store, *cand.parts)
    cand.write("manifest.json", dumps(man))
    return validation, man


@dataclass(frozen=True)
class Existing:
    """What ``already_published`` found: true when the version is published and complete.
    ``problem`` says why a folder of that version was not (it was then moved to
    ``quarantined``, None if another run moved it first)."""

    version: str
    complete: bool
    problem: str | None = None
    quarantined: str | None = None

    def __bool__(self) -> bool:
        return self.complete

    @property
    def message(self) -> str | None:
        if self.problem is None:
            return None
        return (
            f"existing release {self.version} was incomplete or corrupted ({self.problem}); "
            "quarantined and rebuilt"
        )


def already_published(store: Store, pipeline: str, version: str) -> Existing:
    """Whether ``version`` is published and complete (``release.verify_release``: manifest
    readable, every file it lists present with its recorded checksum). A folder of that version
    that is not complete is moved to ``.quarantine/`` (the result says why) so that the caller
    builds it again. ``latest`` is not touched here: the caller moves it when it (re)uses the
    version."""
    if not store.exists(pipeline, version):
        return Existing(version, False)
    problem = verify_release(store, pipeline, version)
    if problem is None:
        return Existing(version, True)
    where = quarantine_release(store, pipeline, version, problem)
    return Existing(version, False, problem, where)


@dataclass
class Outcome:
    status: str  # published | exists | rebuilt (an incomplete release was quarantined)
    pipeline: str
    version: str
    path: str
    validation: Validation | None = None
    metrics: dict = field(default_factory=dict)
    headline: list = field(default_factory=list)
    message: str | None = None
    warnings: list = field(default_factory=list)


def run_release(
    spec: PipelineSpec,
    store_uri: str | Path,
    data_dir: str | Path | None = None,
    crash_after: str | None = None,
) -> Outcome:
    """Publish one release of ``spec``. Idempotent: an existing complete version is not
    rewritten, and ``latest`` is moved to it (a re-run points ``latest`` at the version it
    produced); an incomplete one is quarantined and rebuilt (status ``rebuilt``, with a
    ``message``). A failed validation quarantines the candidate and raises
    ``ContractViolation``; a failed run leaves no empty staging or pipeline folder behind."""
    store = Store.open(store_uri)
    store.check_pipeline(spec.name)
    ing = ingest(spec, data_dir)
    version = version_id(spec, ing.input["fingerprint"])
    headline = list(algorithm_of(spec).headline)
    path = store.path(spec.name, version)
    sweep_staging(store, spec.name, older_than_s=3600)
    existing = already_published(store, spec.name, version)
    if existing:
        set_latest(store, spec.name, version)
        man = json.loads(store.read_text(spec.name, version, "manifest.json"))
        return Outcome(
            "exists",
            spec.name,
            version,
            path,
            metrics=man.get("metrics", {}),
            headline=headline,
            warnings=man.get("warnings", []),
        )
    result = protect(spec, ing)
    try:
        cand = Candidate(store, spec.name, version)
        try:
            validation, _ = build_candidate(spec, ing, result, cand)
            if not validation.passed:
                where = cand.quarantine()
                raise violation(validation.failed, validation.summary()["results"], where)
            if crash_after == "validate":
                import os

                os._exit(17)
            published = cand.publish(crash_after=crash_after)
        except OSError as e:  # a write of the candidate (validation artefacts included)
            raise StoreError(
                getattr(e, "filename", None) or store.path(*cand.parts),
                f"cannot write the release candidate: {e.strerror or e}",
            ) from None
        finally:
            cand.discard()
    except BaseException:
        tidy(store, spec.name)
        raise
    if not published:  # another run published this version first
        set_latest(store, spec.name, version)
    status = "exists" if not published else "rebuilt" if existing.problem else "published"
    return Outcome(
        status,
        spec.name,
        version,
        path,
        validation,
        result.metrics,
        headline,
        existing.message if published else None,
        result.warnings,
    )


# --- re-check a published release ----------------------------------------------------------------
def release_files(man: dict) -> tuple[dict[str, str], dict[str, str]]:
    """(outputs, sidecars) as name -> file inside the release, from its manifest (releases
    written before named outputs had ``data.parquet`` and ``lineage.parquet``)."""
    if "outputs" in man:
        return (
            {k: v["file"] for k, v in man["outputs"].items()},
            {k: v["file"] for k, v in (man.get("sidecars") or {}).items()},
        )
    files = man.get("files") or {}
    return {"data": files.get("data", "data.parquet")}, {
        "lineage": files.get("lineage", "lineage.parquet")
    }


def revalidate(release: Path, data_dir: str | Path | None = None) -> Validation:
    """Recompute every guarantee of ``release`` against the contract rebuilt from its spec. The
    input is re-loaded from the spec in the manifest and must match the fingerprint recorded at
    publication; the contract copies the release carries are only compared with that contract.
    ``release`` may be a ``<store>/<pipeline>/latest`` pointer file."""
    release = resolve_release(release)
    mpath = release / "manifest.json"
    if not mpath.is_file():
        raise PrivfairError(f"{release}: not a release folder (no manifest.json)")
    try:
        man = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PrivfairError(f"{mpath}: the manifest cannot be read: {e}") from None
    spec = parse_spec(man["spec"], source=str(mpath))
    ing = ingest(spec, data_dir)
    if ing.input["fingerprint"] != man["input"]["fingerprint"]:
        raise DataSourceError(
            f"input fingerprint {ing.input['fingerprint'][:12]} differs from the release's "
            f"{man['input']['fingerprint'][:12]}: cannot re-check guarantees relative to the input"
        )
    out_files, side_files = release_files(man)
    try:
        outputs = {k: pq.read_table(release / f) for k, f in out_files.items()}
        sidecars = {k: pq.read_table(release / f) for k, f in side_files.items()}
    except (OSError, pa.ArrowInvalid) as e:
        raise PrivfairError(f"{release}: a release file cannot be read: {e}") from None
    try:
        declared = declared_copies(C.parse_contract(man.get("contract") or []), outputs)
    except C.GuaranteeError as e:
        raise PrivfairError(f"{release}: its declared contract cannot be read: {e}") from None
    return validate_release(
        algorithm_of(spec),
        spec.params,
        ing.table,
        outputs,
        sidecars,
        required_contract(spec, ing.table),
        declared,
    )
