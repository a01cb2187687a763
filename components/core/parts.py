"""Evidence in parts: the by-group guarantees of a large release checked where its rows are.

A row-level release whose groups (fairlets, MDAV groups) each lie in one block of its input can
be audited block by block: every guarantee whose rule is per group or per row
(``KindCheck.by_group``) holds on the release iff it holds on every part, and a rule over the
whole table (a count, a share, a sum: ``KindCheck.summarise``) is decided from the parts'
summaries, so the driver never builds the whole table's audit frame. A family that can cut
its evidence so (``Algorithm.evidence_parts``) returns ``EvidenceParts``:

- ``rows``: for each part (``__part``), one Arrow table of the part's input rows (``__side`` 0,
  columns ``__in__<name>``, ``__row`` = input position), and its published rows with their
  lineage (``__side`` 1, ``__out__<name>`` and ``__lin__<name>``, ``__pos`` = published
  position); ``PackedParts`` makes them one at a time from the input, the published table, the
  lineage and a part per input row (``pack`` makes them all as one table);
- ``build``: ``fn(input_part, outputs, sidecars, params, row_ids) -> {frame: DataFrame}``, the
  family's evidence of one part (``row_ids``: the part's input positions in the whole table),
  built exactly as the whole table's would be, restricted to the part's rows;
- ``whole``: the builder of the evidence the other guarantees read (the algorithm's
  ``evidence`` signature), which may leave out what only by-group guarantees read.

The validator sends the parts to the engine as they are made (``Engine.map_parts``: a local
process pool or Spark's workers). ``check_part`` runs there: it unpacks the part, builds its
frames and runs each by-group guarantee's ordinary checker (each whole-table rule's summary),
and returns one small row per part and guarantee (``RESULTS``: the ``CheckResult`` or the
summary as JSON, or the checker's error). Those rows are the evidence Great Expectations
validates; ``privfair.components.core.checks.compose`` gives the verdict.

>>> import numpy as np, pyarrow as pa
>>> inp = pa.table({"x": [1, 2, 3]})
>>> out = pa.table({"x": [1.5, 1.5]})
>>> lin = pa.table({"row_id": [1, 0]})
>>> t = pack(inp, out, lin, np.array([0, 0, 1]))
>>> t.filter(pa.compute.equal(t["__side"], 1)).select(["__part", "__row", "__out__x"]).to_pydict()
{'__part': [0, 0], '__row': [1, 0], '__out__x': [1.5, 1.5]}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core.checks import (
    CheckResult,
    check_guarantee,
    describe_error,
    summarise_guarantee,
    summary_from_data,
    summary_to_data,
    unfit,
)
from privfair.components.core.registry import kind_checks

__all__ = [
    "EvidenceParts",
    "PackedParts",
    "RESULTS",
    "pack",
    "unpack",
    "check_part",
    "nulls",
    "summary_to_data",
    "summary_from_data",
]

PART, SIDE, ROW, POS = "__part", "__side", "__row", "__pos"
# column prefixes of the packed table (no dot: Spark would read one as a struct field)
IN, OUT, LIN = "__in__", "__out__", "__lin__"

#: What each part sends back: per guarantee (its JSON), the part's retained input rows, and
#: the checker's result (``CheckResult.to_dict`` as JSON) or the error it raised.
RESULTS = pa.schema(
    [
        (PART, pa.int64()),
        ("__guarantee", pa.string()),
        ("__retained", pa.int64()),
        ("__result", pa.string()),
        ("__raised", pa.string()),
    ]
)


@dataclass(frozen=True)
class EvidenceParts:
    """A release's evidence cut into parts that keep every group whole (module docstring)."""

    rows: PackedParts
    build: Callable
    n_parts: int
    whole: Callable


def _map_rows(lineage: pa.Table, n_in: int, n_published: int) -> np.ndarray:
    """The lineage's ``row_id`` (the input row of each published row), checked: one per
    published row, each an input position."""
    row_id = lineage.column("row_id").to_numpy(zero_copy_only=False).astype(np.int64)
    if len(row_id) != n_published or (len(row_id) and (row_id.min() < 0 or row_id.max() >= n_in)):
        raise ValueError("the lineage does not map each published row to an input row")
    return row_id


@dataclass(frozen=True)
class PackedParts:
    """The packed rows of each part (``pack`` restricted to the part), made one part at a time
    when iterated, in part order: the packed table of every part (a copy of the input and the
    published table) is never held whole. ``table()`` is that whole table (``pack``).

    >>> inp = pa.table({"x": [1, 2, 3]})
    >>> parts = PackedParts(inp, pa.table({"x": [1.5, 1.5]}), pa.table({"row_id": [1, 0]}),
    ...                     np.array([0, 0, 1]))
    >>> [p.num_rows for p in parts]
    [4, 1]
    """

    input_table: pa.Table
    published: pa.Table
    lineage: pa.Table
    part_of_row: np.ndarray

    def table(self) -> pa.Table:
        return pack(self.input_table, self.published, self.lineage, self.part_of_row)

    def __iter__(self) -> Iterator[pa.Table]:
        from privfair.components.core.engine import BatchTaker

        row_id = _map_rows(self.lineage, self.input_table.num_rows, self.published.num_rows)
        part_out = self.part_of_row[row_id]
        in_order = np.argsort(self.part_of_row, kind="stable")
        out_order = np.argsort(part_out, kind="stable")
        keys = np.unique(self.part_of_row)
        in_cuts = np.searchsorted(self.part_of_row[in_order], keys, side="right")
        out_cuts = np.searchsorted(part_out[out_order], keys, side="right")
        takers = [BatchTaker(t) for t in (self.input_table, self.published, self.lineage)]
        for rows, pos in zip(
            np.split(in_order, in_cuts[:-1]), np.split(out_order, out_cuts[:-1]), strict=True
        ):
            inp, pub, lin = (
                t.take(pa.array(r)) for t, r in zip(takers, (rows, pos, pos), strict=True)
            )
            yield _tagged(
                inp, rows, self.part_of_row[rows], pub, lin, pos, row_id[pos], part_out[pos]
            )


def pack(
    input_table: pa.Table, published: pa.Table, lineage: pa.Table, part_of_row: np.ndarray
) -> pa.Table:
    """The packed rows of every part: input rows, then published rows with their lineage, each
    tagged with the part of its input row (``part_of_row``, one per input row).

    Raises ``ValueError`` if the lineage does not map each published row to an input row."""
    n_in = input_table.num_rows
    row_id = _map_rows(lineage, n_in, published.num_rows)
    return _tagged(
        input_table,
        np.arange(n_in, dtype=np.int64),
        part_of_row,
        published,
        lineage,
        np.arange(len(row_id), dtype=np.int64),
        row_id,
        part_of_row[row_id],
    )


def _tagged(
    input_rows: pa.Table,
    rows: np.ndarray,
    in_part: np.ndarray,
    published_rows: pa.Table,
    lineage_rows: pa.Table,
    pos: np.ndarray,
    row_id: np.ndarray,
    out_part: np.ndarray,
) -> pa.Table:
    """Input rows (at input positions ``rows``, of parts ``in_part``), then published rows (at
    published positions ``pos``, of parts ``out_part``) with their lineage (``row_id``: their
    input positions); each side's rows null in the other side's columns."""
    n_in = input_rows.num_rows
    ins = {f"{IN}{c}": input_rows.column(c) for c in input_rows.column_names}
    ins |= {
        PART: pa.array(in_part, pa.int64()),
        SIDE: pa.array(np.zeros(n_in, dtype=np.int8)),
        ROW: pa.array(rows, pa.int64()),
    }
    outs = {f"{OUT}{c}": published_rows.column(c) for c in published_rows.column_names}
    outs |= {f"{LIN}{c}": lineage_rows.column(c) for c in lineage_rows.column_names}
    outs |= {
        PART: pa.array(out_part, pa.int64()),
        SIDE: pa.array(np.ones(len(row_id), dtype=np.int8)),
        ROW: pa.array(row_id),
        POS: pa.array(pos, pa.int64()),
    }
    only_out = [c for c in outs if c not in ins]
    only_in = [c for c in ins if c not in outs]
    ins |= dict(zip(only_out, nulls(n_in, [outs[c].type for c in only_out]), strict=True))
    outs |= dict(zip(only_in, nulls(len(row_id), [ins[c].type for c in only_in]), strict=True))
    names = list(ins)
    return pa.concat_tables([pa.table(ins), pa.table({c: outs[c] for c in names})])


def nulls(n: int, types: list[pa.DataType]) -> list[pa.Array]:
    """All-null arrays of ``types``, ``n`` long; those of fixed-width, string and binary types
    share one zeroed buffer (an array of nulls per column would allocate its own: about 1 GB
    for the twenty columns one side of a 10M-row release lacks).

    >>> a, b = nulls(3, [pa.float64(), pa.string()])
    >>> a.to_pylist(), b.to_pylist(), a.buffers()[1].address == b.buffers()[1].address
    ([None, None, None], [None, None, None], True)
    """

    def width(t: pa.DataType) -> int | None:
        if pa.types.is_nested(t) or pa.types.is_dictionary(t) or isinstance(t, pa.ExtensionType):
            return None
        if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
            return 8
        if pa.types.is_string(t) or pa.types.is_binary(t):
            return 4
        if pa.types.is_boolean(t):
            return 1
        try:
            bits = t.bit_width  # fixed-width types only
        except ValueError:
            return None
        return max(bits // 8, 1)

    widths = [width(t) for t in types]
    size = max([w for w in widths if w is not None], default=0) * (n + 1)
    zero = pa.py_buffer(np.zeros(size, dtype=np.uint8)) if size else None
    empty = pa.py_buffer(b"")
    out = []
    for t, w in zip(types, widths, strict=True):
        if w is None:  # nested, dictionary, extension and null types
            out.append(pa.nulls(n, t))
            continue
        bufs = [zero, zero, empty] if t.num_buffers == 3 else [zero, zero]
        out.append(pa.Array.from_buffers(t, n, bufs, null_count=n))
    return out


def _restore(rows: pa.Table, prefix: str, schema: pa.Schema) -> pa.Table:
    """The columns ``prefix<name>`` of ``rows`` as a table of ``schema`` (metadata included:
    Spark drops it on the way)."""
    return pa.Table.from_arrays(
        [rows.column(prefix + f.name).cast(f.type) for f in schema], schema=schema
    )


def unpack(
    rows: pa.Table, in_schema: pa.Schema, out_schema: pa.Schema, lin_schema: pa.Schema
) -> tuple[pa.Table, pa.Table, pa.Table, np.ndarray]:
    """(input, published, lineage, row ids) of one part: input rows in input order, published
    rows in published order, lineage ``row_id`` renumbered to positions in the part's input;
    ``row ids``: the part's input positions in the whole table."""
    side = rows.column(SIDE)
    inp = rows.filter(pc.equal(side, 0)).sort_by(ROW)
    pub = rows.filter(pc.equal(side, 1)).sort_by(POS)
    row_ids = inp.column(ROW).to_numpy()
    lineage = _restore(pub, LIN, lin_schema)
    local = np.searchsorted(row_ids, pub.column(ROW).to_numpy())
    at = lin_schema.get_field_index("row_id")
    lineage = lineage.set_column(
        at, lin_schema.field(at), pa.array(local).cast(lin_schema.field(at).type)
    )
    return _restore(inp, IN, in_schema), _restore(pub, OUT, out_schema), lineage, row_ids


def check_part(
    rows: pa.Table,
    build: Callable,
    in_schema: pa.Schema,
    out_schema: pa.Schema,
    lin_schema: pa.Schema,
    params,
    guarantees: list[str],
) -> pa.Table:
    """Check ``guarantees`` (their JSON; ``KindCheck.in_parts``) on one part (runs on an
    engine's worker): one ``RESULTS`` row per guarantee, holding a by-group rule's result or a
    whole-table rule's summary of the part."""
    from privfair.schemas.contracts import parse_guarantee
    from privfair.schemas.errors import InputError

    kinds = kind_checks()  # every kind registered before parsing
    part = int(rows.column(PART)[0].as_py())
    inp, pub, lineage, row_ids = unpack(rows, in_schema, out_schema, lin_schema)
    retained = len(np.unique(lineage.column("row_id").to_numpy()))
    try:
        frames = build(inp, {"data": pub}, {"lineage": lineage}, params, row_ids)
    except InputError as e:  # the files do not fit together: every guarantee fails, as whole
        frames, unfitting = {}, str(e)
    else:
        unfitting = None
    out: dict[str, list] = {f.name: [] for f in RESULTS}
    for text in guarantees:
        g = parse_guarantee(json.loads(text))
        result, raised = None, None
        try:
            why = f"evidence could not be built: {unfitting}"
            if kinds[g.kind].by_group:
                checked = (
                    CheckResult.failed(g, why) if unfitting else check_guarantee(g, frames)
                ).to_dict()
            else:  # a whole-table rule: the part's summary (``KindCheck.summarise``)
                checked = summary_to_data(
                    unfit(why) if unfitting else summarise_guarantee(g, frames)
                )
            result = json.dumps(checked, default=_plain)
        except Exception as e:  # no verdict: the validator raises CheckerError
            raised = describe_error(e)
        for k, v in zip(RESULTS.names, (part, text, retained, result, raised), strict=True):
            out[k].append(v)
    return pa.table(out, schema=RESULTS)


def _plain(o):
    """JSON of numpy scalars and arrays in a check result."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
