"""Plain MDAV microaggregation (Domingo-Ferrer & Torra 2005), beside Fair-MDAV for comparison.

Every record is assigned; every group has between k and 2k-1 records; QIs are replaced by the
group mean, so the output is k-anonymous over its QIs. Protected attribute and label, when
present, pass through unchanged (MDAV ignores them).
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from components.encoding import encode_qis, label_01, protected_01
from components.grouping import mdav as mdav_grouping
from components.inputs import require_rows, table_roles
from components.metrics import demographic_parity_difference, positive_ratio
from components.microaggregate import microaggregate
from components.result import ComponentResult, lineage_table, stamp
from schemas import contracts as C
from schemas.params import MDAVParams
from schemas.roles import Role, TableRoles, attach_roles


def declared_contract(
    params: MDAVParams, *, qis: tuple[str, ...] = (), passthrough: tuple[str, ...] = ("*",)
) -> list:
    """The guarantees MDAV declares: every row kept once (C3), groups in [k, 2k-1] (C4'),
    k-anonymity with group means (C4, C13), the greedy trace (C11), and every non-QI column
    unchanged (C6, when there is one). With the defaults: the contract's shape."""
    contract: list = [
        C.Partition(id="C3", allow_drops=False),
        C.GroupSizeRange(id="C4'", min_size=params.k, max_size=2 * params.k - 1),
        C.KAnonymity(id="C4", k=params.k, quasi_identifiers=qis),
        C.GroupMeans(id="C4", quasi_identifiers=qis),
        C.MeanPreservation(id="C13", quasi_identifiers=qis),
        C.SeedNearest(id="C11", grouping="mdav"),
    ]
    if passthrough:
        contract.append(C.AttributesPreserved(id="C6", columns=passthrough))
    return contract


def mdav(table: pa.Table, params: MDAVParams, roles: TableRoles | None = None) -> ComponentResult:
    """Run MDAV on ``table`` (roles from its metadata unless given)."""
    t0 = time.perf_counter()
    roles = table_roles(table, roles)
    require_rows(table, params.k)
    enc = encode_qis(table, roles, params.scaling)
    t1 = time.perf_counter()
    grouping = mdav_grouping(enc, params.k)
    t2 = time.perf_counter()
    order = grouping.row_order()
    gid = grouping.group_ids()
    cols, il = microaggregate(enc, grouping)
    out_roles = enc.published_roles()
    passthrough = [c for c in roles if c.role is not Role.QUASI_IDENTIFIER]
    take = pa.array(order)
    for c in passthrough:
        cols[c.name] = table.column(c.name).take(take)
        out_roles.append(c)
    out = attach_roles(pa.table(cols), TableRoles.of(out_roles))
    qi_names = tuple(r.name for r in enc.published_roles())
    contract = declared_contract(
        params, qis=qi_names, passthrough=tuple(c.name for c in passthrough)
    )
    p_dump = params.model_dump(mode="json")
    out = stamp(out, "mdav", p_dump, contract)
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
    timings = {"encode_s": t1 - t0, "group_s": t2 - t1, "assemble_s": time.perf_counter() - t2}
    return ComponentResult("mdav", out, lineage, contract, p_dump, metrics, timings)
