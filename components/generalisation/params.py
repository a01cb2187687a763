"""Parameters of dMondrian and dSabre (frozen, unknown keys refused)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from privfair.components.core.descriptor import OptIn, Params

__all__ = ["GeneralisationParams", "DMondrianParams", "DSabreParams"]


class GeneralisationParams(Params):
    """What both algorithms take: the closeness level ``t`` (the release is then
    bd_f(max{t, tau(R)})-protective for every measure f), whether a t below tau(R) (one class)
    is accepted, an optional ``k`` and what it covers, and how the release's protection is
    audited and its utility measured."""

    t: float = Field(
        ge=0.0,
        le=1.0,
        description="closeness level: a cut (or split) is allowed when both parts have "
        "tau <= t; at most max(p-, 1 - p-)",
    )
    single_class: Literal["refuse", "allow"] = Field(
        "refuse",
        description="a t below tau(R) allows no cut, so the release is one class with every PND "
        "attribute at its full range: 'refuse' it (bad input, naming t and tau(R)) or 'allow' it",
    )
    k: int = Field(1, ge=1, description="optional k-anonymity (1: none); see k_over")
    k_over: Literal["q_blocks", "classes"] = Field(
        "q_blocks",
        description="what k covers: 'q_blocks', every group of rows sharing the published PND "
        "labels and PD value (what a reader of the published columns can single out), or "
        "'classes', the PND labels only (the paper's k, AMB-8: a class may hold fewer than k "
        "rows of one PD group)",
    )
    audit_exhaustive_up_to: int = Field(
        12,
        ge=0,
        le=16,
        description="C6 audit: enumerate every PND itemset of the release when there are at "
        "most this many PND attributes (2^N attribute subsets); otherwise closed itemsets",
    )
    audit_min_support: int = Field(
        1, ge=1, description="C6 audit: itemsets covering fewer rows are not audited"
    )
    audit_random_itemsets: int = Field(
        2000, ge=0, description="C6 audit: seeded random itemsets with disjunctive (range) items"
    )
    audit_seed: int = Field(0, description="seed of the C6 audit's random itemsets")
    utility_queries: int = Field(
        10_000, ge=0, description="count queries of the utility workload (0: not measured)"
    )
    utility_seed: int = Field(0, description="seed of the count-query workload")


class DMondrianParams(GeneralisationParams):
    """dMondrian (Ruggieri 2014, Alg. 1): median cuts on PND attributes, d-allowable only."""

    block_rows: int | None = Field(
        None,
        ge=2,
        description="grow the subtrees of parts of at most this many rows as separate blocks "
        "on the spec's execution engine; the classes are the same for every value (each cut "
        "is still measured against the global p-); None: one process",
    )


class DSabreParams(OptIn, GeneralisationParams):
    """dSabre (Ruggieri 2014, Algs. 2-3): four (PD x decision) buckets halved while both halves
    stay t-close, each leaf filled from a seed and its nearest neighbours.

    ``split_pairs`` (off by default, a deviation from Alg. 3) lets Dichotomize split a two-row
    leaf (1, 1, 0, 0) or (0, 0, 1, 1), which halving cannot split into non-empty halves, into
    its two single rows when both have tau <= t (and k allows it)."""

    opt_in = ("split_pairs",)

    seed: int = Field(0, description="seed of the redistribution (seed tuples, random buckets)")
    seed_bucket_rule: Literal["min_ratio", "random"] = Field(
        "min_ratio",
        description="bucket the seed tuple is drawn from: lowest size/requested ratio "
        "(footnote 4) or uniformly at random (Sabre)",
    )
    split_pairs: bool = Field(
        False,
        description="deviation from the paper's Alg. 3 (off: the paper's dSabre): split a "
        "two-row leaf (1,1,0,0) or (0,0,1,1) into its two rows when both single-row halves "
        "have tau <= t, i.e. t >= max(p-, 1 - p-) (k = 1); halving caps the classes at "
        "|R| - min(a,b) - min(c,d) otherwise",
    )
