"""A shipped spec's ``description`` quotes no statistic of its input.

The description is published as written (the public manifest and report): it is the owner's
words, so a number in it that was computed from the input leaves the owner's area with every
release, whatever the protection. The shipped descriptions named the share of women a
setting dropped (13.6 %), the retention of each sex (94.8 %, 99.4 %) and the parity gaps of
runs on the input. This test loads each shipped spec and its input and looks, in the
description, for every number that equals a statistic of the input:

- a count (written as an integer >= 10): the row count, or how many rows hold a value of a
  column (columns of at most ``MAX_LEVELS`` values: the label's positives among them);
- a share of those rows, written with 1 to 3 decimals (``0.31``) or as a percentage
  (``31 %``, ``31.0 %``), compared at the precision it is written with.

Exempt are the dataset's documented size (``DOCUMENTED``), the spec's own settings (any number
of its ``component`` and ``guarantees``, also as a percentage: ``train_fraction: 0.7`` is "70%"),
years (1900-2099, as citations write them) and numbers glued to a word (``>50K``, ``A92``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.compute as pc
import pytest

from privfair.io.ingest import load_dataset
from privfair.spec.catalogue import load_spec
from privfair.spec.settings import DEFAULT_SPECS_DIR

SPECS = sorted(Path(DEFAULT_SPECS_DIR).glob("*.yaml"))
# the sizes each built-in dataset's documentation states (privfair.schemas.datasets)
DOCUMENTED = {"adult": 48_842, "compas": 6_907, "german": 1_000, "australian": 690}
MAX_LEVELS = 50

# a number not glued to a word or another number: 48,842 / 0.15 / 13.6 % / 70%
NUMBER = re.compile(r"(?<![\w.,-])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?![\w.]\d|[\w])(\s?%)?")
SCIENTIFIC = re.compile(r"\d+(?:\.\d+)?e[-+]?\d+", re.I)


def _numbers(obj) -> set[float]:
    """Every number in a spec's settings (nested mappings and lists)."""
    if isinstance(obj, bool) or obj is None:
        return set()
    if isinstance(obj, int | float):
        return {float(obj)}
    if isinstance(obj, dict):
        return set().union(*(_numbers(v) for v in obj.values())) if obj else set()
    if isinstance(obj, list | tuple):
        return set().union(*(_numbers(v) for v in obj)) if obj else set()
    return set()


def _statistics(table) -> tuple[set[int], list[float]]:
    """The input's counts (rows; rows per value of each column of few values) and shares."""
    n = table.num_rows
    counts = {n}
    for name in table.column_names:
        vc = pc.value_counts(table.column(name))
        if len(vc) <= MAX_LEVELS:
            counts |= set(vc.field("counts").to_pylist())
    return counts, sorted(c / n for c in counts if c < n)


def leaks(description: str, table, settings: set[float], documented: int) -> list[str]:
    """The numbers of ``description`` that equal a statistic of ``table`` (module docstring)."""
    counts, shares = _statistics(table)
    text = SCIENTIFIC.sub(" ", description)  # delta = 1e-9: a setting
    found = []
    for m in NUMBER.finditer(text):
        whole, dec, pct = m.group(1), m.group(2), m.group(3)
        value = float(whole.replace(",", "") + (f".{dec}" if dec else ""))
        places = len(dec) if dec else 0
        if pct:
            value, places = value / 100, places + 2
        if value in settings or round(value * 100, 9) in {round(s * 100, 9) for s in settings}:
            continue
        if not pct and places == 0:
            year = "," not in whole and 1900 <= value <= 2099
            if value >= 10 and value != documented and not year and int(value) in counts:
                found.append(f"{m.group(0).strip()} (a count of the input)")
        elif (
            (pct or whole == "0")
            and 1 <= places <= 3
            and any(round(s, places) == round(value, places) for s in shares)
        ):
            found.append(f"{m.group(0).strip()} (a share of the input)")
    return found


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_a_shipped_description_quotes_no_statistic_of_its_input(path):
    spec = load_spec(path)
    table, _ = load_dataset(spec.dataset)
    name = spec.dataset.name
    assert table.num_rows == DOCUMENTED[name]  # the documented size is the input's
    raw = spec.model_dump(mode="json")
    settings = _numbers(raw.get("component")) | _numbers(raw.get("guarantees"))
    assert not leaks(spec.description, table, settings, DOCUMENTED[name])


def test_the_detector_finds_counts_and_shares_at_their_written_precision(builtin_table):
    german = builtin_table("german")
    n_women = int(pc.sum(pc.equal(german.column("sex"), 0)).as_py())
    share = n_women / german.num_rows
    text = (
        f"{n_women} women, {share:.2f} of the rows ({100 * share:.1f} %); 1,000 rows, "
        "t = 0.15 (Ruggieri 2014), personal status A92"
    )
    assert leaks(text, german, {0.15}, 1_000) == [
        f"{n_women} (a count of the input)",
        f"{share:.2f} (a share of the input)",
        f"{100 * share:.1f} % (a share of the input)",
    ]
