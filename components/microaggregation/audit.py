"""Evidence for the microaggregation checkers: the published table and the audit frame.

The audit frame is the shared one of ``components.core.evidence`` (one row per INPUT row:
``__row_id``, ``__retained``, ``__out_count``, the lineage fields ``__group``, ``__rank``,
``__is_seed``, raw ``__in_col__`` / ``__out_col__`` values of every non-QI column) plus:

    __pa_in/__pa_out  protected attribute as 0/1, 1 = favoured (higher PR in the input); -1 if dropped
    __y_in/__y_out    label as 0/1, 1 = positive; -1 if dropped
    __in_num__<c>, __in_hot__<c>    input QIs, encoded (numeric original units / one-hot)
    __out_num__<c>, __out_hot__<c>  published QIs, encoded the same way; NaN if dropped

Built from the input table, the published table, the lineage sidecar and the spec's parameters
only; nothing the component reported about itself is used.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from components.core.evidence import lineage_audit, published_positions
from components.microaggregation.encoding import binary_values, encode_qis, favoured_value
from schemas.errors import InputError
from schemas.roles import Role, read_roles

__all__ = ["build_audit", "evidence"]


def _first(values: tuple | None):
    return values[0] if values else None


def _published_01(published: pa.Table, name: str, one, retained, pos) -> np.ndarray:
    """Per input row, 1 where its published value of ``name`` is ``one``, 0 where another,
    -1 where the row (or the column) was not published."""
    out = np.full(len(retained), -1, dtype=np.int8)
    if name in published.column_names:
        values = published.column(name).to_numpy(zero_copy_only=False)[pos]
        out[retained] = (values == one).astype(np.int8)
    return out


def build_audit(
    input_table: pa.Table, published: pa.Table, lineage: pa.Table, scaling: str = "minmax"
) -> pd.DataFrame:
    """Join input, published table and lineage into the audit frame (see module docstring)."""
    roles_in = read_roles(input_table)
    roles_out = read_roles(published)
    n_in = input_table.num_rows
    _, retained, pos = published_positions(n_in, lineage, published.num_rows)
    passthrough = [c.name for c in roles_in if c.role is not Role.QUASI_IDENTIFIER]
    frame = lineage_audit(input_table, published, lineage, passthrough)
    cols: dict[str, np.ndarray] = {}

    protected = roles_in.with_role(Role.PROTECTED)
    labels = roles_in.with_role(Role.LABEL)
    if len(labels) == 1:
        lab = labels[0]
        values, distinct = binary_values(input_table, lab.name, "label")
        positive = _first(lab.positive)
        positive = positive if positive is not None else distinct[1]
        cols["__y_in"] = (values == positive).astype(np.int8)
        cols["__y_out"] = _published_01(published, lab.name, positive, retained, pos)
    if len(protected) == 1 and len(labels) == 1:
        prot = protected[0]
        values, distinct = binary_values(input_table, prot.name, "protected attribute")
        fav = favoured_value(values, distinct, cols["__y_in"], _first(prot.favoured))
        cols["__pa_in"] = (values == fav).astype(np.int8)
        cols["__pa_out"] = _published_01(published, prot.name, fav, retained, pos)

    enc_in = encode_qis(input_table, roles_in, scaling)
    out_qis = set(roles_out.quasi_identifiers)
    numeric = set(enc_in.numeric_names)
    dense_in = enc_in.dense()
    if out_qis == set(enc_in.column_names):
        dense_out_rows = (
            np.column_stack(
                [
                    published.column(c).to_numpy(zero_copy_only=False).astype(np.float64)
                    for c in enc_in.column_names
                ]
            )
            if enc_in.column_names
            else np.zeros((published.num_rows, 0))
        )
    elif out_qis == set(roles_in.quasi_identifiers):
        dense_out_rows = encode_qis(published, roles_out, scaling, fit=enc_in).dense()
    else:
        missing = sorted(set(enc_in.column_names) - out_qis)[:3]
        raise InputError(
            missing[0] if missing else None, "published quasi-identifiers do not match the input's"
        )
    dense_out = np.full((n_in, dense_in.shape[1]), np.nan)
    dense_out[retained] = dense_out_rows[pos]
    for j, c in enumerate(enc_in.column_names):
        kind = "num" if c in numeric else "hot"
        cols[f"__in_{kind}__{c}"] = dense_in[:, j]
        cols[f"__out_{kind}__{c}"] = dense_out[:, j]
    return pd.concat([frame, pd.DataFrame(cols)], axis=1)


def evidence(
    input_table: pa.Table, outputs: dict[str, pa.Table], sidecars: dict[str, pa.Table], params
) -> dict[str, pd.DataFrame]:
    """``published`` (the published table) and ``audit`` (``build_audit``) for the checkers."""
    data = outputs["data"]
    return {
        "published": data.to_pandas(),
        "audit": build_audit(input_table, data, sidecars["lineage"], params.scaling),
    }
