"""A daily-partitioned input and its spec, for the tests of recurring releases.

``write_days(folder, days)`` writes ``submissions.csv``: ``rows`` toy rows (x, c, PA, y:
``_shared.TOY_COLUMNS``) per day, a ``submitted`` date column, each day's rows drawn from a
seed of its own, so that appending a day leaves the earlier days' rows as they were.
``spec_text(...)`` is a daily-partitioned MDAV spec over it.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import yaml
from _shared import TOY_COLUMNS

START = date(2026, 11, 2)  # a Monday


def day_keys(days: int, start: date = START) -> list[str]:
    return [(start + timedelta(days=i)).isoformat() for i in range(days)]


def day_rows(day: date, rows: int) -> pa.Table:
    rng = np.random.default_rng(day.toordinal())
    return pa.table(
        {
            "submitted": pa.array([day] * rows, pa.date32()),
            "x": rng.integers(18, 80, rows),
            "c": rng.choice(["a", "b", "c"], rows),
            "PA": rng.integers(0, 2, rows),
            "y": rng.integers(0, 2, rows),
        }
    )


def write_days(folder: Path, days: int, rows: int = 60, start: date = START) -> Path:
    """``folder/submissions.csv`` with ``days`` days of ``rows`` rows each, from ``start``."""
    folder.mkdir(parents=True, exist_ok=True)
    parts = [day_rows(start + timedelta(days=i), rows) for i in range(days)]
    path = folder / "submissions.csv"
    pacsv.write_csv(pa.concat_tables(parts), path)
    return path


def spec_text(
    name: str = "toy_daily",
    component: dict | None = None,
    granularity: str = "day",
    **extra,
) -> str:
    spec = {
        "name": name,
        "description": "Toy submissions released one day at a time.",
        "dataset": {
            "path": "submissions.csv",
            "columns": {**TOY_COLUMNS, "submitted": {"role": "ignored"}},
            "unlabelled": "drop",
        },
        "component": component or {"name": "mdav", "params": {"k": 5}},
        "partitions": {
            "column": "submitted",
            "granularity": granularity,
            "start": START.isoformat(),
        },
        "schedule": "@daily",
        **extra,
    }
    return yaml.safe_dump(spec, sort_keys=False)


def write_spec(folder: Path, **kw) -> Path:
    path = folder / f"{kw.get('name', 'toy_daily')}.yaml"
    path.write_text(spec_text(**kw))
    return path
