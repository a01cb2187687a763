"""From equivalence classes to a release: PND_ranges (spec 2.2) for every class, the published
table, the ``lineage`` sidecar (row_id, class) and the run's metrics. Shared by dMondrian and dSabre.

Every PND cell becomes its class's label ``[min, max]`` over the members' ranks (the original
value where the class holds one); the decision is copied unchanged and no row is added or
dropped. The PD attribute is published at the granularity of the bound: unchanged when its two
values are the two groups, otherwise as each row's group (``group_column``), so that every
q-block a reader forms from the published columns is one the guarantees cover. The rows are
published in canonical order (``privfair.components.core.order.published_order``: sorted by their
published values), never in input order: whoever knows where a person sits in the input would
read their decision and PD group at that position. The lineage's ``row_id`` maps each published
row back to its input row.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core import memory
from privfair.components.core.order import published_form, published_order
from privfair.components.core.result import GROUPS_META, ComponentResult
from privfair.components.generalisation.domains import LABEL_META, plain
from privfair.components.generalisation.inputs import PROTECTED, UNPROTECTED, Prepared
from privfair.components.generalisation.itemsets import dense_codes
from privfair.components.generalisation.measures import MEASURES, bounds
from privfair.components.generalisation.utility import information_loss, query_error
from privfair.schemas.roles import META_FAVOURED, META_UNFAVOURED, ColumnRole, Kind, Role

__all__ = [
    "GROUPS_META",
    "class_ranges",
    "group_column",
    "group_field",
    "public_information_loss",
    "release",
    "utility_metrics",
]


def group_column(protected: np.ndarray) -> pa.Array:
    """Each row's PD group as published: ``"protected"`` or ``"unprotected"``.

    >>> group_column(np.array([True, False])).to_pylist()
    ['protected', 'unprotected']
    """
    return pc.if_else(pa.array(protected, pa.bool_()), PROTECTED, UNPROTECTED)


def group_field(base: pa.Field, role: ColumnRole) -> pa.Field:
    """The published field of a PD attribute published as its groups: ``base``'s name and
    other metadata, type ``string``, the role rewritten so that its protected value is
    ``"protected"`` (a reader applying the role to the published column finds the groups), the
    form ``groups`` under ``privfair.generalised``, and under ``privfair.pd_groups`` (JSON) the
    values the column may hold (``published_values``) and the declaration the groups come from
    (the spec's ``unfavoured`` values are the protected ones, or every value outside its
    ``favoured`` values is).

    >>> r = ColumnRole("race", Role.PROTECTED, Kind.NOMINAL, favoured=("White",))
    >>> f = group_field(pa.field("race", pa.string(), metadata=r.to_metadata()), r)
    >>> ColumnRole.from_field(f).unfavoured, json.loads(f.metadata[GROUPS_META])["favoured"]
    (('protected',), ['White'])
    >>> json.loads(f.metadata[GROUPS_META])["published_values"]
    ['protected', 'unprotected']
    """
    meta = {
        k: v for k, v in (base.metadata or {}).items() if k not in (META_FAVOURED, META_UNFAVOURED)
    }
    published = ColumnRole(base.name, Role.PROTECTED, Kind.NOMINAL, unfavoured=(PROTECTED,))
    meta.update(published.to_metadata())
    meta[LABEL_META] = b"groups"
    if role.unfavoured is not None:
        declared = {
            "protected": "the unfavoured values",
            "unprotected": "every other value",
            "unfavoured": list(role.unfavoured),
        }
    else:
        declared = {
            "protected": "every value outside the favoured values",
            "unprotected": "the favoured values",
            "favoured": list(role.favoured or ()),
        }
    declared["published_values"] = [PROTECTED, UNPROTECTED]
    meta[GROUPS_META] = json.dumps(declared, sort_keys=True).encode()
    return pa.field(base.name, pa.string(), metadata=meta)


def class_ranges(
    ranks: np.ndarray, classes: np.ndarray, spare: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the (lo, hi) ranks of its class on every attribute: PND_ranges, vectorised.
    With ``spare``, each matrix has that many more columns (zeros) after the attributes', for
    the caller to fill: the utility measures add the PD attribute's labels in place rather
    than stacking copies of 10M-row matrices.

    >>> lo, hi = class_ranges(np.array([[3], [1], [2]]), np.array([0, 0, 1]))
    >>> lo.ravel().tolist(), hi.ravel().tolist()
    ([1, 1, 2], [3, 3, 2])
    >>> class_ranges(np.array([[3], [1], [2]]), np.array([0, 0, 1]), spare=1)[0].tolist()
    [[1, 0], [1, 0], [2, 0]]
    """
    n, m = ranks.shape
    lo = np.zeros((n, m + spare), dtype=ranks.dtype)
    hi = np.zeros((n, m + spare), dtype=ranks.dtype)
    if n == 0 or m == 0:
        return lo, hi
    order = np.argsort(classes, kind="stable")
    sorted_cls = classes[order]
    starts = np.flatnonzero(np.r_[True, sorted_cls[1:] != sorted_cls[:-1]])
    r = ranks[order]
    lo_c = np.minimum.reduceat(r, starts, axis=0)
    hi_c = np.maximum.reduceat(r, starts, axis=0)
    del r
    which = np.searchsorted(sorted_cls[starts], classes)
    for j in range(m):
        lo[:, j], hi[:, j] = lo_c[which, j], hi_c[which, j]
    return lo, hi


def _sorted_codes(column: pa.ChunkedArray) -> np.ndarray:
    """Each value's position among the distinct values in sorted order: ``np.unique``'s
    inverse, the distinct values sorted as ``np.unique`` sorts them, without a Python object
    per row (8 s on 10M strings). Strings, integers and booleans without nulls; other
    columns are left to ``np.unique`` (which, unlike a dictionary, holds -0.0 equal to 0.0).

    >>> _sorted_codes(pa.chunked_array([["b", "a", "c", "a"]])).tolist()
    [1, 0, 2, 0]
    """
    t = column.type
    plain_type = pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)
    if column.null_count or not len(column) or not (plain_type or pa.types.is_boolean(t)):
        values = column.to_numpy(zero_copy_only=False)
        return np.unique(values, return_inverse=True)[1].ravel()
    encoded = pc.dictionary_encode(column.combine_chunks())
    distinct = encoded.dictionary.to_numpy(zero_copy_only=False)
    rank = np.empty(len(distinct), dtype=np.int64)
    rank[np.argsort(distinct, kind="stable")] = np.arange(len(distinct))
    return rank[encoded.indices.to_numpy()]


def pd_ranks(prep: Prepared) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The PD attribute as a QI of the utility measures: (rank, published lo, published hi,
    domain size) per row. The unprotected values take the lowest ranks, so that each group is
    an interval; a PD attribute published as its groups has its group's interval as its label
    (it is generalised there), otherwise the row's own value."""
    codes = _sorted_codes(plain(prep.table.column(prep.pd)))
    size = int(codes.max()) + 1
    prot_value = np.zeros(size, dtype=bool)
    prot_value[codes[prep.protected]] = True
    rank_of = np.empty(size, dtype=np.int64)
    rank_of[np.lexsort((np.arange(size), prot_value))] = np.arange(size)
    rank = rank_of[codes]
    if not prep.pd_as_groups:
        return rank, rank, rank, size
    n_unprot = int((~prot_value).sum())
    lo = np.where(prep.protected, n_unprot, 0)
    hi = np.where(prep.protected, size - 1, n_unprot - 1)
    return rank, lo, hi, size


def _declared_levels(role: ColumnRole) -> list | None:
    """The column's declared domain (no null level), None when the spec declares none or the
    domain was read off the input (an ordered Categorical's categories)."""
    if role.domain is None or role.domain_from_input:
        return None
    return list(dict.fromkeys(v for v in role.domain if v is not None))


def _span_sum(a: np.ndarray, b: np.ndarray) -> float:
    """Sum over rows of ``(b - a) / (max b - min a)``: each label's width over the range the
    published labels cover (0 when they cover one point)."""
    if not len(a):
        return 0.0
    whole = float(b.max() - a.min())
    return float((b - a).sum(dtype=np.float64) / whole) if whole > 0 else 0.0


def public_information_loss(prep: Prepared, lo: np.ndarray, hi: np.ndarray) -> dict[str, float]:
    """LM of the published table (``lm_sum``, and ``lm_norm`` over the N - 1 QI attributes
    PND + PD), a function of the published labels and the declared domains only, so it may be
    shared: the paper's LM (``utility.information_loss`` over the active domains, AMB-14)
    counts the input's distinct values inside each label and in each attribute, which the
    published labels do not show (one person's value between a label's ends, or a PD value no
    one else holds, would change it); that one stays with the owner (``information_loss_active``).

    Per row and attribute, the label's width over the range the published labels cover:

    - numeric: ``(hi - lo) / (max hi - min lo)`` in the column's units, over the table;
    - ordinal: the same over the positions of the declared ``domain``; without a declared one,
      over the ranks of the values the published labels end on;
    - nominal (a value set): ``(|set| - 1) / (|values published in the column| - 1)``: every
      value of the column is in some published set, so this is the paper's term;
    - the PD attribute: 0 when published unchanged; published as its groups, each group's
      count of declared ``domain`` values minus one over the declared domain's size minus
      one, and 0 without a declared domain (the two published groups are exact).

    ``lo``, ``hi``: (rows, PND attributes) label ranks over ``prep.domains``."""
    n, m = len(lo), len(prep.domains)
    n_qi = m + 1
    if n == 0:
        return {"lm_sum": 0.0, "lm_norm": 0.0}
    total = 0.0
    for j, d in enumerate(prep.domains):
        a, b = lo[:, j], hi[:, j]
        if d.kind is Kind.NUMERIC:
            v = np.asarray(d.values, dtype=np.float64)
            total += _span_sum(v[a], v[b])
        elif d.kind is Kind.ORDINAL:
            declared = _declared_levels(prep.roles[d.name])
            if declared is not None:
                where = {v: i for i, v in enumerate(declared)}
                pos = np.array([where[v] for v in d.values], dtype=np.int64)
                total += _span_sum(pos[a], pos[b])
            else:
                ends = np.unique(np.concatenate([a, b]))
                total += _span_sum(np.searchsorted(ends, a), np.searchsorted(ends, b))
        elif d.size > 1:
            total += float((b - a).sum(dtype=np.float64) / (d.size - 1))
    if prep.pd_as_groups:
        role = prep.roles[prep.pd]
        declared = _declared_levels(role)
        if declared is not None and len(declared) > 1:
            if role.unfavoured is not None:
                prot = sum(v in set(role.unfavoured) for v in declared)
            else:
                prot = sum(v not in set(role.favoured or ()) for v in declared)
            unprot = len(declared) - prot
            n_prot = int(prep.protected.sum())
            total += (n_prot * max(prot - 1, 0) + (n - n_prot) * max(unprot - 1, 0)) / (
                len(declared) - 1
            )
    lm_sum = total / n
    return {"lm_sum": lm_sum, "lm_norm": lm_sum / n_qi}


def utility_metrics(prep: Prepared, lo: np.ndarray, hi: np.ndarray, queries: int, seed: int):
    """LM (normalised over the N-1 QI attributes PND + PD, and the raw sum) and the median
    relative error of ``queries`` count queries (spec 4.3-4.4). ``information_loss`` is the
    LM of the published table (``public_information_loss``: from the published labels and the
    declared domains, public); ``information_loss_active`` the paper's, over the input's active
    domains (AMB-14), where a PD attribute published as its groups counts as generalised to its
    group (``pd_ranks``): it reads the input's distinct values and stays with the owner.

    ``lo``, ``hi``: (rows, PND attributes + 1) label ranks, the PND attributes' in the first
    columns (``class_ranges(..., spare=1)``); the last column is the PD attribute's, written
    here."""
    m = len(prep.domains)
    pd_rank, lo[:, m], hi[:, m], pd_size = pd_ranks(prep)
    orig = np.empty_like(lo)  # a column at a time: no stacked copy of the PND ranks first
    for j, d in enumerate(prep.domains):
        orig[:, j] = d.ranks
    orig[:, m] = pd_rank
    del pd_rank
    sizes = np.array([d.size for d in prep.domains] + [pd_size])
    out: dict = {
        "information_loss": public_information_loss(prep, lo[:, :m], hi[:, :m]),
        "information_loss_active": information_loss(lo, hi, sizes),
    }
    if queries:
        out["query_error"] = query_error(
            orig,
            lo,
            hi,
            prep.negative.astype(np.int64) ^ 1,
            sizes,
            n_queries=queries,
            seed=seed,
        )
    return out


def label_order(d, lo: np.ndarray, hi: np.ndarray) -> pa.Array:
    """A stand-in for the published column of labels ``[lo, hi]`` over domain ``d`` that sorts
    as it does (``published_order``): the rank of each row's label among the distinct labels,
    ordered by materialising only those (a column holds a few hundred distinct labels at most,
    each a slice of the domain; the rows' labels are millions of lists)."""
    key = lo.astype(np.int64) * (d.size + 1) + hi
    inv = dense_codes(key)
    uniq = np.empty(int(inv.max()) + 1 if len(inv) else 0, dtype=np.int64)
    uniq[inv] = key  # each code's key (the rows of a code share it)
    small = d.to_arrow(uniq // (d.size + 1), uniq % (d.size + 1))
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[published_order(pa.table({"label": small}))] = np.arange(len(uniq))
    return pa.array(rank[inv], pa.int64())


def _labels(field: pa.Field, d, lo: np.ndarray, hi: np.ndarray, order: np.ndarray):
    """The published column of labels ``[lo, hi]`` over ``d`` in row order ``order``, made in
    chunks of ``memory.CHUNK_ROWS`` rows (memory-mapped on a large table)."""
    step = memory.CHUNK_ROWS
    return memory.mapped_column(
        field.name,
        field.type,
        lambda: (
            d.to_arrow(lo[order[a : a + step]], hi[order[a : a + step]])
            for a in range(0, len(order), step)
        ),
        len(order),
    )


def published_table(
    prep: Prepared, classes: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[pa.Table, pa.Table]:
    """(published table, ``lineage`` sidecar) of a run that put input row i in ``classes[i]``
    with PND labels ``[lo[i], hi[i]]``: the rows in canonical order (an order of the published
    values alone, the lineage permuted with them), in canonical chunks (``published_form``:
    the bytes of a release must not depend on how the input was chunked, the orchestrators
    hand it over through Parquet, the CLI in memory; a label column is made in those chunks,
    so one of 10M rows is never whole in memory).

    The order is found on stand-ins (``label_order``) and the labels are materialised once,
    already in it: the result is ``publish_in_order`` of the table with every label in place
    (tested), without building and then permuting a second copy of the label lists."""
    table = prep.table
    schema = table.schema
    stand_in, form = table, {}
    for j, d in enumerate(prep.domains):
        i = schema.get_field_index(d.name)
        stand_in = stand_in.set_column(i, d.name, label_order(d, lo[:, j], hi[:, j]))
        form[i] = (d.field(schema.field(i)), j, d)
    groups = group_column(prep.protected) if prep.pd_as_groups else None
    if groups is not None:
        i = schema.get_field_index(prep.pd)
        stand_in = stand_in.set_column(i, prep.pd, groups)
        form[i] = (group_field(schema.field(i), prep.roles[prep.pd]), -1, None)
    order = published_order(stand_in)
    del stand_in
    take = pa.array(order)
    fields, columns = [], []
    for i, f in enumerate(schema):
        if i not in form:
            fields.append(f)
            column = table.column(i).take(take)
        else:
            field, j, d = form[i]
            fields.append(field)
            # the labels are made and mapped a chunk at a time (lists of strings: 1.7 GB for
            # one 10M-row Adult column, 4.2 GB for all of them); ``mapped`` leaves them as
            # they are
            column = (
                groups.take(take) if d is None else _labels(field, d, lo[:, j], hi[:, j], order)
            )
        # each large column waits mapped on disk as the next is made
        columns.append(memory.mapped(pa.table({f.name: column})).column(0))
        del column
        memory.release(len(order))
    data = pa.Table.from_arrays(columns, schema=pa.schema(fields, metadata=schema.metadata))
    sidecar = pa.table({"row_id": take, "class": pa.array(classes[order], pa.int64())})
    return published_form(data, sidecar)


def release(
    prep: Prepared,
    classes: np.ndarray,
    params,
    component: str,
    contract: list,
    started: float,
    extra: dict | None = None,
) -> ComponentResult:
    """The ``ComponentResult`` of a run that put each input row in ``classes[row]``."""
    t0 = time.perf_counter()
    m = len(prep.domains)
    lo_q, hi_q = class_ranges(prep.ranks, classes, spare=1)  # the PD's labels: utility_metrics
    lo, hi = lo_q[:, :m], hi_q[:, :m]
    table, sidecar = published_table(prep, classes, lo, hi)
    n = table.num_rows
    memory.release(n)  # the labels' transients go back to the system before the utility's
    t_eff = prep.t_eff(params.t)
    sizes = np.bincount(classes)
    generalised = (hi > lo).sum(axis=0)
    metrics = {
        "rows": n,
        "p_minus": prep.p_minus,
        "tau_r": prep.tau_r,
        "t": params.t,
        "t_eff": t_eff,
        "classes": int(len(sizes)),
        "smallest_class": int(sizes.min()),
        "generalised_cells": int(generalised.sum()),
        "generalised_by_attribute": {
            d.name: int(g) for d, g in zip(prep.domains, generalised, strict=False)
        },
        "pd_published_as": "groups" if prep.pd_as_groups else "values",
        "bounds": {
            f: dict(zip(("lower", "upper"), bounds(f, t_eff, prep.p_minus), strict=False))
            for f in MEASURES
        },
        "four_fold": dict(zip("abcd", map(int, prep.counts), strict=False)),
        **(extra or {}),
    }
    del lo, hi
    metrics.update(utility_metrics(prep, lo_q, hi_q, params.utility_queries, params.utility_seed))
    timings = {"algorithm_s": t0 - started, "publish_s": time.perf_counter() - t0}
    return ComponentResult(
        component=component,
        outputs={"data": table},
        sidecars={"lineage": sidecar},
        contract=contract,
        params=params.model_dump(mode="json"),
        metrics=metrics,
        timings=timings,
        warnings=list(prep.warnings),
    )
