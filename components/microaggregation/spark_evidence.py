"""A blocked microaggregation release's by-group guarantees checked in parts on a Spark
cluster, the driver holding no row (issue 46): the Spark twin of the validator's parts step
(``audit.evidence_parts`` then ``Engine.map_parts`` of ``parts.check_part``).

``check_parts_on_spark`` takes the input and the release as frames whose rows stay on the
executors (``SparkFrame``s; each row's position in a column ``ROW``) and returns the per-part
``RESULTS`` frame the validator's ``_check_parts`` returns on the same tables held locally:
the same parts, the same rows, the same JSON. Every step runs where the rows are:

1. the validator's own fit of the input (``frame_fit``): ``audit.audit_fit`` run on the
   frame's ``blockwise.stand_in`` (its distinct values and numeric ranges: the label's
   positive value, the QI levels, domains and min-max ranges are the table's), the favoured
   protected value then decided by ``encoding.favoured_of`` from the rows' counts per
   (protected, label) value (one ``group_counts`` on the executors), as ``audit_fit`` decides
   it from the rows;
2. each input row encoded with that fit (``mapInArrow``: ``encode_qis``, and its split side,
   ``indicator`` of the favoured value for fairlets), and C11's split recomputed
   (``spark_split.spark_blocks``: ``split_blocks``'s blocks, with the contract's
   ``block_rows``, ``block_m``, ``block_n``);
3. the release read in its published order (data and lineage joined on their published
   position) and each published row given the block of its lineage ``row_id``'s input row (a
   join); ``evidence_parts``'s conditions decided from aggregates: a lineage that maps each
   published row to an input row, every group in one block (one count), groups numbered in
   block order (each block's least and greatest group: one row per block, collected);
4. the packed rows of every part built as DataFrame columns in ``parts.pack``'s format (input
   side ``__part, __side = 0, __row, __in__<col>``; published side ``__part, __side = 1,
   __row`` (the input row), ``__pos`` (the published position), ``__out__<col>``,
   ``__lin__<col>``; each side null in the other's columns), and each part checked by
   ``check_part`` on a Python worker (``groupBy("__part").applyInArrow``, as
   ``SparkEngine.map_parts`` runs it), with the input's, the release's and the lineage's
   privfair schemas, so each part unpacks to the tables the local validator's part holds.

Steps 1 and 2 (``split_input``) depend on the input and C11 alone: their ``SplitInput`` (the
input's rows with their block, persisted on the executors) serves every release of that input
and contract checked after it.

What reaches the driver: a few aggregates (the stand-in's distinct values of each non-numeric
column, as ``plan_of_frame`` reads them), one row per block and the results (one row per part
and guarantee). The frames' Spark types (a dictionary column arrives as its values, no
metadata) are cast back by ``check_part`` to the schemas given.

Not on this path (``InputError`` naming ``scaling``): a z-score scaling, in the params or in
C11 (a mean and a standard deviation summed on a cluster are not the local sum's bits).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core.engine import SparkFrame, _in_block, cluster_job, current_engine
from privfair.components.core.parts import IN, LIN, OUT, PART, POS, RESULTS, SIDE, check_part
from privfair.components.microaggregation.audit import AuditFit, audit_fit, part_evidence
from privfair.components.microaggregation.blockwise import ROW, stand_in
from privfair.components.microaggregation.encoding import (
    EncodedQIs,
    as_held,
    binary_values,
    favoured_of,
    scale_of,
)
from privfair.components.microaggregation.fair_mdav import Tally
from privfair.components.microaggregation.spark_split import BLOCK, own_names
from privfair.schemas.errors import InputError
from privfair.schemas.roles import Role, read_roles

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["SplitInput", "check_parts_on_spark", "frame_fit", "split_input"]

# internal columns of the published side before packing
_PPOS, _RID, _GRP = "__pf_pos", "__pf_row_id", "__pf_group"
#: the scalings whose (offset, scale) the stand-in's ranges give exactly (``scale_of``)
_EXACT = ("minmax", "none")


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def frame_fit(frame: SparkFrame, scaling: str) -> tuple[AuditFit, EncodedQIs]:
    """``audit.audit_fit`` of the table whose rows ``frame`` holds, from aggregates.

    The rule is ``audit_fit``'s: the label's positive value (the declared one, else the larger
    of its two values), the QI encoding's levels, domains and scaling, and the favoured
    protected value (the higher positive ratio, ties to the declared value, else the larger).
    The encoding and the positive value are ``audit_fit``'s own on the frame's ``stand_in``
    (the same schema, distinct values and numeric minima and maxima, so the same levels,
    domains and min-max ranges); the favoured value is ``favoured_of`` the positive ratios
    counted per (protected, label) value on the executors (a ``Tally``), where ``audit_fit``
    counts the rows it holds. The current engine must be a ``SparkEngine``.

    Parameters
    ----------
    frame : SparkFrame
        The input (``frame.schema``: privfair's schema, its roles in the field metadata).
    scaling : str
        The QI scaling (``minmax`` or ``none``; ``zscore`` is not exact here and refused).

    Returns
    -------
    (AuditFit, EncodedQIs)
        The fit, and the stand-in's encoding (its ``numeric`` holds each numeric QI's minimum
        and maximum, so ``scale_of`` of it under ``minmax`` or ``none`` is the table's).

    Raises
    ------
    InputError
        Where ``audit_fit`` refuses the table (a binary role column with nulls or not two
        values, a numeric QI with nulls...), or for ``scaling: zscore``.
    """
    if scaling not in _EXACT:
        raise InputError(
            "scaling",
            f"'{scaling}' scales by a mean and a standard deviation a cluster sums in another "
            "order than this process",
            "use 'minmax' or 'none', or validate on the local engine",
        )
    roles = read_roles(frame.schema)
    stand = stand_in(frame, roles)
    fit, enc = audit_fit(stand, scaling)
    if fit.favoured is None:
        return fit, enc
    (prot,), (lab,) = roles.with_role(Role.PROTECTED), roles.with_role(Role.LABEL)
    (got,) = current_engine().group_counts(frame, [(prot.name, lab.name)])
    counts: dict[tuple, int] = {}
    for p_, l_, c in zip(*(got.column(i).to_pylist() for i in range(3)), strict=True):
        counts[(p_, l_)] = counts.get((p_, l_), 0) + int(c)
    tally = Tally(counts, {})
    _, distinct = binary_values(stand, prot.name, "protected attribute")
    pr = [tally.of(v, fit.positive) / tally.of(v) for v in distinct]
    declared = prot.favoured[0] if prot.favoured else None
    favoured = as_held(favoured_of(distinct, pr, declared), distinct)
    return dataclasses.replace(fit, favoured=favoured), enc


def _lineage_fits(lineage: SparkFrame, n_in: int, n_published: int) -> tuple[bool, int]:
    """(whether the lineage maps each published row to an input row with a group number, as
    ``evidence_parts`` demands, the number of groups), from one aggregate: as many lineage rows
    as published rows, every ``row_id`` in ``[0, n_in)``, every ``group`` at least 0 (a null
    in either fails, as its int64 cast does locally)."""
    from pyspark.sql import functions as F

    rid, grp = F.col("row_id"), F.col("group")
    with cluster_job("checking the lineage"):
        s = lineage.df.agg(
            F.count(F.lit(1)).alias("n"),
            F.count(rid).alias("n_rid"),
            F.count(grp).alias("n_grp"),
            F.min(rid).alias("lo"),
            F.max(rid).alias("hi"),
            F.min(grp).alias("g_lo"),
            F.max(grp).alias("g_hi"),
        ).first()
    n = int(s["n"])
    if n != n_published:
        return False, 0
    if n == 0:
        return True, 0
    ok = s["n_rid"] == n and s["n_grp"] == n and s["lo"] >= 0 and s["hi"] < n_in and s["g_lo"] >= 0
    return bool(ok), int(s["g_hi"]) + 1 if ok else 0


def _blocks_in_group_order(groups: DataFrame) -> int | None:
    """The number of blocks holding published rows if every group lies in one block and groups
    are numbered in block order (``evidence_parts``'s rule: sorted by group number, their
    blocks never decrease), else None. ``groups``: one row per published row, its ``_GRP`` and
    ``BLOCK``. One job, one row per block collected: each block's least and greatest group
    among the groups whose least block it is, and whether one of those groups has rows in
    another block; with every group in one block, the blocks never decrease in group order iff
    each block's greatest group is below the least group of the next block holding one."""
    from pyspark.sql import functions as F

    with cluster_job("checking that every group lies in one block"):
        per_block = (
            groups.groupBy(_GRP)
            .agg(F.min(BLOCK).alias("lo"), F.max(BLOCK).alias("hi"))
            .groupBy(F.col("lo").alias(BLOCK))
            .agg(
                F.min(_GRP).alias("first"),
                F.max(_GRP).alias("last"),
                F.max((F.col("lo") != F.col("hi")).cast("int")).alias("spans"),
            )
            .collect()
        )
    if any(r["spans"] for r in per_block):
        return None  # a group spans blocks
    ranges = sorted((int(r[BLOCK]), int(r["first"]), int(r["last"])) for r in per_block)
    if not all(a[2] < b[1] for a, b in zip(ranges, ranges[1:], strict=False)):
        return None  # groups not numbered in block order
    return len(ranges)


@dataclass
class SplitInput:
    """The validator's split of an input on the cluster (``split_input``): the fit
    (``frame_fit``), the stand-in's encoding, C11 (``seed``, whose ``block_rows``, ``block_m``
    and ``block_n`` the split used), and ``blocked``, the input's rows with their ``BLOCK``
    (persisted on the executors until ``unpersist``)."""

    fit: AuditFit
    enc: EncodedQIs
    seed: object
    blocked: DataFrame
    n_rows: int

    def unpersist(self) -> None:
        self.blocked.unpersist()


def _seed(checked: list):
    """C11 with ``block_rows`` (the guarantee ``evidence_parts`` reads the split from)."""
    return next((g for g in checked if g.kind == "seed_nearest" and g.block_rows), None)


def split_input(
    input_frame: SparkFrame, params, checked: list, local_rows: int = 1_000_000
) -> SplitInput | None:
    """Steps 1 and 2 of ``check_parts_on_spark``: the fit of ``input_frame`` and C11's split of
    it, each row's block computed on the executors (``split_blocks(x, codes, side,
    block_m, block_n, block_rows)``, ``x`` and ``codes`` the rows' QIs encoded with the fit,
    ``side`` 1 for the favoured protected value in a fairlet release, else 0), reusable for
    several releases of the same input and contract (the caller then unpersists it).

    Returns
    -------
    SplitInput or None
        None where ``evidence_parts`` cuts no part for any release of this input: no C11 with
        ``block_rows`` in ``checked``, an input ``audit_fit`` refuses, a fairlet release of a
        table without a favoured value.

    Raises
    ------
    InputError
        For a z-score scaling (``frame_fit``).
    """
    from pyspark.sql import functions as F

    from privfair.components.microaggregation.spark_split import (
        encoded_for_split,
        spark_blocks,
        spark_types,
    )

    seed = _seed(checked)
    if seed is None:
        return None
    for scaling in (params.scaling, seed.scaling):
        if scaling not in _EXACT:
            frame_fit(input_frame, scaling)  # refused, naming the scaling
    try:
        fit, enc = frame_fit(input_frame, params.scaling)
    except InputError:  # the files do not fit together: the whole audit says so
        return None
    fairlet = seed.grouping == "fairlet"
    if fairlet and fit.favoured is None:
        return None
    in_schema = input_frame.schema
    own_names(in_schema)  # an input column the plan's own would replace: no verdict on it
    prot = read_roles(in_schema).with_role(Role.PROTECTED)[0].name if fairlet else None
    side = (prot, fit.favoured, [fit.favoured]) if prot is not None else None
    encoded, xs, cs = encoded_for_split(
        input_frame.df, in_schema, params.scaling, fit.enc, ROW, side
    )
    given = pa.schema([*spark_types(in_schema), pa.field(ROW, pa.int64())])
    with cluster_job("recomputing the release's blocks"):
        blocked = spark_blocks(
            encoded,
            xs,
            cs,
            "__pa",
            ROW,
            seed.block_m,
            seed.block_n,
            seed.block_rows,
            local_rows=local_rows,
        )
    blocked = blocked.select(*(F.col(_q(n)) for n in given.names), F.col(BLOCK)).persist()
    return SplitInput(fit, enc, seed, blocked, input_frame.num_rows)


def check_parts_on_spark(
    input_frame: SparkFrame,
    data: SparkFrame,
    lineage: SparkFrame,
    params,
    checked: list,
    local_rows: int = 1_000_000,
    split: SplitInput | None = None,
) -> pd.DataFrame | None:
    """The per-part results (``parts.RESULTS``) of a blocked release's guarantees checked in
    parts, computed on the Spark cluster the frames' rows are on (the module's steps).

    The rule is the validator's: the guarantees of ``checked`` checked in parts are those
    whose kind is ``in_parts``; the parts are the blocks of C11's split (``seed_nearest`` with
    ``block_rows``) recomputed from the input with the validator's own fit
    (``audit_fit``), each part holding its block's input rows and the published rows whose
    lineage ``row_id`` is one of them; each part is checked by ``check_part`` with
    ``audit.part_evidence`` (the fit, the whole table's group count and scalings). There are
    none (None) where ``evidence_parts`` gives none: no guarantee checked in parts, no C11
    with ``block_rows``, a lineage without ``group`` or not mapping each published row to an
    input row, a group whose rows lie in several blocks, groups not numbered in block order,
    an input ``audit_fit`` refuses.

    Parameters
    ----------
    input_frame : SparkFrame
        The input; its ``df`` holds each row's input position (``0 .. N-1``) in ``ROW``
        (``privfair.io.positions.with_positions``) beside the columns of its ``schema``.
    data, lineage : SparkFrame
        The published table and its lineage sidecar (``row_id``, ``group``...), their ``df``
        each row's published position (``0 .. M-1``: the parts read in order) in ``ROW``,
        their ``schema`` privfair's (the parts' Arrow schemas, roles in the field metadata).
    params : FairMDAVParams or MDAVParams
        The release's parameters (``scaling``).
    checked : list of Guarantee
        The guarantees to check, as the validator's ``_parts`` takes them (also the contract
        C11 is read from, as ``evidence_parts`` reads it).
    local_rows : int
        Blocks of the split of at most this many rows are finished by one executor task
        (``spark_blocks``).
    split : SplitInput, optional
        ``split_input(input_frame, params, checked)``, computed once for several releases of
        the input (left persisted); by default computed here and unpersisted on return.

    Returns
    -------
    pandas.DataFrame or None
        ``RESULTS``'s columns, one row per part and guarantee checked in parts: parts in
        order, each part's guarantees in ``checked``'s order; what ``_check_parts`` returns
        for the same tables read locally (for a release of one part too, which the local
        validator's ``_parts`` audits whole instead).

    Raises
    ------
    InputError
        For a z-score scaling (``frame_fit``).
    ValueError
        When ``split`` was made for another C11.
    privfair.schemas.errors.ClusterError
        A Spark job failed.
    """
    from privfair.components.core.registry import kind_checks

    kinds = kind_checks()
    texts = [g.model_dump_json() for g in checked if kinds[g.kind].in_parts]
    if not texts or _seed(checked) is None or "group" not in lineage.schema.names:
        return None
    own = split is None
    if own:
        split = split_input(input_frame, params, checked, local_rows)
        if split is None:
            return None
    elif split.seed != _seed(checked):
        raise ValueError("split was made for another C11 (its block_rows, block_m, block_n)")
    try:
        ok, n_groups = _lineage_fits(lineage, split.n_rows, data.num_rows)
        if not ok:
            return None
        return _checked_parts(split, input_frame, data, lineage, params, texts, n_groups)
    finally:
        if own:
            split.unpersist()


def _checked_parts(
    split: SplitInput,
    input_frame: SparkFrame,
    data: SparkFrame,
    lineage: SparkFrame,
    params,
    texts: list[str],
    n_groups: int,
) -> pd.DataFrame | None:
    """Steps 3 and 4 of ``check_parts_on_spark``."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    blocked, in_names = split.blocked, input_frame.schema.names
    # step 3: each published row's part, the block of its input row
    blocks = blocked.select(F.col(ROW).alias(_RID), F.col(BLOCK))
    lin = lineage.df.select(
        F.col(ROW).alias(_PPOS),
        F.col("row_id").cast("long").alias(_RID),
        F.col("group").cast("long").alias(_GRP),
        *(F.col(_q(c)).alias(LIN + c) for c in lineage.schema.names),
    )
    published = (
        data.df.select(
            F.col(ROW).alias(_PPOS), *(F.col(_q(c)).alias(OUT + c) for c in data.schema.names)
        )
        .join(lin, _PPOS)
        .join(blocks, _RID)
    ).persist()
    try:
        n_parts = _blocks_in_group_order(published.select(_GRP, BLOCK))
        if n_parts is None:
            return None
        # step 4: the packed rows, checked part by part
        ins = blocked.select(
            *(F.col(_q(c)).alias(IN + c) for c in in_names),
            F.col(BLOCK).alias(PART),
            F.lit(0).cast("byte").alias(SIDE),
            F.col(ROW).cast("long").alias(ROW),
        )
        outs = published.select(
            *(F.col(_q(OUT + c)) for c in data.schema.names),
            *(F.col(_q(LIN + c)) for c in lineage.schema.names),
            F.col(BLOCK).alias(PART),
            F.lit(1).cast("byte").alias(SIDE),
            F.col(_RID).alias(ROW),
            F.col(_PPOS).cast("long").alias(POS),
        )
        packed = ins.unionByName(outs, allowMissingColumns=True)
        enc = split.enc
        whole = {"groups": n_groups, "scale": {s: scale_of(enc.numeric, s) for s in _EXACT}}
        fn = partial(
            check_part,
            build=partial(part_evidence, fit=split.fit, whole=whole),
            in_schema=input_frame.schema,
            out_schema=data.schema,
            lin_schema=lineage.schema,
            params=params,
            guarantees=texts,
        )
        with cluster_job("checking the guarantees in parts"):
            got = (
                packed.repartition(max(n_parts, 1), PART)
                .groupBy(PART)
                .applyInArrow(_in_block(fn, RESULTS), from_arrow_schema(RESULTS))
                .toArrow()
                .cast(RESULTS)
            )
    finally:
        published.unpersist()
    # parts in order, each part's rows as check_part returned them (Arrow's sort is stable)
    return got.take(pc.sort_indices(got, sort_keys=[(PART, "ascending")])).to_pandas()
