"""Privacy accounting that follows the data: the owner ledger (``ledger``), the admission of a release against it (``admission``) and its summaries (``summary``)."""

from privfair import lazy_names

# each public name and the module that holds it, imported on first use (``lazy_names``)
_WHERE = {
    "Ledger": "ledger",
    "BudgetExceeded": "ledger",
    "RepublishRefused": "ledger",
    "default_url": "ledger",
    "Admission": "admission",
    "admit": "admission",
    "failing": "admission",
    "check_republish": "admission",
    "open_ledger": "summary",
    "ledger_summary": "summary",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
