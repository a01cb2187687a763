"""What every component returns: the table to publish, its sidecar, its declared contract."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from schemas.contracts import contract_to_json

META_CONTRACT = b"privfair.contract"
META_COMPONENT = b"privfair.component"
META_PARAMS = b"privfair.params"


@dataclass
class ComponentResult:
    """``table``: the data to publish, roles in field metadata and the contract in schema metadata.
    ``lineage``: sidecar for the validator, one row per published row: ``row_id`` (input row
    position), ``group``, ``rank`` (position in the group), ``is_seed``. Never published as data.
    ``contract``: the guarantees the component declares. ``metrics``: before/after measures."""

    component: str
    table: pa.Table
    lineage: pa.Table
    contract: list
    params: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def dropped_row_ids(self) -> np.ndarray:
        n_in = int(self.metrics["input_rows"])
        keep = np.zeros(n_in, dtype=bool)
        keep[self.lineage.column("row_id").to_numpy()] = True
        return np.flatnonzero(~keep)


def stamp(table: pa.Table, component: str, params: dict, contract: list) -> pa.Table:
    """Write the component name, its params and its contract into the schema metadata."""
    meta = dict(table.schema.metadata or {})
    meta[META_COMPONENT] = component.encode()
    meta[META_PARAMS] = json.dumps(params, sort_keys=True).encode()
    meta[META_CONTRACT] = contract_to_json(contract).encode()
    return table.replace_schema_metadata(meta)


def lineage_table(
    row_id: np.ndarray, group: np.ndarray, rank: np.ndarray, seeds: np.ndarray
) -> pa.Table:
    return pa.table(
        {
            "row_id": pa.array(row_id, pa.int64()),
            "group": pa.array(group, pa.int64()),
            "rank": pa.array(rank, pa.int32()),
            "is_seed": pa.array(np.isin(row_id, seeds), pa.bool_()),
        }
    )
