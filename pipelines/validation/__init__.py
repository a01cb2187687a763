"""Checking a release: every guarantee recomputed from the published outputs, the sidecars and the input (``validate``), with the generated Great Expectations suites (``expectations``, ``gx_import``); the same checkers on a table privfair did not produce (``table_checks``)."""

from privfair import lazy_names

# each public name and the module that holds it, imported on first use (``lazy_names``)
_WHERE = {
    "Validation": "validate",
    "validate_release": "validate",
    "check_table": "table_checks",
    "TABLE_KINDS": "table_checks",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
