# The two commands a newcomer needs: `make demo` (main job) and `make test`.
SHARED_DATA := $(abspath ../shared/data)
export PRIVFAIR_DATA_DIR ?= $(if $(wildcard $(SHARED_DATA)/SHA256SUMS),$(SHARED_DATA),)
export DAGSTER_HOME ?= $(abspath .dagster_home)
export AIRFLOW_HOME ?= $(abspath .airflow_home)

.PHONY: install demo test lint bench ui airflow-test

install:
	bash .ci/deps
	uv sync --frozen --all-extras

demo: install
	uv run python -m pipelines.demo --store releases

test: install
	uv run pytest -q

lint: install
	uv run ruff check . && uv run ruff format --check .

bench: install
	uv run python benchmarks/bench_microaggregation.py

ui: install
	uv run python -m pipelines.orchestrate dagster-dev -p 3000

DAG ?= adult_fair_mdav
airflow-test: install
	uv run python -m pipelines.orchestrate airflow dags test $(DAG)
