"""The contract of MST and PreFair, from the params and the input only (spec section 4).

Roles and the attribute list come from the input's field metadata, the budget rho from
(epsilon, delta) by the same OpenDP conversion the run uses; nothing is read from a release.
MST owes the privacy and output guarantees; PreFair adds the fairness ones. The columns that
may hold a null are the declared ones (``domain.declared_nulls``: the roles and
``params.nulls``), never read off the data; each column's published Arrow type is
``domain.published_type`` of its declared kind, domain and bins, never the input's type.
"""

from __future__ import annotations

import pyarrow as pa

from privfair.components.synthesis import guarantees as G
from privfair.components.synthesis.accounting import rho_budget
from privfair.components.synthesis.compression import THRESHOLD
from privfair.components.synthesis.domain import declared_nulls, published_type
from privfair.components.synthesis.params import MSTParams, selector_of
from privfair.schemas.roles import Role, read_roles

__all__ = ["contract", "aim_contract"]


def contract(params: MSTParams, table: pa.Table | None = None) -> list:
    """The guarantees of ``params`` on ``table`` (``None``: the data-free outline)."""
    selector = selector_of(params)
    if table is None:
        attributes, types = ("*",), ("*",)
        prot = adm = outs = ("*",)
    else:
        roles = read_roles(table)
        attributes = tuple(table.column_names)
        types = tuple(_type_of(roles, params, name) for name in attributes)
        prot, adm, outs = (tuple(c.name for c in roles.with_role(r)) for r in _ROLES)
    out = [
        G.PrivacyLedger(
            id="PRIV-1/2/5",
            epsilon=params.epsilon,
            delta=params.delta,
            rho=rho_budget(params.epsilon, params.delta),
            split=params.split,
            selector=selector,
            attributes=attributes,
        ),
        G.PublicCompression(
            id="PRIV-3", enabled=params.compress, threshold=THRESHOLD, attributes=attributes
        ),
        G.TreeStructure(id="FAIR-1a", attributes=attributes),
    ]
    if selector != "mst":
        out += [
            G.FairTree(
                id="FAIR-1b/2",
                protected=prot,
                admissible=adm,
                outcomes=outs,
                neighbours_admissible=selector == "greedy",
            ),
            G.ModelIndependence(id="FAIR-3", protected=prot, admissible=adm, outcomes=outs),
            G.SyntheticIndependence(
                id="FAIR-4",
                protected=prot,
                admissible=adm,
                outcomes=outs,
                alpha=params.independence_alpha,
            ),
        ]
    out.append(G.SyntheticSchema(id="OUT-1/2", columns=attributes, types=types, rows=params.rows))
    nullable = ("*",) if table is None else declared_nulls(read_roles(table), params.nulls)
    out.append(G.SyntheticNulls(id="OUT-1n", nullable=nullable))
    return out


def aim_contract(params, table: pa.Table | None = None) -> list:
    """AIM's guarantees: MST's, with the adaptive ledger (``AdaptiveLedger``: rounds of a
    private selection then a measurement, the budget spent exactly) and the chordal structure
    of the selected pairs in place of the planned ledger and the spanning tree."""
    attributes = ("*",) if table is None else tuple(table.column_names)
    rounds = params.rounds or (16 * len(attributes) if table is not None else 1)
    out = [
        G.AdaptiveLedger(
            id="PRIV-1/2",
            epsilon=params.epsilon,
            delta=params.delta,
            rho=rho_budget(params.epsilon, params.delta),
            rounds=rounds,
            select_share=params.select_share,
            attributes=attributes,
        ),
        G.PublicCompression(
            id="PRIV-3", enabled=params.compress, threshold=THRESHOLD, attributes=attributes
        ),
        G.ChordalStructure(id="AIM-1", attributes=attributes),
    ]
    mst_out = [
        g for g in contract(params, table) if g.kind in ("synthetic_schema", "synthetic_nulls")
    ]
    return out + mst_out


_ROLES = (Role.PROTECTED, Role.ADMISSIBLE, Role.LABEL)


def _type_of(roles, params: MSTParams, name: str) -> str:
    """The published type of column ``name`` from the spec (``published_type``), or
    ``undeclared`` for a column without a public domain (which the run refuses)."""
    if name not in roles:
        return "undeclared"
    edges = params.edges(name) if name in params.bins else None
    t = published_type(roles[name], edges)
    return str(t) if t is not None else "undeclared"
