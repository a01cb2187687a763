"""The release flow as four file-based tasks over ``privfair.run.flow``, for the orchestrators.

Each task reads its inputs from files, writes its outputs as files into a work folder and
returns a small typed record of paths and numbers (``IngestRecord``, ``ProtectRecord``,
``ValidateRecord``, ``PublishRecord``). Records turn into plain dicts (``as_dict``) for Airflow's
XCom or Dagster's asset values, and back (``of``), never holding a table. The tasks call exactly
the functions of ``privfair run`` (``privfair.run.flow``: one ``ReleasePlan`` per task, ``protect``,
``stage``, ``publish``), so a release they publish has the same version id and byte-identical
outputs and shareable copy::

    ingest_task   -> input.json (the input record: fingerprint, rows), spec.json; no copy of
                     the raw input: each later task reads the source again and refuses it if
                     its fingerprint changed meanwhile (for a spec whose rows are handed over,
                     ``input_file``: the file an upstream task wrote, read again likewise)
    protect_task  -> one Parquet file per output and sidecar, contract.json, params.json,
                     metrics.json, result.json, spec.json; a version already published in the
                     store is reused, not recomputed
    validate_task -> a complete candidate in the store's staging area (``flow.stage``);
                     quarantined when a guarantee fails; validation.json in the work dir
    publish_task  -> the candidate atomically renamed into ``<store>/<pipeline>/<version>``
    cleanup       -> the run's work folder removed (the orchestrators call it when a run ends,
                     whether it published or not)

and, beside the release flow, ``evaluate_task``: ``privfair evaluate`` on the ingested table,
written to ``<evaluations>/<pipeline>/`` (a release validated after it shows its trade-off plot).

Work files are the owner's (the protected table before validation, the lineage): folders 0700,
files 0600.

``publish_task`` is idempotent (an existing complete version is left alone and reported as
``exists``, and ``latest`` points at it) and never publishes a failed candidate: it raises
``ContractViolation`` after quarantining it. Whether a version is published is decided by
``flow.already_published`` (the same check as ``privfair run``): a version folder that is not
complete (manifest unreadable, a listed file missing or changed) is quarantined and rebuilt
(``ProtectRecord.rebuilt`` / ``PublishRecord.status == "rebuilt"`` say so).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import pyarrow.parquet as pq

from privfair.budget.admission import Admission, check_republish, failing
from privfair.components.core.result import ComponentResult
from privfair.evaluation.options import EvaluateOptions
from privfair.io.files import read_table_file
from privfair.release.manifest import Manifest
from privfair.release.store import STAGING, Candidate, Store, set_latest
from privfair.run import flow
from privfair.schemas.contracts import contract_to_data, parse_contract
from privfair.schemas.errors import DataSourceError, SpecError
from privfair.schemas.spec import CsvSpec, PipelineSpec
from privfair.spec.catalogue import load_spec, parse_spec, with_execution

R = TypeVar("R", bound="Record")


@dataclass(frozen=True)
class Record:
    """A task's result: JSON-able fields only."""

    pipeline: str
    version: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls: type[R], value: R | dict[str, Any]) -> R:
        if isinstance(value, cls):
            return value
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in dict(value).items() if k in names})


@dataclass(frozen=True)
class IngestRecord(Record):
    spec: str
    input: str
    rows: int
    columns: int
    dataset: str | None
    fingerprint: str
    data_dir: str | None = None
    spec_dir: str | None = None  # where a relative dataset.path is read (the spec file's folder)
    partition: str | None = None  # the partition released (None: every row)
    input_file: str | None = None  # the file holding the rows of a spec read in memory
    input_csv: dict | None = None  # how that file is written, if CSV (``CsvSpec``)


@dataclass(frozen=True)
class ProtectRecord(Record):
    work: str
    spec: str
    input: str
    outputs: dict[str, str]
    sidecars: dict[str, str]
    contract: str
    params: str
    metrics: str
    result: str
    rows_in: int
    rows_out: int
    guarantees: int
    fingerprint: str = ""
    data_dir: str | None = None
    spec_dir: str | None = None
    reused: str | None = None
    rebuilt: str | None = None  # why a published folder of this version was quarantined
    partition: str | None = None
    ledger: dict | None = None  # this run's ledger entry (``Admission.record``), if it ran
    input_file: str | None = None
    input_csv: dict | None = None


@dataclass(frozen=True)
class ValidateRecord(Record):
    passed: bool
    failed: list[str]
    checked: int
    results: str
    candidate: str | None = None
    quarantine: str | None = None
    reused: str | None = None


@dataclass(frozen=True)
class PublishRecord(Record):
    path: str
    status: str
    manifest: str | None = None
    report: str | None = None
    message: str | None = None
    shared: str | None = None  # the shareable copy's folder (``privfair export`` copies it)
    ledger: dict | None = None  # the release's ledger record (``manifest["ledger"]``)


@dataclass(frozen=True)
class EvaluateRecord(Record):
    path: str
    summary: str
    page: str
    seconds: float
    grid: dict[str, list]
    folds: int
    classifiers: list[str]
    points: int


# --- small file helpers ------------------------------------------------------------------------
def _write(path: Path, data: bytes) -> str:
    """Write ``data`` aside, then rename into place (a retried task never sees half a file);
    readable by its owner only, in a folder only its owner enters."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return str(path)


def cleanup(work_dir: str | Path) -> bool:
    """Remove a run's work folder (the orchestrators call this when a run ends, published or
    not: the protected table before validation and the lineage are the owner's). True if
    something was removed."""
    path = Path(work_dir)
    if not path.exists():
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True


def _read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


def _store(store: Store | str | Path) -> Store:
    return store if isinstance(store, Store) else Store.open(store)


def spec_of(rec: IngestRecord | ProtectRecord) -> PipelineSpec:
    """The spec a task wrote (``spec.json``), located in its spec file's folder again."""
    spec = as_spec(rec.spec)
    return spec.located(rec.spec_dir) if rec.spec_dir else spec


def as_spec(spec: PipelineSpec | str | Path) -> PipelineSpec:
    """A resolved spec from an object, a YAML spec file or a ``spec.json`` written by a task."""
    if isinstance(spec, PipelineSpec):
        return spec
    path = Path(spec)
    if path.suffix == ".json":
        return parse_spec(_read_json(path), source=str(path))
    return load_spec(path)


def plan_of(
    spec: PipelineSpec,
    store=None,
    data_dir: str | None = None,
    partition: str | None = None,
    table=None,
) -> flow.ReleasePlan:
    return flow.ReleasePlan.of(spec, store, data_dir, partition, table)


def input_table(rec: IngestRecord | ProtectRecord):
    """The rows of a spec read in memory, from the file ``ingest_task`` was handed
    (``input_file``), read again as it was (None when the spec reads its own dataset):
    ``load_ingested`` then refuses them if they are not the rows ingested."""
    if rec.input_file is None:
        return None
    return read_table_file(rec.input_file, CsvSpec(**rec.input_csv) if rec.input_csv else None)


def load_ingested(plan: flow.ReleasePlan, rec: IngestRecord | ProtectRecord) -> flow.Ingested:
    """The input again, read from its source (no task keeps a copy of it), and refused
    (``DataSourceError``) when it is not the input ``ingest_task`` fingerprinted."""
    ing = plan.ingest()
    want = rec.fingerprint or _read_json(rec.input)["fingerprint"]
    if ing.input["fingerprint"] != want:
        raise DataSourceError(
            f"the input of '{plan.name}' changed since this run ingested it (fingerprint "
            f"{ing.input['fingerprint'][:12]}, ingested {want[:12]}): start a new run"
        )
    return ing


def load_result(rec: ProtectRecord) -> ComponentResult:
    """The algorithm's result, rebuilt from the files ``protect_task`` wrote."""
    meta = _read_json(rec.result)
    return ComponentResult(
        component=meta["component"],
        outputs={k: pq.read_table(p) for k, p in rec.outputs.items()},
        sidecars={k: pq.read_table(p) for k, p in rec.sidecars.items()},
        contract=parse_contract(_read_json(rec.contract)),
        params=_read_json(rec.params),
        metrics=_read_json(rec.metrics),
        timings=meta.get("timings", {}),
        warnings=meta.get("warnings", []),
        execution=meta.get("execution") or {},
    )


# --- the tasks ---------------------------------------------------------------------------------
def ingest_task(
    spec: PipelineSpec | str | Path,
    work_dir: str | Path,
    data_dir: str | Path | None = None,
    partition: str | None = None,
    input_file: str | Path | None = None,
    csv: CsvSpec | None = None,
) -> IngestRecord:
    """Read the spec's dataset (typed, roles attached, input checked; one partition of it with
    ``partition``) and record its fingerprint; no copy of the rows is kept.

    ``input_file``: the Parquet or CSV file (``csv``: how it is written) holding the rows of a
    spec read in memory (``dataset.source.kind: memory``, e.g. ``privfair.api.in_memory``),
    as ``privfair run --input`` reads it, so the version is the one ``privfair run --input``
    gives; the later tasks read that file again (``input_table``) and check its fingerprint.
    A spec reading its own dataset with ``input_file``, or one read in memory without it, is a
    ``SpecError`` naming ``dataset.source``."""
    spec = as_spec(spec)
    work = Path(work_dir)
    memory = spec.dataset.source is not None and spec.dataset.source.kind == "memory"
    if memory != (input_file is not None):
        raise SpecError(
            "dataset.source",
            f"'{spec.name}' reads rows handed over by its caller: give the file holding them"
            if memory
            else f"'{spec.name}' reads its own dataset: an input file would be ignored "
            "(give a spec read in memory: privfair.api.in_memory)",
        )
    file = os.path.realpath(input_file) if input_file is not None else None
    table = read_table_file(file, csv) if file is not None else None
    plan = plan_of(
        spec,
        data_dir=str(data_dir) if data_dir is not None else None,
        partition=partition,
        table=table,
    )
    ing = plan.ingest()
    table = None
    return IngestRecord(
        pipeline=spec.name,
        version=plan.version(ing.input["fingerprint"]),
        spec=_write(work / "spec.json", flow.dumps(spec.model_dump(mode="json"))),
        input=_write(work / "input.json", flow.dumps(ing.input)),
        rows=ing.table.num_rows,
        columns=ing.table.num_columns,
        dataset=ing.input.get("dataset"),
        fingerprint=ing.input["fingerprint"],
        data_dir=plan.data_dir,
        spec_dir=str(spec.spec_dir) if spec.spec_dir is not None else None,
        partition=partition,
        input_file=file,
        input_csv=csv.model_dump(mode="json") if csv is not None and file is not None else None,
    )


def protect_task(
    spec: PipelineSpec | str | Path,
    ingested: IngestRecord | dict,
    work_dir: str | Path,
    store: Store | str | Path | None = None,
    execution: dict | None = None,
) -> ProtectRecord:
    """Run the spec's algorithm on the ingested table; write its result as files.

    ``execution`` overrides the spec's ``execution`` keys (``engine``, ``master``,
    ``workers``: ``privfair.spec.catalogue.with_execution``), as ``privfair run --engine`` does;
    the version does not change.

    With ``store``, a version already published there (and complete: ``flow.already_published``)
    is not recomputed (as ``privfair run`` skips it): the record points at the published files
    and the manifest's contract, params and metrics, and says ``reused``. The version id covers
    the input, the spec and the code, and algorithms are deterministic, so this is what the
    algorithm would give. An incomplete one is quarantined (``rebuilt`` says why).

    A run that computes records itself in the ledger first (``flow.admit``: a differentially
    private one reserves its cost, ``BudgetExceeded`` when over budget); a reused version
    charges nothing."""
    spec = with_execution(as_spec(spec), **(execution or {}))
    ing_rec = IngestRecord.of(ingested)
    if spec.spec_dir is None and ing_rec.spec_dir:
        spec = spec.located(ing_rec.spec_dir)
    work = Path(work_dir)
    info = _read_json(ing_rec.input)
    plan = plan_of(spec, data_dir=ing_rec.data_dir, partition=ing_rec.partition)
    version = plan.version(info["fingerprint"])
    st = _store(store) if store is not None else None
    existing = flow.already_published(st, spec.name, version) if st is not None else None
    adm = None
    published = _published_here(st, spec.name, version, work) if existing else None
    if published is not None:
        man = Manifest.load(published)
        out_files, side_files = man.files()
        outputs = {k: str(published / f) for k, f in out_files.items()}
        sidecars = {k: str(published / f) for k, f in side_files.items()}
        contract, params, metrics = man["contract"], man["params"], man["metrics"]
        meta = {k: man.get(k) for k in ("component", "timings", "warnings", "execution")}
        rows_in, rows_out = (
            info["rows"],
            sum(pq.read_metadata(p).num_rows for p in outputs.values()),
        )
    else:
        plan = plan_of(
            spec, data_dir=ing_rec.data_dir, partition=ing_rec.partition, table=input_table(ing_rec)
        )
        ing = load_ingested(plan, ing_rec)
        adm = flow.admit(
            flow.ReleasePlan.of(spec, st, ing_rec.data_dir, ing_rec.partition, plan.table),
            ing,
            version,
        )
        with failing(adm):
            result = flow.protect(plan, ing)
        outputs = {
            k: _write(work / flow.output_file(k), flow.parquet_bytes(t))
            for k, t in result.outputs.items()
        }
        sidecars = {
            k: _write(work / flow.sidecar_file(k), flow.parquet_bytes(t))
            for k, t in result.sidecars.items()
        }
        contract = contract_to_data(result.contract)
        params, metrics = result.params, result.metrics
        meta = {
            "component": result.component,
            "timings": result.timings,
            "warnings": result.warnings,
            "execution": result.execution,
        }
        rows_in, rows_out = ing.table.num_rows, sum(t.num_rows for t in result.outputs.values())
    return ProtectRecord(
        pipeline=spec.name,
        version=version,
        work=str(work),
        spec=_write(work / "spec.json", flow.dumps(spec.model_dump(mode="json"))),
        input=ing_rec.input,
        outputs=outputs,
        sidecars=sidecars,
        contract=_write(work / "contract.json", flow.dumps(contract)),
        params=_write(work / "params.json", flow.dumps(params)),
        metrics=_write(work / "metrics.json", flow.dumps(metrics)),
        result=_write(work / "result.json", flow.dumps(meta)),
        rows_in=rows_in,
        rows_out=rows_out,
        guarantees=len(contract),
        fingerprint=info["fingerprint"],
        data_dir=ing_rec.data_dir,
        spec_dir=str(spec.spec_dir) if spec.spec_dir is not None else ing_rec.spec_dir,
        reused=str(published) if published is not None else None,
        rebuilt=existing.message if existing is not None else None,
        partition=ing_rec.partition,
        ledger=adm.record(atoms=True) if adm is not None else None,
        input_file=ing_rec.input_file,
        input_csv=ing_rec.input_csv,
    )


def _published_here(st: Store | None, pipeline: str, version: str, work: Path) -> Path | None:
    """The folder of a published ``version`` this task can read: the release itself on a
    local store, else a copy of its manifest, outputs and sidecars in the work folder (a
    re-run on any store kind reuses what is published: it never runs the algorithm, nor
    spends budget, again)."""
    if st is None:
        return None
    if st.local:
        return Path(st.path(pipeline, version))
    folder = work / "published"
    out_files, side_files = Manifest.read(st, pipeline, version).files()
    for f in ["manifest.json", *out_files.values(), *side_files.values()]:
        _write(folder / f, st.read_bytes(pipeline, version, *Path(f).parts))
    return folder


def validate_task(
    protected: ProtectRecord | dict,
    store: Store | str | Path,
    *,
    raise_on_failure: bool = True,
) -> ValidateRecord:
    """Build the release candidate in the store's staging area exactly as ``privfair run`` does
    (``flow.stage``: writes outputs, sidecars, validation results, the owner's manifest and
    report and the shareable copy, and validates what was written against the contract rebuilt
    from the spec), and record the outcome in ``validation.json``.

    On failure the candidate is quarantined and, with ``raise_on_failure``, ``ContractViolation``
    is raised; otherwise the record says ``passed=False``. When ``protect_task`` reused a
    published release, that release's files are validated again (nothing is staged)."""
    rec = ProtectRecord.of(protected)
    spec = spec_of(rec)
    plan = plan_of(spec, store, rec.data_dir, rec.partition, input_table(rec))
    ing = load_ingested(plan, rec)
    result = load_result(rec)
    with plan.running():
        validation, staged = _validate_or_stage(plan, spec, rec, ing, result)
    summary = validation.summary()
    candidate = staged.cand.name if staged is not None and staged.cand is not None else None
    quarantine = staged.quarantine if staged is not None else None
    results = _write(
        Path(rec.work) / "validation.json",
        flow.dumps({**summary, "candidate": candidate, "quarantine": quarantine}),
    )
    out = ValidateRecord(
        pipeline=spec.name,
        version=rec.version,
        passed=validation.passed,
        failed=validation.failed,
        checked=len(validation.results),
        results=results,
        candidate=candidate,
        quarantine=quarantine,
        reused=rec.reused,
    )
    if not validation.passed and raise_on_failure:
        raise flow.violation(validation.failed, summary["results"], quarantine, rec.reused)
    return out


def _validate_or_stage(
    plan: flow.ReleasePlan,
    spec: PipelineSpec,
    rec: ProtectRecord,
    ing: flow.Ingested,
    result: ComponentResult,
) -> tuple[flow.Validation, flow.Staged | None]:
    """(validation, staged candidate or None) of ``validate_task``, on the spec's engine."""
    staged = None
    if rec.reused:
        validation = flow.validate_release(
            plan.algo,
            spec.params,
            ing.table,
            result.outputs,
            result.sidecars,
            plan.required(ing.table),
            flow.declared_copies(result.contract, result.outputs),
        )
    else:
        adm = Admission.restore(plan, rec.ledger)
        raw = {k: Path(p).read_bytes() for k, p in rec.outputs.items()}
        with failing(adm):
            result.warnings.extend(check_republish(plan, adm, raw))
        staged = flow.stage(plan, ing, result, rec.version, adm)
        validation = staged.validation
    return validation, staged


def _staged(store: Store, pipeline: str, version: str, name: str | None) -> Candidate | None:
    """Re-attach the candidate ``validate_task`` staged (None if it is gone or incomplete)."""
    if not name or not store.exists(pipeline, STAGING, name, "manifest.json"):
        return None
    return Candidate.attach(store, pipeline, version, name)


def _staged_ledger(store: Store, cand: Candidate | None) -> dict | None:
    """The ledger record of a staged candidate's manifest (its entry exists once staged)."""
    if cand is None:
        return None
    return Manifest.read(store, *cand.parts).ledger


def publish_task(
    protected: ProtectRecord | dict,
    validated: ValidateRecord | dict | None,
    store: Store | str | Path,
) -> PublishRecord:
    """Atomically publish the validated candidate as ``<store>/<pipeline>/<version>``
    (``flow.publish``).

    * ``validated`` failed -> nothing is published; ``ContractViolation`` is raised.
    * the version already exists -> nothing is rewritten; status ``exists``.
    * no staged candidate (``validated`` is None, or it was swept) -> the candidate is built and
      validated here, as ``privfair run`` would (quarantine + ``ContractViolation`` on failure).
    """
    rec = ProtectRecord.of(protected)
    val = ValidateRecord.of(validated) if validated is not None else None
    st = _store(store)
    plan = plan_of(spec_of(rec), st, rec.data_dir, rec.partition)
    name, version = rec.pipeline, rec.version
    if val is not None and not val.passed:
        results = _read_json(val.results).get("results", [])
        raise flow.violation(val.failed, results, val.quarantine, val.reused)
    cand = _staged(st, name, version, val.candidate if val else None)
    existing = flow.already_published(st, name, version)
    message = existing.message or rec.rebuilt
    adm = Admission.restore(plan, _staged_ledger(st, cand) or rec.ledger)
    if existing:
        if cand is not None:
            cand.discard()
        if adm is not None:
            adm.mark("failed", "another run published this version first")
        set_latest(st, name, version)  # a re-run points latest at the version it produced
        status, message = "exists", None
    else:
        if cand is None:
            val = validate_task(rec, st, raise_on_failure=True)
            cand = _staged(st, name, version, val.candidate)
            if cand is None:  # pragma: no cover - validate_task just staged it
                raise RuntimeError(f"candidate {val.candidate} vanished from staging")
            adm = Admission.restore(plan, _staged_ledger(st, cand)) or adm
        published = flow.publish(plan, cand, adm=adm)
        status = flow.status_of(published, bool(message))
        message = message if published else None
    local: dict[str, Any] = {}
    if st.exists(name, version, "manifest.json"):
        local["ledger"] = Manifest.read(st, name, version).ledger
    if st.local:
        for key, fname in (("manifest", "manifest.json"), ("report", "report.html")):
            if st.exists(name, version, fname):
                local[key] = st.path(name, version, fname)
        if st.exists(name, version, "shared", "manifest.json"):
            local["shared"] = st.path(name, version, "shared")
    return PublishRecord(
        pipeline=name,
        version=version,
        path=st.path(name, version),
        status=status,
        message=message,
        **local,
    )


def evaluate_task(
    ingested: IngestRecord | dict[str, Any],
    options: EvaluateOptions | Mapping[str, Any] | None = None,
    out_root: str | Path | None = None,
    progress=None,
    **given: Any,
) -> EvaluateRecord:
    """``privfair evaluate`` on an ingested table (the spec and the table ``ingest_task``
    wrote), its files in ``<out_root or the evaluations setting>/<pipeline>/``. ``options``
    (or keyword arguments: ``grid="k=5,10"``, ``folds=5``...) as ``EvaluateOptions.of`` reads
    them."""
    from privfair.evaluation.evaluate import evaluate, write
    from privfair.spec.settings import resolve_evaluations

    if not isinstance(options, EvaluateOptions):
        options = EvaluateOptions.of({**(options or {}), **given})
    rec = IngestRecord.of(ingested)
    spec = spec_of(rec)
    ev = evaluate(
        spec,
        load_ingested(
            plan_of(spec, data_dir=rec.data_dir, partition=rec.partition, table=input_table(rec)),
            rec,
        ).table,
        **options.arguments(),
        input_fingerprint=rec.fingerprint,
        progress=progress,
    )
    folder = resolve_evaluations(out_root) / spec.name
    paths = write(ev, folder)
    return EvaluateRecord(
        pipeline=spec.name,
        version=rec.version,
        path=str(folder),
        summary=paths["summary.parquet"],
        page=paths["evaluation.html"],
        seconds=ev.seconds,
        grid=ev.meta["grid"],
        folds=options.folds,
        classifiers=options.classifier_list,
        points=len({r["grid"] for r in ev.summary.to_pylist()}),
    )
