"""Microaggregate (Fair-MDAV Alg. 3): replace each group's QIs by the group mean.

The mean is computed once per group on the original units and the same vector is written to
every member, so members are bit-identical on their QIs. Means commute with per-column affine
scaling, so information loss is measured on the scaled copy of the same means.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from components.encoding import EncodedQIs
from components.grouping import Grouping
from components.metrics import information_loss


def group_means(values: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Mean row of each contiguous block of ``sizes`` rows."""
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return np.add.reduceat(values, starts, axis=0) / sizes[:, None]


def microaggregate(enc: EncodedQIs, grouping: Grouping) -> tuple[dict[str, pa.Array], dict]:
    """Published QI columns (original units, one-hot for nominal QIs) in grouping order, and the
    information loss of the result."""
    order = grouping.row_order()
    sizes = np.array([len(m) for m in grouping.members], dtype=np.int64)
    original = enc.dense(order)
    if len(order) == 0:
        means = np.zeros((0, original.shape[1]))
    else:
        means = group_means(original, sizes)
    published = np.repeat(means, sizes, axis=0)
    q = len(enc.numeric_names)
    scale = np.concatenate([enc.scale, np.ones(original.shape[1] - q)])
    offset = np.concatenate([enc.offset, np.zeros(original.shape[1] - q)])
    il = information_loss((original - offset) / scale, (published - offset) / scale, enc.attribute_of_column())
    cols = {name: pa.array(published[:, j], pa.float64()) for j, name in enumerate(enc.column_names)}
    return cols, il
