"""Input rules of the generalisation family and the encoded input both algorithms share.

Roles (spec section 2.1): every ``quasi_identifier`` column is a PND attribute, the one
``protected`` column is the PD attribute (its protected values are its ``unfavoured`` set, or
every value outside its ``favoured`` set), the one ``label`` column is the decision (its
negative values are every value outside its ``positive`` set). Each breach is an
``InputError`` naming the column (or parameter) and the rule:

- no other column may reach the algorithm: a column that is neither PND, PD nor decision would
  open contexts the bound does not cover. The spec chooses what happens to it: drop it
  (``dataset.exclude`` or ``unlabelled: drop``) or generalise it (give it the
  ``quasi_identifier`` role);
- the PD attribute and the decision are complete; the decision is binary; the declared
  protected, favoured and positive values occur; both PD groups and both decisions occur;
- ``t`` lies in [0, max(p-, 1 - p-)]; ``k`` is at most the number of rows;
- ``t`` is at least tau(R), unless the spec accepts one class (``single_class: allow``): below
  tau(R) no cut or split is d-allowable (invariant I2), so the release would be one class with
  every PND attribute at its full range;
- with ``k > 1`` over q-blocks (``k_over: q_blocks``, the default), each PD group has at least
  ``k`` rows: the whole table is a class, and its q-block of a smaller group would hold fewer.

**The PD attribute as published.** The bound (Theorems 10, 15, 20, 23) is about two groups,
protected and unprotected. A PD attribute with exactly two values (one per group) is published
unchanged: its values are the groups. One with more values is published as its group, the
string ``"protected"`` or ``"unprotected"`` (``publish.group_column``): publishing its raw values
would let a reader form q-blocks (PND labels and one PD value) that no guarantee covers.

**Arrow types.** Columns come as pandas, polars and lakehouse readers write them: a dictionary
column (a pandas Categorical) is read through its values, and an ordered one gives its PND
attribute's domain order when the spec declares none; ``string_view`` and ``binary_view``
columns (which Arrow's take and sort kernels do not serve) are read as ``string`` and
``binary``; ``large_string`` is used as it is. ``ordinary`` and ``plain`` do this.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core.inputs import (
    absent_value,
    member,
    null_options,
    require_role,
    table_roles,
)
from privfair.components.generalisation.domains import Domain, plain
from privfair.components.generalisation.measures import cell_of, four_fold, t_max, tau
from privfair.schemas.errors import InputError
from privfair.schemas.roles import ColumnRole, Role, TableRoles

__all__ = [
    "PROTECTED",
    "UNPROTECTED",
    "Prepared",
    "prepare",
    "prepare_for",
    "ordinary",
    "plain",
    "is_member",
    "protected_values",
    "negative_values",
]

PROTECTED = "protected"  # the published value of a protected row's PD group
UNPROTECTED = "unprotected"
TOL = 1e-12  # AMB-5: t is compared with tau(R) inclusively, up to float noise


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
    pd_values: int = 2

    @property
    def pd_as_groups(self) -> bool:
        """Whether the PD attribute is published as its group (it has more than two values,
        so its values are not the groups themselves); see the module docstring."""
        return self.pd_values > 2

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
        return cell_of(self.protected, self.negative)

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
        raise InputError(
            name,
            f"the {what} must have no missing values",
            f"{col.null_count} nulls; {null_options(name)}",
        )
    return sorted(pc.unique(plain(col)).to_pylist(), key=lambda v: (str(type(v)), v))


def _ordinary_type(t: pa.DataType) -> pa.DataType:
    if t == pa.string_view():
        return pa.string()
    if t == pa.binary_view():
        return pa.binary()
    if pa.types.is_dictionary(t):
        value = _ordinary_type(t.value_type)
        return t if value == t.value_type else pa.dictionary(t.index_type, value, t.ordered)
    return t


def ordinary(table: pa.Table) -> pa.Table:
    """``table`` with every ``string_view`` / ``binary_view`` column (or dictionary of them)
    as ``string`` / ``binary``, field metadata kept; the same table when there is none.

    >>> t = pa.table({"x": pa.array(["a", "b"], pa.string_view()), "y": [1, 2]})
    >>> ordinary(t).schema.types
    [DataType(string), DataType(int64)]
    """
    fields = [f.with_type(_ordinary_type(f.type)) for f in table.schema]
    if all(f.type == g.type for f, g in zip(fields, table.schema, strict=True)):
        return table
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))


def is_member(column: pa.ChunkedArray | pa.Array, values) -> np.ndarray:
    """Per row, whether its value is one of ``values``, read through ``plain`` (a dictionary
    column by its values); False where the column's type cannot hold them.

    >>> is_member(pa.chunked_array([pa.array(["a", "b", "a"]).dictionary_encode()]), {"a"})
    array([ True, False,  True])
    """
    col = plain(column)
    if isinstance(col, pa.Array):
        col = pa.chunked_array([col], type=col.type)
    return member(col, values)


def prepare_for(table: pa.Table, params) -> Prepared:
    """``prepare`` with the rules a run of ``params`` (a ``GeneralisationParams``) owes."""
    return prepare(
        table, params.t, params.k, k_over=params.k_over, single_class=params.single_class
    )


def prepare(
    table: pa.Table,
    t: float | None,
    k: int = 1,
    *,
    k_over: str = "classes",
    single_class: str = "allow",
) -> Prepared:
    """Check ``table`` against the family's rules and encode it.

    Parameters
    ----------
    table : pyarrow.Table
        The input, roles in its field metadata.
    t : float or None
        The closeness level; None skips the rules on t (the validator encodes an input
        without running).
    k : int
        The k-anonymity level (1: none).
    k_over : {"classes", "q_blocks"}
        What k covers; with "q_blocks" and k > 1 each PD group must hold at least k rows.
    single_class : {"allow", "refuse"}
        With "refuse", a t below tau(R) is an error.

    Returns
    -------
    Prepared
        The encoded input.

    Raises
    ------
    InputError
        A rule of the module docstring is broken; the error names the column or parameter.
    """
    table = ordinary(table)
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
    protected = is_member(table.column(pd_col.name), prot_vals)
    negative = is_member(table.column(dec_col.name), neg_vals)
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
    if k_over == "q_blocks" and k > 1 and min(a + b, c + d) < k:
        raise InputError(
            "k",
            "with k over q-blocks (k_over: q_blocks) each PD group needs at least k rows: the "
            "class holding the smaller group's rows would have a smaller q-block",
            f"k = {k}; the protected group has {a + b} rows, the unprotected group {c + d}; "
            "lower k, or set k_over: classes (k-anonymity over the PND labels only)",
        )
    tau_r = float(tau(a, b, c, d, p_minus))
    if t is not None and single_class == "refuse" and t < tau_r - TOL:
        raise InputError(
            "t",
            "t is below tau(R), the largest distance of a PD group's negative-decision rate from "
            "the table's: no cut can be d-allowable, so the release would be one class with every "
            "PND attribute at its full range",
            f"t = {t}, tau(R) = {tau_r:.4g}; raise t to at least tau(R), or set "
            "single_class: allow to publish that one class",
        )
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
        len(pd_present),
    )
