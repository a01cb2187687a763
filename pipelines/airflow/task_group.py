"""A privfair release as a group of tasks of the user's own DAG (``PrivfairTaskGroup``).

The group holds ``ingest -> protect -> validate -> publish`` and a ``cleanup`` teardown (and,
when asked, ``evaluate`` before ``validate``), TaskFlow tasks of ``airflow.sdk`` calling the
file-based tasks of ``privfair.run.tasks``: they hand each other small dicts of paths through
XCom, never a table. Chained like one task (``extract >> group >> notify``): the group's root
is ``ingest``, its leaf ``publish`` (the teardown does not count), so a downstream task runs
only when the release is published, and is ``upstream_failed`` when a guarantee does not hold.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Asset, TaskGroup, task

from privfair.airflow.common import (
    NO_RETRY,
    check_execution,
    input_path,
    partition_of,
    publish_extra,
    release_asset,
    resolve_spec,
    with_cluster,
    work_root,
)
from privfair.schemas.spec import PipelineSpec

__all__ = ["PrivfairTaskGroup"]


def _settings(cfg: Mapping[str, Any], spec_name: str) -> dict[str, Any]:
    """The store, data folder, overrides, execution, evaluation and work folder of the running
    task: the group's own values, else (``run_conf``: the repository's DAGs) the DAG run's
    params; the store and data folder then fall back to ``$PRIVFAIR_STORE`` /
    ``$PRIVFAIR_DATA_DIR`` (``privfair.spec.settings``)."""
    from airflow.sdk import get_current_context

    from privfair.spec.settings import resolve_data_dir, resolve_store, safe_name

    ctx = get_current_context()
    conf = ctx["params"] if cfg["run_conf"] else {}

    def pick(key: str) -> Any:
        value = cfg.get(key)
        return value if value is not None else conf.get(key)

    if cfg["run_conf"]:  # one group per DAG, dag_id = spec name: the run id is unique
        folder = safe_name(ctx["run_id"])
    else:
        folder = safe_name(f"{ctx['dag'].dag_id}.{ctx['run_id']}.{cfg['group_id']}")
    return {
        "store": resolve_store(pick("store") or None),
        "data_dir": resolve_data_dir(pick("data_dir") or None),
        "overrides": dict(pick("overrides") or {}),
        "evaluate": pick("evaluate"),
        "execution": dict(pick("execution") or {}),
        "partition": conf.get("partition"),
        "work": work_root() / spec_name / folder,
    }


class PrivfairTaskGroup(TaskGroup):
    """One privfair release of ``spec`` as tasks of the current DAG.

    Parameters
    ----------
    spec : path, PipelineSpec or mapping
        The spec: a YAML file's path, a ``PipelineSpec`` or the spec inline (read when the DAG
        file is parsed: a bad spec is the DAG's import error, naming the key).
    group_id : str, optional
        Default: the spec's name. Task ids are ``<group_id>.ingest`` etc. unless
        ``prefix_group_id=False``.
    input : str, XComArg or Asset, optional
        Where the rows are: None reads the spec's own dataset (a file, a built-in dataset, a
        source through an Airflow Connection, ``$AIRFLOW_CONN_<ID>``); otherwise the local
        Parquet or CSV file holding them, as the rows of the spec (its ``dataset.columns``
        give the roles): an upstream task's return value (``extract()``: the dependency is
        set), a templated path (``"{{ ti.xcom_pull(task_ids='extract') }}"``: chain the
        upstream task yourself) or an ``Asset`` whose URI is a local path or ``file://`` URL
        (listed in ``ingest``'s inlets). The release then has the version ``privfair run spec
        --input FILE`` gives on the same file, and ``privfair.api.run(spec, rows)`` on the same
        rows; the ledger accounts the rows against ``file:<real path>`` and ``dataset``.
    store, data_dir : str, optional
        The release store and raw-data folder (default ``$PRIVFAIR_STORE``, else
        ``releases``; ``$PRIVFAIR_DATA_DIR``).
    params : mapping, optional
        Overrides of the algorithm's parameters (validated, as ``privfair run --set``).
    partition : str, optional
        The partition to release (templated, e.g. ``"{{ ds }}"``); default: for a time
        partitioning, the period holding the run's logical date.
    dataset : str or list of str, optional
        With ``input``: the name(s) of the private dataset the rows hold, for the ledger.
    execution : mapping, optional (templated)
        Where the release runs, over the spec's ``execution``: ``engine``, ``master``,
        ``workers``, ``conf`` (Spark settings, added to the spec's), ``scratch``
        (``{"engine": "spark", "master": "spark://spark-master:7077", "conf":
        {"spark.executor.memory": "8g"}}``; a value may be a template, rendered when
        ``protect`` runs). Checked when the DAG file is parsed unless templated. ``protect``
        and ``validate`` run on it; the version is the same.
    spark_conn_id : str, optional (templated)
        An Airflow Connection of type ``spark`` or ``spark_connect`` giving the master and
        (extra ``conf``) Spark settings, read when ``protect`` runs; ``execution`` goes over
        it (``PrivfairReleaseOperator``: why a run's conf cannot choose the cluster).
    evaluate : mapping, optional
        ``privfair evaluate`` options (``{"grid": "k=5,10", "folds": 5}``): adds an
        ``evaluate`` task before ``validate``, so the release's report shows the trade-off.
    run_conf : bool
        Read ``store``, ``data_dir``, ``overrides``, ``execution``, ``evaluate`` and
        ``partition`` not given here from the DAG run's params (the repository's DAGs); off by
        default, so a user DAG's own params never redirect a release.
    **kwargs
        Passed to ``TaskGroup`` (``prefix_group_id``, ``tooltip``, ``default_args``, ...).

    Notes
    -----
    What the group guarantees: ``validate`` builds the candidate in the store's staging area
    and checks every guarantee of the spec (Great Expectations); a guarantee that does not hold
    quarantines the candidate and fails the task without retries (``ContractViolation``, also
    for a bad spec or input: ``NO_RETRY``), so ``publish`` and every task downstream of the
    group do not run. ``publish`` renames the validated candidate into
    ``<store>/<pipeline>/<version>`` atomically and records an event on the Asset
    ``privfair.<pipeline>`` (``release_asset``) whose ``extra`` holds pipeline, version,
    partition, status and path; a version already published is skipped (no event). No task
    keeps a copy of the rows: each reads the source (or the input file) again and checks its
    fingerprint. ``cleanup`` removes the run's work files, whatever the outcome.

    Examples
    --------
    >>> import pendulum
    >>> from airflow.sdk import DAG, task
    >>> from privfair.airflow import PrivfairTaskGroup
    >>> spec = {"name": "doc_group", "dataset": {"columns": {"age": {"role": "quasi_identifier",
    ...     "kind": "numeric"}}}, "component": {"name": "mdav", "params": {"k": 5}}}
    >>> with DAG("doc_group", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as d:
    ...     @task
    ...     def extract() -> str:
    ...         return "/data/ages.parquet"
    ...     @task
    ...     def notify() -> None:
    ...         pass
    ...     group = PrivfairTaskGroup(spec, input=extract(), dataset="ages")
    ...     _ = group >> notify()
    >>> sorted(d.task_ids)  # doctest: +NORMALIZE_WHITESPACE
    ['doc_group.cleanup', 'doc_group.ingest', 'doc_group.protect', 'doc_group.publish',
     'doc_group.validate', 'extract', 'notify']
    >>> sorted(d.task_dict["notify"].upstream_task_ids)
    ['doc_group.publish']
    """

    def __init__(
        self,
        spec: PipelineSpec | str | os.PathLike | Mapping[str, Any],
        *,
        group_id: str | None = None,
        input: Any = None,
        store: str | None = None,
        data_dir: str | None = None,
        params: Mapping[str, Any] | None = None,
        partition: str | None = None,
        dataset: str | Sequence[str] | None = None,
        execution: Mapping[str, Any] | None = None,
        spark_conn_id: str | None = None,
        evaluate: Mapping[str, Any] | None = None,
        run_conf: bool = False,
        **kwargs: Any,
    ) -> None:
        s = resolve_spec(spec)
        execution = check_execution(execution, spark_conn_id)
        kwargs.setdefault("tooltip", f"privfair release of {s.name} ({s.component.name})")
        super().__init__(group_id=group_id or s.name, **kwargs)
        self.spec = s
        self.asset = release_asset(s.name)
        cfg = {
            "group_id": self.group_id,
            "run_conf": run_conf,
            "store": None if store is None else str(store),
            "data_dir": None if data_dir is None else str(data_dir),
            "overrides": dict(params) if params else None,
            "execution": dict(execution) if execution else None,
            "spark_conn_id": spark_conn_id,
            "evaluate": dict(evaluate) if evaluate else None,
            "dataset": [dataset] if isinstance(dataset, str) else list(dataset or []),
        }
        with self:
            _tasks(s, cfg, self.asset, input, partition, evaluate is not None or run_conf)


def _tasks(spec: PipelineSpec, cfg: dict, asset: Asset, input: Any, partition, with_eval: bool):
    """The group's tasks, in the group being built (the current TaskGroup)."""
    name = spec.name
    inlets = [input] if isinstance(input, Asset) else []
    if isinstance(input, Asset):
        input = input_path(input)  # static: the Asset's URI

    @task(task_id="ingest", retry_policy=NO_RETRY, inlets=inlets)
    def ingest(input: Any = None, partition: str | None = None, **context) -> dict:
        from privfair.run import tasks
        from privfair.spec.catalogue import with_params

        s = _settings(cfg, name)
        eff = with_params(spec, s["overrides"])
        key = partition_of(spec, partition or s["partition"], context)
        if key is not None:
            print(f"partition: {key}")
        if input is None:
            rec = tasks.ingest_task(eff, s["work"] / "raw", s["data_dir"], partition=key)
            return rec.as_dict()
        from privfair.api import in_memory

        path = os.path.realpath(input_path(input))
        print(f"input: {path}")
        rows = in_memory(eff, [f"file:{path}", *cfg["dataset"]])
        rec = tasks.ingest_task(
            rows,
            s["work"] / "raw",
            s["data_dir"],
            partition=key,
            input_file=path,
            csv=eff.dataset.csv,
        )
        return rec.as_dict()

    @task(task_id="protect", retry_policy=NO_RETRY)
    def protect(
        ingested: dict, execution: dict | None = None, spark_conn_id: str | None = None
    ) -> dict:
        from privfair.run import tasks
        from privfair.spec.catalogue import with_params

        s = _settings(cfg, name)
        rec = tasks.IngestRecord.of(ingested)
        # with an input file, the spec ingest wrote: the one reading the rows in memory
        eff = tasks.spec_of(rec) if rec.input_file else with_params(spec, s["overrides"])
        # the group's own settings (rendered: an argument of the task), else, for the
        # repository's DAGs (run_conf), the run's params; validate reads them from the
        # spec protect records
        eff = with_cluster(eff, execution or s["execution"] or None, spark_conn_id or None)
        return tasks.protect_task(eff, rec, s["work"] / "protected", s["store"]).as_dict()

    @task(task_id="evaluate", retry_policy=NO_RETRY)
    def evaluate(ingested: dict) -> dict:
        from privfair.run import tasks

        options = _settings(cfg, name)["evaluate"]
        if not options:
            print("evaluate: not requested (run conf 'evaluate' is null)")
            return {"skipped": True}
        from privfair.evaluation.options import EvaluateOptions

        out = tasks.evaluate_task(ingested, EvaluateOptions.of(options), progress=print)
        print(f"evaluation: {out.page} ({out.seconds:.1f} s)")
        return out.as_dict()

    @task(task_id="validate", retry_policy=NO_RETRY)
    def validate(protected: dict) -> dict:
        from privfair.run import tasks

        s = _settings(cfg, name)
        return tasks.validate_task(protected, s["store"], raise_on_failure=True).as_dict()

    @task(task_id="publish", retry_policy=NO_RETRY, outlets=[asset])
    def publish(protected: dict, validated: dict, **context) -> dict:
        from airflow.sdk.exceptions import AirflowSkipException

        from privfair.run import tasks

        s = _settings(cfg, name)
        out = tasks.publish_task(protected, validated, s["store"])
        print(f"{out.status}: {name} {out.version} -> {out.path}")
        if out.status == "exists":
            # Airflow records an event on every declared outlet of a task that succeeds: a
            # re-run that published nothing new is skipped, so the Asset's consumers do not
            # run again for a release they have already seen.
            raise AirflowSkipException(f"{name} {out.version} is already published")
        rec = tasks.ProtectRecord.of(protected)
        context["outlet_events"][asset].extra = publish_extra(
            name, out.version, rec.partition, out.status, out.path
        )
        return out.as_dict()

    @task(task_id="cleanup")
    def cleanup() -> bool:
        from privfair.run import tasks

        return tasks.cleanup(_settings(cfg, name)["work"])

    ingested = ingest(input=input, partition=partition)
    protected = protect(ingested, execution=cfg["execution"], spark_conn_id=cfg["spark_conn_id"])
    validated = validate(protected)
    if with_eval:
        evaluate(ingested) >> validated  # the report picks the evaluation up
    # a teardown: runs when the run ends, published or not, and does not decide its state
    publish(protected, validated) >> cleanup().as_teardown(setups=ingested)
