"""What a release is asked to be: pipeline specs (``catalogue``), where things are (``settings``) and partition keys (``partitions``). The lowest floor: it imports no other room."""

from importlib import import_module

__all__ = [
    "load_spec",
    "load_specs",
    "parse_spec",
    "with_params",
    "algorithm_of",
    "specs_dir",
    "resolve_store",
    "resolve_evaluations",
    "resolve_data_dir",
    "check_key",
    "cron_of",
    "schedule_of",
    "keys_of",
]

# each public name and the module that holds it, imported on first use: a room's name costs
# only its own module (the Airflow DAG processor imports privfair.spec on every parse)
_WHERE = {
    "load_spec": "catalogue",
    "load_specs": "catalogue",
    "parse_spec": "catalogue",
    "with_params": "catalogue",
    "algorithm_of": "catalogue",
    "specs_dir": "settings",
    "resolve_store": "settings",
    "resolve_evaluations": "settings",
    "resolve_data_dir": "settings",
    "check_key": "partitions",
    "cron_of": "partitions",
    "schedule_of": "partitions",
    "keys_of": "partitions",
}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
