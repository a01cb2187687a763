"""Input rules of the microaggregation family, each breach an ``InputError`` naming the column.

- every column has a role; at least one quasi-identifier; no column named like a nominal
  quasi-identifier's one-hot column (``<qi>=<level>``);
- every column that is not a quasi-identifier passes through unchanged (sensitive, public,
  admissible, kept unlabelled ones...), a guarantee the algorithms declare (C6); a ``private``
  column is refused (the pipeline drops or refuses it first);
- Fair-MDAV: exactly one protected attribute and one label, each binary, a declared favoured or
  positive value naming one value that occurs.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core.inputs import absent_value, require_role, table_roles
from privfair.components.microaggregation.columns import plain
from privfair.components.microaggregation.encoding import binary_values
from privfair.schemas.errors import InputError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles

__all__ = ["prepare", "binary_roles", "onehot_collisions", "AUTO"]

AUTO = "auto"  # favoured: auto -- the favoured value is the one the data favour


def prepare(table: pa.Table) -> tuple[pa.Table, TableRoles, list[str]]:
    """(table, its roles, warnings): every column has a role, at least one quasi-identifier,
    and no ``private`` column (the pipeline drops or refuses those before any algorithm)."""
    roles = table_roles(table)
    private = [c.name for c in roles.with_role(Role.PRIVATE)]
    if private:
        raise InputError(private[0], "a private column must not reach a microaggregation algorithm")
    require_role(roles, Role.QUASI_IDENTIFIER, count=None)
    onehot_collisions(table, roles)
    return table, roles, []


def onehot_collisions(table: pa.Table, roles: TableRoles) -> None:
    """``InputError`` when a column is named like the one-hot column of a nominal
    quasi-identifier's level (``region=Nord`` beside a nominal ``region`` holding ``Nord``):
    the encoding names each level's column ``<qi>=<level>``, and two columns of one name
    cannot be told apart in the published table or its evidence.

    Only the names are compared first; a nominal QI's levels (its declared ``domain``, else
    its distinct values) are read only when some column's name starts with ``<qi>=``."""
    names = table.column_names
    for q in roles.with_role(Role.QUASI_IDENTIFIER):
        numeric_type = _numeric(table.schema.field(q.name).type)
        if q.kind is Kind.ORDINAL or q.kind is Kind.NUMERIC:
            continue
        if q.kind is Kind.BINARY and numeric_type:
            continue  # encoded as a number, not one-hot
        prefix = f"{q.name}="
        near = [n for n in names if n.startswith(prefix)]
        if not near:
            continue
        col = plain(table.column(q.name))
        levels = (
            [v for v in q.domain if v is not None]
            if q.domain is not None
            else pc.unique(col.drop_null()).to_pylist()
        )
        clash = sorted({f"{prefix}{lvl}" for lvl in levels} & set(near))
        if clash:
            raise InputError(
                clash[0],
                f"named like the one-hot column of level {clash[0][len(prefix) :]!r} of the "
                f"nominal quasi-identifier '{q.name}' (its levels are published as "
                f"'{q.name}=<level>')",
                "rename it, or list it under dataset.exclude",
            )


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


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


def binary_groups(table: pa.Table, roles: TableRoles) -> None:
    """MDAV's rule for a label and a protected attribute it passes through: a single label is
    binary (two distinct values, none missing; a declared positive value one of them), and so
    is a single protected attribute beside it. MDAV's parity metrics and the family's audit
    (``audit.audit_fit``) read them as two groups, so a third value is bad input, refused
    naming the column and its values before any grouping runs (or its compiled rounds load),
    never a release whose evidence cannot be built. (Fair-MDAV's ``binary_roles`` asks more.)
    """
    labels, protected = roles.with_role(Role.LABEL), roles.with_role(Role.PROTECTED)
    if len(labels) != 1:
        return
    (lab,) = labels
    _, distinct = binary_values(table, lab.name, "label")
    declared = lab.positive[0] if lab.positive else None
    if declared is not None and declared not in distinct:
        raise absent_value(lab.name, "positive", declared, distinct)
    if len(protected) == 1:
        binary_values(table, protected[0].name, "protected attribute")
