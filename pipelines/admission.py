"""Whether a release may run and be published, as the ledger (``pipelines.ledger``) sees it.

Two rules, each in one place:

- **Budget** (``admit``, before the algorithm runs): a differentially private release states
  its cost from its params and the input's schema (``Algorithm.privacy_cost``) and reserves it
  on every block it reads, in one transaction that checks the spec's ``budget``; a release
  over budget is refused (``BudgetExceeded``, exit 2) before any noise is drawn. Every
  release, DP or not, gets its ledger entries here (a release without a budget is charged with
  no cap, and the report says no budget is declared).
- **Re-publication** (``check_republish``, after the algorithm ran, before anything is
  written): a release of an algorithm that is not DP whose blocks an earlier *published*
  release of the same pipeline covered with different public outputs (their sha256 differ:
  another grouping of the same rows, which an intersection attack compares) is refused under
  ``republish: refuse`` (the default) and ``new_partitions``, published with a warning under
  ``allow``. Identical bytes are the same grouping (a code update that changes nothing), not a
  re-publication. Releases of the same dataset by other pipelines are listed as a warning.

The entry's status follows the release: ``reserved`` -> ``published`` | ``quarantined`` |
``failed`` (``Admission.mark``); a run killed after the charge stays ``reserved`` and counts.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from pipelines.ledger import Charge, Ledger, RepublishRefused, default_url, redact
from schemas.errors import SpecError

if TYPE_CHECKING:  # pragma: no cover
    from components.core.descriptor import Cost
    from pipelines.flow import Ingested, ReleasePlan

__all__ = ["Admission", "admit", "check_republish", "ledger_for", "dataset_key", "digest_of"]

ENV = "PRIVFAIR_LEDGER"
#: How a manifest names the store's own ledger (never by its absolute path on this machine).
STORE_LEDGER = "<store>/.privfair/ledger.sqlite"


def ledger_url(plan: ReleasePlan) -> tuple[str, str] | None:
    """(URL, the key it came from) of the plan's ledger: the spec's ``budget.ledger`` /
    ``republish.ledger``, else ``$PRIVFAIR_LEDGER``, else the local store's own SQLite file;
    None when there is none (a remote store, no URL)."""
    spec = plan.spec
    if spec.ledger_url:
        key = "budget.ledger" if spec.budget and spec.budget.ledger else "republish.ledger"
        return spec.ledger_url, key
    if os.environ.get(ENV):
        return os.environ[ENV], ENV
    if plan.store is not None and plan.store.local:
        return default_url(plan.store.path()), "the store's ledger"
    return None


def ledger_for(plan: ReleasePlan) -> Ledger | None:
    """The plan's ledger, opened (``StoreError`` naming the redacted URL when it cannot be).
    None only without any: a store that is not a local folder and no URL, which a spec with a
    ``budget`` may not have (``SpecError``)."""
    found = ledger_url(plan)
    if found is None:
        if plan.spec.budget is not None:
            raise SpecError(
                "budget.ledger",
                "a store that is not a local folder keeps no ledger: give budget.ledger or "
                f"${ENV} (sqlite:///PATH or postgresql://...)",
            )
        return None
    url, key = found
    ledger = Ledger.open(url, key)
    ledger.own = key == "the store's ledger"
    return ledger


def dataset_key(plan: ReleasePlan) -> str:
    """The name the ledger keeps the dataset's budget under: ``budget.dataset``, else the
    built-in dataset's name, else the file path as written in the spec."""
    spec = plan.spec
    if spec.budget is not None and spec.budget.dataset:
        return spec.budget.dataset
    return spec.dataset.name or str(spec.dataset.path)


def _budget(plan: ReleasePlan) -> dict | None:
    b = plan.spec.budget
    if b is None:
        return None
    out = {"rho": b.rho} if b.rho is not None else {"epsilon": b.epsilon, "delta": b.delta}
    return {**out, "per": _per(plan)}


def _per(plan: ReleasePlan) -> str:
    b = plan.spec.budget
    if b is not None and b.per is not None:
        return b.per
    return "partition" if plan.spec.partitions is not None else "dataset"


def _policy(plan: ReleasePlan) -> str:
    return plan.spec.republish.policy if plan.spec.republish is not None else "refuse"


@dataclass
class Admission:
    """A release's place in the ledger: its charge (``run_id``, first ``entry``, ``blocks``),
    the account after it, and what the re-publication check found."""

    ledger: Ledger
    charge: Charge
    dataset: str
    cost: Cost | None
    budget: dict | None
    policy: str | None
    intersects: list[dict] = field(default_factory=list)
    others: list[dict] = field(default_factory=list)
    status: str = "reserved"

    def mark(self, status: str, note: str | None = None) -> None:
        """Record how the release ended (once: the first final status stays)."""
        if self.status != "reserved":
            return
        self.ledger.mark(self.charge.run_id, status, note)
        self.status = status

    def record(self) -> dict:
        """``manifest["ledger"]``: the dataset, the blocks charged, the policy, this release's
        charge, the declared budget, and spent/remaining after it on the most-spent block."""
        acc = self.charge.account
        return {
            "dataset": self.dataset,
            "unit": "record",
            "blocks": list(self.charge.blocks),
            "policy": self.policy,
            "charge": (
                {"rho": self.cost.rho, "epsilon": self.cost.epsilon, "delta": self.cost.delta}
                if self.cost is not None
                else None
            ),
            "budget": self.budget,
            "spent": acc["spent"] if self.cost is not None else None,
            "remaining": acc["remaining"] if self.cost is not None else None,
            "entry": self.charge.entry,
            "run": self.charge.run_id,
            "ledger": STORE_LEDGER if self.ledger.own else self.ledger.url,
            "intersects": self.intersects,
            "other_pipelines": self.others,
        }

    @classmethod
    def restore(cls, plan: ReleasePlan, record: dict | None) -> Admission | None:
        """The admission a task recorded (``record()``), its ledger opened again from the spec
        (a record never holds a URL with its password)."""
        if not record:
            return None
        ledger = ledger_for(plan)
        if ledger is None:  # pragma: no cover - the task that admitted it had one
            return None
        from components.core.descriptor import Cost

        c = record.get("charge")
        acc = {"spent": record.get("spent"), "remaining": record.get("remaining")}
        return cls(
            ledger,
            Charge(record["run"], record["entry"], tuple(record["blocks"]), acc),
            record["dataset"],
            Cost(c["rho"], c["epsilon"], c["delta"]) if c else None,
            record.get("budget"),
            record.get("policy"),
            list(record.get("intersects") or []),
            list(record.get("other_pipelines") or []),
        )

    def public(self) -> dict | None:
        """What the shareable copy may say: this release's charge (a function of public
        params), never the blocks, the budget's state or other pipelines."""
        if self.cost is None:
            return None
        return {"rho": self.cost.rho, "epsilon": self.cost.epsilon, "delta": self.cost.delta}


def admit(plan: ReleasePlan, ing: Ingested, version: str) -> Admission | None:
    """Record this release in the plan's ledger before it runs; for a differentially private
    algorithm, reserve its cost against the spec's budget (``BudgetExceeded`` when any block
    it reads cannot afford it: nothing has run). None when the plan has no ledger."""
    ledger = ledger_for(plan)
    if ledger is None:
        return None
    cost = plan.algo.privacy_cost(plan.spec.params, ing.table)
    dp = cost is not None
    blocks = list(ing.input.get("blocks") or ["*"])
    budget = _budget(plan) if dp else None
    per = _per(plan) if dp else "partition"
    charge = ledger.reserve(
        dataset=dataset_key(plan),
        blocks=blocks,
        per=per,
        pipeline=plan.name,
        version=version,
        partition=plan.partition,
        family=plan.algo.family,
        cost=cost,
        budget=budget,
        policy=None if dp else _policy(plan),
    )
    return Admission(ledger, charge, dataset_key(plan), cost, budget, None if dp else _policy(plan))


def digest_of(output_bytes: dict[str, bytes]) -> str:
    """sha256 over the sha256 of each public output's file bytes, by output name."""
    files = {k: hashlib.sha256(v).hexdigest() for k, v in sorted(output_bytes.items())}
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def _overlap(a: str, blocks: set[str]) -> bool:
    return a == "*" or "*" in blocks or a in blocks


def check_republish(
    plan: ReleasePlan, adm: Admission | None, outputs: dict[str, pa.Table] | dict[str, bytes]
) -> list[str]:
    """Apply the spec's ``republish`` policy to this release's public ``outputs`` (tables, or
    their Parquet bytes as written) before any file is written; returns the warnings to add.
    ``RepublishRefused`` (the entry is marked ``refused``) names the policy, the earlier
    version(s) and the blocks. A differentially private release is not checked: its budget
    composes every release that reads a block."""
    if adm is None:
        return []
    from pipelines.flow import parquet_bytes

    data = {k: v if isinstance(v, bytes) else parquet_bytes(v) for k, v in outputs.items()}
    digest = digest_of(data)
    adm.ledger.set_digest(adm.charge.run_id, digest, adm.policy)
    mine = set(adm.charge.blocks)
    earlier = [
        e
        for e in adm.ledger.entries(dataset=adm.dataset)
        if e.status == "published" and e.run_id != adm.charge.run_id and _overlap(e.block, mine)
    ]
    warnings = []
    others = sorted({(e.pipeline, e.version) for e in earlier if e.pipeline != plan.name})
    adm.others = [{"pipeline": p, "version": v} for p, v in others]
    if others:
        warnings.append(
            "rows of this release were also released by other pipelines of dataset "
            f"'{adm.dataset}': "
            + ", ".join(f"{p} {v}" for p, v in others)
            + " (compare what each publishes: together they may reveal more than either)"
        )
    if adm.cost is not None:
        return warnings
    clash: dict[str, set[str]] = {}
    for e in earlier:
        if e.pipeline == plan.name and e.digest is not None and e.digest != digest:
            clash.setdefault(e.version, set()).add(e.block)
    if not clash:
        return warnings
    adm.intersects = [{"version": v, "blocks": sorted(b)} for v, b in sorted(clash.items())]
    where = "; ".join(f"version {v} (blocks {', '.join(sorted(b))})" for v, b in clash.items())
    if adm.policy == "allow":
        warnings.append(
            f"republish: allow: this release re-publishes rows that {where} published under "
            "another grouping; the two releases may be intersected to narrow down a person's "
            "group"
        )
        return warnings
    adm.mark("refused", f"republish: {adm.policy}")
    if adm.policy == "new_partitions":
        fresh = sorted(mine - {b for bs in clash.values() for b in bs})
        hint = (
            f"release only partitions never released before (privfair run --partition KEY; "
            f"new here: {', '.join(fresh) or 'none'})"
        )
    else:
        hint = "give the spec republish: allow (or new_partitions) to publish it anyway"
    raise RepublishRefused(
        f"republish: {adm.policy}: '{plan.name}' would re-publish rows that {where} already "
        f"published under another grouping (an intersection of the two releases narrows down "
        f"each person's group); nothing was published; {hint} (ledger {redact(adm.ledger.url)})"
    )
