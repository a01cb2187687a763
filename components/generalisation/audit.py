"""Evidence for the generalisation checkers: the audit frame.

One row per INPUT row, built from the input, the published table and the ``lineage`` sidecar (row_id, class)
only (nothing the algorithm reported about itself). Columns:

    __row_id, __retained, __out_count, __class     from the shared lineage audit
    __in_col__<c>, __out_col__<c>                  raw PD and decision values, input / published
    __protected, __negative                        input row in the protected group / negative
    __protected_out, __negative_out                the same read from the published row (-1: not
                                                   published, or a value naming no group /
                                                   decision of the input)
    __pd_out                                       the published PD value as a dense code (equal
                                                   codes: equal published values; -1: none), what
                                                   a reader's q-blocks are keyed on
    __rank__<A>                                    input rank of PND attribute A (active domain)
    __lo__<A>, __hi__<A>                           published label of A read back into ranks
                                                   (-1: not a label over A's domain)
    __size__<A>                                    |active domain of A|

``original_audit`` builds the same frame for the unreleased input (every label the original
value, one class per distinct PND vector): the positive control of the C6 audit.

The published PD value is read in the form the contract expects (``Prepared.pd_as_groups``):
"protected" / "unprotected" for a PD attribute published as its groups, the input's values
otherwise. Columns of any ordinary Arrow type are read (dictionary through its values, view
types as their ordinary types).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core.evidence import lineage_audit, published_positions
from privfair.components.generalisation.domains import plain
from privfair.components.generalisation.inputs import (
    PROTECTED,
    UNPROTECTED,
    is_member,
    negative_values,
    ordinary,
    prepare,
    protected_values,
)
from privfair.components.generalisation.itemsets import Labels
from privfair.components.generalisation.measures import cell_of
from privfair.components.generalisation.publish import group_column, group_field

__all__ = [
    "as_labels",
    "build_audit",
    "evidence",
    "original_audit",
    "original_labels",
    "pnd_columns",
    "release_labels",
]


def _published_flag(published: pa.Table, name: str, yes: set, no: set, retained, pos) -> np.ndarray:
    """Per input row, 1 where its published value is one of ``yes``, 0 where one of ``no``,
    -1 where it is neither or the row or column is not published."""
    out = np.full(len(retained), -1, dtype=np.int8)
    if name in published.column_names:
        col = published.column(name)
        flag = np.where(is_member(col, yes), 1, np.where(is_member(col, no), 0, -1))
        out[retained] = flag[pos].astype(np.int8)
    return out


def _published_codes(published: pa.Table, name: str, retained, pos) -> np.ndarray:
    """Per input row, a dense code of its published value of ``name`` (equal values, equal
    codes; a null is a value of its own); -1 where the row or column is not published, or the
    column's type is not one of values (a tampered struct or list column)."""
    out = np.full(len(retained), -1, dtype=np.int64)
    if name in published.column_names and published.num_rows:
        col = plain(published.column(name)).combine_chunks()
        try:
            codes = pc.dictionary_encode(col, null_encoding="encode").indices
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return out
        out[retained] = codes.to_numpy(zero_copy_only=False).astype(np.int64)[pos]
    return out


def _published_cells(prep, published: pa.Table, retained, pos) -> tuple[np.ndarray, np.ndarray]:
    """(``__protected_out``, ``__negative_out``): per input row, its published PD value and
    decision read as the input's groups and decisions (``_published_flag``)."""
    pd_present = sorted(pc.unique(plain(prep.table.column(prep.pd))).to_pylist(), key=str)
    dec_present = sorted(pc.unique(plain(prep.table.column(prep.decision))).to_pylist(), key=str)
    prot = protected_values(prep.roles[prep.pd], pd_present)
    neg = negative_values(prep.roles[prep.decision], dec_present)
    if prep.pd_as_groups:
        prot_out, unprot_out = {PROTECTED}, {UNPROTECTED}
    else:
        prot_out, unprot_out = prot, set(pd_present) - prot
    return (
        _published_flag(published, prep.pd, prot_out, unprot_out, retained, pos),
        _published_flag(published, prep.decision, neg, set(dec_present) - neg, retained, pos),
    )


def _label_of(d, published: pa.Table, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(lo, hi) ranks of domain ``d``'s published label at published positions ``pos`` (the
    retained input rows' first published rows); None when the column is not published."""
    if d.name not in published.column_names:
        return None
    lo, hi = d.from_arrow(published.column(d.name))
    return lo[pos], hi[pos]


def _release_columns(prep, published: pa.Table, retained, pos) -> dict[str, np.ndarray]:
    """The audit columns read from the published table, per input row: the PD and decision
    flags and codes, and each PND attribute's rank, label (lo, hi) and domain size."""
    n = prep.table.num_rows
    protected_out, negative_out = _published_cells(prep, published, retained, pos)
    cols: dict[str, np.ndarray] = {
        "__protected": prep.protected.astype(np.int8),
        "__negative": prep.negative.astype(np.int8),
        "__protected_out": protected_out,
        "__negative_out": negative_out,
        "__pd_out": _published_codes(published, prep.pd, retained, pos),
    }
    # ranks are positions in an active domain: int32 holds them at half the memory (a 10M-row
    # frame of six attributes saves ~1 GB); the checkers widen what they compute with
    for d in prep.domains:
        lo = np.full(n, -1, dtype=np.int32)
        hi = np.full(n, -1, dtype=np.int32)
        if (label := _label_of(d, published, pos)) is not None:
            lo[retained], hi[retained] = label
        cols[f"__rank__{d.name}"] = d.ranks.astype(np.int32)
        cols[f"__lo__{d.name}"] = lo
        cols[f"__hi__{d.name}"] = hi
        cols[f"__size__{d.name}"] = np.full(n, d.size, dtype=np.int32)
    return cols


def build_audit(input_table: pa.Table, published: pa.Table, classes: pa.Table) -> pd.DataFrame:
    """The audit frame (module docstring) of a release of ``input_table``."""
    prep = prepare(input_table, None)
    input_table = prep.table  # view types read as their ordinary types
    published = ordinary(published)
    positions = published_positions(input_table.num_rows, classes, published.num_rows)
    _, retained, pos = positions
    frame = lineage_audit(input_table, published, classes, [prep.pd, prep.decision], positions)
    cols = _release_columns(prep, published, retained, pos)
    return pd.concat([frame, pd.DataFrame(cols, copy=False)], axis=1)  # as lineage_audit's


def _p_minus(prep) -> float:
    # as p_minus_of reads it from the frame's __negative column, to the last bit
    return float(prep.negative.astype(np.int8).mean())


def release_labels(
    input_table: pa.Table, published: pa.Table, classes: pa.Table
) -> tuple[Labels, float]:
    """(``labels_of``, ``p_minus_of``) of the audit frame of a release, without building the
    frame: the published labels of the retained rows and their published 4-fold cells, and the
    input's p-. What the report's discrimination figure reads (the frame's per-row objects
    cost seconds and gigabytes on millions of rows)."""
    prep = prepare(input_table, None)
    published = ordinary(published)
    _, retained, pos = published_positions(prep.table.num_rows, classes, published.num_rows)
    names = [d.name for d in prep.domains]
    # the retained rows' labels straight into their matrices: a 10M-row release would
    # otherwise hold every audit column of every input row, then stack copies of them
    lo = np.full((len(pos), len(names)), -1, dtype=np.int64)
    hi = np.full((len(pos), len(names)), -1, dtype=np.int64)
    for j, d in enumerate(prep.domains):
        if (label := _label_of(d, published, pos)) is not None:
            lo[:, j], hi[:, j] = label
    protected_out, negative_out = _published_cells(prep, published, retained, pos)
    cell = cell_of(protected_out[retained], negative_out[retained])
    sizes = np.array([d.size for d in prep.domains], dtype=np.int64)
    return Labels(names, lo, hi, sizes, cell), _p_minus(prep)


def original_labels(input_table: pa.Table) -> tuple[Labels, float]:
    """``release_labels`` of the input published as it is (every label its original value,
    the PD attribute and decision unchanged): the itemsets before any generalisation."""
    prep = prepare(input_table, None)
    ranks = prep.ranks
    ranks.flags.writeable = False  # one matrix for both ends of every label: the audit reads them
    sizes = np.array([d.size for d in prep.domains], dtype=np.int64)
    names = [d.name for d in prep.domains]
    return Labels(names, ranks, ranks, sizes, prep.cell), _p_minus(prep)


def as_labels(input_table: pa.Table) -> pa.Table:
    """``input_table`` in the published form with every PND label its original value (and the
    PD attribute as its groups where a release publishes it so)."""
    prep = prepare(input_table, None)
    ranks = prep.ranks
    table = prep.table
    for j, d in enumerate(prep.domains):
        i = table.schema.get_field_index(d.name)
        table = table.set_column(
            i, d.field(table.schema.field(i)), d.to_arrow(ranks[:, j], ranks[:, j])
        )
    if prep.pd_as_groups:
        i = table.schema.get_field_index(prep.pd)
        field = group_field(table.schema.field(i), prep.roles[prep.pd])
        table = table.set_column(i, field, group_column(prep.protected))
    return table


def original_audit(input_table: pa.Table) -> pd.DataFrame:
    """The audit frame of the input published as it is (labels = original values, one class
    per distinct PND vector): what the C6 audit finds before any generalisation."""
    ranks = prepare(input_table, None).ranks
    n = input_table.num_rows
    cls = (
        np.unique(ranks, axis=0, return_inverse=True)[1].ravel()
        if ranks.size
        else np.zeros(n, dtype=np.int64)
    )
    classes = pa.table({"row_id": pa.array(np.arange(n)), "class": pa.array(cls)})
    return build_audit(input_table, as_labels(input_table), classes)


def pnd_columns(audit: pd.DataFrame) -> list[str]:
    """The PND attributes of an audit frame, in input order."""
    return [c[len("__rank__") :] for c in audit.columns if c.startswith("__rank__")]


def evidence(
    input_table: pa.Table, outputs: dict[str, pa.Table], sidecars: dict[str, pa.Table], params
) -> dict[str, pd.DataFrame]:
    """``audit``: the frame every generalisation checker reads."""
    return {"audit": build_audit(input_table, outputs["data"], sidecars["lineage"])}
