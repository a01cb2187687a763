"""The guarantee kinds of the synthesis family (spec section 4: PRIV-1 to PRIV-5, FAIR-1 to
FAIR-4, OUT-1 and OUT-2, OUT-1's null rule on its own).

Data only; the checkers are in ``privfair.components.synthesis.checks`` and read the evidence frames of
``privfair.components.synthesis.audit``, rebuilt from the published table, the sidecars (ledger, noisy
measurements, compression, tree, fitted model) and the input: ``ledger``, ``compression``,
``structure``, ``model``, ``synthetic`` and ``schema``. Roles (protected, admissible,
outcomes) and domains come from the input, never from what the release says of itself.
OUT-3 (determinism) does not apply: the noise is OpenDP's and takes no seed.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from privfair.components.synthesis.params import MAX_ROWS
from privfair.schemas.contracts import Guarantee

__all__ = [
    "PrivacyLedger",
    "PublicCompression",
    "TreeStructure",
    "FairTree",
    "ModelIndependence",
    "SyntheticIndependence",
    "SyntheticSchema",
    "SyntheticNulls",
    "AdaptiveLedger",
    "ChordalStructure",
]

Selector = Literal["mst", "greedy", "exponential"]


class PrivacyLedger(Guarantee):
    """PRIV-1, PRIV-2, PRIV-5: the ledger holds exactly the planned steps for ``attributes``
    and ``selector`` (d one-way Gaussians, d - 1 noisy-max selections or d(d - 1)/2 Gaussian
    scores, d - 1 two-way Gaussians, in that order), each step's noise scale is the planned one
    and its rho the one OpenDP's privacy map gives that scale, each phase spends its ``split``
    share, the total equals ``rho`` = the CKS budget of (``epsilon``, ``delta``) within
    ``tolerance`` (relative) and never exceeds it, OpenDP converts the total back to at most
    ``epsilon``, and every scale is finite and positive (noise present)."""

    kind: Literal["privacy_ledger"] = "privacy_ledger"
    epsilon: float
    delta: float
    rho: float
    split: tuple[float, float, float]
    selector: Selector
    attributes: tuple[str, ...]
    tolerance: float = Field(1e-12, gt=0)


class PublicCompression(Guarantee):
    """PRIV-3: which values were merged is a function of the noisy 1-way counts only: value v
    of attribute a is kept iff its noisy count is at least ``threshold`` times that
    measurement's noise std, recomputed from the measurements and the ledger; with
    ``enabled`` False nothing is merged."""

    kind: Literal["public_compression"] = "public_compression"
    enabled: bool
    threshold: float = 3.0
    attributes: tuple[str, ...]


class TreeStructure(Guarantee):
    """FAIR-1 (structure): the selected edges form a spanning tree of ``attributes`` (d - 1
    edges, no cycle), the 2-way marginals the ledger paid for are exactly its edges, and the
    fitted model's cliques are exactly its edges."""

    kind: Literal["tree_structure"] = "tree_structure"
    attributes: tuple[str, ...]


class FairTree(Guarantee):
    """FAIR-1 (fairness), FAIR-2: after deleting the ``admissible`` attributes from the tree,
    no component holds both a ``protected`` attribute and an ``outcome`` (every tree path from
    one to the other passes through an admissible attribute); with ``neighbours_admissible``
    (Greedy-PreFair) every tree neighbour of an outcome is admissible or an outcome."""

    column_fields: ClassVar[tuple[str, ...]] = ("protected", "admissible", "outcomes")
    kind: Literal["fair_tree"] = "fair_tree"
    protected: tuple[str, ...]
    admissible: tuple[str, ...]
    outcomes: tuple[str, ...]
    neighbours_admissible: bool = False


class ModelIndependence(Guarantee):
    """FAIR-3: in the fitted tree model, for every outcome o and protected p, the conditional
    mutual information I(o; p | a) <= ``tolerance`` nats, a being the admissible attribute on
    the o-p tree path nearest o (computed by exact inference on the model's cliques)."""

    column_fields: ClassVar[tuple[str, ...]] = ("protected", "admissible", "outcomes")
    kind: Literal["model_independence"] = "model_independence"
    protected: tuple[str, ...]
    admissible: tuple[str, ...]
    outcomes: tuple[str, ...]
    tolerance: float = Field(1e-8, gt=0)


class SyntheticIndependence(Guarantee):
    """FAIR-4: on the synthetic table, for every outcome o and protected p, the G-test of o
    independent of p given a (the admissible attribute nearest o on their tree path, which
    separates them in a fair tree) does not reject at level ``alpha`` / (number of pairs):
    G = 2 N I(o; p | a) against chi-square with sum over the values of a of (r - 1)(c - 1) df.
    Conditioning on one separating attribute rather than on all of S_o keeps the strata large
    enough for the chi-square law (on Adult, S_o's joint strata left G = 311 on 208 df for an
    independent pair: the G-test is anti-conservative on sparse tables). Without an
    admissible attribute on the path the test is unconditional."""

    column_fields: ClassVar[tuple[str, ...]] = ("protected", "admissible", "outcomes")
    kind: Literal["synthetic_independence"] = "synthetic_independence"
    protected: tuple[str, ...]
    admissible: tuple[str, ...]
    outcomes: tuple[str, ...]
    alpha: float = Field(1e-4, gt=0, lt=1)


class SyntheticSchema(Guarantee):
    """OUT-1, OUT-2: the synthetic table has the input's ``columns`` in order with the
    ``types`` the spec declares (``domain.published_type``: from the bins and declared domains,
    never the input's Arrow types), every value lies in its declared public domain, and it has ``rows`` rows (None:
    the model's noisy total recomputed from the noisy measurements, rounded, at least 1 and at
    most ``max_rows``)."""

    kind: Literal["synthetic_schema"] = "synthetic_schema"
    columns: tuple[str, ...]
    types: tuple[str, ...]
    rows: int | None = None
    max_rows: int = Field(MAX_ROWS, ge=1)


class SyntheticNulls(Guarantee):
    """OUT-1 (nulls): a null appears in the synthetic table only in the ``nullable`` columns,
    those whose declared public domain holds a null level (a null in the role's ``domain``, or
    the column in ``params.nulls``); every other column has a value in every row. The noise
    never invents a null where the release's public schema declares none."""

    column_fields: ClassVar[tuple[str, ...]] = ("nullable",)
    kind: Literal["synthetic_nulls"] = "synthetic_nulls"
    nullable: tuple[str, ...] = ()


class AdaptiveLedger(Guarantee):
    """PRIV-1, PRIV-2 for AIM: the ledger opens with one Gaussian 1-way step per attribute of
    ``attributes`` (in order) at the first round's std ``sqrt(rounds / (2 (1 - select_share)
    rho))``, then rounds of one noisy-max selection followed by one Gaussian 2-way
    measurement (every measurement paid for by a selection before it); in each round the
    selection's rho is ``select_share`` of the round's (relative ``tolerance_share``); a round's
    std is the last round's or half of it (annealing), except the last round's, which spends
    what is left; every round but the last started with at least two of its own cost left;
    each step's rho is the one OpenDP's privacy map gives its scale, every scale finite and
    positive; OpenDP's composed total equals ``rho`` (the CKS budget of (``epsilon``,
    ``delta``)) within ``tolerance`` (relative) and never exceeds it, and converts back to at
    most ``epsilon``."""

    kind: Literal["adaptive_ledger"] = "adaptive_ledger"
    epsilon: float
    delta: float
    rho: float
    rounds: int
    select_share: float
    attributes: tuple[str, ...]
    tolerance: float = Field(1e-12, gt=0)
    tolerance_share: float = Field(1e-9, gt=0)


class ChordalStructure(Guarantee):
    """AIM's structure: the pairs selected (the ``cliques`` sidecar, in round order) are
    exactly the 2-way queries the ledger paid for, in order, each joining two attributes of
    ``attributes``; their graph is chordal (so its maximal cliques form a junction tree and the
    model is exact on it), and the fitted model's edges are exactly the selected pairs (no
    dependence the release did not measure)."""

    kind: Literal["chordal_structure"] = "chordal_structure"
    attributes: tuple[str, ...]
