"""Fair-MDAV and MDAV one block at a time: the step an executor runs on the rows it holds.

A blocked release (``block_rows``) groups each block of ``split_blocks`` on its own, and every
later step is per group: the label correction (r* relabels within a fairlet, nearest-first), the
published QIs (each group's rounded mean, lower median or mode) and the copied columns. What a
block needs of the whole table is small and holds no row (``BlockPlan``): the QI encoding's
levels, domains and scaling, the decimals, k, m and n, which protected value is favoured and
which label value is positive. So ``protect_block`` run on each block, followed by the global
group numbering (``number_groups``: a block's groups follow those of the blocks before it) and
the canonical order (``privfair.components.core.order``), publishes exactly the rows and the
lineage the whole-table component publishes: the rules are the component's own functions
(``encode_qis`` with the plan's fit, ``make_fairlets`` / ``mdav``, ``correct_fairness``,
``publish_qis``, ``levels_as``), called on the block.

``protect_block`` returns the block's published rows in grouping order, in the input's column
order and types, with the lineage columns beside them (``LINEAGE``: input position, the block's
own group number, rank, seed flag) and the flags the metrics read (``FLAGS``: 0/1 protected
value and label before correction, relabelled or not; and, on a block's first row, its quasi-identifiers' squared
error by attribute as JSON, which the blocks' information loss adds up,
``microaggregate.information_loss_of``).

>>> import pyarrow as pa
>>> from privfair.components.microaggregation.params import FairMDAVParams
>>> from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles
>>> roles = TableRoles.of([
...     ColumnRole("X", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
...     ColumnRole("PA", Role.PROTECTED, Kind.BINARY, favoured="F"),
...     ColumnRole("y", Role.LABEL, Kind.BINARY, positive=1)])
>>> t = attach_roles(pa.table({"X": [0.95, 0.05, 0.06, 1.03, 0.03],
...     "PA": ["F", "F", "F", "U", "U"], "y": [1, 0, 1, 0, 0]}), roles)
>>> plan = plan_of(t, FairMDAVParams(m=1, n=1, tau=1.0))
>>> out = protect_block(plan, with_positions(t))
>>> out.column("X").to_pylist(), out.column("y").to_pylist(), out.column(ROW).to_pylist()
([0.99, 0.99, 0.04, 0.04], [1, 1, 0, 0], [3, 0, 4, 1])

(Toy A of the specification: the fairlet of rows 3 and 0 first, in grouping order; row 3,
the unfavoured negative, relabelled; the favoured row 2 left out.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from privfair.components.core.engine import current_engine
from privfair.components.core.frames import Frame
from privfair.components.microaggregation.columns import in_input_order, levels_as, take
from privfair.components.microaggregation.correction import correct_fairness
from privfair.components.microaggregation.encoding import (
    EncodedQIs,
    _is_numeric,
    binary_values,
    encode_qis,
    indicator,
    positive_value,
)
from privfair.components.microaggregation.grouping import Grouping, make_fairlets, mdav
from privfair.components.microaggregation.microaggregate import publish_qis
from privfair.components.microaggregation.params import FairMDAVParams
from privfair.schemas.roles import Kind, Role, TableRoles, attach_roles, read_roles

__all__ = [
    "BlockPlan",
    "FLAGS",
    "LINEAGE",
    "ROW",
    "number_groups",
    "plan_of",
    "plan_of_frame",
    "stand_in",
    "protect_block",
    "with_positions",
]

#: The input position of a row (a block's rows carry it in, its published rows carry it out).
ROW = "__row"
#: The lineage columns ``protect_block`` sets beside the published ones: the block's own group
#: number (``number_groups`` makes it global), the rank in the group, the seed flag.
GROUP, RANK, SEED = "__group", "__rank", "__seed"
LINEAGE = (ROW, GROUP, RANK, SEED)
#: What the metrics read of each published row: protected value (1 favoured), label before
#: correction (1 positive), relabelled.
PA01, Y01, FLIPPED, SSE = "__pa", "__y", "__relabelled", "__sse"
FLAGS = (PA01, Y01, FLIPPED, SSE)


@dataclass(frozen=True)
class BlockPlan:
    """What every block's protection reads of the whole table: no row of it.

    ``template`` is the whole table's QI encoding without its rows (levels, ordinal domains,
    offset and scale); ``label`` the label's (negative, positive) values as the column holds
    them; ``favoured`` / ``pa_values`` the favoured protected value and the two values;
    ``schema`` the input's schema (types, roles) and so the published column order.
    """

    params: FairMDAVParams
    k: int
    m: int | None
    n: int | None
    template: EncodedQIs
    schema: pa.Schema
    protected: str
    label: str
    pa_values: tuple
    favoured: object
    label_values: tuple
    label_out: tuple  # (negative, positive) written back in the label's type
    roles: TableRoles
    facts: object = None  # fair_mdav.Facts: what the contract reads
    warnings: tuple[str, ...] = ()  # the input rules' (m clamped...)
    tally: object = None  # fair_mdav.Tally of a frame's plan: its rows' counts


def plan_of(table: pa.Table, params: FairMDAVParams) -> BlockPlan:
    """The plan of ``table``'s blocks, by the component's own rules on the whole table
    (``fair_mdav.checked``: the input rules, k, m, n, the favoured value, the encoding)."""
    from privfair.components.microaggregation.fair_mdav import checked

    return _planned(checked(table, params), params)


def plan_of_frame(frame: Frame, params: FairMDAVParams) -> BlockPlan:
    """``plan_of`` a table whose rows are elsewhere (a ``SparkFrame``'s on its executors):
    the same rules run on its ``stand_in`` and its ``Tally``, two aggregates and one count
    where the rows are. The plan is ``plan_of``'s for the same rows, and a table ``plan_of``
    refuses is refused with the same words (when it breaks one rule; of several, the first
    named may differ)."""
    from privfair.components.microaggregation.fair_mdav import Tally, checked

    roles = read_roles(frame.schema.empty_table())
    prot = [c.name for c in roles.with_role(Role.PROTECTED)]
    lab = [c.name for c in roles.with_role(Role.LABEL)]
    nulls = frame.null_counts()
    counts: dict[tuple, int] = {}
    if len(prot) == 1 and len(lab) == 1:
        (got,) = current_engine().group_counts(frame, [(prot[0], lab[0])])
        for p_, l_, c in zip(*(got.column(i).to_pylist() for i in range(3)), strict=True):
            counts[(p_, l_)] = counts.get((p_, l_), 0) + int(c)
    tally = Tally(counts, nulls)
    return replace(_planned(checked(stand_in(frame, roles), params, tally), params), tally=tally)


def stand_in(frame: Frame, roles: TableRoles | None = None) -> pa.Table:
    """A small table that Fair-MDAV's input rules read as they read ``frame``: the same
    schema; in each numeric quasi-identifier its minimum and maximum, in every other column
    its distinct values; a null where the column has one; columns padded with their first
    value to the longest. So the roles, the binary columns' two values, a nominal QI's levels,
    an ordinal QI's domain and the min-max scaling are the frame's; its counts are not (the
    rules take those from a ``Tally``)."""
    roles = roles or read_roles(frame.schema.empty_table())
    numeric = [
        c.name
        for c in roles.with_role(Role.QUASI_IDENTIFIER)
        if c.kind is Kind.NUMERIC and _is_numeric(frame.schema.field(c.name).type)
    ]
    others = [n for n in frame.column_names if n not in numeric]
    nulls = frame.null_counts()
    values: dict[str, list] = {}
    for n, (lo, hi) in frame.min_max(numeric).items():
        values[n] = [] if lo is None else [lo, hi]
    counted = current_engine().group_counts(frame, [(n,) for n in others]) if others else []
    for n, got in zip(others, counted, strict=True):
        values[n] = [v for v in got.column(0).to_pylist() if v is not None]
    for n in frame.column_names:
        if nulls.get(n):
            values[n].append(None)
    rows = max([len(v) for v in values.values()] + [0])
    if frame.num_rows == 0:
        rows = 0
    cols = []
    for f in frame.schema:
        v = values[f.name]
        v = v + [v[0] if v else None] * (rows - len(v))
        plain_type = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        cols.append(pa.array(v, type=plain_type).cast(f.type))
    return pa.Table.from_arrays(cols, schema=frame.schema)


def _planned(c, params: FairMDAVParams) -> BlockPlan:
    """The plan of a checked input (``fair_mdav.checked``)."""
    label_col, label_distinct = binary_values(c.table, c.label.name, "label")
    positive = positive_value(c.label.positive[0] if c.label.positive else None, label_distinct)
    _, pa_distinct = binary_values(c.table, c.protected.name, "protected attribute")
    enc, facts = c.enc, c.facts
    negative = next(v for v in label_distinct if v != positive)
    template = replace(
        enc, numeric=np.zeros((0, enc.numeric.shape[1])), codes=np.zeros((0, enc.codes.shape[1]))
    )
    return BlockPlan(
        params,
        facts.k,
        facts.m,
        facts.n,
        template,
        c.table.schema,
        c.protected.name,
        c.label.name,
        tuple(pa_distinct),
        c.favoured,
        tuple(label_distinct),
        (negative, positive),
        c.roles,
        facts,
        tuple(c.warnings),
    )


def with_positions(table: pa.Table, start: int = 0) -> pa.Table:
    """``table`` with its rows' input positions (``ROW``) appended: what a block carries."""
    return table.append_column(ROW, pa.array(np.arange(start, start + table.num_rows), pa.int64()))


def protect_block(plan: BlockPlan, block: pa.Table) -> pa.Table:
    """One block's published rows, in its grouping order, with their lineage and flags.

    Parameters
    ----------
    plan : BlockPlan
        The whole table's facts (``plan_of``).
    block : pyarrow.Table
        The block's input rows: the input's columns and ``ROW`` (their input positions), in any
        order (they are put in input order first: the grouping breaks ties by position).

    Returns
    -------
    pyarrow.Table
        The published columns in the input's order and types, then ``LINEAGE`` and ``FLAGS``;
        rows in grouping order (groups in creation order, members by rank). Rows left out of
        every fairlet are not in it.

    Notes
    -----
    The label correction is the component's (``correct_fairness``): within each fairlet of
    m_g unfavoured rows (a positive) and n_g favoured (b positive), positive correction
    relabels the r* = min(m_g - a, max(0, ceil(tau b m_g / n_g) - a)) unfavoured negatives
    nearest the seed. ``relabel_order: random`` draws its order over the whole table's
    candidates, so it is not a per-block rule and is refused here (``ValueError``).
    """
    p = plan.params
    if p.relabel_order == "random":
        raise ValueError("relabel_order 'random' orders the whole table's candidates")
    block = block.sort_by(ROW)
    rows = block.column(ROW).to_numpy()
    data = block.drop_columns([ROW]).cast(plan.schema)
    roles = plan.roles
    y = indicator(data.column(plan.label), plan.label_out[1], list(plan.label_values))
    pa01 = indicator(data.column(plan.protected), plan.favoured, list(plan.pa_values))
    enc = encode_qis(data, roles, p.scaling, fit=plan.template)
    if not len(rows):  # no group: the published schema, no row (what a cluster's plan reads)
        g = Grouping(n_rows=0)
    elif p.grouping == "fairlet":
        g = make_fairlets(enc, pa01, plan.m, plan.n)
    else:
        g = mdav(enc, plan.k)
    order = g.row_order()
    gid = g.group_ids()
    y_out, flags = correct_fairness(
        gid,
        pa01[order],
        y[order],
        g.n_groups,
        p.tau_fraction,
        p.correction,
        p.relabel_order,
        p.seed,
    )
    cols: dict[str, pa.Array] = {}
    out_roles = []
    if p.microaggregate:
        qi_cols, qi_roles, sse = publish_qis(p.publish, data, enc, g, p.decimals, sums=True)
        cols.update(qi_cols)
        out_roles += qi_roles
    else:
        sse = dict.fromkeys(roles.quasi_identifiers, 0.0)
        for q in roles.quasi_identifiers:
            cols[q] = take(data.column(q), pa.array(order))
            out_roles.append(roles[q])
    for c in roles:
        if c.role is Role.QUASI_IDENTIFIER:
            continue
        if c.name == plan.label:
            cols[c.name] = levels_as(
                plan.label_out, y_out, plan.schema.field(c.name).type, data.column(c.name)
            )
        else:
            cols[c.name] = take(data.column(c.name), pa.array(order))
        out_roles.append(c)
    cols, out_roles = in_input_order(cols, out_roles, plan.schema.names)
    out = attach_roles(pa.table(cols), TableRoles.of(out_roles))
    seeds = np.asarray(g.seeds, dtype=np.int64)
    extra = {
        ROW: pa.array(rows[order], pa.int64()),
        GROUP: pa.array(gid, pa.int64()),
        RANK: pa.array(g.ranks(), pa.int32()),
        SEED: pa.array(np.isin(order, seeds), pa.bool_()),
        PA01: pa.array(pa01[order], pa.int8()),
        Y01: pa.array(y[order], pa.int8()),
        FLIPPED: pa.array(flags, pa.bool_()),
        # the block's SSE per attribute, on its first row alone: one value a block
        SSE: pa.array([json.dumps(sse)] + [None] * (len(order) - 1), pa.string())
        if len(order)
        else pa.array([], pa.string()),
    }
    for name, col in extra.items():
        out = out.append_column(name, col)
    return out


def number_groups(blocks: list[pa.Table]) -> pa.Table:
    """The blocks' outputs (``protect_block``) in block order as one table, each block's group
    numbers moved past those of the blocks before it: the whole table's group numbering."""
    parts, offset = [], 0
    for b in blocks:
        g = b.column(GROUP).to_numpy()
        parts.append(b.set_column(b.schema.get_field_index(GROUP), GROUP, pa.array(g + offset)))
        offset += int(g.max()) + 1 if len(g) else 0
    return pa.concat_tables(parts) if parts else parts
