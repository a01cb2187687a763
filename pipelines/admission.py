"""Whether a release may run and be published, as the ledger (``pipelines.ledger``) sees it.

Two rules, each in one place:

- **Budget** (``admit``, before the algorithm runs): a differentially private release states
  its cost from its params and the input's schema (``Algorithm.privacy_cost``) and reserves it
  on every block it reads, in one transaction that checks the spec's ``budget``; a release
  over budget is refused (``BudgetExceeded``, exit 2) before any noise is drawn (a DP release
  without a budget is charged with no cap, and the report says no budget is declared). A
  release that is not DP spends nothing: it is recorded once its validation passed, just
  before its manifest is written (``Admission.enter``), so a run that fails earlier leaves
  no ledger behind.
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

from pipelines.ledger import Charge, Ledger, RepublishRefused, default_url, expand, redact
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


def ledger_for(plan: ReleasePlan, create: bool = True) -> Ledger | None:
    """The plan's ledger, opened (``StoreError`` naming the redacted URL when it cannot be).
    None without any: a store that is not a local folder and no URL, which a spec with a
    ``budget`` may not have (``SpecError``); with ``create=False``, also when the store's own
    ledger does not exist yet (nothing is created)."""
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
    if (
        not create
        and key == "the store's ledger"
        and not plan.open_store().exists(".privfair", "ledger.sqlite")
    ):
        return None
    ledger = Ledger.open(url, key)
    ledger.own = key == "the store's ledger"
    return ledger


def dataset_key(plan: ReleasePlan) -> str:
    """The name the ledger keeps the dataset's budget under: ``budget.dataset``, else the
    built-in dataset's name, else the file path as written in the spec, else the source's
    table (``source_key``); ``memory`` for a
    table given in memory (nothing says which data it holds, so every such release composes
    with the others unless ``budget.dataset`` names its dataset)."""
    spec = plan.spec
    if spec.budget is not None and spec.budget.dataset:
        return spec.budget.dataset
    src = spec.dataset.source
    if src is not None and src.kind == "memory":
        return "memory"
    if src is not None:
        return source_key(src)
    return spec.dataset.name or str(spec.dataset.path)


def source_key(src) -> str:
    """A database or lakehouse source's ledger name: its kind and table (a query by its hash,
    a Delta table or file by its URL without credentials, or its connection's name). Two
    databases with a table of the same name share it: the safe direction for a budget.

    >>> from schemas.spec import SourceSpec
    >>> source_key(SourceSpec(kind="sql", url="postgresql://u:${PW}@db/raw", table="people"))
    'sql:people'
    >>> source_key(SourceSpec(kind="delta", url="s3://b/raw/people", version=3))
    'delta:s3://b/raw/people'
    """
    import hashlib

    from pipelines.connectors import redact

    if src.table is not None:
        return f"{src.kind}:{src.table}"
    if src.query is not None:
        return f"{src.kind}:query:{hashlib.sha256(src.query.encode()).hexdigest()[:12]}"
    if src.url is not None:
        return f"{src.kind}:{redact(src.url)}"
    return f"{src.kind}:conn:{src.conn_id}"


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
    """A release's place in the ledger: its entries (``charge``: run id, first entry, blocks,
    the account after it; None until a release that is not DP is entered), and what the
    re-publication check found (``digest`` of its outputs, the earlier releases it
    ``intersects``, ``others``: other pipelines' releases of the same rows)."""

    plan: ReleasePlan
    version: str
    charge: Charge | None
    dataset: str
    blocks: tuple[str, ...]
    cost: Cost | None
    budget: dict | None
    policy: str | None
    ledger: Ledger | None = None
    where: str = STORE_LEDGER  # how manifests name the ledger: never a password, nor a local path
    digest: str | None = None
    intersects: list[dict] = field(default_factory=list)
    others: list[dict] = field(default_factory=list)
    status: str = "reserved"

    def open(self) -> Ledger:
        if self.ledger is None:
            self.ledger = ledger_for(self.plan)
            assert self.ledger is not None  # admit found one
        return self.ledger

    def enter(self) -> None:
        """Record a release that is not DP (no charge, its policy and output digest), once its
        validation passed; a DP release was recorded by ``admit``."""
        if self.charge is not None:
            return
        self.charge = self.open().reserve(
            dataset=self.dataset,
            blocks=self.blocks,
            per="partition",
            pipeline=self.plan.name,
            version=self.version,
            partition=self.plan.partition,
            family=self.plan.algo.family,
            cost=None,
            budget=None,
            policy=self.policy,
            digest=self.digest,
        )

    def mark(self, status: str, note: str | None = None) -> None:
        """Record how the release ended (once: the first final status stays); nothing for a
        release that was never entered."""
        if self.status != "reserved" or self.charge is None:
            return
        self.open().mark(self.charge.run_id, status, note)
        self.status = status

    def record(self) -> dict:
        """``manifest["ledger"]``: the dataset, the blocks charged, the policy, this release's
        charge, the declared budget, and spent/remaining after it on the most-spent block."""
        acc = self.charge.account if self.charge is not None else {}
        return {
            "dataset": self.dataset,
            "unit": "record",
            "blocks": list(self.charge.blocks if self.charge is not None else self.blocks),
            "policy": self.policy,
            "charge": (
                {"rho": self.cost.rho, "epsilon": self.cost.epsilon, "delta": self.cost.delta}
                if self.cost is not None
                else None
            ),
            "budget": self.budget,
            "spent": acc.get("spent") if self.cost is not None else None,
            "remaining": acc.get("remaining") if self.cost is not None else None,
            "entry": self.charge.entry if self.charge is not None else None,
            "run": self.charge.run_id if self.charge is not None else None,
            "ledger": self.where,
            "digest": self.digest,
            "version": self.version,
            "intersects": self.intersects,
            "other_pipelines": self.others,
        }

    @classmethod
    def restore(cls, plan: ReleasePlan, record: dict | None) -> Admission | None:
        """The admission a task recorded (``record()``), its ledger opened again from the spec
        (a record never holds a URL with its password)."""
        if not record:
            return None
        from components.core.descriptor import Cost

        c = record.get("charge")
        acc = {"spent": record.get("spent"), "remaining": record.get("remaining")}
        run = record.get("run")
        return cls(
            plan,
            record["version"],
            Charge(run, record["entry"], tuple(record["blocks"]), acc) if run else None,
            record["dataset"],
            tuple(record["blocks"]),
            Cost(c["rho"], c["epsilon"], c["delta"]) if c else None,
            record.get("budget"),
            record.get("policy"),
            where=record.get("ledger") or STORE_LEDGER,
            digest=record.get("digest"),
            intersects=list(record.get("intersects") or []),
            others=list(record.get("other_pipelines") or []),
        )

    def public(self) -> dict | None:
        """What the shareable copy may say: this release's charge (a function of public
        params), never the blocks, the budget's state or other pipelines."""
        if self.cost is None:
            return None
        return {"rho": self.cost.rho, "epsilon": self.cost.epsilon, "delta": self.cost.delta}


def admit(plan: ReleasePlan, ing: Ingested, version: str) -> Admission | None:
    """For a differentially private algorithm, reserve its cost in the plan's ledger against
    the spec's budget before it runs (``BudgetExceeded`` when any block it reads cannot afford
    it: nothing has run). A release that is not DP is only prepared here (``Admission.enter``
    records it once validated). None when the plan has no ledger."""
    cost = plan.algo.privacy_cost(plan.spec.params, ing.table)
    dp = cost is not None
    ledger = ledger_for(plan, create=dp)
    if ledger is None and (dp or ledger_url(plan) is None):
        return None
    blocks = tuple(ing.input.get("blocks") or ["*"])
    url, key = ledger_url(plan)  # type: ignore[misc] - not None: a ledger or its URL exists
    where = STORE_LEDGER if key == "the store's ledger" else redact(expand(url, key))
    if not dp:
        return Admission(
            plan, version, None, dataset_key(plan), blocks, None, None, _policy(plan), ledger, where
        )
    budget = _budget(plan)
    charge = ledger.reserve(
        dataset=dataset_key(plan),
        blocks=blocks,
        per=_per(plan),
        pipeline=plan.name,
        version=version,
        partition=plan.partition,
        family=plan.algo.family,
        cost=cost,
        budget=budget,
        policy=None,
    )
    return Admission(
        plan, version, charge, dataset_key(plan), charge.blocks, cost, budget, None, ledger, where
    )


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
    digest = adm.digest = digest_of(data)
    if adm.ledger is None:  # the store's ledger does not exist yet: nothing was released
        adm.ledger = ledger_for(plan, create=False)
        if adm.ledger is None:
            return []
    mine = set(adm.blocks)
    earlier = [
        e
        for e in adm.ledger.entries(dataset=adm.dataset)
        if e.status == "published" and _overlap(e.block, mine)
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
    adm.enter()  # the refused attempt is on record too (it counts nothing)
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
