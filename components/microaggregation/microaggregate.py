"""Microaggregate (Fair-MDAV Alg. 3): replace each group's QIs by the group mean.

The mean is computed once per group on the original units and the same vector is written to
every member, so members are bit-identical on their QIs. A nominal QI's mean is the vector of
its level shares in the group (the mean of its one-hot block). Means commute with per-column
affine scaling, so information loss is measured in the scaled space from the same means; for a
one-hot column with share p in a group of n rows the within-group SSE is exactly n p (1 - p).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from components.microaggregation.encoding import EncodedQIs
from components.microaggregation.grouping import Grouping


def group_means(values: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Mean row of each contiguous block of ``sizes`` rows."""
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return np.add.reduceat(values, starts, axis=0) / sizes[:, None]


def microaggregate(enc: EncodedQIs, grouping: Grouping) -> tuple[dict[str, pa.Array], dict]:
    """Published QI columns (original units, one-hot shares for nominal QIs) in grouping order,
    and the information loss: SSE in the scaled space, IL = sqrt(SSE/N_g),
    IL_attr = sqrt(SSE/(N_g p)) over p encoded columns, per attribute sqrt(SSE_A/N_g)."""
    order = grouping.row_order()
    n_g = len(order)
    sizes = np.array([len(m) for m in grouping.members], dtype=np.int64)
    gid = grouping.group_ids()
    cols: dict[str, pa.Array] = {}
    per_attr: dict[str, float] = {}
    if n_g:
        original = enc.numeric[order]
        means = group_means(original, sizes)
        published = np.repeat(means, sizes, axis=0)
        scaled_sse = (((original - published) / enc.scale) ** 2).sum(axis=0)
        for j, name in enumerate(enc.numeric_names):
            cols[name] = pa.array(np.ascontiguousarray(published[:, j]), pa.float64())
            per_attr[name] = float(scaled_sse[j])
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
            pub = np.repeat(shares, sizes, axis=0).T
            for lvl, values in zip(attr.levels, pub, strict=True):
                cols[f"{attr.name}={lvl}"] = pa.array(np.ascontiguousarray(values), pa.float64())
    else:
        for name in enc.column_names:
            cols[name] = pa.array([], pa.float64())
    sse = float(sum(per_attr.values()))
    p = enc.n_columns
    il = {
        "il": float(np.sqrt(sse / n_g)) if n_g else 0.0,
        "il_attr": float(np.sqrt(sse / (n_g * p))) if n_g and p else 0.0,
        "sse": sse,
        "per_attribute": {a: float(np.sqrt(v / n_g)) if n_g else 0.0 for a, v in per_attr.items()},
    }
    return cols, il
