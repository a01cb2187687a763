"""Small random inputs for the test battery: ``example(seed) -> (table, params)``.

Each table has numeric and nominal quasi-identifiers, a binary protected attribute, a binary
label and a pass-through sensitive column, so every guarantee of the family is exercised.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from privfair.components.microaggregation.params import FairMDAVParams, MDAVParams
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles

__all__ = ["table", "fair_mdav_example", "mdav_example"]

LEVELS = ("low", "medium", "high", "top")


def table(seed: int, n_rows: int | None = None) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = int(n_rows or rng.integers(24, 90))
    pa_ = rng.choice(["F", "U"], size=n, p=[0.6, 0.4])
    pa_[:4] = ["F", "F", "U", "U"]  # both groups present, whatever the draw
    y = (rng.random(n) < np.where(pa_ == "F", 0.6, 0.3)).astype(np.int8)
    y[:2] = [1, 0]
    roles = TableRoles.of(
        [
            ColumnRole("age", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
            ColumnRole("income", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
            ColumnRole("region", Role.QUASI_IDENTIFIER, Kind.NOMINAL),
            ColumnRole("level", Role.QUASI_IDENTIFIER, Kind.ORDINAL, domain=LEVELS),
            ColumnRole("group", Role.PROTECTED, Kind.BINARY, favoured="auto"),
            ColumnRole("outcome", Role.LABEL, Kind.BINARY, positive=1),
            ColumnRole("note", Role.SENSITIVE, Kind.NOMINAL),
        ]
    )
    data = pa.table(
        {
            "age": pa.array(rng.integers(18, 80, n), pa.int64()),
            "income": pa.array(np.round(rng.gamma(2.0, 20.0, n), 2)),
            "region": pa.array(
                [None if v == "-" else v for v in rng.choice(["north", "south", "east", "-"], n)]
            ),
            "level": pa.array(rng.choice(list(LEVELS), n).tolist()),
            "group": pa.array(pa_.tolist()),
            "outcome": pa.array(y, pa.int8()),
            "note": pa.array([f"n{i % 7}" for i in range(n)]),
        }
    )
    return attach_roles(data, roles)


def fair_mdav_example(seed: int) -> tuple[pa.Table, FairMDAVParams]:
    rng = np.random.default_rng(seed + 1)
    k = int(rng.integers(2, 6))
    return table(seed), FairMDAVParams(
        k=k,
        tau=float(rng.choice([0.0, 0.5, 1.0])),
        microaggregate=bool(rng.integers(0, 2)),
        correction=str(rng.choice(["positive", "negative"])),
        grouping=str(rng.choice(["fairlet", "fairlet", "mdav"])),
        publish=str(rng.choice(["schema", "onehot"])),
    )


def mdav_example(seed: int) -> tuple[pa.Table, MDAVParams]:
    rng = np.random.default_rng(seed + 2)
    return table(seed), MDAVParams(
        k=int(rng.integers(2, 6)), publish=str(rng.choice(["schema", "onehot"]))
    )
