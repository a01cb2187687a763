"""Evidence for the microaggregation checkers: the published table and the audit frame.

The audit frame is the shared one of ``privfair.components.core.evidence`` (one row per INPUT row:
``__row_id``, ``__retained``, ``__out_count``, the lineage fields ``__group``, ``__rank``,
``__is_seed``, raw ``__in_col__`` / ``__out_col__`` values of every non-QI column) plus:

    __pa_in/__pa_out  protected attribute as 0/1, 1 = favoured (higher PR in the input); -1 if dropped
    __y_in/__y_out    label as 0/1, 1 = positive; -1 if dropped
    __in_num__<c>, __in_hot__<c>    input QIs, encoded (numeric original units / one-hot)
    __out_num__<c>, __out_hot__<c>  published QIs, encoded the same way; NaN if dropped

Built from the input table, the published table, the lineage sidecar and the spec's parameters
only; nothing the component reported about itself is used.

A blocked release (``block_rows``) is also audited in parts, one per block of its input
(``evidence_parts``): each block's frame is built on the engine's workers with what only the
whole table can tell (``AuditFit``: the label's positive value, the favoured protected value, the
QI levels and scales; ``frame.attrs["whole"]``: the group count and the scalings C11 replays in),
so it equals the whole table's frame restricted to the block's rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
import pyarrow as pa

from privfair.components.core.checks import published_frame
from privfair.components.core.evidence import lineage_audit, published_positions
from privfair.components.core.parts import EvidenceParts, PackedParts
from privfair.components.microaggregation.encoding import (
    SCALINGS,
    EncodedQIs,
    as_held,
    binary_values,
    encode_qis,
    favoured_value,
    indicator,
    positive_value,
    scale_of,
)
from privfair.schemas.errors import InputError
from privfair.schemas.roles import Kind, Role, read_roles

__all__ = ["AuditFit", "build_audit", "evidence", "evidence_parts"]


@dataclass(frozen=True)
class AuditFit:
    """What the audit frame of a part takes from the whole input: the label's ``positive``
    value, the protected attribute's ``favoured`` value (None where the table has none), and
    ``enc``, the QI encoding's levels, domains and scaling (without its rows)."""

    positive: object
    favoured: object
    enc: EncodedQIs


def audit_fit(input_table: pa.Table, scaling: str) -> tuple[AuditFit, EncodedQIs]:
    """(the fit of ``input_table``, its full QI encoding)."""
    roles = read_roles(input_table)
    positive = favoured = None
    labels, protected = roles.with_role(Role.LABEL), roles.with_role(Role.PROTECTED)
    if len(labels) == 1:
        values, distinct = binary_values(input_table, labels[0].name, "label")
        positive = positive_value(_first(labels[0].positive), distinct)
        if len(protected) == 1:
            pa_values, pa_distinct = binary_values(
                input_table, protected[0].name, "protected attribute"
            )
            favoured = favoured_value(
                pa_values,
                pa_distinct,
                indicator(values, positive, distinct),
                _first(protected[0].favoured),
            )
            favoured = as_held(favoured, pa_distinct)
    enc = encode_qis(input_table, roles, scaling)
    bare = dataclasses.replace(
        enc,
        numeric=np.zeros((0, enc.numeric.shape[1])),
        codes=np.zeros((0, enc.codes.shape[1]), dtype=enc.codes.dtype),
    )
    return AuditFit(positive, favoured, bare), enc


def _first(values: tuple | None):
    return values[0] if values else None


def _published_01(published: pa.Table, name: str, one, retained, pos) -> np.ndarray:
    """Per input row, 1 where its published value of ``name`` is ``one``, 0 where another,
    -1 where the row (or the column) was not published."""
    out = np.full(len(retained), -1, dtype=np.int8)
    if name in published.column_names:
        out[retained] = indicator(published.column(name), one)[pos]
    return out


def build_audit(
    input_table: pa.Table,
    published: pa.Table,
    lineage: pa.Table,
    scaling: str = "minmax",
    fit: AuditFit | None = None,
    hot: bool = True,
    columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Join input, published table and lineage into the audit frame (see module docstring).

    ``fit``: the whole input's (``audit_fit``) when ``input_table`` is a part of it; ``hot``:
    False leaves out the one-hot columns of nominal QIs (for the checks that read none);
    ``columns``: the non-QI columns to audit raw (default: every one)."""
    roles_in = read_roles(input_table)
    roles_out = read_roles(published)
    n_in = input_table.num_rows
    positions = published_positions(n_in, lineage, published.num_rows)
    _, retained, pos = positions
    passthrough = [
        c.name
        for c in roles_in
        if c.role is not Role.QUASI_IDENTIFIER and (columns is None or c.name in columns)
    ]
    frame = lineage_audit(input_table, published, lineage, passthrough, positions)
    cols: dict[str, np.ndarray] = {}

    protected = roles_in.with_role(Role.PROTECTED)
    labels = roles_in.with_role(Role.LABEL)
    if len(labels) == 1:
        lab = labels[0]
        if fit is None:
            values, distinct = binary_values(input_table, lab.name, "label")
            positive = positive_value(_first(lab.positive), distinct)
        else:
            values = input_table.column(lab.name)
            positive = fit.positive
        cols["__y_in"] = indicator(values, positive)
        cols["__y_out"] = _published_01(published, lab.name, positive, retained, pos)
    if len(protected) == 1 and len(labels) == 1:
        prot = protected[0]
        if fit is None:
            values, distinct = binary_values(input_table, prot.name, "protected attribute")
            fav = favoured_value(values, distinct, cols["__y_in"], _first(prot.favoured))
            fav = as_held(fav, distinct)
        else:
            values = input_table.column(prot.name)
            fav = fit.favoured
        cols["__pa_in"] = indicator(values, fav)
        cols["__pa_out"] = _published_01(published, prot.name, fav, retained, pos)

    enc_in = encode_qis(input_table, roles_in, scaling, fit=fit.enc if fit is not None else None)
    out_qis = set(roles_out.quasi_identifiers)
    numeric = set(enc_in.numeric_names)
    dense_in = enc_in.dense() if hot else enc_in.numeric
    # the one-hot form: every published QI a numeric column of the encoding (an ordinal QI
    # published in the schema form holds its levels, read through the encoding below)
    onehot = out_qis == set(enc_in.column_names) and all(
        c.kind is Kind.NUMERIC for c in roles_out if c.name in out_qis
    )
    if onehot:
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
        enc_out = encode_qis(published, roles_out, scaling, fit=enc_in)
        dense_out_rows = enc_out.dense() if hot else enc_out.numeric
    else:
        missing = sorted(set(enc_in.column_names) - out_qis)[:3]
        raise InputError(
            missing[0] if missing else None, "published quasi-identifiers do not match the input's"
        )
    width = dense_in.shape[1]
    dense_out = np.full((n_in, width), np.nan)
    for j in range(width):  # a column at a time: a whole gathered copy is ~0.5 GB at 10M rows
        dense_out[retained, j] = dense_out_rows[pos, j]
    del dense_out_rows
    names = [f"{'num' if c in numeric else 'hot'}__{c}" for c in enc_in.column_names[:width]]
    # each matrix is one pandas block as it is (no copy): the input's QIs, then the published
    return pd.concat(
        [
            frame,
            pd.DataFrame(cols, index=frame.index),
            pd.DataFrame(
                dense_in, columns=[f"__in_{c}" for c in names], index=frame.index, copy=False
            ),
            pd.DataFrame(
                dense_out, columns=[f"__out_{c}" for c in names], index=frame.index, copy=False
            ),
        ],
        axis=1,
    )


def evidence(
    input_table: pa.Table,
    outputs: dict[str, pa.Table],
    sidecars: dict[str, pa.Table],
    params,
    hot: bool = True,
    columns: Sequence[str] | None = None,
) -> dict[str, pd.DataFrame]:
    """``published`` (the published table) and ``audit`` (``build_audit``) for the checkers."""
    data = outputs["data"]
    lineage = sidecars["lineage"]
    return {
        "published": published_frame(data),
        "audit": build_audit(input_table, data, lineage, params.scaling, hot=hot, columns=columns),
    }


def part_evidence(
    input_part: pa.Table,
    outputs: dict[str, pa.Table],
    sidecars: dict[str, pa.Table],
    params,
    row_ids: np.ndarray,
    fit: AuditFit,
    whole: dict,
) -> dict[str, pd.DataFrame]:
    """The ``audit`` frame of one part (``privfair.components.core.parts``), equal to the whole table's
    restricted to the part's rows: ``__row_id`` the whole table's positions, ``attrs["whole"]``
    the facts of the whole table C11 reads."""
    audit = build_audit(input_part, outputs["data"], sidecars["lineage"], params.scaling, fit=fit)
    audit["__row_id"] = row_ids[audit["__row_id"].to_numpy()]
    audit.attrs["whole"] = whole
    return {"audit": audit}


def evidence_parts(
    input_table: pa.Table,
    outputs: dict[str, pa.Table],
    sidecars: dict[str, pa.Table],
    params,
    contract: list,
) -> EvidenceParts | None:
    """A blocked release's evidence in parts, one per block of the split C11 recomputes from the
    input (``blocking.split_blocks`` with the contract's ``block_rows``, ``block_m``,
    ``block_n``), with the lean whole-table evidence builder for the other guarantees (no one-hot
    columns unless the QIs are published one-hot). None (audit the whole table) for an unblocked
    release, or where some group does not lie in one block or groups are not numbered in block
    order: C11 reports that on the whole table."""
    from privfair.components.core.registry import kind_checks
    from privfair.components.microaggregation.blocking import split_blocks

    seed = next((g for g in contract if g.kind == "seed_nearest" and g.block_rows), None)
    lineage = sidecars.get("lineage")
    if seed is None or lineage is None or "group" not in lineage.column_names:
        return None
    data = outputs["data"]
    fit, enc = audit_fit(input_table, params.scaling)
    part01 = np.zeros(input_table.num_rows, dtype=np.int8)
    if seed.grouping == "fairlet":
        if fit.favoured is None:
            return None
        prot = read_roles(input_table).with_role(Role.PROTECTED)[0].name
        part01 = indicator(input_table.column(prot), fit.favoured)
    blocks = split_blocks(
        enc.numeric,
        enc.codes,
        part01,
        seed.block_m,
        seed.block_n,
        seed.block_rows,
    )
    row_id = lineage.column("row_id").to_numpy(zero_copy_only=False).astype(np.int64)
    group = lineage.column("group").to_numpy(zero_copy_only=False).astype(np.int64)
    n_in = input_table.num_rows
    if len(row_id) != data.num_rows or (
        len(row_id) and (row_id.min() < 0 or row_id.max() >= n_in or group.min() < 0)
    ):
        return None
    order = np.argsort(group, kind="stable")
    g_sorted, b_sorted = group[order], blocks[row_id[order]]
    same = g_sorted[1:] == g_sorted[:-1]
    if (same & (b_sorted[1:] != b_sorted[:-1])).any():
        return None  # a group spans blocks
    starts = np.concatenate([[True], ~same]) if len(g_sorted) else np.zeros(0, dtype=bool)
    if (np.diff(b_sorted[starts]) < 0).any():
        return None  # groups not numbered in block order
    whole = {
        "groups": int(group.max()) + 1 if len(group) else 0,
        "scale": {s: scale_of(enc.numeric, s) for s in SCALINGS},
    }
    # the whole table's audit keeps raw only the columns its guarantees not checked in parts name:
    # a raw column is a Python object per row (10M rows of a string: ~0.6 GB)
    kinds = kind_checks()
    named = {c for g in contract if not kinds[g.kind].in_parts for c in g.referenced_columns()}
    return EvidenceParts(
        PackedParts(input_table, data, lineage, blocks),
        partial(part_evidence, fit=fit, whole=whole),
        int(blocks.max()) + 1 if n_in else 0,
        partial(evidence, hot=params.publish == "onehot", columns=sorted(named)),
    )
