"""A release as files: the store and its candidates (``store``), the shareable copy (``share``), reports, lakehouse targets and their catalogue metadata, the code version, and the work run beside the release in another process (``beside``)."""

from privfair import lazy_names

# each public name and the module that holds it, imported on first use (``lazy_names``)
_WHERE = {
    "Store": "store",
    "Candidate": "store",
    "verify_release": "store",
    "list_releases": "store",
    "current_releases": "store",
    "Manifest": "manifest",
    "ManifestError": "manifest",
    "ReleasePlan": "plan",
    "Ingested": "plan",
    "export": "share",
    "verify_copy": "share",
    "code_version": "version",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
