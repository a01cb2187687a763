"""What ``privfair budget`` shows: the ledger's entries composed per dataset, unit and block.

>>> from pipelines.ledger import Entry
>>> e = Entry(1, "r1", "d", "record", "*", "p", "v", None, "synthesis", 0.01, 1.0, 1e-9,
...           '{"per": "dataset", "rho": 0.05}', "dataset", None, None, "published", None, "", "")
>>> row = ledger_summary([e])[0]
>>> row["spent_rho"], round(row["remaining"]["rho"], 6), row["statuses"]
(0.01, 0.04, {'published': 1})
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from pipelines.ledger import Entry, Ledger, _spent_rhos, compose, default_url
from schemas.errors import StoreError

__all__ = ["open_ledger", "ledger_summary"]


def open_ledger(url: str | None, store: str | None) -> Ledger | None:
    """The ledger ``privfair budget`` reads: ``url``, else ``$PRIVFAIR_LEDGER``, else the local
    store's own (None when that store has none yet: nothing is created)."""
    from pipelines.release import Store

    if url is None:
        url = os.environ.get("PRIVFAIR_LEDGER")
    if url is None:
        st = Store.open(store or "releases")
        if not st.local:
            raise StoreError(st.path(), "a remote store keeps no ledger: give --ledger URL")
        url = default_url(st.path())
        if not st.exists(".privfair", "ledger.sqlite"):
            return None
    return Ledger.open(url, "--ledger")


def ledger_summary(entries: Sequence[Entry]) -> list[dict]:
    """One row per (dataset, unit, block): the composed rho spent there (``ledger.compose``:
    each counted entry of the block and of ``*``; per dataset, each release once), its
    OpenDP epsilon at the declared budget's delta, the entries by status, the budget the
    latest entry of that dataset declared and what remains of it."""
    keys = sorted({(e.dataset, e.unit, e.block) for e in entries})
    out = []
    for dataset, unit, block in keys:
        mine = [e for e in entries if (e.dataset, e.unit) == (dataset, unit)]
        declared = next((json.loads(e.budget) for e in reversed(mine) if e.budget), None)
        per = (declared or {}).get("per") or ("dataset" if block == "*" else "partition")
        here = [e for e in mine if e.block == block]
        if per == "dataset" and block != "*":
            continue  # a dataset-wide budget is shown once, on its block '*'
        cap = (
            {k: declared[k] for k in ("rho", "epsilon", "delta") if declared.get(k) is not None}
            if declared
            else None
        )
        acc = compose(_spent_rhos(mine, block, per), cap)
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
                "budget": declared,
                "remaining": acc["remaining"],
                "statuses": statuses,
                "releases": sorted(
                    {(e.pipeline, e.version) for e in here if e.status == "published"}
                ),
            }
        )
    return out
