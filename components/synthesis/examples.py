"""Small valid inputs for the test battery and the docs: a table with two protected attributes
(one binary, one nominal), two admissible ones (numeric with bins, nominal), an unlabelled
numeric one and a binary outcome, whose outcome depends on everything (so MST's tree need not
be fair and PreFair's must work for it). ``job`` declares a null level (``params.nulls``: the
example is a spec too, and a spec's ``domain`` takes no null yet) and about 4% of its values
are null; no other column declares one, so the synthetic table may hold a null in ``job``
only."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from privfair.components.synthesis.params import AIMParams, MSTParams, PreFairParams
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles

__all__ = ["example_table", "mst_example", "prefair_example", "aim_example", "BINS"]

BINS = {"hours": (0.0, 20.0, 35.0, 45.0, 60.0, 100.0), "age": (18.0, 30.0, 45.0, 65.0, 91.0)}
JOBS = ("clerical", "manual", "professional", "service")
REGIONS = ("north", "south", "east")


def example_table(seed: int, n: int = 800) -> pa.Table:
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, n)
    region = rng.integers(0, 3, n)
    age = rng.integers(18, 91, n)
    job = (sex + rng.integers(0, 3, n)) % 4
    hours = np.clip(rng.normal(30 + 8 * sex + 3 * job, 10, n), 0, 99).astype(np.int64)
    logit = -2 + 0.06 * (hours - 35) + 0.5 * (job == 2) + 0.8 * sex + 0.3 * (region == 0)
    income = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int8)
    unknown = rng.random(n)
    table = pa.table(
        {
            "sex": pa.array(sex.astype(np.int8)),
            "region": pa.array([REGIONS[r] for r in region]),
            "hours": pa.array(hours),
            "job": pa.array(
                [None if u < 0.04 else JOBS[j] for j, u in zip(job, unknown, strict=True)]
            ),
            "age": pa.array(age.astype(np.int64)),
            "income": pa.array(income),
        }
    )
    roles = TableRoles.of(
        [
            ColumnRole("sex", Role.PROTECTED, Kind.BINARY, favoured=1),
            ColumnRole("region", Role.PROTECTED, Kind.NOMINAL, domain=REGIONS, favoured="north"),
            ColumnRole("hours", Role.ADMISSIBLE, Kind.NUMERIC),
            ColumnRole("job", Role.ADMISSIBLE, Kind.NOMINAL, domain=JOBS),
            ColumnRole("age", Role.IGNORED, Kind.NUMERIC),
            ColumnRole("income", Role.LABEL, Kind.BINARY, positive=1),
        ]
    )
    return attach_roles(table, roles)


def mst_example(seed: int) -> tuple[pa.Table, MSTParams]:
    params = MSTParams(epsilon=4.0, bins=BINS, nulls=("job",), seed=seed, iters=300)
    return example_table(seed), params


def aim_example(seed: int) -> tuple[pa.Table, AIMParams]:
    params = AIMParams(
        epsilon=4.0, bins=BINS, nulls=("job",), seed=seed, iters=300, rounds=24, round_iters=50
    )
    return example_table(seed), params


# FAIR-4 is a G-test: a fair release fails it with probability ``independence_alpha``. The test
# suite checks a few hundred fair synthetic tables per run, so at the default 1e-4 one run in
# about a hundred would fail by chance (the noise is OpenDP's and takes no seed); the examples
# test at 1e-9, which every corruption of the battery still breaks (its p-values are below
# 1e-170).
EXAMPLE_ALPHA = 1e-9


def prefair_example(seed: int) -> tuple[pa.Table, PreFairParams]:
    selector = "exponential" if seed % 2 else "greedy"
    params = PreFairParams(
        epsilon=4.0,
        bins=BINS,
        nulls=("job",),
        seed=seed,
        iters=300,
        selector=selector,
        independence_alpha=EXAMPLE_ALPHA,
    )
    return example_table(seed), params
