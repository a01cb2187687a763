"""What ``privfair budget`` shows: the ledger's entries composed per dataset, unit and block.

>>> from privfair.budget.ledger import Entry
>>> e = Entry(1, "r1", "d", "record", "*", "p", "v", None, "synthesis", 0.01, 1.0, 1e-9,
...           '{"rho": 0.05}', "dataset", None, None, "published", None, "", "")
>>> row = ledger_summary([e])[0]
>>> row["spent_rho"], round(row["remaining"]["rho"], 6), row["statuses"]
(0.01, 0.04, {'published': 1})
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from privfair.budget.ledger import Entry, Ledger, Partitioning, account_of, default_url, spent_on

__all__ = ["open_ledger", "ledger_summary"]


def open_ledger(url: str | None, store: str | None = None) -> Ledger | None:
    """The ledger ``privfair budget`` reads: ``url``, else ``$PRIVFAIR_LEDGER``, else the data
    owner's own (``ledger.default_url``; None when it does not exist yet: nothing is
    created). ``store`` is not a ledger's place: one owner's releases through every store
    are in one ledger."""
    if url is None:
        url = os.environ.get("PRIVFAIR_LEDGER")
    if url is None:
        url = default_url()
        if not Path(url[len("sqlite:///") :]).exists():
            return None
    return Ledger.open(url, "--ledger")


def ledger_summary(entries: Sequence[Entry]) -> list[dict]:
    """One row per (dataset, unit, block): the most rho one row of that block has spent
    (``ledger.spent_on``: every counted entry of an overlapping dataset, composed over rows),
    its OpenDP epsilon at the budget's delta, the entries by status, the budget the latest
    entry of that dataset was checked against and what remains of it."""
    keys = sorted({(e.dataset, e.unit, e.block) for e in entries})
    out = []
    for dataset, unit, block in keys:
        mine = [e for e in entries if (e.dataset, e.unit) == (dataset, unit)]
        atoms = frozenset().union(*(e.atom_set for e in mine))
        related = [e for e in entries if e.atom_set & atoms]
        latest = next((e for e in reversed(mine) if e.budget), None)
        declared = json.loads(latest.budget) if latest is not None else None
        per = (latest.per if latest is not None else None) or "partition"
        here = [e for e in mine if e.block == block]
        if per == "dataset" and block != "*":
            continue  # a dataset-wide budget is shown once, on its block '*'
        cap = (
            {k: declared[k] for k in ("rho", "epsilon", "delta") if declared.get(k) is not None}
            if declared
            else None
        )
        part = next((e.cut for e in reversed(here) if e.cut is not None), None) or Partitioning()
        acc = account_of(spent_on(related, part, block, per), cap)
        statuses: dict[str, int] = {}
        for e in here:
            statuses[e.status] = statuses.get(e.status, 0) + 1
        out.append(
            {
                "dataset": dataset,
                "unit": unit,
                "block": block,
                "spent_rho": acc["spent"]["rho"],
                "spent_epsilon": acc["spent"]["epsilon"],
                "budget": {**declared, "per": per} if declared else None,
                "remaining": acc["remaining"],
                "statuses": statuses,
                "releases": sorted(
                    {(e.pipeline, e.version) for e in here if e.status == "published"}
                ),
            }
        )
    return out
