"""The public LM of a generalisation release is a function of the published table.

``information_loss`` (``lm_norm``, ``lm_sum``) is in the shareable copy. It used to be the
paper's LM over the input's *active* domains: how many distinct input values lie inside each
published label, over how many the attribute has. The labels do not show that: two inputs
that differ in one person's value, moved strictly inside their class's label to a value no one
else holds, publish the same table, but that LM moved (19 active ages against 20). The public
LM now reads the published labels (numeric: the label's width over the published range) and
declared domains only; the active-domain LM is kept for the owner as
``information_loss_active``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from privfair.components.generalisation import FAMILY
from privfair.components.generalisation.dmondrian import dmondrian
from privfair.components.generalisation.dsabre import dsabre
from privfair.components.generalisation.params import DMondrianParams, DSabreParams
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles

ROLES = TableRoles.of(
    [
        ColumnRole("age", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
        ColumnRole("sex", Role.PROTECTED, Kind.NOMINAL, favoured=("M",)),
        ColumnRole("y", Role.LABEL, Kind.BINARY, positive=(1,)),
    ]
)

# two clusters of ages (20-29, 60-69), each age held by two people; the decision follows the
# cluster, a quarter of each sex flipped, so that one cut between the clusters is allowed
BASE = [20 + i % 10 for i in range(20)] + [60 + i % 10 for i in range(20)]
# the same people, but one of the two aged 22 is 22.5: inside the class [20, 29], a new value
MOVED = [22.5 if i == 2 else a for i, a in enumerate(BASE)]


def _table(ages: list[float]) -> pa.Table:
    n = len(ages)
    y = [1 if a >= 50 else 0 for a in ages]
    y = [1 - v if i % 8 in (0, 1) else v for i, v in enumerate(y)]
    return attach_roles(
        pa.table(
            {
                "age": pa.array(ages, pa.float64()),
                "sex": ["F", "M"] * (n // 2),
                "y": pa.array(y, pa.int64()),
            }
        ),
        ROLES,
    )


RUNS = {
    "dmondrian": lambda t: dmondrian(t, DMondrianParams(t=0.3, utility_queries=0)),
    "dsabre": lambda t: dsabre(t, DSabreParams(t=0.3, utility_queries=0)),
}


def _lm_of_published(data: pa.Table) -> dict[str, float]:
    """LM read off the published table alone: the age label's width over the published range
    (sex and the decision are published unchanged: no loss), normalised over the 2 QIs."""
    age = data.column("age").combine_chunks()
    lo = np.asarray(age.field("lo"), dtype=float)
    hi = np.asarray(age.field("hi"), dtype=float)
    lm_sum = float(((hi - lo) / (hi.max() - lo.min())).sum() / len(lo))
    return {"lm_sum": lm_sum, "lm_norm": lm_sum / 2}


@pytest.mark.parametrize("name", RUNS)
@pytest.mark.parametrize("ages", [BASE, MOVED], ids=["base", "moved"])
def test_the_public_lm_is_read_off_the_published_table(name, ages):
    result = RUNS[name](_table(ages))
    assert result.metrics["classes"] > 1  # labels narrower than the whole range
    lm = result.metrics["information_loss"]
    assert lm == pytest.approx(_lm_of_published(result.outputs["data"]))
    shared = _algorithm(name).public.public_metrics(result.metrics)
    assert shared["information_loss"] == lm
    assert "information_loss_active" not in shared  # the paper's LM: the owner's only


def test_neighbours_with_the_same_published_table_share_their_public_lm():
    """One person's age moved to a value no one else holds, inside their class's label: the
    published table is the same, and so is the public LM; the active-domain LM (19 distinct
    ages against 20) moved, which the published table does not show."""
    a, b = RUNS["dmondrian"](_table(BASE)), RUNS["dmondrian"](_table(MOVED))
    assert a.outputs["data"].equals(b.outputs["data"])
    assert a.metrics["information_loss"] == pytest.approx(b.metrics["information_loss"])
    assert a.metrics["information_loss_active"] != b.metrics["information_loss_active"]


def _algorithm(name: str):
    return next(a for a in FAMILY.algorithms if a.name == name)
