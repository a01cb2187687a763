"""Inputs for tests, docs and the test battery.

- ``golden_cells``: the paper's worked example (Section 8, spec 4.1): six cells of gender
  (public) x income bracket (private), populations 12, 5, 3, 9, 7, 4, true rule from Table 1;
- ``records(seed)``: random decision records (two public attributes, one private attribute,
  a binary decision); ``atr_example``: such records, or their cells, with random parameters
  (every fifth seed from 2 on announcing a randomised mapping).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from privfair.components.transparency.params import ATRParams
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles

__all__ = ["golden_cells", "records", "atr_example", "INCOME"]

INCOME = ("<100k", "100k-200k", ">200k")


def golden_cells() -> pa.Table:
    roles = TableRoles.of(
        [
            ColumnRole("gender", Role.PUBLIC, Kind.NOMINAL),
            ColumnRole("income_bracket", Role.SENSITIVE, Kind.ORDINAL, domain=INCOME),
            ColumnRole("d1", Role.LABEL, Kind.NUMERIC, positive=1),
            ColumnRole("population", Role.ADMISSIBLE, Kind.NUMERIC),
        ]
    )
    data = pa.table(
        {
            "gender": ["F", "F", "F", "M", "M", "M"],
            "income_bracket": list(INCOME) * 2,
            "d1": [0.0, 0.0, 1.0, 0.0, 0.5, 1.0],
            "population": [12.0, 5.0, 3.0, 9.0, 7.0, 4.0],
        }
    )
    return attach_roles(data, roles)


def records(seed: int, n_rows: int | None = None) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = int(n_rows or rng.integers(40, 200))
    gender = rng.choice(["F", "M"], n)
    region = rng.choice(["north", "south", "east"], n, p=[0.5, 0.3, 0.2])
    income = rng.choice(list(INCOME), n, p=[0.5, 0.3, 0.2])
    score = (income == ">200k") * 0.6 + (gender == "M") * 0.2 + rng.random(n) * 0.4
    decision = (score > 0.5).astype(np.int8)
    roles = TableRoles.of(
        [
            ColumnRole("gender", Role.PUBLIC, Kind.NOMINAL),
            ColumnRole("region", Role.PUBLIC, Kind.NOMINAL),
            ColumnRole("income", Role.SENSITIVE, Kind.ORDINAL, domain=INCOME),
            ColumnRole("approved", Role.LABEL, Kind.BINARY, positive=1),
        ]
    )
    data = pa.table(
        {
            "gender": gender.tolist(),
            "region": region.tolist(),
            "income": income.tolist(),
            "approved": pa.array(decision, pa.int8()),
        }
    )
    return attach_roles(data, roles)


def atr_example(seed: int) -> tuple[pa.Table, ATRParams]:
    rng = np.random.default_rng(seed + 3)
    alpha = bool(rng.integers(0, 3) == 0)
    kw = (
        {"fidelity": "alpha", "alpha": round(float(rng.uniform(0.5, 1.0)), 3)}
        if alpha
        else {"delta": round(float(rng.choice([0.0, 0.5, 0.8, 0.9, 0.95, 1.0])), 3)}
    )
    if seed % 5 == 4:
        return golden_cells(), ATRParams(decisions="cells", **kw)
    if seed % 5 == 2:  # the randomised announcement, seeded so that a rerun is identical
        kw |= {"announce": "randomised", "slack": 0.05, "announce_seed": seed}
    return records(seed), ATRParams(
        allocation=str(rng.choice(["paper", "nearest"])), include_population=bool(seed % 2), **kw
    )
