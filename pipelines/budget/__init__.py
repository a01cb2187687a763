"""Privacy accounting that follows the data: the owner ledger (``ledger``), the admission of a release against it (``admission``) and its summaries (``summary``)."""

from importlib import import_module

__all__ = [
    "Ledger",
    "BudgetExceeded",
    "RepublishRefused",
    "default_url",
    "Admission",
    "admit",
    "failing",
    "check_republish",
    "open_ledger",
    "ledger_summary",
]

# each public name and the module that holds it, imported on first use: a room's name costs
# only its own module (the Airflow DAG processor imports privfair.spec on every parse)
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


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
