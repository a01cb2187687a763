# The two commands a newcomer needs: `make demo` (main job) and `make test`.
SHARED_DATA := $(abspath ../shared/data)
export PRIVFAIR_DATA_DIR ?= $(if $(wildcard $(SHARED_DATA)/SHA256SUMS),$(SHARED_DATA),)
export DAGSTER_HOME ?= $(abspath .dagster_home)
export AIRFLOW_HOME ?= $(abspath .airflow_home)

.PHONY: install demo test lint bench ui airflow-test

# `install` re-runs only when what it installs from changed (a stamp inside .venv, so removing
# .venv re-installs): `make airflow-test` or `make ui` do not re-sync on every call. Bytecode is
# compiled at install: where PYTHONDONTWRITEBYTECODE is set (CI images often set it) every
# interpreter would otherwise compile Great Expectations, Airflow and Dagster from source again
# (~6 s of each `privfair run`). The microaggregation rounds are compiled at install too (numba
# keeps them beside their module), so that no first release waits ~25 s for them.
INSTALL_STAMP := .venv/.privfair-install.stamp
install: $(INSTALL_STAMP)
$(INSTALL_STAMP): pyproject.toml uv.lock .ci/deps
	bash .ci/deps
	uv sync --frozen --all-extras --compile-bytecode
	uv run --no-sync python -m compileall -q components pipelines schemas dags >/dev/null
	uv run --no-sync python -m privfair.components.microaggregation.grouping
	touch $@

demo: install
	uv run python -m privfair.demo --store releases

test: install
	uv run pytest -q

lint: install
	uv run ruff check . && uv run ruff format --check .

bench: install
	uv run python benchmarks/bench_microaggregation.py

UI_PORT ?= 3000
ui: install
	uv run python -m privfair.orchestrate dagster-dev -p $(UI_PORT)

# privfair-airflow: the airflow CLI with the repository's defaults (privfair.orchestrate)
DAG ?= german_fair_mdav
airflow-test: install
	uv run privfair-airflow dags test $(DAG)
