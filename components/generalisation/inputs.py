"""Input rules of the generalisation family and the encoded input both algorithms share.

Roles (spec section 2.1): every ``quasi_identifier`` column is a PND attribute, the one
``protected`` column is the PD attribute (its protected values are its ``unfavoured`` set, or
every value outside its ``favoured`` set), the one ``label`` column is the decision (its
negative values are every value outside its ``positive`` set). Each breach is an
``InputError`` naming the column and the rule:

- no other column may reach the algorithm: a column that is neither PND, PD nor decision would
  open contexts the bound does not cover. The spec chooses what happens to it: drop it
  (``dataset.exclude`` or ``unlabelled: drop``) or generalise it (give it the
  ``quasi_identifier`` role);
- the PD attribute and the decision are complete; the decision is binary; the declared
  protected, favoured and positive values occur; both PD groups and both decisions occur;
- ``t`` lies in [0, max(p_-, 1 - p_-)]; ``k`` is at most the number of rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from components.core.inputs import absent_value, member, require_role, table_roles
from components.generalisation.domains import Domain
from components.generalisation.measures import four_fold, t_max, tau
from schemas.errors import InputError
from schemas.roles import ColumnRole, Role, TableRoles

__all__ = ["Prepared", "prepare", "protected_values", "negative_values"]


@dataclass
class Prepared:
    """The encoded input: PND ranks, PD and decision as booleans, and the global constants.

    ``cell``: each row's bucket, 0 = (protected, -), 1 = (protected, +), 2 = (unprotected, -),
    3 = (unprotected, +), the order of the 4-fold table's a, b, c, d.
    """

    table: pa.Table
    roles: TableRoles
    domains: list[Domain]
    pd: str
    decision: str
    protected: np.ndarray
    negative: np.ndarray
    p_minus: float
    tau_r: float
    warnings: list[str] = field(default_factory=list)

    @property
    def pnd(self) -> list[str]:
        return [d.name for d in self.domains]

    @property
    def ranks(self) -> np.ndarray:
        if not self.domains:
            return np.zeros((self.table.num_rows, 0), dtype=np.int64)
        return np.column_stack([d.ranks for d in self.domains])

    @property
    def cell(self) -> np.ndarray:
        return (2 * (~self.protected) + (~self.negative)).astype(np.int64)

    @property
    def counts(self) -> tuple[int, int, int, int]:
        return four_fold(self.protected, self.negative)

    def t_eff(self, t: float) -> float:
        return max(float(t), self.tau_r)


def _values(c: ColumnRole, field_: str) -> tuple | None:
    v = getattr(c, field_)
    return tuple(v) if v is not None else None


def protected_values(c: ColumnRole, present: list) -> set:
    """The PD attribute's protected values: ``unfavoured``, else the complement of ``favoured``."""
    unfav, fav = _values(c, "unfavoured"), _values(c, "favoured")
    if unfav is None and fav is None:
        raise InputError(
            c.name,
            "the PD attribute needs its protected values",
            "declare 'unfavoured' (the protected values) or 'favoured' (all others are protected)",
        )
    for what, vals in (("unfavoured", unfav), ("favoured", fav)):
        for v in vals or ():
            if v not in present:
                raise absent_value(c.name, what, v, present)
    return set(unfav) if unfav is not None else {v for v in present if v not in set(fav)}


def negative_values(c: ColumnRole, present: list) -> set:
    """The decision's negative values: every value outside ``positive``."""
    pos = _values(c, "positive")
    if pos is None:
        raise InputError(c.name, "the decision needs its positive value(s) ('positive')")
    for v in pos:
        if v not in present:
            raise absent_value(c.name, "positive", v, present)
    return {v for v in present if v not in set(pos)}


def _complete(table: pa.Table, name: str, what: str) -> list:
    col = table.column(name)
    if col.null_count:
        raise InputError(name, f"the {what} must have no missing values", f"{col.null_count} nulls")
    return sorted(set(col.to_pylist()), key=lambda v: (str(type(v)), v))


def prepare(table: pa.Table, t: float | None, k: int = 1) -> Prepared:
    """Check ``table`` against the family's rules and encode it (module docstring);
    ``t=None`` skips the rule on t (the validator encodes an input without running)."""
    roles = table_roles(table)
    allowed = (Role.QUASI_IDENTIFIER, Role.PROTECTED, Role.LABEL)
    for c in roles:
        if c.role not in allowed:
            raise InputError(
                c.name,
                f"a '{c.role.value}' column would open contexts the discrimination bound does "
                "not cover",
                "drop it (dataset.exclude, or role 'ignored' with 'unlabelled: drop') or "
                "generalise it (role 'quasi_identifier')",
            )
    require_role(roles, Role.QUASI_IDENTIFIER, count=None)
    (pd_col,) = require_role(roles, Role.PROTECTED, count=1)
    (dec_col,) = require_role(roles, Role.LABEL, count=1)
    pd_present = _complete(table, pd_col.name, "PD attribute")
    dec_present = _complete(table, dec_col.name, "decision")
    if len(dec_present) != 2:
        raise InputError(
            dec_col.name, "the decision must be binary", f"{len(dec_present)} distinct values"
        )
    prot_vals = protected_values(pd_col, pd_present)
    neg_vals = negative_values(dec_col, dec_present)
    protected = member(table.column(pd_col.name), prot_vals)
    negative = member(table.column(dec_col.name), neg_vals)
    if protected.all() or not protected.any():
        raise InputError(
            pd_col.name,
            "both the protected and the unprotected group must occur",
            f"protected values {sorted(map(str, prot_vals))}: {int(protected.sum())} of "
            f"{len(protected)} rows",
        )
    domains = []
    warnings = []
    for c in roles.with_role(Role.QUASI_IDENTIFIER):
        d = Domain.of(c.name, table.column(c.name), c.kind.value, c.domain)
        if d.order == "lexicographic":
            warnings.append(
                f"PND attribute '{c.name}' has no declared domain order: the lexicographic order "
                f"of its values is used ({d.values[0]!s} < ... < {d.values[-1]!s}); declare "
                "'domain' to choose another (it changes which cuts are tried)"
            )
        domains.append(d)
    p_minus = float(negative.mean())
    top = t_max(p_minus)
    if t is not None and not 0.0 <= t <= top + 1e-12:
        raise InputError(
            "t",
            f"t must lie in [0, max(p-, 1 - p-)] = [0, {top:.4g}]",
            f"t = {t}, p- = {p_minus:.4g} (negative rate of '{dec_col.name}')",
        )
    if k > table.num_rows:
        raise InputError("k", "k is larger than the table", f"k = {k}, {table.num_rows} rows")
    a, b, c, d = four_fold(protected, negative)
    tau_r = float(tau(a, b, c, d, p_minus))
    return Prepared(
        table,
        roles,
        domains,
        pd_col.name,
        dec_col.name,
        protected,
        negative,
        p_minus,
        tau_r,
        warnings,
    )
