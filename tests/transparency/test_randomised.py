"""The randomised announcement's draw (``privfair.components.transparency.randomised``) is
uniform on the mappings it may announce: 2,000 independent chains on the paper's group F
(delta = 0.9, slack 0.05) against rejection sampling from the fidelity box, cell by cell (a
two-sample Kolmogorov-Smirnov test), every chain within its fidelity and its cap."""

from __future__ import annotations

import numpy as np
from scipy.stats import ks_2samp

from privfair.components.transparency.randomised import draw
from privfair.components.transparency.scheme import adversary_confidence, fidelity_bounds, solve

SLACK = 0.05


def test_the_draw_is_uniform_on_the_allowed_mappings():
    p, d1 = np.array([12, 5, 3]) / 20, np.array([0.0, 0.0, 1.0])
    lo, hi = fidelity_bounds(d1, "delta", 0.9)
    beta = solve(np.zeros(3, dtype=np.int64), p, lo, hi).beta[0]
    n = 2000  # one group per chain: the chains run side by side, independent
    group = np.repeat(np.arange(n), 3)
    P, L, H = np.tile(p, n), np.tile(lo, n), np.tile(hi, n)
    sol = solve(group, P, L, H)
    chains = draw(sol.cell_group, P, L, H, sol.d1_tilde, sol.beta, SLACK, np.random.default_rng(0))
    conf = adversary_confidence(group, P, chains)
    assert np.all((conf >= beta - 1e-12) & (conf <= beta + SLACK))
    assert np.all((chains >= L) & (chains <= H))

    m = 100_000
    box = lo + np.random.default_rng(1).random((m, 3)) * (hi - lo)
    box_conf = adversary_confidence(np.repeat(np.arange(m), 3), np.tile(p, m), box.ravel())
    uniform = box[box_conf <= beta + SLACK]
    assert len(uniform) > 10_000
    chains = chains.reshape(n, 3)
    for i in range(3):
        assert ks_2samp(chains[:, i], uniform[:, i]).pvalue > 1e-3, i
    # and the draw is far from the optimum it starts at
    assert np.abs(chains - sol.d1_tilde.reshape(n, 3)).mean() > 0.01
