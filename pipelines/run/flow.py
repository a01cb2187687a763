"""The release flow: ingest -> protect -> stage (validate) -> publish (or quarantine).

One ``ReleasePlan`` per release, resolved once from the spec (algorithm, family package, store,
data folder): ``protect``, ``stage`` and ``publish`` below are each the only copy of their rules,
and the CLI (``run_release``) and the file-based task layer that Dagster and Airflow drive
(``privfair.run.tasks``) call the same functions. Nothing here names an algorithm: the spec names
one, and its descriptor (``privfair.components.core.descriptor.Algorithm``) says how to run it, what it
owes (its contract), how to check it (its evidence), what to show (its metrics) and what of it
may be handed out (``Algorithm.public``).

A release folder ``<store>/<pipeline>/<version>/`` holds the owner part (``manifest.json``:
spec, params, contract, validation, metrics, input fingerprint, code version and the sha256 of
every other file; ``report.html``; each sidecar as ``internal/<sidecar>.parquet``;
``validation/``) and the shareable copy in ``shared/`` (each public output as
``shared/<output>.parquet``, the public manifest and report: ``privfair.release.share``). An existing
version is reused only when it is complete (``already_published``); otherwise it is quarantined
and built again.

Every release that runs goes through the ledger (``privfair.budget.ledger``, ``privfair.budget.admission``):
``admit`` reserves a differentially private release's cost before its algorithm runs (refused
over budget), ``admitted`` applies the spec's re-publication policy to the outputs before any
file is written, ``stage`` and ``publish`` record how it ended. A reused version runs nothing
and spends nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from privfair.budget.admission import Admission, check_republish, failing
from privfair.budget.admission import admit as _admit
from privfair.components.core import memory, progress
from privfair.components.core.descriptor import Algorithm
from privfair.components.core.engine import Engine, using
from privfair.components.core.result import META_CONTRACT, ComponentResult
from privfair.release import share
from privfair.release.beside import Beside
from privfair.release.layout import (
    dumps,
    output_file,
    parquet_bytes,
    release_files,
    sidecar_file,
)
from privfair.release.manifest import Manifest, ManifestError
from privfair.release.plan import Ingested, ReleasePlan
from privfair.release.store import (
    Candidate,
    Store,
    checksums,
    not_intact,
    quarantine_release,
    resolve_release,
    set_latest,
    store_secret,
    sweep_staging,
    tidy,
    verify_release,
)
from privfair.release.version import code_version
from privfair.schemas import contracts as C
from privfair.schemas.errors import (
    ContractViolation,
    DataSourceError,
    PrivfairError,
    StoreError,
)
from privfair.schemas.spec import PipelineSpec
from privfair.spec.catalogue import parse_spec
from privfair.validation.validate import Validation, validate_release


# --- small helpers ---------------------------------------------------------------------------------
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


# --- the plan ----------------------------------------------------------------------------------------
def ingest(spec: PipelineSpec, data_dir: str | Path | None = None) -> Ingested:
    """``ReleasePlan.ingest`` of ``spec``."""
    return ReleasePlan.of(spec, data_dir=data_dir).ingest()


def required_contract(spec: PipelineSpec, input_table: pa.Table) -> list:
    """``ReleasePlan.required`` of ``spec``."""
    return ReleasePlan.of(spec).required(input_table)


def version_id(spec: PipelineSpec, input_fingerprint: str) -> str:
    """``ReleasePlan.version`` of ``spec``."""
    return ReleasePlan.of(spec).version(input_fingerprint)


# --- protect -------------------------------------------------------------------------------------
def protect(
    plan: ReleasePlan | PipelineSpec, ing: Ingested, engine: Engine | None = None
) -> ComponentResult:
    """Run the plan's algorithm on ``engine`` (default: the spec's, opened and closed here); its
    declared contract gets the spec's demands and the roles' guarantees appended. A demand
    naming a missing column is refused before anything runs."""
    plan = plan if isinstance(plan, ReleasePlan) else ReleasePlan.of(plan)
    algo = plan.algo
    extra = plan.demanded(ing.table)  # a demand naming a missing column fails here
    if engine is None:
        with plan.running() as own:
            result = _run_on(own, algo, ing, plan.spec.params)
    else:
        result = _run_on(engine, algo, ing, plan.spec.params)
    result.contract = list(result.contract) + extra
    return result.stamped()


def _run_on(engine: Engine, algo: Algorithm, ing: Ingested, params) -> ComponentResult:
    calls = engine.calls
    with using(engine):
        result = algo(ing.table, params)
    # the run keeps the outputs through writing, validation and the report
    result.outputs = {k: memory.mapped(t) for k, t in result.outputs.items()}
    result.sidecars = {k: memory.mapped(t) for k, t in result.sidecars.items()}
    result.execution = engine.describe()
    if engine.name != "local" and engine.calls == calls:
        result.warnings.append(
            f"the {engine.name} engine ran nothing: {algo.name} ran in this process (a "
            "family that runs in blocks takes a parameter for their size)"
        )
    return result


# --- stage: write, validate, describe ----------------------------------------------------------------
def declared_copies(manifest_contract: list, outputs: dict[str, pa.Table]) -> dict[str, list]:
    """Every copy of the contract a release carries: the manifest's and each output's."""
    copies = {"manifest.json": list(manifest_contract)}
    for name, t in outputs.items():
        raw = (t.schema.metadata or {}).get(META_CONTRACT)
        copies[output_file(name)] = C.contract_from_json(raw) if raw else []
    return copies


def manifest(
    plan: ReleasePlan,
    ing: Ingested,
    result: ComponentResult,
    validation: Validation,
    version: str,
    adm: Admission | None = None,
) -> dict:
    """The owner's manifest (everything; the shareable copy has its own, ``share``). With a
    ledger, ``ledger`` records this release's entry (``Admission.record``); a ledger URL in
    the spec is kept only with its password redacted."""
    algo = plan.algo
    return {
        "pipeline": plan.name,
        "version": version,
        **({"partition": plan.partition} if plan.partition is not None else {}),
        # microseconds: repair_latest orders releases by this stamp
        "published_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "code_version": code_version(plan.package),
        "spec": _redacted_spec(plan.spec),
        "spec_fingerprint": plan.spec.fingerprint(),
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
        **({"ledger": adm.record()} if adm is not None else {}),
    }


def _redacted_spec(spec: PipelineSpec) -> dict:
    """The spec as data, each ledger URL with its password redacted."""
    from privfair.io.urls import redact

    d = spec.model_dump(mode="json")
    for key in ("budget", "republish"):
        if isinstance(d.get(key), dict) and d[key].get("ledger"):
            d[key]["ledger"] = redact(d[key]["ledger"])
    return d


def cost_of_protection(plan: ReleasePlan, beside: Beside) -> dict:
    """The report's cost of protection (owner-only), from ``beside`` (``privfair.release.beside``: the
    measurements the run started beside it, or measures now). A mechanism that is not replayable
    (a differentially private one) is not run again on the private input: a second run would
    spend privacy budget its ledger does not record."""
    if not plan.algo.replayable:
        return {
            "status": "not applicable",
            "reason": f"{plan.algo.title} is differentially private: measuring it on a hold-out "
            "would run the mechanism again on the private input, spending budget its ledger "
            "does not record; privfair evaluate measures it on folds, on the owner's side",
        }
    return beside.cost_of_protection()


def build_candidate(
    plan: ReleasePlan | PipelineSpec,
    ing: Ingested,
    result: ComponentResult,
    cand: Candidate,
    adm: Admission | None = None,
    beside: Beside | None = None,
) -> tuple[Validation, dict]:
    """Write the candidate's files, validate what was written (against the contract rebuilt
    from the spec and the input), then write the owner's report, the shareable copy (public
    manifest and report, when validation passed) and, last, the owner's manifest with the
    checksums of every other file (a candidate with a manifest is complete). A candidate that
    passes also gets the cost of protection (``cost_of_protection``) and the algorithm's
    ``input_measures`` for the owner's report: from ``beside`` when the run started them beside
    protection (``privfair.release.beside``), else started here, beside validation, and stopped if
    validation fails."""
    plan = plan if isinstance(plan, ReleasePlan) else ReleasePlan.of(plan, cand.store)
    if beside is None:
        with Beside.start(plan, ing.table, ing.input["fingerprint"]) as beside:
            return build_candidate(plan, ing, result, cand, adm, beside)
    with progress.phase("write"):
        for k, t in result.outputs.items():
            cand.write(output_file(k), parquet_bytes(t))
        for k, t in result.sidecars.items():
            cand.write(sidecar_file(k), parquet_bytes(t))
        outputs = {k: cand.read_mapped(output_file(k)) for k in result.outputs}
        sidecars = {k: cand.read_mapped(sidecar_file(k)) for k in result.sidecars}
    # from here on the run works from what was written, and its own copies go: the driver
    # would otherwise hold the published table twice (~1.7 GB each at 10M rows)
    result.outputs, result.sidecars = outputs, sidecars
    memory.release(ing.table.num_rows)  # what protection freed goes before validation's peak
    with progress.phase("validate") as ph:
        validation = _validated(plan, ing, result, outputs, sidecars, cand)
        ph.note(f"{sum(r.passed for r in validation.guarantees)}/{len(validation.guarantees)} hold")
    # Great Expectations' objects hold the evidence frames in reference cycles (the validator
    # lets go of its module-level context): collect them before the cost of protection and the
    # report allocate theirs
    if not memory.release(ing.table.num_rows):  # a large table's release collects too
        memory.collect(ing.table.num_rows)
    if validation.passed and adm is not None:
        adm.enter()  # a release that is not DP is recorded once it may be published
    man = manifest(plan, ing, result, validation, cand.version, adm)
    if validation.passed:
        with progress.phase("cost of protection"):
            man["cost_of_protection"] = cost_of_protection(plan, beside)
            measures = beside.input_measures()
            if measures is not None:
                man["input_measures"] = measures
    with progress.phase("report"):
        _reports(plan, ing, result, cand, man, outputs, sidecars, adm, validation.passed)
    man["checksums"] = checksums(cand.store, *cand.parts)
    cand.write("manifest.json", dumps(man))
    return validation, man


def _validated(
    plan: ReleasePlan,
    ing: Ingested,
    result: ComponentResult,
    outputs: dict[str, pa.Table],
    sidecars: dict[str, pa.Table],
    cand: Candidate,
) -> Validation:
    """``validate_release`` of the candidate's files as written."""
    return validate_release(
        plan.algo,
        plan.spec.params,
        ing.table,
        outputs,
        sidecars,
        plan.required(ing.table),
        declared_copies(result.contract, outputs),
        cand.local_dir if cand.store.local else None,
    )


def _reports(
    plan: ReleasePlan,
    ing: Ingested,
    result: ComponentResult,
    cand: Candidate,
    man: dict,
    outputs: dict[str, pa.Table],
    sidecars: dict[str, pa.Table],
    adm: Admission | None,
    passed: bool,
) -> None:
    """The owner's report and, for a release that ``passed``, the shareable copy (public report
    and manifest with its own checksums); ``man`` gets the ``shared`` entry."""
    from privfair.release.report import render_public_report, render_report

    algo = plan.algo
    if passed:
        release_id = share.public_id(store_secret(cand.store), plan.name, cand.version)
        pub = share.public_manifest(
            plan.spec,
            algo,
            release_id,
            man["code_version"],
            result.params,
            result.contract,
            result.metrics,
            man["validation"],
            outputs,
            partition=plan.partition,
            charge=adm.public() if adm is not None else None,
        )
        cand.write(
            share.shared_file(share.REPORT), render_public_report(pub, algo, outputs).encode()
        )
        pub["checksums"] = {
            name.removeprefix(f"{share.SHARED}/"): v
            for name, v in checksums(cand.store, *cand.parts).items()
            if name.startswith(f"{share.SHARED}/")
        }
        cand.write(share.shared_file(share.MANIFEST), dumps(pub))
        man["shared"] = {
            "release": release_id,
            "folder": share.SHARED,
            "manifest": share.shared_file(share.MANIFEST),
            "report": share.shared_file(share.REPORT),
        }
    cand.write("report.html", render_report(man, algo, outputs, ing.table, sidecars).encode())


@dataclass
class Staged:
    """What ``stage`` left: a validated candidate in staging (``cand``), or a quarantined one
    (``quarantine`` names its folder)."""

    validation: Validation
    cand: Candidate | None
    quarantine: str | None = None

    @property
    def passed(self) -> bool:
        return self.validation.passed


def stage(
    plan: ReleasePlan,
    ing: Ingested,
    result: ComponentResult,
    version: str,
    adm: Admission | None = None,
    beside: Beside | None = None,
) -> Staged:
    """Build and validate the candidate of ``version`` in the store's staging area
    (``build_candidate``; ``beside``: the input-only measurements the run started). A candidate whose
    validation fails is quarantined (nothing is published; its ledger entry says
    ``quarantined``, its charge stays); a failure while writing leaves no candidate and no
    empty folder behind (the entry says ``failed``)."""
    with failing(adm):
        staged = _stage(plan, ing, result, version, adm, beside)
    if not staged.passed and adm is not None:
        adm.mark("quarantined", staged.quarantine)
    return staged


def _stage(
    plan: ReleasePlan,
    ing: Ingested,
    result: ComponentResult,
    version: str,
    adm: Admission | None,
    beside: Beside | None,
) -> Staged:
    store = plan.open_store()
    sweep_staging(store, plan.name, older_than_s=3600)
    try:
        cand = Candidate(store, plan.name, version)
        try:
            validation, _ = build_candidate(plan, ing, result, cand, adm, beside)
        except OSError as e:  # a write of the candidate (validation artefacts included)
            cand.discard()
            raise StoreError(
                getattr(e, "filename", None) or store.path(*cand.parts),
                f"cannot write the release candidate: {e.strerror or e}",
            ) from None
        except BaseException:
            cand.discard()
            raise
    except BaseException:
        tidy(store, plan.name)
        raise
    if validation.passed and plan.spec.target is not None:
        try:
            audit_target(plan, ing, result, cand)
        except ContractViolation as e:
            where = cand.quarantine()
            tidy(store, plan.name)
            raise ContractViolation(e.failed, f"{e}\ncandidate quarantined at {where}") from None
        except BaseException:
            cand.discard()
            tidy(store, plan.name)
            raise
    if validation.passed:
        return Staged(validation, cand)
    where = cand.quarantine()
    tidy(store, plan.name)
    return Staged(validation, None, where)


def audit_target(plan: ReleasePlan, ing: Ingested, result: ComponentResult, cand: Candidate):
    """Write the validated candidate's public outputs to the spec's ``target`` and validate
    them as read back from it (``privfair.release.targets.write_and_audit``: write-audit-publish)."""
    from privfair.release import targets

    outputs = {k: cand.read_table(output_file(k)) for k in result.outputs}
    sidecars = {k: cand.read_table(sidecar_file(k)) for k in result.sidecars}
    required = plan.required(ing.table)

    def revalidate(back: dict) -> list[str]:
        return validate_release(
            plan.algo,
            plan.spec.params,
            ing.table,
            {**outputs, **back},
            sidecars,
            required,
            declared_copies(result.contract, back),
        ).failed

    release_id = share.public_id(store_secret(cand.store), plan.name, cand.version)
    return targets.write_and_audit(plan, cand, result, release_id, revalidate)


def publish_target(plan: ReleasePlan, cand: Candidate) -> dict:
    """Fast-forward the spec's ``target`` to the audited release (``privfair.release.targets``)."""
    from privfair.release import targets

    man = dict(Manifest.read(cand.store, *cand.parts).data)
    outputs = {k: cand.read_table(output_file(k)) for k in man["outputs"]}
    contract = C.parse_contract(man["contract"])
    return targets.publish(plan, outputs, man["shared"]["release"], contract, cand)


def published_or_failed(staged: Staged) -> None:
    """``ContractViolation`` listing each failed check of a quarantined candidate."""
    if not staged.passed:
        raise violation(
            staged.validation.failed, staged.validation.summary()["results"], staged.quarantine
        )


def publish(
    plan: ReleasePlan,
    cand: Candidate,
    crash_after: str | None = None,
    adm: Admission | None = None,
) -> bool:
    """Move the validated candidate into ``<store>/<pipeline>/<version>`` atomically, then
    ``latest``. False when another run published this version first (``latest`` is then
    pointed at it); the candidate is gone either way. The ledger entry says ``published``,
    or ``failed`` (its charge stays: the mechanism ran)."""
    store = plan.open_store()
    with failing(adm):
        try:
            try:
                if plan.spec.target is not None and not store.exists(plan.name, cand.version):
                    publish_target(plan, cand)
                published = cand.publish(crash_after=crash_after)
            finally:
                cand.discard()
        except BaseException:
            tidy(store, plan.name)
            raise
    if not published:
        set_latest(store, plan.name, cand.version)
    if adm is not None:
        adm.mark(
            "published" if published else "failed",
            None if published else "another run published this version first",
        )
    return published


def admit(plan: ReleasePlan, ing: Ingested, version: str) -> Admission | None:
    """Record this release in the plan's ledger before its algorithm runs, reserving the cost
    of a differentially private one against the spec's budget (``privfair.budget.admission.admit``:
    ``BudgetExceeded`` when it does not fit, before any noise is drawn). What the release owes
    is computed first, so a spec or input it would refuse (a demand on a missing column, a
    role the algorithm does not read) is refused before anything is recorded or charged."""
    plan.required(ing.table)
    return _admit(plan, ing, version)


def admitted(plan: ReleasePlan, adm: Admission | None, result: ComponentResult) -> None:
    """Apply the spec's re-publication policy to ``result``'s public outputs
    (``privfair.budget.admission.check_republish``: ``RepublishRefused``, nothing written), adding
    its warnings to the result's."""
    with failing(adm):
        result.warnings.extend(check_republish(plan, adm, result.outputs))


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


def status_of(published: bool, rebuilt: bool) -> str:
    """published | exists (another run published it first) | rebuilt (an incomplete folder of
    this version was quarantined first)."""
    return "exists" if not published else "rebuilt" if rebuilt else "published"


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
    ledger: dict | None = None


def run_release(
    spec: PipelineSpec,
    store_uri: str | Path,
    data_dir: str | Path | None = None,
    crash_after: str | None = None,
    partition: str | None = None,
    table: pa.Table | None = None,
    on_validated: Callable[[Validation], None] | None = None,
) -> Outcome:
    """Publish one release of ``spec``. Idempotent: an existing complete version is not
    rewritten, and ``latest`` is moved to it (a re-run points ``latest`` at the version it
    produced); an incomplete one is quarantined and rebuilt (status ``rebuilt``, with a
    ``message``). A failed validation quarantines the candidate and raises
    ``ContractViolation``; a failed run leaves no empty staging or pipeline folder behind.
    ``partition`` releases that partition of a partitioned spec (``PipelineSpec.partitions``).
    ``table`` is the input of a spec whose dataset is in memory (``source: {kind: memory}``).

    A release that runs is first recorded in the ledger (``admit``: a differentially private
    one reserves its cost, ``BudgetExceeded`` if over budget); a re-run of a published version
    runs nothing and charges nothing. The spec's ``republish`` policy is applied to the
    outputs before anything is written (``admitted``). ``crash_after="charge"`` kills the
    process right after the charge (tests). ``on_validated`` is called with the candidate's
    validation before it is published or refused (an orchestrator reports each guarantee's
    verdict, also when the release fails).

    On the Spark engine, the input of an algorithm that reads it only through counts
    (``on_cluster``) stays on the cluster: the engine is opened first and the executors read
    the file or folder (``privfair.io.ingest.load_frame``); this process holds no row of it."""
    plan = ReleasePlan.of(spec, store_uri, data_dir, partition, table)
    if on_cluster(plan):
        with plan.running() as engine:
            return _release(plan, engine, crash_after, on_validated)
    return _release(plan, None, crash_after, on_validated)


def on_cluster(plan: ReleasePlan) -> bool:
    """Whether ``plan``'s input stays on the Spark cluster: the spark engine, an algorithm that
    reads its input only through counts (``Algorithm.reads_counts_only``), a ``dataset.path`` the
    executors read as this process would (a Parquet file or dataset folder, a UTF-8 CSV:
    ``ingest.frame_file``), no partitions."""
    from privfair.io.ingest import frame_file

    spec = plan.spec
    return (
        spec.execution.engine == "spark"
        and plan.algo.reads_counts_only(spec.params)
        and spec.partitions is None
        and plan.table is None
        and frame_file(spec.dataset, spec.spec_dir, plan.data_dir) is not None
    )


def ingest_on(plan: ReleasePlan, engine: Engine) -> Ingested:
    """The input of ``plan`` as a ``SparkFrame`` read by ``engine``'s executors, and its input
    record (the one ``plan.ingest`` gives for the same file)."""
    from privfair.io.ingest import load_frame

    frame, record = load_frame(plan.spec.dataset, engine.spark, plan.spec.spec_dir, plan.data_dir)
    return Ingested(frame, record)


def _release(
    plan: ReleasePlan,
    engine: Engine | None,
    crash_after: str | None,
    on_validated: Callable[[Validation], None] | None,
) -> Outcome:
    """``run_release`` of ``plan``; with ``engine``, on it, the input left on its cluster."""
    import contextlib

    spec = plan.spec
    store = plan.open_store()
    with progress.phase("ingest") as ph:
        ing = ingest_on(plan, engine) if engine is not None else plan.ingest()
        ph.note(f"{ing.table.num_rows} rows")
    version = plan.version(ing.input["fingerprint"])
    headline = list(plan.algo.headline)
    path = store.path(spec.name, version)
    sweep_staging(store, spec.name, older_than_s=3600)
    existing = already_published(store, spec.name, version)
    if existing:
        set_latest(store, spec.name, version)
        man = Manifest.read(store, spec.name, version)
        return Outcome(
            "exists",
            spec.name,
            version,
            path,
            metrics=man.metrics,
            headline=headline,
            warnings=man.warnings,
            ledger=man.ledger,
        )
    adm = admit(plan, ing, version)
    if crash_after == "charge":
        import os

        os._exit(17)
    # the report's reruns of the algorithm need only the spec and the input: they are measured
    # beside protection and validation (``privfair.release.beside``), and dropped if those fail
    with (
        contextlib.nullcontext(engine) if engine is not None else plan.running() as engine,
        Beside.start(plan, ing.table, ing.input["fingerprint"]) as beside,
    ):
        with failing(adm), progress.phase(f"protect ({plan.algo.name})"):
            result = protect(plan, ing, engine)
        admitted(plan, adm, result)
        with progress.phase("stage"):
            staged = stage(plan, ing, result, version, adm, beside)
    if on_validated is not None:
        on_validated(staged.validation)
    published_or_failed(staged)
    if crash_after == "validate":
        import os

        os._exit(17)
    assert staged.cand is not None
    with progress.phase("publish"):
        published = publish(plan, staged.cand, crash_after=crash_after, adm=adm)
    return Outcome(
        status_of(published, existing.problem is not None),
        spec.name,
        version,
        path,
        staged.validation,
        result.metrics,
        headline,
        existing.message if published else None,
        result.warnings,
        adm.record() if adm is not None else None,
    )


# --- re-check a published release ----------------------------------------------------------------
def revalidate(
    release: Path, data_dir: str | Path | None = None, table: pa.Table | None = None
) -> Validation:
    """Recompute every guarantee of ``release`` against the contract rebuilt from its spec. The
    input is re-loaded from the spec in the manifest and must match the fingerprint recorded at
    publication; the contract copies the release carries are only compared with that contract.
    ``release`` may be a ``<store>/<pipeline>/latest`` pointer file. A release whose input was
    given in memory needs that table again (``table``; without it ``DataSourceError`` says so),
    and it must have the recorded fingerprint like any other input."""
    release = resolve_release(release)
    mpath = release / "manifest.json"
    if not mpath.is_file():
        raise PrivfairError(f"{release}: not a release folder (no manifest.json)")
    try:
        man = dict(Manifest.load(mpath).data)
    except (OSError, ManifestError) as e:
        raise PrivfairError(f"{mpath}: the manifest cannot be read: {e}") from None
    if man.get("format") == share.FORMAT:
        raise PrivfairError(
            f"{release}: this is the shareable copy of a release; its guarantees are recomputed "
            "from the owner's release and the input (privfair validate <store>/<pipeline>/"
            "<version>); `privfair verify` checks the copy's files against its manifest"
        )
    damaged = not_intact(release, man)  # the published bytes, or which file is not
    spec = parse_spec(man["spec"], source=str(mpath))
    partition = (man.get("input") or {}).get("partition")
    plan = ReleasePlan.of(spec, data_dir=data_dir, partition=partition, table=table)
    with progress.phase("ingest") as ph:
        ing = plan.ingest()
        ph.note(f"{ing.table.num_rows} rows")
    if ing.input["fingerprint"] != man["input"]["fingerprint"]:
        raise DataSourceError(
            f"input fingerprint {ing.input['fingerprint'][:12]} differs from the release's "
            f"{man['input']['fingerprint'][:12]}: cannot re-check guarantees relative to the input"
        )
    out_files, side_files = release_files(man)
    try:
        # mapped as a run maps what it wrote: a 10M-row release re-checked is not held twice
        outputs = {k: memory.mapped_parquet(str(release / f)) for k, f in out_files.items()}
        sidecars = {k: memory.mapped_parquet(str(release / f)) for k, f in side_files.items()}
    except (OSError, pa.ArrowInvalid) as e:
        raise PrivfairError(f"{release}: a release file cannot be read: {e}") from None
    try:
        declared = declared_copies(C.parse_contract(man.get("contract") or []), outputs)
    except C.GuaranteeError as e:
        raise PrivfairError(f"{release}: its declared contract cannot be read: {e}") from None
    with progress.phase("validate") as ph, plan.running():
        v = validate_release(
            plan.algo, spec.params, ing.table, outputs, sidecars, plan.required(ing.table), declared
        )
        ph.note(f"{sum(r.passed for r in v.guarantees)}/{len(v.guarantees)} hold")
    if v.passed and damaged is not None:
        raise damaged  # the guarantees hold on bytes that are not the release's
    return v
