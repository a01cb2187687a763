"""The contract dMondrian and dSabre owe (spec section 3), from the params and the input only.

``t_eff`` = max{t, tau(R)} is recomputed here from the input's PD attribute and decision, never
taken from a run. ``table=None`` gives the data-free outline (same ids and kinds).
"""

from __future__ import annotations

import pyarrow as pa

from components.generalisation import guarantees as G
from components.generalisation.params import GeneralisationParams
from schemas import contracts as C

__all__ = ["contract", "dmondrian_contract", "dsabre_contract"]


def contract(params: GeneralisationParams, table: pa.Table | None, algorithm: str) -> list:
    """C1-C9 for ``algorithm`` ('dmondrian' or 'dsabre') on ``table``."""
    if table is None:
        pnd, pd, dec, t_eff = ("*",), "*", "*", params.t
    else:
        from components.generalisation.inputs import prepare

        prep = prepare(table, params.t, params.k)
        pnd, pd, dec, t_eff = tuple(prep.pnd), prep.pd, prep.decision, prep.t_eff(params.t)
    out: list = [
        C.Partition(id="C1.rows", allow_drops=False),
        C.AttributesPreserved(id="C1.pd_decision", columns=(pd, dec)),
        G.TruthfulGeneralisation(id="C2", attributes=pnd),
        G.ClassLabels(id="C3", attributes=pnd),
        G.DecisionCloseness(id="C4", attributes=pnd, t=t_eff),
        G.LeafCloseness(id="C5", t=params.t, t_eff=t_eff),
        G.BoundedDiscrimination(
            id="C6",
            t=t_eff,
            exhaustive_up_to=params.audit_exhaustive_up_to,
            min_support=params.audit_min_support,
            random_itemsets=params.audit_random_itemsets,
            seed=params.audit_seed,
        ),
    ]
    if params.k > 1:
        out.append(G.ClassSize(id="C7", k=params.k))
    if algorithm == "dmondrian":
        out.append(G.DisjointClasses(id="C8", attributes=pnd))
    else:
        out.append(G.DichotomyLeaves(id="C9", t=params.t, k=params.k))
    return out


def dmondrian_contract(params: GeneralisationParams, table: pa.Table | None = None) -> list:
    return contract(params, table, "dmondrian")


def dsabre_contract(params: GeneralisationParams, table: pa.Table | None = None) -> list:
    return contract(params, table, "dsabre")
