"""Whether a release may run and be published, as the ledger (``privfair.budget.ledger``) sees it.

Every rule reads the dataset's identity (``privfair.io.identity``), never its name: a release
through another spelling of the path, another store, the Python API or another pipeline is a
release of the same people.

- **Budget** (``admit``, before the algorithm runs): a differentially private release states
  its cost from its params and the input's schema (``Algorithm.privacy_cost``) and reserves it
  on every block it reads, in one transaction that checks the dataset's recorded cap
  (``Ledger.reserve``); a release over budget is refused (``BudgetExceeded``, exit 2) before
  any noise is drawn. A release that is not DP spends nothing: it is recorded once its
  validation passed, just before its manifest is written (``Admission.enter``).
- **Re-publication** (``check_republish``, after the algorithm ran, before anything is
  written): a release that is not DP whose rows an earlier release of an overlapping dataset
  published (or is publishing: ``reserved``) under another grouping (its published values
  differ: ``grouping_of``) is refused under ``republish: refuse`` (the default) and
  ``new_partitions``, published with a warning under ``allow``. The same values are the same
  grouping, whatever the pipeline, demands or metadata.
- **No identity, no release**: a frame in memory whose spec names no dataset cannot be
  accounted for; a DP release of it, or one under ``refuse``, is refused (``SpecError``).

The entry's status follows the release: ``reserved`` -> ``published`` | ``quarantined`` |
``failed`` | ``released`` (``Admission.mark``: a run that failed before its mechanism read a
record gives the charge back); a run killed after the charge stays ``reserved`` and counts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from privfair.budget.ledger import (
    Charge,
    Ledger,
    Partitioning,
    RepublishRefused,
    default_url,
    expand,
    redact,
)
from privfair.components.core import noise
from privfair.io.identity import Identity, identity_of
from privfair.schemas.errors import SpecError, StoreError

if TYPE_CHECKING:  # pragma: no cover
    from privfair.components.core.descriptor import Cost
    from privfair.release.plan import Ingested, ReleasePlan

__all__ = [
    "Admission",
    "admit",
    "failing",
    "check_republish",
    "ledger_for",
    "dataset_identity",
    "grouping_of",
]

ENV = "PRIVFAIR_LEDGER"
#: How a manifest names the owner's default ledger (never by its absolute path on this machine).
OWNER_LEDGER = "<owner>/privfair/ledger.sqlite"
DEFAULT_KEY = "the data owner's ledger"


def ledger_url(plan: ReleasePlan) -> tuple[str, str]:
    """(URL, the key it came from) of the plan's ledger: the spec's ``budget.ledger`` /
    ``republish.ledger``, else ``$PRIVFAIR_LEDGER``, else the data owner's own
    (``ledger.default_url``), whatever the store."""
    spec = plan.spec
    if spec.ledger_url:
        key = "budget.ledger" if spec.budget and spec.budget.ledger else "republish.ledger"
        return spec.ledger_url, key
    if os.environ.get(ENV):
        return os.environ[ENV], ENV
    return default_url(), DEFAULT_KEY


def ledger_for(plan: ReleasePlan, create: bool = True) -> Ledger | None:
    """The plan's ledger, opened (``StoreError`` naming the redacted URL and the setting when
    it cannot be: a release never goes unrecorded). With ``create=False``, None when the
    owner's default ledger does not exist yet (nothing is created)."""
    url, key = ledger_url(plan)
    if not create and key == DEFAULT_KEY and not Path(url[len("sqlite:///") :]).exists():
        return None
    try:
        ledger = Ledger.open(url, key)
    except StoreError as e:
        raise StoreError(e.path, f"{e.rule} (the ledger set by {key})") from None
    ledger.own = key == DEFAULT_KEY
    return ledger


def dataset_identity(plan: ReleasePlan, ing: Ingested | None = None) -> Identity:
    """The identity of the data the plan reads (``privfair.io.identity.identity_of``), with
    what its read told (``ing``) and the spec's ``budget.dataset`` as an alias."""
    spec = plan.spec
    return identity_of(
        spec.dataset,
        base_dir=spec.spec_dir,
        data_dir=plan.data_dir,
        input_record=ing.input if ing is not None else None,
        alias=spec.budget.dataset if spec.budget is not None else None,
    )


def _budget(plan: ReleasePlan) -> dict | None:
    b = plan.spec.budget
    if b is None:
        return None
    return {"rho": b.rho} if b.rho is not None else {"epsilon": b.epsilon, "delta": b.delta}


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
    the account after it; None until a release that is not DP is entered), the dataset's
    ``atoms`` and ``partitioning``, and what the re-publication check found (``digest``: the
    grouping of its published values, the earlier releases it ``intersects``)."""

    plan: ReleasePlan
    version: str
    charge: Charge | None
    dataset: str
    blocks: tuple[str, ...]
    cost: Cost | None
    budget: dict | None
    policy: str | None
    ledger: Ledger | None = None
    where: str = OWNER_LEDGER  # how manifests name the ledger: never a password, nor a local path
    digest: str | None = None
    intersects: list[dict] = field(default_factory=list)
    others: list[dict] = field(default_factory=list)
    status: str = "reserved"
    atoms: tuple[str, ...] = ()
    partitioning: Partitioning = field(default_factory=Partitioning)
    opened: int = -1  # noise.count() when the charge was reserved (-1: not known)

    def open(self) -> Ledger:
        if self.ledger is None:
            self.ledger = ledger_for(self.plan)
            assert self.ledger is not None
        return self.ledger

    def enter(self) -> None:
        """Record a release that is not DP (no charge, its policy and grouping), once its
        validation passed; a DP release was recorded by ``admit``."""
        if self.charge is not None:
            return
        self.charge = self.open().reserve(
            dataset=self.dataset,
            atoms=self.atoms,
            partitioning=self.partitioning,
            blocks=self.blocks,
            pipeline=self.plan.name,
            version=self.version,
            partition=self.plan.partition,
            family=self.plan.algo.family,
            cost=None,
            budget=None,
            per="partition",
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

    def failed(self) -> None:
        """The run failed: a DP release whose mechanism never read a record (``noise``)
        gives its charge back (``released``); any other keeps it (``failed``: noise may have
        been drawn)."""
        if self.cost is not None and self.opened >= 0 and noise.count() == self.opened:
            self.mark(
                "released",
                "the run failed before the mechanism read any record: "
                "no noise was drawn, the charge is given back",
            )
        else:
            self.mark(
                "failed",
                "the run failed after its charge: noise may have been drawn, the charge stays"
                if self.cost is not None
                else None,
            )

    def record(self, atoms: bool = False) -> dict:
        """``manifest["ledger"]``: the dataset, the blocks charged, the policy, this release's
        charge, the declared budget, and spent/remaining after it on the most-spent block.
        ``atoms``: also the dataset's identity, for the orchestrators' next task (the atoms
        name local paths and hosts: a manifest never holds them)."""
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
            "partitioning": self.partitioning.dumps(),
            **({"atoms": list(self.atoms)} if atoms else {}),
        }

    @classmethod
    def restore(cls, plan: ReleasePlan, record: dict | None) -> Admission | None:
        """The admission a task recorded (``record()``), its ledger opened again from the spec
        (a record never holds a URL with its password)."""
        if not record:
            return None
        from privfair.components.core.descriptor import Cost

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
            where=record.get("ledger") or OWNER_LEDGER,
            digest=record.get("digest"),
            intersects=list(record.get("intersects") or []),
            others=list(record.get("other_pipelines") or []),
            atoms=tuple(record.get("atoms") or ()),
            partitioning=Partitioning.parse(record.get("partitioning")) or Partitioning(),
        )

    def public(self) -> dict | None:
        """What the shareable copy may say: this release's charge (a function of public
        params), never the blocks, the budget's state or other pipelines."""
        if self.cost is None:
            return None
        return {"rho": self.cost.rho, "epsilon": self.cost.epsilon, "delta": self.cost.delta}


@contextlib.contextmanager
def failing(adm: Admission | None) -> Iterator[None]:
    """A block whose failure is the release's: on any error its ledger entry is marked
    (``Admission.failed``: the charge is given back only when no noise was drawn) and the
    error goes on. The one guard of every step that runs after a charge."""
    try:
        yield
    except BaseException:
        if adm is not None:
            adm.failed()
        raise


def _unnamed(plan: ReleasePlan, dp: bool) -> SpecError:
    what = "a differentially private release" if dp else "a release under republish: refuse"
    return SpecError(
        "dataset.source.dataset",
        f"'{plan.name}' reads a table in memory that names no dataset, so the ledger cannot "
        f"tell which people it holds, and {what} of it cannot be accounted for; name the "
        "private dataset it holds: source: {kind: memory, dataset: NAME} "
        "(privfair.api.spec(..., dataset_name=NAME)), or budget.dataset: NAME, or load the "
        "spec from its YAML file (api.load_spec), whose dataset it is",
    )


def admit(plan: ReleasePlan, ing: Ingested, version: str) -> Admission:
    """For a differentially private algorithm, reserve its cost in the plan's ledger against
    the dataset's cap before it runs (``BudgetExceeded`` when any block it reads cannot
    afford it: nothing has run). A release that is not DP is only prepared here
    (``Admission.enter`` records it once validated)."""
    cost = plan.algo.privacy_cost(plan.spec.params, ing.table)
    dp = cost is not None
    ident = dataset_identity(plan, ing)
    policy = _policy(plan)
    if ident.anonymous and (dp or policy != "allow"):
        raise _unnamed(plan, dp)
    part = plan.spec.partitions
    if dp and part is not None and part.keys == "dynamic":
        raise SpecError(
            "partitions.keys",
            "dynamic keys are values read off the private data (a key exists because someone "
            "has it): a differentially private spec lists its keys or cuts on time",
        )
    atoms = (f"memory:anonymous:{ing.input['fingerprint']}",) if ident.anonymous else ident.atoms
    partitioning = Partitioning.of(part)
    ledger = ledger_for(plan, create=dp)
    url, key = ledger_url(plan)
    where = OWNER_LEDGER if key == DEFAULT_KEY else redact(expand(url, key))
    blocks = tuple(ing.input.get("blocks") or ["*"])
    common = dict(ledger=ledger, where=where, atoms=atoms, partitioning=partitioning)
    if not dp:
        return Admission(plan, version, None, ident.name, blocks, None, None, policy, **common)
    opened = noise.count()
    charge = ledger.reserve(
        dataset=ident.name,
        atoms=atoms,
        partitioning=partitioning,
        blocks=blocks,
        pipeline=plan.name,
        version=version,
        partition=plan.partition,
        family=plan.algo.family,
        cost=cost,
        budget=_budget(plan),
        per=_per(plan) if plan.spec.budget is not None else None,
        policy=None,
    )
    cap = charge.account.get("budget")
    budget = {**cap, "per": charge.account["per"]} if cap else None
    return Admission(
        plan,
        version,
        charge,
        ident.name,
        charge.blocks,
        cost,
        budget,
        None,
        opened=opened,
        **common,
    )


def grouping_of(outputs: dict[str, pa.Table]) -> str:
    """The grouping a release publishes: sha256 over each public output's values (its
    columns' names, types and contents, without the schema's metadata, which carries the
    contract and the demands). Two releases of the same values are one grouping whatever
    their demands or metadata; any changed value is another grouping.

    >>> t = pa.table({"a": [1, 2]})
    >>> grouping_of({"data": t}) == grouping_of({"data": t.replace_schema_metadata({"x": "y"})})
    True
    """
    from privfair.io.files import table_fingerprint

    plain = {}
    for name, table in sorted(outputs.items()):
        schema = pa.schema([pa.field(f.name, f.type, f.nullable) for f in table.schema])
        plain[name] = table_fingerprint(table.cast(schema).replace_schema_metadata(None))
    return hashlib.sha256(json.dumps(plain, sort_keys=True).encode()).hexdigest()


#: Statuses of a release that is not DP whose rows may be out: published, or still running or
#: killed before it said how it ended (its files may be written, its audit branch readable).
OUT = ("published", "reserved")


def check_republish(
    plan: ReleasePlan, adm: Admission | None, outputs: dict[str, pa.Table] | dict[str, bytes]
) -> list[str]:
    """Apply the spec's ``republish`` policy to this release's public ``outputs`` (tables, or
    their Parquet bytes as written) before any file is written; returns the warnings to add.
    ``RepublishRefused`` (the entry is marked ``refused``) names the policy, the earlier
    version(s) and the blocks. A differentially private release is not checked: its budget
    composes every release that reads a block."""
    if adm is None or adm.cost is not None:
        return []
    import pyarrow.parquet as pq

    tables = {
        k: pq.read_table(pa.BufferReader(v)) if isinstance(v, bytes) else v
        for k, v in outputs.items()
    }
    digest = adm.digest = grouping_of(tables)
    if adm.ledger is None:  # the owner's ledger does not exist yet: nothing was released
        adm.ledger = ledger_for(plan, create=False)
        if adm.ledger is None:
            return []
    mine = adm.partitioning
    earlier = [
        e
        for e in adm.ledger.entries(atoms=adm.atoms)
        if e.rho is None
        and e.status in OUT
        and any(mine.shares_rows(b, e.cut, e.block) for b in adm.blocks)
    ]
    adm.others = [
        {"pipeline": p, "version": v}
        for p, v in sorted({(e.pipeline, e.version) for e in earlier if e.pipeline != plan.name})
    ]
    clash: dict[tuple[str, str], set[str]] = {}
    for e in earlier:
        if e.digest != digest:
            clash.setdefault((e.pipeline, e.version), set()).add(e.block)
    if not clash:
        return []
    adm.intersects = [
        {"pipeline": p, "version": v, "blocks": sorted(b)} for (p, v), b in sorted(clash.items())
    ]
    where = "; ".join(
        f"{p} {v} (blocks {', '.join(sorted(b))})" for (p, v), b in sorted(clash.items())
    )
    if adm.policy == "allow":
        return [
            f"republish: allow: this release re-publishes rows of dataset '{adm.dataset}' that "
            f"{where} published under another grouping; the two releases may be intersected "
            "or differenced: a person in one and not the other has their published values given "
            "away exactly"
        ]
    adm.enter()  # the refused attempt is on record too (it counts nothing)
    adm.mark("refused", f"republish: {adm.policy}")
    if adm.policy == "new_partitions":
        taken = {b for bs in clash.values() for b in bs}
        fresh = sorted(b for b in adm.blocks if b not in taken)
        hint = (
            f"release only partitions never released before (privfair run --partition KEY; "
            f"new here: {', '.join(fresh) or 'none'})"
        )
    else:
        hint = "give the spec republish: allow (or new_partitions) to publish it anyway"
    raise RepublishRefused(
        f"republish: {adm.policy}: '{plan.name}' would re-publish rows of dataset "
        f"'{adm.dataset}' that {where} already published under another grouping (two "
        "releases of overlapping rows can be intersected or differenced: a person added or "
        f"removed between them has their values given away); nothing was published; {hint} "
        f"(ledger {adm.where})"
    )
