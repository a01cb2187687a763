"""What a release is asked to be: pipeline specs (``catalogue``), where things are (``settings``) and partition keys (``partitions``). The lowest floor: it imports no other room."""

from privfair import lazy_names

# each public name and the module that holds it, imported on first use (``lazy_names``)
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
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
