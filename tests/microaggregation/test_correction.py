"""CorrectFairness (fair-mdav.md section 1.6): the closed form equals the paper's loop, exact
arithmetic, and the choice of relabelled records."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

from privfair.components.microaggregation.correction import (
    correct_fairness,
    relabel_counts,
    relabel_counts_by_loop,
)
from privfair.components.microaggregation.fair_mdav import fair_mdav
from privfair.components.microaggregation.params import FairMDAVParams
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles

TAUS = [Fraction(i, 10) for i in range(11)]
COMBOS = np.array(
    [
        (m, n, a, b)
        for m, n in itertools.product(range(1, 11), repeat=2)
        for a in range(m + 1)
        for b in range(n + 1)
    ],
    dtype=np.int64,
)


@pytest.mark.parametrize("direction", ["positive", "negative"])
@pytest.mark.parametrize("tau", TAUS + [Fraction(1, 3), Fraction(2, 7)], ids=str)
def test_closed_form_equals_loop(tau, direction):
    m_g, n_g, a, b = COMBOS.T
    closed = relabel_counts(m_g, n_g, a, b, tau, direction)
    loop = [
        relabel_counts_by_loop(int(m), int(n), int(x), int(y), tau, direction)
        for m, n, x, y in COMBOS
    ]
    mismatch = [
        (tuple(int(v) for v in c), int(got), want)
        for c, got, want in zip(COMBOS, closed, loop, strict=True)
        if got != want
    ]
    assert not mismatch, mismatch[:10]


@pytest.mark.parametrize("direction", ["positive", "negative"])
@pytest.mark.parametrize("tau", TAUS, ids=str)
def test_closed_form_reaches_local_fairness_minimally(tau, direction):
    """After r* relabels upr >= tau*fpr holds; after r* - 1 it does not (C8 and C9)."""
    m_g, n_g, a, b = COMBOS.T
    r = relabel_counts(m_g, n_g, a, b, tau, direction)
    for (m, n, x, y), k in zip(COMBOS.tolist(), r.tolist(), strict=True):

        def fair(steps: int, m=m, n=n, x=x, y=y) -> bool:
            if direction == "positive":
                return Fraction(x + steps, m) >= tau * Fraction(y, n)
            return Fraction(x, m) >= tau * Fraction(y - steps, n)

        assert 0 <= k <= (m - x if direction == "positive" else y)
        assert fair(k)
        if k:
            assert not fair(k - 1)


def test_tau_zero_never_relabels():
    m_g, n_g, a, b = COMBOS.T
    for direction in ("positive", "negative"):
        assert not relabel_counts(m_g, n_g, a, b, Fraction(0), direction).any()


def test_groups_lacking_one_protected_value_are_skipped():
    r = relabel_counts([0, 3], [3, 0], [0, 0], [3, 0], Fraction(1), "positive")
    assert r.tolist() == [0, 0]
    assert relabel_counts_by_loop(0, 3, 0, 3, Fraction(1), "positive") == 0


# --- exact versus floating-point arithmetic ---------------------------------------------------


def test_float_disagrees_but_exact_does_not_relabel():
    """upr = 1/25, fpr = 2/5, tau = 0.1: tau*fpr is exactly 1/25, so no relabel is needed; in
    floating point 0.1 * 0.4 = 0.04000000000000001 > 0.04 and one extra relabel would be made."""
    assert 1 / 25 < 0.1 * (2 / 5)  # the floating-point trap
    tau = FairMDAVParams(k=2, tau=0.1).tau_fraction
    assert tau == Fraction(1, 10)
    for direction in ("positive", "negative"):
        assert relabel_counts([25], [5], [1], [2], tau, direction).tolist() == [0]
        assert relabel_counts_by_loop(25, 5, 1, 2, tau, direction) == 0


def test_float_trap_through_the_component():
    """One (25,5)-fairlet with 1/25 unfavoured and 2/5 favoured positives, tau = 0.1."""
    roles = TableRoles.of(
        [
            ColumnRole("x", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
            ColumnRole("PA", Role.PROTECTED, Kind.BINARY, favoured=1),
            ColumnRole("y", Role.LABEL, Kind.BINARY, positive=1),
        ]
    )
    table = attach_roles(
        pa.table(
            {
                "x": [float(i) for i in range(30)],
                "PA": [0] * 25 + [1] * 5,
                "y": [1] + [0] * 24 + [1, 1, 0, 0, 0],
            }
        ),
        roles,
    )
    for direction in ("positive", "negative"):
        r = fair_mdav(table, FairMDAVParams(m=25, n=5, tau=0.1, correction=direction))
        lin = r.sidecars["lineage"]
        assert set(lin.column("group").to_pylist()) == {0}  # one fairlet
        assert sorted(lin.column("row_id").to_pylist()) == list(range(30))  # of every row
        # no label relabelled: each published row keeps its input row's label
        y_in = table.column("y").to_pylist()
        assert r.table.column("y").to_pylist() == [
            y_in[i] for i in lin.column("row_id").to_pylist()
        ]
        # read back into input order through the lineage: the input's labels, every one
        y_back = [None] * table.num_rows
        row_id, y_out = lin.column("row_id").to_pylist(), r.table.column("y").to_pylist()
        for i, v in zip(row_id, y_out, strict=True):
            y_back[i] = v
        assert y_back == table.column("y").to_pylist()


@pytest.mark.parametrize("i", range(11))
def test_tau_fraction_is_exact(i):
    assert FairMDAVParams(k=2, tau=i / 10).tau_fraction == Fraction(i, 10)


# --- which records are relabelled ----------------------------------------------------------


def test_nearest_order_relabels_first_candidates_of_each_group():
    # two groups of 2 U + 2 F; rows in membership order; all U negative, all F positive
    group = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    pa01 = np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int8)
    y = np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int8)
    # tau = 1/2: positive needs ceil(1*2*2 / (2*2)) = 1 relabel per group
    out, flags = correct_fairness(group, pa01, y, 2, Fraction(1, 2), "positive")
    assert flags.tolist() == [True, False, False, False, True, False, False, False]
    assert out.tolist() == [1, 0, 1, 1, 1, 0, 1, 1]
    # negative, tau = 1: every favoured positive goes (upr = 0)
    out, flags = correct_fairness(group, pa01, y, 2, Fraction(1), "negative")
    assert flags.tolist() == [False, False, True, True, False, False, True, True]
    assert out.tolist() == [0] * 8


def test_random_order_is_seeded_and_keeps_counts():
    rng = np.random.default_rng(3)
    group = np.repeat(np.arange(20), 10)
    pa01 = np.tile(np.array([0, 0, 0, 1, 1, 1, 1, 1, 1, 1], dtype=np.int8), 20)
    y = rng.integers(0, 2, size=200).astype(np.int8)
    tau = Fraction(9, 10)
    near, f_near = correct_fairness(group, pa01, y, 20, tau, "positive", "nearest")
    a1, f1 = correct_fairness(group, pa01, y, 20, tau, "positive", "random", seed=7)
    a2, f2 = correct_fairness(group, pa01, y, 20, tau, "positive", "random", seed=7)
    assert np.array_equal(a1, a2) and np.array_equal(f1, f2)
    assert np.array_equal(
        np.bincount(group[f1], minlength=20), np.bincount(group[f_near], minlength=20)
    )
    assert ((pa01[f1] == 0) & (y[f1] == 0)).all()
