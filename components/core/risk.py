"""Re-identification risk and l-diversity of a published table, as an attacker measures them.

The attacker knows some columns of a person (their *background*): by default the published
quasi-identifiers, the protected attribute (published unchanged, and a textbook
quasi-identifier) and every column the spec marks ``known`` (``background``). The rows sharing
one published tuple of the background are an *equivalence class*; a record in a class of f
rows is re-identified with probability 1/f by an attacker who knows its person is in the
table. With n published rows and c classes (ARX's definitions, El Emam's models):

- prosecutor risk of a record: 1/f; ``highest`` = 1/min f, ``average`` = c/n (the mean over
  records), ``records_at_highest``: the share of records whose risk is the highest,
  ``records_above``: the share whose risk exceeds ``threshold``;
- marketer risk: c/n, the expected share of records re-identified by an attacker who links
  every record (without a population table, the sample is the population);
- ``uniques``: the share of records alone in their class (sample uniques);
- journalist risk, with a ``population`` table written in the published form (a superset of
  the published people): a class matched by F population rows gives 1/F; ``highest`` = 1/min F
  (``k_map`` = min F, the table is k-map for that k), ``average`` = (1/n) sum f/F.

k-anonymity counts the rows per published quasi-identifier tuple; the risk here counts them
per tuple of the attacker's background, which also holds the protected attribute: a
10-anonymous table can have classes of 3.

l-diversity of a column (the label, a sensitive column) over the same classes: ``distinct`` =
the fewest distinct values in a class, ``entropy`` = exp(min over classes of the Shannon
entropy, natural log, of its values): a class whose column takes one value teaches the
attacker that value (l = 1). The column itself is left out of the background it is measured
over.

The demandable kinds ``reidentification_risk`` and ``l_diversity``
(``privfair.schemas.contracts.ReidentificationRisk`` / ``LDiversity``) are checked with these
functions (``privfair.components.core.checks``) on the published table, over the background
the contract was completed with from the input's roles.

Every number is a function of the published table and the declared background only (the public
report draws them). Computed by ``class_ids`` (``privfair.components.core.classes``); the tests
cross-check them against pycanon on the shipped releases.

>>> import pyarrow as pa
>>> t = pa.table({"age": [30, 30, 30, 40, 40], "sex": [0, 0, 1, 1, 1], "y": [1, 0, 1, 1, 1]})
>>> r = reidentification_risk(t, ["age", "sex"])
>>> r["prosecutor"]["highest"], r["prosecutor"]["records_at_highest"], r["marketer"], r["uniques"]
(1.0, 0.2, 0.6, 0.2)
>>> l_diversity(t, ["age", "sex"], "y")
{'distinct': 1, 'entropy': 1.0}
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from privfair.components.core.classes import class_ids, published_frame
from privfair.schemas.errors import InputError
from privfair.schemas.roles import Role, read_roles

__all__ = [
    "DEFAULT_THRESHOLD",
    "background",
    "diversity_columns",
    "reidentification_risk",
    "l_diversity",
    "class_diversity",
    "risk_metrics",
]

#: The prosecutor risk above which a record counts as at risk (``records_above``): a class of
#: fewer than 5 rows.
DEFAULT_THRESHOLD = 0.2


def background(table: pa.Table | pa.Schema) -> list[str]:
    """The attacker's default background of ``table`` (its field roles), in column order: the
    quasi-identifiers, the protected attributes and every column marked ``known``.

    >>> from privfair.schemas.roles import ColumnRole, Kind, TableRoles, attach_roles
    >>> t = pa.table({"age": [1], "sex": [0], "y": [1], "town": ["a"]})
    >>> t = attach_roles(t, TableRoles.of([
    ...     ColumnRole("age", Role.QUASI_IDENTIFIER), ColumnRole("sex", Role.PROTECTED),
    ...     ColumnRole("y", Role.LABEL), ColumnRole("town", Role.IGNORED, known=True)]))
    >>> background(t)
    ['age', 'sex', 'town']
    """
    return read_roles(table).background


def diversity_columns(table: pa.Table | pa.Schema) -> list[str]:
    """The columns whose l-diversity a release reports: its labels and sensitive columns that
    are not in the attacker's background (a known column teaches nothing new)."""
    known = set(background(table))
    wanted = {Role.LABEL, Role.SENSITIVE}
    return [c.name for c in read_roles(table) if c.role in wanted and c.name not in known]


Table = pa.Table | pd.DataFrame


def _names(table: Table) -> list[str]:
    return list(table.columns) if isinstance(table, pd.DataFrame) else table.column_names


def _rows(table: Table) -> int:
    return len(table) if isinstance(table, pd.DataFrame) else table.num_rows


def _frame(table: Table, columns: list[str]) -> pd.DataFrame:
    if isinstance(table, pd.DataFrame):
        return table[columns]
    return published_frame(table.select(columns))


def _columns(table: Table, columns: Sequence[str], what: str) -> list[str]:
    columns = list(dict.fromkeys(columns))
    missing = [c for c in columns if c not in _names(table)]
    if missing:
        raise InputError(
            missing[0], f"{what} names a column the table does not have", f"missing: {missing}"
        )
    return columns


def reidentification_risk(
    table: Table,
    background_columns: Sequence[str] | None = None,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    population: Table | None = None,
) -> dict:
    """The re-identification risk of ``table``'s records for an attacker who knows
    ``background_columns`` (default: ``background(table)``, from its roles): the prosecutor
    risk (``highest``, ``average``, ``records_at_highest``, ``records_above`` ``threshold``),
    the marketer risk, the share of sample ``uniques``, and ``class_sizes`` (``{size: number
    of classes}``). With ``population`` (the population's rows written in the published form,
    holding every background column), also the journalist risk and ``k_map``. The module
    docstring gives the formulas; an empty table has no risk (None).

    >>> t = pa.table({"qi": ["a"] * 3 + ["b"] * 2, "s": [0, 0, 0, 1, 1]})
    >>> r = reidentification_risk(t, ["qi", "s"], population=pa.table({"qi": ["a"] * 6 + ["b"] * 4, "s": [0] * 6 + [1] * 4}))
    >>> r["prosecutor"]["highest"], r["journalist"]["highest"], r["k_map"], r["class_sizes"]
    (0.5, 0.25, 4, {'2': 1, '3': 1})
    """
    if not 0 <= threshold <= 1:
        raise InputError("threshold", "must lie in [0, 1]", f"got {threshold}")
    if background_columns is None:
        if not isinstance(table, pa.Table):
            raise InputError("background", "name the attacker's background of a pandas frame")
        background_columns = background(table)
    cols = _columns(table, background_columns, "the background")
    n = _rows(table)
    out: dict = {"background": cols, "threshold": threshold, "rows": n}
    if not cols:
        raise InputError("background", "the attacker's background names no column")
    if n == 0:
        empty = {"highest": None, "average": None, "records_at_highest": None}
        return out | {
            "classes": 0,
            "prosecutor": empty | {"records_above": None},
            "marketer": None,
            "uniques": None,
            "class_sizes": {},
        }
    ids = class_ids(table, cols)
    sizes = np.bincount(ids)
    per_row = sizes[ids]  # each record's class size
    smallest = int(sizes.min())
    sizes_seen, counts = np.unique(sizes, return_counts=True)
    out |= {
        "classes": len(sizes),
        "prosecutor": {
            "highest": 1.0 / smallest,
            "average": len(sizes) / n,
            "records_at_highest": float((per_row == smallest).mean()),
            "records_above": float((1.0 / per_row > threshold + 1e-12).mean()),
        },
        "marketer": len(sizes) / n,
        "uniques": float((per_row == 1).mean()),
        "class_sizes": {str(int(s)): int(c) for s, c in zip(sizes_seen, counts, strict=True)},
    }
    if population is not None:
        out |= _journalist(table, population, cols)
    return out


def _journalist(table: Table, population: Table, cols: list) -> dict:
    """The journalist risk of ``table``'s records against ``population``: a record's
    population class size F is the number of population rows with its background tuple."""
    _columns(population, cols, "the population")
    n = _rows(table)
    pop = _frame(population, cols)
    both = pd.concat([_frame(table, cols), pop], ignore_index=True)
    joint = class_ids(both, cols)
    sample, population = joint[:n], joint[n:]
    big = np.bincount(population, minlength=joint.max() + 1)
    per_row = big[sample]  # each published record's population class size
    if (per_row == 0).any():
        missing = int((per_row == 0).sum())
        raise InputError(
            "population",
            "must hold every published person: a population table in the published form",
            f"{missing} published rows match no population row",
        )
    smallest = int(per_row.min())
    return {
        "journalist": {
            "highest": 1.0 / smallest,
            "average": float((1.0 / per_row).mean()),
            "records_at_highest": float((per_row == smallest).mean()),
        },
        "k_map": smallest,
        "population_rows": len(pop),
    }


def l_diversity(table: Table, background_columns: Sequence[str] | None, column: str) -> dict:
    """The distinct and entropy l-diversity of ``column`` over the equivalence classes of
    ``background_columns`` (default: ``background(table)``; ``column`` itself left out); nulls
    are a value of their own. An empty table has no classes (None).

    >>> t = pa.table({"qi": [1, 1, 1, 1, 2, 2], "y": ["a", "a", "b", "b", "a", "b"]})
    >>> l_diversity(t, ["qi"], "y")
    {'distinct': 2, 'entropy': 2.0}
    """
    if background_columns is None:
        if not isinstance(table, pa.Table):
            raise InputError("background", "name the attacker's background of a pandas frame")
        background_columns = background(table)
    (col,) = _columns(table, [column], "l-diversity")
    cols = [c for c in _columns(table, background_columns, "the background") if c != col]
    if _rows(table) == 0:
        return {"distinct": None, "entropy": None}
    _, distinct, entropy = class_diversity(table, cols, col)
    return {"distinct": int(distinct.min()), "entropy": float(entropy.min())}


def class_diversity(
    frame: Table, columns: Sequence[str], column: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per equivalence class of ``frame`` over ``columns`` (all rows one class when there is
    none): its size, the number of distinct values of ``column`` in it and exp of their
    Shannon entropy (natural log), in order of first appearance.

    >>> f = pd.DataFrame({"qi": [1, 1, 2, 2, 2], "y": ["a", "b", "a", "a", "a"]})
    >>> class_diversity(f, ["qi"], "y")
    (array([2, 3]), array([2, 1]), array([2., 1.]))
    """
    ids = class_ids(frame, list(columns)) if columns else np.zeros(_rows(frame), dtype=np.int64)
    values = class_ids(frame, [column])
    nv = int(values.max()) + 1
    pairs = np.bincount(ids * nv + values, minlength=(int(ids.max()) + 1) * nv)
    counts = pairs.reshape(-1, nv).astype(np.float64)
    totals = counts.sum(axis=1)
    shares = counts / totals[:, None]
    logs = np.log(shares, out=np.zeros_like(shares), where=shares > 0)
    entropy = -(shares * logs).sum(axis=1)
    return totals.astype(np.int64), (counts > 0).sum(axis=1), np.exp(entropy)


def risk_metrics(table: pa.Table, threshold: float = DEFAULT_THRESHOLD) -> dict:
    """What a row-level release reports of its published ``table`` (its field roles give the
    background): ``reidentification_risk`` over ``background(table)`` and the ``l_diversity``
    of each of ``diversity_columns(table)`` over it. Empty when the table declares no
    background column (no roles)."""
    cols = background(table)
    if not cols:
        return {}
    return {
        "reidentification_risk": reidentification_risk(table, cols, threshold=threshold),
        "l_diversity": {c: l_diversity(table, cols, c) for c in diversity_columns(table)},
    }
