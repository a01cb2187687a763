"""Inputs for tests, docs and the test battery.

- ``toy_table``: the paper's running example (Ex. 19 / Fig. 3): 17 loan applications with PND
  attributes purpose (housing < car) and emp (no < yes), PD attribute sex (female protected)
  and decision dec (``-`` negative); p- = 8/17.
- ``table(seed)``: a random table with numeric, ordinal and nominal PND attributes (nulls in
  the nominal one), a three-valued PD attribute (so published as its groups) and a binary
  decision; ``dmondrian_example`` / ``dsabre_example``: such a table with random parameters
  (a t below tau(R) comes with ``single_class: allow``; k over q-blocks or classes).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from privfair.components.generalisation.params import DMondrianParams, DSabreParams
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles

__all__ = ["toy_table", "table", "dmondrian_example", "dsabre_example", "TOY_ROWS"]

# (purpose, emp, sex, dec) of IDs 1..17, spec section 2.2
TOY_ROWS = (
    ("housing", "no", "female", "-"),
    ("housing", "no", "female", "-"),
    ("housing", "no", "female", "+"),
    ("housing", "no", "male", "-"),
    ("housing", "no", "male", "+"),
    ("housing", "yes", "female", "-"),
    ("housing", "yes", "female", "+"),
    ("housing", "yes", "female", "+"),
    ("housing", "yes", "male", "-"),
    ("housing", "yes", "male", "-"),
    ("housing", "yes", "male", "+"),
    ("housing", "yes", "male", "+"),
    ("car", "no", "female", "+"),
    ("car", "no", "male", "-"),
    ("car", "no", "male", "+"),
    ("car", "yes", "female", "-"),
    ("car", "yes", "male", "+"),
)


def toy_table() -> pa.Table:
    """The 17-row table of Ex. 19 (row i is the paper's ID i + 1)."""
    cols = list(zip(*TOY_ROWS, strict=False))
    roles = TableRoles.of(
        [
            ColumnRole("purpose", Role.QUASI_IDENTIFIER, Kind.ORDINAL, domain=("housing", "car")),
            ColumnRole("emp", Role.QUASI_IDENTIFIER, Kind.ORDINAL, domain=("no", "yes")),
            ColumnRole("sex", Role.PROTECTED, Kind.NOMINAL, unfavoured=("female",)),
            ColumnRole("dec", Role.LABEL, Kind.NOMINAL, positive=("+",)),
        ]
    )
    data = pa.table(
        {n: pa.array(list(v)) for n, v in zip(("purpose", "emp", "sex", "dec"), cols, strict=False)}
    )
    return attach_roles(data, roles)


LEVELS = ("none", "basic", "middle", "high")


def table(seed: int, n_rows: int | None = None) -> pa.Table:
    """A random input (module docstring); both PD groups and both decisions always occur."""
    rng = np.random.default_rng(seed)
    n = int(n_rows or rng.integers(20, 120))
    group = rng.choice(["a", "b", "c"], size=n, p=[0.5, 0.3, 0.2])
    group[:2] = ["a", "b"]
    neg = rng.random(n) < np.where(group == "a", 0.3, 0.5)
    neg[:2] = [True, False]
    region = [None if v == "-" else v for v in rng.choice(["north", "south", "east", "-"], n)]
    roles = TableRoles.of(
        [
            ColumnRole("age", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
            ColumnRole("level", Role.QUASI_IDENTIFIER, Kind.ORDINAL, domain=LEVELS),
            ColumnRole("region", Role.QUASI_IDENTIFIER, Kind.NOMINAL),
            ColumnRole("group", Role.PROTECTED, Kind.NOMINAL, favoured=("a",)),
            ColumnRole("decision", Role.LABEL, Kind.BINARY, positive=1),
        ]
    )
    data = pa.table(
        {
            "age": pa.array(rng.integers(18, 70, n), pa.int64()),
            "level": pa.array(rng.choice(list(LEVELS), n).tolist()),
            "region": pa.array(region, pa.string()),
            "group": pa.array(group.tolist()),
            "decision": pa.array((~neg).astype(np.int8), pa.int8()),
        }
    )
    return attach_roles(data, roles)


def _params(example_seed: int, tab: pa.Table, cls, **extra):
    from privfair.components.generalisation.inputs import prepare
    from privfair.components.generalisation.measures import t_max

    rng = np.random.default_rng(example_seed + 11)
    prep = prepare(tab, None)
    t = round(float(rng.uniform(0.0, t_max(prep.p_minus))), 3)
    k = min(int(rng.choice([1, 1, 2, 3])), tab.num_rows)
    k_over = str(rng.choice(["q_blocks", "classes"]))
    a, b, c, d = prep.counts
    if k_over == "q_blocks" and min(a + b, c + d) < k:
        k_over = "classes"
    return cls(
        t=t,
        k=k,
        k_over=k_over,
        single_class="allow" if t < prep.tau_r else "refuse",
        utility_queries=200,
        audit_random_itemsets=100,
        **extra,
    )


def dmondrian_example(seed: int) -> tuple[pa.Table, DMondrianParams]:
    tab = table(seed)
    return tab, _params(seed, tab, DMondrianParams)


def dsabre_example(seed: int) -> tuple[pa.Table, DSabreParams]:
    tab = table(seed)
    rng = np.random.default_rng(seed + 5)
    return tab, _params(
        seed,
        tab,
        DSabreParams,
        seed=int(rng.integers(0, 100)),
        seed_bucket_rule=str(rng.choice(["min_ratio", "random"])),
    )
