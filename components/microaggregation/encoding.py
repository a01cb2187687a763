"""Quasi-identifier encoding (Fair-MDAV spec section 1.2) and binary role normalisation.

QIs are held in a *mixed* form: a float block of numeric columns and an integer block of nominal
codes (-1 = missing). That form is exactly the one-hot encoding of the paper's cleanup
(``pd.get_dummies``, missing -> all-zero block) without materialising the one-hot matrix, so a
distance costs one subtraction per numeric column and one comparison per nominal attribute.

Squared Euclidean distance in the one-hot space, per nominal attribute j:
    x, y both present and different: 2;  one missing: 1;  equal or both missing: 0.
and to a fractional centre c_j (a distribution over levels):
    ||c_j||^2 + [x_j present] * (1 - 2 c_j[x_j]).

Numeric columns are min-max scaled to [0, 1] on the table being anonymised (z-score optional,
or ``none``: raw units, as the Fair-MDAV authors' cleanup leaves them); one-hot columns are
already 0/1 and are not rescaled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core.inputs import absent_value, member, null_options
from privfair.components.microaggregation.columns import plain
from privfair.schemas.errors import InputError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles

#: The distance scalings of the numeric QIs (``scale_of``): the type of the params' and of
#: C11's ``scaling``.
Scaling = Literal["minmax", "zscore", "none"]
SCALINGS: tuple[str, ...] = get_args(Scaling)


@dataclass(frozen=True)
class NominalAttribute:
    name: str
    levels: tuple  # sorted distinct non-null values


@dataclass
class EncodedQIs:
    """QIs of one table in mixed form, plus the published (one-hot) column layout."""

    numeric_names: list[str]
    numeric: np.ndarray  # (N, q) float64, original units
    nominal: list[NominalAttribute]
    codes: np.ndarray  # (N, r) int32, -1 = missing
    offset: np.ndarray  # (q,) scaling: scaled = (x - offset) / scale
    scale: np.ndarray  # (q,)
    roles: list[ColumnRole]  # role of each QI in the input table
    domains: dict[str, tuple] = field(default_factory=dict)  # ordinal QI -> its ordered domain

    def is_ordinal(self, name: str) -> bool:
        return name in self.domains

    def domain_of(self, name: str) -> tuple:
        return self.domains[name]

    @property
    def n_rows(self) -> int:
        return (
            self.numeric.shape[0]
            if self.numeric.size or not self.codes.size
            else self.codes.shape[0]
        )

    @property
    def scaled(self) -> np.ndarray:
        return (self.numeric - self.offset) / self.scale

    @property
    def onehot_names(self) -> list[str]:
        return [f"{a.name}={lvl}" for a in self.nominal for lvl in a.levels]

    @property
    def column_names(self) -> list[str]:
        """Published column names: numeric QIs, then one column per nominal level."""
        return self.numeric_names + self.onehot_names

    @property
    def n_columns(self) -> int:
        return len(self.column_names)

    def onehot(self, rows: np.ndarray | None = None) -> np.ndarray:
        """Dense one-hot block (N, sum of level counts), float64."""
        return self._hot(rows, 0)

    def dense(self, rows: np.ndarray | None = None, scaled: bool = False) -> np.ndarray:
        """The numeric QIs (``scaled`` or not), then the one-hot block: (N, ``n_columns``)."""
        num = self.scaled if scaled else self.numeric
        out = self._hot(rows, num.shape[1])
        out[:, : num.shape[1]] = num if rows is None else num[rows]
        return out

    def _hot(self, rows: np.ndarray | None, lead: int) -> np.ndarray:
        """A float64 matrix of ``lead`` free columns, then each nominal attribute's one-hot
        block (a null: all zeros), made in place: no block is copied into it."""
        codes = self.codes if rows is None else self.codes[rows]
        widths = [len(a.levels) for a in self.nominal]
        out = np.zeros((codes.shape[0], lead + sum(widths)))
        offset = lead
        for j, width in enumerate(widths):
            present = np.flatnonzero(codes[:, j] >= 0)
            out[present, offset + codes[present, j]] = 1.0
            offset += width
        return out

    def published_roles(self) -> list[ColumnRole]:
        out = [ColumnRole(name, Role.QUASI_IDENTIFIER, Kind.NUMERIC) for name in self.numeric_names]
        for a in self.nominal:
            out += [
                ColumnRole(
                    f"{a.name}={lvl}", Role.QUASI_IDENTIFIER, Kind.NUMERIC, source=a.name, level=lvl
                )
                for lvl in a.levels
            ]
        return out

    def attribute_of_column(self) -> list[str]:
        """For each published column, the original QI attribute it encodes."""
        return self.numeric_names + [a.name for a in self.nominal for _ in a.levels]


def _is_numeric(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_decimal(t)
    )


def _numeric_column(table: pa.Table, name: str) -> np.ndarray:
    col = table.column(name)
    if not _is_numeric(col.type):
        raise InputError(
            name, "a numeric quasi-identifier must have a numeric type", f"found {col.type}"
        )
    if col.null_count:
        raise InputError(
            name,
            "a numeric quasi-identifier must not contain nulls",
            f"{col.null_count} nulls; {null_options(name)}",
        )
    arr = col.to_numpy(zero_copy_only=False).astype(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InputError(
            name,
            "a numeric quasi-identifier must be finite (no NaN or inf)",
            f"{int(bad.sum())} rows",
        )
    return arr


def encode_qis(
    table: pa.Table,
    roles: TableRoles,
    scaling: str = "minmax",
    levels: dict[str, tuple] | None = None,
    fit: EncodedQIs | None = None,
) -> EncodedQIs:
    """Encode the QI columns of ``table``.

    ``fit`` reuses another encoding's nominal levels and scaling (e.g. to encode a published
    table exactly as its input was); values outside the fitted levels are an error.
    """
    numeric_names: list[str] = []
    numeric_cols: list[np.ndarray] = []
    nominal: list[NominalAttribute] = []
    code_cols: list[np.ndarray] = []
    qi_roles = [roles[n] for n in roles.quasi_identifiers]
    domains: dict[str, tuple] = {}
    for r in qi_roles:
        if r.name not in table.column_names:
            raise InputError(r.name, "quasi-identifier is not a column of the table")
        col = table.column(r.name)
        if not _is_numeric(col.type):
            col = plain(col)  # a dictionary's values, a view's offset form (columns.py)
        as_number = r.kind is Kind.NUMERIC or (r.kind is Kind.BINARY and _is_numeric(col.type))
        if r.kind is Kind.ORDINAL:
            domain = (
                (fit.domains.get(r.name) if fit is not None else None)
                or r.domain
                or tuple(sorted(pc.unique(col.drop_null()).to_pylist()))
            )
            idx = pc.index_in(col, value_set=pa.array(list(domain)))
            if idx.null_count != col.null_count:
                raise InputError(r.name, "ordinal value outside the declared domain")
            if col.null_count:
                raise ordinal_nulls(r.name, col.null_count)
            numeric_names.append(r.name)
            numeric_cols.append(idx.to_numpy(zero_copy_only=False).astype(np.float64))
            domains[r.name] = tuple(domain)
        elif as_number:
            numeric_names.append(r.name)
            numeric_cols.append(_numeric_column(table, r.name))
        else:
            if fit is not None:
                lv = next(a.levels for a in fit.nominal if a.name == r.name)
            elif levels and r.name in levels:
                lv = levels[r.name]
            else:
                lv = tuple(
                    sorted(pc.unique(col.drop_null()).to_pylist(), key=lambda v: (str(type(v)), v))
                )
            idx = pc.index_in(col, value_set=pa.array(list(lv), type=col.type))
            unknown = pc.sum(pc.and_(pc.is_null(idx), pc.is_valid(col))).as_py() or 0
            if unknown:
                raise InputError(r.name, "value outside the fitted levels", f"{unknown} rows")
            nominal.append(NominalAttribute(r.name, tuple(lv)))
            code_cols.append(pc.fill_null(idx, -1).to_numpy(zero_copy_only=False).astype(np.int32))
    n = table.num_rows
    numeric = np.column_stack(numeric_cols) if numeric_cols else np.zeros((n, 0))
    codes = np.column_stack(code_cols) if code_cols else np.zeros((n, 0), dtype=np.int32)
    offset, scale = (fit.offset, fit.scale) if fit is not None else scale_of(numeric, scaling)
    return EncodedQIs(numeric_names, numeric, nominal, codes, offset, scale, qi_roles, domains)


def scale_of(numeric: np.ndarray, scaling: str) -> tuple[np.ndarray, np.ndarray]:
    """(offset, scale) of each numeric column, scaled = (x - offset) / scale: ``minmax`` maps
    the column onto [0, 1], ``zscore`` onto mean 0 and standard deviation 1, ``none`` keeps
    raw units (offset 0, scale 1: a column with a large range dominates the distance). A
    constant column keeps scale 1. The one rule for the component and its checker (C11).

    >>> scale_of(np.array([[1.0, 5.0], [3.0, 5.0]]), "minmax")
    (array([1., 5.]), array([2., 1.]))
    >>> scale_of(np.array([[1.0, 5.0], [3.0, 5.0]]), "none")
    (array([0., 0.]), array([1., 1.]))
    """
    n, q = numeric.shape
    if scaling == "minmax":
        lo = numeric.min(axis=0) if n else np.zeros(q)
        hi = numeric.max(axis=0) if n else np.ones(q)
        return lo, np.where(hi > lo, hi - lo, 1.0)
    if scaling == "zscore":
        mu = numeric.mean(axis=0) if n else np.zeros(q)
        sd = numeric.std(axis=0) if n else np.ones(q)
        return mu, np.where(sd > 0, sd, 1.0)
    if scaling == "none":
        return np.zeros(q), np.ones(q)
    raise InputError("scaling", f"must be one of {', '.join(SCALINGS)}", scaling)


def binary_values(table: pa.Table, name: str, what: str) -> tuple[pa.ChunkedArray, list]:
    """The column (in its plain type) and its two distinct values as Python values, or an error
    naming the column. Compare it with ``indicator``: in Arrow, no Python object per row."""
    col = plain(table.column(name))
    if col.null_count:
        raise missing_values(name, what, col.null_count, len(col))
    distinct = pc.unique(col).to_pylist()
    if len(distinct) != 2:
        shown = sorted(distinct, key=str)[:5]
        raise InputError(
            name,
            f"the {what} must have exactly two distinct values",
            f"found {len(distinct)}: {shown}",
        )
    return col, sorted(distinct, key=lambda v: (str(type(v)), v))


def missing_values(name: str, what: str, nulls: int, rows: int) -> InputError:
    """The error of a binary role column (``what``) with ``nulls`` of its ``rows`` missing."""
    return InputError(
        name,
        f"the {what} has missing values",
        f"{nulls} of {rows} rows have no value; drop or fill them first: {null_options(name)}",
    )


def ordinal_nulls(name: str, nulls: int) -> InputError:
    """The error of an ordinal quasi-identifier with ``nulls`` missing values."""
    return InputError(
        name,
        "an ordinal quasi-identifier must not contain nulls",
        f"{nulls} nulls; {null_options(name)}",
    )


def as_held(value, distinct: list):
    """The element of ``distinct`` (a column's values, ``binary_values``) equal to ``value`` as
    Python compares them, else ``value``: a declared ``1`` is the ``True`` a boolean column
    holds.

    >>> as_held(1, [False, True]), as_held("x", ["a", "b"])
    (True, 'x')
    """
    return next((d for d in distinct if d == value), value)


def positive_value(declared, distinct: list):
    """A binary label's positive value as the column holds it: the declared one (``as_held``),
    or the larger of its two ``distinct`` values."""
    return as_held(declared if declared is not None else distinct[1], distinct)


def indicator(col: pa.ChunkedArray | pa.Array, value, distinct: list | None = None) -> np.ndarray:
    """int8 per row: 1 where ``col`` holds ``value``, else 0 (nulls and a value the column's
    type cannot hold included), computed in Arrow: a NumPy object array of a 10M-row string
    column is ~0.6 GB and its comparisons run in Python.

    ``value`` is compared as Python compares it with ``col``'s values: with ``distinct`` (the
    column's values, ``binary_values``) a declared ``1`` finds ``True`` in a boolean column.

    >>> indicator(pa.chunked_array([[True, False, None]]), 1, [False, True]).tolist()
    [1, 0, 0]
    >>> indicator(pa.chunked_array([["a", "b"]]), 3).tolist()
    [0, 0]
    >>> indicator(pa.chunked_array([[1, 2]]), 1.5).tolist()
    [0, 0]
    """
    if distinct is not None:
        value = as_held(value, distinct)
    return member(plain(col), [value]).astype(np.int8)


def label_01(table: pa.Table, label: ColumnRole) -> np.ndarray:
    """Label as int8 0/1, 1 = the declared positive value (default: the larger of the two values)."""
    values, distinct = binary_values(table, label.name, "label")
    positive = positive_value(label.positive[0] if label.positive else None, distinct)
    if positive not in distinct:
        raise absent_value(label.name, "positive", positive, distinct)
    return indicator(values, positive, distinct)


def favoured_value(pa_values: pa.ChunkedArray, distinct: list, y: np.ndarray, declared) -> object:
    """The favoured value of a binary protected attribute (``pa_values``, ``binary_values``):
    the one with the higher positive ratio PR = #positives / #rows (Fair-MDAV spec 1.3),
    ``favoured_of`` the ratios of its two values."""
    pr = []
    for v in distinct:
        mask = indicator(pa_values, v).astype(bool)
        pr.append(int(y[mask].sum()) / int(mask.sum()))
    return favoured_of(distinct, pr, declared)


def favoured_of(distinct: list, pr: list[float], declared) -> object:
    """Of the two values ``distinct`` with positive ratios ``pr``, the favoured one: the higher
    ratio; on a tie, the declared favoured value (or the larger value).

    >>> favoured_of(["F", "M"], [0.2, 0.3], None), favoured_of(["F", "M"], [0.3, 0.3], "F")
    ('M', 'F')
    """
    if pr[0] > pr[1]:
        return distinct[0]
    if pr[1] > pr[0]:
        return distinct[1]
    return declared if declared in distinct else distinct[1]


def protected_01(
    table: pa.Table, protected: ColumnRole, y: np.ndarray
) -> tuple[np.ndarray, object, object]:
    """Protected attribute as int8 0/1 with 1 = favoured (higher PR). Returns (pa01, favoured,
    declared-or-None) so callers can report a disagreement with the declared favoured value."""
    values, distinct = binary_values(table, protected.name, "protected attribute")
    declared = protected.favoured[0] if protected.favoured else None
    fav = favoured_value(values, distinct, y, declared)
    return indicator(values, fav, distinct), fav, declared
