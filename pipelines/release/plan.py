"""One release of one spec, resolved once (``ReleasePlan``), and the input it reads
(``Ingested``): every step of the flow, the ledger's admission and the faces take the plan.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from privfair.components.core import memory
from privfair.components.core.descriptor import Algorithm
from privfair.components.core.engine import Engine, make_engine, using
from privfair.components.core.registry import family_of
from privfair.io.ingest import load_dataset, private_columns, source_versions
from privfair.release.store import Store
from privfair.release.version import code_version
from privfair.schemas import contracts as C
from privfair.schemas.errors import InputError, SpecError, StoreError
from privfair.schemas.roles import read_roles
from privfair.schemas.spec import PipelineSpec
from privfair.spec.catalogue import algorithm_of
from privfair.spec.partitions import check_key

__all__ = ["Ingested", "ReleasePlan", "role_guarantees"]


@dataclass
class Ingested:
    table: pa.Table
    input: dict[str, Any]


@dataclass(frozen=True)
class ReleasePlan:
    """One release of one spec, resolved once: the spec, its algorithm's descriptor, the
    family package that versions it, the store (None where only the algorithm is run), the
    raw-data folder, the partition released (None: every row of the input) and, for a spec
    whose input is in memory (``dataset.source.kind: memory``), the table handed over by the
    Python API. Every step of the flow takes the plan; none resolves the spec again."""

    spec: PipelineSpec
    algo: Algorithm
    package: str
    store: Store | None = None
    data_dir: str | Path | None = None
    partition: str | None = None
    table: pa.Table | None = field(default=None, compare=False, repr=False)
    # the required contract of each input table the plan was asked about: computed once
    _required: dict[int, tuple[pa.Table, list, int]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    @classmethod
    def of(
        cls,
        spec: PipelineSpec,
        store: Store | str | Path | None = None,
        data_dir: str | Path | None = None,
        partition: str | None = None,
        table: pa.Table | None = None,
    ) -> ReleasePlan:
        """The plan of ``spec``: its algorithm resolved (``SpecError`` for an unknown one), the
        partition key checked against the spec's partitions (``SpecError`` naming
        ``--partition``) and its store opened and checked (``StoreError``) before anything is
        read."""
        algo = algorithm_of(spec)
        if partition is not None:
            check_key(spec.partitions, partition)
        if store is not None and not isinstance(store, Store):
            store = Store.open(store)
        if store is not None:
            store.check_pipeline(spec.name)
        return cls(spec, algo, family_of(algo).package, store, data_dir, partition, table)

    @property
    def name(self) -> str:
        return self.spec.name

    def ingest(self) -> Ingested:
        """The spec's input table (roles attached, generic rules checked) and its input record;
        a built-in dataset takes the role presets of the algorithm's family; a relative file
        path is resolved against the spec file's folder, then ``data_dir``. A large table is
        held memory-mapped (``memory.mapped``): every phase reads it, none needs it in the
        process's own memory."""
        presets = family_of(self.algo).dataset_roles
        table, info = load_dataset(
            self.spec.dataset,
            self.data_dir,
            presets,
            base_dir=self.spec.spec_dir,
            partitions=self.spec.partitions,
            partition=self.partition,
            table=self.table,
            empty_partition=self.algo.cost is not None,  # a DP release exists for every key
        )
        held = memory.mapped(table)
        rows, table = table.num_rows, None
        memory.release(rows)  # the decoded copy goes back to the system before protection
        return Ingested(held, info)

    def observe(self) -> tuple[str, dict[str, str]]:
        """The source's fingerprint now and each partition's (``ingest.source_versions``), read
        as ``ingest`` reads it: what a release of the whole input, or of each partition, would
        record as its input fingerprint."""
        return source_versions(
            self.spec.dataset,
            self.data_dir,
            family_of(self.algo).dataset_roles,
            base_dir=self.spec.spec_dir,
            partitions=self.spec.partitions,
        )

    def version(self, input_fingerprint: str) -> str:
        """Deterministic release version: input fingerprint + spec + the code version of the
        shared core and the algorithm's family, + the partition key for a partition's release
        (owner-side: the shareable copy shows ``share.public_id`` of it instead)."""
        key = [input_fingerprint, self.spec.fingerprint(), code_version(self.package)]
        if self.partition is not None:
            key.append(self.partition)
        h = hashlib.sha256(json.dumps(key).encode())
        return h.hexdigest()[:16]

    def demands(self, input_table: pa.Table, owed: list) -> list:
        """The spec's demanded guarantees for this input: each column they name must exist
        (in the input, or among the quasi-identifiers the algorithm publishes), and a
        k-anonymity demand without quasi-identifiers applies to the ones the algorithm's own
        k-anonymity names (else the input's)."""
        published_qis: tuple[str, ...] = ()
        for g in owed:
            if isinstance(g, C.KAnonymity) and g.quasi_identifiers:
                published_qis = g.quasi_identifiers
                break
        known = set(input_table.column_names) | set(published_qis)
        roles = read_roles(input_table)
        out = []
        for i, g in enumerate(self.spec.demands):
            if g.row_level and not self.algo.row_level:
                raise SpecError(
                    f"guarantees.{i}.kind",
                    f"{g.kind} is checked on the input rows a release keeps; {self.algo.name} "
                    "publishes new rows, not the input's",
                )
            try:
                g = g.completed(input_table)
            except (C.GuaranteeError, InputError) as e:
                raise SpecError(f"guarantees.{i}", str(e)) from None
            for f in g.column_fields:
                value = getattr(g, f)
                for name in (value,) if isinstance(value, str) else value:
                    if name not in known:
                        raise SpecError(
                            f"guarantees.{i}.{f}",
                            f"no column '{name}' in the input of '{self.spec.name}'",
                        )
            if isinstance(g, C.KAnonymity) and not g.quasi_identifiers:
                qis = published_qis or tuple(roles.quasi_identifiers)
                g = g.model_copy(update={"quasi_identifiers": qis})
            if not getattr(self.spec.demands[i], "background", True) and published_qis:
                g = published_background(g, roles, published_qis)
            out.append(g)
        return out

    def required(self, input_table: pa.Table) -> list:
        """What a release on ``input_table`` must guarantee: the algorithm's contract for the
        spec's params on this input, then the spec's demands, then what the roles demand.
        Computed from the spec and the input only, never from what a release says about
        itself; once per input table of the plan (every step asks again)."""
        return list(self._contract(input_table)[0])

    def demanded(self, input_table: pa.Table) -> list:
        """The part of ``required`` beyond the algorithm's own contract: the spec's demands
        and what the roles demand (appended to the contract a result declares)."""
        out, own = self._contract(input_table)
        return list(out[own:])

    def _contract(self, input_table: pa.Table) -> tuple[list, int]:
        hit = self._required.get(id(input_table))
        if hit is not None and hit[0] is input_table:
            return hit[1], hit[2]
        owed = self.algo.required_contract(self.spec.params, input_table)
        out = owed + self.demands(input_table, owed) + role_guarantees(input_table)
        self._required[id(input_table)] = (input_table, out, len(owed))
        return out, len(owed)

    def engine(self) -> Engine:
        """The engine the spec's ``execution`` names (``privfair.components.core.engine.make_engine``)."""
        ex = self.spec.execution
        return make_engine(ex.engine, ex.master, ex.workers, ex.conf, ex.scratch)

    @contextlib.contextmanager
    def running(self) -> Iterator[Engine]:
        """The spec's engine, current for the whole block and closed after it: protection,
        validation in parts and the cost of protection's re-run all go to the engine the spec
        names (one Spark session or process pool per run), not only the grouping."""
        engine = self.engine()
        try:
            with using(engine):
                yield engine
        finally:
            engine.close()

    def open_store(self) -> Store:
        if self.store is None:
            raise StoreError("", "this step needs a release store")
        return self.store


def published_background(g: C.Guarantee, roles, published_qis: tuple[str, ...]) -> C.Guarantee:
    """A risk or l-diversity demand whose background was completed from the input's roles, over
    the quasi-identifiers the algorithm publishes instead (a nominal QI published one-hot,
    ``region=north``...), the rest of the background (protected, known columns) kept.

    >>> from privfair.schemas.roles import ColumnRole, Role, TableRoles
    >>> roles = TableRoles.of([ColumnRole("region", Role.QUASI_IDENTIFIER)])
    >>> g = C.ReidentificationRisk(model="prosecutor", max=0.2, background=("region", "sex"))
    >>> published_background(g, roles, ("region=n", "region=s")).background
    ('region=n', 'region=s', 'sex')
    """
    qis = set(roles.quasi_identifiers)
    column = getattr(g, "column", None)
    rest = tuple(c for c in g.background if c not in qis and c not in published_qis)
    background = tuple(c for c in published_qis if c != column) + rest
    return g.model_copy(update={"background": background})


def role_guarantees(input_table: pa.Table) -> list:
    """What every release owes the input's roles whatever the algorithm: its ``private``
    columns (refused or dropped at ingest) are in no public output."""
    private = private_columns(input_table)
    return [C.ColumnsAbsent(id="roles.private", columns=tuple(private))] if private else []
