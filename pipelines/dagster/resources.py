"""The resources and run config of the Dagster face.

Resources (``build_defs`` binds them under these keys): ``privfair_data`` (``PrivfairData``,
the raw-data folder), ``connections`` (``Connections``, ``conn_id`` -> URI), ``release_store``
(``ReleaseStore``) and ``execution_engine`` (``ExecutionEngine``, where blocks run). Run config:
``config_class`` of an algorithm (on ``<spec>/protected_table``, its parameters, each optional)
and ``EvaluationConfig`` (on ``<spec>/evaluation``, the options of ``privfair evaluate``).
"""

import json
import os
import typing
from functools import cache
from typing import Any, ClassVar, Literal

import dagster as dg
import pyarrow as pa
from pydantic import Field, create_model

from privfair.components.core.descriptor import Algorithm
from privfair.evaluation.options import EvaluateOptions
from privfair.schemas.errors import SpecError
from privfair.schemas.spec import PipelineSpec
from privfair.spec.catalogue import with_params
from privfair.spec.settings import resolve_data_dir, resolve_store


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


class ExecutionEngine(dg.ConfigurableResource):
    """Where the components' blocks run (``privfair.components.core.engine``). Empty fields keep each
    spec's ``execution``: ``engine`` ``local`` or ``spark``, ``master`` a Spark master URL,
    ``workers`` local processes (0: unset), ``conf`` Spark settings (added to the spec's),
    ``scratch`` a location every node of a cluster reads. The engine never changes a
    release's version."""

    engine: str = Field(default="", description="'local' or 'spark' (empty: the spec's)")
    master: str = Field(default="", description="Spark master URL (empty: local[<cores>])")
    workers: int = Field(default=0, ge=0, description="worker processes (0: the spec's)")
    conf: dict[str, str] = Field(
        default_factory=dict, description="Spark settings over the spec's execution.conf"
    )
    scratch: str = Field(default="", description="a location every node of the cluster reads")

    def overrides(self) -> dict[str, Any]:
        """The set fields, as ``privfair.api.with_settings`` takes them."""
        return {
            "engine": self.engine or None,
            "master": self.master or None,
            "workers": self.workers or None,
            "conf": dict(self.conf) or None,
            "scratch": self.scratch or None,
        }


# --- run config --------------------------------------------------------------------------------
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


#: Run config of ``<spec>/evaluation``: the fields of ``EvaluateOptions`` (the options of
#: ``privfair evaluate``), as a Dagster config class.
EvaluationConfig = create_model(
    "EvaluationConfig",
    __base__=dg.Config,
    __doc__="Run config of ``<spec>/evaluation`` (the options of ``privfair evaluate``).",
    **{name: (f.annotation, f) for name, f in EvaluateOptions.model_fields.items()},
)


# --- the one resource of a release in someone else's project -----------------------------------
class PrivfairResource(dg.ConfigurableIOManager):
    """Everything a privfair release in a user's Dagster project needs, under one resource key,
    ``privfair`` (``privfair.dagster.release_assets`` binds it): the release store, the raw-data
    folder, the connections a spec names, where blocks run. Empty fields read the environment
    as the CLI does (``$PRIVFAIR_STORE``, else ``releases`` in the current directory;
    ``$PRIVFAIR_DATA_DIR``; ``$PRIVFAIR_ENGINE`` / ``$PRIVFAIR_SPARK_MASTER``).

    Where the releases run: ``engine``, ``master``, ``workers``, ``conf`` (Spark settings) and
    ``scratch`` are the spec's ``execution`` keys, set over each spec's own (and over a
    release's own ``execution``: ``release_assets(execution=...)``, the component's
    attribute), as ``privfair run --engine --master --conf`` sets them: ``conf`` adds to the
    spec's Spark settings, ``engine: local`` drops them. They are config fields: the
    launchpad, a run's config (``resources: {privfair: {config: {master: ...}}}``) or an
    ``EnvVar`` set them at launch. ``spark`` is not config: an existing ``SparkSession``
    (classic or Spark Connect), or a resource holding one as ``spark_session``
    (``dagster-pyspark``'s ``PySparkResource`` / ``LazyPySparkResource``, or your own), on
    which every release then runs, ``conf`` set on it; privfair never stops it. None of this
    changes a release's version. A setting that cannot be used fails the step, naming the
    field and the rule (an unknown engine, a ``conf`` that is not a map of name to text, a
    master that is not a Spark URL or that does not answer).

    It is also the IO manager of the release assets: a release's value is the published
    files, not a pickle, so ``handle_output`` stores nothing and ``load_input`` reads, for a
    downstream asset, the table that materialisation published (its ``privfair/path``
    metadata; per partition for a partitioned release) as a pandas frame, or as an Arrow
    table when the input is annotated ``pyarrow.Table``.

    Give one instance to every ``release_assets`` call of a project (the default is one shared
    instance): ``Definitions.merge`` accepts a resource key bound twice only to the same
    object.

    Examples
    --------
    >>> res = PrivfairResource(engine="spark", master="spark://spark-master:7077",
    ...                        conf={"spark.executor.memory": "8g"})
    >>> res.execution()
    {'engine': 'spark', 'master': 'spark://spark-master:7077', 'conf': {'spark.executor.memory': '8g'}}
    >>> PrivfairResource(engine="dask").execution()
    Traceback (most recent call last):
    ...
    privfair.schemas.errors.SpecError: spec key 'resources.privfair.config.engine': unknown engine 'dask' (known: local, spark)
    """

    store: str = Field(default="", description="release store folder or pyarrow.fs URI")
    data_dir: str = Field(default="", description="folder with the raw dataset files")
    connections: dict[str, str] = Field(
        default_factory=dict, description="conn_id -> URI (${VAR} read from the environment)"
    )
    engine: str = Field(default="", description="'local' or 'spark' (empty: each spec's)")
    master: str = Field(
        default="",
        description="Spark master URL: local[N], spark://HOST:7077, yarn, k8s://..., "
        "sc://HOST:15002 (empty: each spec's, else local[<cores>])",
    )
    workers: int = Field(default=0, ge=0, description="worker processes (0: the spec's)")
    conf: dict[str, str] = Field(
        default_factory=dict,
        description="Spark settings over each spec's execution.conf "
        "(spark.executor.memory: 8g, ...; the value is text)",
    )
    scratch: str = Field(
        default="",
        description="a location every node of the cluster reads (a shared folder, hdfs://, "
        "s3a://...) through which blocks reach the executors (empty: Spark's own connections)",
    )
    spark: dg.ResourceDependency[Any] = None

    #: The key the settings' errors are named under: the run config's path of the fields.
    CONFIG_KEY: ClassVar[str] = "resources.privfair.config"

    def resolved_store(self) -> str:
        return resolve_store(self.store or None)

    def resolved_data_dir(self) -> str | None:
        return resolve_data_dir(self.data_dir or None)

    def scope(self):
        """The connections of this resource, visible to the sources read inside it."""
        from privfair.io.urls import connections

        return connections(self.connections)

    def execution(self) -> dict[str, Any]:
        """The set execution fields (``$PRIVFAIR_ENGINE`` / ``$PRIVFAIR_SPARK_MASTER`` for an
        empty ``engine`` / ``master``), checked (``privfair.api.execution_settings``:
        ``SpecError`` naming ``resources.privfair.config.<field>``); with ``spark``, the engine
        is ``spark``."""
        from privfair.api import execution_settings

        given = {
            "engine": self.engine or os.environ.get("PRIVFAIR_ENGINE") or None,
            "master": self.master or os.environ.get("PRIVFAIR_SPARK_MASTER") or None,
            "workers": self.workers or None,
            "conf": dict(self.conf) or None,
            "scratch": self.scratch or None,
        }
        out = execution_settings(given, self.CONFIG_KEY)
        if self.spark is not None:
            if out.get("engine") == "local" or self.master:
                raise SpecError(
                    f"{self.CONFIG_KEY}.{'engine' if out.get('engine') == 'local' else 'master'}",
                    "the resource's spark session runs the releases: leave engine and master "
                    "unset (the session's master is used)",
                )
            out.pop("master", None)  # $PRIVFAIR_SPARK_MASTER: the session says where it runs
            out["engine"] = "spark"
        return out

    def session(self) -> Any:
        """The Spark session of ``spark`` (None without one): the object itself, or its
        ``spark_session`` (a ``dagster-pyspark`` resource's). ``SpecError`` naming
        ``resources.privfair.spark`` for anything else."""
        held = self.spark
        if held is None:
            return None
        session = getattr(held, "spark_session", held)
        if not (hasattr(session, "conf") and hasattr(session, "createDataFrame")):
            raise SpecError(
                "resources.privfair.spark",
                f"not a SparkSession, nor a resource holding one as spark_session: "
                f"{type(held).__name__}",
            )
        return session

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        # a release asset returns a MaterializeResult: its value is the published release
        return None

    def load_input(self, context: dg.InputContext) -> Any:
        from privfair.api import open_release

        up = context.upstream_output
        key = up.asset_key if up is not None else context.asset_key
        records = context.instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=key,
                asset_partitions=[context.asset_partition_key]
                if context.has_asset_partitions
                else None,
            ),
            limit=1,
        ).records
        if not records:
            raise dg.Failure(
                description=f"{key.to_user_string()} has no published release to read yet: "
                "materialise it first",
                allow_retries=False,
            )
        meta = records[0].asset_materialization.metadata
        path = meta.get("privfair/path")
        if path is None:
            raise dg.Failure(
                description=f"{key.to_user_string()}: its materialisation does not say where "
                "the release is (no privfair/path metadata)",
                allow_retries=False,
            )
        release = open_release(path.value)
        table = release.table()
        if context.dagster_type.typing_type is pa.Table:
            return table
        return table.to_pandas()


@cache
def default_resource() -> PrivfairResource:
    """The ``privfair`` resource every ``release_assets`` call binds unless given one: one
    shared instance, so that the definitions of several releases merge."""
    return PrivfairResource()
