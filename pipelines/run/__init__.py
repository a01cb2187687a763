"""One release end to end (``flow``: ingest, protect, validate, publish) and the same steps as orchestrator tasks (``tasks``), shared by the Dagster and Airflow faces."""
