"""The DAG file: one Airflow DAG per privfair pipeline spec of ``$PRIVFAIR_SPECS_DIR`` (default:
the example specs shipped with privfair), each holding one ``PrivfairTaskGroup``: the group a
user puts in a DAG of their own. What each DAG runs, its schedule and its settings:
``privfair.airflow.dags``."""

from airflow.sdk import DAG

from privfair.airflow import PrivfairTaskGroup
from privfair.airflow.dags import dag_args
from privfair.spec.catalogue import load_specs

for spec_path, spec in load_specs():
    with DAG(**dag_args(spec_path, spec)) as dag:
        # the tasks keep their ids (ingest, protect, ...); their settings come from the run
        PrivfairTaskGroup(spec, group_id=spec.name, prefix_group_id=False, run_conf=True)
    globals()[f"dag_{spec.name}"] = dag
