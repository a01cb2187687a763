"""The input-order attack on a generalisation release's row order (issue 21).

dMondrian and dSabre publish one row per input row. Were published row i input row i, whoever
knows where a person sits in the source (the row number of a register, an export sorted by
customer id...) would read that person's decision and protected value off row i, whatever the
generalisation did to the PND attributes: 100% of German's decisions and PD values, against
70% for the decision knowing the person's class.

The attacker here knows each person's input position and their PND attributes, and guesses the
person's decision (and protected value) as the one published at that position. The baseline is
what the published values give him: from the PND attributes he finds the person's equivalence
class (the published rows whose labels hold them: the class's label vector), and the best guess
knowing only the class is its majority value; summed over classes, the majority count over the
number of people bounds every attacker who knows no more than the class. A guess uncorrelated
with the values inside a class scores less (sum p^2 over the class's shares). The test asserts
no advantage over that bound beyond a small margin.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from privfair.components.core.registry import algorithm
from privfair.components.generalisation.inputs import prepare
from privfair.run.flow import ingest
from privfair.spec.catalogue import load_spec
from privfair.spec.settings import DEFAULT_SPECS_DIR

MARGIN = 0.02

CASES = {
    "dmondrian": ("german_dmondrian.yaml", {"t": 0.15, "utility_queries": 0}),
    "dsabre": ("german_dsabre.yaml", {"t": 0.15, "k": 5, "utility_queries": 0}),
}


def _values(column: pa.ChunkedArray) -> np.ndarray:
    return np.asarray([str(v) for v in column.to_pylist()], dtype=object)


def _majority_share(cells: np.ndarray, values: np.ndarray) -> float:
    """Sum over cells of the majority value's count, over the number of rows."""
    _, val = np.unique(values, return_inverse=True)
    counts = np.zeros((cells.max() + 1, val.max() + 1), dtype=np.int64)
    np.add.at(counts, (cells, val.ravel()), 1)
    return float(counts.max(axis=1).sum() / len(values))


def release(name: str) -> tuple:
    """(input, its release's data, the lineage's row ids, the prepared input) on German."""
    spec, params = CASES[name]
    table = ingest(load_spec(DEFAULT_SPECS_DIR / spec)).table
    algo = algorithm(name)
    result = algo(table, algo.params(**params))
    row_id = result.sidecars["lineage"].column("row_id").to_numpy()
    return table, result.outputs["data"], row_id, prepare(table, None)


def input_order_attack(data: pa.Table, row_id: np.ndarray, prep) -> dict[str, tuple]:
    """Per target (``decision``, ``pd``, and the pair ``both``): (the attacker's accuracy, the
    class-majority baseline) on the published ``data`` whose lineage is ``row_id``."""
    n = data.num_rows
    assert data.num_rows == n
    # the class the attacker finds from a person's PND attributes: the published label vector
    # of the row that is that person (the lineage maps it back)
    labels = np.column_stack(
        [_values(data.column(d.name)) for d in prep.domains] or [np.zeros(n, dtype=object)]
    )
    _, cell_of_row = np.unique(labels.astype(str), axis=0, return_inverse=True)
    cell = np.empty(n, dtype=np.int64)
    cell[row_id] = cell_of_row.ravel()
    out = {}
    published = {c: _values(data.column(c)) for c in (prep.decision, prep.pd)}
    for target, cols in (
        ("decision", [prep.decision]),
        ("pd", [prep.pd]),
        ("both", [prep.decision, prep.pd]),
    ):
        at_position = np.array(
            ["|".join(v) for v in zip(*(published[c] for c in cols), strict=True)]
        )
        person = np.empty(n, dtype=object)
        person[row_id] = at_position  # each person's own published values
        guess = at_position  # person i guessed as published row i
        accuracy = float(np.mean(guess == person))
        out[target] = (accuracy, _majority_share(cell, person.astype(str)))
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_input_position_reads_nothing_beyond_the_class(name):
    _, data, row_id, prep = release(name)
    for target, (accuracy, baseline) in input_order_attack(data, row_id, prep).items():
        assert accuracy <= baseline + MARGIN, (
            f"{name}: reading the row at each person's input position gives their {target} "
            f"{accuracy:.1%} of the time; knowing their class gives {baseline:.1%}"
        )


@pytest.mark.parametrize("name", list(CASES))
def test_the_attack_reads_a_release_in_input_order(name):
    """Positive control: the same release put back in input order (through its lineage) gives
    every person's decision and PD value away, so the test above fails when the order leaks."""
    _, data, row_id, prep = release(name)
    back = np.argsort(row_id)
    for accuracy, baseline in input_order_attack(data.take(back), row_id[back], prep).values():
        assert accuracy == 1.0 > baseline + MARGIN
