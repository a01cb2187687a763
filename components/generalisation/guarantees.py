"""The guarantee kinds only the generalisation family declares (dMondrian/dSabre spec section 3).

Data only; their checkers are in ``components.generalisation.checks``. Conservation (C1) uses
the shared ``partition`` and ``attributes_preserved`` kinds. Every kind here reads the audit
frame (``components.generalisation.audit``): one row per input row with the input's ranks,
the published labels read back into ranks, the PD group, the decision and the class sidecar.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from schemas.contracts import Guarantee

__all__ = [
    "TruthfulGeneralisation",
    "ClassLabels",
    "DecisionCloseness",
    "LeafCloseness",
    "BoundedDiscrimination",
    "ClassSize",
    "DisjointClasses",
    "DichotomyLeaves",
]


class TruthfulGeneralisation(Guarantee):
    """C2: every published cell of each listed PND attribute is a label over the input's active
    domain (an interval ``lo <= hi``, or a contiguous value set) that contains the row's original
    value; ``lo == hi`` only as the original value itself."""

    kind: Literal["truthful_generalisation"] = "truthful_generalisation"
    column_fields: ClassVar[tuple[str, ...]] = ("attributes",)
    attributes: tuple[str, ...]


class ClassLabels(Guarantee):
    """C3: the rows of a class (``lineage`` sidecar (row_id, class)) share one label per listed PND attribute,
    and that label is exactly [min, max] of the members' original values."""

    kind: Literal["class_labels"] = "class_labels"
    column_fields: ClassVar[tuple[str, ...]] = ("attributes",)
    attributes: tuple[str, ...]


class DecisionCloseness(Guarantee):
    """C4 (main contract): every q-block of the release (rows sharing every published label of
    ``attributes`` and the PD value) has a negative-decision rate within ``t`` of the input's
    global rate p-: |neg_rate(Q) - p-| <= t (t = max{t, tau(R)})."""

    kind: Literal["decision_closeness"] = "decision_closeness"
    column_fields: ClassVar[tuple[str, ...]] = ("attributes",)
    attributes: tuple[str, ...]
    t: float = Field(ge=0)


class LeafCloseness(Guarantee):
    """C5: ``t_eff`` = max{``t``, tau(R)} (recomputed from the input), every class (algorithm
    leaf) has tau <= t_eff, and when ``t`` < tau(R) there is exactly one class, every PND
    attribute at its global [min, max]."""

    kind: Literal["leaf_closeness"] = "leaf_closeness"
    t: float = Field(ge=0)
    t_eff: float = Field(ge=0)


Measure = Literal["RD", "ED", "RR", "ER", "RC", "EC", "OR"]


class BoundedDiscrimination(Guarantee):
    """C6 (Theorems 10, 15, 20, 23): for every audited PND itemset B of the release with a
    non-empty cover, each measure f lies within its two-sided bound at ``t`` (RD, ED in
    [-bd, bd]; RR, ER in [1/bd, bd]; RC, EC in [bd, 1/bd]; OR in [1/bd, bd]) and tau(B) <= t.

    Audited itemsets: every itemset over the published labels when there are at most
    ``exhaustive_up_to`` PND attributes (else every itemset over at most that many attributes
    (closed or not), the rest by sampling), those covering >= ``min_support`` rows, plus
    ``random_itemsets`` seeded (``seed``) itemsets of disjunctive range items."""

    kind: Literal["bounded_discrimination"] = "bounded_discrimination"
    t: float = Field(ge=0)
    measures: tuple[Measure, ...] = ("RD", "ED", "RR", "ER", "RC", "EC", "OR")
    exhaustive_up_to: int = Field(12, ge=0)
    min_support: int = Field(1, ge=1)
    random_itemsets: int = Field(0, ge=0)
    seed: int = 0


class ClassSize(Guarantee):
    """C7: every class of the release (rows sharing all published PND labels) has >= ``k`` rows
    (k-anonymity on the PND attributes; AMB-8)."""

    kind: Literal["class_size"] = "class_size"
    k: int = Field(ge=1)


class DisjointClasses(Guarantee):
    """C8 (dMondrian): any two classes have disjoint labels on at least one listed PND
    attribute, so classes and leaves correspond one to one."""

    kind: Literal["disjoint_classes"] = "disjoint_classes"
    column_fields: ClassVar[tuple[str, ...]] = ("attributes",)
    attributes: tuple[str, ...]


class DichotomyLeaves(Guarantee):
    """C9 (dSabre): the multiset of the classes' 4-fold count vectors equals the leaves of
    Dichotomize((|A|, |B|, |C|, |D|), ``t``, ``k``), recomputed from the input's counts."""

    kind: Literal["dichotomy_leaves"] = "dichotomy_leaves"
    t: float = Field(ge=0)
    k: int = Field(1, ge=1)
