"""What the Airflow pieces of privfair share: the retry policy, the release Asset, a spec given
as a path, an object or inline data, the input file a task is handed, the run's settings and
the message a failing task shows.

Light at import (the DAG processor imports it on every parse): Airflow's SDK and the spec
parser only; the release code is imported inside the tasks.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from airflow.sdk import Asset, ExceptionRetryPolicy, RetryAction, RetryRule

from privfair.schemas.errors import InputError, SpecError
from privfair.schemas.spec import PipelineSpec
from privfair.spec import partitions

__all__ = [
    "ASSET_URI",
    "DEFAULT_ARGS",
    "NO_RETRY",
    "check_execution",
    "failure",
    "input_path",
    "partition_of",
    "publish_extra",
    "release_asset",
    "resolve_spec",
    "spark_connection",
    "with_cluster",
    "work_root",
]

# Deterministic failures fail at once; anything else (a download, a full disk) is retried once.
NO_RETRY = ExceptionRetryPolicy(
    rules=[
        RetryRule(
            exception=[
                "privfair.schemas.errors.ContractViolation",
                "privfair.schemas.errors.SpecError",
                "privfair.schemas.errors.InputError",
                "privfair.schemas.errors.CheckerError",
                "privfair.schemas.errors.EvidenceError",
            ],
            action=RetryAction.FAIL,
            reason="a broken guarantee, spec or input, or a checker that "
            "cannot read its evidence fails the same way on every try",
        )
    ]
)
DEFAULT_ARGS = {
    "owner": "privfair",
    "retries": 1,
    "retry_delay": timedelta(seconds=30),
    "retry_policy": NO_RETRY,
}

#: Where every release of a pipeline is announced (store-independent: the store is a run
#: setting; the event's ``extra`` says where the release went).
ASSET_URI = "privfair://releases/{pipeline}"


def release_asset(pipeline: str) -> Asset:
    """The Airflow Asset each new release of ``pipeline`` updates: name ``privfair.<pipeline>``,
    URI ``privfair://releases/<pipeline>``, whatever the store. A downstream DAG schedules on
    it with ``schedule=[Asset.ref(name="privfair.<pipeline>")]`` (or this very Asset).

    >>> release_asset("german_fair_mdav").uri
    'privfair://releases/german_fair_mdav'
    """
    return Asset(name=f"privfair.{pipeline}", uri=ASSET_URI.format(pipeline=pipeline))


def publish_extra(pipeline: str, version: str, partition: str | None, status: str, path: str):
    """The ``extra`` of the release Asset's event: what a consumer DAG reads of the release."""
    return {
        "pipeline": pipeline,
        "version": version,
        "partition": partition,
        "status": status,
        "path": path,
    }


def resolve_spec(spec: PipelineSpec | str | os.PathLike | Mapping[str, Any]) -> PipelineSpec:
    """The spec an operator or task group is given: a ``PipelineSpec``, the path of a YAML spec
    file (its folder locates a relative ``dataset.path``) or the spec inline as plain data
    (a mapping as the YAML file would hold). Read when the DAG file is parsed, so a bad spec
    is an import error of the DAG naming the key (``SpecError``).

    >>> resolve_spec({"name": "n", "dataset": {"columns": {"a": {"role": "quasi_identifier",
    ...     "kind": "numeric"}}}, "component": {"name": "mdav", "params": {"k": 2}}}).name
    'n'
    >>> resolve_spec(3)
    Traceback (most recent call last):
    ...
    privfair.schemas.errors.SpecError: spec key 'spec': give a spec file's path, a PipelineSpec or the spec as a mapping, not int
    """
    from privfair.spec.catalogue import load_spec, parse_spec

    if isinstance(spec, PipelineSpec):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        return load_spec(spec)
    if isinstance(spec, Mapping):
        return parse_spec(dict(spec), source="inline spec")
    raise SpecError(
        "spec",
        "give a spec file's path, a PipelineSpec or the spec as a mapping, not "
        f"{type(spec).__name__}",
    )


def input_path(value: Any, key: str = "input") -> str:
    """The local file an ``input`` names: a path (a string, e.g. an upstream task's rendered
    XCom, or a ``PathLike``), or an Asset whose URI is a local path or a ``file://`` URL
    (host empty or ``localhost``; percent-escapes decoded). ``InputError`` naming ``key``
    otherwise (an empty string, another URI scheme, a value of another type).

    >>> input_path(Asset("file:///data/rows%20a.parquet"))
    '/data/rows a.parquet'
    >>> input_path("  ")
    Traceback (most recent call last):
    ...
    privfair.schemas.errors.InputError: column 'input': not a file path ('  ': empty; an upstream task returned nothing?)
    """
    if isinstance(value, Asset):
        text = value.uri
    elif isinstance(value, os.PathLike):
        text = os.fspath(value)
    elif isinstance(value, str):
        text = value
    else:
        raise InputError(
            key,
            "not a file path",
            f"{type(value).__name__}; give a Parquet or CSV file's path or a file Asset",
        )
    text = text.strip()
    if not text or text == "None":
        raise InputError(
            key, "not a file path", f"{value!r}: empty; an upstream task returned nothing?"
        )
    if "://" in text:
        url = urlparse(text)
        if url.scheme != "file" or url.netloc not in ("", "localhost"):
            raise InputError(
                key,
                "not a local file",
                f"{text}: privfair reads a Parquet or CSV file on this machine (a path or a "
                "file:// URL)",
            )
        text = unquote(url.path)
    return str(Path(text).expanduser())


def work_root() -> Path:
    """Where the work files of the runs go: ``$PRIVFAIR_WORK_DIR``, else
    ``$AIRFLOW_HOME/privfair_work`` (``~/airflow/privfair_work`` without an ``AIRFLOW_HOME``)."""
    home = Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow")
    return Path(os.environ.get("PRIVFAIR_WORK_DIR") or home / "privfair_work")


def partition_of(spec: PipelineSpec, given: str | None, ctx: Mapping[str, Any]) -> str | None:
    """The partition a running task releases: ``given`` (the run conf's ``partition``, or the
    operator's own) when set, checked against the spec's partitions; else, for a time
    partitioning, the period holding the run's logical date (a scheduled run's logical date is
    its data interval's start; ``airflow dags test <dag> <date>`` releases the period holding
    ``<date>``); a run without a logical date (an Airflow 3 manual trigger) takes its data
    interval's start. None without partitions. ``SpecError`` names the key and the rule (a key
    partitioning needs ``given``)."""
    part = spec.partitions
    if given is not None and str(given).strip():
        return partitions.check_key(part, str(given), "conf.partition")
    if part is None:
        return None
    if part.granularity is None:
        raise SpecError(
            "conf.partition",
            f"{spec.name} is partitioned by the keys of '{part.column}': give the run's key, "
            'e.g. airflow dags test -c \'{"partition": "KEY"}\'',
        )
    when = ctx.get("logical_date") or ctx.get("data_interval_start")
    if when is None:
        raise SpecError("conf.partition", "the run has no logical date: give its partition")
    return partitions.check_key(part, partitions.key_for(part, when), "logical_date")


def failure(e: BaseException, pipeline: str) -> str:
    """The message a task failing on ``e`` shows: what broke and the rule, never the stack of
    privfair's internals. A broken guarantee names each failed guarantee; a bad spec its key
    and rule; a bad input the column (or ``input``) and rule."""
    from privfair.schemas.errors import ContractViolation

    if isinstance(e, ContractViolation):
        return (
            f"{pipeline}: {len(e.failed)} guarantee(s) do not hold, nothing published "
            f"({', '.join(e.failed)})\n{e}"
        )
    return f"{pipeline}: {type(e).__name__}: {e}"


# --- where a release runs ------------------------------------------------------------------------
def _templated(value: Any) -> bool:
    """Whether ``value`` holds a Jinja template anywhere (rendered only when the task runs)."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(_templated(k) or _templated(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_templated(v) for v in value)
    return False


def check_execution(execution: Any, spark_conn_id: Any = None) -> dict[str, Any] | None:
    """The ``execution`` an operator or task group is given, checked when the DAG file is
    parsed unless a template is in it (then when the task runs): ``SpecError`` naming
    ``execution.<key>`` and the rule (``privfair.api.execution_settings``), so a bad setting
    is the DAG's import error. A ``spark_conn_id`` runs on Spark: an ``engine: local`` beside
    it is refused.

    >>> check_execution({"engine": "spark", "conf": {"spark.executor.memory": "8g"}})
    {'engine': 'spark', 'conf': {'spark.executor.memory': '8g'}}
    >>> check_execution({"engine": "local"}, spark_conn_id="spark_default")
    Traceback (most recent call last):
    ...
    privfair.schemas.errors.SpecError: spec key 'execution.engine': 'local' contradicts spark_conn_id='spark_default' (a Spark connection)
    """
    if execution is None:
        given: dict[str, Any] = {}
    elif _templated(execution):
        return dict(execution) if isinstance(execution, Mapping) else execution
    else:
        from privfair.api import execution_settings

        given = execution_settings(execution)
    if spark_conn_id and given.get("engine") == "local":
        raise SpecError(
            "execution.engine",
            f"'local' contradicts spark_conn_id={spark_conn_id!r} (a Spark connection)",
        )
    return given or None


#: Extras of the ``spark`` connection type (the apache-spark provider's) that are Spark
#: settings of the driver privfair starts; the others (``spark-home``, ``spark-binary``...)
#: are spark-submit's, and privfair submits nothing.
_SPARK_EXTRAS = {"queue": "spark.yarn.queue", "namespace": "spark.kubernetes.namespace"}


def spark_connection(conn_id: str) -> dict[str, Any]:
    """The execution settings an Airflow Connection gives (``Connection.get``: the metadata DB,
    a secrets backend or ``$AIRFLOW_CONN_<ID>``), without the apache-spark provider:

    - type ``spark`` (the provider's ``spark_default``): host and port are the master, as
      ``SparkSubmitHook`` reads them: ``yarn``, ``local[4]``, ``k8s://https://HOST:443`` or
      ``spark://HOST`` with the port 7077; a bare host name (the form of a URI
      ``spark://HOST:7077`` in ``$AIRFLOW_CONN_SPARK_DEFAULT``) is a standalone master,
      ``spark://HOST:PORT`` (port default 7077). Its extra ``queue`` and ``namespace`` are
      ``spark.yarn.queue`` and ``spark.kubernetes.namespace``; ``deploy-mode: cluster`` is
      refused (the task itself is the driver);
    - type ``spark_connect`` (the provider's ``spark_connect_default``): ``sc://HOST:PORT``
      (port default 15002), the login as ``user_id``, the password as ``token``, extra
      ``use_ssl``;
    - either: extra ``conf``, a map of Spark settings (``{"spark.executor.memory": "8g"}``).

    Returns ``{"engine": "spark", "master": ..., "conf": {...}}``. ``SpecError`` naming
    ``spark_conn_id`` and the rule: a connection that is not defined, of another type, without
    a host, or whose ``conf`` is not a map of name to text.
    """
    from airflow.sdk import Connection

    key = "spark_conn_id"
    try:
        conn = Connection.get(conn_id)
    except Exception as e:  # noqa: BLE001 - AirflowNotFoundException, a backend's own error
        raise SpecError(key, f"no Airflow connection '{conn_id}' ({e})") from None
    kind = (conn.conn_type or "").replace("-", "_")
    host = (conn.host or "").strip()
    if not host:
        raise SpecError(key, f"connection '{conn_id}' has no host (the Spark master)")
    extra = conn.extra_dejson or {}
    conf_key = f"{key}={conn_id}.extra"
    from privfair.api import execution_settings

    conf = dict(execution_settings({"conf": extra.get("conf") or {}}, conf_key).get("conf", {}))
    if kind == "spark":
        if str(extra.get("deploy-mode") or extra.get("deploy_mode") or "client") != "client":
            raise SpecError(
                key,
                f"connection '{conn_id}' asks for deploy-mode "
                f"'{extra.get('deploy-mode') or extra.get('deploy_mode')}': privfair's task "
                "is the Spark driver (client mode)",
            )
        for name, setting in _SPARK_EXTRAS.items():
            if extra.get(name):
                conf.setdefault(setting, str(extra[name]))
        if "://" in host or host.startswith(("local", "yarn")):
            master = host if not conn.port or _has_port(host) else f"{host}:{conn.port}"
        else:
            master = f"spark://{host}:{conn.port or 7077}"
    elif kind == "spark_connect":
        base = host if host.startswith("sc://") else f"sc://{host}"
        master = base if _has_port(base) else f"{base}:{conn.port or 15002}"
        params = [
            f"{name}={value}"
            for name, value in (
                ("user_id", conn.login),
                ("token", conn.password),
                ("use_ssl", "true" if extra.get("use_ssl") else None),
            )
            if value
        ]
        if params:
            master += "/;" + ";".join(params)
    else:
        raise SpecError(
            key,
            f"connection '{conn_id}' is of type '{conn.conn_type}': give a spark or "
            "spark_connect connection",
        )
    return execution_settings({"engine": "spark", "master": master, "conf": conf}, key)


def _has_port(url: str) -> bool:
    rest = url.split("://", 1)[-1].split("/", 1)[0]
    return ":" in rest.rsplit("]", 1)[-1]


def with_cluster(
    spec: PipelineSpec, execution: Mapping[str, Any] | None, spark_conn_id: str | None
) -> PipelineSpec:
    """``spec`` running where the task is told, over the spec's own ``execution``: the
    ``spark_conn_id`` connection's master and Spark settings (``spark_connection``), then
    ``execution`` (``privfair.api.with_settings``: ``conf`` adds to the spec's and the
    connection's settings). Never the DAG run's conf: the master receives the rows to
    protect, and a run's conf is whatever its trigger wrote (see ``PrivfairReleaseOperator``).
    """
    from privfair.api import with_settings

    check_execution(execution, spark_conn_id)
    conn = spark_connection(spark_conn_id) if spark_conn_id else None
    return with_settings(spec, conn, execution, keys=("spark_conn_id", "execution"))
