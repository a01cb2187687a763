"""Privacy accounting that follows the data: the owner ledger (``ledger``), the admission of a release against it (``admission``) and its summaries (``summary``)."""
