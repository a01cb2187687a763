"""The vectorised ATR solver (privfair.components.transparency.scheme) against the spec atr-privacy.md.

- the section 4.6 golden assertions G1-G10 and the section 4.7 vectors (T2-T7, T9, T10), exact with
  fractions through a plain per-group transcription of the spec's reference (section 3.10), and
  to 1e-9 (or the printed precision) for the vectorised solver;
- errata E1 (the missing beta_min term; delta = 0.7 female group), E2 (x^0 = x^1) and E3 (0/0),
  each against a literal transcription of the printed Algorithm 1;
- the edge cases of section 3.8 and the input validation of contract C0;
- the betamin case, where this solver departs from the spec's reference (S is the flat level's
  mass, not the true mass clamped): the announcement reads the true rule only through its
  bounds, a group's announced rate is not its true rate in general, a group whose intervals
  share a level announces it (posterior = prior), and a rule announced at the level is hidden
  within its interval;
- property tests (hypothesis): the vectorised solver equals the per-group reference; the
  recomputed adversary confidence equals beta* (C3, C4); the bounds and the fidelity hold (C2);
  the Corollary-1 structure (C6), mass conservation (C7), determinism and group independence
  (C9), the sandwich beta_min <= beta* <= C* (C5) and monotonicity in delta (C11).
"""

from __future__ import annotations

from fractions import Fraction as Fr

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfair.components.transparency.fidelity import fidelity_bounds
from privfair.components.transparency.scheme import CASES, adversary_confidence, solve
from privfair.schemas.errors import InputError

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
TOL = 1e-9


# ------------------------------------------------------------------ reference transcriptions


def solve_group_reference(P, L, H, D1=None, alloc="paper", tol=1e-12):
    """Spec section 3.10, transcribed line by line (plain Python; runs on Fractions with tol=0),
    except for the beta_min branch's S and start (the flat level, not the true mass)."""
    m = len(P)
    N = sum(P)
    m1 = [P[k] * L[k] for k in range(m)]
    m0 = [P[k] * (1 - H[k]) for k in range(m)]
    x1 = max(range(m), key=lambda k: (m1[k], -k))
    x0 = max(range(m), key=lambda k: (m0[k], -k))
    P1m, P0m = m1[x1], m0[x0]
    U1 = [min(P[k] * H[k], P1m) for k in range(m)]
    U0 = [min(P[k] * (1 - L[k]), P0m) for k in range(m)]
    b1 = P1m / sum(U1) if P1m > 0 else 0.0
    b0 = P0m / sum(U0) if P0m > 0 else 0.0
    bp = (P1m + P0m) / N
    bmin = max(P) / N
    beta = max(b0, b1, bp, bmin)
    case = next(
        c
        for c, v in (("beta0", b0), ("beta1", b1), ("betap", bp), ("betamin", bmin))
        if v >= beta - tol
    )
    S_lo, S_hi = P1m / beta, N - P0m / beta

    def lo(S):
        return [max(P[k] * L[k], P[k] - beta * (N - S)) for k in range(m)]

    def hi(S):
        return [min(P[k] * H[k], beta * S) for k in range(m)]

    gl = None
    if case == "beta0":
        S = S_hi
    elif case in ("beta1", "betap"):
        S = S_lo
    else:

        def F(S):
            return sum(hi(S)) - S

        def G(S):
            return S - sum(lo(S))

        a, b = S_lo, S_hi
        if F(b) < 0:
            for _ in range(100):
                c = (a + b) / 2
                a, b = (c, b) if F(c) >= 0 else (a, c)
            fr = a
        else:
            fr = b
        a, b = S_lo, S_hi
        if G(a) < 0:
            for _ in range(100):
                c = (a + b) / 2
                a, b = (a, c) if G(c) >= 0 else (c, b)
            gl = b
        else:
            gl = a
        # not the spec's S = clamp(S_true, g_l, f_r), which announces the true group mass: the
        # flat level (privfair.components.transparency.scheme, module docstring), clamped alike
        S = min(max(N * flat_level_reference(P, L, H), gl), fr)
    lk, hk = lo(S), hi(S)
    hk = [max(hk[k], lk[k]) for k in range(m)]
    if alloc == "nearest" and D1 is not None:
        mass = [min(max(P[k] * D1[k], lk[k]), hk[k]) for k in range(m)]
    elif case == "betamin":  # start flat: every cell at S / N, clamped into its range
        mass = [min(max(P[k] * (S / N), lk[k]), hk[k]) for k in range(m)]
    else:
        mass = list(lk)
    resid = S - sum(mass)
    for k in range(m):
        if resid > 0:
            add = min(resid, hk[k] - mass[k])
            mass[k] += add
            resid -= add
        elif resid < 0:
            sub = min(-resid, mass[k] - lk[k])
            mass[k] -= sub
            resid += sub
    return dict(
        g_l=gl,
        beta=beta,
        case=case,
        Dt1=[mass[k] / P[k] for k in range(m)],
        S=S,
        resid=resid,
        x1=x1,
        x0=x0,
        M1=P1m,
        M0=P0m,
        betas=dict(beta0=b0, beta1=b1, betap=bp, betamin=bmin),
    )


def round_level_reference(a, b):
    """The number with the fewest decimals in [a, b] and inside (0, 1), nearest the midpoint
    among those (a when a = b; the midpoint if none of up to 17 decimals fits). Plain Python;
    exact on Fractions."""
    if not a < b:
        return a
    mid = (a + b) / 2
    for k in range(1, 18):
        scale = 10**k
        x = mid * scale
        near = round(x)  # ties to even, as numpy's rint
        for n in (near, near + 1 if x >= near else near - 1):
            q = Fr(n, scale) if isinstance(mid, Fr) else n / scale
            if a <= q <= b and 0 < q < 1:
                return q
    return mid


def flat_level_reference(P, L, H):
    """The level c with sum_k P_k clamp(c, L_k, H_k) = c N: every level of [max L, min H] when
    that interval is not empty (then round_level_reference of it), else the unique root, by
    bisection on [min H, max L] (100 steps, the upper end)."""
    a, b = max(L), min(H)
    if a <= b:
        return round_level_reference(a, b)
    lo_c, hi_c = b, a
    for _ in range(100):
        c = (lo_c + hi_c) / 2
        up = sum(p * max(x - c, 0) for p, x in zip(P, L, strict=True))
        down = sum(p * max(c - x, 0) for p, x in zip(P, H, strict=True))
        lo_c, hi_c = (c, hi_c) if up > down else (lo_c, c)
    return hi_c


def solve_reference(group, p, lo, hi, d1=None, alloc="paper", tau=1e-12):
    """Spec section 3.7's PROTECT driver as a plain per-group loop: cells with P = 0 are excluded
    and announce D_1 clamped into [L, H] (L without D_1). Returns (D~_1 per cell, {label: result})
    with x1/x0 turned into input cell indices."""
    n = len(p)
    d1t = [None] * n
    out = {}
    for lab in sorted(set(group)):
        cells = [i for i in range(n) if group[i] == lab and p[i] > 0]
        for i in range(n):
            if group[i] == lab and not p[i] > 0:
                d1t[i] = lo[i] if d1 is None else min(max(d1[i], lo[i]), hi[i])
        if not cells:
            out[lab] = None
            continue
        res = solve_group_reference(
            [p[i] for i in cells],
            [lo[i] for i in cells],
            [hi[i] for i in cells],
            None if d1 is None else [d1[i] for i in cells],
            alloc,
            tau,
        )
        for k, i in enumerate(cells):
            d1t[i] = res["Dt1"][k]
        res["x1"], res["x0"] = cells[res["x1"]], cells[res["x0"]]
        out[lab] = res
    return d1t, out


def paper_algorithm_literal(P, L, H):
    """Algorithm 1 exactly as printed (spec section 3.4): beta* = max{beta0, beta1, betap} and
    ALLOCATION with the residual of eq. (22). Wrong in the cases E1 and E2. Returns
    (claimed beta, D~_1, ALLOCATION trace)."""
    m, N = len(P), sum(P)
    m1 = [P[k] * L[k] for k in range(m)]
    m0 = [P[k] * (1 - H[k]) for k in range(m)]
    x1 = max(range(m), key=lambda k: (m1[k], -k))
    x0 = max(range(m), key=lambda k: (m0[k], -k))
    M1, M0 = m1[x1], m0[x0]
    U1 = [min(P[k] * H[k], M1) for k in range(m)]
    U0 = [min(P[k] * (1 - L[k]), M0) for k in range(m)]
    b1 = M1 / sum(U1) if M1 > 0 else 0
    b0 = M0 / sum(U0) if M0 > 0 else 0
    bp = (M1 + M0) / N
    beta = max(b0, b1, bp)
    trace = {}
    if beta == b0:
        return beta, [1 - U0[k] / P[k] for k in range(m)], trace
    if beta == b1:
        return beta, [U1[k] / P[k] for k in range(m)], trace
    b = [P[k] - bp * N for k in range(m)]
    free = [k for k in range(m) if k not in (x1, x0)]
    min_p = {k: max(P[k] * L[k], M1 + b[k]) / P[k] for k in free}
    max_p = {k: U1[k] / P[k] for k in free}
    rhs = (1 - 2 * bp) / bp * M1 - b[x0]
    resid = rhs - sum(P[k] * min_p[k] for k in free)
    trace.update(min_prime=dict(min_p), rhs=rhs, resid=resid, capacity={}, allocation={})
    D = [None] * m
    D[x1] = L[x1]
    D[x0] = H[x0]
    for k in free:
        cap = max_p[k] - min_p[k]
        alloc = min(resid / P[k], cap)
        trace["capacity"][k], trace["allocation"][k] = cap, alloc
        D[k] = min_p[k] + alloc
        resid -= P[k] * alloc
    return beta, D, trace


def confidences(P, D1):
    """Per-cell confidences (a = 1, a = 0) of one group from (P, D~_1); works on Fractions."""
    a1 = [p * d for p, d in zip(P, D1, strict=True)]
    a0 = [p * (1 - d) for p, d in zip(P, D1, strict=True)]
    s1, s0 = sum(a1), sum(a0)
    return [x / s1 if s1 else None for x in a1], [x / s0 if s0 else None for x in a0]


def max_conf(P, D1):
    c1, c0 = confidences(P, D1)
    return max(c for c in c1 + c0 if c is not None)


# ------------------------------------------------------------------------ golden example


GROUP = np.array([0, 0, 0, 1, 1, 1])  # F (x1, x2, x3), M (x4, x5, x6)
COUNTS = [12, 5, 3, 9, 7, 4]
P = np.array(COUNTS) / 40
D1 = np.array([0.0, 0.0, 1.0, 0.0, 0.5, 1.0])
P_FR = [Fr(c, 40) for c in COUNTS]
D1_FR = [Fr(0), Fr(0), Fr(1), Fr(0), Fr(1, 2), Fr(1)]


def delta_bounds_exact(d1, delta):
    slack = 1 - delta
    return [max(Fr(0), d - slack) for d in d1], [min(Fr(1), d + slack) for d in d1]


def golden(delta=0.9, **kw):
    L, H = fidelity_bounds(D1, "delta", delta)
    return solve(GROUP, P, L, H, D1, **kw)


def golden_exact(delta=Fr(9, 10), alloc="paper"):
    L, H = delta_bounds_exact(D1_FR, delta)
    return solve_reference(list(GROUP), P_FR, L, H, D1_FR, alloc, tau=0)


def test_g1_g2_inputs_and_bounds():
    assert P.tolist() == pytest.approx([0.3, 0.125, 0.075, 0.225, 0.175, 0.1], abs=1e-15)
    L, H = fidelity_bounds(D1, "delta", 0.9)
    np.testing.assert_allclose(L, [0, 0, 0.9, 0, 0.4, 0.9], atol=1e-12)
    np.testing.assert_allclose(H, [0.1, 0.1, 1, 0.1, 0.6, 1], atol=1e-12)
    Le, He = delta_bounds_exact(D1_FR, Fr(9, 10))
    assert Le == [0, 0, Fr(9, 10), 0, Fr(2, 5), Fr(9, 10)]
    assert He == [Fr(1, 10), Fr(1, 10), 1, Fr(1, 10), Fr(3, 5), 1]


def test_g3_argmax_cells():
    sol = golden()
    assert sol.pi.tolist() == [2, 5]  # F: x^1 = x3 (>200k); M: x^1 = x6
    assert sol.theta.tolist() == [0, 3]  # F: x^0 = x1 (<100k); M: x^0 = x4
    _, res = golden_exact()
    assert (res[0]["x1"], res[0]["x0"], res[1]["x1"], res[1]["x0"]) == (2, 0, 5, 3)


EXPECTED_G4_G5 = {
    0: dict(
        beta0=Fr(108, 161), beta1=Fr(27, 44), betap=Fr(27, 40), betamin=Fr(3, 5), beta=Fr(27, 40)
    ),
    1: dict(
        beta0=Fr(81, 127), beta1=Fr(4, 9), betap=Fr(117, 200), betamin=Fr(9, 20), beta=Fr(81, 127)
    ),
}


def test_g4_g5_candidates_exact_and_vectorised():
    _, res = golden_exact()
    for g, exp in EXPECTED_G4_G5.items():
        betas = dict(res[g]["betas"], beta=res[g]["beta"])
        assert betas == exp  # exact rationals
    assert (res[0]["case"], res[1]["case"]) == ("betap", "beta0")
    sol = golden()
    assert sol.case.tolist() == ["betap", "beta0"]
    for g, exp in EXPECTED_G4_G5.items():
        for name, value in exp.items():
            assert getattr(sol, name)[g] == pytest.approx(float(value), abs=1e-12), name
    # M1, M0, S and the group masses (spec O5)
    np.testing.assert_allclose(sol.M1, [0.0675, 0.09], atol=1e-15)
    np.testing.assert_allclose(sol.M0, [0.27, 0.2025], atol=1e-15)
    np.testing.assert_allclose(sol.S, [0.1, 0.1825], atol=1e-15)
    np.testing.assert_allclose(sol.mass, [0.5, 0.5], atol=1e-15)
    assert sol.m.tolist() == [3, 3]


G6 = [Fr(1, 10), Fr(1, 50), Fr(9, 10), Fr(1, 10), Fr(2, 5), Fr(9, 10)]


def test_g6_announced_rule():
    d1t, _ = golden_exact()
    assert d1t == G6
    np.testing.assert_allclose(golden().d1_tilde, [float(x) for x in G6], atol=TOL)


def test_g7_g8_headline_confidence_100_to_67_5_percent():
    sol = golden()
    before = adversary_confidence(GROUP, P, D1)
    after = adversary_confidence(GROUP, P, sol.d1_tilde)
    assert before.tolist() == [1.0, pytest.approx(0.72, abs=1e-15)]  # C*: F 1, M 0.72
    assert before.max() == 1.0  # G7: global C* before
    assert sol.beta_global == pytest.approx(0.675, abs=1e-12)  # G7: 27/40
    assert after[0] == pytest.approx(0.675, abs=TOL)  # G8
    assert after[1] == pytest.approx(0.6377952755905512, abs=TOL)
    assert after.max() == pytest.approx(0.675, abs=TOL)
    # exactly, from the exact announced rule
    assert max_conf(P_FR[:3], G6[:3]) == Fr(27, 40)
    assert max_conf(P_FR[3:], G6[3:]) == Fr(81, 127)


def test_announced_per_cell_confidences_match_audit_table_o4():
    c1, c0 = confidences(P_FR[:3], G6[:3])
    assert c1 == [Fr(3, 10), Fr(1, 40), Fr(27, 40)]
    assert c0 == [Fr(27, 40), Fr(49, 160), Fr(3, 160)]  # 0.675, 0.30625, 0.01875
    c1, c0 = confidences(P_FR[3:], G6[3:])
    assert c1 == [Fr(9, 73), Fr(28, 73), Fr(36, 73)]
    assert c0 == [Fr(81, 127), Fr(42, 127), Fr(4, 127)]
    # the true (pre-ATR) confidences of section 4.5
    c1, c0 = confidences(P_FR[:3], D1_FR[:3])
    assert (c1, c0) == ([0, 0, 1], [Fr(12, 17), Fr(5, 17), 0])
    c1, c0 = confidences(P_FR[3:], D1_FR[3:])
    assert (c1, c0) == ([0, Fr(7, 15), Fr(8, 15)], [Fr(18, 25), Fr(7, 25), 0])


def test_g9_allocation_trace():
    L, H = delta_bounds_exact(D1_FR[:3], Fr(9, 10))
    beta, D, trace = paper_algorithm_literal(P_FR[:3], L, H)
    assert beta == Fr(27, 40)
    assert trace["min_prime"][1] == 0  # D~1min'(x2)
    assert trace["rhs"] == Fr(1, 400)  # RHS of (22) = 0.0025
    assert trace["capacity"][1] == Fr(1, 10)
    assert trace["allocation"][1] == Fr(1, 50)
    assert G6[:3] == D  # the printed algorithm is right here (no erratum applies)
    # the vectorised solver: x2 carries exactly the residual 0.0025 on top of D~1min'(x2) = 0
    sol = golden()
    assert P[1] * sol.d1_tilde[1] == pytest.approx(0.0025, abs=1e-15)


@pytest.mark.parametrize("alloc", ["paper", "nearest"])
def test_g10_both_allocation_modes(alloc):
    np.testing.assert_allclose(golden(alloc=alloc).d1_tilde, [float(x) for x in G6], atol=TOL)
    d1t, _ = golden_exact(alloc=alloc)
    assert d1t == G6


def test_fidelity_check_of_golden_output():
    d1t = golden().d1_tilde
    np.testing.assert_allclose(np.abs(d1t - D1), [0.1, 0.02, 0.1, 0.1, 0.1, 0.1], atol=1e-12)
    assert np.all(np.abs(d1t - D1) <= 0.1 + 1e-12)


# ------------------------------------------------------------------- T2: fairness numbers


def rate(P_, D_):
    return float(np.sum(P_ * D_) / np.sum(P_))


def test_t2_fairness_from_announced_rule():
    d1t = golden().d1_tilde
    F, M = slice(0, 3), slice(3, 6)
    r_f, r_m = rate(P[F], d1t[F]), rate(P[M], d1t[M])
    t_f, t_m = rate(P[F], D1[F]), rate(P[M], D1[M])
    assert (r_f, r_m) == (pytest.approx(0.2, abs=TOL), pytest.approx(0.365, abs=TOL))
    assert (t_f, t_m) == (pytest.approx(0.15, abs=TOL), pytest.approx(0.375, abs=TOL))
    assert abs(r_f - r_m) == pytest.approx(0.165, abs=TOL)
    assert abs(t_f - t_m) == pytest.approx(0.225, abs=TOL)
    assert abs(abs(r_f - r_m) - abs(t_f - t_m)) <= 0.2 + TOL  # Lemma 2: min{2(1-delta), 1}
    assert abs(r_f - t_f) <= 0.1 + TOL and abs(r_m - t_m) <= 0.1 + TOL  # rates within 1-delta
    csp = np.abs(d1t[F] - d1t[M])  # strata are single cells here
    np.testing.assert_allclose(csp, [0, 0.38, 0], atol=TOL)
    np.testing.assert_allclose(np.abs(D1[F] - D1[M]), [0, 0.5, 0], atol=TOL)
    assert r_f / r_m == pytest.approx(40 / 73, abs=TOL)  # PR 0.547945
    assert (r_f - 0.1) / (r_m + 0.1) == pytest.approx(0.215054, abs=5e-7)
    assert (r_f + 0.1) / (r_m - 0.1) == pytest.approx(1.132075, abs=5e-7)


# ---------------------------------------------------------- T3 and section 5.1: delta sweep

# delta, beta0, beta1, betap, beta*, case, D~1  (6 decimals as printed)
T3_FEMALE = [
    (1.000, 0.705882, 1.000000, 0.750000, 1.000000, "beta1", [0, 0, 1]),
    (0.990, 0.702543, 0.945860, 0.742500, 0.945860, "beta1", [0.01, 0.01, 0.99]),
    (0.975, 0.697466, 0.873134, 0.731250, 0.873134, "beta1", [0.025, 0.025, 0.975]),
    (0.950, 0.688822, 0.770270, 0.712500, 0.770270, "beta1", [0.05, 0.05, 0.95]),
    (0.925, 0.679939, 0.685185, 0.693750, 0.693750, "betap", [0.075, 0.065, 0.925]),
    (0.900, 0.670807, 0.613636, 0.675000, 0.675000, "betap", [0.1, 0.02, 0.9]),
    (0.875, 0.661417, 0.552632, 0.656250, 0.661417, "beta0", [0.125, 0, 0.875]),
    (0.850, 0.651757, 0.500000, 0.637500, 0.651757, "beta0", [0.15, 0, 0.85]),
    (0.800, 0.631579, 0.413793, 0.600000, 0.631579, "beta0", [0.2, 0, 0.8]),
    (0.750, 0.610169, 0.391304, 0.562500, 0.610169, "beta0", [0.25, 0, 0.75]),
    (0.700, 0.587413, 0.368421, 0.525000, 0.600000, "betamin", [0.3, 0.06, 0.7]),
    (0.650, 0.563177, 0.345133, 0.487500, 0.600000, "betamin", [0.35, 0.17, 0.65]),
    (0.600, 0.537313, 0.333333, 0.450000, 0.600000, "betamin", [0.4, 0.28, 0.6]),
    (0.500, 0.480000, 0.333333, 0.375000, 0.600000, "betamin", [0.5, 0.5, 0.5]),
    (0.000, 0.0, 0.0, 0.0, 0.600000, "betamin", [0.5, 0.5, 0.5]),
]
T3_MALE = [
    (1.000, 0.720000, 0.533333, 0.650000, 0.720000, "beta0", [0, 0.5, 1]),
    (0.990, 0.711661, 0.519685, 0.643500, 0.711661, "beta0", [0.01, 0.49, 0.99]),
    (0.975, 0.699203, 0.500000, 0.633750, 0.699203, "beta0", [0.025, 0.475, 0.975]),
    (0.950, 0.678571, 0.472050, 0.617500, 0.678571, "beta0", [0.05, 0.45, 0.95]),
    (0.925, 0.658103, 0.458204, 0.601250, 0.658103, "beta0", [0.075, 0.425, 0.925]),
    (0.900, 0.637795, 0.444444, 0.585000, 0.637795, "beta0", [0.1, 0.4, 0.9]),
    (0.875, 0.617647, 0.430769, 0.568750, 0.617647, "beta0", [0.125, 0.375, 0.875]),
    (0.850, 0.597656, 0.417178, 0.552500, 0.597656, "beta0", [0.15, 0.35, 0.85]),
    (0.800, 0.558140, 0.390244, 0.520000, 0.558140, "beta0", [0.2, 0.3, 0.8]),
    (0.750, 0.519231, 0.363636, 0.487500, 0.519231, "beta0", [0.25, 0.25, 0.75]),
    (0.700, 0.480916, 0.337349, 0.455000, 0.480916, "beta0", [0.3, 0.2, 0.7]),
    (0.650, 0.446565, 0.333333, 0.422500, 0.450000, "betamin", [0.35, 0.178571, 0.65]),
    (0.500, 0.409091, 0.333333, 0.325000, 0.450000, "betamin", [0.5, 0.5, 0.5]),
    (0.000, 0.0, 0.0, 0.0, 0.450000, "betamin", [0.5, 0.5, 0.5]),
]


@pytest.mark.parametrize(
    ("g", "row"), [(0, r) for r in T3_FEMALE] + [(1, r) for r in T3_MALE], ids=lambda v: str(v)
)
def test_t3_delta_sweep(g, row):
    delta, b0, b1, bp, beta, case, d1t = row
    sol = golden(delta)
    got = (sol.beta0[g], sol.beta1[g], sol.betap[g], sol.beta[g])
    np.testing.assert_allclose(got, (b0, b1, bp, beta), atol=5e-7)
    assert sol.case[g] == case
    # D~ is normative outside the beta_min case; there (the spec leaves it open), these are the
    # flat level's values (module docstring of privfair.components.transparency.scheme): at delta <= 0.5
    # every cell's interval holds 1/2 and the whole group announces it (posterior = prior); at
    # 0.6-0.7 the level misses the P-maximal cell's interval and S is the nearest feasible mass
    np.testing.assert_allclose(sol.d1_tilde[3 * g : 3 * g + 3], d1t, atol=5e-7)
    printed = max(b0, b1, bp)  # what the printed Theorem 1 claims
    if case == "betamin":
        assert printed < beta - 1e-3  # E1: the printed formula is too low here


def closed_form_female(d):
    if d >= 13 / 14:
        return 0.075 * d / (0.425 - 0.35 * d)
    if d >= 8 / 9:
        return 0.75 * d
    if d >= 8 / 11:
        return 0.3 * d / (0.225 * d + 0.2)
    return 0.6


def closed_form_male(d):
    return 0.225 * d / (0.3625 - 0.05 * d) if d >= 29 / 44 else 0.45


def test_section_5_1_closed_form_trade_off_curves():
    for d in np.linspace(0, 1, 401):
        sol = golden(float(d))
        assert sol.beta[0] == pytest.approx(closed_form_female(d), abs=1e-12)
        assert sol.beta[1] == pytest.approx(closed_form_male(d), abs=1e-12)
        assert sol.beta_global == pytest.approx(closed_form_female(d), abs=1e-12)


def test_breakpoints_of_the_female_curve():
    for d, beta in ((13 / 14, 0.696429), (8 / 9, 0.666667), (8 / 11, 0.6)):
        assert golden(d).beta[0] == pytest.approx(beta, abs=5e-7)


# ------------------------------------------------------------------------ errata E1-E3


def test_t4_e1_missing_beta_min_term():
    """delta = 0.7, female group: the printed formula claims 0.587413, its output leaks 12/19,
    the corrected optimum is 0.6 = beta_min and the announced mapping achieves it."""
    Pf, Df = P_FR[:3], D1_FR[:3]
    L, H = delta_bounds_exact(Df, Fr(7, 10))
    assert ([0, 0, Fr(7, 10)], [Fr(3, 10), Fr(3, 10), 1]) == (L, H)
    claimed, D_lit, _ = paper_algorithm_literal(Pf, L, H)
    assert claimed == Fr(84, 143)  # 0.587413, the beta0 branch
    assert D_lit == [Fr(3, 10), 0, Fr(7, 10)]
    assert max_conf(Pf, D_lit) == Fr(12, 19)  # 0.631579 > claimed: the printed scheme leaks
    assert max_conf(Pf, D_lit) > claimed

    res = solve_group_reference(Pf, L, H, Df, tol=0)
    assert res["betas"] == dict(
        beta0=Fr(84, 143), beta1=Fr(7, 19), betap=Fr(21, 40), betamin=Fr(3, 5)
    )
    assert (res["beta"], res["case"]) == (Fr(3, 5), "betamin")
    assert (res["M1"], res["M0"]) == (Fr(21, 400), Fr(21, 100))

    Lf, Hf = fidelity_bounds(D1[:3], "delta", 0.7)
    sol = solve(GROUP[:3], P[:3], Lf, Hf, D1[:3])
    assert sol.case.tolist() == ["betamin"]
    assert sol.beta[0] == pytest.approx(0.6, abs=1e-15)
    assert sol.beta0[0] == pytest.approx(84 / 143, abs=1e-12)
    assert sol.beta1[0] == pytest.approx(7 / 19, abs=1e-12)
    assert sol.betap[0] == pytest.approx(0.525, abs=1e-12)
    # beta_min: the flat level (0.36, where x1 and x3 sit at their ends 0.3 and 0.7) misses
    # the P-maximal x1's interval [0, 0.3], so S is the feasible mass nearest to it: f_r = 0.15
    assert sol.S[0] == pytest.approx(0.15, abs=1e-12)
    np.testing.assert_allclose(sol.d1_tilde, [0.3, 0.06, 0.7], atol=TOL)
    recomputed = adversary_confidence(GROUP[:3], P[:3], sol.d1_tilde)
    assert recomputed[0] <= 0.6 + 1e-12
    assert recomputed[0] == pytest.approx(0.6, abs=TOL)
    c1, c0 = confidences(P[:3].tolist(), sol.d1_tilde.tolist())
    np.testing.assert_allclose(c1, [0.6, 0.05, 0.35], atol=TOL)
    np.testing.assert_allclose(c0, [0.6, 0.335714, 0.064286], atol=5e-7)
    # exact: S = f_r = S_hi = 3/20, D~ = [3/10, 3/50, 7/10]; the group's announced rate S / N
    # = 0.3 is not its true rate 0.15 (the spec's S = clamp(S_true) would announce 0.15)
    assert res["S"] == Fr(3, 20) and res["Dt1"] == [Fr(3, 10), Fr(3, 50), Fr(7, 10)]


def test_t5_e2_allocation_when_x0_equals_x1():
    Pt = [Fr(1, 2), Fr(3, 10), Fr(1, 5)]
    L, H = [Fr(1, 2), Fr(0), Fr(0)], [Fr(1, 2), Fr(1), Fr(1)]
    claimed, D_lit, trace = paper_algorithm_literal(Pt, L, H)
    assert claimed == Fr(1, 2)
    assert trace["resid"] == Fr(-1, 20)  # -0.05: the pinned cell counted twice
    assert D_lit == [Fr(1, 2), 0, 0]
    assert max_conf(Pt, D_lit) == 1  # the literal output breaks privacy completely

    res = solve_group_reference(Pt, L, H, tol=0)
    assert res["x1"] == res["x0"] == 0
    assert res["betas"]["beta0"] == res["betas"]["beta1"] == Fr(5, 14)
    assert res["betas"]["betap"] == res["betas"]["betamin"] == Fr(1, 2)
    assert (res["beta"], res["case"], res["S"]) == (Fr(1, 2), "betap", Fr(1, 2))
    assert res["Dt1"] == [Fr(1, 2), Fr(5, 6), 0]
    assert confidences(Pt, res["Dt1"]) == ([Fr(1, 2), Fr(1, 2), 0], [Fr(1, 2), Fr(1, 10), Fr(2, 5)])

    g = np.zeros(3, dtype=np.int64)
    sol = solve(g, [0.5, 0.3, 0.2], [0.5, 0, 0], [0.5, 1, 1])
    assert sol.case.tolist() == ["betap"] and sol.pi[0] == sol.theta[0] == 0
    assert sol.beta[0] == 0.5
    np.testing.assert_allclose(sol.d1_tilde, [0.5, 5 / 6, 0], atol=TOL)
    assert adversary_confidence(g, [0.5, 0.3, 0.2], sol.d1_tilde)[0] == pytest.approx(0.5, abs=TOL)


def test_e3_zero_over_zero_is_zero():
    sol = golden(0.0)  # bounds [0, 1]: M1 = M0 = 0
    assert sol.beta0.tolist() == [0.0, 0.0] and sol.beta1.tolist() == [0.0, 0.0]
    assert sol.betap.tolist() == [0.0, 0.0]
    np.testing.assert_allclose(sol.beta, [0.6, 0.45], atol=1e-15)  # beta_min (Lemma 5)
    # all lower bounds of outcome 1 zero (every D_1 <= 1 - delta), outcome 0 informative
    g = np.zeros(3, dtype=np.int64)
    L, H = fidelity_bounds([0.0, 0.1, 0.2], "delta", 0.7)
    sol = solve(g, [0.2, 0.3, 0.5], L, H, [0.0, 0.1, 0.2])
    assert sol.M1[0] == 0 and sol.beta1[0] == 0
    assert np.isfinite(sol.beta).all()
    conf = adversary_confidence(g, [0.2, 0.3, 0.5], sol.d1_tilde, tol=TOL)
    assert conf[0] == pytest.approx(sol.beta[0], abs=TOL)


# ------------------------------------------------------------------- T6, T7, T9, T10


POP = np.array([139, 9, 2, 117, 18, 5], dtype=float)


def test_t6_full_table_1_population():
    p = POP / POP.sum()
    before = adversary_confidence(GROUP, p, D1)
    np.testing.assert_allclose(before, [1.0, 117 / 126], atol=1e-12)
    rows = {
        0.9: (
            [125.1 / 134.3, 0.90308748],
            [0.4, 0.37113402],
            [0.846, 0.80357143],
            [139 / 150, 117 / 140],
            [0.1, 0, 0.9, 0.1, 0.4, 0.9],
        ),
        0.95: (
            [0.93552958, 0.91632317],
            [0.44705882, 0.42744063],
            [0.893, 0.85178571],
            [139 / 150, 117 / 140],
            [0.05, 0, 0.95, 0.05, 0.45, 0.95],
        ),
    }
    for delta, (b0, b1, bp, bmin, d1t) in rows.items():
        L, H = fidelity_bounds(D1, "delta", delta)
        sol = solve(GROUP, p, L, H, D1)
        assert sol.case.tolist() == ["beta0", "beta0"]
        assert sol.pi.tolist() == [2, 4]  # M: x^1 is 100k-200k (7.2 > 4.5)
        assert sol.theta.tolist() == [0, 3]
        np.testing.assert_allclose(sol.beta0, b0, atol=5e-9)
        np.testing.assert_allclose(sol.beta1, b1, atol=5e-9)
        np.testing.assert_allclose(sol.betap, bp, atol=5e-9)
        np.testing.assert_allclose(sol.betamin, bmin, atol=1e-12)
        np.testing.assert_allclose(sol.beta, sol.beta0, atol=0)
        np.testing.assert_allclose(sol.d1_tilde, d1t, atol=TOL)
        conf = adversary_confidence(GROUP, p, sol.d1_tilde)
        np.testing.assert_allclose(conf, sol.beta, atol=TOL)
    assert solve(GROUP, p, *fidelity_bounds(D1, "delta", 0.9), D1).beta_global == pytest.approx(
        125.1 / 134.3, abs=1e-12
    )
    # fairness at delta = 0.9 with these counts (announced vs true), population-weighted
    d1t = np.array(rows[0.9][4])
    F, M = slice(0, 3), slice(3, 6)
    assert rate(POP[F], d1t[F]) == pytest.approx(0.104667, abs=5e-7)
    assert rate(POP[M], d1t[M]) == pytest.approx(0.167143, abs=5e-7)
    assert rate(POP[F], d1t[F]) / rate(POP[M], d1t[M]) == pytest.approx(0.626211, abs=5e-7)
    assert rate(POP[F], D1[F]) == pytest.approx(2 / 150, abs=1e-12)  # T8 / Remark 1
    assert rate(POP[M], D1[M]) == pytest.approx(0.1, abs=1e-12)


def test_t8_section_3_leaks_under_the_true_rule():
    pop = [Fr(c) for c in (139, 9, 2, 117, 18, 5)]
    c1_f, _ = confidences(pop[:3], D1_FR[:3])
    c1_m, c0_m = confidences(pop[3:], D1_FR[3:])
    assert c1_f[2] == 1  # any approved woman earns >200k, with certainty
    assert c1_m[2] == Fr(5, 14)  # 0.357143 for an approved man (prior 5/140)
    assert max(c0_m) == Fr(117, 126)
    census = [0.842, 0.123, 0.035]  # male census shares (side information)
    c1_census, _ = confidences(census, [0.0, 0.5, 1.0])
    assert c1_census[2] == pytest.approx(0.362694, abs=5e-7)


def largest_delta(g: int, target: float) -> float | None:
    """Mode B for one golden group: the largest delta with beta*_g(delta) <= target (C11 makes
    the bisection valid); None when even delta = 0 misses the target."""
    if golden(1.0).beta[g] <= target:
        return 1.0
    if golden(0.0).beta[g] > target:
        return None
    a, b = 0.0, 1.0
    for _ in range(60):
        c = (a + b) / 2
        a, b = (c, b) if golden(c).beta[g] <= target + 1e-15 else (a, c)
    return a


@pytest.mark.parametrize(
    ("target", "delta_f", "delta_m", "beta_f", "case_f", "beta_m"),
    [
        (1.0, 1.0, 1.0, 1.0, "beta1", 0.72),
        (0.75, 17 / 18, 1.0, 0.75, "beta1", 0.674009),
        (0.7, 119 / 128, 0.25375 / 0.26, 0.7, "beta1", 0.661928),
        (0.65, 104 / 123, 0.915049, 0.65, "beta0", 0.594097),
        (0.6, 8 / 11, 0.852941, 0.6, "beta0", 0.501742),
    ],
)
def test_t7_target_beta(target, delta_f, delta_m, beta_f, case_f, beta_m):
    assert largest_delta(0, target) == pytest.approx(delta_f, abs=1e-9)
    assert largest_delta(1, target) == pytest.approx(delta_m, abs=5e-7)
    sol = golden(delta_f)
    assert sol.beta[0] == pytest.approx(beta_f, abs=1e-9)
    assert sol.case[0] == case_f
    assert sol.beta[1] == pytest.approx(beta_m, abs=5e-7)
    if target == 0.7:
        np.testing.assert_allclose(sol.d1_tilde[:3], [9 / 128, 9 / 128, 119 / 128], atol=TOL)


def test_t7_infeasible_target_blocked_by_female_group():
    assert largest_delta(0, 0.5) is None  # beta_min,F = 0.6 > 0.5 (Lemma 5)
    assert largest_delta(1, 0.5) == pytest.approx(0.725, abs=1e-9)


def test_t9_single_cell_group():
    sol = solve(np.array([7]), [0.3], [0.2], [0.6])
    assert sol.beta.tolist() == [1.0] and sol.case.tolist() == ["beta0"]
    assert sol.beta0[0] == sol.beta1[0] == sol.betamin[0] == 1.0
    assert sol.d1_tilde.tolist() == [pytest.approx(0.6, abs=1e-15)]
    # the other two branches of a one-cell group (spec section 3.8)
    assert solve(np.array([7]), [0.3], [0.2], [1.0]).d1_tilde.tolist() == [0.2]  # beta1: L
    sol = solve(np.array([7]), [0.3], [0.0], [1.0], [0.4])
    assert sol.case.tolist() == ["betamin"] and sol.d1_tilde.tolist() == [0.5]  # flat level


def test_t10_scale_invariance():
    L, H = fidelity_bounds(D1, "delta", 0.9)
    a = solve(GROUP, P, L, H, D1)
    b = solve(GROUP, np.array(COUNTS, dtype=float), L, H, D1)
    c = solve(GROUP, P * np.array([1e-6, 1e-6, 1e-6, 3e4, 3e4, 3e4]), L, H, D1)
    for other in (b, c):
        np.testing.assert_allclose(other.beta, a.beta, atol=1e-12)
        np.testing.assert_allclose(other.d1_tilde, a.d1_tilde, atol=1e-12)
        assert other.case.tolist() == a.case.tolist()


# ------------------------------------------------------------------------ edge cases (3.8)


def test_delta_one_announces_the_true_rule():
    sol = golden(1.0)
    np.testing.assert_array_equal(sol.d1_tilde, D1)
    np.testing.assert_allclose(sol.beta, adversary_confidence(GROUP, P, D1), atol=1e-12)
    np.testing.assert_allclose(sol.beta, [1.0, 0.72], atol=1e-12)  # C* (Lemma 4)


def test_alpha_fidelity_freezes_deterministic_cells():
    L, H = fidelity_bounds(D1, "alpha", 0.9)
    np.testing.assert_array_equal(L[[0, 1, 2, 3, 5]], D1[[0, 1, 2, 3, 5]])
    np.testing.assert_array_equal(H[[0, 1, 2, 3, 5]], D1[[0, 1, 2, 3, 5]])
    sol = solve(GROUP, P, L, H, D1)
    np.testing.assert_array_equal(sol.d1_tilde[:3], D1[:3])  # female: nothing can move
    assert sol.beta[0] == 1.0  # unprotectable under alpha-fidelity
    assert sol.beta[1] < 0.72  # male: x5 (D = 0.5) can move
    d0t = 1 - sol.d1_tilde
    d0 = 1 - D1
    assert np.all(sol.d1_tilde >= 0.9 * D1 - 1e-12) and np.all(sol.d1_tilde <= D1 / 0.9 + 1e-12)
    assert np.all(d0t >= 0.9 * d0 - 1e-12) and np.all(d0t <= d0 / 0.9 + 1e-12)


def test_zero_mass_cells_are_excluded_and_announce_the_true_rule():
    g = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    p = np.array([0.3, 0.0, 0.125, 0.075, 0.225, 0.175, 0.1, 0.0])
    d1 = np.array([0, 0.3, 0, 1, 0, 0.5, 1, 0.7])
    L, H = fidelity_bounds(d1, "delta", 0.9)
    sol = solve(g, p, L, H, d1)
    keep = p > 0
    np.testing.assert_allclose(sol.d1_tilde[keep], [float(x) for x in G6], atol=TOL)
    assert sol.d1_tilde[1] == 0.3 and sol.d1_tilde[7] == 0.7
    assert sol.m.tolist() == [3, 3]
    assert sol.pi.tolist() == [3, 6] and sol.theta.tolist() == [0, 4]  # input indices
    # bounds mode with a zero-mass cell whose D lies outside its bounds: clamped, so C2 holds
    sol = solve(np.array([0, 0, 0]), [1.0, 0.0, 1.0], [0.2, 0.5, 0.0], [0.4, 0.6, 1.0], [0, 1, 0])
    assert sol.d1_tilde[1] == 0.6


def test_empty_group_is_reported_and_skipped():
    g = np.array([3, 3, 5, 5])
    sol = solve(g, [1.0, 2.0, 0.0, 0.0], [0, 0, 0, 0], [1, 1, 1, 1], [0.5, 0.5, 0.2, 0.9])
    assert sol.groups.tolist() == [3, 5]
    assert sol.case.tolist() == ["betamin", "empty"]
    assert np.isnan(sol.beta[1]) and sol.pi[1] == -1 and sol.m[1] == 0
    assert sol.beta_global == pytest.approx(2 / 3)
    assert sol.d1_tilde[2:].tolist() == [0.2, 0.9]
    assert np.isnan(adversary_confidence(g, [1.0, 2.0, 0.0, 0.0], sol.d1_tilde)[1])


def test_unsorted_and_negative_group_labels():
    order = np.array([4, 0, 5, 2, 3, 1])  # interleave the two golden groups
    labels = np.where(GROUP == 0, 17, -4)
    L, H = fidelity_bounds(D1, "delta", 0.9)
    sol = solve(labels[order], P[order], L[order], H[order], D1[order])
    assert sol.groups.tolist() == [-4, 17]
    inverse = np.argsort(order)
    np.testing.assert_allclose(sol.d1_tilde[inverse], [float(x) for x in G6], atol=TOL)
    assert sol.case.tolist() == ["beta0", "betap"]
    assert sol.pi.tolist() == [int(inverse[5]), int(inverse[2])]
    assert sol.cell_group.tolist() == [0 if lab == -4 else 1 for lab in labels[order]]


@pytest.mark.parametrize(
    "labels",
    [
        np.array([5, -3, 5, 9, -3, 9, 5], dtype=np.int8),
        np.array([2**64 - 1, 2**63 + 5, 2**64 - 1, 7, 2**63 + 5, 7, 7], dtype=np.uint64),
        np.array([2**62, -(2**62), 2**62, 0, -(2**62), 0, 0], dtype=np.int64),  # sort fallback
        np.array([-128, 127, -128, 0, 127, 0, 0], dtype=np.int8),
    ],
)
def test_group_label_dtypes_and_ranges(labels):
    rng = np.random.default_rng(3)
    p = rng.integers(1, 9, labels.shape[0]).astype(float)
    d1 = rng.choice([0.0, 0.5, 1.0], labels.shape[0])
    L, H = fidelity_bounds(d1, "delta", 0.8)
    sol = solve(labels, p, L, H, d1)
    assert sol.groups.dtype == labels.dtype
    assert sol.groups.tolist() == sorted(set(labels.tolist()))
    assert [sol.groups[i] for i in sol.cell_group] == labels.tolist()
    ref_d1t, ref = solve_reference(labels.tolist(), p.tolist(), L.tolist(), H.tolist(), d1.tolist())
    assert_matches_reference(sol, ref_d1t, ref, p)


def test_groups_of_very_different_sizes_match_reference():
    rng = np.random.default_rng(5)
    sizes = [1, 2, 3, 5, 9, 17, 40, 300]
    g = np.repeat(np.arange(len(sizes)), sizes)
    n = g.shape[0]
    p = rng.integers(0, 9, n).astype(float)
    d1 = rng.choice([0, 0, 1, 0.5, 0.3, 0.8], n)
    for delta in (0.0, 0.5, 0.8, 0.95):
        L, H = fidelity_bounds(d1, "delta", delta)
        for alloc in ("paper", "nearest"):
            sol = solve(g, p, L, H, d1, alloc)
            ref_d1t, ref = solve_reference(
                g.tolist(), p.tolist(), L.tolist(), H.tolist(), d1.tolist(), alloc
            )
            assert_matches_reference(sol, ref_d1t, ref, p)


# ------------------------------------------------------- the betamin case reads only the bounds


def test_betamin_announces_the_flat_level_not_the_true_rate():
    """Female group at delta = 0.7 (T4): the spec's SELECT_S (S = clamp(S_true)) announces the
    true rate 0.15; the flat level announces 0.3, and the optimum (0.6) holds all the same.
    At delta = 0.5 every cell's interval holds 1/2: the group announces 1/2 everywhere and
    every posterior is the prior (the report says nothing about a woman's income bracket)."""
    Lf, Hf = fidelity_bounds(D1[:3], "delta", 0.7)
    sol = solve(GROUP[:3], P[:3], Lf, Hf, D1[:3])
    true_rate = float(P[:3] @ D1[:3] / P[:3].sum())
    assert true_rate == pytest.approx(0.15)
    assert sol.S[0] / sol.mass[0] == pytest.approx(0.3, abs=1e-12)
    assert adversary_confidence(GROUP[:3], P[:3], sol.d1_tilde)[0] == pytest.approx(0.6, abs=TOL)
    sol = golden(0.5)
    np.testing.assert_allclose(sol.d1_tilde, 0.5, atol=1e-15)
    c1, c0 = confidences(P[:3].tolist(), sol.d1_tilde[:3].tolist())
    np.testing.assert_allclose(c1, P[:3] / 0.5, atol=TOL)
    np.testing.assert_allclose(c0, P[:3] / 0.5, atol=TOL)


def test_a_rule_announced_at_the_flat_level_is_hidden_within_its_interval():
    """A betamin group whose middle cell announces the flat level 0.32 (the other two sit at
    the ends 0.2 and 0.4 of their intervals): any true rule of that cell which keeps 0.32 inside
    its interval and the case at betamin gives the same announcement, bit for bit, though the
    group's true rate moves with it."""
    g = np.zeros(3, dtype=np.int64)
    p = np.array([0.2, 0.5, 0.3])

    def run(d_mid):
        d = np.array([0.0, d_mid, 0.6])
        return solve(g, p, *fidelity_bounds(d, "delta", 0.8), d)

    base = run(0.3)
    assert base.case.tolist() == ["betamin"]
    np.testing.assert_allclose(base.d1_tilde, [0.2, 0.32, 0.4], atol=1e-15)
    for d_mid in np.linspace(0.13, 0.5, 38):
        other = run(float(d_mid))
        np.testing.assert_array_equal(other.d1_tilde, base.d1_tilde)
        np.testing.assert_array_equal(other.S, base.S)


def test_select_s_is_well_conditioned_when_beta_is_close_to_one():
    """beta_min = 1/(1 + 1e-9) dominates and only S = N is feasible (x^A must announce 1, or it
    alone carries outcome 0: confidence 1); the flat level is 1 and S = N. The spec's
    G(S) = S - sum max(P L, P - beta(N - S)) cancels catastrophically here and its bisection for
    g_l stops ~1.7e-7 short of N (the reference transcription does); the solver evaluates the
    same function as sum min(P(1-L), beta T) - T, T = N - S, and finds g_l = N."""
    g = np.array([0, 0])
    p, lo, hi, d1 = [1.0, 1e-9], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]
    sol = solve(g, p, lo, hi, d1)
    assert sol.case.tolist() == ["betamin"]
    assert sol.S[0] == sol.mass[0]
    assert sol.d1_tilde.tolist() == [1.0, 1.0]
    assert adversary_confidence(g, p, sol.d1_tilde)[0] == pytest.approx(sol.beta[0], abs=1e-15)
    # the left end g_l of the feasible range, which S is clamped to when the flat level lies
    # below it: the solver's bisection reaches N, the spec's literal G stops short of it
    from privfair.components.transparency.scheme import _bisect_left_end, _Cells

    cells = _Cells(np.array(p), np.array(lo), np.array(hi), sol.beta, sol.mass, [0], [2])
    assert _bisect_left_end(cells, sol.S_lo, sol.S_hi)[0] == sol.mass[0]
    _, ref = solve_reference([0, 0], p, lo, hi, d1)
    assert sol.mass[0] - ref[0]["g_l"] > 1e-8  # the literal float transcription is off


def test_select_s_bisection_is_vectorised_across_groups(monkeypatch):
    """C10: the flat level's bisection and SELECT_S run for all the groups that need them at
    once (three bisections at most: the level, f_r, g_l), so the number of evaluations is
    bounded by the bisection length, not by the number of groups."""
    import privfair.components.transparency.scheme as scheme

    calls = {"F": 0, "G": 0, "bisect": 0}
    bisect = scheme._bisect

    def counted_bisect(*args):
        calls["bisect"] += 1
        return bisect(*args)

    monkeypatch.setattr(scheme, "_bisect", counted_bisect)
    for name in ("F", "G"):
        original = getattr(scheme._Cells, name)

        def counted(self, S, _f=original, _n=name):
            calls[_n] += 1
            return _f(self, S)

        monkeypatch.setattr(scheme._Cells, name, counted)
    rng = np.random.default_rng(11)
    sizes = rng.integers(2, 9, 3000)
    g = np.repeat(np.arange(sizes.shape[0]), sizes)
    p = rng.random(g.shape[0]) + 0.01
    d1 = rng.random(g.shape[0])
    L, H = fidelity_bounds(d1, "delta", 0.6)
    sol = solve(g, p, L, H)
    assert (sol.case == "betamin").sum() > 1000
    assert calls["F"] + calls["G"] <= 2 * (scheme.BISECTION_ITERATIONS + 2)
    assert calls["bisect"] <= 3


# ------------------------------------------------------------------------ validation (C0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(group=np.array([0.0, 1.0])), "group"),
        (dict(group=np.array([], dtype=int), p=[], lo=[], hi=[]), "group"),
        (dict(p=[0.5, -0.1]), "'p'"),
        (dict(p=[0.5, np.nan]), "'p'"),
        (dict(p=[0.0, 0.0]), "'p'"),
        (dict(p=[0.5]), "'p'"),
        (dict(lo=[0.5, 0.6], hi=[0.4, 0.9]), "lo/hi"),
        (dict(lo=[-0.1, 0.0]), "'lo'"),
        (dict(lo=None), "'lo'"),
        (dict(hi=[[0.5, 1.0]]), "'hi'"),
        (dict(hi=[0.5, 1.5]), "'hi'"),
        (dict(d1=[0.5, 1.2]), "'d1'"),
        (dict(d1=[0.5]), "'d1'"),
        (dict(alloc="greedy"), "'alloc'"),
        (dict(tau=-1.0), "'tau'"),
    ],
)
def test_solve_rejects_invalid_input(kwargs, field):
    args = dict(group=np.array([0, 0]), p=[0.5, 0.5], lo=[0.0, 0.0], hi=[1.0, 1.0], d1=None)
    args.update(kwargs)
    with pytest.raises(ValueError, match=field) as err:
        solve(**args)
    assert isinstance(err.value, InputError)


@pytest.mark.parametrize(
    ("args", "kwargs", "field"),
    [
        (([0.5], "delta", 1.1), {}, "delta"),
        (([0.5], "delta", -0.1), {}, "delta"),
        (([0.5], "alpha", 0.0), {}, "alpha"),
        (([0.5], "alpha", 1.5), {}, "alpha"),
        (([1.5], "delta", 0.9), {}, "d1"),
        (([0.5], "gamma", 0.9), {}, "mode"),
        ((None, "delta", 0.9), {}, "d1"),
        (([0.5], "delta", 0.9), dict(d1_min=[0.1]), "d1_min"),
        (([0.5], "bounds", 0.9), dict(d1_min=[0.1], d1_max=[0.2]), "value"),
        (([0.5], "bounds"), dict(d1_min=[0.1]), "d1_max"),
        (([0.5], "bounds"), dict(d1_min=[0.6], d1_max=[0.2]), "L <= H"),
        (([0.5], "bounds"), dict(d1_min=[0.1], d1_max=[0.9], d0_min=[0.95]), "L <= H"),
    ],
)
def test_fidelity_bounds_rejects_invalid_input(args, kwargs, field):
    with pytest.raises(ValueError, match=field):
        fidelity_bounds(*args, **kwargs)


def test_fidelity_bounds_modes():
    d = np.array([0.0, 0.3, 1.0])
    L, H = fidelity_bounds(d, "delta", 0.8)
    np.testing.assert_allclose(L, [0, 0.1, 0.8], atol=1e-15)
    np.testing.assert_allclose(H, [0.2, 0.5, 1.0], atol=1e-15)
    L, H = fidelity_bounds(d, "alpha", 0.5)
    np.testing.assert_allclose(L, [0, 0.15, 1], atol=1e-15)  # max(0.15, 1 - min(1, 1.4))
    np.testing.assert_allclose(H, [0, 0.6, 1], atol=1e-15)  # min(1, 0.6, 1 - 0.35)
    L, H = fidelity_bounds(d, "alpha", 1.0)
    np.testing.assert_array_equal(L, d)
    np.testing.assert_array_equal(H, d)
    L, H = fidelity_bounds(
        None, "bounds", d1_min=[-0.2, 0.1], d1_max=[0.5, 1.3], d0_min=[0.6, 0.0], d0_max=0.7
    )
    np.testing.assert_allclose(L, [0.3, 0.3], atol=1e-15)  # max(d1_min, 1 - d0_max, 0)
    np.testing.assert_allclose(H, [0.4, 1.0], atol=1e-15)  # min(d1_max, 1 - d0_min, 1)


# ------------------------------------------------------------------------ property tests


def assert_matches_reference(sol, ref_d1t, ref, p, atol=TOL):
    p = np.asarray(p, dtype=float)
    for gi, lab in enumerate(sol.groups.tolist()):
        r = ref[lab]
        if r is None:
            assert sol.case[gi] == "empty"
            continue
        assert sol.beta[gi] == pytest.approx(r["beta"], abs=atol)
        for name in CASES:
            assert getattr(sol, name)[gi] == pytest.approx(r["betas"][name], abs=atol)
        assert sol.case[gi] == r["case"]
        assert (sol.pi[gi], sol.theta[gi]) == (r["x1"], r["x0"])
        assert sol.S[gi] == pytest.approx(r["S"], abs=atol * sol.mass[gi])
    # masses, relative to their group's mass (D~ = mass / P amplifies rounding for tiny P)
    n_g = sol.mass[sol.cell_group]
    ok = n_g > 0
    got = p * sol.d1_tilde
    want = p * np.array(ref_d1t, dtype=float)
    np.testing.assert_allclose(got[ok] / n_g[ok], want[ok] / n_g[ok], atol=atol)
    np.testing.assert_allclose(sol.d1_tilde[~ok], np.array(ref_d1t, dtype=float)[~ok], atol=0)


@st.composite
def problems(
    draw, max_groups=5, max_m=8, grid=True, modes=("delta", "alpha", "bounds"), min_mass=0.0
):
    """Random cells in a few groups (interleaved, arbitrary labels), with zero masses, and
    fidelity bounds of a random mode. ``grid``: masses are small integers and rules/bounds
    multiples of 1/20 (many ties and degenerate cases); otherwise arbitrary floats, with the
    non-zero masses at least ``min_mass``."""
    n_groups = draw(st.integers(1, max_groups))
    labels = draw(
        st.lists(st.integers(-(10**6), 10**6), min_size=n_groups, max_size=n_groups, unique=True)
    )
    sizes = [draw(st.integers(1, max_m)) for _ in range(n_groups)]
    group = np.repeat(labels, sizes).astype(np.int64)
    n = group.shape[0]
    if grid:
        p = np.array(draw(st.lists(st.integers(0, 12), min_size=n, max_size=n)), dtype=float)
        d1 = np.array(draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))) / 20
    else:
        unit = st.floats(0, 1, allow_nan=False)
        mass = st.floats(min_mass, 1) if min_mass else unit
        p = np.array(draw(st.lists(st.one_of(st.just(0.0), mass), min_size=n, max_size=n)))
        d1 = np.array(
            draw(st.lists(st.one_of(st.sampled_from([0.0, 1.0]), unit), min_size=n, max_size=n))
        )
    if not p.sum() > 0:
        p[0] = 1.0
    mode = draw(st.sampled_from(modes))
    value = None
    if mode == "delta":
        value = draw(st.integers(0, 20)) / 20 if grid else draw(st.floats(0, 1))
        L, H = fidelity_bounds(d1, "delta", value)
    elif mode == "alpha":
        value = draw(st.integers(1, 20)) / 20 if grid else draw(st.floats(0.01, 1))
        L, H = fidelity_bounds(d1, "alpha", value)
    else:
        if grid:
            a = np.array(draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))) / 20
            b = np.array(draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))) / 20
        else:
            a = np.array(draw(st.lists(st.floats(0, 1), min_size=n, max_size=n)))
            b = np.array(draw(st.lists(st.floats(0, 1), min_size=n, max_size=n)))
        L, H = np.minimum(a, b), np.maximum(a, b)
    perm = np.array(draw(st.permutations(range(n))))
    return dict(
        group=group[perm], p=p[perm], lo=L[perm], hi=H[perm], d1=d1[perm], mode=mode, value=value
    )


def _solve(pb, **kw):
    return solve(pb["group"], pb["p"], pb["lo"], pb["hi"], pb["d1"], **kw)


def _reference(pb, alloc="paper", with_d1=True):
    return solve_reference(
        pb["group"].tolist(),
        pb["p"].tolist(),
        pb["lo"].tolist(),
        pb["hi"].tolist(),
        pb["d1"].tolist() if with_d1 else None,
        alloc,
    )


@SETTINGS
@given(pb=problems(), alloc=st.sampled_from(["paper", "nearest"]), with_d1=st.booleans())
def test_vectorised_equals_reference_grid(pb, alloc, with_d1):
    d1 = pb["d1"] if with_d1 else None
    sol = solve(pb["group"], pb["p"], pb["lo"], pb["hi"], d1, alloc)
    ref_d1t, ref = _reference(pb, alloc, with_d1)
    assert_matches_reference(sol, ref_d1t, ref, pb["p"])


@SETTINGS
@given(pb=problems(grid=False, min_mass=1e-3), alloc=st.sampled_from(["paper", "nearest"]))
def test_vectorised_equals_reference_floats(pb, alloc):
    # masses spanning many orders of magnitude make the reference's G(S) ill-conditioned (see
    # test_select_s_is_well_conditioned_when_beta_is_close_to_one), so they are kept >= 1e-3
    sol = _solve(pb, alloc=alloc)
    ref_d1t, ref = _reference(pb, alloc)
    assert_matches_reference(sol, ref_d1t, ref, pb["p"])


def check_contracts(pb, sol, exact_conf=True, absent=TOL):
    """C1-C7 recomputed from the inputs and the announced rule only (spec section 6). An
    outcome whose group mass is at most ``absent * N_g`` is left out of the confidence (A9)."""
    g, p, L, H, d1 = pb["group"], pb["p"], pb["lo"], pb["hi"], pb["d1"]
    d1t = sol.d1_tilde
    # C1 / bounds: a valid distribution inside [L, H] (exactly: the solver clamps)
    assert np.all((d1t >= L) & (d1t <= H))
    # C2: fidelity per outcome
    if pb["mode"] == "delta":
        slack = 1 - pb["value"]
        assert np.all(np.abs(d1t - d1) <= slack + 1e-12)
        assert np.all(np.abs((1 - d1t) - (1 - d1)) <= slack + 1e-12)
    elif pb["mode"] == "alpha":
        a = pb["value"]
        for dt, d in ((d1t, d1), (1 - d1t, 1 - d1)):
            assert np.all(dt >= a * d - 1e-12) and np.all(dt <= d / a + 1e-12)
    populated = sol.case != "empty"
    # C3 / C4: the recomputed worst-case confidence meets beta* (and never exceeds it)
    conf = adversary_confidence(g, p, d1t, tol=absent)
    assert np.all(conf[populated] <= sol.beta[populated] + TOL)
    if exact_conf:
        np.testing.assert_allclose(conf[populated], sol.beta[populated], atol=TOL)
        assert np.nanmax(conf) == pytest.approx(sol.beta_global, abs=TOL)
    # C5: sandwich beta_min <= beta* <= C* (D lies in its own bounds in delta/alpha modes)
    assert np.all(sol.beta[populated] >= sol.betamin[populated] - 1e-12)
    if pb["mode"] in ("delta", "alpha"):
        c_star = adversary_confidence(g, p, d1, tol=0)
        assert np.all(sol.beta[populated] <= c_star[populated] + TOL)
    # C7: mass conservation
    mass = np.bincount(sol.cell_group, weights=p * d1t, minlength=sol.n_groups)
    assert np.all(np.abs(mass - sol.S) <= TOL * sol.mass + 1e-300)
    assert np.all(np.abs(sol.residual) <= TOL * sol.mass)
    # C6: structure of the solution (masses compared relative to the group's mass)
    cg = sol.cell_group
    n_g = sol.mass[cg]
    pos = p > 0
    m_cell = p * d1t
    case = sol.case[cg]
    u0 = np.minimum(p * (1 - L), sol.M0[cg])
    u1 = np.minimum(p * H, sol.M1[cg])
    sel = pos & (case == "beta0")
    np.testing.assert_allclose((p - m_cell)[sel] / n_g[sel], u0[sel] / n_g[sel], atol=TOL)
    sel = pos & (case == "beta1")
    np.testing.assert_allclose(m_cell[sel] / n_g[sel], u1[sel] / n_g[sel], atol=TOL)
    bp = np.flatnonzero(sol.case == "betap")
    np.testing.assert_allclose(d1t[sol.pi[bp]], L[sol.pi[bp]], atol=TOL)
    np.testing.assert_allclose(d1t[sol.theta[bp]], H[sol.theta[bp]], atol=TOL)
    np.testing.assert_allclose(sol.S[bp], sol.M1[bp] / sol.betap[bp], atol=TOL)
    at_min = populated & (np.abs(sol.beta - sol.betamin) <= 1e-12)
    top = pos & at_min[cg] & (p >= sol.betamin[cg] * sol.mass[cg] * (1 - 1e-12))
    with np.errstate(invalid="ignore"):  # empty groups: 0 / 0
        share = (sol.S / sol.mass)[cg]
    np.testing.assert_allclose(d1t[top], share[top], atol=1e-7)


@SETTINGS
@given(pb=problems(), alloc=st.sampled_from(["paper", "nearest"]))
def test_contracts_hold_grid(pb, alloc):
    check_contracts(pb, _solve(pb, alloc=alloc))


@SETTINGS
@given(pb=problems(grid=False, min_mass=1e-12), alloc=st.sampled_from(["paper", "nearest"]))
def test_contracts_hold_floats(pb, alloc):
    # Arbitrary floats may leave an outcome a legitimate mass below the exclusion threshold, so
    # only the privacy direction (conf <= beta*) is asserted for them. float64 masses carry an
    # absolute error ~1e-16 N_g, i.e. ~1e-16 N_g / S_a on a confidence: outcomes with
    # S_a <= 1e-6 N_g are left out so that 1e-9 stays meaningful. Masses are kept >= 1e-12
    # (subnormal masses underflow in P * D, also in the independent check).
    check_contracts(pb, _solve(pb, alloc=alloc), exact_conf=False, absent=1e-6)


@SETTINGS
@given(pb=problems(max_groups=4), seed=st.integers(0, 2**32 - 1))
def test_determinism_and_group_independence(pb, seed):
    """C9: a re-run is bit-identical; moving whole groups around (keeping each group's cell
    order) or solving a group alone changes nothing, bit for bit."""
    a, b = _solve(pb), _solve(pb)
    for f in ("d1_tilde", "beta", "S", "pi", "theta"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    g = pb["group"]
    labels = np.unique(g)
    rank = np.random.default_rng(seed).permutation(labels.shape[0])
    order = np.lexsort((np.arange(g.shape[0]), rank[np.searchsorted(labels, g)]))
    c = solve(g[order], pb["p"][order], pb["lo"][order], pb["hi"][order], pb["d1"][order])
    np.testing.assert_array_equal(c.d1_tilde, a.d1_tilde[order])
    np.testing.assert_array_equal(c.beta, a.beta)
    np.testing.assert_array_equal(c.case, a.case)
    for gi, lab in enumerate(labels):
        cells = np.flatnonzero(g == lab)
        if not pb["p"][cells].sum() > 0:
            continue  # an empty group cannot be solved on its own (no mass at all)
        alone = solve(g[cells], pb["p"][cells], pb["lo"][cells], pb["hi"][cells], pb["d1"][cells])
        np.testing.assert_array_equal(alone.d1_tilde, a.d1_tilde[cells])
        np.testing.assert_array_equal(alone.beta, a.beta[gi : gi + 1])


@SETTINGS
@given(pb=problems(max_groups=3, modes=("delta",)), scale=st.sampled_from([1e-5, 7.0, 3e6]))
def test_scale_invariance(pb, scale):
    a = _solve(pb)
    b = solve(pb["group"], pb["p"] * scale, pb["lo"], pb["hi"], pb["d1"])
    np.testing.assert_allclose(b.beta, a.beta, atol=1e-12)
    assert b.case.tolist() == a.case.tolist()
    ok = pb["p"] > 0
    np.testing.assert_allclose(
        (pb["p"] * b.d1_tilde)[ok], (pb["p"] * a.d1_tilde)[ok], atol=1e-9 * pb["p"].sum()
    )


@SETTINGS
@given(pb=problems(max_groups=3, modes=("delta",)), use_alpha=st.booleans())
def test_beta_is_monotone_in_fidelity(pb, use_alpha):
    """C11: beta*_g is non-decreasing in delta (alpha); beta*_g(1) = C*_g; beta*_g(0) =
    beta_min,g (delta mode)."""
    g, p, d1 = pb["group"], pb["p"], pb["d1"]
    grid = np.linspace(0.05 if use_alpha else 0.0, 1.0, 20)
    betas = []
    for v in grid:
        L, H = fidelity_bounds(d1, "alpha" if use_alpha else "delta", float(v))
        betas.append(solve(g, p, L, H, d1).beta)
    betas = np.array(betas)
    ok = ~np.isnan(betas[0])
    assert np.all(np.diff(betas[:, ok], axis=0) >= -1e-12)
    c_star = adversary_confidence(g, p, d1)
    np.testing.assert_allclose(betas[-1, ok], c_star[ok], atol=1e-12)  # Lemma 4
    if not use_alpha:
        L, H = fidelity_bounds(d1, "delta", 0.0)
        sol = solve(g, p, L, H, d1)
        np.testing.assert_allclose(betas[0, ok], sol.betamin[ok], atol=1e-12)  # Lemma 5


@SETTINGS
@given(pb=problems(max_groups=3))
def test_zero_mass_cells_do_not_matter(pb):
    """A4: appending zero-mass cells to groups leaves every populated cell's announcement and
    every group optimum unchanged."""
    a = _solve(pb)
    k = pb["group"].shape[0]
    extra = pb["group"][: min(k, 4)]
    sol = solve(
        np.concatenate([pb["group"], extra]),
        np.concatenate([pb["p"], np.zeros(extra.shape[0])]),
        np.concatenate([pb["lo"], np.zeros(extra.shape[0])]),
        np.concatenate([pb["hi"], np.ones(extra.shape[0])]),
        np.concatenate([pb["d1"], np.full(extra.shape[0], 0.5)]),
    )
    np.testing.assert_array_equal(sol.d1_tilde[:k], a.d1_tilde)
    np.testing.assert_array_equal(sol.beta, a.beta)
    assert np.all(sol.d1_tilde[k:] == 0.5)


@SETTINGS
@given(pb=problems(), alloc_nearest=st.booleans())
def test_the_announcement_reads_the_true_rule_only_through_its_bounds(pb, alloc_nearest):
    """With the paper allocation the populated cells' announcement is a function of (P, L, H):
    given the bounds, passing the true rule or not changes nothing, bit for bit, the betamin
    case included (the spec's SELECT_S read D_1 there). With "nearest" only the start differs."""
    with_d1 = _solve(pb)
    without = solve(pb["group"], pb["p"], pb["lo"], pb["hi"])
    pos = pb["p"] > 0
    np.testing.assert_array_equal(with_d1.d1_tilde[pos], without.d1_tilde[pos])
    np.testing.assert_array_equal(with_d1.S, without.S)
    if alloc_nearest:
        nearest = _solve(pb, alloc="nearest")
        np.testing.assert_array_equal(nearest.S, with_d1.S)


@SETTINGS
@given(pb=problems(modes=("bounds",)), seed=st.integers(0, 2**32 - 1))
def test_betamin_rate_is_not_the_true_rate_in_general(pb, seed):
    """Bounds mode: true rules drawn anywhere inside the same [L, H] give the same announced
    mass S, so in a betamin group whose true masses differ, S equals at most one of them."""
    rng = np.random.default_rng(seed)
    d_other = pb["lo"] + rng.random(pb["lo"].shape[0]) * (pb["hi"] - pb["lo"])
    a = _solve(pb)
    b = solve(pb["group"], pb["p"], pb["lo"], pb["hi"], d_other)
    np.testing.assert_array_equal(a.S, b.S)
    cg = a.cell_group
    true_a = np.bincount(cg, weights=pb["p"] * pb["d1"], minlength=a.n_groups)
    true_b = np.bincount(cg, weights=pb["p"] * d_other, minlength=a.n_groups)
    differ = (a.case == "betamin") & (np.abs(true_a - true_b) > 1e-6 * a.mass)
    assert not np.any(
        differ & (np.abs(a.S - true_a) <= 1e-12 * a.mass) & (np.abs(a.S - true_b) <= 1e-12 * a.mass)
    )


@SETTINGS
@given(pb=problems())
def test_betamin_groups_with_a_common_level_announce_it(pb):
    """When every populated cell's interval holds a common level (max L <= min H), a betamin
    group announces one level, the one with the fewest decimals in [max L, min H] inside (0, 1),
    and every posterior equals its prior P(x) / N."""
    sol = _solve(pb)
    g, p, L, H = pb["group"], pb["p"], pb["lo"], pb["hi"]
    for gi, lab in enumerate(sol.groups.tolist()):
        cells = np.flatnonzero((g == lab) & (p > 0))
        if sol.case[gi] != "betamin" or not L[cells].max() <= H[cells].min():
            continue
        a, b = L[cells].max(), H[cells].min()
        level = sol.d1_tilde[cells]
        assert np.all(level == level[0]), level
        assert a <= level[0] <= b
        if a < b:
            assert 0 < level[0] < 1
            digits = len(repr(float(level[0])).split(".")[1])
            assert not any(
                a <= n / 10**k <= b and 0 < n / 10**k < 1
                for k in range(1, digits)
                for n in range(int(np.ceil(a * 10**k)), int(np.floor(b * 10**k)) + 1)
            )
        prior = p[cells] / p[cells].sum()
        c1, c0 = confidences(p[cells].tolist(), level.tolist())
        for c in (c1, c0):
            if c[0] is not None:
                np.testing.assert_allclose(c, prior, atol=TOL)
