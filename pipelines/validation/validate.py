"""Validation of a candidate release: the contract rebuilt from the spec, every guarantee
recomputed from the files that will be published (and the input), run as Great Expectations
suites (see ``privfair.validation.expectations``).

The contract that is checked is the *required* one: the algorithm's contract for the spec's
params on this input (``Algorithm.required_contract``) plus the spec's demands. Whatever the
release says about itself (the manifest's contract, the copy in each output's Parquet metadata)
is only compared with it: a declared contract lacking a required guarantee fails the
``declared_contract`` check, and a guarantee it declares beyond the required ones is checked
too. The evidence frames come from the algorithm's evidence builder over the outputs, the
sidecars and the input. Great Expectations is imported on first use (the import takes seconds).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from privfair.components.core import memory, progress
from privfair.components.core.checks import (
    CheckerError,
    CheckResult,
    describe_error,
    published_frame,
)
from privfair.components.core.descriptor import Algorithm, Params, resolve
from privfair.components.core.parts import EvidenceParts
from privfair.schemas.contracts import SCHEMA_CHECK_ID, Guarantee
from privfair.schemas.errors import EvidenceError, InputError, PrivfairError
from privfair.spec.catalogue import check_keys

RESULTS_FILE = "validation/ge_results.json"
DATA_DOCS_DIR = "validation/data_docs"
DATA_DOCS_SITE = "privfair_release"
SCHEMA_ID = SCHEMA_CHECK_ID
DECLARED_ID = "declared"


@dataclass
class Validation:
    """``results``: one per checked guarantee (with its ``key``), then the ``declared_contract``
    check, then the built-in schema checks."""

    results: list[CheckResult]
    artefacts: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)

    @property
    def failed(self) -> list[str]:
        return [f"{r.id} {r.kind}".strip() for r in self.results if not r.passed]

    @property
    def guarantees(self) -> list[CheckResult]:
        """Results of the guarantees and of the declaration check, without the schema checks."""
        return [r for r in self.results if r.id != SCHEMA_ID]

    @property
    def schema_checks(self) -> list[CheckResult]:
        return [r for r in self.results if r.id == SCHEMA_ID]

    def summary(self) -> dict:
        return {
            "status": "passed" if self.passed else "failed",
            "checked": len(self.results),
            "guarantees_checked": len(self.guarantees),
            "guarantees_failed": sum(not r.passed for r in self.guarantees),
            "schema_checks": len(self.schema_checks),
            "failed": self.failed,
            "results": [r.to_dict() for r in self.results],
            "artefacts": self.artefacts,
        }


def declaration_check(
    required: list[Guarantee], declared: dict[str, list[Guarantee]]
) -> CheckResult:
    """Every required guarantee appears, equal field for field, in every declared copy."""
    missing = []
    for source, copy in declared.items():
        for g in required:
            if g not in copy:
                missing.append(
                    {"copy": source, "guarantee": g.title, "required": g.model_dump(mode="json")}
                )
    lacking = sorted({m["guarantee"] for m in missing})
    return CheckResult(
        DECLARED_ID,
        "declared_contract",
        not missing,
        {s: len(c) for s, c in declared.items()},
        len(required),
        f"the declared contract lacks required guarantees: {', '.join(lacking)} "
        f"(in {', '.join(sorted({m['copy'] for m in missing}))})"
        if missing
        else f"every declared copy holds the {len(required)} required guarantees",
        missing,
        len(missing),
    )


def to_check(required: list[Guarantee], declared: dict[str, list[Guarantee]]) -> list[Guarantee]:
    """The required guarantees, then every further guarantee a declared copy claims."""
    out = list(required)
    for copy in declared.values():
        out += [g for g in copy if g not in out]
    return out


def _write_artefacts(ctx, runs: dict, out_dir: Path) -> dict[str, str]:
    """``validation/ge_results.json`` (the GX validation results) and the Data Docs site."""
    target = out_dir / RESULTS_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "success": all(r.success for r in runs.values()),
        "suites": {b: r.to_json_dict() for b, r in runs.items()},
    }
    target.write_text(json.dumps(doc, indent=2, sort_keys=True, default=str))
    docs = out_dir / DATA_DOCS_DIR
    ctx.add_data_docs_site(
        DATA_DOCS_SITE,
        {
            "class_name": "SiteBuilder",
            "store_backend": {
                "class_name": "TupleFilesystemStoreBackend",
                "base_directory": str(docs),
            },
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        },
    )
    ctx.build_data_docs(site_names=[DATA_DOCS_SITE])
    return {"ge_results": RESULTS_FILE, "data_docs": f"{DATA_DOCS_DIR}/index.html"}


def _parts(
    algo: Algorithm, params: Params, input_table, outputs, sidecars, checked: list
) -> tuple[EvidenceParts, list[int]] | None:
    """The release's evidence in parts and the positions in ``checked`` of the guarantees to
    check part by part (``KindCheck.in_parts``); None to audit the whole table at once."""
    from privfair.components.core.registry import kind_checks

    if algo.evidence_parts is None:
        return None
    kinds = kind_checks()
    by_group = [i for i, g in enumerate(checked) if kinds[g.kind].in_parts]
    if not by_group:
        return None
    try:  # no phase of its own: most releases are not cut, and a run's phases stay the same
        parts = resolve(algo.evidence_parts)(input_table, outputs, sidecars, params, checked)
    except InputError:  # the files do not fit together: the whole audit says so
        return None
    except Exception as e:
        raise EvidenceError(
            f"the evidence of '{algo.name}' could not be cut into parts, so the release cannot "
            f"be validated: {describe_error(e)}"
        ) from e
    return (parts, by_group) if parts is not None and parts.n_parts > 1 else None


def _check_parts(
    algo: Algorithm,
    params: Params,
    input_table,
    outputs,
    sidecars,
    parts: EvidenceParts,
    by_group: list[int],
    checked: list,
):
    """The per-part results frame (``privfair.components.core.parts.RESULTS``) of the guarantees
    checked in parts, computed on the current engine."""
    import functools

    from privfair.components.core.engine import current_engine
    from privfair.components.core.parts import PART, RESULTS, check_part

    fn = functools.partial(
        check_part,
        build=parts.build,
        in_schema=input_table.schema,
        out_schema=next(iter(outputs.values())).schema,
        lin_schema=sidecars["lineage"].schema,
        params=params,
        guarantees=[checked[i].model_dump_json() for i in by_group],
    )
    try:
        with progress.phase(f"guarantees checked in {parts.n_parts} parts"):
            engine = current_engine()
            return engine.map_parts(parts.rows, parts.n_parts, PART, fn, RESULTS).to_pandas()
    except PrivfairError:
        raise
    except Exception as e:
        raise EvidenceError(
            f"the evidence of '{algo.name}' could not be checked in parts, so the release "
            f"cannot be validated: {describe_error(e)}"
        ) from e


def _published_only(input_table, outputs, sidecars, params) -> dict:
    """The evidence of a release whose audit-frame guarantees were all checked in parts."""
    return {"published": published_frame(next(iter(outputs.values())))}


def validate_release(
    algo: Algorithm,
    params: Params,
    input_table: pa.Table,
    outputs: dict[str, pa.Table],
    sidecars: dict[str, pa.Table],
    required: list[Guarantee],
    declared: dict[str, list[Guarantee]],
    out_dir: Path | None = None,
    in_parts: bool = True,
) -> Validation:
    """Check ``required`` (and whatever ``declared`` adds) against the outputs as read back
    from disk, their sidecars and the input.

    With ``in_parts`` (the default), a release whose algorithm can cut its evidence into parts
    that keep every group whole (``Algorithm.evidence_parts``: a blocked microaggregation
    release) has its by-group guarantees checked part by part on the current engine
    (``privfair.components.core.parts``); Great Expectations then validates the per-part results, and
    the verdict of each is the one the whole table's evidence gives (tested on the shipped
    specs and on every corruption of the battery). ``in_parts=False`` audits the whole table
    on the driver.

    With ``out_dir``, the GX results and Data Docs are written under ``out_dir/validation/``.
    Raises ``PrivfairError`` if a compiled suite lost guarantee expectations (see
    ``privfair.validation.expectations.round_trip``), ``CheckerError`` if a checker raised (naming each
    guarantee and its error) and ``EvidenceError`` if the evidence builder did: a checker
    that raises gives no verdict, so the release is neither passed nor failed."""
    from privfair.components.core.imports import collector_paused
    from privfair.validation.gx_import import import_great_expectations

    gx = import_great_expectations()  # seconds of import: see ``privfair.validation.gx_import``
    with collector_paused():
        from great_expectations.core.run_identifier import RunIdentifier

        from privfair.validation import expectations as E

    contract = to_check(required, declared)
    keys = check_keys(contract)
    results: list[CheckResult | None] = [None] * len(contract)
    supported = []
    for i, g in enumerate(contract):
        if g.kind in E.EXPECTATIONS:
            supported.append(i)
        else:
            results[i] = CheckResult.failed(
                g, f"no checker for guarantee kind '{g.kind}' in this version"
            )
    checked = [contract[i] for i in supported]

    frames: dict = {}
    evidence_error = None
    parts = _parts(algo, params, input_table, outputs, sidecars, checked) if in_parts else None
    by_part = frozenset(parts[1]) if parts else frozenset()
    build = parts[0].whole if parts else resolve(algo.evidence)
    in_parts_frame = None
    if parts:
        in_parts_frame = _check_parts(algo, params, input_table, outputs, sidecars, *parts, checked)
        parts = None  # the packed rows go before the whole table's evidence is built
        memory.release(input_table.num_rows)
    # what the guarantees left for the whole table read: when that is the published table alone,
    # no audit frame of every input row is built (the schema checks read that table too)
    from privfair.components.core.registry import kind_checks

    kinds = kind_checks()
    whole_frames = {kinds[g.kind].frame for i, g in enumerate(checked) if i not in by_part}
    if by_part and whole_frames <= {E.PUBLISHED}:
        build = _published_only
    try:
        with progress.phase("evidence"):
            frames = build(input_table, outputs, sidecars, params)
    except InputError as e:  # the files do not fit together: every guarantee fails
        evidence_error = str(e)
    except Exception as e:  # the builder broke: no verdict can be given
        raise EvidenceError(
            f"the evidence of '{algo.name}' could not be built, so the release cannot be "
            f"validated: {describe_error(e)}"
        ) from e
    if in_parts_frame is not None and evidence_error is None:
        frames[E.PARTS] = in_parts_frame
    del in_parts_frame

    published = next(iter(outputs.values()))
    with progress.phase("expectation suites compiled"):
        ctx = E.new_context()
        suites = E.round_trip(
            checked,
            E.compile_suites(
                checked,
                published,
                input_table,
                sidecars.get("lineage"),
                builtins=algo.row_level,
                parts=by_part,
            ),
            ctx,
            parts=by_part,
        )
    if E.PUBLISHED not in frames:
        frames[E.PUBLISHED] = published_frame(published)
    source = ctx.data_sources.add_pandas("privfair")
    run_id = RunIdentifier(run_name="privfair_validation")
    runs = {}
    unit = "expectation suites run (Great Expectations)"
    for b, suite in progress.track(suites.items(), len(suites), unit):
        if frames.get(b) is None or not suite.expectations:
            continue
        definition = source.add_dataframe_asset(b).add_batch_definition_whole_dataframe("whole")
        vd = ctx.validation_definitions.add(
            gx.ValidationDefinition(
                name=f"privfair_{b}", data=definition, suite=ctx.suites.add(suite)
            )
        )
        runs[b] = vd.run(
            batch_parameters={"dataframe": frames[b]}, result_format="BASIC", run_id=run_id
        )

    builtins: list[CheckResult] = []
    raised: list[tuple[str, str, str]] = []
    for run in runs.values():
        for evr in run.results:
            idx = E.contract_index(evr)
            if idx is None:
                builtins.append(E.to_check_result(evr))
            else:
                pos = supported[idx]
                try:
                    results[pos] = E.to_check_result(evr, contract[pos])
                except CheckerError as e:
                    raised += e.raised
    if raised:  # an error of the run, never a verdict: nothing to publish or quarantine
        raise CheckerError(raised)
    for i, g in enumerate(contract):
        if results[i] is None:
            why = f"evidence could not be built: {evidence_error}" if evidence_error else "not run"
            results[i] = CheckResult.failed(g, why)
    for r, key in zip(results, keys, strict=True):
        r.key = key  # type: ignore[union-attr]

    artefacts = {}
    if out_dir is not None:
        with progress.phase("results and Data Docs"):
            artefacts = _write_artefacts(ctx, runs, Path(out_dir))
    E.release_context()
    final = [r for r in results if r is not None] + [declaration_check(required, declared)]
    return Validation(final + builtins, artefacts)
