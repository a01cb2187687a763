"""Dagster definitions generated from the pipeline specs (``defs``).

For every spec in ``$PRIVFAIR_SPECS_DIR`` (default ``pipelines/specs/*.yaml``), found when this
module is imported (a new YAML file adds a new asset graph, no code change):

* assets ``<spec>/raw_table`` -> ``<spec>/protected_table`` -> ``<spec>/release``, in the asset
  group ``<spec>``; their values are small dicts of Parquet/JSON paths written by the
  orchestrator-neutral steps of ``pipelines.steps`` (the same ones the Airflow DAGs run);
* one **blocking** asset check per guarantee the release declares, on ``protected_table``
  (``C4_k_anonymity``, ``C8_local_fairness``...), plus ``contract`` (every guarantee holds).
  They run together: one Great Expectations validation of the candidate release
  (``pipelines.run.build_candidate`` -> ``pipelines.validate.validate_release``), each check
  reporting its guarantee. A failed check quarantines the candidate and stops ``release``;
* run config on ``protected_table`` (``ProtectConfig``): optional overrides of the component
  parameters (k, m, n, tau, microaggregate, correction...), validated by
  ``PipelineSpec.with_params``;
* resources ``privfair_data`` (raw-data folder; default ``$PRIVFAIR_DATA_DIR``) and
  ``release_store`` (default ``$PRIVFAIR_STORE`` or ``releases``, relative to the repo root);
* a job ``<spec>_job`` over the group and, when the spec has a schedule, ``<spec>_schedule``
  (created stopped: turn it on in the UI or with ``dagster schedule start``).

The Dagster instance: ``DAGSTER_HOME``, which ``python -m pipelines.orchestrate dagster-dev``,
the demo and the Makefile default to ``<repo>/.dagster_home`` (created on demand, with a
``dagster.yaml`` disabling telemetry; storage is Dagster's default SQLite under that folder).
Importing this module has no side effect on the environment. The work files of each run live
under ``<instance storage>/privfair/<spec>/<run_id>/``.

    python -m pipelines.orchestrate dagster-dev -p 3000      # the UI on http://127.0.0.1:3000
    dagster asset materialize -m pipelines.definitions --select 'key:german_fair_mdav/*'
"""

import json
import os
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from pipelines.orchestrate import (
    cron_of,
    declared_contract,
    load_specs,
    resolve_data_dir,
    resolve_store,
    slot_names,
)
from pipelines.run import HEADLINE_METRICS
from schemas.errors import SpecError
from schemas.spec import PipelineSpec

CONTRACT_CHECK = "contract"


# --- resources ---------------------------------------------------------------------------------
class PrivfairData(dg.ConfigurableResource):
    """Where the raw dataset files are. Empty: ``$PRIVFAIR_DATA_DIR``, else the checked
    download cache of ``pipelines.sources``."""

    data_dir: str = Field(default="", description="folder with the raw dataset files")

    def resolved(self) -> str | None:
        return resolve_data_dir(self.data_dir or None)


class ReleaseStore(dg.ConfigurableResource):
    """The release store: a folder or a ``pyarrow.fs`` URI. Empty: ``$PRIVFAIR_STORE``, else
    ``releases``; a relative folder is taken relative to the repository root."""

    uri: str = Field(default="", description="release store folder or pyarrow.fs URI")

    def resolved(self) -> str:
        return resolve_store(self.uri or None)


# --- run config --------------------------------------------------------------------------------
class ProtectConfig(dg.Config):
    """Optional overrides of the spec's component parameters; unset fields keep the spec's
    values. The result is validated as a whole by ``PipelineSpec.with_params`` (an unknown
    parameter for the component, or an invalid value, fails the run with the spec key named).
    Overrides change the spec, hence the release version."""

    k: int | None = Field(default=None, description="group / fairlet size (k-anonymity level)")
    m: int | None = Field(default=None, description="Fair-MDAV: unfavoured rows per fairlet")
    n: int | None = Field(default=None, description="Fair-MDAV: favoured rows per fairlet")
    tau: float | None = Field(default=None, description="Fair-MDAV: correction level in [0, 1]")
    microaggregate: bool | None = Field(default=None, description="Fair-MDAV: replace QIs by means")
    correction: str | None = Field(default=None, description="Fair-MDAV: positive | negative")
    grouping: str | None = Field(default=None, description="Fair-MDAV: fairlet | mdav")
    scaling: str | None = Field(default=None, description="minmax | zscore")
    relabel_order: str | None = Field(default=None, description="Fair-MDAV: nearest | random")
    seed: int | None = Field(default=None, description="Fair-MDAV: seed for random relabelling")

    def overrides(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}

    def apply(self, spec: PipelineSpec) -> PipelineSpec:
        over = self.overrides()
        if not over:
            return spec
        try:
            return spec.with_params(over)
        except SpecError as e:
            raise dg.Failure(
                description=f"invalid run config for '{spec.name}' (overrides {over}): "
                f"spec key '{e.key}': {e.rule}",
                metadata={"overrides": dg.MetadataValue.json(over)},
                allow_retries=False,
            ) from None


# --- helpers -----------------------------------------------------------------------------------
def _work_dir(context: dg.OpExecutionContext, spec: PipelineSpec, step: str) -> Path:
    root = Path(context.instance.storage_directory()) / "privfair" / spec.name
    return root / context.run_id / step


def _mv(x: Any) -> Any:
    """A value as Dagster metadata."""
    if x is None:
        return dg.MetadataValue.null()
    if isinstance(x, bool):
        return dg.MetadataValue.bool(x)
    if isinstance(x, int | float):
        return x
    if isinstance(x, str):
        return dg.MetadataValue.text(x)
    return dg.MetadataValue.json(json.loads(json.dumps(x, default=str)))


def _first_line(doc: str | None) -> str:
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def _file_md(path: str) -> dict[str, Any]:
    p = Path(path)
    return {"path": dg.MetadataValue.path(str(p)), "url": dg.MetadataValue.url(p.as_uri())}


def _metric_md(metrics: dict) -> dict[str, Any]:
    md: dict[str, Any] = {f"metrics/{k}": _mv(metrics[k]) for k in HEADLINE_METRICS if k in metrics}
    for k in ("positive_ratio_before", "positive_ratio_after"):
        if k in metrics:
            md[f"metrics/{k}"] = _mv(metrics[k])
    il = metrics.get("information_loss")
    if isinstance(il, dict) and "il_attr" in il:
        md["metrics/information_loss"] = _mv(il["il_attr"])
    return md


# --- one spec ----------------------------------------------------------------------------------
def spec_definitions(path: Path, spec: PipelineSpec) -> dict[str, list]:
    """The assets, checks, job and schedule of one spec."""
    name = spec.name
    raw_key = dg.AssetKey([name, "raw_table"])
    prot_key = dg.AssetKey([name, "protected_table"])
    rel_key = dg.AssetKey([name, "release"])
    about = {
        "spec_file": dg.MetadataValue.path(str(path)),
        "component": spec.component.name,
        "params": dg.MetadataValue.json(dict(spec.component.params)),
        "dataset": spec.dataset.name or spec.dataset.path or "",
    }
    common = {"group_name": name, "kinds": {"parquet"}}

    @dg.asset(
        key=raw_key,
        description=f"The typed input table of {name} (roles attached, checked).",
        metadata=about,
        **common,
    )
    def raw_table(context: dg.AssetExecutionContext, privfair_data: PrivfairData) -> dict:
        from pipelines import steps

        out = steps.ingest_step(spec, _work_dir(context, spec, "raw"), privfair_data.resolved())
        info = json.loads(Path(out["input"]).read_text())
        context.add_output_metadata(
            {
                "dagster/row_count": out["rows"],
                "columns": out["columns"],
                "input_fingerprint": out["fingerprint"],
                "input_files": _mv(info.get("files", {})),
                "raw_parquet": dg.MetadataValue.path(out["raw"]),
            }
        )
        return out

    @dg.asset(
        key=prot_key,
        ins={"raw": dg.AssetIn(raw_key)},
        description=(spec.description or f"{name}: the protected table.").strip()
        + "\n\nRun config overrides the component parameters. A version already published "
        "in the release store is reused (its files), not recomputed.",
        metadata=about,
        **common,
    )
    def protected_table(
        context: dg.AssetExecutionContext,
        config: ProtectConfig,
        release_store: ReleaseStore,
        raw: dict,
    ) -> dict:
        from pipelines import steps

        eff = config.apply(spec)
        work = _work_dir(context, spec, "protected")
        out = steps.protect_step(eff, raw, work, release_store.resolved())
        metrics = json.loads(Path(out["metrics"]).read_text())
        contract = json.loads(Path(out["contract"]).read_text())
        context.add_output_metadata(
            {
                "version": out["version"],
                "dagster/row_count": out["rows_out"],
                "rows_in": out["rows_in"],
                "rows_out": out["rows_out"],
                "params": _mv(json.loads(Path(out["params"]).read_text())),
                "overrides": _mv(config.overrides()),
                "declared_guarantees": _mv([f"{g['id']} {g['kind']}".strip() for g in contract]),
                "data_parquet": dg.MetadataValue.path(out["data"]),
                "reused_release": _mv(out["reused"]),
                **_metric_md(metrics),
            }
        )
        return out

    template = declared_contract(spec)
    slots = slot_names(template)
    docs = {n: _first_line(type(g).__doc__) for n, g in zip(slots, template, strict=True)}
    titles = {n: f"{g.id} {g.kind}".strip() for n, g in zip(slots, template, strict=True)}
    check_specs = [
        dg.AssetCheckSpec(n, asset=prot_key, blocking=True, description=f"{titles[n]}: {docs[n]}")
        for n in slots
    ]
    check_specs.append(
        dg.AssetCheckSpec(
            CONTRACT_CHECK,
            asset=prot_key,
            blocking=True,
            description="The whole validation of the candidate release passes: every declared "
            "guarantee plus the built-in schema expectations (columns, nulls, types, row "
            "count), run by Great Expectations on the files to be published.",
        )
    )

    @dg.multi_asset_check(
        name=f"{name}__contract_checks",
        specs=check_specs,
        can_subset=True,
        ins={"protected": dg.AssetIn(prot_key)},
        description=f"Great Expectations validation of the {name} candidate release.",
    )
    def contract_checks(
        context: dg.AssetCheckExecutionContext, release_store: ReleaseStore, protected: dict
    ):
        from pipelines import steps

        v = steps.validate_step(protected, release_store.resolved(), raise_on_failure=False)
        summary = json.loads(Path(v["results"]).read_text())
        contract = json.loads(Path(protected["contract"]).read_text())
        from schemas.contracts import GUARANTEE_LIST

        guarantees = GUARANTEE_LIST.validate_python(contract)
        names = slot_names(guarantees)
        # validate_release reports the contract in order, then its built-in schema checks
        results = [r for r in summary["results"] if r.get("id") != "schema"]
        by_slot: dict[str, dict] = {
            n: r
            for n, g, r in zip(names, guarantees, results, strict=False)
            if r.get("kind") == g.kind and r.get("id") == g.id
        }
        schema = [r for r in summary["results"] if r.get("id") == "schema"]
        selected = {k.name for k in context.selected_asset_check_keys}
        for slot in slots:
            r = by_slot.get(slot)
            if slot not in selected or r is None:
                continue  # not selected, or not declared under these parameters
            md = {
                "guarantee": f"{r['id']} {r['kind']}".strip(),
                "observed": _mv(r.get("observed")),
                "expected": _mv(r.get("expected")),
                "n_offending": int(r.get("n_offending") or 0),
                "version": v["version"],
            }
            if r.get("offending"):
                md["offending (first rows)"] = _mv(r["offending"])
            yield dg.AssetCheckResult(
                asset_key=prot_key,
                check_name=slot,
                passed=bool(r["passed"]),
                metadata=md,
                description=r.get("message") or None,
            )
        if CONTRACT_CHECK in selected:
            md = {
                "checked": v["checked"],
                "guarantees_checked": len(results),
                "schema_checks": len(schema),
                "failed": _mv(v["failed"]),
                "results": dg.MetadataValue.path(v["results"]),
                "version": v["version"],
                "guarantees_without_own_check": _mv([n for n in names if n not in slots]),
            }
            if v["quarantine"]:
                md["quarantined_at"] = dg.MetadataValue.path(v["quarantine"])
            n_ok = v["checked"] - len(v["failed"])
            yield dg.AssetCheckResult(
                asset_key=prot_key,
                check_name=CONTRACT_CHECK,
                passed=bool(v["passed"]),
                metadata=md,
                description=f"{n_ok}/{v['checked']} expectations hold "
                f"({len(results)} guarantees, {len(schema)} schema checks)"
                + ("" if v["passed"] else "; candidate quarantined, nothing published"),
            )

    @dg.asset(
        key=rel_key,
        ins={"protected": dg.AssetIn(prot_key)},
        description=f"The published, versioned release of {name} "
        "(<store>/<pipeline>/<version>: data, lineage, manifest, validation, report).",
        metadata=about,
        **common,
    )
    def release(
        context: dg.AssetExecutionContext, release_store: ReleaseStore, protected: dict
    ) -> dict:
        from pipelines import steps

        vpath = Path(protected["work"]) / "validation.json"
        validated = None
        if vpath.exists():
            validated = json.loads(vpath.read_text())
            if validated.get("version") != protected["version"]:
                validated = None
        out = steps.publish_step(protected, validated, release_store.resolved())
        md: dict[str, Any] = {
            "version": out["version"],
            "status": out["status"],
            "release": dg.MetadataValue.path(out["path"]),
        }
        if "report" in out:
            rep = _file_md(out["report"])
            md["report"], md["report_url"] = rep["path"], rep["url"]
        if "manifest" in out:
            man = json.loads(Path(out["manifest"]).read_text())
            val = man.get("validation", {})
            docs = (val.get("artefacts") or {}).get("data_docs")
            if docs and (Path(out["path"]) / docs).is_file():
                md["data_docs_url"] = _file_md(str(Path(out["path"]) / docs))["url"]
            md.update(
                {
                    "manifest": dg.MetadataValue.path(out["manifest"]),
                    "published_at": man.get("published_at", ""),
                    "dagster/row_count": int(man.get("metrics", {}).get("output_rows", 0)),
                    "contract/status": val.get("status", "?"),
                    "contract/checked": val.get("checked", 0),
                    "contract/failed": _mv(val.get("failed", [])),
                    "contract/results": _mv(
                        {
                            f"{r['id']} {r['kind']}".strip(): "PASS" if r["passed"] else "FAIL"
                            for r in val.get("results", [])
                        }
                    ),
                    **_metric_md(man.get("metrics", {})),
                }
            )
        context.add_output_metadata(md)
        return out

    job = dg.define_asset_job(
        f"{name}_job",
        selection=dg.AssetSelection.groups(name),
        description=f"Build, validate and publish {name}.",
        tags={"privfair/pipeline": name},
    )
    schedules = []
    cron = cron_of(spec.schedule)
    if cron is not None:
        schedules.append(
            dg.ScheduleDefinition(
                name=f"{name}_schedule",
                job=job,
                cron_schedule=cron,
                execution_timezone="UTC",
                description=f"{name} on its spec schedule ({spec.schedule}).",
            )
        )
    return {
        "assets": [raw_table, protected_table, release],
        "asset_checks": [contract_checks],
        "jobs": [job],
        "schedules": schedules,
    }


def build_defs(
    specs_dir: str | Path | None = None,
    store: str | None = None,
    data_dir: str | None = None,
) -> dg.Definitions:
    """Definitions for every spec in ``specs_dir`` (default ``$PRIVFAIR_SPECS_DIR`` or the
    shipped specs). ``store``/``data_dir`` preset the resources (default: from the env)."""
    parts: dict[str, list] = {"assets": [], "asset_checks": [], "jobs": [], "schedules": []}
    for path, spec in load_specs(specs_dir):
        for key, items in spec_definitions(path, spec).items():
            parts[key] += items
    return dg.Definitions(
        **parts,
        # One process per run: a spec's steps form a chain, and a subprocess per step would
        # spend longer importing pyarrow / Great Expectations than German takes to protect.
        executor=dg.in_process_executor,
        resources={
            "privfair_data": PrivfairData(
                data_dir=data_dir or os.environ.get("PRIVFAIR_DATA_DIR", "")
            ),
            "release_store": ReleaseStore(uri=store or os.environ.get("PRIVFAIR_STORE", "")),
        },
    )


defs = build_defs()
