"""The contract of the ATR component, from the params and the input only (spec section 6)."""

from __future__ import annotations

import pyarrow as pa

from privfair.components.transparency import guarantees as G
from privfair.components.transparency.cells import _roles
from privfair.components.transparency.fields import PUBLIC_FAIRNESS, RULE_FIELDS, SUMMARY_FIELDS
from privfair.components.transparency.params import ATRParams

__all__ = ["contract", "public_fields", "sweep_grid", "RULE_FIELDS", "SUMMARY_FIELDS"]


def public_fields(params: ATRParams, public: list[str], private: list[str]) -> tuple[str, ...]:
    """Every ``table.column`` a public table may hold."""
    rules = [*public, *private, *RULE_FIELDS] + (
        ["population"] if params.include_population else []
    )
    summary = [SUMMARY_FIELDS[0], *public, *SUMMARY_FIELDS[1:]]
    return tuple(
        [f"decision_rules.{c}" for c in rules]
        + [f"fairness.{c}" for c in PUBLIC_FAIRNESS]
        + [f"privacy_summary.{c}" for c in summary]
    )


def sweep_grid(params: ATRParams) -> tuple[float, ...]:
    """The fidelity levels of the trade-off (alpha must be positive), the release's included."""
    levels = set(params.sweep) | {params.level}
    return tuple(sorted(x for x in levels if params.fidelity == "delta" or x > 0))


def contract(params: ATRParams, table: pa.Table | None = None) -> list:
    """C0-C8, C11, C12 for ``params`` on ``table`` (``None``: the data-free outline); with
    ``announce: randomised`` C3 is the bound beta*_g + slack (``GroupBound``) and C5-C7,
    which describe the optimum's mapping, are not claimed."""
    if table is None:
        public, private = ["*"], ["*"]
    else:
        _, public, private, _, _ = _roles(table, params)
    mode, level = params.fidelity, params.level
    if params.announce == "randomised":
        return [
            G.InputValidity(id="C0", fidelity=mode, level=level),
            G.ValidDistribution(id="C1"),
            G.Fidelity(id="C2", fidelity=mode, level=level),
            G.GroupBound(id="C3", fidelity=mode, level=level, slack=params.slack),
            G.GlobalPrivacy(id="C4"),
            G.FairnessBounds(id="C8", fidelity=mode, level=level),
            G.MonotoneTradeoff(id="C11", fidelity=mode, grid=sweep_grid(params)),
            G.PublicFields(id="C12", allowed=public_fields(params, public, private)),
        ]
    return [
        G.InputValidity(id="C0", fidelity=mode, level=level),
        G.ValidDistribution(id="C1"),
        G.Fidelity(id="C2", fidelity=mode, level=level),
        G.GroupOptimum(id="C3", fidelity=mode, level=level),
        G.GlobalPrivacy(id="C4"),
        G.Sandwich(id="C5", fidelity=mode, level=level),
        G.SolutionStructure(id="C6", fidelity=mode, level=level),
        G.MassConservation(id="C7", fidelity=mode, level=level),
        G.FairnessBounds(id="C8", fidelity=mode, level=level),
        G.MonotoneTradeoff(id="C11", fidelity=mode, grid=sweep_grid(params)),
        G.PublicFields(id="C12", allowed=public_fields(params, public, private)),
    ]
