"""The options of an evaluation, in one model for the CLI, the Python API, Dagster and Airflow.

``EvaluateOptions`` holds what ``privfair evaluate`` takes (``--grid``, ``--folds``, ``--seed``,
``--classifiers``, ``--drop-protected``, ``--protect-test``); each face builds it from its own
form (arguments, keyword arguments, a Dagster run config, an Airflow run conf) and hands it to
``privfair.evaluation.evaluate.evaluate`` as ``options.arguments()``. A bad option is refused
before any data is read (``SpecError`` naming the option and the value).

>>> EvaluateOptions.of({"grid": "k=5,10", "classifiers": "lr,gnb"}).arguments()["grid"]
{'k': [5, 10]}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from privfair.schemas.errors import SpecError

__all__ = ["CLASSIFIERS", "MAX_SEED", "EvaluateOptions", "check_options", "parse_grid"]

CLASSIFIERS = ("lr", "rf", "sgd", "gnb", "dt", "ada", "mlp")
MAX_SEED = 2**31 - 1  # a classifier's seed is ``seed + fold``: within NumPy's 2**32 - 1
DEFAULT_CLASSIFIERS = "lr,rf,sgd,gnb"


def parse_grid(pairs: Iterable[str]) -> dict[str, list]:
    """``["k=5,10", ...]`` as ``{"k": [5, 10]}`` (each value read as YAML; ``null`` for None).

    Raises ``SpecError`` (key ``--grid``) for a pair without ``=`` or a key, an empty value, a
    key given twice or a value listed twice (each would evaluate one setting twice)."""
    grid: dict[str, list] = {}
    for p in pairs:
        key, eq, values = p.partition("=")
        key = key.strip()
        if not eq or not key:
            raise SpecError("--grid", f"expects key=v1,v2,..., got '{p}'")
        if key in grid:
            raise SpecError("--grid", f"'{key}' is given twice; list its values once: {key}=v1,v2")
        parsed: list = []
        for v in values.split(","):
            if not v.strip():
                raise SpecError("--grid", f"'{p}' has an empty value for '{key}' (null for none)")
            try:
                value = yaml.safe_load(v)
            except yaml.YAMLError as e:
                why = getattr(e, "problem", None) or type(e).__name__
                raise SpecError(
                    "--grid", f"'{p}': the value '{v.strip()}' is not YAML ({why})"
                ) from None
            if value in parsed:
                raise SpecError("--grid", f"'{p}' lists {key}={v.strip()} twice")
            parsed.append(value)
        grid[key] = parsed
    return grid


def check_options(folds: int, seed: int, classifiers: Sequence[str]) -> None:
    """Refuse what no data can fix: fewer than 2 folds, a seed outside 0..``MAX_SEED``, no
    classifier, an unknown or repeated one (``SpecError`` naming the option and the value)."""
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise SpecError(
            "--folds",
            f"must be a whole number of at least 2 (each fold is the test part once and "
            f"training data otherwise), got {folds!r}",
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise SpecError("--seed", f"must be a whole number from 0 to {MAX_SEED}, got {seed!r}")
    if not classifiers:
        raise SpecError(
            "--classifiers", f"names no classifier; give one or more of {', '.join(CLASSIFIERS)}"
        )
    seen: set[str] = set()
    for c in classifiers:
        if c not in CLASSIFIERS:
            raise SpecError(
                "--classifiers", f"unknown classifier '{c}'; known: {', '.join(CLASSIFIERS)}"
            )
        if c in seen:
            raise SpecError("--classifiers", f"names '{c}' twice")
        seen.add(c)


def _grid_text(grid: Mapping[str, Sequence[Any]]) -> str:
    """A grid given as a mapping, in the command line's form (each value as YAML)."""
    out = []
    for key, values in grid.items():
        if isinstance(values, str) or not isinstance(values, Sequence):
            values = [values]
        shown = [
            yaml.safe_dump(v, default_flow_style=True).strip().removesuffix("...").strip()
            for v in values
        ]
        out.append(f"{key}={','.join(shown)}")
    return " ".join(out)


class EvaluateOptions(BaseModel):
    """What an evaluation is asked to do; every field as ``privfair evaluate`` documents it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    grid: str = Field(
        default="",
        description="parameters to sweep, as on the command line: 'k=5,10 tau=0.5,1'",
    )
    folds: int = Field(default=5, description="stratified folds (at least 2)")
    seed: int = Field(default=0, description="fold shuffling and classifier seed")
    classifiers: str = Field(
        default=DEFAULT_CLASSIFIERS,
        description="comma-separated: " + ", ".join(CLASSIFIERS),
    )
    drop_protected: bool = Field(
        default=False, description="leave the protected attribute out of the features"
    )
    protect_test: bool = Field(
        default=False,
        description="score on the test fold as the component publishes it (row-level only)",
    )

    @classmethod
    def of(cls, options: Mapping[str, Any] | None = None, key: str = "evaluate") -> EvaluateOptions:
        """The options of ``options`` (a run conf, keyword arguments, a run config), checked:
        a ``SpecError`` names ``<key>.<option>`` for an unknown option or a bad value. ``grid``
        may be the command line's text or a mapping (``{"k": [5, 10]}``), ``classifiers`` a
        comma-separated text or a list."""
        given = dict(options or {})
        unknown = sorted(set(given) - set(cls.model_fields))
        if unknown:
            raise SpecError(
                f"{key}.{unknown[0]}", f"unknown option; known: {', '.join(cls.model_fields)}"
            )
        if isinstance(given.get("grid"), list | tuple):  # the command line's pairs
            given["grid"] = " ".join(given["grid"])
        if isinstance(given.get("grid"), Mapping):
            given["grid"] = _grid_text(given["grid"])
        if given.get("grid") is None:
            given.pop("grid", None)
        if isinstance(given.get("classifiers"), list | tuple):
            given["classifiers"] = ",".join(given["classifiers"])
        try:
            opts = cls.model_validate(given)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise SpecError(f"{key}.{where}", err["msg"]) from None
        opts.arguments()  # every rule on the values, before any data is read
        return opts

    @property
    def classifier_list(self) -> list[str]:
        return [c.strip() for c in self.classifiers.split(",") if c.strip()]

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``evaluate`` (``grid`` parsed, ``classifiers`` a list),
        after ``check_options``."""
        classifiers = self.classifier_list
        check_options(self.folds, self.seed, classifiers)
        return {
            "grid": parse_grid(self.grid.split()),
            "folds": self.folds,
            "seed": self.seed,
            "classifiers": classifiers,
            "drop_protected": self.drop_protected,
            "protect_test": self.protect_test,
        }
