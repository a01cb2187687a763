"""Fidelity bounds: the per-cell interval ``[L(x), H(x)]`` the announced rule ``D~_1(x)`` must lie in.

The paper (section 5.2) bounds each outcome's announced probability separately. For binary
decisions both outcomes collapse into one interval for ``D~_1`` (``D~_0 = 1 - D~_1``), spec
section 1.7 (the consistency Theorem 1's proof relies on):

``L = max(D~_1min, 1 - D~_0max, 0)``, ``H = min(D~_1max, 1 - D~_0min, 1)``.

Modes:

- ``"delta"`` (Definition 5, delta-fidelity, ``delta`` in [0, 1]):
  ``|D~_a(x) - D_a(x)| <= 1 - delta`` for both outcomes, i.e.
  ``L = max(0, D_1 - (1 - delta))``, ``H = min(1, D_1 + (1 - delta))``;
- ``"alpha"`` (Definition 6, alpha-fidelity, ``alpha`` in (0, 1]):
  ``alpha D_a(x) <= D~_a(x) <= D_a(x) / alpha`` for both outcomes, i.e.
  ``L = max(alpha D_1, 1 - min(1, D_0 / alpha))``, ``H = min(1, D_1 / alpha, 1 - alpha D_0)``
  (a deterministic cell, ``D_1`` in {0, 1}, is frozen: ``L = H = D_1``);
- ``"bounds"`` (eq. 11, general bounds): explicit ``d1_min``/``d1_max`` and optionally
  ``d0_min``/``d0_max``, intersected as above; an empty interval (``L > H``) is an input error.

In the delta and alpha modes ``D_1`` lies in its own interval, so the interval is never empty;
the computed bounds are widened by at most one rounding step so that ``L <= D_1 <= H`` also holds
in floating point.

>>> L, H = fidelity_bounds([0.0, 0.5, 1.0], "delta", 0.9)
>>> L.round(12).tolist(), H.round(12).tolist()
([0.0, 0.4, 0.9], [0.1, 0.6, 1.0])
>>> L, H = fidelity_bounds([0.0, 0.5, 1.0], "alpha", 0.5)
>>> L.tolist(), H.tolist()
([0.0, 0.25, 1.0], [0.0, 0.75, 1.0])
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from privfair.schemas.errors import InputError

__all__ = ["FidelityMode", "fidelity_bounds", "as_unit_vector"]

FidelityMode = Literal["delta", "alpha", "bounds"]


def as_unit_vector(name: str, values: ArrayLike, *, lo: float = 0.0, hi: float = 1.0) -> np.ndarray:
    """``values`` as a 1-D float64 array, every entry finite and within ``[lo, hi]``.

    Raises
    ------
    InputError
        (a ``ValueError``) naming ``name``, the rule and the first offending cell.
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise InputError(name, "must be a 1-D array", f"got shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(name, "must be finite", f"cell {i} is {arr[i]}, {int(bad.sum())} bad")
    bad = (arr < lo) | (arr > hi)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            name, f"must lie in [{lo}, {hi}]", f"cell {i} is {arr[i]!r}, {int(bad.sum())} bad"
        )
    return arr


def _finite_vector(name: str, values: ArrayLike, n: int | None) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 0 and n is not None:
        arr = np.full(n, float(arr))
    if arr.ndim != 1:
        raise InputError(name, "must be a scalar or a 1-D array", f"got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise InputError(name, "must have one entry per cell", f"{arr.shape[0]} != {n}")
    bad = np.isnan(arr)
    if bad.any():
        raise InputError(name, "must not be NaN", f"cell {int(np.flatnonzero(bad)[0])}")
    return arr


def fidelity_bounds(
    d1: ArrayLike | None,
    mode: FidelityMode,
    value: float | None = None,
    *,
    d1_min: ArrayLike | None = None,
    d1_max: ArrayLike | None = None,
    d0_min: ArrayLike | None = None,
    d0_max: ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-cell fidelity interval ``[L, H]`` for the announced rule ``D~_1`` (spec section 1.7).

    Parameters
    ----------
    d1
        True decision rule ``D_1(x) = P(A = 1 | x)`` per cell, in [0, 1]. Required in the
        ``"delta"`` and ``"alpha"`` modes; in ``"bounds"`` mode it is only validated if given.
    mode
        ``"delta"`` (``L = max(0, D_1 - (1 - delta))``, ``H = min(1, D_1 + (1 - delta))``),
        ``"alpha"`` (``L = max(alpha D_1, 1 - min(1, D_0 / alpha))``,
        ``H = min(1, D_1 / alpha, 1 - alpha D_0)``) or ``"bounds"`` (explicit bounds).
    value
        ``delta`` in [0, 1] or ``alpha`` in (0, 1]; must be ``None`` in ``"bounds"`` mode.
    d1_min, d1_max, d0_min, d0_max
        ``"bounds"`` mode only: general bounds (eq. 11) on ``D~_1`` (required) and ``D~_0``
        (optional), scalars or one entry per cell. They are intersected into
        ``L = max(d1_min, 1 - d0_max, 0)`` and ``H = min(d1_max, 1 - d0_min, 1)``.

    Returns
    -------
    (L, H)
        Two float64 arrays with ``0 <= L <= H <= 1``.

    Raises
    ------
    InputError
        (a ``ValueError``) on an unknown mode, ``delta`` outside [0, 1], ``alpha`` outside
        (0, 1], ``D_1`` outside [0, 1] or NaN, missing or misplaced bounds, or an empty
        interval ``L > H`` (naming the first offending cell).
    """
    explicit = {"d1_min": d1_min, "d1_max": d1_max, "d0_min": d0_min, "d0_max": d0_max}
    if mode in ("delta", "alpha"):
        given = [k for k, v in explicit.items() if v is not None]
        if given:
            raise InputError(
                given[0], f"explicit bounds are only accepted in mode 'bounds', not '{mode}'"
            )
        if d1 is None:
            raise InputError("d1", f"the true rule is required in mode '{mode}'")
        d = as_unit_vector("d1", d1)
        if value is None or not np.isfinite(value):
            raise InputError(mode, "must be a finite number", f"got {value!r}")
        v = float(value)
        if mode == "delta":
            if not 0.0 <= v <= 1.0:
                raise InputError("delta", "must lie in [0, 1]", f"got {v!r}")
            slack = 1.0 - v
            lo = np.maximum(d - slack, 0.0)
            hi = np.minimum(d + slack, 1.0)
        else:
            if not 0.0 < v <= 1.0:
                raise InputError("alpha", "must lie in (0, 1]", f"got {v!r}")
            d0 = 1.0 - d
            lo = np.maximum(v * d, 1.0 - np.minimum(1.0, d0 / v))
            hi = np.minimum(np.minimum(1.0, d / v), 1.0 - v * d0)
        # D_1 lies in its own interval; keep that true in floating point as well.
        return np.clip(np.minimum(lo, d), 0.0, 1.0), np.clip(np.maximum(hi, d), 0.0, 1.0)
    if mode != "bounds":
        raise InputError("mode", "must be one of 'delta', 'alpha', 'bounds'", f"got {mode!r}")
    if value is not None:
        raise InputError("value", "must be None in mode 'bounds' (the bounds are explicit)")
    if d1_min is None or d1_max is None:
        raise InputError("d1_min" if d1_min is None else "d1_max", "is required in mode 'bounds'")
    n = None
    if d1 is not None:
        n = as_unit_vector("d1", d1).shape[0]
    for k in ("d1_min", "d1_max", "d0_min", "d0_max"):
        if explicit[k] is not None and np.ndim(explicit[k]) == 1:
            n = len(np.asarray(explicit[k])) if n is None else n
    if n is None:
        raise InputError("d1_min", "at least one of d1, d1_min, ... must be a per-cell array")
    lo = np.maximum(_finite_vector("d1_min", d1_min, n), 0.0)
    hi = np.minimum(_finite_vector("d1_max", d1_max, n), 1.0)
    if d0_max is not None:
        lo = np.maximum(lo, 1.0 - _finite_vector("d0_max", d0_max, n))
    if d0_min is not None:
        hi = np.minimum(hi, 1.0 - _finite_vector("d0_min", d0_min, n))
    bad = lo > hi
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            "d1_min/d1_max",
            "the fidelity interval must not be empty (L <= H after intersecting both outcomes "
            "with [0, 1])",
            f"cell {i}: L = {lo[i]!r} > H = {hi[i]!r}, {int(bad.sum())} bad",
        )
    return lo, hi
