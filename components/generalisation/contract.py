"""The contract dMondrian and dSabre owe (spec section 3), from the params and the input only.

``t_eff`` = max{t, tau(R)} is recomputed here from the input's PD attribute and decision, never
taken from a run, and so is the form the PD attribute is published in (its values when it has
two, one per group; its groups otherwise). ``table=None`` gives the data-free outline (same ids
and kinds).
"""

from __future__ import annotations

import pyarrow as pa

from privfair.components.generalisation import guarantees as G
from privfair.components.generalisation.params import GeneralisationParams
from privfair.schemas import contracts as C

__all__ = ["contract", "dmondrian_contract", "dsabre_contract"]


def contract(params: GeneralisationParams, table: pa.Table | None, algorithm: str) -> list:
    """C1-C9 for ``algorithm`` ('dmondrian' or 'dsabre') on ``table``.

    Raises ``InputError`` where the run would (``inputs.prepare_for``): a t below tau(R) that
    the params refuse is bad input for the validator too."""
    if table is None:
        pnd, pd, dec, t_eff, groups = ("*",), "*", "*", params.t, True
    else:
        from privfair.components.generalisation.inputs import prepare_for

        prep = prepare_for(table, params)
        pnd, pd, dec = tuple(prep.pnd), prep.pd, prep.decision
        t_eff, groups = prep.t_eff(params.t), prep.pd_as_groups
    out: list = [
        C.Partition(id="C1.rows", allow_drops=False),
        C.AttributesPreserved(id="C1.decision", columns=(dec,)),
        G.PublishedGroups(id="C1.pd", attribute=pd, groups=groups),
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
        out.append(G.ClassSize(id="C7", k=params.k, over=params.k_over))
    if algorithm == "dmondrian":
        out.append(G.DisjointClasses(id="C8", attributes=pnd))
    else:
        out.append(
            G.DichotomyLeaves(
                id="C9",
                t=params.t,
                k=params.k,
                k_over=params.k_over,
                split_pairs=getattr(params, "split_pairs", False),
            )
        )
    return out


def dmondrian_contract(params: GeneralisationParams, table: pa.Table | None = None) -> list:
    return contract(params, table, "dmondrian")


def dsabre_contract(params: GeneralisationParams, table: pa.Table | None = None) -> list:
    return contract(params, table, "dsabre")
