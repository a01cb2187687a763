"""Validation of a candidate release: every declared guarantee recomputed from the files that
will be published (and the input, for guarantees relative to it), run as Great Expectations
suites (see ``pipelines.expectations``).

Two batches: ``published`` (the published table as pandas) and ``audit`` (the audit frame of
``components.microaggregation.audit``). Each guarantee is one custom expectation calling its pure checker; the
built-in expectations (column set, nulls, value sets, types, row count) run on the published
batch. Great Expectations is imported on first use (the import takes seconds).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from components.microaggregation.audit import build_audit
from components.microaggregation.checks import CHECKS, CheckResult
from schemas.errors import InputError

RESULTS_FILE = "validation/ge_results.json"
DATA_DOCS_DIR = "validation/data_docs"
DATA_DOCS_SITE = "privfair_release"


@dataclass
class Validation:
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
        """Results of the declared guarantees (the contract), without the schema checks."""
        return [r for r in self.results if r.id != "schema"]

    @property
    def schema_checks(self) -> list[CheckResult]:
        return [r for r in self.results if r.id == "schema"]

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


def validate_release(
    input_table: pa.Table,
    published: pa.Table,
    lineage: pa.Table,
    contract: list,
    scaling: str = "minmax",
    out_dir: Path | None = None,
) -> Validation:
    """Check ``contract`` against ``published`` (as read back from disk) and its lineage.

    Results are in contract order, followed by the built-in (``schema``) expectations. With
    ``out_dir``, the GX results and Data Docs are written under ``out_dir/validation/``.
    Raises ``PrivfairError`` if a compiled suite lost guarantee expectations (see
    ``pipelines.expectations.round_trip``)."""
    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier

    from pipelines import expectations as E

    supported = [i for i, g in enumerate(contract) if g.kind in E.EXPECTATIONS]
    checked = [contract[i] for i in supported]
    results: list[CheckResult | None] = [None] * len(contract)
    for i, g in enumerate(contract):
        if g.kind not in E.EXPECTATIONS:
            what = "expectation" if g.kind in CHECKS else "checker"
            results[i] = CheckResult(
                g.id,
                g.kind,
                False,
                message=f"no {what} for guarantee kind '{g.kind}' in this version",
            )

    frames = {"published": published.to_pandas(), "audit": None}
    audit_error = None
    try:
        frames["audit"] = build_audit(input_table, published, lineage)
    except InputError as e:  # the files do not fit together: every audit guarantee fails
        audit_error = str(e)

    ctx = E.new_context()
    suites = E.round_trip(
        checked,
        E.compile_suites(checked, published, input_table, lineage, scaling=scaling),
        ctx,
    )
    source = ctx.data_sources.add_pandas("privfair")
    run_id = RunIdentifier(run_name="privfair_validation")
    runs = {}
    for b in E.BATCHES:
        if frames[b] is None or not suites[b].expectations:
            continue
        definition = source.add_dataframe_asset(b).add_batch_definition_whole_dataframe("whole")
        vd = ctx.validation_definitions.add(
            gx.ValidationDefinition(
                name=f"privfair_{b}", data=definition, suite=ctx.suites.add(suites[b])
            )
        )
        runs[b] = vd.run(
            batch_parameters={"dataframe": frames[b]}, result_format="BASIC", run_id=run_id
        )

    builtins: list[CheckResult] = []
    for run in runs.values():
        for evr in run.results:
            idx = E.contract_index(evr)
            if idx is None:
                builtins.append(E.to_check_result(evr))
            else:
                pos = supported[idx]
                results[pos] = E.to_check_result(evr, contract[pos])
    for i, g in enumerate(contract):
        if results[i] is None:
            why = f"audit frame could not be built: {audit_error}" if audit_error else "not run"
            results[i] = CheckResult(g.id, g.kind, False, message=why)

    artefacts = _write_artefacts(ctx, runs, Path(out_dir)) if out_dir is not None else {}
    return Validation([r for r in results if r is not None] + builtins, artefacts)
