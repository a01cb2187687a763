"""Column roles carried in Arrow field metadata, so a table keeps its roles wherever it goes.

One role per column and pipeline. The vocabulary is shared by every family; each family states
which roles it needs and how many (its own input rules), so the model itself allows several
protected attributes, several labels and unlabelled columns:

- ``quasi_identifier``: attributes an adversary may know (microaggregated, generalised...);
- ``protected``: a protected attribute; ``favoured`` / ``unfavoured`` are *value sets* naming
  its favoured or its protected (disfavoured) values;
- ``label``: an outcome or decision; ``positive`` is the set of its desirable values;
- ``sensitive``, ``admissible``, ``public``, ``private``: as the family using them defines;
- ``ignored``: an unlabelled column kept in the table; a family decides what happens to it.

Beside its role, a column may be ``known``: an attacker may know its value of a person, so the
re-identification risk counts it in the attacker's background (``privfair.components.core.risk``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

import pyarrow as pa

from privfair.schemas.errors import InputError

META_ROLE = b"privfair.role"
META_KIND = b"privfair.kind"
META_FAVOURED = b"privfair.favoured"
META_POSITIVE = b"privfair.positive"
META_UNFAVOURED = b"privfair.unfavoured"
META_DOMAIN = b"privfair.domain"
META_SOURCE = b"privfair.source_column"
META_LEVEL = b"privfair.level"
# ``true``: an attacker may know the column's value of a person (the spec's ``known``)
META_KNOWN = b"privfair.known"
# ``input``: the column's ``domain`` was read off the input (a pandas ordered Categorical's
# categories), not declared; a family that may only use public domains refuses it
META_DOMAIN_FROM = b"privfair.domain_from"
DOMAIN_FROM_INPUT = "input"


class Role(StrEnum):
    QUASI_IDENTIFIER = "quasi_identifier"
    PROTECTED = "protected"
    LABEL = "label"
    SENSITIVE = "sensitive"
    ADMISSIBLE = "admissible"
    PUBLIC = "public"
    PRIVATE = "private"
    IGNORED = "ignored"


class Kind(StrEnum):
    """Measurement level: how a column is encoded for distances and generalisation."""

    NUMERIC = "numeric"
    NOMINAL = "nominal"
    ORDINAL = "ordinal"
    BINARY = "binary"


Scalar = str | int | float | bool
ValueSet = tuple[Scalar, ...]


# How a release names the two groups of a protected attribute it publishes as its groups (a
# generalisation release with a many-valued PD attribute): the values its bound is about.
GROUP_PROTECTED = "protected"
GROUP_UNPROTECTED = "unprotected"


def value_set(values: Scalar | list | tuple | None) -> ValueSet | None:
    """A scalar or a sequence of values as a tuple (None stays None)."""
    if values is None:
        return None
    if isinstance(values, list | tuple):
        return tuple(values)
    return (values,)


@dataclass(frozen=True)
class ColumnRole:
    """The role of one column.

    ``favoured`` / ``unfavoured`` are value sets of a protected attribute (its favoured values,
    its protected values); ``positive`` the set of desirable values of a label; ``domain`` the
    ordered domain of an ordinal attribute; ``domain_from_input`` says that domain was read off
    the input (an ordered Categorical's categories) instead of declared: a fact about the
    data, which a family publishing only public domains (DP synthesis) refuses. ``source``/
    ``level`` name the original column and level of a one-hot column. Value sets are given as a
    scalar or a sequence and kept as tuples.
    """

    name: str
    role: Role
    kind: Kind = Kind.NUMERIC
    favoured: ValueSet | None = None
    positive: ValueSet | None = None
    domain: tuple[Scalar, ...] | None = None
    source: str | None = None
    level: Scalar | None = None
    unfavoured: ValueSet | None = None
    domain_from_input: bool = False
    known: bool = False

    def __post_init__(self) -> None:
        for name in ("favoured", "positive", "unfavoured"):
            object.__setattr__(self, name, value_set(getattr(self, name)))

    def to_metadata(self) -> dict[bytes, bytes]:
        meta = {META_ROLE: self.role.value.encode(), META_KIND: self.kind.value.encode()}
        if self.favoured is not None:
            meta[META_FAVOURED] = json.dumps(list(self.favoured)).encode()
        if self.unfavoured is not None:
            meta[META_UNFAVOURED] = json.dumps(list(self.unfavoured)).encode()
        if self.positive is not None:
            meta[META_POSITIVE] = json.dumps(list(self.positive)).encode()
        if self.domain is not None:
            meta[META_DOMAIN] = json.dumps(list(self.domain)).encode()
            if self.domain_from_input:
                meta[META_DOMAIN_FROM] = DOMAIN_FROM_INPUT.encode()
        if self.source is not None:
            meta[META_SOURCE] = self.source.encode()
        if self.level is not None:
            meta[META_LEVEL] = json.dumps(self.level).encode()
        if self.known:
            meta[META_KNOWN] = b"true"
        return meta

    @classmethod
    def from_field(cls, f: pa.Field) -> ColumnRole | None:
        meta = f.metadata or {}
        if META_ROLE not in meta:
            return None
        domain = meta.get(META_DOMAIN)
        return cls(
            name=f.name,
            role=Role(meta[META_ROLE].decode()),
            kind=Kind(meta.get(META_KIND, b"numeric").decode()),
            favoured=json.loads(meta[META_FAVOURED]) if META_FAVOURED in meta else None,
            unfavoured=json.loads(meta[META_UNFAVOURED]) if META_UNFAVOURED in meta else None,
            positive=json.loads(meta[META_POSITIVE]) if META_POSITIVE in meta else None,
            domain=tuple(json.loads(domain)) if domain is not None else None,
            domain_from_input=domain is not None
            and meta.get(META_DOMAIN_FROM) == DOMAIN_FROM_INPUT.encode(),
            source=meta[META_SOURCE].decode() if META_SOURCE in meta else None,
            level=json.loads(meta[META_LEVEL]) if META_LEVEL in meta else None,
            known=meta.get(META_KNOWN) == b"true",
        )


@dataclass(frozen=True)
class TableRoles:
    """The roles of a table's columns, in column order."""

    columns: tuple[ColumnRole, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for c in self.columns:
            if c.name in seen:
                raise InputError(c.name, "a column may have only one role")
            seen.add(c.name)

    @classmethod
    def of(cls, columns: Iterable[ColumnRole]) -> TableRoles:
        return cls(tuple(columns))

    def __iter__(self):
        return iter(self.columns)

    def __getitem__(self, name: str) -> ColumnRole:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return any(c.name == name for c in self.columns)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def with_role(self, role: Role) -> list[ColumnRole]:
        return [c for c in self.columns if c.role is role]

    @property
    def quasi_identifiers(self) -> list[str]:
        return [c.name for c in self.with_role(Role.QUASI_IDENTIFIER)]

    @property
    def background(self) -> list[str]:
        """What an attacker is assumed to know of a person, in column order: the
        quasi-identifiers, the protected attributes (published unchanged, and textbook
        quasi-identifiers) and every column marked ``known``."""
        attacker = (Role.QUASI_IDENTIFIER, Role.PROTECTED)
        return [c.name for c in self.columns if c.role in attacker or c.known]

    def single(self, role: Role) -> ColumnRole:
        """The one column with ``role``; an error naming the role if there is none or several."""
        found = self.with_role(role)
        if len(found) != 1:
            names = ", ".join(c.name for c in found) or "none"
            raise InputError(
                None, f"exactly one {role.value} column is required", f"found: {names}"
            )
        return found[0]

    def select(self, names: Iterable[str]) -> TableRoles:
        keep = list(names)
        return TableRoles(tuple(self[n] for n in keep if n in self))

    def replace(self, column: ColumnRole) -> TableRoles:
        return TableRoles(tuple(column if c.name == column.name else c for c in self.columns))


def attach_roles(table: pa.Table, roles: TableRoles) -> pa.Table:
    """Return ``table`` with each role written into its field's metadata.

    Every column named in ``roles`` must exist; columns without a role keep no role metadata.
    """
    names = table.schema.names
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise InputError(dup[0], "column names must be unique", f"duplicated: {', '.join(dup)}")
    for c in roles:
        if c.name not in names:
            raise InputError(c.name, "column named in the roles is not in the table")
    fields = []
    for f in table.schema:
        meta = dict(f.metadata or {})
        for key in (
            META_ROLE,
            META_KIND,
            META_FAVOURED,
            META_POSITIVE,
            META_UNFAVOURED,
            META_DOMAIN,
            META_DOMAIN_FROM,
            META_SOURCE,
            META_LEVEL,
            META_KNOWN,
        ):
            meta.pop(key, None)
        if f.name in roles:
            meta.update(roles[f.name].to_metadata())
        fields.append(f.with_metadata(meta or None))
    schema = pa.schema(fields, metadata=table.schema.metadata)
    return table.cast(schema)


def read_roles(table_or_schema: pa.Table | pa.Schema) -> TableRoles:
    """The roles stored in a table's (or schema's) field metadata."""
    # an Arrow table, or any table handle with an Arrow schema (a SparkFrame's rows stay on a
    # cluster)
    schema = table_or_schema if isinstance(table_or_schema, pa.Schema) else table_or_schema.schema
    found = [ColumnRole.from_field(f) for f in schema]
    return TableRoles(tuple(c for c in found if c is not None))
