"""The synthesis family's input rules (spec 2.1): the roles it reads, what PreFair needs of
them, and the attribute index sets the selection works on.

- ``protected`` -> P, ``admissible`` -> A, ``label`` -> O (the outcomes), ``ignored`` ->
  unlabelled (kept, synthesised like any other attribute); any other role is refused,
  naming the column (a quasi-identifier or sensitive column means another family's spec);
- PreFair needs at least one protected attribute, one admissible attribute (a fair tree
  exists iff A is not empty, Prop. 5 and A19) and one outcome; P, A and O are disjoint because
  a column has one role.
"""

from __future__ import annotations

import pyarrow as pa

from privfair.components.core.inputs import table_roles
from privfair.components.synthesis.selection import Roles
from privfair.schemas.errors import InputError
from privfair.schemas.roles import Role, TableRoles

__all__ = ["synthesis_roles", "index_roles"]

_ALLOWED = (Role.PROTECTED, Role.ADMISSIBLE, Role.LABEL, Role.IGNORED)


def synthesis_roles(table: pa.Table, fair: bool) -> TableRoles:
    """The table's roles, checked: every column has one of the four roles above; with ``fair``
    (PreFair) at least one protected, one admissible and one label column."""
    roles = table_roles(table, empty=True)  # an empty partition is released like any other
    for c in roles:
        if c.role not in _ALLOWED:
            raise InputError(
                c.name,
                "synthesis reads the roles protected, admissible, label and ignored "
                "(unlabelled, kept)",
                f"found role '{c.role.value}'",
            )
    if table.num_columns < 2:
        raise InputError(None, "synthesis needs at least two columns")
    if fair:
        for role, why in (
            (Role.PROTECTED, "PreFair needs a protected attribute"),
            (
                Role.ADMISSIBLE,
                "PreFair needs an admissible attribute: no fair tree exists without one (Prop. 5)",
            ),
            (Role.LABEL, "PreFair needs an outcome (a label column)"),
        ):
            if not roles.with_role(role):
                raise InputError(None, why, f"no column has role '{role.value}'")
    return roles


def index_roles(roles: TableRoles) -> Roles:
    """The role index sets over the columns' positions."""
    names = roles.names
    pick = lambda role: tuple(names.index(c.name) for c in roles.with_role(role))  # noqa: E731
    return Roles(
        d=len(names),
        protected=pick(Role.PROTECTED),
        admissible=pick(Role.ADMISSIBLE),
        outcomes=pick(Role.LABEL),
    )
