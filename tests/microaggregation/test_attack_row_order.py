"""The re-run linkage attack on a microaggregation release's row order (issue 21).

The attacker is the one k-anonymity assumes: he knows every person's quasi-identifiers (and
their protected attribute, which Fair-MDAV's fairlets depend on) and the public parameters, but
neither the input's row order nor anyone's label. He re-runs the public algorithm on what he
knows, in an order of his own, with fake labels and a pass-through id column ``pid``, and
guesses each person's label as the published label at the position his own run gives that
person. Were the rows published in grouping order (groups in creation order, members by
distance to the seed: a function of the quasi-identifiers alone), his run would reproduce the
release's order and link (nearly) every row: 100% of German's labels under Fair-MDAV, 99.6%
under MDAV (a few ties break by input position, which he does not know).

The baseline is what the published values give him: he can compute each person's published
quasi-identifiers (their group's representative) and knows their protected value, so he can
place a person in the *cell* of published rows sharing both. Knowing only the cell, the best
guess is its majority label; the share of people it gets right (the majority count of every
cell, summed, over the number of people) bounds every attacker who learns nothing finer than
the cell. A guess uncorrelated with the labels inside a cell scores less still (sum p^2 over
the cell's label shares). So the test asserts that his accuracy is no higher than that
majority baseline, up to a small margin.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from privfair.components.core.registry import algorithm
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles, read_roles

MARGIN = 0.02

CASES = {
    "fair_mdav": {"k": 10, "tau": 1.0},  # the german_fair_mdav spec
    "mdav": {"k": 10},
}


def attacker_table(table: pa.Table, seed: int) -> pa.Table:
    """What the attacker feeds the public algorithm: every person's QIs and protected value, in
    an order of his own, a fake label (the protected value itself, so that the declared
    favoured group keeps the higher positive rate) and ``pid``, the person each row is."""
    roles = read_roles(table)
    label = roles.with_role(Role.LABEL)[0]
    known = [*roles.quasi_identifiers, roles.with_role(Role.PROTECTED)[0].name]
    perm = np.random.default_rng(seed).permutation(table.num_rows)
    mine = table.select(known).take(pa.array(perm))
    fake = mine.column(known[-1]).cast(table.schema.field(label.name).type)
    mine = mine.append_column(label.name, fake).append_column("pid", pa.array(perm, pa.int64()))
    cols = [roles[c] for c in known] + [label, ColumnRole("pid", Role.PUBLIC, Kind.NUMERIC)]
    return attach_roles(mine, TableRoles.of(cols))


def majority_baseline(data: pa.Table, label: str) -> float:
    """Over the published rows: the accuracy of guessing each row's label as the majority label
    of its cell (the rows equal to it in every published column but the label)."""
    known = [c for c in data.column_names if c != label]
    keys = np.column_stack(
        [
            np.unique(np.asarray(data.column(c).to_pylist(), dtype=str), return_inverse=True)[1]
            for c in known
        ]
    )
    _, cell = np.unique(keys, axis=0, return_inverse=True)
    _, y = np.unique(np.asarray(data.column(label).to_pylist(), dtype=str), return_inverse=True)
    counts = np.zeros((cell.max() + 1, y.max() + 1), dtype=np.int64)
    np.add.at(counts, (cell.ravel(), y.ravel()), 1)
    return float(counts.max(axis=1).sum() / data.num_rows)


def link_accuracy(data: pa.Table, row_id: np.ndarray, his: pa.Table, label: str) -> float:
    """The share of people (published both in ``data``, whose lineage is ``row_id``, and in the
    attacker's run ``his``) whose published label is the one at the position ``his`` gives
    them."""
    n = min(data.num_rows, his.num_rows)
    published = np.asarray(data.column(label).to_pylist(), dtype=object)
    own = dict(zip(row_id.tolist(), published.tolist(), strict=True))  # person -> label
    pid = his.column("pid").to_numpy()[:n]
    linked = [(own[p], published[j]) for j, p in enumerate(pid.tolist()) if p in own]
    assert len(linked) >= 0.9 * data.num_rows  # he places (almost) everyone
    return float(np.mean([a == b for a, b in linked]))


def rerun_attack(table: pa.Table, name: str, params: dict, seed: int = 0) -> tuple[float, float]:
    """(the attacker's accuracy, the cell-majority baseline) on the release of ``table``."""
    algo = algorithm(name)
    p = algo.params(**params)
    release = algo(table, p)
    data = release.outputs["data"]
    label = read_roles(table).with_role(Role.LABEL)[0].name
    his = algo(attacker_table(table, seed), p).outputs["data"]
    row_id = release.sidecars["lineage"].column("row_id").to_numpy()
    return link_accuracy(data, row_id, his, label), majority_baseline(data, label)


@pytest.mark.parametrize("name", list(CASES))
def test_row_order_links_no_one_beyond_their_cell(builtin_table, name):
    accuracy, baseline = rerun_attack(builtin_table("german"), name, CASES[name])
    assert accuracy <= baseline + MARGIN, (
        f"{name}: the re-run attack reads {accuracy:.1%} of the labels from the row order; "
        f"knowing each person's group and protected value gives {baseline:.1%}"
    )


@pytest.mark.parametrize("name", list(CASES))
def test_the_attack_links_a_release_in_grouping_order(builtin_table, name):
    """Positive control: put back in grouping order (groups by id, members by rank, as the
    lineages record it), the release and the attacker's run line up and the same attack links
    almost every row, so the test above fails when the order leaks."""
    table = builtin_table("german")
    algo = algorithm(name)
    p = algo.params(**CASES[name])
    label = read_roles(table).with_role(Role.LABEL)[0].name

    def grouping_order(result) -> tuple[pa.Table, pa.Table]:
        lin = result.sidecars["lineage"]
        order = np.lexsort((lin.column("rank").to_numpy(), lin.column("group").to_numpy()))
        return result.outputs["data"].take(order), lin.take(order)

    data, lin = grouping_order(algo(table, p))
    his, _ = grouping_order(algo(attacker_table(table, 0), p))
    accuracy = link_accuracy(data, lin.column("row_id").to_numpy(), his, label)
    assert accuracy > max(majority_baseline(data, label) + MARGIN, 0.95)
