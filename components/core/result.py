"""What every algorithm returns: named public outputs, internal sidecars, its contract."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from privfair.schemas.contracts import Guarantee, contract_to_json

__all__ = [
    "ComponentResult",
    "stamp",
    "META_CONTRACT",
    "META_COMPONENT",
    "META_PARAMS",
    "GROUPS_META",
]

META_CONTRACT = b"privfair.contract"
META_COMPONENT = b"privfair.component"
META_PARAMS = b"privfair.params"

#: field metadata of a protected column published as its groups (``"protected"`` /
#: ``"unprotected"``) rather than its values, as a generalised release publishes it
#: (``privfair.components.generalisation.publish.group_field``): JSON of the values the column
#: may hold and the declaration the groups come from. The release code reads it to know such a
#: column without importing the family.
GROUPS_META = b"privfair.pd_groups"


@dataclass
class ComponentResult:
    """One run of an algorithm.

    ``outputs``: the public tables by name (roles in field metadata); ``sidecars``: internal
    tables the validator needs (lineage, ledgers, audit cells), never published for
    distribution; ``contract``: the guarantees the run declares; ``metrics``: before/after
    measures (the algorithm's own account, shown to people, never used to validate).
    """

    component: str
    outputs: dict[str, pa.Table]
    sidecars: dict[str, pa.Table]
    contract: list[Guarantee]
    params: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    execution: dict[str, Any] = field(default_factory=dict)  # where it ran (engine, workers)

    @property
    def table(self) -> pa.Table:
        """The first (for most algorithms the only) public output."""
        return next(iter(self.outputs.values()))

    def stamped(self) -> ComponentResult:
        """The same result with component, params and contract in every output's metadata."""
        self.outputs = {
            k: stamp(t, self.component, self.params, self.contract) for k, t in self.outputs.items()
        }
        return self


def stamp(table: pa.Table, component: str, params: dict, contract: list) -> pa.Table:
    """Write the component name, its params and its contract into the schema metadata."""
    meta = dict(table.schema.metadata or {})
    meta[META_COMPONENT] = component.encode()
    meta[META_PARAMS] = json.dumps(params, sort_keys=True).encode()
    meta[META_CONTRACT] = contract_to_json(contract).encode()
    return table.replace_schema_metadata(meta)
