"""Privacy accounting every DP family and the ledger share, through OpenDP: a zCDP rho's
(epsilon, delta) conversion, the rho an (epsilon, delta) budget allows, and OpenDP's own
sequential composition.

The release flow composes charges across releases (``privfair.budget.ledger``) with these, and a
family plans its steps with them (``privfair.components.synthesis.accounting``), so one conversion
serves both.

>>> round(rho_budget(1.0, 1e-9), 9)
0.014973058
>>> round(epsilon_of(rho_budget(1.0, 1e-9), 1e-9), 9)
1.0
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from privfair.schemas.errors import InputError

__all__ = ["epsilon_of", "rho_budget", "composed_total"]


@functools.lru_cache(maxsize=1)
def _dp():
    """OpenDP's modules, without ``opendp.prelude`` (which imports scikit-learn for its
    extras: three seconds here)."""
    from types import SimpleNamespace

    import opendp.combinators as c
    import opendp.domains as domains
    import opendp.measurements as m
    import opendp.measures as measures
    import opendp.metrics as metrics
    import opendp.transformations as t
    from opendp.mod import enable_features

    enable_features("contrib", "honest-but-curious")
    ns = SimpleNamespace(m=m, c=c, t=t)
    for module in (domains, metrics, measures):
        for name in dir(module):
            if not name.startswith("_"):
                setattr(ns, name, getattr(module, name))
    return ns


@functools.lru_cache(maxsize=64)
def _gaussian(scale: float):
    dp = _dp()
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float)
    return dp.m.make_gaussian(*space, scale=scale)


@functools.lru_cache(maxsize=256)
def epsilon_of(rho: float, delta: float) -> float:
    """epsilon of (epsilon, delta)-DP for a rho-zCDP release, by OpenDP's conversion."""
    return float(_profile(rho).epsilon(delta)) if rho > 0 else 0.0


def _delta_of(rho: float, epsilon: float) -> float:
    """delta of a rho-zCDP release at ``epsilon``, by OpenDP's conversion."""
    return float(_profile(rho).delta(epsilon)) if rho > 0 else 0.0


def _profile(rho: float):
    """OpenDP's (epsilon, delta) privacy profile of a rho-zCDP release: that of the unit
    Gaussian of scale sqrt(1 / (2 rho)), which is rho-zCDP up to OpenDP's rounding (the
    conversion is of its own mapped rho, which is what a release of rho is charged)."""
    g = _gaussian(math.sqrt(1.0 / (2.0 * rho)))
    return _dp().c.make_zCDP_to_approxDP(g).map(1.0)


@functools.lru_cache(maxsize=256)
def rho_budget(epsilon: float, delta: float) -> float:
    """The largest rho whose OpenDP conversion gives (epsilon, delta')-DP with delta' <= delta
    (the authors' ``cdp_rho``, by bisection to 1e-15 relative; spec table C1:
    rho(1, 1e-9) = 1.49731e-2)."""
    if not (math.isfinite(epsilon) and epsilon > 0 and math.isfinite(delta) and 0 < delta < 1):
        raise InputError(
            "epsilon" if not (math.isfinite(epsilon) and epsilon > 0) else "delta",
            "the budget must be finite: epsilon > 0 and 0 < delta < 1",
            f"epsilon {epsilon}, delta {delta}",
        )
    lo, hi = 0.0, epsilon + 1.0
    while _delta_of(hi, epsilon) <= delta:  # at most ~1000 doublings before hi overflows
        lo, hi = hi, hi * 2
        if not math.isfinite(hi):
            raise InputError(
                "epsilon", "no finite zCDP budget matches it", f"epsilon {epsilon}, delta {delta}"
            )
    for _ in range(200):
        mid = (lo + hi) / 2
        if _delta_of(mid, epsilon) <= delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return lo


def composed_total(rhos: Sequence[float]) -> float:
    """OpenDP's own total for a sequence of per-query budgets (its sequential composition)."""
    dp = _dp()
    dom = dp.user_domain("privfair.RecordCodes", member=lambda x: True)
    comp = dp.c.make_adaptive_composition(
        dom, dp.symmetric_distance(), dp.zero_concentrated_divergence(), d_in=1, d_mids=list(rhos)
    )
    return float(comp.map(1))
