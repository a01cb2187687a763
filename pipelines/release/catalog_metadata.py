"""What a data catalogue shows of a published release: table names and column descriptions.

Orchestrator-neutral (Dagster turns it into ``dagster/table_name`` and
``dagster/column_schema``; a lineage emitter can turn it into a schema facet):

* ``table_name(pipeline, output)`` is ``privfair.<pipeline>.<output>``: one stable name per
  published output, the same for every version and partition of the release (the version and
  partition are attributes of a materialisation, not of the table);
* ``columns(release)`` lists each published output's columns with their Arrow type, the role
  the release records for them (the input roles, carried in the output's Parquet field
  metadata: ``privfair.schemas.roles.read_roles``) and the guarantees of the release's contract that
  name them. A guarantee names a column when the column appears among its parameters: a
  list of columns (``quasi_identifiers``, ``columns``...), a mapping keyed by column
  (``decimals``) or a single column parameter. Guarantees about the whole table (a
  partition of the rows, group sizes) name no column.

Only the owner's manifest and the output files' schemas are read (no rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from privfair.schemas.roles import read_roles

__all__ = ["Column", "columns", "describe", "guarantees_naming", "table_name"]

_NOT_PARAMETERS = frozenset({"id", "kind"})


@dataclass(frozen=True)
class Column:
    """One published column: name, Arrow type, role (None: the release records none) and
    the guarantees naming it (``"<id> <kind>"``, contract order)."""

    name: str
    type: str
    role: str | None
    kind: str | None
    guarantees: tuple[str, ...]
    values: tuple[tuple[str, tuple], ...] = ()  # (favoured | unfavoured | positive, values)

    @property
    def description(self) -> str:
        """``privfair role: ROLE (KIND)[; favoured: V...]; guarantees: ...`` as a catalogue
        shows it, and as a lakehouse table's column doc or a database column comment keeps it
        (``privfair.io.connectors.roles_from_docs`` reads the role back from it).

        >>> Column("x", "int64", "quasi_identifier", "numeric", ("C4 k_anonymity",)).description
        'privfair role: quasi_identifier (numeric); guarantees: C4 k_anonymity'
        >>> Column("s", "int64", "protected", "binary", (), (("favoured", (1,)),)).description
        'privfair role: protected (binary); favoured: 1; guarantees: none name this column'
        >>> Column("z", "double", None, None, ()).description
        'privfair role: not recorded; guarantees: none name this column'
        """
        role = "privfair role: " + (
            f"{self.role}" + (f" ({self.kind})" if self.kind else "")
            if self.role is not None
            else "not recorded"
        )
        for key, vals in self.values:
            role += f"; {key}: {', '.join(str(v) for v in vals)}"
        named = ", ".join(self.guarantees) if self.guarantees else "none name this column"
        return f"{role}; guarantees: {named}"


def table_name(pipeline: str, output: str) -> str:
    """The catalogue name of ``output`` of ``pipeline``.

    >>> table_name("german_fair_mdav", "data")
    'privfair.german_fair_mdav.data'
    """
    return f"privfair.{pipeline}.{output}"


def _names(value: Any) -> set[str]:
    """The texts a guarantee parameter holds: itself, a list's items, a mapping's keys."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, list | tuple):
        return {v for v in value if isinstance(v, str)}
    if isinstance(value, dict):
        return {k for k in value if isinstance(k, str)}
    return set()


def guarantees_naming(contract: list[dict], column: str) -> tuple[str, ...]:
    """The guarantees of ``contract`` (manifest form) that name ``column`` in a parameter.

    >>> c = [{"id": "C3", "kind": "partition"},
    ...      {"id": "C4", "kind": "k_anonymity", "quasi_identifiers": ["x", "c"], "k": 5},
    ...      {"id": "C13", "kind": "mean_preservation", "decimals": {"x": 0}}]
    >>> guarantees_naming(c, "x")
    ('C4 k_anonymity', 'C13 mean_preservation')
    >>> guarantees_naming(c, "y")
    ()
    """
    out = []
    for g in contract:
        params = [v for k, v in g.items() if k not in _NOT_PARAMETERS]
        if any(column in _names(v) for v in params):
            label = f"{g.get('id', '')} {g.get('kind', '')}".strip()
            if label not in out:
                out.append(label)
    return tuple(out)


def describe(schema: pa.Schema, contract: list[dict]) -> list[Column]:
    """The columns of a published output's ``schema`` (roles in its field metadata) with the
    guarantees of ``contract`` (manifest form) naming each, in schema order."""
    roles = {r.name: r for r in read_roles(schema).columns}
    out = []
    for f in schema:
        r = roles.get(f.name)
        values = tuple(
            (key, tuple(getattr(r, key)))
            for key in ("favoured", "unfavoured", "positive")
            if r is not None and getattr(r, key, None)
        )
        out.append(
            Column(
                name=f.name,
                type=str(f.type),
                role=r.role.value if r is not None else None,
                kind=r.kind.value if r is not None and r.kind else None,
                guarantees=guarantees_naming(contract, f.name),
                values=values,
            )
        )
    return out


def columns(release: str | Path, manifest: dict) -> dict[str, list[Column]]:
    """Each published output of ``release`` (its folder; ``manifest`` its owner manifest) with
    its columns, in file order."""
    from privfair.release.layout import release_files

    outputs, _ = release_files(manifest)
    contract = manifest.get("contract") or []
    return {
        name: describe(pq.read_schema(Path(release) / file), contract)
        for name, file in outputs.items()
    }
