"""The new user's HR table (issue 43's trial), generated: ``hr_table(seed)`` is ~2,000
employees with an ``employee_id``, ``gender`` M/F/X (a three-valued protected attribute), age,
tenure, a department with nulls (~4 %), a 1-5 rating, a weekly ``review_date`` (Mondays) and
``promoted``: a 10 % promotion rate biased against F and X. ``HR_INPUTS`` gives, per algorithm,
the roles and parameters a spec would give it; ``hr_input(name)`` the table an algorithm gets
after ingest (the id is ``private`` and dropped, the review date is the partition column and
not released: both leave at ingest, as ``dataset.private: drop`` and ``unlabelled: drop`` do)."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pyarrow as pa

from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles

ROWS = 2000
GENDERS = ("M", "F", "X")
DEPARTMENTS = ("sales", "engineering", "finance", "support", "operations")
RATINGS = ("1", "2", "3", "4", "5")
FIRST_REVIEW = date(2026, 1, 5)  # a Monday
AGE_BINS = (18.0, 30.0, 40.0, 50.0, 67.0)
TENURE_BINS = (0.0, 2.0, 5.0, 10.0, 41.0)


def hr_table(seed: int = 0, rows: int = ROWS) -> pa.Table:
    """The raw table (no roles): what the user's CSV holds."""
    rng = np.random.default_rng(seed)
    gender = rng.choice(GENDERS, rows, p=[0.5, 0.42, 0.08])
    age = rng.integers(20, 66, rows)
    tenure = np.round(np.minimum(rng.gamma(2.0, 3.0, rows), age - 18), 1)
    dept = rng.choice(DEPARTMENTS, rows)
    rating = rng.choice(RATINGS, rows, p=[0.05, 0.2, 0.4, 0.25, 0.1])
    # 10 % promoted overall: M about 13 %, F and X about 7-8 % (a better rating helps)
    rate = np.select([gender == "M", gender == "F"], [0.16, 0.09], 0.065)
    rate = rate * (0.6 + 0.2 * (rating.astype(int) - 1) / 2)
    promoted = (rng.random(rows) < rate).astype(np.int8)
    weeks = rng.integers(0, 26, rows)
    return pa.table(
        {
            "employee_id": pa.array(np.arange(100_001, 100_001 + rows), pa.int64()),
            "gender": pa.array(gender.tolist()),
            "age": pa.array(age, pa.int64()),
            "tenure": pa.array(tenure),
            "department": pa.array(
                [None if u < 0.04 else d for d, u in zip(dept, rng.random(rows), strict=True)],
                pa.string(),
            ),
            "rating": pa.array(rating.tolist()),
            "review_date": pa.array(
                [FIRST_REVIEW + timedelta(weeks=int(w)) for w in weeks], pa.date32()
            ),
            "promoted": pa.array(promoted),
        }
    )


def _roles(*cols: ColumnRole) -> TableRoles:
    return TableRoles.of(list(cols))


PROTECTED_NOMINAL = ColumnRole("gender", Role.PROTECTED, Kind.NOMINAL, favoured=("M",))
LABEL = ColumnRole("promoted", Role.LABEL, Kind.BINARY, positive=1)
QIS = (
    ColumnRole("age", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
    ColumnRole("tenure", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
    ColumnRole("department", Role.QUASI_IDENTIFIER, Kind.NOMINAL),
    ColumnRole("rating", Role.QUASI_IDENTIFIER, Kind.ORDINAL, domain=RATINGS),
)


def _params(name: str):
    """(roles, parameters) a spec of ``name`` would give the HR table."""
    if name in ("mdav", "fair_mdav"):
        from privfair.components.microaggregation.params import FairMDAVParams, MDAVParams

        # microaggregation's protected attribute is binary: the three-valued gender is refused
        gender = ColumnRole("gender", Role.PROTECTED, Kind.NOMINAL, favoured="auto")
        params = MDAVParams(k=5) if name == "mdav" else FairMDAVParams(k=5, tau=1.0)
        return _roles(*QIS, gender, LABEL), params
    if name in ("dmondrian", "dsabre"):
        from privfair.components.generalisation.params import DMondrianParams, DSabreParams

        cls = DMondrianParams if name == "dmondrian" else DSabreParams
        params = cls(t=0.1, k=5, utility_queries=100, audit_random_itemsets=50)
        return _roles(*QIS, PROTECTED_NOMINAL, LABEL), params
    if name == "atr":
        from privfair.components.transparency.params import ATRParams

        roles = _roles(
            ColumnRole("gender", Role.PUBLIC, Kind.NOMINAL),
            ColumnRole("department", Role.PUBLIC, Kind.NOMINAL),
            ColumnRole("rating", Role.SENSITIVE, Kind.ORDINAL, domain=RATINGS),
            LABEL,
        )
        return roles, ATRParams(delta=0.9)
    if name in ("mst", "prefair", "aim"):
        from privfair.components.synthesis.params import AIMParams, MSTParams, PreFairParams

        roles = _roles(
            ColumnRole("gender", Role.PROTECTED, Kind.NOMINAL, domain=GENDERS, favoured="M"),
            ColumnRole("age", Role.ADMISSIBLE, Kind.NUMERIC),
            ColumnRole("tenure", Role.ADMISSIBLE, Kind.NUMERIC),
            ColumnRole("department", Role.ADMISSIBLE, Kind.NOMINAL, domain=DEPARTMENTS),
            ColumnRole("rating", Role.ADMISSIBLE, Kind.ORDINAL, domain=RATINGS),
            LABEL,
        )
        common = {
            "epsilon": 4.0,
            "bins": {"age": AGE_BINS, "tenure": TENURE_BINS},
            "nulls": ("department",),
            "seed": 0,
            "iters": 200,
        }
        if name == "mst":
            return roles, MSTParams(**common)
        if name == "aim":
            return roles, AIMParams(**common, rounds=30, round_iters=50)
        return roles, PreFairParams(**common, independence_alpha=1e-9)
    raise KeyError(name)


#: The algorithms that cannot take the HR table, and the column their refusal
#: (``InputError``: exit 2) names: microaggregation's protected attribute has two values. Every
#: other algorithm publishes a release whose contract holds.
REFUSES = {"fair_mdav": "gender", "mdav": "gender"}


def hr_input(name: str, seed: int = 0):
    """(the table ``name`` gets after ingest, with its roles; its parameters)."""
    roles, params = _params(name)
    table = hr_table(seed).select([c.name for c in roles])
    return attach_roles(table, roles), params
