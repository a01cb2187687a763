"""Discrimination measures, tau and the bd_f bounds (dmondrian-dsabre spec 1.3-1.9, 2.1, 5.4).

Worked-example numbers of the paper (Exs. 9, 11, 12, 19, 21, 22), the bd_f test-vector table of
spec 1.8, the inverse bounds against the spec's closed forms (kept here as oracles), and
hypothesis properties: every measure of a t-close 4-fold table lies within the two-sided bounds,
tau <= t, the ED/RD and OR/RR/RC identities, and monotonicity of bd_f in t.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from privfair.components.generalisation.examples import TOY_ROWS
from privfair.components.generalisation.measures import (
    LOWER_IS_WORSE,
    MEASURES,
    bound,
    bounds,
    four_fold,
    inverse_bound,
    measure,
    measures,
    proportions,
    t_max,
    tau,
    within_bounds,
)

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    derandomize=True,
)

TOY_P = 8 / 17


def close(x: float, expected: float, decimals: int) -> bool:
    """``x`` equals ``expected`` as printed with ``decimals`` decimals."""
    return abs(x - expected) <= 0.5 * 10.0**-decimals + 1e-12


# --------------------------------------------------------------------------- paper fixtures


def fig2() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ex. 9 / Fig. 2: (dept, female = protected, admitted = no = negative), one row per person."""
    cells = [  # dept, female, negative, count
        ("A", True, True, 5),
        ("A", True, False, 2),
        ("A", False, True, 1),
        ("A", False, False, 2),
        ("B", True, True, 1),
        ("B", True, False, 1),
        ("B", False, True, 3),
        ("B", False, False, 5),
    ]
    counts = [n for *_, n in cells]
    dept = np.repeat([c[0] for c in cells], counts)
    female = np.repeat([c[1] for c in cells], counts)
    neg = np.repeat([c[2] for c in cells], counts)
    return dept, female, neg


def toy() -> dict[str, np.ndarray]:
    """Ex. 19 / Fig. 3: 17 tuples (purpose, emp, sex, decision); female protected, '-' negative."""
    rows = TOY_ROWS
    cols = np.array(rows).T
    return {
        "purpose": cols[0],
        "emp": cols[1],
        "protected": cols[2] == "female",
        "negative": cols[3] == "-",
    }


# --------------------------------------------------------------------------- worked examples


def test_ex9_extended_difference_per_context():
    dept, female, neg = fig2()
    a, b, c, d = four_fold(female, neg)
    p_minus = (a + c) / (a + b + c + d)
    assert p_minus == 0.5
    expected = {"A": 0.114, "B": 0.10, None: 0.167}
    for context, value in expected.items():
        mask = np.ones(len(dept), bool) if context is None else dept == context
        counts = four_fold(female[mask], neg[mask])
        assert close(measure("ED", *counts, p_minus), value, 3), context
    # the whole table is exactly 0.167-protective w.r.t. ED: the max over contexts is the root
    eds = [measure("ED", *four_fold(female[dept == x], neg[dept == x]), p_minus) for x in "AB"]
    assert max(eds) < measure("ED", a, b, c, d, p_minus)


def test_ex12_qblock_distances_and_inverse():
    dept, female, neg = fig2()
    p_minus = 0.5
    expected = {("A", True): 0.214, ("A", False): 0.167, ("B", True): 0.0, ("B", False): 0.125}
    distances = []
    for (dep, fem), value in expected.items():
        mask = (dept == dep) & (female == fem)
        counts = four_fold(female[mask], neg[mask])  # a one-group table: the other group is empty
        distances.append(tau(*counts, p_minus))
        assert close(distances[-1], value, 3), (dep, fem)
    t_star = inverse_bound("ED", 0.167, p_minus)
    assert close(t_star, 0.0835, 4)
    assert max(distances) > t_star  # the converse of Thm. 10 fails
    assert close(max(distances), 0.214, 3)


def test_ex11_sharpness():
    p_minus, t = 0.5, 0.5
    assert measure("RD", 1, 0, 0, 1, p_minus) == 1.0 == bound("RD", t, p_minus)
    assert within_bounds("RD", 1.0, t, p_minus)
    d = np.arange(1, 2001)
    ed = measure("ED", 1, 0, 0, d, p_minus)
    np.testing.assert_allclose(ed, 1 - 1 / (d + 1))
    assert within_bounds("ED", ed, t, p_minus).all()
    assert ed.max() > 0.999


def test_ex19_toy_tables_and_tau():
    data = toy()
    prot, neg = data["protected"], data["negative"]
    a, b, c, d = four_fold(prot, neg)
    assert (a, b, c, d) == (4, 4, 4, 5)
    p_minus = (a + c) / 17
    assert p_minus == TOY_P
    contexts = {
        "purpose = housing": (data["purpose"] == "housing", (3, 3, 3, 3), 0.0294),
        "purpose = car": (data["purpose"] == "car", (1, 1, 1, 2), 0.1373),
        "emp = no": (data["emp"] == "no", (2, 2, 2, 2), 0.0294),
        "emp = yes": (data["emp"] == "yes", (2, 2, 2, 3), 0.0706),
        "emp = no, purpose = car": (
            (data["emp"] == "no") & (data["purpose"] == "car"),
            (0, 1, 1, 1),
            0.4706,
        ),
    }
    for name, (mask, counts, value) in contexts.items():
        assert four_fold(prot[mask], neg[mask]) == counts, name
        assert close(tau(*counts, p_minus), value, 4), name
    # the emp cut (max tau 0.07) beats the purpose cut (0.14)
    emp = max(tau(2, 2, 2, 2, p_minus), tau(2, 2, 2, 3, p_minus))
    purpose = max(tau(3, 3, 3, 3, p_minus), tau(1, 1, 1, 2, p_minus))
    assert emp < purpose
    assert close(tau(4, 4, 4, 5, p_minus), 0.0294, 4)  # tau(R) of the toy table


def test_ex22_dsabre_taus():
    assert close(tau(1, 1, 1, 2, TOY_P), 0.14, 2)
    assert close(tau(1, 1, 0, 1, TOY_P), 0.47, 2)
    assert close(tau(1, 1, 0, 0, TOY_P), 0.03, 2)
    assert tau(1, 1, 0, 0, TOY_P) == tau(0, 0, 1, 1, TOY_P)
    # vectorised over the same four tables
    got = tau([1, 1, 1, 0], [1, 1, 1, 0], [1, 0, 0, 1], [2, 1, 0, 1], TOY_P)
    np.testing.assert_allclose(got.round(2), [0.14, 0.47, 0.03, 0.03])


def test_german_ex21():
    a, b, c, d = 109, 201, 191, 499
    p_minus = (a + c) / (a + b + c + d)
    assert close(p_minus, 0.3, 12)
    p1, p2, p = proportions(a, b, c, d, p_minus)
    assert close(p1, 0.352, 3) and close(p2, 0.277, 3) and close(p, 0.3, 12)
    assert close(abs(p1 - p_minus), 0.052, 3) and close(abs(p2 - p_minus), 0.023, 3)
    assert close(tau(a, b, c, d, p_minus), 0.052, 3)
    assert close(measure("RD", a, b, c, d, p_minus), 0.075, 3)
    # Thm. 20 at t_eff = tau(R): the whole table is within every bound
    t_eff = tau(a, b, c, d, p_minus)
    for name, value in measures(a, b, c, d, p_minus).items():
        assert within_bounds(name, value, t_eff, p_minus), name


# --------------------------------------------------------------------------- bd_f vectors

INF = math.inf
BD_TABLE = [  # p_minus, t, RD=ED, RR=ER, RC=EC, OR   (spec 1.8, "Test vectors for bd_f")
    (0.3, 0.052, 0.1040, 1.4194, 0.8617, 1.6472),
    (0.3, 0.100, 0.2000, 2.0000, 0.7500, 2.6667),
    (0.3, 0.150, 0.3000, 3.0000, 0.6471, 4.6364),
    (0.3, 0.250, 0.5000, 11.0000, 0.4737, 23.2222),
    (0.3, 0.500, 0.8000, INF, 0.2000, INF),
    (0.761, 0.087, 0.1740, 1.2582, 0.4663, 2.6984),
    (0.761, 0.150, 0.3000, 1.4910, 0.2288, 6.5168),
    (0.761, 0.250, 0.4890, 1.9569, 0.0000, INF),
    (0.938, 0.028, 0.0560, 1.0615, 0.3778, 2.8100),
    (0.938, 0.100, 0.1620, 1.1933, 0.0000, INF),
    (8 / 17, 0.250, 0.5000, 3.2667, 0.3585, 9.1123),
    (0.5, 0.500, 1.0000, INF, 0.0000, INF),
]


@pytest.mark.parametrize(("p_minus", "t", "rd", "rr", "rc", "odds"), BD_TABLE)
def test_bound_vectors(p_minus, t, rd, rr, rc, odds):
    expected = {"RD": rd, "ED": rd, "RR": rr, "ER": rr, "RC": rc, "EC": rc, "OR": odds}
    for name, value in expected.items():
        got = bound(name, t, p_minus)
        assert isinstance(got, float)
        if math.isinf(value):
            assert got == INF, name
        else:
            assert close(got, value, 4), (name, got)


def test_bound_vectors_vectorised():
    p = np.array([row[0] for row in BD_TABLE])
    t = np.array([row[1] for row in BD_TABLE])
    for col, name in ((2, "RD"), (3, "RR"), (4, "RC"), (5, "OR")):
        got = bound(name, t, p)
        assert isinstance(got, np.ndarray) and got.dtype == np.float64
        np.testing.assert_allclose(got, [row[col] for row in BD_TABLE], atol=5e-5, rtol=0)


def test_two_sided_bounds():
    assert bounds("RD", 0.15, 0.3) == (-0.3, 0.3)
    lo, hi = bounds("RR", 0.15, 0.3)
    assert close(lo, 1 / 3, 12) and close(hi, 3.0, 12)
    lo, hi = bounds("RC", 0.15, 0.3)
    assert close(lo, 0.55 / 0.85, 12) and close(hi, 0.85 / 0.55, 12)
    assert bounds("OR", 0.5, 0.3) == (0.0, INF)  # 1/inf = 0
    assert bounds("EC", 0.25, 0.761) == (0.0, INF)  # 1/0 = inf
    for name in MEASURES:
        lo, hi = bounds(name, 0.0, 0.4)  # t = 0: parity is forced
        parity = 0.0 if name in ("RD", "ED") else 1.0
        assert close(lo, parity, 12) and close(hi, parity, 12), name


# --------------------------------------------------------------------------- inverse bounds


def test_inverse_sanity_vectors():
    assert close(inverse_bound("RD", 0.167, 0.5), 0.0835, 4)
    assert abs(inverse_bound("RR", 3, 0.3) - 0.15) < 1e-12
    assert abs(inverse_bound("RD", 0.3, 0.3) - 0.15) < 1e-12
    assert inverse_bound("RD", 1.0, 0.3) == inverse_bound("ED", 7.0, 0.3) == 0.7 == t_max(0.3)
    assert inverse_bound("RC", 0.0, 0.3) == 0.7  # every t gives bd_RC >= 0


def oracle(name: str, alpha: float, p: float) -> float:
    """Closed forms of spec 1.8, "Choosing t for a target alpha" (not valid for RC at alpha=0)."""
    top = max(p, 1 - p)
    if name in ("RD", "ED"):
        t = max(alpha / 2, alpha - min(p, 1 - p)) if alpha < 1 else top
    elif name in ("RR", "ER"):
        x = p * (alpha - 1) / (alpha + 1)
        t = x if x <= 1 - p else p - 1 / alpha
    else:  # RC, EC
        q = 1 - p
        x = q * (1 - alpha) / (1 + alpha)
        t = x if x <= p else q - alpha
    return min(t, top)


P_MINUS = st.one_of(
    st.sampled_from([0.3, 0.5, TOY_P, 0.761, 0.938]), st.floats(0.01, 0.99, allow_nan=False)
)


@SETTINGS
@given(p=P_MINUS, data=st.data())
def test_inverse_matches_closed_forms(p, data):
    ranges = {
        "RD": st.floats(0.0, 1.5),
        "ED": st.floats(0.0, 1.5),
        "RR": st.floats(1.0, 60.0),
        "ER": st.floats(1.0, 60.0),
        "RC": st.floats(1e-6, 1.0),
        "EC": st.floats(1e-6, 1.0),
    }
    for name, alphas in ranges.items():
        alpha = data.draw(alphas, label=name)
        got = inverse_bound(name, alpha, p)
        assert 0.0 <= got <= t_max(p)
        assert abs(got - oracle(name, alpha, p)) < 1e-9, (name, alpha, p, got)


@SETTINGS
@given(p=P_MINUS, alpha=st.floats(1.0, 200.0))
def test_inverse_odds_ratio_is_largest_feasible(p, alpha):
    t = inverse_bound("OR", alpha, p)
    assert 0.0 <= t <= t_max(p)
    assert bound("OR", t, p) <= alpha * (1 + 1e-12)
    if t < t_max(p):
        assert bound("OR", min(t + 1e-9, t_max(p)), p) > alpha


@settings(SETTINGS, max_examples=60)
@given(p=P_MINUS, alphas=st.lists(st.floats(1e-3, 1.0), min_size=1, max_size=8))
def test_inverse_vectorised_equals_scalar(p, alphas):
    for name in MEASURES:
        al = np.array(alphas) if name in LOWER_IS_WORSE else 1 + 5 * np.array(alphas)
        got = inverse_bound(name, al, p)
        assert isinstance(got, np.ndarray) and got.shape == al.shape
        np.testing.assert_array_equal(got, [inverse_bound(name, float(x), p) for x in al])


def test_inverse_unattainable_alpha_raises():
    with pytest.raises(ValueError):
        inverse_bound("RD", -0.1, 0.3)
    with pytest.raises(ValueError):
        inverse_bound("RR", 0.9, 0.3)
    with pytest.raises(ValueError):
        inverse_bound("RC", 1.1, 0.3)


# --------------------------------------------------------------------------- properties


@st.composite
def close_tables(draw, max_group: int = 40, max_tables: int = 12):
    """(p_minus, t, a, b, c, d): arrays of 4-fold tables whose tokenism-extended p1, p2 lie
    within t of p_minus (an empty group is always within)."""
    p = draw(P_MINUS)
    top = max(p, 1 - p)
    t = draw(st.one_of(st.sampled_from([0.0, top]), st.floats(0.0, top)))

    def group() -> tuple[int, int]:
        n = draw(st.integers(0, max_group))
        lo = max(0, math.ceil((p - t) * n))
        hi = min(n, math.floor((p + t) * n))
        if n == 0 or lo > hi:
            return 0, 0
        x = draw(st.integers(lo, hi))
        assume(abs(x / n - p) <= t)  # float rounding of the range above
        return x, n - x

    tables = []
    for _ in range(draw(st.integers(1, max_tables))):
        a, b = group()
        c, d = group()
        assume(a + b + c + d > 0)
        tables.append((a, b, c, d))
    a, b, c, d = (np.array(col) for col in zip(*tables, strict=True))
    return p, t, a, b, c, d


@SETTINGS
@given(close_tables())
def test_t_close_tables_are_within_bounds(case):
    p, t, a, b, c, d = case
    assert np.all(tau(a, b, c, d, p) <= t + 1e-12)
    values = measures(a, b, c, d, p)
    for name in MEASURES:
        ok = within_bounds(name, values[name], t, p)
        assert ok.all(), (name, t, p, values[name][~ok], bounds(name, t, p))


@SETTINGS
@given(close_tables(max_tables=3))
def test_vectorised_equals_scalar(case):
    p, _, a, b, c, d = case
    vec = measures(a, b, c, d, p)
    for i in range(len(a)):
        one = measures(int(a[i]), int(b[i]), int(c[i]), int(d[i]), p)
        for name in MEASURES:
            assert isinstance(one[name], float)
            np.testing.assert_array_equal(vec[name][i], one[name])
            assert measure(name, int(a[i]), int(b[i]), int(c[i]), int(d[i]), p) == one[name]
        assert tau(a, b, c, d, p)[i] == tau(int(a[i]), int(b[i]), int(c[i]), int(d[i]), p)


COUNTS = st.integers(0, 60)


@SETTINGS
@given(a=COUNTS, b=COUNTS, c=COUNTS, d=COUNTS, p=P_MINUS)
def test_identities(a, b, c, d, p):
    n1, n2 = a + b, c + d
    assume(n1 > 0 and n2 > 0)
    f = measures(a, b, c, d, p)
    n = n1 + n2
    assert f["ED"] == pytest.approx(n2 / n * f["RD"], abs=1e-12)
    assert abs(f["ED"]) <= abs(f["RD"]) + 1e-12
    p1, p2 = a / n1, c / n2
    if p2 > 0 and p1 < 1 and p2 < 1:  # RR finite, RC finite and nonzero
        assert f["OR"] == pytest.approx(f["RR"] / f["RC"], rel=1e-9)
    if a * d == b * c:  # statistical parity
        assert f["RD"] == pytest.approx(0, abs=1e-12) and f["ED"] == pytest.approx(0, abs=1e-12)


@SETTINGS
@given(p=P_MINUS, ts=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=20))
def test_bound_monotone_in_t(p, ts):
    grid = np.sort(np.array(ts) * t_max(p))
    for name in MEASURES:
        bd = bound(name, grid, p)
        if name in LOWER_IS_WORSE:
            assert np.all(bd[:-1] >= bd[1:]), name
        else:
            assert np.all(bd[:-1] <= bd[1:]), name
        lo, hi = bounds(name, grid, p)
        assert np.all(lo <= hi)


# --------------------------------------------------------------------------- negative controls


def test_tau_above_t_can_violate_rd_bound():
    p_minus, t = 0.5, 0.1
    a, b, c, d = 10, 0, 0, 10
    assert tau(a, b, c, d, p_minus) > t
    rd = measure("RD", a, b, c, d, p_minus)
    assert rd == 1.0 > bound("RD", t, p_minus)
    assert not within_bounds("RD", rd, t, p_minus)
    # the German whole table is not within the bounds of a t below tau(R)
    assert not within_bounds("RD", measure("RD", 109, 201, 191, 499, 0.3), 0.03, 0.3)


def test_zero_denominator_conventions():
    assert measure("RR", 1, 1, 0, 2, 0.5) == INF  # x/0
    assert measure("RR", 0, 1, 0, 1, 0.5) == 1.0  # 0/0
    assert measure("OR", 1, 0, 0, 1, 0.5) == INF
    assert measure("RC", 1, 0, 1, 0, 0.5) == 1.0
    assert measure("EC", 1, 0, 0, 1, 0.5) == 0.0
    # inf under a finite bound is a violation, under a vacuous bound it is not
    assert not within_bounds("RR", INF, 0.1, 0.5)
    assert within_bounds("RR", INF, 0.5, 0.5)


def test_tokenism():
    p1, p2, p = proportions(0, 0, 1, 999, 0.3)  # reverse tokenism: no protected members
    assert p1 == 0.3 and p2 == p == 0.001
    assert measure("ED", 0, 0, 1, 999, 0.3) == pytest.approx(0.3 - 0.001)
    assert tau(0, 0, 1, 999, 0.3) == pytest.approx(0.299)
    assert tau(3, 7, 0, 0, 0.3) == 0.0
    # empty context: p undefined, never certified
    f = measures(0, 0, 0, 0, 0.3)
    assert f["RD"] == 0.0 and math.isnan(f["ED"]) and math.isnan(f["ER"])
    assert not within_bounds("ED", f["ED"], 0.7, 0.3)


def test_four_fold():
    prot = np.array([True, True, True, False, False, False, False])
    neg = np.array([True, True, False, True, False, False, False])
    assert four_fold(prot, neg) == (2, 1, 1, 3)
    assert four_fold(np.array([], bool), np.array([], bool)) == (0, 0, 0, 0)
    with pytest.raises(ValueError):
        four_fold(prot, neg[:-1])


def test_input_validation():
    with pytest.raises(ValueError):
        measure("XX", 1, 1, 1, 1, 0.5)
    with pytest.raises(ValueError):
        measure("RD", -1, 1, 1, 1, 0.5)
    with pytest.raises(ValueError):
        tau(1, 1, 1, 1, 1.5)
    with pytest.raises(ValueError):
        bound("RD", -0.1, 0.5)
    with pytest.raises(ValueError):
        bounds("??", 0.1, 0.5)


def test_return_types():
    assert isinstance(measure("RD", 1, 2, 3, 4, 0.5), float)
    assert isinstance(t_max(0.3), float)
    arr = measure("OR", np.array([1, 2]), np.array([2, 2]), np.array([3, 1]), np.array([4, 1]), 0.5)
    assert isinstance(arr, np.ndarray) and arr.dtype == np.float64 and arr.shape == (2,)
    assert within_bounds("RD", np.zeros((2, 3)), 0.1, 0.5).shape == (2, 3)
