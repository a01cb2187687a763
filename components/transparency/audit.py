"""Evidence for the transparency checkers, rebuilt from the input and the published tables.

The cells are rebuilt from the input table and the params (records aggregated again, the
model retrained with its seed: deterministic), never read from the internal audit tables or
from the run's metrics. Frames:

- ``cells``: one row per rebuilt cell: ``__group``, ``__p`` (prior), ``__population``,
  ``__d1`` (true rule), ``__announced`` (D~_1 from the published ``decision_rules``, NaN when
  the cell is missing there), ``__announced_d0``, ``__declared`` (the published beta* of the
  cell's group, NaN if absent), ``__declared_global``, ``__unique`` (the key occurs once);
- ``fairness``: the published ``fairness`` rows with ``__value`` (recomputed from the published
  rules) and ``__true`` (recomputed from the rebuilt true rule), ``__true_rate_1/2``, and one row
  per recomputed row the table lacks (``__published`` False); ``__expected_rows`` the number of
  rows the measures give. Every column is there whatever the published table holds (NaN where
  it cannot be recomputed), so the checker gives a verdict on any table;
- ``public``: one row per (``table``, ``column``) of the public outputs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from privfair.components.transparency.cells import build_cells
from privfair.components.transparency.fairness import default_measures, measure_rows

__all__ = ["evidence"]

_KEY = [
    "measure", "protected_attribute", "group_1", "group_2", "condition_attribute",
    "condition_value", "pr_threshold_p",
]  # fmt: skip
"""What tells a published measure row apart (two CSPs may share a stratum's value, two PRs
their groups)."""


def _keys(table: pa.Table, names: list[str]) -> pd.Series:
    cols = [pd.Series(table.column(n).to_pylist(), dtype=object).astype(str) for n in names]
    return pd.Series(list(zip(*cols, strict=True)), dtype=object) if cols else pd.Series([])


def evidence(input_table: pa.Table, outputs: dict[str, pa.Table], sidecars, params) -> dict:
    cells = build_cells(input_table, params)
    names = cells.public + cells.private
    mine = _keys(cells.keys, names)
    rules = outputs.get("decision_rules", pa.table({}))
    frame = pd.DataFrame(
        {n: cells.keys.column(n).to_pylist() for n in names}
        | {
            "__group": cells.group,
            "__population": cells.population,
            "__p": cells.p,
            "__d1": cells.d1,
        }
    )
    announced = np.full(len(frame), np.nan)
    announced_d0 = np.full(len(frame), np.nan)
    unique = np.zeros(len(frame), dtype=bool)
    if all(n in rules.column_names for n in (*names, "announced_d1", "announced_d0")):
        theirs = _keys(rules, names)
        counts = theirs.value_counts()
        pos = pd.Index(theirs).get_indexer(mine) if theirs.is_unique else None
        if pos is None:
            first = {k: i for i, k in reversed(list(enumerate(theirs)))}
            pos = np.array([first.get(k, -1) for k in mine])
        found = pos >= 0
        a1 = np.asarray(rules.column("announced_d1").to_pylist(), dtype=float)
        a0 = np.asarray(rules.column("announced_d0").to_pylist(), dtype=float)
        announced[found] = a1[pos[found]]
        announced_d0[found] = a0[pos[found]]
        unique = np.array([counts.get(k, 0) == 1 for k in mine])
    frame["__announced"] = announced
    frame["__announced_d0"] = announced_d0
    frame["__unique"] = unique

    summary = outputs.get("privacy_summary", pa.table({}))
    declared = np.full(len(frame), np.nan)
    declared_global = np.nan
    if {"scope", "max_adversary_confidence"} <= set(summary.column_names):
        scope = summary.column("scope").to_pylist()
        value = np.asarray(summary.column("max_adversary_confidence").to_pylist(), dtype=float)
        glob = [v for s, v in zip(scope, value, strict=True) if s == "global"]
        declared_global = glob[0] if len(glob) == 1 else np.nan
        if all(n in summary.column_names for n in cells.public):
            groups = _keys(summary, cells.public)
            per = {k: v for s, k, v in zip(scope, groups, value, strict=True) if s == "group"}
            mine_g = _keys(cells.keys, cells.public)
            declared = np.array([per.get(k, np.nan) for k in mine_g], dtype=float)
    frame["__declared"] = declared
    frame["__declared_global"] = declared_global

    fairness_pub = outputs.get("fairness", pa.table({})).to_pandas()
    measures = (
        [m.model_dump() for m in params.fairness]
        if params.fairness
        else default_measures(
            {n: np.asarray(frame[n].astype(str)) for n in names},
            cells.population, cells.public, cells.private,
        )
    )  # fmt: skip
    recomputed = pd.DataFrame(
        measure_rows(
            measures,
            {n: np.asarray(frame[n].astype(str)) for n in names},
            cells.population,
            cells.d1,
            np.nan_to_num(announced, nan=0.0),
            params.fidelity,
            params.level,
        )
    )
    # every column the checker reads is there, whatever the published table holds: NaN where
    # a published row has no recomputed row, and a row (``__published`` False, its published
    # value NaN) for every recomputed row the table lacks, so a dropped row fails the check
    recomputed_cols = {
        "__value": "value",
        "__true": "true_value",
        "__true_rate_1": "true_rate_group_1",
        "__true_rate_2": "true_rate_group_2",
    }

    def key(df: pd.DataFrame) -> pd.Series:
        cell = lambda v: "" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)  # noqa: E731
        return df[_KEY].map(cell).agg("|".join, axis=1)

    fairness_pub = fairness_pub.assign(**dict.fromkeys(recomputed_cols, np.nan), __published=True)
    if not recomputed.empty:
        rec = recomputed.assign(__k=key(recomputed)).set_index("__k")
        rec = rec[~rec.index.duplicated()]  # a measure listed twice: the same row twice
        keyed = not fairness_pub.empty and set(_KEY) <= set(fairness_pub.columns)
        k = key(fairness_pub) if keyed else pd.Series([], dtype=object)
        for mine, theirs in recomputed_cols.items():
            fairness_pub[mine] = k.map(rec[theirs]).astype(float) if keyed else np.nan
        absent = rec[~rec.index.isin(set(k))]
        if len(absent):
            extra = (
                absent[_KEY]
                .reset_index(drop=True)
                .assign(
                    **{
                        mine: absent[theirs].to_numpy(float)
                        for mine, theirs in recomputed_cols.items()
                    },
                    __published=False,
                )
            )
            fairness_pub = pd.concat([fairness_pub, extra], ignore_index=True)
    fairness_pub["__expected_rows"] = len(recomputed)
    public = pd.DataFrame(
        [{"table": name, "column": c} for name, t in outputs.items() for c in t.column_names]
    )
    return {"cells": frame, "fairness": fairness_pub, "public": public}
