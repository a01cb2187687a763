"""Input rules every family shares, each breach an ``InputError`` naming the column and rule.

A family adds its own rules (binary protected attribute, at least one quasi-identifier, rows
>= k...) in its own package, with the same error type.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privfair.schemas.errors import InputError
from privfair.schemas.roles import Role, TableRoles, read_roles

__all__ = [
    "META_DROPPED",
    "OWNER_ONLY_METADATA",
    "without_owner_metadata",
    "dropped_columns",
    "absent_column",
    "null_options",
    "RERUN_ROWS",
    "uniform_sample",
    "table_roles",
    "require_count",
    "require_rows",
    "require_role",
    "absent_value",
    "member",
    "group_indicator",
    "outcome_indicator",
]


#: schema metadata of an ingested table: ``{column: the spec key that dropped it}`` for every
#: column ingest removed (``dataset.exclude``, ``dataset.unlabelled: drop``...), so that a
#: parameter naming one is refused saying why it is gone (``absent_column``)
META_DROPPED = b"privfair.dropped_columns"


#: schema metadata keys ingest writes for the owner's messages only: never in an output
OWNER_ONLY_METADATA = (META_DROPPED,)


def without_owner_metadata(table: pa.Table) -> pa.Table:
    """``table`` without what only the owner may read of its input: ``OWNER_ONLY_METADATA``
    (the input's dropped column names would tell a recipient what else the input held), and
    a column's ``domain`` read off the input (an ordered Categorical's categories,
    ``privfair.domain_from: input``) cut to the values the column publishes (a level only an
    unpublished person held would otherwise be named).

    >>> t = pa.table({"x": [1]}).replace_schema_metadata({META_DROPPED: b"{}", b"k": b"v"})
    >>> without_owner_metadata(t).schema.metadata
    {b'k': b'v'}
    """
    import json

    from privfair.schemas.roles import DOMAIN_FROM_INPUT, META_DOMAIN, META_DOMAIN_FROM

    meta = table.schema.metadata
    if meta and any(k in meta for k in OWNER_ONLY_METADATA):
        kept = {k: v for k, v in meta.items() if k not in OWNER_ONLY_METADATA}
        table = table.replace_schema_metadata(kept or None)
    for i, f in enumerate(table.schema):
        fm = f.metadata or {}
        if fm.get(META_DOMAIN_FROM) != DOMAIN_FROM_INPUT.encode() or META_DOMAIN not in fm:
            continue
        shown = _published_values(table.column(i))
        domain = [v for v in json.loads(fm[META_DOMAIN]) if v in shown]
        table = table.set_column(
            i, f.with_metadata({**fm, META_DOMAIN: json.dumps(domain).encode()}), table.column(i)
        )
    return table


def _published_values(col: pa.ChunkedArray) -> set:
    """The values a published column shows: its own, a generalised label's ends
    (``struct<lo, hi>``) or elements (``list<value>``)."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_struct(col.type):
        parts = [col.field(j) for j in range(col.type.num_fields)]
    elif pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        parts = [pc.list_flatten(col)]
    else:
        parts = [col]
    return {v for p in parts for v in pc.unique(p.drop_null()).to_pylist()}


def dropped_columns(table: pa.Table) -> dict[str, str]:
    """``{column: why}`` of the columns ingest dropped from ``table`` (``META_DROPPED``)."""
    import json

    raw = (table.schema.metadata or {}).get(META_DROPPED)
    return json.loads(raw) if raw else {}


def absent_column(key: str, column: str, table: pa.Table, what: str) -> InputError:
    """The error for a parameter (``key``, e.g. ``bins.age``) declaring ``what`` for a column
    the table lacks: when ingest dropped it, which policy did (``dropped_columns``), else the
    columns it has.

    >>> t = pa.table({"x": [1]}).replace_schema_metadata(
    ...     {META_DROPPED: b'{"age": "dataset.unlabelled: drop (it has no role)"}'})
    >>> str(absent_column("bins.age", "age", t, "bins"))  # doctest: +NORMALIZE_WHITESPACE
    "column 'bins.age': bins are declared for column 'age', which the spec dropped before the
    algorithm: dataset.unlabelled: drop (it has no role) (give it a role under dataset.columns
    to keep it, or remove bins.age)"
    """
    why = dropped_columns(table).get(column)
    if why is not None:
        return InputError(
            key,
            f"{what} are declared for column '{column}', which the spec dropped before the "
            f"algorithm: {why}",
            f"{_keep_hint(why)}, or remove {key}",
        )
    return InputError(
        key,
        f"{what} are declared for a column the table does not have",
        f"columns: {', '.join(table.column_names)}",
    )


def _keep_hint(why: str) -> str:
    if why.startswith("dataset.unlabelled"):
        return "give it a role under dataset.columns to keep it"
    if why.startswith("dataset.exclude"):
        return "take it out of dataset.exclude to keep it"
    if why.startswith("dataset.quasi_identifiers"):
        return "list it in dataset.quasi_identifiers to keep it"
    return "a private column is never released"


def null_options(column: str) -> str:
    """What a spec can say about a column's nulls, for an error refusing them: the key
    ``dataset.columns.<column>.nulls`` (or ``dataset.nulls`` for every column) and its
    options.

    >>> null_options("age").startswith("set dataset.columns.age.nulls (or dataset.nulls")
    True
    """
    return (
        f"set dataset.columns.{column}.nulls (or dataset.nulls for every column): drop (the "
        "rows are not released), {impute: median | mean | mode} or {impute: value, value: V}, "
        "refuse (stop here), or keep (the default: the algorithm decides, and this one "
        "refuses them)"
    )


#: the most input rows a report's rerun of an algorithm reads (the cost of protection, the
#: generalisation family's utility against t): a larger input is measured on
#: ``uniform_sample(table, RERUN_ROWS)``, one sample for every rerun of a release
RERUN_ROWS = 100_000


def uniform_sample(
    table: pa.Table, rows: int, seed: int = 0, draw: bool = True
) -> tuple[pa.Table, dict | None]:
    """``table`` itself if it has at most ``rows`` rows, else a uniform sample of ``rows`` of its
    rows drawn with ``seed`` (in input order), with ``{"rows", "of", "seed"}`` saying so: what a
    report measures by rerunning an algorithm is measured on it at scale. ``draw=False`` gives
    ``table`` and the record alone, reading no row (a measurement known to read none, of a
    table whose rows may stay on a cluster).

    >>> t = pa.table({"x": list(range(10))})
    >>> uniform_sample(t, 4)[1]
    {'rows': 4, 'of': 10, 'seed': 0}
    >>> uniform_sample(t, 20)[1] is None
    True
    >>> uniform_sample(t, 4, draw=False)[0] is t
    True
    """
    if table.num_rows <= rows:
        return table, None
    if not draw:
        return table, {"rows": rows, "of": table.num_rows, "seed": seed}
    import numpy as np

    picked = np.sort(np.random.default_rng(seed).choice(table.num_rows, rows, replace=False))
    return table.take(pa.array(picked)), {"rows": rows, "of": table.num_rows, "seed": seed}


def absent_value(column: str, field: str, value, values: list) -> InputError:
    """The error for a declared value (``favoured``, ``positive``...) the column does not hold:
    lists the column's values, and says to quote a value YAML read as a boolean."""
    shown = sorted(values, key=lambda v: (str(type(v)), str(v)))[:10]
    more = f" and {len(values) - 10} more" if len(values) > 10 else ""
    hint = ""
    if isinstance(value, bool):
        # YAML 1.1 reads unquoted yes/no, true/false and on/off as booleans
        words = {"yes", "true", "on"} if value else {"no", "false", "off"}
        match = next((v for v in shown if str(v).lower() in words), "yes" if value else "no")
        hint = (
            f"; YAML read an unquoted yes/no/true/false/on/off as the boolean {value}: quote the "
            f'value, e.g. {field}: "{match}"'
        )
    return InputError(
        column,
        f"the declared {field} value {value!r} does not occur",
        f"values: {shown}{more}{hint}",
    )


def table_roles(
    table: pa.Table, roles: TableRoles | None = None, empty: bool = False
) -> TableRoles:
    """Roles from the argument or from the table's field metadata; every column must have one,
    names must be unique and the table must have rows (``empty``: may have none, for a family
    whose release does not depend on a row existing, a DP synthesis)."""
    names = table.column_names
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise InputError(dup[0], "column names must be unique", f"duplicated: {', '.join(dup)}")
    if table.num_rows == 0 and not empty:
        raise InputError(None, "table is empty", "a release needs at least one row")
    roles = roles if roles is not None else read_roles(table)
    for c in roles:
        if c.name not in names:
            raise InputError(c.name, "column named in the roles is not in the table")
    for n in names:
        if n not in roles:
            raise InputError(n, "every column needs a role (role 'ignored' for unlabelled ones)")
    return roles


def require_role(roles: TableRoles, role: Role, count: int | None = 1, at_least: int = 1):
    """The columns with ``role``: exactly ``count`` of them, or at least ``at_least`` when
    ``count`` is None; otherwise an error naming the role and the columns found."""
    found = roles.with_role(role)
    ok = len(found) == count if count is not None else len(found) >= at_least
    if not ok:
        names = ", ".join(c.name for c in found) or "none"
        want = f"exactly {count}" if count is not None else f"at least {at_least}"
        raise InputError(None, f"{want} {role.value} column(s) required", f"found: {names}")
    return found


def require_rows(table: pa.Table, k: int) -> None:
    """``InputError`` unless ``table`` has at least ``k`` rows (``require_count``)."""
    require_count(table.num_rows, k)


def require_count(rows: int, k: int) -> None:
    """``InputError`` unless a table of ``rows`` rows can hold a group of ``k``."""
    if rows < k:
        raise InputError(
            None,
            f"fewer rows than k: a group needs at least k = {k} rows",
            f"{rows} rows",
        )


def member(column: pa.ChunkedArray | pa.Array, values) -> np.ndarray:
    """Per row, whether its value is one of ``values``, computed in Arrow (no Python object per
    row). A value the column's type cannot hold (another type, e.g. a tampered published
    column) or would round (1.5 in an integer column, which Arrow's conversion truncates to 1)
    is in no row; nulls are in none.

    >>> member(pa.chunked_array([["a", "b", "a"]]), {"a"}).tolist()
    [True, False, True]
    >>> member(pa.chunked_array([[1, 2, 3]]), [1.5, 3]).tolist()
    [False, False, True]
    """
    wanted = list(values)
    try:
        held = pa.array(wanted, type=column.type)
        if pa.types.is_integer(held.type):  # Arrow truncates a float it converts to an integer
            held = pa.array(
                [v for v, w in zip(wanted, held.to_pylist(), strict=True) if w == v],
                type=column.type,
            )
        found = pc.is_in(column, value_set=held)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
        return np.zeros(len(column), dtype=bool)
    return found.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)


def group_indicator(column: pa.ChunkedArray, role) -> np.ndarray:
    """Per row, whether it is in the protected group of a protected attribute: one of its
    ``unfavoured`` values, or a (non-null) value outside ``favoured``; with neither declared,
    the value 0.

    >>> from privfair.schemas.roles import ColumnRole, Role
    >>> r = ColumnRole("race", Role.PROTECTED, favoured="White")
    >>> group_indicator(pa.chunked_array([["White", "Black", None]]), r).tolist()
    [False, True, False]
    """
    if role.unfavoured is not None:
        return member(column, role.unfavoured)
    if role.favoured is not None:
        return ~member(column, role.favoured) & ~column.is_null().to_numpy(zero_copy_only=False)
    return member(column, [0])


def outcome_indicator(column: pa.ChunkedArray, role) -> np.ndarray:
    """Per row, whether a label holds one of its ``positive`` values (the value 1 when none
    are declared)."""
    return member(column, role.positive if role.positive is not None else [1])
