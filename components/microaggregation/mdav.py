"""Plain MDAV microaggregation (Domingo-Ferrer & Torra 2005), beside Fair-MDAV for comparison.

Every record is assigned; every group has between k and 2k-1 records; QIs are replaced by the
group mean, so the output is k-anonymous over its QIs. Every other column passes through
unchanged (MDAV ignores protected attributes and labels).
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from privfair.components.core import memory
from privfair.components.core.inputs import require_rows
from privfair.components.core.metrics import demographic_parity_difference, positive_ratio
from privfair.components.core.result import ComponentResult
from privfair.components.microaggregation import guarantees as G
from privfair.components.microaggregation.blocking import group_rows
from privfair.components.microaggregation.columns import in_input_order, publish_order_typed, take
from privfair.components.microaggregation.encoding import encode_qis, label_01, protected_01
from privfair.components.microaggregation.inputs import binary_groups, prepare
from privfair.components.microaggregation.lineage import lineage_table
from privfair.components.microaggregation.microaggregate import publish_qis, qi_contract
from privfair.components.microaggregation.params import MDAVParams
from privfair.schemas import contracts as C
from privfair.schemas.roles import Role, TableRoles, attach_roles

__all__ = ["mdav", "contract"]


def _contract(params: MDAVParams, qi: list, passthrough: tuple[str, ...]) -> list:
    out: list = [
        C.Partition(id="C3", allow_drops=False),
        G.GroupSizeRange(id="C4'", min_size=params.k, max_size=2 * params.k - 1),
        *qi,
        G.SeedNearest(
            id="C11",
            grouping="mdav",
            scaling=params.scaling,
            sample=params.trace_sample,
            seed=params.seed,
            **(
                {"block_rows": params.block_rows, "block_m": params.k, "block_n": 0}
                if params.block_rows is not None
                else {}
            ),
        ),
    ]
    if passthrough:
        out.append(C.AttributesPreserved(id="C6", columns=passthrough))
    return out


def contract(params: MDAVParams, table: pa.Table | None = None) -> list:
    """The guarantees MDAV owes: every row kept once (C3), groups in [k, 2k-1] (C4'),
    k-anonymity over one representative per group (C4, C13), the greedy trace (C11), and every non-QI column
    unchanged (C6, when there is one). ``table=None``: the data-free outline."""
    if table is None:
        return _contract(params, qi_contract(params.publish, params.k, None, None), ("*",))
    table, roles, _ = prepare(table)
    binary_groups(table, roles)
    enc = encode_qis(table, roles, params.scaling)
    qi = qi_contract(params.publish, params.k, table, enc, params.decimals)
    return _contract(
        params, qi, tuple(c.name for c in roles if c.role is not Role.QUASI_IDENTIFIER)
    )


def mdav(table: pa.Table, params: MDAVParams) -> ComponentResult:
    """Run MDAV on ``table`` (roles in its field metadata).

    Parameters
    ----------
    table : pyarrow.Table
        At least one quasi-identifier; every other column passes through unchanged (no
        ``private`` column).
    params : MDAVParams

    Returns
    -------
    ComponentResult
        ``outputs["data"]``: QIs replaced by their group mean (one-hot shares for nominal QIs),
        rows in canonical order (``privfair.components.core.order.published_order``: sorted by their
        published values, so the order reveals neither the input's nor the grouping's);
        ``sidecars["lineage"]``: input row, group, rank and seed flag of each published row.

    Raises
    ------
    InputError
        Fewer rows than k, a non-numeric numeric QI, a missing role, a single label (or the
        single protected attribute beside it) that is not binary (``inputs.binary_groups``)...

    Notes
    -----
    While at least 3k records remain: r = the record farthest from the centroid, s = the record
    farthest from r; groups of r and of s with their k - 1 nearest records. Then one group of
    k if at least 2k remain, and the rest as the last group: every group size is in [k, 2k - 1].
    Distances are squared Euclidean over the numeric QIs scaled by ``params.scaling``
    (``encoding.scale_of``: min-max by default, ``none`` for raw units) and one-hot nominal QIs.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles
    >>> roles = TableRoles.of([ColumnRole("X", Role.QUASI_IDENTIFIER, Kind.NUMERIC)])
    >>> t = attach_roles(pa.table({"X": [1.0, 2.0, 3.0, 10.0, 11.0, 12.0]}), roles)
    >>> sorted(set(mdav(t, MDAVParams(k=3)).outputs["data"].column("X").to_pylist()))
    [2.0, 11.0]
    """
    t0 = time.perf_counter()
    table, roles, warnings = prepare(table)
    require_rows(table, params.k)
    binary_groups(table, roles)  # before the grouping's compiled rounds load
    enc = encode_qis(table, roles, params.scaling)
    t1 = time.perf_counter()
    no_pa = np.zeros(enc.n_rows, dtype=np.int8)
    grouping = group_rows(enc, no_pa, "mdav", params.k, None, None, params.block_rows)
    t2 = time.perf_counter()
    order = grouping.row_order()
    gid = grouping.group_ids()
    cols, out_roles, il = publish_qis(params.publish, table, enc, grouping, params.decimals)
    passthrough = [c for c in roles if c.role is not Role.QUASI_IDENTIFIER]
    rows = pa.array(order)
    for c in passthrough:
        cols[c.name] = take(table.column(c.name), rows)
        out_roles.append(c)
    cols, out_roles = in_input_order(cols, out_roles, table.column_names)
    out = attach_roles(pa.table(cols), TableRoles.of(out_roles))
    del cols  # a large table waits mapped on disk while its ordered copy is made
    out = memory.mapped(out)
    metrics: dict = {
        "input_rows": table.num_rows,
        "output_rows": int(len(order)),
        "dropped_rows": 0,
        "groups": grouping.n_groups,
        "k": params.k,
        "information_loss": il,
        "group_sizes": np.bincount(np.bincount(gid)).tolist(),
    }
    protected = roles.with_role(Role.PROTECTED)
    labels = roles.with_role(Role.LABEL)
    if len(protected) == 1 and len(labels) == 1:
        y = label_01(table, labels[0])
        pa01, favoured, _ = protected_01(table, protected[0], y)
        pr = positive_ratio(y, sensitive_features=pa01)
        metrics.update(
            favoured_value=favoured.item() if hasattr(favoured, "item") else favoured,
            positive_ratio_before={"unfavoured": pr[0], "favoured": pr[1]},
            positive_ratio_after={"unfavoured": pr[0], "favoured": pr[1]},
            dpar_before=demographic_parity_difference(y, sensitive_features=pa01),
            dpar_after=demographic_parity_difference(y, sensitive_features=pa01),
        )
    lineage = lineage_table(
        order, gid, grouping.ranks(), np.asarray(grouping.seeds, dtype=np.int64)
    )
    # published in an order of the published values alone, never in grouping order (which
    # anyone who knows the QIs can replay); the lineage keeps the map
    out, lineage = publish_order_typed(out, lineage)
    timings = {"encode_s": t1 - t0, "group_s": t2 - t1, "assemble_s": time.perf_counter() - t2}
    pass_names = tuple(c.name for c in passthrough)
    return ComponentResult(
        "mdav",
        {"data": out},
        {"lineage": lineage},
        _contract(
            params, qi_contract(params.publish, params.k, table, enc, params.decimals), pass_names
        ),
        params.model_dump(mode="json"),
        metrics,
        timings,
        warnings,
    ).stamped()
