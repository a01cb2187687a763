"""Dagster definitions generated from the pipeline specs (``defs``).

For every spec in ``$PRIVFAIR_SPECS_DIR`` (default ``pipelines/specs/*.yaml``), found when this
module is imported (a new YAML file adds a new asset graph, no code change):

* assets ``<spec>/raw_table`` -> ``<spec>/protected_table`` -> ``<spec>/release``, in the asset
  group ``<spec>``; their values are small dicts of Parquet/JSON paths written by the
  orchestrator-neutral steps of ``privfair.steps`` (the same ones the Airflow DAGs run);
* one **blocking** asset check per guarantee of the release, named from the algorithm's
  data-free outline plus the spec's demands (``privfair.spec.catalogue.check_keys``), on
  ``protected_table``, plus ``contract`` (every guarantee holds and the declared contract holds
  every required one). They run together: one Great Expectations validation of the candidate
  release (``privfair.run.flow.build_candidate``), each check taking the result with its key; a
  declared check without a result fails. A failed check quarantines the candidate and stops
  ``release``;
* run config on ``protected_table``, generated from the algorithm's ``Params`` model: every
  parameter optional (unset keeps the spec's value), validated by
  ``privfair.spec.catalogue.with_params``;
* resources ``privfair_data`` (raw-data folder; default ``$PRIVFAIR_DATA_DIR``),
  ``connections`` (``conn_id`` -> URI of a database source or lakehouse target; ``${VAR}`` in
  a URI from the environment),
  ``release_store`` (default ``$PRIVFAIR_STORE`` or ``releases``, relative to the current directory)
  and ``execution_engine`` (where blocks run: ``local`` or ``spark`` and its master; default
  ``$PRIVFAIR_ENGINE`` / ``$PRIVFAIR_SPARK_MASTER``, else each spec's ``execution``);
* a job ``<spec>_job`` over the group (and ``privfair_releases`` over every spec's group) and, when the spec has a schedule, ``<spec>_schedule``
  (created stopped: turn it on in the UI or with ``dagster schedule start``);
* an observable source asset ``<spec>/source`` upstream of ``raw_table``: its data version is
  the input's fingerprint (``flow.ReleasePlan.observe``, one read of the source), so the
  release shows as stale when the source changes; and a sensor ``<spec>_source_sensor``
  (created stopped) that observes the source and requests a run of ``<spec>_job`` when it
  changed (``run_key``: the fingerprint; its first tick only records what is there);
* for a spec with ``partitions`` (``partitions_def_of``): daily / weekly (Monday) / monthly
  partitions from ``start`` (to ``end``), static partitions for a key list, dynamic ones for
  ``keys: dynamic``, keyed as ``privfair.spec.partitions`` keys them. Its assets and checks are
  partitioned, a run releases ``context.partition_key`` (a partition's release is versioned
  by its own rows and idempotent: re-running an unchanged partition publishes nothing), the
  source's data versions are per partition (``DataVersionsByPartition``), the sensor
  requests one run per changed or new partition (``run_key`` ``<key>:<fingerprint>``; under
  ``keys: dynamic`` it adds the new keys first), and the schedule of a time partitioning is
  built from the partitioned job (``build_schedule_from_partitioned_job``: each period once it
  has ended; a key partitioning has none, whatever its ``schedule``). Which spec gets a
  schedule is ``privfair.spec.partitions.schedule_of``'s rule, the one Airflow's DAGs read: a
  time partitioning always (its ``schedule`` omitted or its granularity's cron, any other is
  a ``SpecError`` naming the spec file), a key partitioning never. Backfills: the UI's "Materialize" on the
  partitions, or ``dagster job backfill -j <spec>_job --from KEY --to KEY``. A partitioned
  spec stays out of ``privfair_releases`` (one job runs one partitioning);
* on each ``release`` materialisation, catalogue metadata (``privfair.release.catalog_metadata``):
  ``dagster/table_name`` ``privfair.<pipeline>.<output>`` and ``dagster/column_schema`` (each
  published column's type, role and the guarantees naming it), and, when the manifest has a
  ``ledger`` section, ``privfair/budget_spent`` / ``privfair/budget_remaining``;
* an asset ``<spec>/evaluation`` (``privfair evaluate`` on ``raw_table``: stratified folds,
  classifiers on protected vs raw training folds; run config ``grid``, ``folds``,
  ``classifiers``, ...) in its own group ``<spec>_evaluation``, outside the release job, so a
  scheduled release never waits for a grid; a release validated after it shows its trade-off
  plot.

The Dagster instance: ``DAGSTER_HOME``, which ``python -m privfair.orchestrate dagster-dev``,
the demo and the Makefile default to ``./.dagster_home`` (created on demand, with a
``dagster.yaml`` disabling telemetry; storage is Dagster's default SQLite under that folder).
Importing this module has no side effect on the environment. The work files of each run live
under ``<instance storage>/privfair/<spec>/<run_id>/``.

    python -m privfair.orchestrate dagster-dev -p 3000      # the UI on http://127.0.0.1:3000
    dagster asset materialize -m privfair.dagster.definitions --select 'key:<spec name>/*'
"""

import functools
import json
import os
import typing
import warnings
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal

import dagster as dg
from pydantic import Field, create_model

from privfair.components.core.descriptor import Algorithm, Metric
from privfair.evaluation.options import EvaluateOptions
from privfair.release.manifest import Manifest
from privfair.schemas.contracts import SCHEMA_CHECK_ID
from privfair.schemas.errors import SpecError
from privfair.schemas.spec import PipelineSpec
from privfair.spec.catalogue import algorithm_of, check_keys, load_specs, outline, with_params
from privfair.spec.partitions import WHOLE, cron_of, schedule_note, schedule_of
from privfair.spec.settings import resolve_data_dir, resolve_store

CONTRACT_CHECK = "contract"
RELEASES_JOB = "privfair_releases"  # every spec's release group, no evaluation asset


# --- resources ---------------------------------------------------------------------------------
class PrivfairData(dg.ConfigurableResource):
    """Where the raw dataset files are. Empty: ``$PRIVFAIR_DATA_DIR``, else the checked
    download cache of ``privfair.io.sources``."""

    data_dir: str = Field(default="", description="folder with the raw dataset files")

    def resolved(self) -> str | None:
        return resolve_data_dir(self.data_dir or None)


class Connections(dg.ConfigurableResource):
    """URIs of the connections a spec names by ``conn_id`` (a database source, an Iceberg
    catalog or Delta table target), e.g. ``{"raw_db": "postgresql://etl:${RAW_PW}@db/raw"}``:
    a ``${VAR}`` is read from the run's environment, so no password is in the spec or this
    configuration. A ``conn_id`` not listed here is looked up as ``$AIRFLOW_CONN_<ID>``."""

    uris: dict[str, str] = Field(default_factory=dict, description="conn_id -> URI")

    def scope(self):
        from privfair.io.urls import connections

        return connections(self.uris)


class ReleaseStore(dg.ConfigurableResource):
    """The release store: a folder or a ``pyarrow.fs`` URI. Empty: ``$PRIVFAIR_STORE``, else
    ``releases``; a relative folder is taken relative to the current directory."""

    uri: str = Field(default="", description="release store folder or pyarrow.fs URI")

    def resolved(self) -> str:
        return resolve_store(self.uri or None)


# --- run config --------------------------------------------------------------------------------
class ExecutionEngine(dg.ConfigurableResource):
    """Where the components' blocks run (``privfair.components.core.engine``). Empty fields keep each
    spec's ``execution``: ``engine`` ``local`` or ``spark``, ``master`` a Spark master URL,
    ``workers`` local processes (0: unset). The engine never changes a release's version."""

    engine: str = Field(default="", description="'local' or 'spark' (empty: the spec's)")
    master: str = Field(default="", description="Spark master URL (empty: local[<cores>])")
    workers: int = Field(default=0, ge=0, description="worker processes (0: the spec's)")

    def overrides(self) -> dict[str, Any]:
        """The set fields, as ``privfair.run.tasks.protect_task(execution=...)`` takes them."""
        return {
            "engine": self.engine or None,
            "master": self.master or None,
            "workers": self.workers or None,
        }


class ParamsConfig(dg.Config):
    """Optional overrides of the spec's algorithm parameters; unset fields keep the spec's
    values. The result is validated as a whole (an unknown parameter or an invalid value fails
    the run with the spec key named). Overrides change the spec, hence the release version."""

    json_fields: ClassVar[frozenset[str]] = frozenset()

    def overrides(self) -> dict[str, Any]:
        """The set fields; a structured parameter (list, mapping, model) is given as JSON."""
        out = {k: v for k, v in self.model_dump().items() if v is not None}
        for k in self.json_fields & set(out):
            try:
                out[k] = json.loads(out[k])
            except json.JSONDecodeError as e:
                raise dg.Failure(
                    description=f"run config '{k}' must be JSON ({e.msg})", allow_retries=False
                ) from None
        return out

    def apply(self, spec: PipelineSpec) -> PipelineSpec:
        over = self.overrides()
        if not over:
            return spec
        try:
            return with_params(spec, over)
        except SpecError as e:
            raise dg.Failure(
                description=f"invalid run config for '{spec.name}' (overrides {over}): "
                f"spec key '{e.key}': {e.rule}",
                metadata={"overrides": dg.MetadataValue.json(over)},
                allow_retries=False,
            ) from None


_SCALARS = (bool, int, float, str)


def _config_type(annotation: Any) -> tuple[Any, str]:
    """A Dagster-config-friendly type for a Params field, and a note on allowed values.
    Dagster's config takes scalars only: a structured parameter (tuple, list, mapping, model)
    is a JSON string (note ``" (JSON)"``)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is Literal:
        return str, " (one of: " + ", ".join(map(str, typing.get_args(annotation))) + ")"
    if args and typing.get_origin(annotation) is not Literal and len(args) == 1:
        return _config_type(args[0])
    if annotation in _SCALARS:
        return annotation, ""
    return str, " (JSON)"


@cache
def config_class(algo: Algorithm) -> type[ParamsConfig]:
    """The run config of ``algo``: one optional field per ``Params`` field, same description."""
    fields: dict[str, Any] = {}
    structured = set()
    for name, f in algo.params.model_fields.items():
        typ, note = _config_type(f.annotation)
        if note == " (JSON)":
            structured.add(name)
        fields[name] = (typ | None, Field(default=None, description=(f.description or name) + note))
    camel = "".join(p.capitalize() for p in algo.name.split("_"))
    cls = create_model(f"{camel}Config", __base__=ParamsConfig, **fields)
    cls.json_fields = frozenset(structured)
    return cls


# --- helpers -----------------------------------------------------------------------------------
def _run_dir(context: dg.OpExecutionContext, spec: PipelineSpec) -> Path:
    """The run's work folder (owner-only, removed when the run ends: ``tasks.cleanup``)."""
    return Path(context.instance.storage_directory()) / "privfair" / spec.name / context.run_id


def _work_dir(context: dg.OpExecutionContext, spec: PipelineSpec, step: str) -> Path:
    return _run_dir(context, spec) / step


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


def _metric_md(metrics: dict, headline: tuple[Metric, ...]) -> dict[str, Any]:
    """The algorithm's headline metrics as ``metrics/<key>`` metadata."""
    md: dict[str, Any] = {}
    for m in headline:
        v = m.get(metrics)
        if v is not None:
            md[f"metrics/{m.key}"] = _mv(v)
    return md


# --- partitions and the source ------------------------------------------------------------------
DATA_VERSION_TAG = "dagster/data_version"  # the tag Dagster reads an observation's version from


def partitions_def_of(spec: PipelineSpec) -> dg.PartitionsDefinition | None:
    """The Dagster partitions of ``spec.partitions`` (None: not partitioned), keyed exactly as
    ``privfair.spec.partitions`` keys them: a time partition by the ISO date its period starts on
    (``%Y-%m-%d``, UTC; weeks start on Monday: ``day_offset=1``; months on the 1st), from
    ``start`` up to ``end`` excluded; a key partition by its value (a fixed list: static
    partitions; ``dynamic``: Dagster dynamic partitions named after the spec, which the source
    sensor adds as the source shows new keys)."""
    part = spec.partitions
    if part is None:
        return None
    if part.granularity is not None:
        when = {
            "start_date": part.start.isoformat(),
            "end_date": part.end.isoformat() if part.end is not None else None,
            "fmt": "%Y-%m-%d",
            "timezone": "UTC",
        }
        if part.granularity == "day":
            return dg.DailyPartitionsDefinition(**when)
        if part.granularity == "week":
            return dg.WeeklyPartitionsDefinition(day_offset=1, **when)
        return dg.MonthlyPartitionsDefinition(day_offset=1, **when)
    if part.keys == "dynamic":
        return dg.DynamicPartitionsDefinition(name=spec.name)
    try:
        return dg.StaticPartitionsDefinition(list(part.keys))
    except dg.DagsterInvalidDefinitionError as e:
        raise SpecError("partitions.keys", f"not usable as Dagster partition keys: {e}") from None


def known_keys(pdef: dg.PartitionsDefinition, instance: dg.DagsterInstance) -> set[str]:
    """The partition keys Dagster knows now (time partitions: up to the last complete period;
    dynamic: those added to ``instance``)."""
    if isinstance(pdef, dg.DynamicPartitionsDefinition):
        return set(instance.get_dynamic_partitions(pdef.name))
    return set(pdef.get_partition_keys())


def observe_source(spec: PipelineSpec, data_dir: str | None) -> tuple[str, dict[str, str]]:
    """The source's fingerprint and each partition's, from one read
    (``flow.ReleasePlan.observe``): the data versions of ``<spec>/source``. A source that cannot
    be read fails the observation with the reason (a ``dg.Failure``, no retry)."""
    from privfair.run.flow import ReleasePlan
    from privfair.schemas.errors import PrivfairError

    try:
        return ReleasePlan.of(spec, data_dir=data_dir).observe()
    except PrivfairError as e:
        raise dg.Failure(description=f"cannot observe the source of '{spec.name}': {e}") from None


def column_schema(release: str, man: dict) -> dict[str, Any]:
    """Catalogue metadata of a published release (``privfair.release.catalog_metadata``):
    ``dagster/table_name`` ``privfair.<pipeline>.<output>`` of its main output (``data`` when
    it has one, else its first), ``dagster/column_schema`` its columns (Arrow type; the
    description names the role and the guarantees naming the column; tag ``privfair/role``);
    with several outputs, ``privfair/tables`` lists every output's table name and columns."""
    from privfair.release.catalog_metadata import columns, table_name

    found = columns(release, man)
    if not found:
        return {}
    main = "data" if "data" in found else next(iter(found))
    tables = {
        out: dg.TableSchema(
            columns=[
                dg.TableColumn(
                    name=c.name,
                    type=c.type,
                    description=c.description,
                    tags={"privfair/role": c.role} if c.role else {},
                )
                for c in cols
            ]
        )
        for out, cols in found.items()
    }
    md: dict[str, Any] = {
        "dagster/table_name": table_name(man["pipeline"], main),
        "dagster/column_schema": tables[main],
    }
    if len(found) > 1:
        md["privfair/tables"] = _mv(
            {
                table_name(man["pipeline"], out): [c.name for c in cols]
                for out, cols in found.items()
            }
        )
    return md


def ledger_metadata(man: dict) -> dict[str, Any]:
    """``privfair/budget_spent`` and ``privfair/budget_remaining`` of the most-spent block after
    a differentially private release, from the manifest's ``ledger`` section; for another
    release, the re-publication policy it was admitted under (``privfair/republish``)."""
    led = man.get("ledger")
    if not isinstance(led, dict):
        return {}
    if led.get("charge") is None:  # not differentially private: recorded, nothing spent
        return {"privfair/republish": _mv(led["policy"])} if led.get("policy") else {}
    md = {
        "privfair/budget_spent": _mv(led.get("spent")),
        "privfair/budget_remaining": _mv(led.get("remaining")),
    }
    if led.get("dataset"):
        md["privfair/ledger_dataset"] = _mv(led["dataset"])
    return md


# --- one spec ----------------------------------------------------------------------------------
#: Run config of ``<spec>/evaluation``: the fields of ``EvaluateOptions`` (the options of
#: ``privfair evaluate``), as a Dagster config class.
EvaluationConfig = create_model(
    "EvaluationConfig",
    __base__=dg.Config,
    __doc__="Run config of ``<spec>/evaluation`` (the options of ``privfair evaluate``).",
    **{name: (f.annotation, f) for name, f in EvaluateOptions.model_fields.items()},
)


def _known_previews(fn):
    """Run ``fn`` without Dagster's warnings about the two non-stable features we use
    knowingly: ``observable_source_asset`` (beta) and partitioned asset checks (preview in
    1.13; the checks of a partitioned spec must be per partition)."""

    @functools.wraps(fn)
    def quiet(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dg.BetaWarning)
            warnings.simplefilter("ignore", dg.PreviewWarning)
            return fn(*args, **kwargs)

    return quiet


@_known_previews
def spec_definitions(path: Path, spec: PipelineSpec) -> dict[str, list]:
    """The assets, checks, job and schedule of one spec."""
    name = spec.name
    algo = algorithm_of(spec)
    raw_key = dg.AssetKey([name, "raw_table"])
    prot_key = dg.AssetKey([name, "protected_table"])
    rel_key = dg.AssetKey([name, "release"])
    src_key = dg.AssetKey([name, "source"])
    pdef = partitions_def_of(spec)
    about = {
        "spec_file": dg.MetadataValue.path(str(path)),
        "component": spec.component.name,
        "family": algo.family,
        "params": dg.MetadataValue.json(dict(spec.component.params)),
        "dataset": spec.dataset.name or spec.dataset.path or "",
    }
    common = {"group_name": name, "kinds": {"parquet"}, "partitions_def": pdef}
    Config = config_class(algo)

    @dg.observable_source_asset(
        key=src_key,
        group_name=name,
        partitions_def=pdef,
        description=f"The raw input of {name} as it is now: its data version is the input's "
        "fingerprint (per partition: the partition's, which changes only when its rows do), so "
        "the release shows as stale when the source changes.",
        metadata=about,
    )
    def source(context, privfair_data: PrivfairData, connections: Connections):
        with connections.scope():
            whole, parts = observe_source(spec, privfair_data.resolved())
        if pdef is None:
            return dg.ObserveResult(
                data_version=dg.DataVersion(whole), metadata={"source_fingerprint": whole}
            )
        known = known_keys(pdef, context.instance)
        unknown = sorted(set(parts) - known)
        if unknown:  # rows of a period not started yet, before start, or a key not added yet
            context.log.warning(
                f"{len(unknown)} partition key(s) in the source are not partitions of "
                f"{name} (yet): {unknown[:5]}"
            )
        return dg.DataVersionsByPartition(
            {k: dg.DataVersion(fp) for k, fp in parts.items() if k in known}
        )

    @dg.asset(
        key=raw_key,
        deps=[src_key],
        description=f"The typed input table of {name} (roles attached, checked)"
        + (f", one partition of it (partitions on '{spec.partitions.column}')." if pdef else "."),
        metadata=about,
        **common,
    )
    def raw_table(
        context: dg.AssetExecutionContext, privfair_data: PrivfairData, connections: Connections
    ) -> dg.Output[dict]:
        from privfair.run import tasks

        with connections.scope():
            out = tasks.ingest_task(
                spec,
                _work_dir(context, spec, "raw"),
                privfair_data.resolved(),
                partition=context.partition_key if pdef is not None else None,
            )
        info = json.loads(Path(out.input).read_text())
        md = {
            "dagster/row_count": out.rows,
            "columns": out.columns,
            "input_fingerprint": out.fingerprint,
            "input_files": _mv(info.get("files", {})),
        }
        if out.partition is not None:
            md["partition"] = out.partition
            md["source_fingerprint"] = info.get("source_fingerprint", "")
        context.add_output_metadata(md)
        # its data version is the input's fingerprint: what is downstream of it is stale
        # exactly when the rows it releases changed
        with warnings.catch_warnings():  # data_version of an Output: beta in Dagster 1.13
            warnings.simplefilter("ignore", dg.BetaWarning)
            return dg.Output(out.as_dict(), data_version=dg.DataVersion(out.fingerprint))

    @dg.asset(
        key=prot_key,
        ins={"raw": dg.AssetIn(raw_key)},
        description=(spec.description or f"{name}: the protected table.").strip()
        + f"\n\n{algo.title} ({algo.family}). Run config overrides its parameters. A version "
        "already published in the release store is reused (its files), not recomputed.",
        metadata=about,
        **common,
    )
    def protected_table(
        context: dg.AssetExecutionContext,
        config: Config,  # type: ignore[valid-type]
        release_store: ReleaseStore,
        connections: Connections,
        execution_engine: ExecutionEngine,
        raw: dict,
    ) -> dict:
        from privfair.run import tasks

        eff = config.apply(spec)
        work = _work_dir(context, spec, "protected")
        try:
            with connections.scope():
                out = tasks.protect_task(
                    eff, raw, work, release_store.resolved(), execution_engine.overrides()
                )
        except BaseException:  # the run ends here: no work file outlives it
            tasks.cleanup(_run_dir(context, spec))
            raise
        metrics = json.loads(Path(out.metrics).read_text())
        contract = json.loads(Path(out.contract).read_text())
        context.add_output_metadata(
            {
                "version": out.version,
                "dagster/row_count": out.rows_out,
                "rows_in": out.rows_in,
                "rows_out": out.rows_out,
                "params": _mv(json.loads(Path(out.params).read_text())),
                "overrides": _mv(config.overrides()),
                "declared_guarantees": _mv([f"{g['id']} {g['kind']}".strip() for g in contract]),
                "outputs": _mv(out.outputs),
                "reused_release": _mv(out.reused),
                "warnings": _mv(json.loads(Path(out.result).read_text()).get("warnings", [])),
                **_metric_md(metrics, algo.headline),
            }
        )
        return out.as_dict()

    template = outline(spec)
    keys = check_keys(template)
    docs = {k: _first_line(type(g).__doc__) for k, g in zip(keys, template, strict=True)}
    titles = {k: g.title for k, g in zip(keys, template, strict=True)}
    check_specs = [
        dg.AssetCheckSpec(
            k,
            asset=prot_key,
            blocking=True,
            description=f"{titles[k]}: {docs[k]}",
            partitions_def=pdef,
        )
        for k in keys
    ]
    check_specs.append(
        dg.AssetCheckSpec(
            CONTRACT_CHECK,
            asset=prot_key,
            blocking=True,
            description="The whole validation of the candidate release passes: every guarantee "
            "of the contract rebuilt from the spec, the declared contract holding all of them, "
            "and the built-in schema expectations (columns, nulls, types, row count), run by "
            "Great Expectations on the files to be published.",
            partitions_def=pdef,
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
        context: dg.AssetCheckExecutionContext,
        release_store: ReleaseStore,
        connections: Connections,
        protected: dict,
    ):
        from privfair.run import tasks

        try:
            with connections.scope():
                v = tasks.validate_task(protected, release_store.resolved(), raise_on_failure=False)
            summary = json.loads(Path(v.results).read_text())
        except BaseException:
            tasks.cleanup(Path(protected["work"]).parent)
            raise
        if not v.passed:  # the blocking checks stop the run: the release step never runs
            tasks.cleanup(Path(protected["work"]).parent)
        by_key = {r["key"]: r for r in summary["results"] if r.get("key")}
        schema = [r for r in summary["results"] if r.get("id") == SCHEMA_CHECK_ID]
        selected = {k.name for k in context.selected_asset_check_keys}
        for key in keys:
            if key not in selected:
                continue
            r = by_key.get(key)
            if r is None:  # declared up front, but the validation produced no result for it
                yield dg.AssetCheckResult(
                    asset_key=prot_key,
                    check_name=key,
                    passed=False,
                    metadata={"version": v.version},
                    description=f"{titles[key]}: no validation result for this guarantee",
                )
                continue
            md = {
                "guarantee": f"{r['id']} {r['kind']}".strip(),
                "observed": _mv(r.get("observed")),
                "expected": _mv(r.get("expected")),
                "n_offending": int(r.get("n_offending") or 0),
                "version": v.version,
            }
            if r.get("offending"):
                md["offending (first rows)"] = _mv(r["offending"])
            yield dg.AssetCheckResult(
                asset_key=prot_key,
                check_name=key,
                passed=bool(r["passed"]),
                metadata=md,
                description=r.get("message") or None,
            )
        if CONTRACT_CHECK in selected:
            md = {
                "checked": v.checked,
                "guarantees_checked": len(by_key),
                "schema_checks": len(schema),
                "failed": _mv(v.failed),
                "version": v.version,
                "guarantees_without_own_check": _mv([k for k in by_key if k not in keys]),
            }
            if v.quarantine:
                md["quarantined_at"] = dg.MetadataValue.path(v.quarantine)
            n_ok = v.checked - len(v.failed)
            yield dg.AssetCheckResult(
                asset_key=prot_key,
                check_name=CONTRACT_CHECK,
                passed=bool(v.passed),
                metadata=md,
                description=f"{n_ok}/{v.checked} checks hold "
                f"({len(by_key)} guarantees, {len(schema)} schema checks)"
                + ("" if v.passed else "; candidate quarantined, nothing published"),
            )

    @dg.asset(
        key=rel_key,
        ins={"protected": dg.AssetIn(prot_key)},
        description=f"The published, versioned release of {name} "
        "(<store>/<pipeline>/<version>: outputs, internal sidecars, manifest, validation, report).",
        metadata=about,
        **common,
    )
    def release(
        context: dg.AssetExecutionContext,
        release_store: ReleaseStore,
        connections: Connections,
        protected: dict,
    ) -> dict:
        from privfair.run import tasks

        vpath = Path(protected["work"]) / "validation.json"
        validated = None
        if vpath.exists():
            doc = json.loads(vpath.read_text())
            if doc.get("candidate") and doc.get("status") == "passed":
                validated = tasks.ValidateRecord(
                    pipeline=name,
                    version=protected["version"],
                    passed=True,
                    failed=[],
                    checked=doc.get("checked", 0),
                    results=str(vpath),
                    candidate=doc["candidate"],
                )
        try:
            with connections.scope():
                out = tasks.publish_task(protected, validated, release_store.resolved())
        finally:
            tasks.cleanup(Path(protected["work"]).parent)
        md: dict[str, Any] = {
            "version": out.version,
            "status": out.status,
            "release": dg.MetadataValue.path(out.path),
        }
        if out.report:
            rep = _file_md(out.report)
            md["report"], md["report_url"] = rep["path"], rep["url"]
        if out.shared:
            md["shareable_copy"] = dg.MetadataValue.path(out.shared)
            md["shareable_report_url"] = _file_md(str(Path(out.shared) / "report.html"))["url"]
        if out.manifest:
            man = Manifest.load(out.manifest)
            val = man.get("validation", {})
            docs_path = (val.get("artefacts") or {}).get("data_docs")
            if docs_path and (Path(out.path) / docs_path).is_file():
                md["data_docs_url"] = _file_md(str(Path(out.path) / docs_path))["url"]
            md.update(
                {
                    "manifest": dg.MetadataValue.path(out.manifest),
                    "published_at": man.get("published_at", ""),
                    "dagster/row_count": sum(
                        int(o.get("rows") or 0) for o in (man.get("outputs") or {}).values()
                    ),
                    "contract/status": val.get("status", "?"),
                    "contract/checked": val.get("checked", 0),
                    "contract/failed": _mv(val.get("failed", [])),
                    "contract/results": _mv(
                        {
                            f"{r['id']} {r['kind']}".strip(): "PASS" if r["passed"] else "FAIL"
                            for r in val.get("results", [])
                        }
                    ),
                    **_metric_md(man.get("metrics", {}), algo.headline),
                    # the output schemas are read where the store is a local folder
                    **(column_schema(out.path, man) if Path(out.path).is_dir() else {}),
                    **ledger_metadata(man),
                }
            )
            if man.get("partition") is not None:
                md["partition"] = man["partition"]
        context.add_output_metadata(md)
        return out.as_dict()

    @dg.asset(
        key=dg.AssetKey([name, "evaluation"]),
        ins={"raw": dg.AssetIn(raw_key)},
        description=f"The cost of protection of {name}: stratified folds, {algo.title} on the "
        "training folds only, classifiers trained on its output and on the raw fold, scored on "
        "the untouched fold (accuracy, precision, recall, dPar, eOdds, ...; mean and 95 % "
        "interval). Not part of the release job; the next release's report shows its plot.",
        metadata=about,
        group_name=f"{name}_evaluation",
        kinds={"parquet"},
        partitions_def=pdef,
    )
    def evaluation(context: dg.AssetExecutionContext, config: EvaluationConfig, raw: dict):
        import pyarrow.parquet as pq

        from privfair.run import tasks

        options = EvaluateOptions.of(config.model_dump(), key="config")
        out = tasks.evaluate_task(raw, options, progress=context.log.info)
        rows = pq.read_table(out.summary).to_pylist()
        lines = ["| protection | grid | classifier | accuracy | dPar |", "|---|---|---|---|---|"]
        by: dict[tuple, dict] = {}
        for r in rows:
            by.setdefault((r["protection"], r["grid"], r["classifier"]), {})[r["metric"]] = r
        for (protection, grid, clf), m in sorted(by.items()):
            cells = [
                f"{m[k]['mean']:.3f} [{m[k]['ci_low']:.3f}, {m[k]['ci_high']:.3f}]"
                for k in ("accuracy", "dpar")
            ]
            lines.append(f"| {protection} | {grid} | {clf} | {cells[0]} | {cells[1]} |")
        page = _file_md(out.page)
        context.add_output_metadata(
            {
                "summary": dg.MetadataValue.md("\n".join(lines)),
                "page": page["path"],
                "page_url": page["url"],
                "folder": dg.MetadataValue.path(out.path),
                "grid": _mv(out.grid),
                "folds": out.folds,
                "points": out.points,
                "seconds": round(out.seconds, 1),
            }
        )
        return out.as_dict()

    note = schedule_note(spec)
    job = dg.define_asset_job(
        f"{name}_job",
        selection=dg.AssetSelection.groups(name),
        description=f"Build, validate and publish {name}."
        + (f" The spec's {note}." if note else ""),
        tags={"privfair/pipeline": name},
    )
    schedules: list = []
    # the rule Airflow reads too (``partitions.schedule_of``): a time partitioning's cadence is
    # its granularity's, a key partitioning has none, a contradicting schedule is refused
    try:
        cron = cron_of(schedule_of(spec))
    except SpecError as e:
        raise SpecError(e.key, e.rule, str(path)) from None
    if cron is not None and pdef is not None:
        if isinstance(pdef, dg.TimeWindowPartitionsDefinition):
            # the partitions set the cadence: each tick releases the period just ended
            schedules.append(
                dg.build_schedule_from_partitioned_job(
                    job,
                    name=f"{name}_schedule",
                    description=f"{name}: each {spec.partitions.granularity}'s partition once "
                    "the period has ended.",
                )
            )
        # a key partitioning has no calendar: the source sensor starts its runs
    elif cron is not None:
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
        "assets": [source, raw_table, protected_table, release, evaluation],
        "asset_checks": [contract_checks],
        "jobs": [job],
        "schedules": schedules,
        "sensors": [source_sensor(spec, src_key, pdef, job)],
    }


SENSOR_INTERVAL = 300  # seconds between two reads of a source by its sensor


def source_sensor(
    spec: PipelineSpec,
    src_key: dg.AssetKey,
    pdef: dg.PartitionsDefinition | None,
    job: Any,
) -> dg.SensorDefinition:
    """``<spec>_source_sensor`` (created stopped): reads the source (``observe_source``, one
    read per tick), records the data versions that changed as observations of
    ``<spec>/source`` and requests a run of ``<spec>_job`` for each change: the whole input
    (``run_key`` its fingerprint) or each partition whose rows changed or appeared
    (``run_key`` ``<key>:<fingerprint>``). Its cursor holds the versions last seen; the
    first tick records them and requests nothing (backfill the partitions already there).
    Under ``keys: dynamic`` it first adds the keys new in the source as partitions. A run of
    an unchanged partition would publish nothing new anyway (its version exists)."""
    name = spec.name
    dynamic = isinstance(pdef, dg.DynamicPartitionsDefinition)

    @dg.sensor(
        name=f"{name}_source_sensor",
        job=job,
        minimum_interval_seconds=SENSOR_INTERVAL,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description=f"Starts {name}_job when the source of {name} changes"
        + (" (one run per changed partition)." if pdef is not None else "."),
    )
    def sensor(
        context: dg.SensorEvaluationContext, privfair_data: PrivfairData, connections: Connections
    ):
        with connections.scope():
            whole, parts = observe_source(spec, privfair_data.resolved())
        now = parts if pdef is not None else {WHOLE: whole}
        added: list[str] = []
        if dynamic:
            added = sorted(set(now) - known_keys(pdef, context.instance))
        elif pdef is not None:
            now = {k: v for k, v in now.items() if k in known_keys(pdef, context.instance)}
        first = context.cursor is None
        seen = json.loads(context.cursor) if context.cursor else {}
        changed = {k: v for k, v in now.items() if seen.get(k) != v}
        events = [
            dg.AssetObservation(
                asset_key=src_key,
                partition=k if pdef is not None else None,
                tags={DATA_VERSION_TAG: v},
            )
            for k, v in changed.items()
        ]
        requests = (
            []
            if first
            else [
                dg.RunRequest(
                    run_key=f"{k}:{v}" if pdef is not None else v,
                    partition_key=k if pdef is not None else None,
                    tags={"privfair/source_fingerprint": whole},
                )
                for k, v in changed.items()
            ]
        )
        return dg.SensorResult(
            run_requests=requests,
            skip_reason=None
            if requests
            else (
                f"first look at the source: {len(now)} version(s) recorded"
                if first
                else "the source has not changed"
            ),
            cursor=json.dumps(now, sort_keys=True),
            asset_events=events,
            dynamic_partitions_requests=[pdef.build_add_request(added)] if added else None,
        )

    return sensor


def build_defs(
    specs_dir: str | Path | None = None,
    store: str | None = None,
    data_dir: str | None = None,
) -> dg.Definitions:
    """Definitions for every spec in ``specs_dir`` (default ``$PRIVFAIR_SPECS_DIR`` or the
    shipped specs). ``store``/``data_dir`` preset the resources (default: from the env)."""
    parts: dict[str, list] = {
        "assets": [],
        "asset_checks": [],
        "jobs": [],
        "schedules": [],
        "sensors": [],
    }
    names = []
    for path, spec in load_specs(specs_dir):
        if spec.partitions is None:  # a job runs one partitioning: each partitioned spec its own
            names.append(spec.name)
        for key, items in spec_definitions(path, spec).items():
            parts[key] += items
    parts["jobs"].append(
        dg.define_asset_job(
            RELEASES_JOB,
            selection=dg.AssetSelection.groups(*names),
            description="Every unpartitioned spec's release (the evaluations are left out; a "
            "partitioned spec runs by partition in its own job).",
        )
    )
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
            "connections": Connections(),
            "execution_engine": ExecutionEngine(
                engine=os.environ.get("PRIVFAIR_ENGINE", ""),
                master=os.environ.get("PRIVFAIR_SPARK_MASTER", ""),
            ),
        },
    )


defs = build_defs()
