"""Input rules shared by the microaggregation components; each breach is an InputError naming
the column and the rule."""

from __future__ import annotations

import pyarrow as pa

from schemas.errors import InputError
from schemas.roles import Role, TableRoles, read_roles


def table_roles(table: pa.Table, roles: TableRoles | None) -> TableRoles:
    """Roles from the argument or from the table's field metadata; every column must have one."""
    names = table.column_names
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise InputError(dup[0], "column names must be unique", f"duplicated: {', '.join(dup)}")
    if table.num_rows == 0:
        raise InputError(None, "table is empty", "a release needs at least one row")
    roles = roles if roles is not None else read_roles(table)
    for c in roles:
        if c.name not in names:
            raise InputError(c.name, "column named in the roles is not in the table")
    for n in names:
        if n not in roles:
            raise InputError(n, "every column needs a role (use role 'ignored' to drop it)")
    if not roles.quasi_identifiers:
        raise InputError(None, "at least one quasi_identifier column is required")
    for c in roles:
        if c.role is Role.IGNORED:
            raise InputError(c.name, "ignored columns must be dropped before the component runs")
    return roles


def require_rows(table: pa.Table, k: int) -> None:
    if table.num_rows < k:
        raise InputError(
            None,
            f"fewer rows than k: a group needs at least k = {k} rows",
            f"{table.num_rows} rows",
        )
