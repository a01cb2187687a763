"""The lineage sidecar of a microaggregation release (internal: input row positions are
linkable, so it is never distributed with the data).

It is built in grouping order and then permuted with the published table
(``privfair.components.core.order.publish_in_order``): lineage row i describes published row i, and
``group`` (creation order) with ``rank`` (position in the group) keep the grouping order that
the published rows no longer show."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["lineage_table"]


def lineage_table(
    row_id: np.ndarray, group: np.ndarray, rank: np.ndarray, seeds: np.ndarray
) -> pa.Table:
    """One row per published row: ``row_id`` (input row position), ``group``, ``rank`` (position
    in the group) and ``is_seed`` (the group was built around this row)."""
    return pa.table(
        {
            "row_id": pa.array(row_id, pa.int64()),
            "group": pa.array(group, pa.int64()),
            "rank": pa.array(rank, pa.int32()),
            "is_seed": pa.array(np.isin(row_id, seeds), pa.bool_()),
        }
    )
