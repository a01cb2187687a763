"""``@task.privfair``: a TaskFlow task whose return value is released (registered through the
provider entry point, ``privfair.airflow.provider``)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from airflow.sdk.bases.decorator import DecoratedOperator, determine_kwargs, task_decorator_factory
from airflow.sdk.definitions.context import context_merge

from privfair.airflow.operators import PrivfairReleaseOperator

__all__ = ["privfair_task"]


class _PrivfairDecoratedOperator(DecoratedOperator, PrivfairReleaseOperator):
    """Runs the decorated function, then releases what it returned
    (``PrivfairReleaseOperator.release``)."""

    template_fields: Sequence[str] = (
        *DecoratedOperator.template_fields,
        *PrivfairReleaseOperator.template_fields,
    )
    template_fields_renderers = {
        **DecoratedOperator.template_fields_renderers,
        **PrivfairReleaseOperator.template_fields_renderers,
    }
    custom_operator_name: str = "@task.privfair"

    def __init__(
        self,
        *,
        python_callable: Callable,
        op_args: Collection[Any] | None = None,
        op_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            python_callable=python_callable, op_args=op_args, op_kwargs=op_kwargs, **kwargs
        )

    def execute(self, context: Any) -> dict[str, Any]:
        context_merge(context, self.op_kwargs)
        kwargs = determine_kwargs(self.python_callable, self.op_args, context)
        rows = self.python_callable(*self.op_args, **kwargs)
        if rows is None:
            from airflow.sdk.exceptions import AirflowFailException

            raise AirflowFailException(
                f"{self.task_id}: the function returned None: return the rows to release (a "
                "pandas, polars or Arrow table) or the path of a Parquet or CSV file"
            )
        return self.release(context, rows)


def privfair_task(python_callable: Callable | None = None, **kwargs: Any):
    """``@task.privfair(spec=..., store=...)``: the decorated function returns the rows to
    release, a pandas, polars or Arrow table or the path of a Parquet or CSV file, and the task
    releases them with ``spec`` (a YAML file's path, a ``PipelineSpec`` or the spec inline),
    whose ``dataset`` gives the roles, as ``PrivfairReleaseOperator`` with that input: same
    guarantees, outlet Asset, skip when already published, failure messages and return value.

    Parameters
    ----------
    python_callable : callable, optional
        The function (when used as ``@task.privfair`` without arguments: then give ``spec``
        through ``.override``; normally ``@task.privfair(spec=...)``).
    **kwargs
        ``PrivfairReleaseOperator``'s (``spec``, ``store``, ``data_dir``, ``params``,
        ``partition``, ``dataset``, ``execution``, ``spark_conn_id``) and ``BaseOperator``'s.

    Returns
    -------
    TaskDecorator

    Notes
    -----
    A table returned in memory is accounted in the ledger against ``dataset`` (or the spec's
    ``budget.dataset``); give one, or the release is refused as rows of no known dataset. A
    returned path is accounted against ``file:<real path>`` too, and gets the version
    ``privfair run spec --input PATH`` gives; a table the version ``privfair.api.run`` gives.

    Examples
    --------
    >>> import pendulum
    >>> from airflow.sdk import DAG, task
    >>> spec = {"name": "doc_deco", "dataset": {"columns": {"age": {"role": "quasi_identifier",
    ...     "kind": "numeric"}}}, "component": {"name": "mdav", "params": {"k": 5}}}
    >>> with DAG("doc_deco", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as d:
    ...     @task.privfair(spec=spec, dataset="ages")
    ...     def ages():
    ...         import pyarrow as pa
    ...         return pa.table({"age": list(range(20, 40))})
    ...     released = ages()
    >>> d.task_dict["ages"].custom_operator_name, [a.name for a in d.task_dict["ages"].outlets]
    ('@task.privfair', ['privfair.doc_deco'])
    """
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=False,
        decorated_operator_class=_PrivfairDecoratedOperator,
        **kwargs,
    )
