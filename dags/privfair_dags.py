"""The DAG file: one Airflow DAG per privfair pipeline spec of ``$PRIVFAIR_SPECS_DIR`` (default:
the example specs shipped with privfair). What each DAG runs, its schedule and its settings:
``privfair.airflow.dags``."""

from privfair.airflow.dags import build_dags

globals().update(build_dags())
