"""Orchestrator-neutral stages (ingest, protect, validate, publish), the CLI, the Great
Expectations layer and the Dagster definitions. Airflow DAG files live in ``dags/``."""

__version__ = "0.1.0"
