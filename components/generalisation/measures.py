"""Discrimination measures on 4-fold tables, tau, and the t-closeness bounds bd_f(t).

Implements sections 1.3, 1.4, 1.6, 1.8, 1.9 and the tau helper of 2.1 of the
dMondrian/dSabre spec (Ruggieri, "Using t-closeness anonymity to control for
non-discrimination", Theorems 10 and 15).

A context (the cover of a PND itemset) is summarised by its 4-fold table::

                    negative (-)   positive (+)
    protected           a              b          n1 = a + b
    unprotected         c              d          n2 = c + d
                                                  n  = n1 + n2

Conventions used throughout:

* ``p_minus`` is the negative rate of the **whole** input table; it is only used for the
  tokenism extension (``p1 = p_minus`` when ``n1 = 0``, ``p2 = p_minus`` when ``n2 = 0``) and
  in ``tau``.
* [AMB-1] A ratio ``x / 0`` is ``+inf`` for ``x > 0`` and ``0 / 0`` is ``1`` (parity).
* [AMB-2] A bound with a zero denominator is vacuous: ``+inf`` for an upper bound, ``0`` for
  the lower bounds of RC / EC.
* An empty context (``n = 0``) has no ``p``; ED, ER, EC are NaN there (empty covers are never
  evaluated, they are alpha-protective by definition).

Every function is vectorised: the counts may be scalars or integer arrays of a common
(broadcastable) shape. Scalar inputs give Python floats, array inputs give float64 arrays.

>>> a, b, c, d = 109, 201, 191, 499          # German credit, whole table (Ex. 21)
>>> round(tau(a, b, c, d, 0.3), 3), round(measure("RD", a, b, c, d, 0.3), 3)
(0.052, 0.075)
>>> round(bound("RD", 0.15, 0.3), 4), round(bound("RR", 0.15, 0.3), 4)
(0.3, 3.0)
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "cell_of",
    "LOWER_IS_WORSE",
    "MEASURES",
    "bound",
    "bounds",
    "four_fold",
    "inverse_bound",
    "measure",
    "measures",
    "proportions",
    "t_max",
    "tau",
    "within_bounds",
]

#: The seven discrimination measures of Sects. 3.1 and 4.3, in the paper's order.
MEASURES: tuple[str, ...] = ("RD", "ED", "RR", "ER", "RC", "EC", "OR")

#: Measures for which a *lower* value means more discrimination: the alpha-protection test is
#: ``f >= alpha`` and ``bd_f`` is a lower bound.
LOWER_IS_WORSE: frozenset[str] = frozenset({"RC", "EC"})

_DIFFERENCES = frozenset({"RD", "ED"})

FloatOrArray = float | NDArray[np.float64]

#: Cap on the bisection steps of ``inverse_bound`` (it stops once the bracket is two adjacent
#: floats, after about 60 steps).
_BISECTION_STEPS = 128


# --------------------------------------------------------------------------- helpers


def _out(x: NDArray[np.float64], scalar: bool) -> FloatOrArray:
    """Python float for scalar inputs, float64 array otherwise."""
    return float(x) if scalar else x


def _is_scalar(*xs: ArrayLike) -> bool:
    return all(np.ndim(x) == 0 for x in xs)


def _check_name(name: str) -> None:
    if name not in MEASURES:
        raise ValueError(f"unknown measure {name!r}; expected one of {MEASURES}")


def _check_p_minus(p_minus: ArrayLike) -> NDArray[np.float64]:
    p = np.asarray(p_minus, dtype=np.float64)
    if np.any(np.isnan(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError(f"p_minus must lie in [0, 1], got {p_minus!r}")
    return p


def _check_t(t: ArrayLike) -> NDArray[np.float64]:
    tt = np.asarray(t, dtype=np.float64)
    if np.any(np.isnan(tt)) or np.any(tt < 0):
        raise ValueError(f"t must be >= 0, got {t!r}")
    return tt


def _counts(
    a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike
) -> tuple[NDArray[np.int64], ...]:
    arrs = np.broadcast_arrays(*(np.asarray(x) for x in (a, b, c, d)))
    out = []
    for x in arrs:
        integral = np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.bool_)
        if not integral and not np.all(np.equal(np.mod(x, 1), 0)):
            raise ValueError("counts a, b, c, d must be integers")
        x = x.astype(np.int64)
        if np.any(x < 0):
            raise ValueError("counts a, b, c, d must be >= 0")
        out.append(x)
    return tuple(out)


def _ratio(num: ArrayLike, den: ArrayLike) -> NDArray[np.float64]:
    """``num / den`` with [AMB-1]: ``x/0 = +inf`` for ``x > 0`` and ``0/0 = 1``; NaN propagates."""
    num, den = np.broadcast_arrays(
        np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    )
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = num / den
    return np.where((den == 0) & (num == 0), 1.0, out)


def _proportions(
    a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike, p_minus: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    a, b, c, d = _counts(a, b, c, d)
    p = _check_p_minus(p_minus)
    n1, n2 = a + b, c + d
    n = n1 + n2
    with np.errstate(divide="ignore", invalid="ignore"):
        p1 = np.where(n1 == 0, p, a / np.where(n1 == 0, 1, n1))
        p2 = np.where(n2 == 0, p, c / np.where(n2 == 0, 1, n2))
        pp = np.where(n == 0, np.nan, (a + c) / np.where(n == 0, 1, n))
    return p1.astype(np.float64), p2.astype(np.float64), pp.astype(np.float64)


def _measure(
    name: str, p1: NDArray[np.float64], p2: NDArray[np.float64], p: NDArray[np.float64]
) -> NDArray[np.float64]:
    if name == "RD":
        return p1 - p2
    if name == "ED":
        return p1 - p
    if name == "RR":
        return _ratio(p1, p2)
    if name == "ER":
        return _ratio(p1, p)
    if name == "RC":
        return _ratio(1 - p1, 1 - p2)
    if name == "EC":
        return _ratio(1 - p1, 1 - p)
    return _ratio(p1 * (1 - p2), (1 - p1) * p2)  # OR


def _bound(name: str, t: NDArray[np.float64], p: NDArray[np.float64]) -> NDArray[np.float64]:
    """bd_f(t) on arrays (no validation)."""
    t, p = np.broadcast_arrays(t, p)
    if name in _DIFFERENCES:
        p_hat = np.minimum(p, 1 - p)
        return np.minimum(np.minimum(2 * t, t + p_hat), 1.0)
    lo = np.maximum(p - t, 0.0)  # L
    up = np.minimum(p + t, 1.0)  # U
    lo_c = np.maximum(1 - p - t, 0.0)  # L'
    up_c = np.minimum(1 - p + t, 1.0)  # U'
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if name in ("RR", "ER"):
            return np.where(lo > 0, up / np.where(lo > 0, lo, 1.0), np.inf)
        if name in LOWER_IS_WORSE:
            return np.where(up_c > 0, lo_c / np.where(up_c > 0, up_c, 1.0), 0.0)
        den = lo * lo_c  # OR
        return np.where(den > 0, up * up_c / np.where(den > 0, den, 1.0), np.inf)


def _bounds(
    name: str, t: NDArray[np.float64], p: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    bd = _bound(name, t, p)
    with np.errstate(divide="ignore", over="ignore"):
        inv = 1.0 / bd  # 1/inf = 0, 1/0 = inf
    if name in _DIFFERENCES:
        return -bd, bd
    if name in LOWER_IS_WORSE:
        return bd, inv
    return inv, bd


# --------------------------------------------------------------------------- public API


def cell_of(protected: np.ndarray, negative: np.ndarray) -> np.ndarray:
    """Each tuple's 4-fold cell, 0..3 = a, b, c, d (``four_fold``'s order): 2 (1 - protected)
    + (1 - negative), from 0/1 (or bool) flags.

    >>> cell_of(np.array([1, 1, 0, 0]), np.array([1, 0, 1, 0])).tolist()
    [0, 1, 2, 3]
    """
    return 2 * (1 - np.asarray(protected, dtype=np.int64)) + (
        1 - np.asarray(negative, dtype=np.int64)
    )


def four_fold(protected: ArrayLike, negative: ArrayLike) -> tuple[int, int, int, int]:
    """Count the 4-fold contingency table of a set of tuples (spec 1.3, Fig. 1).

    Parameters
    ----------
    protected, negative : array_like of bool, equal shape
        Per tuple: member of the protected group; decision is negative (``-``).

    Returns
    -------
    tuple of int
        ``(a, b, c, d)`` = (protected & negative, protected & positive,
        unprotected & negative, unprotected & positive).

    Examples
    --------
    >>> four_fold([True, True, False, False, False], [True, False, True, False, False])
    (1, 1, 1, 2)
    """
    prot = np.asarray(protected, dtype=bool)
    neg = np.asarray(negative, dtype=bool)
    if prot.shape != neg.shape:
        raise ValueError(f"shapes differ: {prot.shape} vs {neg.shape}")
    return (
        int(np.count_nonzero(prot & neg)),
        int(np.count_nonzero(prot & ~neg)),
        int(np.count_nonzero(~prot & neg)),
        int(np.count_nonzero(~prot & ~neg)),
    )


def proportions(
    a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike, p_minus: ArrayLike
) -> tuple[FloatOrArray, FloatOrArray, FloatOrArray]:
    """Tokenism-extended negative rates ``(p1, p2, p)`` of a 4-fold table (spec 1.3).

    ``p1 = a / (a + b)`` or ``p_minus`` if ``a + b = 0``; ``p2 = c / (c + d)`` or ``p_minus``
    if ``c + d = 0``; ``p = (a + c) / n``, never replaced (NaN if ``n = 0``).

    Parameters
    ----------
    a, b, c, d : int or array_like of int
        Counts of the 4-fold table (broadcastable shapes).
    p_minus : float
        Negative-decision rate of the whole table, in [0, 1].

    Returns
    -------
    tuple
        ``(p1, p2, p)``, floats for scalar inputs, float64 arrays otherwise.

    Examples
    --------
    >>> proportions(1, 1, 2, 6, 0.5)
    (0.5, 0.25, 0.3)
    >>> p1, p2, p = proportions([0, 3], [0, 1], [1, 0], [3, 0], 0.3)
    >>> p1.tolist(), p2.tolist(), p.tolist()
    ([0.3, 0.75], [0.25, 0.3], [0.25, 0.75])
    """
    scalar = _is_scalar(a, b, c, d, p_minus)
    p1, p2, p = _proportions(a, b, c, d, p_minus)
    return _out(p1, scalar), _out(p2, scalar), _out(p, scalar)


def measure(
    name: str, a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike, p_minus: ArrayLike
) -> FloatOrArray:
    """One discrimination measure of a 4-fold table (spec 1.4), tokenism-extended.

    With ``(p1, p2, p)`` from :func:`proportions`:

    * ``RD = p1 - p2``, ``ED = p1 - p``
    * ``RR = p1 / p2``, ``ER = p1 / p``
    * ``RC = (1 - p1) / (1 - p2)``, ``EC = (1 - p1) / (1 - p)``
    * ``OR = p1 (1 - p2) / ((1 - p1) p2)``

    Zero denominators follow [AMB-1]: ``x / 0 = +inf`` for ``x > 0`` and ``0 / 0 = 1``.

    Parameters
    ----------
    name : str
        One of :data:`MEASURES`.
    a, b, c, d : int or array_like of int
        Counts of the 4-fold table.
    p_minus : float
        Global negative rate, used by the tokenism extension.

    Returns
    -------
    float or ndarray of float64

    Examples
    --------
    >>> round(measure("ED", 5, 2, 1, 2, 0.5), 3)   # Ex. 9, dept = A
    0.114
    >>> measure("RR", [1, 1], [1, 1], [0, 1], [2, 1], 0.5).tolist()
    [inf, 1.0]
    """
    _check_name(name)
    scalar = _is_scalar(a, b, c, d, p_minus)
    return _out(_measure(name, *_proportions(a, b, c, d, p_minus)), scalar)


def measures(
    a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike, p_minus: ArrayLike
) -> dict[str, FloatOrArray]:
    """All seven measures of :data:`MEASURES` at once (see :func:`measure` for formulas).

    Examples
    --------
    >>> {k: round(v, 4) for k, v in measures(109, 201, 191, 499, 0.3).items()}
    {'RD': 0.0748, 'ED': 0.0516, 'RR': 1.2702, 'ER': 1.172, 'RC': 0.8966, 'EC': 0.9263, 'OR': 1.4168}
    """
    scalar = _is_scalar(a, b, c, d, p_minus)
    props = _proportions(a, b, c, d, p_minus)
    return {name: _out(_measure(name, *props), scalar) for name in MEASURES}


def tau(a: ArrayLike, b: ArrayLike, c: ArrayLike, d: ArrayLike, p_minus: ArrayLike) -> FloatOrArray:
    """Maximum variational distance of a 4-fold table (Def. 17, spec 1.9 and 2.1).

    ``tau = max(|p1 - p_minus|, |p2 - p_minus|)`` with tokenism-extended ``p1``, ``p2``, so an
    empty group contributes 0.

    Examples
    --------
    >>> round(tau(1, 1, 1, 2, 8 / 17), 2), round(tau(1, 1, 0, 1, 8 / 17), 2)   # Ex. 22
    (0.14, 0.47)
    >>> tau([1, 0], [1, 0], [0, 1], [0, 1], 0.5).tolist()
    [0.0, 0.0]
    """
    scalar = _is_scalar(a, b, c, d, p_minus)
    p1, p2, _ = _proportions(a, b, c, d, p_minus)
    p = np.asarray(p_minus, dtype=np.float64)
    return _out(np.maximum(np.abs(p1 - p), np.abs(p2 - p)), scalar)


def t_max(p_minus: ArrayLike) -> FloatOrArray:
    """Largest meaningful t: ``max(p_minus, 1 - p_minus)`` (spec 1.6; Table 1's "p-hat").

    Examples
    --------
    >>> t_max(0.3), t_max(0.761)
    (0.7, 0.761)
    """
    p = _check_p_minus(p_minus)
    return _out(np.maximum(p, 1 - p), np.ndim(p_minus) == 0)


def bound(name: str, t: ArrayLike, p_minus: ArrayLike) -> FloatOrArray:
    """``bd_f(t)`` of Theorems 10 and 15 for a t-close table (spec 1.8).

    With ``p_hat = min(p_minus, 1 - p_minus)``, ``L = max(p_minus - t, 0)``,
    ``U = min(p_minus + t, 1)``, ``L' = max(1 - p_minus - t, 0)``, ``U' = min(1 - p_minus + t, 1)``:

    * RD, ED: ``min(2t, t + p_hat, 1)`` (upper bound on ``|f|``)
    * RR, ER: ``U / L`` (upper bound)
    * RC, EC: ``L' / U'`` (**lower** bound)
    * OR: ``U U' / (L L')`` (upper bound)

    [AMB-2] A zero denominator makes the bound vacuous: ``+inf`` (``0`` for RC, EC).

    Parameters
    ----------
    name : str
        One of :data:`MEASURES`.
    t : float or array_like
        Closeness threshold, ``>= 0``.
    p_minus : float or array_like
        Global negative rate, in [0, 1].

    Examples
    --------
    >>> [round(bound(f, 0.15, 0.3), 4) for f in MEASURES]
    [0.3, 0.3, 3.0, 3.0, 0.6471, 0.6471, 4.6364]
    >>> bound("OR", 0.5, 0.3)
    inf
    """
    _check_name(name)
    scalar = _is_scalar(t, p_minus)
    return _out(_bound(name, _check_t(t), _check_p_minus(p_minus)), scalar)


def bounds(name: str, t: ArrayLike, p_minus: ArrayLike) -> tuple[FloatOrArray, FloatOrArray]:
    """Two-sided ``(lower, upper)`` bounds of a measure on a t-close table (spec 1.8).

    ======  ==================  ==================
    f       lower               upper
    ======  ==================  ==================
    RD, ED  ``-bd_f(t)``        ``bd_f(t)``
    RR, ER  ``1 / bd_f(t)``     ``bd_f(t)``
    RC, EC  ``bd_f(t)``         ``1 / bd_f(t)``
    OR      ``1 / bd_f(t)``     ``bd_f(t)``
    ======  ==================  ==================

    with ``1 / inf = 0`` and ``1 / 0 = inf``.

    Examples
    --------
    >>> [round(x, 4) for x in bounds("RR", 0.15, 0.3)]
    [0.3333, 3.0]
    >>> bounds("RC", 0.25, 0.761)
    (0.0, inf)
    """
    _check_name(name)
    scalar = _is_scalar(t, p_minus)
    lo, hi = _bounds(name, _check_t(t), _check_p_minus(p_minus))
    return _out(lo, scalar), _out(hi, scalar)


def within_bounds(
    name: str, values: ArrayLike, t: ArrayLike, p_minus: ArrayLike, eps: float = 1e-9
) -> NDArray[np.bool_]:
    """Whether measure values lie inside ``bounds(name, t, p_minus)`` (contract C6).

    ``lower - tol <= value <= upper + tol`` where ``tol = eps`` for RD, ED and
    ``tol = eps * max(1, |bound|)`` (relative) for the ratio measures. A vacuous side
    (upper ``inf``; lower ``0`` for a ratio) never fails; a NaN value (empty context) always
    fails, and ``inf`` fails against a finite upper bound.

    Returns
    -------
    ndarray of bool
        Same shape as ``values`` broadcast with ``t`` and ``p_minus``.

    Examples
    --------
    >>> within_bounds("RD", [0.1, 0.31, -0.3], 0.15, 0.3).tolist()
    [True, False, True]
    >>> within_bounds("RR", [0.0, np.inf], 0.5, 0.3).tolist()
    [True, True]
    """
    _check_name(name)
    v = np.asarray(values, dtype=np.float64)
    lo, hi = _bounds(name, _check_t(t), _check_p_minus(p_minus))
    if name in _DIFFERENCES:
        tol_lo = tol_hi = eps
        lo_vacuous = np.isneginf(lo)
    else:
        with np.errstate(invalid="ignore"):
            tol_lo = eps * np.maximum(1.0, np.abs(lo))
            tol_hi = eps * np.maximum(1.0, np.abs(hi))
        lo_vacuous = lo <= 0
    hi_vacuous = np.isposinf(hi)
    with np.errstate(invalid="ignore"):
        ok_lo = lo_vacuous | (v >= lo - tol_lo)
        ok_hi = hi_vacuous | (v <= hi + tol_hi)
    return np.asarray(ok_lo & ok_hi & ~np.isnan(v))


def inverse_bound(name: str, alpha: ArrayLike, p_minus: ArrayLike) -> FloatOrArray:
    """``t_alpha = bd_f^-1(alpha)``: the largest ``t`` in ``[0, t_max]`` with ``bd_f(t) <= alpha``
    (``bd_f(t) >= alpha`` for RC, EC), by vectorised bisection on the monotone ``bd_f``.

    A t-close table with ``t <= t_alpha`` is alpha-protective w.r.t. ``f`` (Sect. 5). The result
    is clipped to ``t_max = max(p_minus, 1 - p_minus)``; e.g. RD, ED with ``alpha >= 1`` give
    ``t_max``. Accuracy is float64 resolution (well below 1e-12).

    Raises
    ------
    ValueError
        If no ``t`` qualifies (``alpha < 0`` for RD, ED; ``alpha < 1`` for RR, ER, OR;
        ``alpha > 1`` for RC, EC).

    Examples
    --------
    >>> round(inverse_bound("RD", 0.167, 0.5), 4)   # Ex. 12
    0.0835
    >>> round(inverse_bound("RR", 3, 0.3), 6), inverse_bound("ED", 1.5, 0.3)
    (0.15, 0.7)
    """
    _check_name(name)
    scalar = _is_scalar(alpha, p_minus)
    al = np.asarray(alpha, dtype=np.float64)
    if np.any(np.isnan(al)):
        raise ValueError("alpha must not be NaN")
    al, p = np.broadcast_arrays(al, _check_p_minus(p_minus))
    top = np.maximum(p, 1 - p)
    lower_is_worse = name in LOWER_IS_WORSE

    def ok(t: NDArray[np.float64]) -> NDArray[np.bool_]:
        b = _bound(name, t, p)
        return b >= al if lower_is_worse else b <= al

    if not np.all(ok(np.zeros_like(top))):
        raise ValueError(f"no t in [0, t_max] has bd_{name}(t) within alpha={alpha!r}")
    lo, hi = np.zeros_like(top), top.copy()
    for _ in range(_BISECTION_STEPS):  # loop over halvings, not elements
        mid = (lo + hi) / 2
        if np.all((mid == lo) | (mid == hi)):  # interval down to adjacent floats
            break
        good = ok(mid)
        lo = np.where(good, mid, lo)
        hi = np.where(good, hi, mid)
    return _out(np.where(ok(top), top, lo), scalar)
