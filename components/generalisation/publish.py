"""From equivalence classes to a release: PND_ranges (spec 2.2) for every class, the published
table, the ``lineage`` sidecar (row_id, class) and the run's metrics. Shared by dMondrian and dSabre.

Every PND cell becomes its class's label ``[min, max]`` over the members' ranks (the original
value where the class holds one); the PD attribute and the decision are copied unchanged and no
row is added or dropped. The rows are published in canonical order
(``components.core.order.published_order``: sorted by their published values), never in input
order: whoever knows where a person sits in the input would read their decision and PD value at
that position. The lineage's ``row_id`` maps each published row back to its input row.
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from components.core.order import publish_in_order
from components.core.result import ComponentResult
from components.generalisation.inputs import Prepared
from components.generalisation.measures import MEASURES, bounds
from components.generalisation.utility import information_loss, query_error

__all__ = ["class_ranges", "release", "utility_metrics"]


def class_ranges(ranks: np.ndarray, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the (lo, hi) ranks of its class on every attribute: PND_ranges, vectorised.

    >>> lo, hi = class_ranges(np.array([[3], [1], [2]]), np.array([0, 0, 1]))
    >>> lo.ravel().tolist(), hi.ravel().tolist()
    ([1, 1, 2], [3, 3, 2])
    """
    n, m = ranks.shape
    if n == 0 or m == 0:
        return ranks.copy(), ranks.copy()
    order = np.argsort(classes, kind="stable")
    sorted_cls = classes[order]
    starts = np.flatnonzero(np.r_[True, sorted_cls[1:] != sorted_cls[:-1]])
    r = ranks[order]
    lo_c = np.minimum.reduceat(r, starts, axis=0)
    hi_c = np.maximum.reduceat(r, starts, axis=0)
    which = np.searchsorted(sorted_cls[starts], classes)
    return lo_c[which], hi_c[which]


def utility_metrics(prep: Prepared, lo: np.ndarray, hi: np.ndarray, queries: int, seed: int):
    """LM (normalised over the N-1 QI attributes PND + PD, and the raw sum) and the median
    relative error of ``queries`` count queries (spec 4.3-4.4)."""
    pd_rank = np.unique(
        prep.table.column(prep.pd).to_numpy(zero_copy_only=False), return_inverse=True
    )[1]
    orig = np.column_stack([prep.ranks, pd_rank])
    lo_q = np.column_stack([lo, pd_rank])
    hi_q = np.column_stack([hi, pd_rank])
    sizes = np.array([d.size for d in prep.domains] + [int(pd_rank.max()) + 1])
    out: dict = {"information_loss": information_loss(lo_q, hi_q, sizes)}
    if queries:
        out["query_error"] = query_error(
            orig,
            lo_q,
            hi_q,
            prep.negative.astype(np.int64) ^ 1,
            sizes,
            n_queries=queries,
            seed=seed,
        )
    return out


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
    ranks = prep.ranks
    lo, hi = class_ranges(ranks, classes)
    table = prep.table
    for j, d in enumerate(prep.domains):
        i = table.schema.get_field_index(d.name)
        table = table.set_column(i, d.field(table.schema.field(i)), d.to_arrow(lo[:, j], hi[:, j]))
    n = table.num_rows
    sidecar = pa.table(
        {"row_id": pa.array(np.arange(n), pa.int64()), "class": pa.array(classes, pa.int64())}
    )
    # rows in an order of the published values alone, the lineage permuted with them; one
    # chunk per column: the bytes of a release must not depend on how the input was chunked
    # (the orchestrators hand it over through Parquet, the CLI in memory)
    table, sidecar = publish_in_order(table, sidecar)
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
        "bounds": {
            f: dict(zip(("lower", "upper"), bounds(f, t_eff, prep.p_minus), strict=False))
            for f in MEASURES
        },
        "four_fold": dict(zip("abcd", map(int, prep.counts), strict=False)),
        **(extra or {}),
    }
    metrics.update(utility_metrics(prep, lo, hi, params.utility_queries, params.utility_seed))
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
