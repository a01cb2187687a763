"""The assets and checks of one spec, and ``spec_definitions`` composing them.

Each builder takes a ``SpecAssets`` (what every asset of a spec shares: the spec, its file,
its algorithm, its partitions, its asset keys and metadata) and returns one definition:
``source_asset`` (the observable ``<spec>/source``), ``raw_table_asset``,
``protected_table_asset``, ``contract_checks`` (the blocking checks on ``protected_table``),
``release_asset`` and ``evaluation_asset``. The steps they run are ``privfair.run.tasks``'s
(the ones Airflow's DAGs run); what they report is ``privfair.dagster.translator``'s.
"""

import functools
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from privfair.components.core.descriptor import Algorithm
from privfair.dagster.jobs import spec_job, spec_schedules
from privfair.dagster.partitions import observe_source, partitions_def_of, source_versions
from privfair.dagster.resources import (
    Connections,
    EvaluationConfig,
    ExecutionEngine,
    ParamsConfig,
    PrivfairData,
    ReleaseStore,
    config_class,
)
from privfair.dagster.sensors import source_sensor
from privfair.dagster.translator import (
    contract_metadata,
    evaluation_metadata,
    guarantee_description,
    guarantee_metadata,
    ingest_metadata,
    protect_metadata,
    release_metadata,
    spec_metadata,
)
from privfair.evaluation.options import EvaluateOptions
from privfair.schemas.contracts import SCHEMA_CHECK_ID
from privfair.schemas.spec import PipelineSpec
from privfair.spec.catalogue import algorithm_of, check_keys, outline

CONTRACT_CHECK = "contract"


@dataclass(frozen=True)
class SpecAssets:
    """What the assets and checks of one spec share.

    Parameters
    ----------
    path : Path
        The spec file (named in the metadata and in a ``SpecError``).
    spec : PipelineSpec
        The spec as loaded.
    algo : Algorithm
        Its algorithm (``privfair.spec.catalogue.algorithm_of``).
    pdef : dg.PartitionsDefinition or None
        Its partitions (``partitions_def_of``; None: not partitioned).
    """

    path: Path
    spec: PipelineSpec
    algo: Algorithm
    pdef: dg.PartitionsDefinition | None

    @classmethod
    def of(cls, path: Path, spec: PipelineSpec) -> "SpecAssets":
        """The shared part of ``spec``'s definitions, read from ``path``."""
        return cls(path, spec, algorithm_of(spec), partitions_def_of(spec))

    @property
    def name(self) -> str:
        return self.spec.name

    def key(self, step: str) -> dg.AssetKey:
        """The asset key ``<spec>/<step>``."""
        return dg.AssetKey([self.spec.name, step])

    @property
    def source_key(self) -> dg.AssetKey:
        return self.key("source")

    @property
    def raw_key(self) -> dg.AssetKey:
        return self.key("raw_table")

    @property
    def protected_key(self) -> dg.AssetKey:
        return self.key("protected_table")

    @property
    def release_key(self) -> dg.AssetKey:
        return self.key("release")

    @property
    def about(self) -> dict[str, Any]:
        """The definition metadata of each asset (``translator.spec_metadata``)."""
        return spec_metadata(self.path, self.spec, self.algo)

    @property
    def common(self) -> dict[str, Any]:
        """The arguments of ``dg.asset`` the release chain's assets have in common."""
        return {"group_name": self.name, "kinds": {"parquet"}, "partitions_def": self.pdef}

    @property
    def config(self) -> type[ParamsConfig]:
        """The run config of ``protected_table`` (``resources.config_class``)."""
        return config_class(self.algo)


def _run_dir(context: dg.OpExecutionContext, spec: PipelineSpec) -> Path:
    """The run's work folder (owner-only, removed when the run ends: ``tasks.cleanup``)."""
    return Path(context.instance.storage_directory()) / "privfair" / spec.name / context.run_id


def _work_dir(context: dg.OpExecutionContext, spec: PipelineSpec, step: str) -> Path:
    return _run_dir(context, spec) / step


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


# --- the assets ----------------------------------------------------------------------------------
def source_asset(s: SpecAssets) -> dg.SourceAsset:
    """``<spec>/source``: observable, its data version the input's fingerprint (per
    partition: ``partitions.source_versions``), so the release shows as stale when it changes."""
    spec, pdef = s.spec, s.pdef

    @dg.observable_source_asset(
        key=s.source_key,
        group_name=s.name,
        partitions_def=pdef,
        description=f"The raw input of {s.name} as it is now: its data version is the input's "
        "fingerprint (per partition: the partition's, which changes only when its rows do), so "
        "the release shows as stale when the source changes.",
        metadata=s.about,
    )
    def source(context, privfair_data: PrivfairData, connections: Connections):
        with connections.scope():
            whole, parts = observe_source(spec, privfair_data.resolved())
        return source_versions(context, spec.name, pdef, whole, parts)

    return source


def raw_table_asset(s: SpecAssets) -> dg.AssetsDefinition:
    """``<spec>/raw_table``: ``tasks.ingest_task`` (of ``context.partition_key`` for a
    partitioned spec), its data version the input's fingerprint."""
    spec, pdef = s.spec, s.pdef

    @dg.asset(
        key=s.raw_key,
        deps=[s.source_key],
        description=f"The typed input table of {s.name} (roles attached, checked)"
        + (f", one partition of it (partitions on '{spec.partitions.column}')." if pdef else "."),
        metadata=s.about,
        **s.common,
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
        context.add_output_metadata(ingest_metadata(out))
        # its data version is the input's fingerprint: what is downstream of it is stale
        # exactly when the rows it releases changed
        with warnings.catch_warnings():  # data_version of an Output: beta in Dagster 1.13
            warnings.simplefilter("ignore", dg.BetaWarning)
            return dg.Output(out.as_dict(), data_version=dg.DataVersion(out.fingerprint))

    return raw_table


def protected_table_asset(s: SpecAssets) -> dg.AssetsDefinition:
    """``<spec>/protected_table``: ``tasks.protect_task`` on the spec with the run config's
    overrides (``s.config``); a failure removes the run's work files."""
    spec, algo = s.spec, s.algo
    Config = s.config  # Dagster reads the run config's class from the annotation

    @dg.asset(
        key=s.protected_key,
        ins={"raw": dg.AssetIn(s.raw_key)},
        description=(spec.description or f"{s.name}: the protected table.").strip()
        + f"\n\n{algo.title} ({algo.family}). Run config overrides its parameters. A version "
        "already published in the release store is reused (its files), not recomputed.",
        metadata=s.about,
        **s.common,
    )
    def protected_table(
        context: dg.AssetExecutionContext,
        config: Config,  # type: ignore[valid-type]
        release_store: ReleaseStore,
        connections: Connections,
        execution_engine: ExecutionEngine,
        raw: dict,
    ) -> dict:
        from privfair.api import with_settings
        from privfair.run import tasks

        eff = config.apply(spec)
        work = _work_dir(context, spec, "protected")
        try:
            eff = with_settings(
                eff, execution_engine.overrides(), keys=("resources.execution_engine.config",)
            )
            with connections.scope():
                out = tasks.protect_task(eff, raw, work, release_store.resolved())
        except BaseException:  # the run ends here: no work file outlives it
            tasks.cleanup(_run_dir(context, spec))
            raise
        context.add_output_metadata(protect_metadata(out, config.overrides(), algo.headline))
        return out.as_dict()

    return protected_table


def release_asset(s: SpecAssets) -> dg.AssetsDefinition:
    """``<spec>/release``: ``tasks.publish_task`` of the candidate the checks validated; the
    run's work files are removed whatever happens."""

    @dg.asset(
        key=s.release_key,
        ins={"protected": dg.AssetIn(s.protected_key)},
        description=f"The published, versioned release of {s.name} "
        "(<store>/<pipeline>/<version>: outputs, internal sidecars, manifest, validation, report).",
        metadata=s.about,
        **s.common,
    )
    def release(
        context: dg.AssetExecutionContext,
        release_store: ReleaseStore,
        connections: Connections,
        protected: dict,
    ) -> dict:
        from privfair.run import tasks

        validated = _validated(s.name, protected)
        try:
            with connections.scope():
                out = tasks.publish_task(protected, validated, release_store.resolved())
        finally:
            tasks.cleanup(Path(protected["work"]).parent)
        context.add_output_metadata(release_metadata(out, s.algo.headline))
        return out.as_dict()

    return release


def _validated(name: str, protected: dict) -> Any:
    """The passed validation of ``protected`` the checks left in its work folder (a
    ``tasks.ValidateRecord``), or None: then ``publish_task`` validates it itself."""
    from privfair.run import tasks

    vpath = Path(protected["work"]) / "validation.json"
    if not vpath.exists():
        return None
    doc = json.loads(vpath.read_text())
    if not (doc.get("candidate") and doc.get("status") == "passed"):
        return None
    return tasks.ValidateRecord(
        pipeline=name,
        version=protected["version"],
        passed=True,
        failed=[],
        checked=doc.get("checked", 0),
        results=str(vpath),
        candidate=doc["candidate"],
    )


def evaluation_asset(s: SpecAssets) -> dg.AssetsDefinition:
    """``<spec>/evaluation``: ``tasks.evaluate_task`` on ``raw_table``, in the group
    ``<spec>_evaluation`` so that no release job waits for its grid."""

    @dg.asset(
        key=s.key("evaluation"),
        ins={"raw": dg.AssetIn(s.raw_key)},
        description=f"The cost of protection of {s.name}: stratified folds, {s.algo.title} on "
        "the training folds only, classifiers trained on its output and on the raw fold, scored "
        "on the untouched fold (accuracy, precision, recall, dPar, eOdds, ...; mean and 95 % "
        "interval). Not part of the release job; the next release's report shows its plot.",
        metadata=s.about,
        group_name=f"{s.name}_evaluation",
        kinds={"parquet"},
        partitions_def=s.pdef,
    )
    def evaluation(context: dg.AssetExecutionContext, config: EvaluationConfig, raw: dict):
        from privfair.run import tasks

        options = EvaluateOptions.of(config.model_dump(), key="config")
        out = tasks.evaluate_task(raw, options, progress=context.log.info)
        context.add_output_metadata(evaluation_metadata(out))
        return out.as_dict()

    return evaluation


# --- the checks ----------------------------------------------------------------------------------
def contract_checks(s: SpecAssets) -> dg.AssetChecksDefinition:
    """``<spec>__contract_checks``: one blocking check per guarantee of the spec's outline
    (``privfair.spec.catalogue.check_keys``) and ``contract``, on ``protected_table``, all
    from one validation of the candidate (``tasks.validate_task``)."""
    template = outline(s.spec)
    keys = check_keys(template)
    titles = {k: g.title for k, g in zip(keys, template, strict=True)}
    specs = [
        dg.AssetCheckSpec(
            k,
            asset=s.protected_key,
            blocking=True,
            description=guarantee_description(g),
            partitions_def=s.pdef,
        )
        for k, g in zip(keys, template, strict=True)
    ]
    specs.append(_contract_spec(s))

    @dg.multi_asset_check(
        name=f"{s.name}__contract_checks",
        specs=specs,
        can_subset=True,
        ins={"protected": dg.AssetIn(s.protected_key)},
        description=f"Great Expectations validation of the {s.name} candidate release.",
    )
    def checks(
        context: dg.AssetCheckExecutionContext,
        release_store: ReleaseStore,
        connections: Connections,
        protected: dict,
    ):
        v, summary = _validate(protected, release_store, connections)
        by_key = {r["key"]: r for r in summary["results"] if r.get("key")}
        n_schema = sum(1 for r in summary["results"] if r.get("id") == SCHEMA_CHECK_ID)
        selected = {k.name for k in context.selected_asset_check_keys}
        for key in keys:
            if key in selected:
                yield _guarantee_result(s, key, titles[key], by_key.get(key), v)
        if CONTRACT_CHECK in selected:
            yield _contract_result(s, keys, by_key, n_schema, v)

    return checks


def _contract_spec(s: SpecAssets) -> dg.AssetCheckSpec:
    """The ``contract`` check: the whole validation of the candidate passes."""
    return dg.AssetCheckSpec(
        CONTRACT_CHECK,
        asset=s.protected_key,
        blocking=True,
        description="The whole validation of the candidate release passes: every guarantee "
        "of the contract rebuilt from the spec, the declared contract holding all of them, "
        "and the built-in schema expectations (columns, nulls, types, row count), run by "
        "Great Expectations on the files to be published.",
        partitions_def=s.pdef,
    )


def _validate(
    protected: dict, release_store: ReleaseStore, connections: Connections
) -> tuple[Any, dict]:
    """``tasks.validate_task`` on the candidate and its results; the run's work files are
    removed when it fails, since the blocking checks stop the run before ``release``."""
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
    return v, summary


def _guarantee_result(
    s: SpecAssets, key: str, title: str, r: dict | None, v: Any
) -> dg.AssetCheckResult:
    """The check ``key`` from its validation result ``r``; failed when there is none."""
    if r is None:  # declared up front, but the validation produced no result for it
        return dg.AssetCheckResult(
            asset_key=s.protected_key,
            check_name=key,
            passed=False,
            metadata={"version": v.version},
            description=f"{title}: no validation result for this guarantee",
        )
    return dg.AssetCheckResult(
        asset_key=s.protected_key,
        check_name=key,
        passed=bool(r["passed"]),
        metadata=guarantee_metadata(r, v.version),
        description=r.get("message") or None,
    )


def _contract_result(
    s: SpecAssets, keys: list[str], by_key: dict, n_schema: int, v: Any
) -> dg.AssetCheckResult:
    """The ``contract`` check: passed when the whole validation ``v`` passed."""
    n_ok = v.checked - len(v.failed)
    return dg.AssetCheckResult(
        asset_key=s.protected_key,
        check_name=CONTRACT_CHECK,
        passed=bool(v.passed),
        metadata=contract_metadata(v, by_key, n_schema, keys),
        description=f"{n_ok}/{v.checked} checks hold "
        f"({len(by_key)} guarantees, {n_schema} schema checks)"
        + ("" if v.passed else "; candidate quarantined, nothing published"),
    )


# --- one spec ------------------------------------------------------------------------------------
@_known_previews
def spec_definitions(path: Path, spec: PipelineSpec) -> dict[str, list]:
    """The assets, checks, job, schedule and sensor of one spec.

    Parameters
    ----------
    path : Path
        The spec file.
    spec : PipelineSpec
        The spec read from it.

    Returns
    -------
    dict
        ``assets``, ``asset_checks``, ``jobs``, ``schedules`` and ``sensors``: lists, as
        ``dg.Definitions`` takes them.
    """
    s = SpecAssets.of(path, spec)
    job = spec_job(spec)
    return {
        "assets": [
            source_asset(s),
            raw_table_asset(s),
            protected_table_asset(s),
            release_asset(s),
            evaluation_asset(s),
        ],
        "asset_checks": [contract_checks(s)],
        "jobs": [job],
        "schedules": spec_schedules(path, spec, s.pdef, job),
        "sensors": [source_sensor(spec, s.source_key, s.pdef, job)],
    }
