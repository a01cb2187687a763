"""Input rules of the microaggregation family, each breach an ``InputError`` naming the column.

- every column has a role; at least one quasi-identifier;
- every column that is not a quasi-identifier passes through unchanged (sensitive, public,
  admissible, kept unlabelled ones...), a guarantee the algorithms declare (C6); a ``private``
  column is refused (the pipeline drops or refuses it first);
- Fair-MDAV: exactly one protected attribute and one label, each binary, a declared favoured or
  positive value naming one value that occurs.
"""

from __future__ import annotations

import pyarrow as pa

from components.core.inputs import absent_value, require_role, table_roles
from components.microaggregation.encoding import binary_values
from schemas.errors import InputError
from schemas.roles import ColumnRole, Role, TableRoles

__all__ = ["prepare", "binary_roles", "AUTO"]

AUTO = "auto"  # favoured: auto -- the favoured value is the one the data favour


def prepare(table: pa.Table) -> tuple[pa.Table, TableRoles, list[str]]:
    """(table, its roles, warnings): every column has a role, at least one quasi-identifier,
    and no ``private`` column (the pipeline drops or refuses those before any algorithm)."""
    roles = table_roles(table)
    private = [c.name for c in roles.with_role(Role.PRIVATE)]
    if private:
        raise InputError(private[0], "a private column must not reach a microaggregation algorithm")
    require_role(roles, Role.QUASI_IDENTIFIER, count=None)
    return table, roles, []


def _single_value(c: ColumnRole, field: str) -> object:
    values = getattr(c, field)
    if values is None:
        return None
    if len(values) != 1:
        raise InputError(
            c.name, f"a binary column takes one '{field}' value", f"given {list(values)}"
        )
    return values[0]


def binary_roles(table: pa.Table, roles: TableRoles) -> tuple[ColumnRole, ColumnRole]:
    """The protected attribute and the label, each required once and binary."""
    (prot,) = require_role(roles, Role.PROTECTED, count=1)
    (lab,) = require_role(roles, Role.LABEL, count=1)
    for c, what, field in ((prot, "protected attribute", "favoured"), (lab, "label", "positive")):
        _, distinct = binary_values(table, c.name, what)
        v = _single_value(c, field)
        if v is not None and v != AUTO and v not in distinct:
            raise absent_value(c.name, field, v, distinct)
    return prot, lab
