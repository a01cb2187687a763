"""Parameters of the ATR privacy scheme (frozen, unknown keys refused)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from privfair.components.core.descriptor import OptIn, Params

__all__ = ["FairnessMeasure", "ATRParams"]

Scalar = str | int | float | bool


class FairnessMeasure(BaseModel):
    """One fairness measure of the report (spec 7.2): statistical parity (SP), conditional
    statistical parity per stratum of ``condition_attribute`` (CSP) or the p%-rule (PR) between
    ``group_1`` and ``group_2`` of ``protected_attribute`` (a public or private attribute).

    A group is a value of the attribute as the report writes it (its text: ``1`` or ``"1"`` for
    the value 1 of an integer column, a region's label for a binned one) that some record
    holds; a value no record holds is refused before the component runs, naming it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["SP", "CSP", "PR"] = Field(
        description="statistical parity, conditional statistical parity or the p%-rule"
    )
    protected_attribute: str = Field(description="the attribute whose two groups are compared")
    group_1: Scalar = Field(description="the first group: a value of protected_attribute")
    group_2: Scalar = Field(description="the second group: a value of protected_attribute")
    condition_attribute: str | None = Field(
        None, description="CSP only: the attribute whose values are the strata"
    )
    p: float = Field(0.8, gt=0, le=1, description="PR threshold (EEOC: 0.8)")

    @model_validator(mode="after")
    def _condition(self) -> FairnessMeasure:
        if (self.type == "CSP") != (self.condition_attribute is not None):
            raise ValueError("CSP, and only CSP, takes a condition_attribute")
        return self


class ATRParams(OptIn, Params):
    """The ATR privacy scheme (Chen, Golubchik & Pal 2022, corrected: spec section 3.7).

    The announced mapping D~ stays within ``delta``-fidelity (|D~_a - D_a| <= 1 - delta) or
    ``alpha``-fidelity (alpha <= D~_a / D_a <= 1/alpha) of the true decision rule D, and
    minimises, QID group by QID group, the largest confidence an adversary reading D~ gets
    about a data subject's private attributes. With ``announce: randomised`` (beyond the
    paper) D~ is instead drawn uniformly from the mappings within the fidelity whose
    confidence is at most beta*_g + ``slack`` (``privfair.components.transparency.randomised``).

    ``announce``, ``slack`` and ``announce_seed`` are opt-in: left at their defaults they are
    not written to the params, so an existing release keeps its bytes.

    >>> ATRParams().model_dump()["fidelity"], "announce" in ATRParams().model_dump()
    ('delta', False)
    >>> ATRParams(announce="randomised", slack=0.05).model_dump()["slack"]
    0.05
    """

    opt_in: ClassVar[tuple[str, ...]] = ("announce", "slack", "announce_seed")

    fidelity: Literal["delta", "alpha"] = Field("delta", description="fidelity mode (Def. 5/6)")
    delta: float = Field(0.9, ge=0.0, le=1.0, description="delta-fidelity level")
    alpha: float | None = Field(None, gt=0.0, le=1.0, description="alpha-fidelity level")
    allocation: Literal["paper", "nearest"] = Field(
        "paper",
        description="ALLOCATE's start: the lower bounds (paper; the flat level in a beta_min "
        "group) or the true masses (nearest: more cells keep their true rule, which a reader "
        "who knows the mechanism then reads off the report)",
    )
    decisions: Literal["label", "model", "cells"] = Field(
        "label",
        description="'label': the label column holds each record's decision; 'model': a "
        "classifier trained on the records decides (the label is its training target); "
        "'cells': the table is pre-aggregated, one row per cell, the label column holding "
        "D_1(x) and the 'admissible' column the cell's population",
    )
    model: Literal["logistic_regression", "decision_tree"] = Field(
        "logistic_regression", description="classifier of the 'model' decisions"
    )
    train_fraction: float = Field(0.7, gt=0.0, lt=1.0, description="training share (model)")
    model_seed: int = Field(0, description="seed of the training split and the classifier")
    bins: dict[str, tuple[float, ...]] = Field(
        default_factory=dict,
        description="cut points of numeric public/private attributes: {column: [c1, c2, ...]} "
        "gives the regions (-inf, c1), [c1, c2), ..., [ck, inf)",
    )
    fairness: tuple[FairnessMeasure, ...] = Field(
        (),
        description="measures to publish (default: SP and PR over the first public "
        "attribute's two most populated values, CSP per value of the first private attribute)",
    )
    include_population: bool = Field(False, description="publish each cell's population")
    announce: Literal["optimum", "randomised"] = Field(
        "optimum",
        description="'optimum': the paper's announced mapping, a function of the fidelity "
        "intervals (a reader who knows delta and the mechanism reads the true rule of a cell "
        "announced at an end of its interval); 'randomised': each group's mapping drawn "
        "uniformly from those within the fidelity whose confidence is at most beta* + slack, "
        "so the true rule is not a function of the announced one",
    )
    slack: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="randomised only: how far above the optimum beta*_g a group's announced "
        "confidence may go (> 0)",
    )
    announce_seed: int | None = Field(
        None,
        description="randomised only: seed of the draw. None (the default): fresh entropy "
        "from the operating system, recorded nowhere. A seed is published with the params, "
        "and whoever holds it can replay the draw for every candidate true rule",
    )
    sweep: tuple[float, ...] = Field(
        (0.0, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0),
        description="fidelity levels of the trade-off curve (report, C11)",
    )

    @model_validator(mode="after")
    def _mode(self) -> ATRParams:
        if self.fidelity == "alpha" and self.alpha is None:
            raise ValueError("fidelity 'alpha' needs alpha in (0, 1]")
        if self.fidelity == "delta" and self.alpha is not None:
            raise ValueError("alpha is only read in fidelity mode 'alpha'")
        if self.announce == "randomised" and not self.slack > 0:
            raise ValueError(
                "announce 'randomised' needs slack > 0: at slack 0 the optimum is often the "
                "only mapping allowed, and the draw is then no draw (try slack: 0.05)"
            )
        if self.announce == "optimum" and (self.slack or self.announce_seed is not None):
            raise ValueError("slack and announce_seed are only read with announce 'randomised'")
        return self

    @property
    def level(self) -> float:
        """delta or alpha, whichever the mode reads."""
        return float(self.delta if self.fidelity == "delta" else self.alpha)
