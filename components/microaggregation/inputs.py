"""Input rules of the microaggregation family, each breach an ``InputError`` naming the column.

- every column has a role; at least one quasi-identifier;
- unlabelled (``ignored``) columns are not part of the release: they are dropped before the
  algorithm runs, and the run says so;
- Fair-MDAV: exactly one protected attribute and one label, each binary, a declared favoured or
  positive value naming one value that occurs.
"""

from __future__ import annotations

import pyarrow as pa

from components.core.inputs import require_role, table_roles
from components.microaggregation.encoding import binary_values
from schemas.errors import InputError
from schemas.roles import ColumnRole, Role, TableRoles

__all__ = ["prepare", "binary_roles"]


def prepare(table: pa.Table) -> tuple[pa.Table, TableRoles, list[str]]:
    """(table without its ``ignored`` columns, their roles, warnings)."""
    roles = table_roles(table)
    ignored = [c.name for c in roles.with_role(Role.IGNORED)]
    warnings = []
    if ignored:
        keep = [n for n in table.column_names if n not in ignored]
        table = table.select(keep)
        roles = roles.select(keep)
        warnings.append(f"unlabelled (ignored) columns not released: {', '.join(ignored)}")
    require_role(roles, Role.QUASI_IDENTIFIER, count=None)
    return table, roles, warnings


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
        if v is not None and v not in distinct:
            raise InputError(
                c.name, f"the declared {field} value does not occur", f"{v!r}; values: {distinct}"
            )
    return prot, lab
