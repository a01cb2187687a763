"""privfair as operators of the user's own DAG: ``PrivfairReleaseOperator`` releases a spec in
one task; ``PrivfairCheckOperator`` checks guarantees on a table produced elsewhere.

Both fail their task with ``AirflowFailException`` (no retry: the same input fails the same way)
whose message names what broke: the failed guarantees, the spec key and rule, the input and
rule; never a stack of privfair's internals. Neither keeps a copy of a table: a table comes
from a file (a path, an upstream task's XCom of a path, a file Asset) and goes back to the
store or nowhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Asset, BaseOperator

from privfair.airflow.common import (
    check_execution,
    failure,
    input_path,
    partition_of,
    publish_extra,
    release_asset,
    resolve_spec,
    with_cluster,
)
from privfair.schemas.errors import PrivfairError
from privfair.schemas.spec import PipelineSpec

__all__ = ["PrivfairCheckOperator", "PrivfairReleaseOperator"]


def _fail(message: str):
    from airflow.sdk.exceptions import AirflowFailException

    return AirflowFailException(message)


class PrivfairReleaseOperator(BaseOperator):
    """Release ``spec`` in one task: ingest, protect, validate and publish, as ``privfair run``.

    Parameters
    ----------
    task_id : str
    spec : path, PipelineSpec or mapping
        A YAML spec file's path, a ``PipelineSpec`` or the spec inline; read when the DAG file
        is parsed (a bad spec is the DAG's import error naming the key), so the outlet Asset
        ``privfair.<pipeline>`` is known to the scheduler.
    input : str, XComArg or Asset, optional (templated)
        None reads the spec's own dataset (a file, a built-in dataset, a source through an
        Airflow Connection, ``$AIRFLOW_CONN_<ID>``). Otherwise the local Parquet or CSV file
        holding the rows: a path, a template such as ``"{{ ti.xcom_pull(task_ids='extract')
        }}"``, an upstream task's return value (``extract()``) or an ``Asset`` whose URI is a
        local path or ``file://`` URL (listed in the task's inlets). The spec's ``dataset``
        then gives the roles only, as ``privfair run spec --input FILE``: the same version,
        and the ledger accounts the rows against ``file:<real path>`` plus ``dataset``.
    store, data_dir : str, optional (templated)
        The release store (default ``$PRIVFAIR_STORE``, else ``releases``) and raw-data
        folder (default ``$PRIVFAIR_DATA_DIR``).
    params : mapping, optional
        Overrides of the algorithm's parameters (validated, as ``privfair run --set``).
    partition : str, optional (templated)
        The partition to release (e.g. ``"{{ ds }}"``); default: for a time partitioning, the
        period holding the run's logical date.
    dataset : str or list of str, optional (templated)
        With ``input``: the name(s) of the private dataset the rows hold, for the ledger.
    execution : mapping, optional (templated)
        Where the release runs, over the spec's ``execution``: ``engine``, ``master``,
        ``workers``, ``conf`` (Spark settings, added to the spec's), ``scratch``, e.g.
        ``{"engine": "spark", "master": "spark://spark-master:7077", "conf":
        {"spark.executor.memory": "8g"}}``; a value may be a template (``"{{
        var.value.spark_master }}"``). Checked when the DAG file is parsed unless templated
        (a bad setting is the DAG's import error naming ``execution.<key>``).
    spark_conn_id : str, optional (templated)
        An Airflow Connection of type ``spark`` (host and port: the master; extra ``conf``:
        Spark settings) or ``spark_connect`` (``sc://``), read when the task runs
        (``privfair.airflow.common.spark_connection``); ``execution`` goes over it. The
        apache-spark provider is not needed.
    **kwargs
        ``BaseOperator``'s (``retries``, ``pool``, ...).

    Notes
    -----
    Guarantees: the candidate release is validated against every guarantee of the spec before
    anything is published; when one does not hold, nothing is published (the candidate is
    quarantined) and the task fails without retry, naming the failed guarantees, so no
    downstream task runs. A bad spec, parameter or input fails it likewise, naming the key or
    column and the rule. A new release (status ``published`` or ``rebuilt``) records an event on
    the outlet Asset ``privfair.<pipeline>`` (``release_asset``) whose ``extra`` holds
    pipeline, version, partition, status and path, as the repository DAGs' ``publish`` does; a
    version already published is skipped (``AirflowSkipException``: no event, no rewrite).
    The return value (XCom) is ``{"pipeline", "version", "status", "path", "shared",
    "partition", "passed"}``. The task writes no work file: the candidate is built in the
    store's staging area and renamed into place, or quarantined (as ``privfair run``).

    Where it runs is the DAG's to say (``execution``, ``spark_conn_id``), never the run's
    conf: the master receives the rows to protect, and ``dag_run.conf`` is whatever the
    trigger wrote (anyone allowed to trigger the DAG, from the UI or the REST API), so a run
    could send them to a cluster of its choosing. To let a run pick among clusters you trust,
    template the value from a DAG ``Param`` whose schema lists them (``Param("spark://a:7077",
    enum=[...])``, ``"{{ params.master }}"``). Where it runs is not part of the version; the
    manifest records it (``execution``). A cluster that cannot be used fails the task without
    retry, naming the master and the reason.

    Examples
    --------
    >>> import pendulum
    >>> from airflow.sdk import DAG
    >>> from privfair.airflow import PrivfairReleaseOperator
    >>> spec = {"name": "doc_op", "dataset": {"columns": {"age": {"role": "quasi_identifier",
    ...     "kind": "numeric"}}}, "component": {"name": "mdav", "params": {"k": 5}}}
    >>> with DAG("doc_op", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
    ...     op = PrivfairReleaseOperator(task_id="release", spec=spec,
    ...         input="{{ ti.xcom_pull(task_ids='extract') }}")
    >>> [a.name for a in op.outlets], op.template_fields[0]
    (['privfair.doc_op'], 'input')
    """

    template_fields: Sequence[str] = (
        "input",
        "store",
        "data_dir",
        "partition",
        "dataset",
        "execution",
        "spark_conn_id",
    )
    template_fields_renderers = {"execution": "json"}
    template_ext: Sequence[str] = ()
    ui_color = "#d6eaf8"

    def __init__(
        self,
        *,
        spec: PipelineSpec | str | os.PathLike | Mapping[str, Any],
        input: Any = None,
        store: str | None = None,
        data_dir: str | None = None,
        params: Mapping[str, Any] | None = None,
        partition: str | None = None,
        dataset: str | Sequence[str] | None = None,
        execution: Mapping[str, Any] | None = None,
        spark_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.privfair_spec = resolve_spec(spec)
        checked = check_execution(execution, spark_conn_id)
        self.release_asset = release_asset(self.privfair_spec.name)
        outlets = list(kwargs.pop("outlets", None) or [])
        inlets = list(kwargs.pop("inlets", None) or [])
        if isinstance(input, Asset):
            inlets.append(input)
        super().__init__(
            outlets=[*outlets, self.release_asset],
            inlets=inlets,
            **kwargs,
        )
        self.input = input
        self.store = store
        self.data_dir = data_dir
        self.overrides = dict(params or {})
        self.partition = partition
        self.dataset = dataset
        self.execution = checked
        self.spark_conn_id = spark_conn_id

    # -- the release --------------------------------------------------------------------------
    def execute(self, context: Any) -> dict[str, Any]:
        return self.release(context, self.input)

    def release(self, context: Any, rows: Any) -> dict[str, Any]:
        """Release ``rows`` (None: the spec's own dataset; a path or file Asset; or, for the
        ``@task.privfair`` decorator, a table in memory) and announce it on the outlet."""
        from airflow.sdk.exceptions import AirflowSkipException

        name = self.privfair_spec.name
        try:
            out = self._run(context, rows)
        except PrivfairError as e:
            raise _fail(failure(e, name)) from None
        print(f"{out['status']}: {name} {out['version']} -> {out['path']}")
        if out["status"] == "exists":
            raise AirflowSkipException(f"{name} {out['version']} is already published")
        context["outlet_events"][self.release_asset].extra = publish_extra(
            name, out["version"], out["partition"], out["status"], out["path"]
        )
        return out

    def _run(self, context: Any, rows: Any) -> dict[str, Any]:
        from privfair import api
        from privfair.io.files import as_table, read_table_file

        spec = with_cluster(self.privfair_spec, self.execution, self.spark_conn_id or None)
        key = partition_of(spec, self.partition, context)
        atoms = [self.dataset] if isinstance(self.dataset, str) else list(self.dataset or [])
        table = None
        if rows is not None:
            if _is_table(rows):
                table = as_table(rows)
            else:
                path = os.path.realpath(input_path(rows))
                print(f"input: {path}")
                table = read_table_file(path, spec.dataset.csv)
                atoms = [f"file:{path}", *atoms]
        elif self.dataset is not None:
            from privfair.schemas.errors import SpecError

            raise SpecError("dataset", "names the dataset an input holds: give the input")
        rel = api.run(
            spec,
            table,
            store=self.store or None,
            data_dir=self.data_dir or None,
            params=self.overrides or None,
            partition=key,
            dataset=atoms or None,
        )
        return {
            "pipeline": rel.pipeline,
            "version": rel.version,
            "status": rel.status,
            "path": rel.path,
            "shared": rel.shared,
            "partition": key,
            "passed": rel.passed,
        }


def _is_table(value: Any) -> bool:
    """A table in memory (Arrow, pandas, polars, an Arrow C stream), not a path."""
    if isinstance(value, (str, os.PathLike, Asset)):
        return False
    mod = type(value).__module__.split(".")[0]
    return mod in ("pyarrow", "pandas", "polars") or hasattr(value, "__arrow_c_stream__")


class PrivfairCheckOperator(BaseOperator):
    """Check guarantees on a table produced elsewhere: the task fails when one does not hold.

    Parameters
    ----------
    task_id : str
    table : str, XComArg or Asset (templated)
        The local Parquet or CSV file to check: a path, a template such as ``"{{
        ti.xcom_pull(task_ids='transform') }}"``, an upstream task's return value or a file
        ``Asset`` (listed in the task's inlets).
    demands : list of mappings
        The guarantees, as a spec's ``guarantees`` entries: ``{"kind": "k_anonymity", "k": 5,
        "quasi_identifiers": [...]}``, ``t_closeness`` (with ``quasi_identifiers``,
        ``attribute``, ``t``), ``parity_gap`` (``protected``, ``label``, ``favoured``,
        ``positive``, ``max``), ``columns_absent`` (``columns``); checked by
        ``privfair.validation.check_table``, the validator's own checkers. Parsed when the DAG
        file is parsed: an unknown or undecidable kind is the DAG's import error.
    csv : mapping, optional
        How a CSV file is written (``delimiter``, ``quote``, ``encoding``).
    **kwargs
        ``BaseOperator``'s.

    Notes
    -----
    Guarantees: every demand is checked; when one does not hold the task fails without retry
    (``AirflowFailException``), so no downstream task runs, and its message names each failed
    demand with what was observed against what was demanded. The return value (XCom, also
    pushed when the task fails, key ``privfair_checks``) lists each check's ``kind``,
    ``passed``, ``observed``, ``expected``, ``n_offending`` and the sizes of the offending
    classes (``class_sizes``), never a value of the table.

    Examples
    --------
    >>> import pendulum
    >>> from airflow.sdk import DAG
    >>> from privfair.airflow import PrivfairCheckOperator
    >>> with DAG("doc_check", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
    ...     op = PrivfairCheckOperator(task_id="check", table="/data/out.parquet",
    ...         demands=[{"kind": "k_anonymity", "k": 5, "quasi_identifiers": ["age", "zip"]}])
    >>> op.demands[0]["k"]
    5
    >>> PrivfairCheckOperator(task_id="bad", table="x.parquet", demands=[{"kind": "retention"}])
    Traceback (most recent call last):
    ...
    privfair.schemas.errors.SpecError: spec key 'demands.0.kind': retention is decided from a release's lineage, not from a table alone; a table takes: k_anonymity, t_closeness, parity_gap, columns_absent...
    """

    template_fields: Sequence[str] = ("table",)
    template_ext: Sequence[str] = ()
    ui_color = "#fdebd0"

    def __init__(
        self,
        *,
        table: Any,
        demands: Sequence[Mapping[str, Any]],
        csv: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        from privfair.validation.table_checks import demands_of

        demands = [dict(d) for d in demands]
        demands_of(demands)  # fail at parse on a demand a table cannot decide
        inlets = list(kwargs.pop("inlets", None) or [])
        if isinstance(table, Asset):
            inlets.append(table)
        super().__init__(inlets=inlets, **kwargs)
        self.table = table
        self.demands = demands
        self.csv = dict(csv) if csv else None

    def execute(self, context: Any) -> list[dict[str, Any]]:
        from privfair.io.files import read_table_file
        from privfair.schemas.spec import CsvSpec
        from privfair.validation.table_checks import check_table

        try:
            path = os.path.realpath(input_path(self.table, "table"))
            data = read_table_file(path, CsvSpec(**self.csv) if self.csv else None)
            results = [_public(r) for r in check_table(data, self.demands)]
        except PrivfairError as e:
            raise _fail(f"{self.task_id}: {type(e).__name__}: {e}") from None
        for r in results:
            print(
                f"{'pass' if r['passed'] else 'FAIL'} {r['kind']}: observed {r['observed']}, "
                f"demanded {r['expected']}"
                + (f"; offending classes' sizes {r['class_sizes']}" if r["class_sizes"] else "")
            )
        failed = [r for r in results if not r["passed"]]
        if failed:
            context["ti"].xcom_push(key="privfair_checks", value=results)
            lines = [
                f"demands.{results.index(r)} {r['kind']}: {r['message']} (observed "
                f"{r['observed']}, demanded {r['expected']}; {r['n_offending']} offending "
                f"class(es) of sizes {r['class_sizes'][:20]})"
                for r in failed
            ]
            raise _fail(
                f"{len(failed)} of {len(results)} demand(s) do not hold on {path}:\n"
                + "\n".join(lines)
            )
        return results


def _public(r) -> dict[str, Any]:
    """A check's result as JSON for XCom: counts and class sizes only."""

    def plain(v):
        if hasattr(v, "item"):
            return v.item()
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    sizes = [o["class_size"] for o in (r.offending or []) if o.get("class_size") is not None]
    return {
        "kind": r.kind,
        "passed": bool(r.passed),
        "message": str(r.message),
        "observed": plain(r.observed),
        "expected": plain(r.expected),
        "n_offending": int(r.n_offending or 0),
        "class_sizes": sorted(int(s) for s in sizes),
    }
