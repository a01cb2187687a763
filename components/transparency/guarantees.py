"""The guarantee kinds of the transparency family (ATR spec section 6, C0-C8, C11, C12).

Data only; the checkers are in ``privfair.components.transparency.checks`` and read the evidence frames
of ``privfair.components.transparency.audit``: ``cells`` (the cells rebuilt from the input, joined with
the published rules and privacy summary), ``fairness`` (the published measures beside their
recomputation) and ``public`` (the columns of every public table). C9 (determinism), C10
(linear time) and C13 (golden regression) are properties of the code, shown by the tests and
the benchmark rather than by a release.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from privfair.schemas.contracts import Guarantee

__all__ = [
    "InputValidity",
    "ValidDistribution",
    "Fidelity",
    "GroupOptimum",
    "GroupBound",
    "GlobalPrivacy",
    "Sandwich",
    "SolutionStructure",
    "MassConservation",
    "FairnessBounds",
    "MonotoneTradeoff",
    "PublicFields",
]

Mode = Literal["delta", "alpha"]


class InputValidity(Guarantee):
    """C0: P(x) >= 0 with sum P > 0, D_1(x) in [0, 1], unique cell keys, and the fidelity
    level valid for its mode (delta in [0, 1], alpha in (0, 1])."""

    kind: Literal["atr_input_validity"] = "atr_input_validity"
    fidelity: Mode
    level: float


class ValidDistribution(Guarantee):
    """C1: every cell is announced, 0 <= D~_1 <= 1 and |D~_0 + D~_1 - 1| <= tolerance."""

    kind: Literal["atr_valid_distribution"] = "atr_valid_distribution"
    tolerance: float = Field(1e-9, gt=0)


class Fidelity(Guarantee):
    """C2: delta-mode |D~_a - D_a| <= 1 - delta, alpha-mode alpha D_a <= D~_a <= D_a / alpha,
    for every cell and both outcomes (within ``tolerance``)."""

    kind: Literal["atr_fidelity"] = "atr_fidelity"
    fidelity: Mode
    level: float
    tolerance: float = Field(1e-9, gt=0)


class GroupOptimum(Guarantee):
    """C3: in every QID group the largest confidence an adversary gets from the announced
    mapping equals beta*_g = max{beta_0, beta_1, beta_p, beta_min}, recomputed in closed form
    from (P, L, H) (corrected Theorem 1, E3), within ``tolerance`` (relative), and equals the
    group's published value."""

    kind: Literal["atr_group_optimum"] = "atr_group_optimum"
    fidelity: Mode
    level: float
    tolerance: float = Field(1e-9, gt=0)


class GroupBound(Guarantee):
    """C3 of a randomised announcement (``announce: randomised``, beyond the paper): in every
    QID group the largest confidence an adversary gets from the announced mapping lies in
    [beta_min,g, beta*_g + slack], beta*_g recomputed in closed form from (P, L, H) (corrected
    Theorem 1), and equals the group's published value, within ``tolerance`` (relative). It
    replaces C3 and C5-C7, which describe the optimum's own mapping."""

    kind: Literal["atr_group_bound"] = "atr_group_bound"
    fidelity: Mode
    level: float
    slack: float = Field(gt=0, le=1)
    tolerance: float = Field(1e-9, gt=0)


class GlobalPrivacy(Guarantee):
    """C4: the published beta*_global equals the largest confidence over every group, outcome
    and cell of the published mapping, and the largest published group value."""

    kind: Literal["atr_global_privacy"] = "atr_global_privacy"
    tolerance: float = Field(1e-9, gt=0)


class Sandwich(Guarantee):
    """C5 (Lemmas 4-6): beta_min,g <= beta*_g <= C*_g (the confidence under the true D), per
    group; at fidelity 1 (delta = 1) the announced mapping is D itself."""

    kind: Literal["atr_sandwich"] = "atr_sandwich"
    fidelity: Mode
    level: float
    tolerance: float = Field(1e-9, gt=0)


class SolutionStructure(Guarantee):
    """C6 (Corollary 1): case beta_0: D~_0(x) = min(D~_0max, M0/P) for every x; case beta_1:
    D~_1(x) = min(H, M1/P); case beta_p: D~_1(x^1) = L(x^1) and D~_1(x^0) = H(x^0); when
    beta* = beta_min: every P-maximal cell announces S_1/N. Cases recomputed from (P, L, H);
    the case equalities hold on each cell's joint mass P D~_1 within ``tolerance`` times its
    group's mass (a cell of negligible mass has no rule to speak of)."""

    kind: Literal["atr_solution_structure"] = "atr_solution_structure"
    fidelity: Mode
    level: float
    tolerance: float = Field(1e-9, gt=0)


class MassConservation(Guarantee):
    """C7: the announced positive mass S_1 = sum P D~_1 of each group lies in
    [M1/beta*, N - M0/beta*] (S_hi in case beta_0, S_lo in cases beta_1 and beta_p), within
    ``tolerance`` times the group's mass."""

    kind: Literal["atr_mass_conservation"] = "atr_mass_conservation"
    fidelity: Mode
    level: float
    tolerance: float = Field(1e-9, gt=0)


class FairnessBounds(Guarantee):
    """C8 (Lemma 2): every published measure equals its value recomputed from the published
    rules, its interval contains the true value (recomputed from the input), and in delta-mode
    |announced - true| <= min{2(1 - delta), 1} for SP/CSP and <= 1 - delta for each rate."""

    kind: Literal["atr_fairness_bounds"] = "atr_fairness_bounds"
    fidelity: Mode
    level: float
    tolerance: float = Field(1e-9, gt=0)


class MonotoneTradeoff(Guarantee):
    """C11: beta*_global(level), recomputed in closed form on ``grid``, is non-decreasing and
    reaches C* at fidelity 1."""

    kind: Literal["atr_monotone_tradeoff"] = "atr_monotone_tradeoff"
    fidelity: Mode
    grid: tuple[float, ...]
    tolerance: float = Field(1e-9, gt=0)


class PublicFields(Guarantee):
    """C12: the public tables hold only the listed ``table.column`` fields: no true rule, no
    fidelity interval, no solver candidate, case or pinned cell, no true fairness value."""

    kind: Literal["atr_public_fields"] = "atr_public_fields"
    allowed: tuple[str, ...]
