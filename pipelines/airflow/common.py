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
    "failure",
    "input_path",
    "partition_of",
    "publish_extra",
    "release_asset",
    "resolve_spec",
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
