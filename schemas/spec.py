"""The pipeline spec: one YAML file per release, loaded into a validated object.

Every mistake becomes a ``SpecError`` naming the dotted key (``component.params.tau``).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from schemas.contracts import Guarantee
from schemas.errors import SpecError
from schemas.params import COMPONENT_PARAMS
from schemas.roles import Kind, Role

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_CRON_PRESETS = {"@once", "@hourly", "@daily", "@weekly", "@monthly", "@yearly"}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ColumnSpec(_Model):
    role: Role
    kind: Kind = Kind.NUMERIC
    favoured: str | int | float | bool | None = None
    positive: str | int | float | bool | None = None
    domain: list[str | int | float] | None = None


class DatasetSpec(_Model):
    """Either a built-in dataset (``name``) or a user file (``path`` + ``columns`` roles).

    ``quasi_identifiers`` restricts the QIs to a subset; ``exclude`` drops columns before the
    component sees the table.
    """

    name: str | None = None
    path: str | None = None
    format: Literal["csv", "parquet"] | None = None
    columns: dict[str, ColumnSpec] | None = None
    quasi_identifiers: list[str] | None = None
    exclude: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_source(self) -> DatasetSpec:
        if (self.name is None) == (self.path is None):
            raise ValueError("give exactly one of 'name' (a built-in dataset) or 'path' (a file)")
        if self.path is not None and not self.columns:
            raise ValueError(
                "a dataset given by 'path' needs 'columns' with the role of each column"
            )
        return self


class ComponentSpec(_Model):
    name: str
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in COMPONENT_PARAMS:
            raise ValueError(
                f"unknown component '{v}'; known: {', '.join(sorted(COMPONENT_PARAMS))}"
            )
        return v

    def typed_params(self):
        return COMPONENT_PARAMS[self.name].model_validate(self.params)


class PipelineSpec(_Model):
    name: str
    description: str = ""
    dataset: DatasetSpec
    component: ComponentSpec
    guarantees: list[Guarantee] = Field(default_factory=list)
    schedule: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("must be lower-case letters, digits and '_', starting with a letter")
        return v

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: str | None) -> str | None:
        if v is None or v in _CRON_PRESETS:
            return v
        if len(v.split()) != 5:
            raise ValueError(
                "must be a 5-field cron expression or one of " + ", ".join(sorted(_CRON_PRESETS))
            )
        return v

    @property
    def params(self):
        return self.component.typed_params()

    def fingerprint(self) -> str:
        """sha256 of the spec's canonical JSON (key order and formatting do not matter)."""
        canon = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()

    def with_params(self, overrides: dict[str, Any]) -> PipelineSpec:
        """A copy whose component params are updated by ``overrides`` (validated again)."""
        merged = {**self.component.params, **overrides}
        raw = self.model_dump(mode="json")
        raw["component"]["params"] = merged
        return parse_spec(raw, source=f"{self.name} (overrides)")


def _key(loc: tuple) -> str:
    parts = [str(p) for p in loc if not (isinstance(p, str) and p in _UNION_TAGS)]
    return ".".join(parts) or "<root>"


# Guarantee kinds appear in pydantic error locations as union tags; they are not spec keys.
_UNION_TAGS: set[str] = {
    get_args(m.model_fields["kind"].annotation)[0] for m in get_args(get_args(Guarantee)[0])
}


def _first_error(e: ValidationError) -> dict:
    """The error to report: a misspelt (unknown) key first, since it usually explains the rest."""
    errs = e.errors()
    return next((x for x in errs if x["type"] == "extra_forbidden"), errs[0])


def parse_spec(raw: Any, source: str | None = None) -> PipelineSpec:
    """Validate a spec given as plain data. Raises ``SpecError`` naming the first bad key."""
    if not isinstance(raw, dict):
        raise SpecError("<root>", "the spec must be a mapping of keys to values", source)
    try:
        spec = PipelineSpec.model_validate(raw)
    except ValidationError as e:
        err = _first_error(e)
        loc = err["loc"]
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        raise SpecError(_key(loc), msg, source) from None
    try:
        spec.component.typed_params()
    except ValidationError as e:
        err = _first_error(e)
        loc = ("component", "params", *err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown parameter of component '{spec.component.name}'"
        raise SpecError(_key(loc), msg, source) from None
    return spec


def load_spec(path: str | Path) -> PipelineSpec:
    """Read and validate a YAML spec file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError("<file>", f"cannot read spec file: {e.strerror}", str(p)) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "<file>"
        raise SpecError(where, f"not valid YAML: {getattr(e, 'problem', e)}", str(p)) from None
    return parse_spec(raw, source=str(p))
