"""The Airflow face: DAGs, task groups and tasks for privfair releases (``privfair[airflow]``)."""
