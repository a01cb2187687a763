"""The audit frame: what a validator needs to recompute a release's guarantees.

One row per INPUT row (so dropped rows are visible), built from the input table, the published
table and the lineage sidecar only; nothing the component reported about itself is used.

Columns:
    __row_id        input row position            __retained   published?
    __group         group id (-1 if dropped)       __rank       position in its group (-1)
    __is_seed       built around this row?         __out_count  published rows claiming this row
    __pa_in/__pa_out  protected attr. as 0/1, 1 = favoured (higher PR in the input); -1 if dropped
    __y_in/__y_out    label as 0/1, 1 = positive; -1 if dropped
    __in_num__<c>, __in_hot__<c>    input QIs, encoded (numeric original units / one-hot)
    __out_num__<c>, __out_hot__<c>  published QIs, encoded the same way; NaN if dropped
    __in_col__<c>, __out_col__<c>   every other published column, raw values
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa

from components.encoding import binary_values, encode_qis, favoured_value
from components.result import META_PARAMS
from schemas.errors import InputError
from schemas.roles import Role, read_roles


def _params(published: pa.Table) -> dict:
    raw = (published.schema.metadata or {}).get(META_PARAMS)
    return json.loads(raw) if raw else {}


def build_audit(input_table: pa.Table, published: pa.Table, lineage: pa.Table) -> pd.DataFrame:
    """Join input, published table and lineage into the audit frame (see module docstring)."""
    roles_in = read_roles(input_table)
    roles_out = read_roles(published)
    n_in = input_table.num_rows
    if lineage.num_rows != published.num_rows:
        raise InputError(
            "row_id",
            "the lineage sidecar must have one row per published row",
            f"{lineage.num_rows} lineage rows, {published.num_rows} published rows",
        )
    row_id = lineage.column("row_id").to_numpy()
    if len(row_id) and (row_id.min() < 0 or row_id.max() >= n_in):
        raise InputError(
            "row_id", "lineage row ids must be input row positions", f"range [0, {n_in})"
        )
    out_count = np.bincount(row_id, minlength=n_in)
    # first published row claiming each input row
    first = np.full(n_in, -1, dtype=np.int64)
    first[row_id[::-1]] = np.arange(len(row_id))[::-1]
    retained = first >= 0
    pos = first[retained]

    cols: dict[str, np.ndarray] = {
        "__row_id": np.arange(n_in, dtype=np.int64),
        "__retained": retained,
        "__out_count": out_count.astype(np.int64),
    }
    for name, fill, dtype in (
        ("group", -1, np.int64),
        ("rank", -1, np.int64),
        ("is_seed", False, bool),
    ):
        arr = np.full(n_in, fill, dtype=dtype)
        arr[retained] = lineage.column(name).to_numpy(zero_copy_only=False)[pos]
        cols[f"__{name}"] = arr

    protected = roles_in.with_role(Role.PROTECTED)
    labels = roles_in.with_role(Role.LABEL)
    if len(labels) == 1:
        lab = labels[0]
        values, distinct = binary_values(input_table, lab.name, "label")
        positive = lab.positive if lab.positive is not None else distinct[1]
        cols["__y_in"] = (values == positive).astype(np.int8)
        out_vals = published.column(lab.name).to_numpy(zero_copy_only=False)[pos]
        y_out = np.full(n_in, -1, dtype=np.int8)
        y_out[retained] = (out_vals == positive).astype(np.int8)
        cols["__y_out"] = y_out
    if len(protected) == 1 and len(labels) == 1:
        prot = protected[0]
        values, distinct = binary_values(input_table, prot.name, "protected attribute")
        fav = favoured_value(values, distinct, cols["__y_in"], prot.favoured)
        cols["__pa_in"] = (values == fav).astype(np.int8)
        out_vals = published.column(prot.name).to_numpy(zero_copy_only=False)[pos]
        pa_out = np.full(n_in, -1, dtype=np.int8)
        pa_out[retained] = (out_vals == fav).astype(np.int8)
        cols["__pa_out"] = pa_out

    scaling = _params(published).get("scaling", "minmax")
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

    frame = pd.DataFrame(cols)
    extra = {}
    for c in roles_out:
        if c.role is Role.QUASI_IDENTIFIER or c.name not in input_table.column_names:
            continue
        extra[f"__in_col__{c.name}"] = input_table.column(c.name).to_pandas().astype(object)
        out_series = published.column(c.name).to_pandas().iloc[pos]
        full = pd.Series(np.full(n_in, None, dtype=object))
        full.iloc[np.flatnonzero(retained)] = out_series.to_numpy(dtype=object)
        extra[f"__out_col__{c.name}"] = full
    if extra:
        frame = pd.concat([frame, pd.DataFrame(extra)], axis=1)
    return frame
