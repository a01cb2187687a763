"""beta* of the vectorised solver against an independent ground truth: bisection on beta with
LP feasibility (HiGHS through scipy.optimize.linprog), spec sections 2.3 and 3.10.

For a fixed beta the privacy constraints of OPT (16b), in the linear form (39), together with the
fidelity bounds are a polytope; beta* is the smallest beta for which it is non-empty. The LP uses
nothing of the solver but the inputs (P, L, H): per instance, the variables are D~_1(x) in
[L(x), H(x)] and a margin t, and the LP minimises t subject to

    q(x) D~_a(x) - beta * sum_x' q(x') D~_a(x') <= t     for every cell x and a in {0, 1}

(q = P / N; each outcome's rows are scaled by 1 / (its largest possible group mass), so that a
small outcome mass does not hide a violation below the LP's tolerances). beta is feasible iff the
optimal t is <= 0. All instances of a bisection step are solved in one block-diagonal LP: the
objective sum_i t_i separates, so each t_i is its own instance's optimum.

The sample covers delta-, alpha- and arbitrary-bound fidelity (with and without bounds on
outcome 0), integer counts and continuous masses, deterministic and random rules, and must
contain instances where beta_min strictly dominates: the case the printed Theorem 1 misses (E1).
"""

from __future__ import annotations

import numpy as np
import pytest

from privfair.components.transparency.fidelity import fidelity_bounds
from privfair.components.transparency.scheme import adversary_confidence, solve

scipy_sparse = pytest.importorskip("scipy.sparse")
linprog = pytest.importorskip("scipy.optimize").linprog

N_INSTANCES = 1500
BISECTION_STEPS = 34  # bracket width 2**-34 ~ 6e-11
LP_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}
MARGIN_TOL = 1e-11  # t* <= this counts as feasible
# beta*_LP - beta*_solver lies in [-BELOW, ABOVE]. Above: the LP optimum is never higher than the
# solver's (the solver never claims a beta it cannot have; observed <= 6e-10 over 12 seeds x
# 1,500 instances). Below: the LP accepts beta = 1 - 2e-8 where one cell with a tiny lower bound
# is the only one able to carry an outcome (beta* = 1: a violation ~1e-12 under HiGHS's
# tolerances; the spec saw the same artefact at ~1e-5 without the row scaling).
ABOVE, BELOW = 1e-8, 1e-7
AGREE = BELOW


def random_instances(seed: int, k: int) -> list[dict]:
    """``k`` random groups of 2-6 cells, a third per fidelity mode."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(k):
        m = int(rng.integers(2, 7))
        if rng.random() < 0.5:
            p = rng.integers(1, 21, m).astype(float)  # counts
        else:
            p = rng.dirichlet(np.full(m, rng.choice([0.3, 1.0, 5.0])))
        if rng.random() < 0.05:
            p[rng.integers(m)] = 0.0  # an unpopulated cell (excluded by the solver, A4)
        d1 = rng.random(m)
        det = rng.random(m) < 0.35
        d1[det] = rng.integers(0, 2, int(det.sum()))
        if rng.random() < 0.2:
            d1 = np.round(d1 * 4) / 4  # ties
        mode = ("delta", "alpha", "bounds")[i % 3]
        if mode == "delta":
            value = float(rng.choice([0.0, 1.0, rng.random()], p=[0.05, 0.05, 0.9]))
            L, H = fidelity_bounds(d1, "delta", value)
        elif mode == "alpha":
            value = float(rng.choice([1.0, rng.uniform(0.02, 1.0)], p=[0.05, 0.95]))
            L, H = fidelity_bounds(d1, "alpha", value)
        else:
            value = None
            a, b = rng.random(m), rng.random(m)
            kw = dict(d1_min=np.minimum(a, b), d1_max=np.maximum(a, b))
            if rng.random() < 0.3:  # bounds on outcome 0 as well, intersected (A1)
                z = rng.uniform(kw["d1_min"], kw["d1_max"])  # a point both intervals keep
                kw.update(d0_min=rng.uniform(0, 1 - z), d0_max=rng.uniform(1 - z, 1))
            L, H = fidelity_bounds(None, "bounds", **kw)
        out.append(dict(p=p, L=L, H=H, d1=d1, mode=mode, value=value))
    return out


def lp_beta_star(instances: list[dict]) -> np.ndarray:
    """beta* per instance by bisection on [0, 1] (beta = 1 is always feasible), one
    block-diagonal HiGHS LP per step."""
    sp = scipy_sparse
    k = len(instances)
    sizes = np.array([len(x["p"]) for x in instances])
    n = int(sizes.sum())
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    owner = np.repeat(np.arange(k), sizes)
    P = np.concatenate([x["p"] for x in instances])
    L = np.concatenate([x["L"] for x in instances])
    H = np.concatenate([x["H"] for x in instances])
    q = P / np.add.reduceat(P, starts)[owner]
    blocks = [np.arange(s, s + m) for s, m in zip(starts, sizes, strict=True)]
    rows = np.concatenate([np.repeat(b, b.shape[0]) for b in blocks])  # every (k, j) pair
    cols = np.concatenate([np.tile(b, b.shape[0]) for b in blocks])  # within an instance
    diag = np.where(rows == cols, q[rows], 0.0)
    w1 = np.add.reduceat(q * H, starts)  # largest possible outcome-1 mass
    w0 = np.add.reduceat(q * (1 - L), starts)  # largest possible outcome-0 mass
    w1 = 1 / np.where(w1 > 0, w1, 1.0)
    w0 = 1 / np.where(w0 > 0, w0, 1.0)
    margin = sp.csr_matrix((-np.ones(n), (np.arange(n), owner)), shape=(n, k))
    cost = np.concatenate([np.zeros(n), np.ones(k)])
    bounds = np.concatenate([np.column_stack([L, H]), np.tile([-2.0, 2.0], (k, 1))])

    def margins(beta: np.ndarray) -> np.ndarray:
        coef = diag - beta[owner[rows]] * q[cols]  # q_k x_k - beta sum_j q_j x_j
        a1 = sp.csr_matrix((coef * w1[owner[rows]], (rows, cols)), shape=(n, n))
        # outcome 0 with D~_0 = 1 - D~_1:  -(q_k x_k - beta sum q_j x_j) <= beta - q_k (+ t)
        a0 = sp.csr_matrix((-coef * w0[owner[rows]], (rows, cols)), shape=(n, n))
        A = sp.vstack([sp.hstack([a1, margin]), sp.hstack([a0, margin])]).tocsr()
        b = np.concatenate([np.zeros(n), (beta[owner] - q) * w0[owner]])
        res = linprog(cost, A_ub=A, b_ub=b, bounds=bounds, method="highs", options=LP_OPTIONS)
        assert res.status == 0, res.message
        return res.x[n:]

    lo, hi = np.zeros(k), np.ones(k)
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        feasible = margins(mid) <= MARGIN_TOL
        hi = np.where(feasible, mid, hi)
        lo = np.where(feasible, lo, mid)
    return hi


@pytest.fixture(scope="module")
def crosscheck():
    instances = random_instances(seed=20220208, k=N_INSTANCES)
    group = np.concatenate([np.full(len(x["p"]), i) for i, x in enumerate(instances)])
    cat = {f: np.concatenate([x[f] for x in instances]) for f in ("p", "L", "H", "d1")}
    sol = solve(group, cat["p"], cat["L"], cat["H"], cat["d1"])
    return instances, group, cat, sol, lp_beta_star(instances)


def test_beta_star_equals_lp_bisection_optimum(crosscheck):
    instances, _, _, sol, beta_lp = crosscheck
    assert len(instances) >= 1000
    diff = beta_lp - sol.beta
    assert diff.max() <= ABOVE
    err = np.abs(diff)
    worst = int(np.argmax(err))
    assert diff.min() >= -BELOW, (
        f"instance {worst} ({instances[worst]['mode']}): LP {beta_lp[worst]!r} vs solver "
        f"{sol.beta[worst]!r} (case {sol.case[worst]})"
    )


def test_sample_covers_every_case_and_mode_and_the_e1_case(crosscheck):
    instances, _, _, sol, beta_lp = crosscheck
    modes = np.array([x["mode"] for x in instances])
    printed = np.maximum(np.maximum(sol.beta0, sol.beta1), sol.betap)  # Theorem 1 as printed
    e1 = (sol.case == "betamin") & (printed < sol.beta - 1e-6)
    for mode in ("delta", "alpha", "bounds"):
        assert (modes == mode).sum() >= N_INSTANCES // 3
        assert e1[modes == mode].sum() >= 20, mode  # beta_min strictly dominates
    for case in ("beta0", "beta1", "betap", "betamin"):
        assert (sol.case == case).sum() >= 50, case
    # the printed formula claims less than the LP optimum exactly in the E1 instances
    assert np.all(printed[e1] < beta_lp[e1] - 1e-6)
    assert 0.2 <= e1.mean() <= 0.8


@pytest.mark.parametrize("alloc", ["paper", "nearest"])
def test_announced_mapping_achieves_beta_star_on_the_sample(crosscheck, alloc):
    """The announced mapping meets the LP optimum: recomputed confidence <= beta* (C3) and
    within the fidelity interval (C2); the two allocation modes agree on beta*."""
    instances, group, cat, sol, beta_lp = crosscheck
    other = solve(group, cat["p"], cat["L"], cat["H"], cat["d1"], alloc)
    np.testing.assert_array_equal(other.beta, sol.beta)
    d1t = other.d1_tilde
    assert np.all((d1t >= cat["L"]) & (d1t <= cat["H"]))
    conf = adversary_confidence(group, cat["p"], d1t, tol=1e-9)
    assert np.all(conf <= beta_lp + AGREE + 1e-9)
    np.testing.assert_allclose(conf, sol.beta, atol=1e-9)
