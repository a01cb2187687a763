"""privfair as an Airflow provider: ``get_provider_info`` for the ``apache_airflow_provider``
entry point (``pyproject.toml``), so ``airflow providers list`` shows privfair, and its
operators, its task group and ``@task.privfair`` are what Airflow lists for it.

Importing this module imports neither Airflow nor any operator: Airflow calls
``get_provider_info`` while it discovers providers, and imports ``@task.privfair``'s module
only when a DAG uses it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["get_provider_info"]

INTEGRATION = "privfair"


def get_provider_info() -> dict[str, Any]:
    """What Airflow's provider discovery reads (valid against the ``provider_info.schema.json``
    Airflow ships): the package, its versions, the integration, the modules of its operators
    and task group and the ``privfair`` task decorator.

    >>> info = get_provider_info()
    >>> info["package-name"], info["task-decorators"]
    ('privfair', [{'name': 'privfair', 'class-name': 'privfair.airflow.decorators.privfair_task'}])
    """
    from privfair import __version__

    return {
        "package-name": "privfair",
        "name": "privfair",
        "description": "Private and fair table releases as Airflow tasks: "
        "PrivfairReleaseOperator, PrivfairTaskGroup, PrivfairCheckOperator and @task.privfair.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "tags": ["privacy", "fairness", "data-quality"],
            }
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "privfair.airflow.operators",
                    "privfair.airflow.task_group",
                ],
            }
        ],
        "task-decorators": [
            {"name": "privfair", "class-name": "privfair.airflow.decorators.privfair_task"}
        ],
    }
