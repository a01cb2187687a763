"""Microaggregate (Fair-MDAV Alg. 3): replace each group's QIs by the group mean.

The mean is computed once per group on the original units and the same vector is written to
every member, so members are bit-identical on their QIs. A nominal QI's mean is the vector of
its level shares in the group (the mean of its one-hot block). Means commute with per-column
affine scaling, so information loss is measured in the scaled space from the same means; for a
one-hot column with share p in a group of n rows the within-group SSE is exactly n p (1 - p).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pyarrow as pa

from privfair.components.core import memory
from privfair.components.microaggregation.columns import levels_as
from privfair.components.microaggregation.encoding import EncodedQIs
from privfair.components.microaggregation.grouping import Grouping
from privfair.components.microaggregation.params import DEFAULT_FLOAT_DECIMALS
from privfair.schemas.errors import InputError


def microaggregate(
    enc: EncodedQIs, grouping: Grouping, columns: bool = True
) -> tuple[dict[str, pa.Array], dict]:
    """Published QI columns (original units, one-hot shares for nominal QIs) in grouping order,
    and the information loss: SSE in the scaled space, IL = sqrt(SSE/N_g),
    IL_attr = sqrt(SSE/(N_g p)) over p encoded columns, per attribute sqrt(SSE_A/N_g).
    With ``columns=False`` only the information loss is computed (the columns are empty)."""
    cols, per_attr, n_g = _microaggregated(enc, grouping, columns)
    return cols, information_loss_of(per_attr, n_g, enc.n_columns)


def _microaggregated(
    enc: EncodedQIs, grouping: Grouping, columns: bool
) -> tuple[dict[str, pa.Array], dict[str, float], int]:
    """``microaggregate``'s columns, each attribute's SSE and the published rows."""
    order = grouping.row_order()
    n_g = len(order)
    sizes = grouping.sizes()
    gid = grouping.group_ids()
    cols: dict[str, pa.Array] = {}
    per_attr: dict[str, float] = {}
    if n_g:
        # one column at a time: the QI matrix in grouping order, its published form and its
        # squared errors would each be a copy of the QIs (0.5 GB apiece at 10M rows)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        for j, name in enumerate(enc.numeric_names):
            original = enc.numeric[order, j]
            with np.errstate(over="ignore"):  # refused just below, naming the column
                means = np.add.reduceat(original, starts) / sizes
            if not np.isfinite(means).all():
                raise InputError(
                    name,
                    "group means overflow to non-finite values",
                    "values too large to average in 64-bit floats; rescale the column",
                )
            published = np.repeat(means, sizes)
            if columns:
                cols[name] = pa.array(published, pa.float64())
            per_attr[name] = float((((original - published) / enc.scale[j]) ** 2).sum())
        n_groups = len(sizes)
        for j, attr in enumerate(enc.nominal):
            levels = len(attr.levels)
            codes = enc.codes[order, j]
            present = codes >= 0
            counts = np.bincount(
                gid[present] * levels + codes[present], minlength=n_groups * levels
            )
            shares = counts.reshape(n_groups, levels) / sizes[:, None]
            per_attr[attr.name] = float((sizes[:, None] * shares * (1.0 - shares)).sum())
            if not columns:
                continue
            pub = np.repeat(shares, sizes, axis=0).T
            for lvl, values in zip(attr.levels, pub, strict=True):
                cols[f"{attr.name}={lvl}"] = pa.array(np.ascontiguousarray(values), pa.float64())
    elif columns:
        for name in enc.column_names:
            cols[name] = pa.array([], pa.float64())
    return cols, per_attr, n_g


def information_loss_of(per_attr: Mapping[str, float], n_g: int, p: int) -> dict:
    """The information loss from each attribute's SSE in the scaled space (``per_attr``) over
    ``n_g`` published rows and ``p`` encoded columns: IL = sqrt(SSE/N_g), IL_attr =
    sqrt(SSE/(N_g p)), per attribute sqrt(SSE_A/N_g). A release made in blocks adds its
    blocks' SSEs (``sums=True`` of ``publish_qis``) and calls it once.

    >>> information_loss_of({"a": 2.0, "b": 6.0}, 2, 4)["il"]
    2.0
    """
    sse = float(sum(per_attr.values()))
    return {
        "il": float(np.sqrt(sse / n_g)) if n_g else 0.0,
        "il_attr": float(np.sqrt(sse / (n_g * p))) if n_g and p else 0.0,
        "sse": sse,
        "per_attribute": {a: float(np.sqrt(v / n_g)) if n_g else 0.0 for a, v in per_attr.items()},
    }


def qi_decimals(
    table: pa.Table, enc: EncodedQIs, declared: int | Mapping[str, int] | None = None
) -> dict[str, int]:
    """Decimals each numeric (non-ordinal) QI is published with, from the spec alone: the
    ``decimals`` parameter (``declared``: one number for every float QI, or per column), else 0
    for an integer column and ``DEFAULT_FLOAT_DECIMALS`` for a float one. Never the precision
    found in the input: the fewest decimals that write every value would publish the finest
    precision of any one person's value (31.25 among whole ages gives 2 decimals, 31 gives 0).
    ``InputError`` naming ``decimals.<col>`` for a column that is not a numeric QI, or an
    integer column given decimals (it is published as integers)."""
    per_column = dict(declared) if isinstance(declared, Mapping) else {}
    numeric = [n for n in enc.numeric_names if not enc.is_ordinal(n)]
    for name in per_column:
        if name not in numeric:
            raise InputError(
                f"decimals.{name}",
                "decimals are for the numeric quasi-identifiers",
                f"numeric QIs: {', '.join(numeric) or 'none'}",
            )
    out = {}
    for name in enc.numeric_names:
        t = table.schema.field(name).type
        if enc.is_ordinal(name):
            continue
        if pa.types.is_integer(t) or pa.types.is_boolean(t):
            if per_column.get(name, 0) != 0:
                raise InputError(
                    f"decimals.{name}",
                    "an integer column is published as integers (publish: schema keeps its "
                    "type): its decimals must be 0",
                    f"type {t}",
                )
            out[name] = 0
        elif name in per_column:
            out[name] = int(per_column[name])
        elif isinstance(declared, int):
            out[name] = int(declared)
        else:
            out[name] = DEFAULT_FLOAT_DECIMALS
    return out


#: Extra decimals the group sums are taken at, beyond the published ones: the published
#: ``decimals`` may be coarser than the values (a public parameter, not the input's own
#: precision), and a mean must be that of the values, not of the values rounded first.
_SUM_DECIMALS = 6


def rounded_means(x: np.ndarray, sizes: np.ndarray, decimals: int) -> np.ndarray:
    """Each contiguous group's mean rounded to ``decimals`` (half to even), from exact integer
    sums of the values in units of 10^-(decimals + 6), so the result does not depend on the
    order of summation and is the mean of the values themselves to within 10^-(decimals + 6).

    >>> rounded_means(np.array([0.6404, -0.1321]), np.array([2]), 2)  # mean 0.25415
    array([0.25])
    """
    if not len(sizes):
        return np.zeros(0)
    scale = 10.0**_SUM_DECIMALS
    units = np.rint(x * (10.0**decimals * scale))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return np.round(np.add.reduceat(units, starts) / sizes / scale) / 10.0**decimals


def _mode_codes(codes: np.ndarray, gid: np.ndarray, n_groups: int, levels: int) -> np.ndarray:
    """Per group, the most frequent of its members' non-null codes (ties to the lowest level);
    -1 (a null) only for a group whose members are all null. A member with a value is never
    published as a null, however many of its group's members have none."""
    if not levels:  # every value of the column is null
        return np.full(n_groups, -1, dtype=np.int64)
    present = codes >= 0
    counts = np.bincount(
        gid[present] * levels + codes[present], minlength=n_groups * levels
    ).reshape(n_groups, levels)
    best = counts.argmax(axis=1)  # first maximum: the lowest level
    return np.where(counts[np.arange(n_groups), best] > 0, best, -1)


def _in_pieces(name: str, t: pa.DataType, rows: int, piece: Callable[[slice], pa.Array]):
    """The column ``piece(rows slice)`` makes, ``memory.CHUNK_ROWS`` rows at a time, into a map
    when it is large (``memory.mapped_column``): a 10M-row release's published QIs are ~1.7 GB,
    which was the peak of its protection while they waited on the heap to be assembled."""
    step = memory.CHUNK_ROWS
    return memory.mapped_column(
        name,
        t,
        lambda: (piece(slice(i, min(i + step, rows))) for i in range(0, rows, step)),
        rows,
    )


def representatives(
    table: pa.Table, enc: EncodedQIs, grouping: Grouping, decimals: dict[str, int]
) -> dict[str, pa.Array]:
    """Published QI columns in the input's schema, in grouping order: numeric QIs as the group
    mean rounded to ``decimals`` (integer columns stay integers), ordinal QIs as the group's
    lower median on the declared domain, nominal QIs as the group's mode over its non-null
    values (``_mode_codes``: a null only where every member's value is null, so a null is
    published only where the input had one). Every member of a group gets the same values, so
    the table is k-anonymous over them."""
    order = grouping.row_order()
    sizes = grouping.sizes()
    gid = grouping.group_ids()
    n_groups = len(sizes)
    rows = int(sizes.sum())
    cols: dict[str, pa.ChunkedArray] = {}
    for j, name in enumerate(enc.numeric_names):
        t = table.schema.field(name).type
        x = enc.numeric[order, j]
        if enc.is_ordinal(name):
            domain = tuple(enc.domain_of(name))
            # lower median of the domain positions in each group
            ranks = np.lexsort((x, gid))
            lower = np.concatenate([[0], np.cumsum(sizes)[:-1]]) + (sizes - 1) // 2
            med = x[ranks][lower].astype(np.int64) if n_groups else np.zeros(0, np.int64)
            at = np.repeat(med, sizes)
            source = table.column(name)
            cols[name] = _in_pieces(
                name, t, rows, lambda s, at=at, d=domain, t=t, c=source: levels_as(d, at[s], t, c)
            )
            continue
        values = np.repeat(rounded_means(x, sizes, decimals[name]), sizes)
        if pa.types.is_integer(t) or pa.types.is_boolean(t):
            cols[name] = _in_pieces(
                name, t, rows, lambda s, v=values, t=t: pa.array(v[s].astype(np.int64)).cast(t)
            )
        else:
            ft = t if pa.types.is_floating(t) else pa.float64()
            cols[name] = _in_pieces(name, ft, rows, lambda s, v=values, t=ft: pa.array(v[s], t))
    for j, attr in enumerate(enc.nominal):
        codes = enc.codes[order, j]
        mode = (
            _mode_codes(codes, gid, n_groups, len(attr.levels))
            if n_groups
            else np.zeros(0, np.int64)
        )
        at = np.repeat(mode, sizes)
        t = table.schema.field(attr.name).type
        source = table.column(attr.name)
        cols[attr.name] = _in_pieces(
            attr.name,
            t,
            rows,
            lambda s, at=at, lv=attr.levels, t=t, c=source: levels_as(lv, at[s], t, c),
        )
    return {name: cols[name] for name in [r.name for r in enc.roles]}


def qi_contract(
    publish: str,
    k: int,
    table: pa.Table | None,
    enc: EncodedQIs | None,
    decimals: int | Mapping[str, int] | None = None,
) -> list:
    """The guarantees of the published QIs (C4, C13): k-anonymity over them, each group one
    representative vector, sums preserved (up to the rounding of the schema form, to the
    ``decimals`` parameter: ``qi_decimals``). Without a table (``enc`` None): the outline,
    same ids and kinds."""
    from privfair.components.microaggregation import guarantees as G
    from privfair.schemas import contracts as C

    if publish == "onehot":
        qis = tuple(enc.column_names) if enc is not None else ()
        return [
            C.KAnonymity(id="C4", k=k, quasi_identifiers=qis),
            G.GroupMeans(id="C4", quasi_identifiers=qis),
            G.MeanPreservation(id="C13", quasi_identifiers=qis),
        ]
    qis = tuple(r.name for r in enc.roles) if enc is not None else ()
    dec = qi_decimals(table, enc, decimals) if enc is not None else {}
    ordinal = tuple(n for n in enc.numeric_names if enc.is_ordinal(n)) if enc is not None else ()
    return [
        C.KAnonymity(id="C4", k=k, quasi_identifiers=qis),
        G.GroupRepresentatives(id="C4", quasi_identifiers=qis, decimals=dec, ordinal=ordinal),
        G.MeanPreservation(id="C13", quasi_identifiers=tuple(dec), decimals=dec),
    ]


def publish_qis(
    publish: str,
    table: pa.Table,
    enc: EncodedQIs,
    grouping: Grouping,
    decimals: int | Mapping[str, int] | None = None,
    sums: bool = False,
) -> tuple[dict[str, pa.Array], list, dict]:
    """(published QI columns in grouping order, their roles, information loss). The
    information loss is the paper's (Eq. 3), measured on the exact group means; with ``sums``,
    each attribute's SSE instead (``information_loss_of`` makes the loss of them). The caller
    publishes the assembled table in canonical order (``privfair.components.core.order``), never in
    grouping order, which anyone who knows the QIs can replay."""
    onehot = publish == "onehot"
    cols, per_attr, n_g = _microaggregated(enc, grouping, columns=onehot)
    il = per_attr if sums else information_loss_of(per_attr, n_g, enc.n_columns)
    if onehot:
        return cols, enc.published_roles(), il
    dec = qi_decimals(table, enc, decimals)
    return representatives(table, enc, grouping, dec), list(enc.roles), il
