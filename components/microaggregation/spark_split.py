"""The k-d split of a blocked release (``blocking.split_blocks``) computed on a Spark cluster:
every row's block id, while the driver holds no row of the table (issue 46).

``spark_blocks`` gives each row of a DataFrame the block ``split_blocks`` gives it on the same
table in NumPy. Large blocks are cut level by level with DataFrame operations (one aggregate of
per-block counts and ranges per level, a window ranking each open block's rows on its cut
key); once every block still to cut holds at most ``local_rows`` rows, each is finished on one
executor by the NumPy rule itself (``groupBy(path).applyInArrow``). The driver collects only
per-block aggregates (a few numbers per block) and the table of final blocks.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from privfair.components.microaggregation.blocking import _split

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["BLOCK", "encoded_for_split", "own_names", "spark_blocks", "spark_types"]

#: The column ``spark_blocks`` adds: each row's block.
BLOCK = "block"

# internal columns (names no input column is expected to use)
_PATH, _ST, _KEY, _LU, _LF, _SUB, _OFF = (
    "__pf_path",
    "__pf_st",
    "__pf_key",
    "__pf_lu",
    "__pf_lf",
    "__pf_sub",
    "__pf_off",
)
# the status of an open block after a level's aggregate
_CUT, _LEAF, _LOCAL = 0, 1, 2


def _finish(
    x_cols: list[str],
    code_cols: list[str],
    pa_col: str,
    row_col: str,
    m: int,
    n: int,
    block_rows: int,
    span: np.ndarray,
    block: pa.Table,
) -> pa.Table:
    """One block's sub-leaves (runs on an executor): ``split_blocks``'s rule on its rows in row
    order, with the whole table's ``span`` and the rows' own positions."""
    block = block.sort_by(row_col)
    ids = block.column(row_col).to_numpy().astype(np.int64)
    size = len(ids)
    x = (
        np.column_stack([block.column(c).to_numpy().astype(np.float64) for c in x_cols])
        if x_cols
        else np.zeros((size, 0))
    )
    codes = (
        np.column_stack([block.column(c).to_numpy().astype(np.int64) for c in code_cols])
        if code_cols
        else np.zeros((size, 0), dtype=np.int64)
    )
    pa01 = block.column(pa_col).to_numpy()
    sub = _split(x, codes, pa01, m, n, block_rows, span, ids)
    return pa.table(
        {
            row_col: pa.array(ids, pa.int64()),
            _PATH: block.column(_PATH),
            _SUB: pa.array(sub, pa.int64()),
        }
    )


def _range(stats, q: int) -> np.ndarray:
    """max - min of each numeric QI in a block, from the block's row of a level's aggregate."""
    lo = np.array([stats[f"lo{j}"] for j in range(q)], dtype=np.float64)
    hi = np.array([stats[f"hi{j}"] for j in range(q)], dtype=np.float64)
    return hi - lo


def spark_blocks(
    df: DataFrame,
    x_cols: list[str],
    code_cols: list[str],
    pa_col: str,
    row_col: str,
    m: int,
    n: int,
    block_rows: int,
    span: np.ndarray | None = None,
    local_rows: int = 1_000_000,
) -> DataFrame:
    """``df`` with an int64 column ``block``: each row's block of ``split_blocks``, computed on
    the executors.

    For every row, ``block`` is ``split_blocks(x, codes, pa01, m, n, block_rows)[row]`` where
    ``x``, ``codes`` and ``pa01`` are the arrays of ``x_cols``, ``code_cols`` and ``pa_col``
    ordered by ``row_col``. The rule (``privfair.components.microaggregation.blocking``): a
    block with u unfavoured and f favoured rows holds c = min(u // m, f // n) fairlets' worth
    (c = u // m when n = 0); it is a leaf if it has at most ``block_rows`` rows or c < 2, else
    it is cut on its widest numeric QI (range in the block over ``span``; ties: the first),
    else, with no numeric spread, the nominal QI with most distinct values (-1 counts as one;
    ties: the first), else row order. The left child takes, in each protected group, the
    (c // 2) * m unfavoured and (c // 2) * n favoured rows lowest on that key (ties by row),
    the right child the rest; leaves are numbered depth-first, left before right.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        The table; its rows stay on the executors.
    x_cols : list of str
        Numeric QIs, float64, no nulls.
    code_cols : list of str
        Nominal QI codes, int32 or int64, -1 for missing.
    pa_col : str
        Protected attribute, 0 unfavoured / 1 favoured (all 0 for MDAV, with ``n = 0``).
    row_col : str
        Each row's position in the input: distinct int64 values 0..N-1.
    m, n : int
        Unfavoured and favoured rows per group (``blocking.block_sizes``).
    block_rows : int
        Largest block size wanted.
    span : (len(x_cols),) float array, optional
        The whole table's range of each numeric QI (``np.ptp``, zeros replaced by 1.0), as
        ``split_blocks`` computes it; when None, read from the first level's aggregate.
    local_rows : int
        A block still to cut with at most this many rows is finished on one executor.

    Returns
    -------
    pyspark.sql.DataFrame
        ``df``'s columns (an existing ``block`` column replaced), then ``block`` (int64).

    Notes
    -----
    Each open block is named by its path from the root, a string of '0' (left) and '1'
    (right); no leaf's path is the prefix of another's, so depth-first numbering is the
    lexicographic order of (path, sub-leaf within a locally finished block).

    Cost. Every level of DataFrame cuts is one aggregate over the open rows (counts and
    per-QI min/max per block; a second one, of distinct counts, only for blocks with no
    numeric spread), a window ``row_number()`` over ``partitionBy(path, pa)`` ordered by
    (key, row) and a local checkpoint of the narrow working table (row, QIs, pa, path): the
    window's parallelism is the number of open (block, group) pairs, so at the top level
    each protected group's rows are sorted by one task (O(N log N) on one core, spilling to
    disk rather than failing), at the next by two, and so on; there are about
    log2(N / local_rows) such levels. The local finish sends each block of at most
    ``local_rows`` rows to one Python worker (memory O(local_rows) there) and runs the NumPy
    rule. The result is joined back to ``df`` on ``row_col`` (one shuffle); the checkpoints
    of the levels live on the executors until Spark's cleaner drops them.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    spark = df.sparkSession
    x_cols, code_cols = list(x_cols), list(code_cols)
    q, r = len(x_cols), len(code_cols)
    if m <= 0 or n < 0:
        raise ValueError(f"m must be positive and n not negative, not m={m}, n={n}")
    if span is not None:
        span = np.asarray(span, dtype=np.float64)
        if span.shape != (q,):
            raise ValueError(f"span has shape {span.shape}, expected ({q},)")

    narrow = [row_col, *x_cols, *code_cols, pa_col]
    state = df.select(*narrow).withColumn(_PATH, F.lit("")).withColumn(_ST, F.lit(_CUT))
    is_f = (F.col(pa_col) == 1).cast("long")
    is_u = (F.col(pa_col) == 0).cast("long")
    info_schema = T.StructType(
        [
            T.StructField(_PATH, T.StringType()),
            T.StructField(_ST, T.IntegerType()),
            T.StructField(_KEY, T.IntegerType()),
            T.StructField(_LU, T.LongType()),
            T.StructField(_LF, T.LongType()),
        ]
    )
    while True:
        open_rows = state.filter(F.col(_ST) == _CUT)
        stats = open_rows.groupBy(_PATH).agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum(is_u).alias("u"),
            F.sum(is_f).alias("f"),
            *[F.min(c).alias(f"lo{j}") for j, c in enumerate(x_cols)],
            *[F.max(c).alias(f"hi{j}") for j, c in enumerate(x_cols)],
        )
        blocks = stats.collect()  # one row per open block
        if not blocks:
            break
        if span is None:  # the first level's one block is the whole table: np.ptp of each QI
            span = _range(blocks[0], q)
            span = np.where(span > 0, span, 1.0)
        decided: dict[str, tuple[int, int, int, int]] = {}  # path -> (status, key, lu, lf)
        flat: list[str] = []  # cut blocks with no numeric spread
        for b in blocks:
            u, f = int(b["u"]), int(b["f"])
            c = u // m if n == 0 else min(u // m, f // n)
            if b["rows"] <= block_rows or c < 2:
                decided[b[_PATH]] = (_LEAF, -1, 0, 0)
            elif b["rows"] <= local_rows:
                decided[b[_PATH]] = (_LOCAL, -1, 0, 0)
            else:
                half, key = c // 2, -1
                if q:
                    spread = _range(b, q) / span
                    j = int(np.argmax(spread))
                    if spread[j] > 0:
                        key = j
                if key < 0 and r:
                    flat.append(b[_PATH])
                decided[b[_PATH]] = (_CUT, key, half * m, half * n)
        if flat:
            distinct = (
                open_rows.filter(F.col(_PATH).isin(flat))
                .groupBy(_PATH)
                .agg(*[F.count_distinct(c).alias(f"d{j}") for j, c in enumerate(code_cols)])
                .collect()
            )
            for b in distinct:
                d = np.array([b[f"d{j}"] for j in range(r)])
                j = int(np.argmax(d))
                if d[j] > 1:
                    st, _, lu, lf = decided[b[_PATH]]
                    decided[b[_PATH]] = (st, q + j, lu, lf)
        if all(st != _CUT for st, _, _, _ in decided.values()):
            info = spark.createDataFrame(
                [(p, st, -1, 0, 0) for p, (st, _, _, _) in decided.items()], info_schema
            )
            state = state.filter(F.col(_ST) != _CUT).unionByName(
                open_rows.drop(_ST).join(F.broadcast(info.select(_PATH, _ST)), _PATH)
            )
            break
        info = spark.createDataFrame(
            [(p, *v) for p, v in decided.items()], info_schema
        ).withColumnRenamed(_ST, "__pf_new")
        joined = open_rows.join(F.broadcast(info), _PATH)
        key = F.when(F.col(_KEY) == -1, F.col(row_col).cast("double"))
        for j, c in enumerate(x_cols):
            key = key.when(F.col(_KEY) == j, F.col(c).cast("double"))
        for j, c in enumerate(code_cols):
            key = key.when(F.col(_KEY) == q + j, F.col(c).cast("double"))
        rank = F.row_number().over(
            Window.partitionBy(_PATH, pa_col).orderBy(key.asc(), F.col(row_col).asc())
        )
        limit = F.when(F.col(pa_col) == 1, F.col(_LF)).otherwise(F.col(_LU))
        cut = joined.filter(F.col("__pf_new") == _CUT).withColumn(
            _PATH, F.concat(F.col(_PATH), F.when(rank <= limit, F.lit("0")).otherwise("1"))
        )
        closed = joined.filter(F.col("__pf_new") != _CUT).withColumn(_ST, F.col("__pf_new"))
        state = (
            state.filter(F.col(_ST) != _CUT)
            .unionByName(closed.select(*narrow, _PATH, _ST))
            .unionByName(cut.select(*narrow, _PATH, _ST))
            .localCheckpoint(eager=True)
        )

    out_schema = T.StructType(
        [
            T.StructField(row_col, T.LongType()),
            T.StructField(_PATH, T.StringType()),
            T.StructField(_SUB, T.LongType()),
        ]
    )
    finish = partial(_finish, x_cols, code_cols, pa_col, row_col, int(m), int(n), block_rows, span)

    def fn(block: pa.Table) -> pa.Table:  # annotated: Spark reads the grouped-map flavour here
        return finish(block)

    local = (
        state.filter(F.col(_ST) == _LOCAL)
        .select(*narrow, _PATH)
        .groupBy(_PATH)
        .applyInArrow(fn, out_schema)
    )
    leaves = state.filter(F.col(_ST) == _LEAF).select(
        F.col(row_col).cast("long").alias(row_col), _PATH, F.lit(0).cast("long").alias(_SUB)
    )
    parts = local.unionByName(leaves).localCheckpoint(eager=True)
    # one row per final block: its path and number of sub-leaves, in depth-first order
    counts = sorted(
        (b[_PATH], int(b["k"]) + 1)
        for b in parts.groupBy(_PATH).agg(F.max(_SUB).alias("k")).collect()
    )
    offsets = np.cumsum([0] + [k for _, k in counts])[:-1].astype(np.int64)
    table = spark.createDataFrame(
        [(p, int(o)) for (p, _), o in zip(counts, offsets, strict=True)],
        T.StructType([T.StructField(_PATH, T.StringType()), T.StructField(_OFF, T.LongType())]),
    )
    ids = parts.join(F.broadcast(table), _PATH).select(
        row_col, (F.col(_OFF) + F.col(_SUB)).alias("block")
    )
    base = df.drop("block") if "block" in df.columns else df
    return base.join(ids, row_col).select(*base.columns, "block")


def spark_types(schema: pa.Schema) -> pa.Schema:
    """``schema`` as Spark carries it: a dictionary column as its values (Spark has no
    dictionary type), no metadata; a step that needs the types back casts to ``schema``."""
    return pa.schema(
        [
            pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
            for f in schema
        ]
    )


def encoded_for_split(
    df: DataFrame,
    schema: pa.Schema,
    scaling: str,
    fit,
    row_col: str,
    side: tuple[str, object, list] | None = None,
) -> tuple[DataFrame, list[str], list[str]]:
    """``df`` (the columns of ``schema`` and ``row_col``) with the columns ``spark_blocks``
    reads, computed on the executors batch by batch: each row's QIs as ``encode_qis`` encodes
    them with the whole table's ``fit`` (``__x<j>``: numeric QIs in their units, ordinal ones
    as positions; ``__c<j>``: nominal codes, -1 missing) and its side of the split (``__pa``:
    1 where the protected column ``side[0]`` holds the favoured value ``side[1]`` of its two
    values ``side[2]``; 0 everywhere without ``side``, as MDAV's split). Returns the frame and
    the names of the ``__x`` and ``__c`` columns."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from privfair.components.microaggregation.encoding import encode_qis, indicator
    from privfair.schemas.roles import read_roles

    roles = read_roles(schema)
    q, r = len(fit.numeric_names), len(fit.nominal)
    xs, cs = [f"__x{j}" for j in range(q)], [f"__c{j}" for j in range(r)]
    given = pa.schema([*spark_types(schema), pa.field(row_col, pa.int64())])
    encoded = pa.schema(
        [*given, *(pa.field(x, pa.float64()) for x in xs), *(pa.field(c, pa.int32()) for c in cs)]
        + [pa.field("__pa", pa.int8())]
    )
    names = list(schema.names)

    def run(batches):
        for b in batches:
            t = pa.Table.from_batches([b])
            data = t.select(names).cast(schema)
            enc = encode_qis(data, roles, scaling, fit=fit)
            pa01 = (
                indicator(data.column(side[0]), side[1], list(side[2]))
                if side is not None
                else np.zeros(t.num_rows, dtype=np.int8)
            )
            for j in range(q):
                t = t.append_column(xs[j], pa.array(enc.numeric[:, j], pa.float64()))
            for j in range(r):
                t = t.append_column(cs[j], pa.array(enc.codes[:, j], pa.int32()))
            t = t.append_column("__pa", pa.array(pa01, pa.int8()))
            yield from t.to_batches()

    picked = df.select(*(F.col("`" + n.replace("`", "``") + "`") for n in given.names))
    return picked.mapInArrow(run, from_arrow_schema(encoded)), xs, cs


def own_names(schema: pa.Schema) -> None:
    """``InputError`` naming a column of ``schema`` that the Spark plans' own columns would
    overwrite or hide (``BLOCK``, or a name beginning ``__``: positions, encodings, flags), so
    that no input column is silently replaced on the cluster."""
    from privfair.schemas.errors import InputError

    for name in schema.names:
        if name == BLOCK or name.startswith("__"):
            raise InputError(
                name,
                f"a column name the Spark plan keeps for its own columns ('{BLOCK}', '__...')",
                "rename the column, or run on the local engine",
            )
