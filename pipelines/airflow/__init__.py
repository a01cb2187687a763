"""The Airflow face: privfair releases as parts of any DAG, and one DAG per spec.

* ``PrivfairTaskGroup`` (``task_group``): ingest -> protect -> validate -> publish -> cleanup
  as tasks of the current DAG, chained like one task (``extract >> group >> notify``);
* ``PrivfairReleaseOperator`` (``operators``): one task that releases;
* ``PrivfairCheckOperator`` (``operators``): guarantees checked on a table produced elsewhere;
* ``@task.privfair`` (``decorators.privfair_task``, registered by the provider entry point
  ``provider.get_provider_info``): the function's return value is released;
* ``release_asset`` (``common``): the Asset each new release of a pipeline updates;
* ``build_dag`` / ``build_dags`` (``dags``): the repository's DAGs, one per spec.

Needs the ``airflow`` extra (``pip install 'privfair[airflow]'``); without it this import
raises an ``ImportError`` that says so. Importing it builds no DAG and imports no operator:
each name is imported when first used.
"""

from privfair import lazy_names
from privfair.extras import require

require("airflow")

_WHERE = {
    "PrivfairTaskGroup": "task_group",
    "PrivfairReleaseOperator": "operators",
    "PrivfairCheckOperator": "operators",
    "privfair_task": "decorators",
    "release_asset": "common",
    "build_dag": "dags",
    "build_dags": "dags",
}
__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
