"""The guarantee kinds only the generalisation family declares (dMondrian/dSabre spec section 3).

Data only; their checkers are in ``privfair.components.generalisation.checks``. Conservation (C1) uses
the shared ``partition`` and ``attributes_preserved`` kinds (rows, decision) and ``pd_groups``
(the PD attribute, at the granularity of the bound). Every kind here reads the audit frame
(``privfair.components.generalisation.audit``): one row per input row with the input's ranks, the
published labels read back into ranks, the PD group and the published PD value, the decision
and the class sidecar.

Each guarantee means what a reader of the published columns takes it to mean: a q-block is a
set of rows sharing every published PND label *and the published PD value*, as the reader forms
it, never a grouping the reader cannot see.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from privfair.components.core.descriptor import OptIn
from privfair.schemas.contracts import Guarantee

__all__ = [
    "PublishedGroups",
    "TruthfulGeneralisation",
    "ClassLabels",
    "DecisionCloseness",
    "LeafCloseness",
    "BoundedDiscrimination",
    "ClassSize",
    "DisjointClasses",
    "DichotomyLeaves",
]


class PublishedGroups(Guarantee):
    """C1 (PD attribute): the PD attribute ``attribute`` is published at the granularity the
    bound covers, the two groups. Each published PD value stands for exactly one group and each
    group for exactly one value, and each row's published value is its own: with ``groups``,
    the string "protected" or "unprotected" naming the input row's group; without (a PD
    attribute of two values, one per group), the input row's value itself. A release that
    publishes a PD value finer than a group (a raw value of a many-valued PD attribute) breaks
    it: its q-blocks are ones no bound covers."""

    kind: Literal["pd_groups"] = "pd_groups"
    column_fields: ClassVar[tuple[str, ...]] = ("attribute",)
    attribute: str
    groups: bool = True

    def published_values(self) -> dict[str, tuple]:
        return {self.attribute: ("protected", "unprotected")} if self.groups else {}


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
    """C4 (main contract): every q-block of the release, the rows sharing every published label
    of ``attributes`` and the published PD value (whatever that value is: a reader's q-block),
    has a negative-decision rate within ``t`` of the input's global rate p-:
    |neg_rate(Q) - p-| <= t (t = max{t, tau(R)})."""

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
    """C7: every q-block of the release (rows sharing all published PND labels and the
    published PD value) has >= ``k`` rows, with ``over`` = "q_blocks"; with ``over`` =
    "classes", every class (rows sharing all published PND labels: k-anonymity on the PND
    attributes only, AMB-8)."""

    kind: Literal["class_size"] = "class_size"
    k: int = Field(ge=1)
    over: Literal["q_blocks", "classes"] = "q_blocks"


class DisjointClasses(Guarantee):
    """C8 (dMondrian): any two classes have disjoint labels on at least one listed PND
    attribute, so classes and leaves correspond one to one."""

    kind: Literal["disjoint_classes"] = "disjoint_classes"
    column_fields: ClassVar[tuple[str, ...]] = ("attributes",)
    attributes: tuple[str, ...]


class DichotomyLeaves(OptIn, Guarantee):
    """C9 (dSabre): the multiset of the classes' 4-fold count vectors equals the leaves of
    Dichotomize((|A|, |B|, |C|, |D|), ``t``, ``k``) with k over ``k_over`` (and two-row leaves
    split with ``split_pairs``), recomputed from the input's counts."""

    opt_in = ("split_pairs",)

    kind: Literal["dichotomy_leaves"] = "dichotomy_leaves"
    t: float = Field(ge=0)
    k: int = Field(1, ge=1)
    k_over: Literal["q_blocks", "classes"] = "q_blocks"
    split_pairs: bool = False  # DSabreParams.split_pairs; written out only when set
