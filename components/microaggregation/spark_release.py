"""Fair-MDAV (and its MDAV grouping) on a Spark cluster, the driver holding no row.

The blocked release of ``fair_mdav`` (``block_rows``), as a plan of DataFrame operations whose
every row-level step runs on the executors:

1. the plan (``blockwise.plan_of_frame``): the input rules, k, m, n, the favoured value and the
   QI encoding from the frame's counts, ranges and distinct values;
2. the encoding of every row for the split (``mapInArrow``: ``encode_qis`` with the plan's fit);
3. the k-d split (``spark_split.spark_blocks``: ``split_blocks``'s blocks, cut by aggregates
   and window ranks, each block finished where its rows are);
4. each block's protection (``groupBy(block).applyInArrow``: ``blockwise.protect_block``, the
   component's own grouping, label correction and published QIs);
5. the whole table's group numbering (a block's groups follow those of the blocks before it:
   one count per block, collected);
6. the canonical order and the outputs (``spark_order.write_ordered_parts``: a global sort on
   the published values, the parts written by the executors, the lineage beside them);
7. the metrics (``fair_mdav.release_metrics``) from aggregates: each protected value's counts,
   the largest t of a group, the histogram of group sizes, the blocks' squared errors.

What reaches the driver is one row per block, per Spark partition and per distinct value or
count, never a row of the table. The parts, read in order, are the local run's ``data`` and
``lineage`` (byte for byte once written as one table): the rules are the component's. The
metrics are the local run's, the information loss to within float rounding (a sum of per-block
sums, not one sum).

Not on this path (``SparkPlanError``, naming the parameter): ``relabel_order: random`` (its
order is drawn over the whole table's candidates), ``scaling: zscore`` (a mean and a standard
deviation summed on a cluster are not the local run's bits), no ``block_rows``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from privfair.components.core.engine import SparkFrame, cluster_job
from privfair.components.microaggregation.blocking import block_sizes
from privfair.components.microaggregation.blockwise import (
    FLAGS,
    FLIPPED,
    GROUP,
    LINEAGE,
    PA01,
    RANK,
    ROW,
    SEED,
    SSE,
    Y01,
    BlockPlan,
    plan_of_frame,
    protect_block,
)
from privfair.components.microaggregation.fair_mdav import (
    GroupCounts,
    _contract,
    effect_of,
    release_metrics,
)
from privfair.components.microaggregation.microaggregate import information_loss_of
from privfair.components.microaggregation.params import FairMDAVParams
from privfair.components.microaggregation.spark_split import BLOCK
from privfair.schemas.errors import InputError

__all__ = ["SparkRelease", "protect_on_spark", "LINEAGE_SCHEMA"]

_TIE = "__tie"
#: Rows of a group fit below 2^21 (groups hold at most 2k - 1 rows): the tie is the group
#: number then the rank, the rows' grouping order, which orders rows equal in every column.
_RANK_BITS = 21

LINEAGE_SCHEMA = pa.schema(
    [
        ("row_id", pa.int64()),
        ("group", pa.int64()),
        ("rank", pa.int32()),
        ("is_seed", pa.bool_()),
    ]
)


@dataclass
class SparkRelease:
    """What ``protect_on_spark`` made: the parts written (``[(file, rows)]`` of the data and
    of the lineage, in order, in ``folder``), the published schema, the contract, the params,
    the metrics and the warnings of ``fair_mdav``'s ``ComponentResult``."""

    folder: str
    parts: list[tuple[str, int]]
    schema: pa.Schema
    contract: list
    params: dict
    metrics: dict
    warnings: list[str]


def _refuse_off_path(params: FairMDAVParams, schema: pa.Schema) -> None:
    from privfair.components.microaggregation.spark_split import own_names

    own_names(schema)
    for name in LINEAGE_SCHEMA.names:  # the sidecar's columns ride beside the published ones
        if name in schema.names:
            raise InputError(
                name,
                "a column of the input is named like a lineage column",
                "rename it to run on the Spark engine",
            )
    for f in schema:
        if pa.types.is_dictionary(f.type) and f.type.ordered:
            raise InputError(
                f.name,
                "an ordered category column keeps its declared categories, which a Spark "
                "frame does not carry",
                "store it as its values, or use the local engine",
            )
    if params.block_rows is None:
        raise InputError(
            "block_rows", "a release on the Spark cluster is made in blocks: give block_rows"
        )
    if params.relabel_order == "random":
        raise InputError(
            "relabel_order",
            "'random' draws its order over the whole table's candidates, which no block holds",
            "use 'nearest', or the local engine",
        )
    if params.scaling == "zscore":
        raise InputError(
            "scaling",
            "'zscore' scales by a mean and a standard deviation a cluster sums in another order "
            "than this process (other bits, other groups)",
            "use 'minmax' or 'none', or the local engine",
        )


def _kernel(plan: BlockPlan, names: list[str], out: pa.Schema):
    def run(block: pa.Table) -> pa.Table:
        b = block.column(BLOCK)[0].as_py() if block.num_rows else 0
        got = protect_block(plan, block.select([*names, ROW]))
        got = got.append_column(BLOCK, pa.array(np.full(got.num_rows, b), pa.int64()))
        return got.cast(out)

    return run


def _metrics(plan: BlockPlan, numbered, groups: int) -> tuple[dict, list[str]]:
    """Step 7: ``release_metrics`` and ``effect_of``'s warnings from aggregates of the
    protected blocks (``numbered``: every published row, with its flags and global group)."""
    from pyspark.sql import functions as F

    tally = plan.tally
    positive = plan.label_out[1]
    other = next(v for v in plan.pa_values if v != plan.favoured)
    value_of = {1: plan.favoured, 0: other}
    y_out = F.col(Y01).cast("boolean") != F.col(FLIPPED)
    with cluster_job("counting the release's outcome"):
        outcome = (
            numbered.groupBy(PA01)
            .agg(
                F.count(F.lit(1)).alias("kept"),
                F.sum(y_out.cast("long")).alias("pos"),
                F.sum((F.col(FLIPPED) & y_out).cast("long")).alias("up"),
                F.sum((F.col(FLIPPED) & ~y_out).cast("long")).alias("down"),
            )
            .collect()
        )
        n_rows = tally.rows
        n_u = tally.of(other)
        sizes = numbered.groupBy(GROUP).agg(
            F.count(F.lit(1)).alias("size"),
            F.sum((F.col(PA01) == 0).cast("long")).alias("zeros"),
        )
        t_row = sizes.agg(
            F.max(F.abs(F.col("zeros") / F.col("size") - F.lit(n_u / n_rows))).alias("t")
        ).first()
        hist = sizes.groupBy("size").count().collect()
        sse_rows = numbered.where(F.col(SSE).isNotNull()).select(BLOCK, SSE).collect()
    got = {int(r[PA01]): r for r in outcome}
    counts = {}
    for bit, value in value_of.items():
        r = got.get(bit)
        counts[value] = GroupCounts(
            rows=tally.of(value),
            positives=tally.of(value, positive),
            kept=int(r["kept"]) if r else 0,
            kept_positives=int(r["pos"] or 0) if r else 0,
            up=int(r["up"] or 0) if r else 0,
            down=int(r["down"] or 0) if r else 0,
        )
    kept = sum(c.kept for c in counts.values())
    per_attr: dict[str, float] = {}
    for r in sorted(sse_rows, key=lambda r: r[BLOCK]):  # block order: the same sum each run
        for a, v in json.loads(r[SSE]).items():
            per_attr[a] = per_attr.get(a, 0.0) + v
    if not per_attr and not plan.params.microaggregate:  # the QIs as they were: no loss
        per_attr = dict.fromkeys(plan.roles.quasi_identifiers, 0.0)
    il = information_loss_of(per_attr, kept, plan.template.n_columns)
    group_sizes = [0] * (max((int(r["size"]) for r in hist), default=-1) + 1)
    for r in hist:
        group_sizes[int(r["size"])] = int(r["count"])
    summary, notes = effect_of(counts, plan.favoured, plan.params.max_drop_share, plan.protected)
    t_max = float(t_row["t"]) if kept and t_row["t"] is not None else 0.0
    metrics = release_metrics(
        plan.facts, plan.favoured, counts, summary, groups, t_max, il, group_sizes
    )
    return metrics, [*plan.warnings, *notes]


def protect_on_spark(
    frame: SparkFrame,
    params: FairMDAVParams,
    folder: str,
    rows_per_part: int = 1 << 20,
    local_rows: int = 1_000_000,
) -> SparkRelease:
    """Fair-MDAV's blocked release of ``frame`` made on its cluster (the module's steps).

    Parameters
    ----------
    frame : SparkFrame
        The input, its ``df`` holding each row's input position in ``ROW``
        (``privfair.io.positions.with_positions``) beside the columns of ``frame.schema``.
    params : FairMDAVParams
        With ``block_rows`` (the split's block size).
    folder : str
        Where the executors write the parts (a path or ``file://`` URI every node reaches).
    rows_per_part : int
        Rows of each written part.
    local_rows : int
        Blocks of at most this many rows are finished by one executor task
        (``spark_blocks``).

    Returns
    -------
    SparkRelease
        Reading its data parts in order gives ``fair_mdav(T, params).outputs["data"]`` without
        its schema's stamp, ``T`` the frame's rows in input order; its lineage parts give the
        ``lineage`` sidecar; its metrics and warnings are the run's.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from privfair.components.core.spark_order import write_ordered_parts
    from privfair.components.microaggregation.spark_split import (
        encoded_for_split,
        spark_blocks,
        spark_types,
    )

    _refuse_off_path(params, frame.schema)
    names = list(frame.schema.names)
    plan = plan_of_frame(frame.with_schema(frame.schema), params)
    bu, bf = block_sizes(params.grouping, plan.k, plan.m, plan.n)
    if 2 * plan.k > 1 << _RANK_BITS:
        raise InputError("k", f"a group of the Spark plan holds fewer than {1 << _RANK_BITS} rows")
    side = (
        (plan.protected, plan.favoured, list(plan.pa_values))
        if params.grouping == "fairlet"
        else None
    )
    encoded, xs, cs = encoded_for_split(
        frame.df, plan.schema, params.scaling, plan.template, ROW, side
    )
    given = pa.schema([*spark_types(plan.schema), pa.field(ROW, pa.int64())])
    with cluster_job("splitting the table into blocks"):
        blocked = spark_blocks(
            encoded, xs, cs, "__pa", ROW, bu, bf, params.block_rows, local_rows=local_rows
        )
    empty = protect_block(
        plan, plan.schema.empty_table().append_column(ROW, pa.array([], pa.int64()))
    )
    published = empty.schema.remove_metadata()
    internal = {*LINEAGE, *FLAGS}
    data_schema = pa.schema([f for f in empty.schema if f.name not in internal], metadata=None)
    out_schema = pa.schema([*spark_types(published), pa.field(BLOCK, pa.int64())])
    kernel_in = blocked.select(*(F.col(f"`{n}`") for n in [*given.names, BLOCK]))
    with cluster_job("protecting the blocks"):
        done = (
            kernel_in.groupBy(BLOCK)
            .applyInArrow(_kernel(plan, names, out_schema), from_arrow_schema(out_schema))
            .persist()
        )
        per_block = done.groupBy(BLOCK).agg(F.max(GROUP).alias("g")).collect()
    offsets, total = {}, 0
    for row in sorted(per_block, key=lambda r: r[BLOCK]):
        offsets[row[BLOCK]] = total
        total += int(row["g"]) + 1
    spark = done.sparkSession
    off = spark.createDataFrame(
        [(int(b), int(o)) for b, o in offsets.items()], f"{BLOCK} long, __offset long"
    )
    numbered = (
        done.join(F.broadcast(off), BLOCK)
        .withColumn(GROUP, F.col(GROUP) + F.col("__offset"))
        .withColumn(_TIE, F.shiftleft(F.col(GROUP), _RANK_BITS) + F.col(RANK).cast("long"))
    )
    metrics, warnings = _metrics(plan, numbered, total)
    lineage = numbered.select(
        *(F.col(f"`{n}`") for n in data_schema.names),
        F.col(ROW).alias("row_id"),
        F.col(GROUP).alias("group"),
        F.col(RANK).alias("rank"),
        F.col(SEED).alias("is_seed"),
        F.col(_TIE),
    )
    with cluster_job("writing the release in its published order"):
        parts = write_ordered_parts(
            lineage, data_schema, folder, rows_per_part, _TIE, lineage=LINEAGE_SCHEMA
        )
    done.unpersist()
    return SparkRelease(
        folder,
        parts,
        data_schema,
        _contract(params, plan.facts),
        params.model_dump(mode="json"),
        metrics,
        warnings,
    )
