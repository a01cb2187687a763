"""Checking a release: every guarantee recomputed from the published outputs, the sidecars and the input (``validate``), with the generated Great Expectations suites (``expectations``, ``gx_import``)."""

from privfair import lazy_names

# each public name and the module that holds it, imported on first use (``lazy_names``)
_WHERE = {
    "Validation": "validate",
    "validate_release": "validate",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
