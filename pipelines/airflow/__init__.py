"""The Airflow face: one DAG per spec (``privfair.airflow.dags``), the task glue of
``privfair.run.tasks``.

Needs the ``airflow`` extra (``pip install 'privfair[airflow]'``); without it this import
raises an ``ImportError`` that says so.
"""

from privfair.extras import require

require("airflow")
