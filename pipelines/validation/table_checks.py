"""Guarantees checked on a table privfair did not produce: the user's own asset or task output.

A data engineer whose pipeline already writes a table (a dbt model, a Postgres table, a file an
upstream task wrote) asks the questions a release's validator answers, of that table: is it
k-anonymous over these columns, are the classes t-close, is the parity gap bounded, is this
column gone? ``check_table`` answers them with the validator's own checkers, run by Great
Expectations through the same generated expectations (``privfair.validation.expectations``),
so a verdict here is the verdict a release's validation would give on the same published rows.

What a table alone can show: the kinds that read the published rows only.

==================  ===================================================================
demand              what is checked on the table
==================  ===================================================================
``k_anonymity``     every class of rows equal on ``quasi_identifiers`` has >= ``k`` rows
``t_closeness``     within every class over ``quasi_identifiers`` (given in the demand),
                    the distribution of ``attribute`` is within total variation ``t`` of
                    its distribution over the whole table (``reference: output``)
``parity_gap``      |P(label positive | protected) - P(label positive | favoured)| <=
                    ``max``, with ``protected``/``label``/``favoured``/``positive`` given
                    (or taken from the table's privfair roles)
``columns_absent``  none of ``columns`` is in the table
``reidentification  the prosecutor (1 / smallest class) or marketer (classes / rows) risk
_risk``             over ``background`` is <= ``max`` (``privfair.components.core.risk``)
``l_diversity``     every class over ``background`` holds >= ``l`` distinct values of
                    ``column`` (``measure: entropy``: exp(entropy) >= ``l``)
==================  ===================================================================

``background``, ``column`` (and ``parity_gap``'s fields) left unset are taken from the table's
privfair roles when it has them: the quasi-identifiers, protected and ``known`` columns; the
one label.

Kinds that read a release's lineage or its input (``retention``, ``attributes_preserved``,
``partition``, a family's own kinds) cannot be decided on a table alone: they are refused
(``SpecError`` naming the demand) rather than passed.

What a result carries is public-safe: counts, the sizes of the offending classes and their
distances, never a value of the table (a class is known by its position, not its tuple).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from privfair.components.core.checks import CheckResult, hashable, published_frame
from privfair.io.files import as_table
from privfair.schemas import contracts as C
from privfair.schemas.errors import SpecError

__all__ = ["TABLE_KINDS", "check_table", "demands_of"]

#: The demanded kinds a table alone decides, and the frame each is checked on.
TABLE_KINDS: dict[str, str] = {
    "k_anonymity": "published",
    "t_closeness": "audit",
    "parity_gap": "published",
    "columns_absent": "published",
    "reidentification_risk": "published",
    "l_diversity": "published",
}

CLASS = "__class"


def demands_of(
    demands: Sequence[Mapping[str, Any] | C.Guarantee], table: pa.Table | None = None
) -> list[tuple[C.Guarantee, tuple[str, ...]]]:
    """Each demand parsed, with the quasi-identifiers that define its classes.

    A demand is a mapping as a spec's ``guarantees`` entry writes it (``{kind: k_anonymity,
    k: 5, quasi_identifiers: [age, zip]}``) or a guarantee model. ``t_closeness`` takes
    ``quasi_identifiers`` here too (a release names its classes by its sidecar; a table has
    none). ``SpecError`` (key ``demands.<i>``) for an unknown or undecidable kind, a field
    the kind does not have, a column the table lacks or a k-anonymity without QIs.

    >>> [(g.kind, qis) for g, qis in demands_of([{"kind": "k_anonymity", "k": 2, "quasi_identifiers": ["a"]}])]
    [('k_anonymity', ('a',))]
    >>> demands_of([{"kind": "retention", "min_share": 0.9}])
    Traceback (most recent call last):
    ...
    privfair.schemas.errors.SpecError: spec key 'demands.0.kind': retention is decided from a release's lineage, not from a table alone; a table takes: k_anonymity, t_closeness, parity_gap, columns_absent, reidentification_risk, l_diversity
    """
    out = []
    names = set(table.column_names) if table is not None else None
    for i, d in enumerate(demands):
        key = f"demands.{i}"
        raw = d.model_dump(mode="json") if isinstance(d, C.Guarantee) else dict(d)
        kind = raw.get("kind")
        if kind not in TABLE_KINDS:
            raise SpecError(
                f"{key}.kind",
                (
                    f"{kind} is decided from a release's lineage, not from a table alone"
                    if kind
                    else "missing"
                )
                + "; a table takes: "
                + ", ".join(TABLE_KINDS),
            )
        qis = tuple(raw.get("quasi_identifiers") or ())
        if kind == "t_closeness":
            raw.pop("quasi_identifiers", None)
            if raw.get("reference", "output") != "output":
                raise SpecError(
                    f"{key}.reference",
                    "a table alone has no input to compare with: use 'output'",
                )
            raw["within"] = "class"
        try:
            g = C.parse_guarantee(raw)
        except Exception as e:  # pydantic's message names the field
            raise SpecError(key, _first_line(e)) from None
        if kind in ("k_anonymity", "t_closeness") and not qis:
            raise SpecError(
                f"{key}.quasi_identifiers", f"{kind} on a table needs the columns of its classes"
            )
        if table is not None and kind == "parity_gap":
            g = _completed(g, table, key)
        if kind in ("reidentification_risk", "l_diversity"):
            g = _with_background(g, table, key)
        if names is not None and kind != "columns_absent":
            cols = [*qis, *_named(g)]
            missing = [c for c in dict.fromkeys(cols) if c and c not in names]
            if missing:
                raise SpecError(key, f"columns not in the table: {missing}")
        out.append((g, qis))
    return out


def check_table(data: Any, demands: Sequence[Mapping[str, Any] | C.Guarantee]) -> list[CheckResult]:
    """Check ``demands`` on the table ``data`` (Arrow, pandas or polars), one result each, in
    order, through Great Expectations.

    Each result's ``observed``/``expected`` are the checker's (the smallest class size and
    ``k``; the largest distance and ``t``; the gap and ``max``), ``n_offending`` the number of
    offending classes, ``offending`` their sizes (``class_size``) and, for t-closeness, their
    distances, never a value of the table.

    Raises
    ------
    SpecError
        A demand this function cannot decide or that does not fit the table (``demands_of``).
    CheckerError
        A checker raised: no verdict.

    Examples
    --------
    >>> import pyarrow as pa
    >>> t = pa.table({"zip": ["a", "a", "a", "b"], "age": [30, 30, 30, 40]})
    >>> [r] = check_table(t, [{"kind": "k_anonymity", "k": 2, "quasi_identifiers": ["zip", "age"]}])
    >>> r.passed, r.observed, r.n_offending, r.offending
    (False, 1, 1, [{'class_size': 1}])
    """
    from privfair.components.core.imports import collector_paused
    from privfair.validation.gx_import import import_great_expectations

    table = as_table(data)
    parsed = demands_of(demands, table)
    if not parsed:
        return []
    gx = import_great_expectations()
    with collector_paused():
        from privfair.validation import expectations as E

    frames: dict[str, pd.DataFrame] = {}
    batches: list[tuple[str, C.Guarantee]] = []
    published = published_frame(table)
    for i, (g, qis) in enumerate(parsed):
        if TABLE_KINDS[g.kind] == "published":
            name = "published"
            frames.setdefault(name, published)
        else:
            name = f"classes_{i}"
            frames[name] = _classes_frame(published, qis, g.attribute)
        batches.append((name, g))
    ctx = E.new_context()
    try:
        source = ctx.data_sources.add_pandas("privfair_table")
        results: list[CheckResult | None] = [None] * len(batches)
        for name in dict.fromkeys(b for b, _ in batches):
            suite = gx.ExpectationSuite(name=f"privfair_table_{name}")
            for i, (b, g) in enumerate(batches):
                if b == name:
                    suite.add_expectation(E.expectation_for(g, i))
            definition = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe(
                "whole"
            )
            vd = ctx.validation_definitions.add(
                gx.ValidationDefinition(
                    name=f"privfair_table_{name}", data=definition, suite=ctx.suites.add(suite)
                )
            )
            run = vd.run(batch_parameters={"dataframe": frames[name]}, result_format="BASIC")
            for evr in run.results:
                i = E.contract_index(evr)
                results[i] = E.to_check_result(evr, batches[i][1])
    finally:
        E.release_context()
    return [_sized(r, published, qis) for r, (_, qis) in zip(results, parsed, strict=True)]


# --- helpers ---------------------------------------------------------------------------------
def _first_line(e: Exception) -> str:
    errs = getattr(e, "errors", None)
    if callable(errs):
        first = errs()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"{where}: {first.get('msg')}" if where else str(first.get("msg"))
    return str(e).splitlines()[0]


def _named(g: C.Guarantee) -> list[str]:
    """The columns a guarantee's fields name (``Guarantee.column_fields``)."""
    out: list[str] = []
    for f in type(g).column_fields:
        v = getattr(g, f, None)
        out += [v] if isinstance(v, str) else list(v or ())
    return out


def _completed(g: C.ParityGap, table: pa.Table, key: str) -> C.Guarantee:
    """A parity demand with its unset fields from the table's privfair roles, if it has them."""
    if g.protected and g.label and (g.favoured or g.unfavoured) and g.positive:
        return g
    try:
        return g.completed(table)
    except Exception as e:
        raise SpecError(
            key,
            "give protected, label, favoured (or unfavoured) and positive: the table has no "
            f"privfair roles to take them from ({_first_line(e)})",
        ) from None


def _with_background(g: C.Guarantee, table: pa.Table | None, key: str) -> C.Guarantee:
    """A risk or l-diversity demand with its unset background (and column) from the table's
    privfair roles; without a table only parsed, without roles refused naming the field."""
    unset = not g.background or (isinstance(g, C.LDiversity) and not g.column)
    if not unset or table is None:
        return g
    try:
        return g.completed(table)
    except Exception as e:
        field = "background" if not g.background else "column"
        raise SpecError(
            f"{key}.{field}",
            f"give '{field}': the table has no privfair roles to take it from ({_first_line(e)})",
        ) from None


def _classes_frame(published: pd.DataFrame, qis: Sequence[str], attribute: str) -> pd.DataFrame:
    """The evidence frame of a t-closeness check on a table: each row's class (the position of
    its QI tuple), its value of ``attribute``, every row published."""
    return pd.DataFrame(
        {
            CLASS: _class_codes(published, qis),
            f"__out_col__{attribute}": published[attribute].to_numpy(),
            "__retained": np.ones(len(published), dtype=bool),
        }
    )


def _class_codes(published: pd.DataFrame, qis: Sequence[str]) -> np.ndarray:
    """Each row's class: the position of its QI tuple among the table's (nulls equal nulls)."""
    frame = hashable(published, list(qis))
    return frame.groupby(list(qis), sort=False, dropna=False).ngroup().to_numpy(np.int64)


def _sized(r: CheckResult, published: pd.DataFrame, qis: Sequence[str]) -> CheckResult:
    """``r`` with public-safe offenders only: the sizes of the offending classes (and their
    distances), never a value. A t-closeness result names its classes by position, which is
    kept only to pair each distance with its class's size."""
    if not r.offending:
        return r
    if r.kind == "t_closeness" and qis:
        sizes = np.bincount(_class_codes(published, qis))
        rows = []
        for o in r.offending:
            pos = o.get(CLASS, o.get("index"))
            rows.append(
                {
                    "class_size": int(sizes[int(pos)]) if pos is not None else None,
                    "t": o.get("t"),
                }
            )
        r.offending = rows
    else:
        r.offending = [
            {k: v for k, v in o.items() if k in ("class_size", "t", "distinct", "entropy_l")}
            for o in r.offending
        ]
        r.offending = [o for o in r.offending if o]
    return r
