"""The ordinary Arrow types of a user's table (issue 22): a dictionary (pandas ``Categorical``,
ordered or not), ``large_string`` and ``string_view`` in a nominal or ordinal quasi-identifier,
a pass-through column, the protected attribute or the label. MDAV and Fair-MDAV run, publish
each column in its input type, publish the same values and groups as on plain strings, and
every declared guarantee holds."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from privfair.components.core.checks import check_contract
from privfair.components.microaggregation.audit import evidence
from privfair.components.microaggregation.fair_mdav import fair_mdav
from privfair.components.microaggregation.mdav import mdav
from privfair.components.microaggregation.params import FairMDAVParams, MDAVParams
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles

N = 48
LEVELS = ("low", "mid", "high")


def _dictionary(values: list) -> pa.Array:
    return pa.array(values).dictionary_encode()


def _categorical(values: list) -> pa.Array:
    return pa.Array.from_pandas(pd.Categorical(values))


def _ordered(values: list) -> pa.Array:
    cats = sorted({v for v in values if v is not None}, key=str)
    cats = list(LEVELS) if set(cats) <= set(LEVELS) else cats
    return pa.Array.from_pandas(pd.Categorical(values, categories=cats, ordered=True))


def _large(values: list) -> pa.Array:
    return pa.array(values, pa.large_string())


def _view(values: list) -> pa.Array:
    return pa.array(values, pa.string_view())


TYPES: dict[str, Callable[[list], pa.Array]] = {
    "dictionary": _dictionary,
    "categorical": _categorical,
    "ordered_categorical": _ordered,
    "large_string": _large,
    "string_view": _view,
}


def table(convert: Callable[[list], pa.Array] | None) -> pa.Table:
    """Numeric ``x``, nominal ``c`` (nulls), ordinal ``lvl``, protected ``PA``, label ``y``
    (strings), pass-through ``s`` (nulls); every string column through ``convert``."""
    rng = np.random.default_rng(5)
    prot = rng.choice(["F", "U"], N, p=[0.6, 0.4]).tolist()
    y = ["yes" if rng.random() < (0.7 if p == "F" else 0.3) else "no" for p in prot]
    c = [None if i % 5 == 0 else v for i, v in enumerate(rng.choice(["a", "b", "c"], N))]
    s = [None if i % 7 == 3 else f"d{i % 4}" for i in range(N)]
    lvl = rng.choice(list(LEVELS), N).tolist()
    conv = convert or (lambda v: pa.array(v, pa.string()))
    roles = TableRoles.of(
        [
            ColumnRole("x", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
            ColumnRole("c", Role.QUASI_IDENTIFIER, Kind.NOMINAL),
            ColumnRole("lvl", Role.QUASI_IDENTIFIER, Kind.ORDINAL, domain=LEVELS),
            ColumnRole("PA", Role.PROTECTED, Kind.BINARY, favoured="auto"),
            ColumnRole("y", Role.LABEL, Kind.BINARY, positive="yes"),
            ColumnRole("s", Role.SENSITIVE, Kind.NOMINAL),
        ]
    )
    data = pa.table(
        {
            "x": rng.normal(size=N),
            "c": conv(c),
            "lvl": conv(lvl),
            "PA": conv(prot),
            "y": conv(y),
            "s": conv(s),
        }
    )
    return attach_roles(data, roles)


RUNS = {
    "mdav": (mdav, MDAVParams(k=3)),
    "mdav_onehot": (mdav, MDAVParams(k=3, publish="onehot")),
    "fair_mdav": (fair_mdav, FairMDAVParams(k=4, tau=1.0)),
    "fair_mdav_negative": (fair_mdav, FairMDAVParams(k=4, tau=1.0, correction="negative")),
    "fair_mdav_onehot": (fair_mdav, FairMDAVParams(k=4, publish="onehot")),
    "fair_mdav_raw": (fair_mdav, FairMDAVParams(k=4, microaggregate=False)),
}


@pytest.fixture(scope="module")
def plain_runs() -> dict:
    t = table(None)
    return {name: algorithm(t, params) for name, (algorithm, params) in RUNS.items()}


@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize("kind", list(TYPES))
def test_types_are_accepted_kept_and_change_nothing(kind, run, plain_runs):
    t = table(TYPES[kind])
    algorithm, params = RUNS[run]
    r = algorithm(t, params)
    out = r.outputs["data"]
    # the user's types come back (the one-hot form publishes QIs as numbers by design)
    onehot = params.publish == "onehot"
    for name in out.column_names:
        if name in t.column_names and not (onehot and name in ("c", "lvl")):
            assert out.schema.field(name).type == t.schema.field(name).type, name
    # the same release as on plain strings: same values, same groups, same order
    ref = plain_runs[run]
    assert out.to_pylist() == ref.outputs["data"].to_pylist()
    assert r.sidecars["lineage"].equals(ref.sidecars["lineage"])
    # every declared guarantee holds, recomputed from the input and the release
    failed = [
        (c.id, c.kind, c.message)
        for c in check_contract(r.contract, evidence(t, r.outputs, r.sidecars, params))
        if not c.passed
    ]
    assert not failed, failed


def test_an_ordered_categorical_keeps_its_category_order():
    """The declared category order (an ordered dictionary) is published as it was given, not
    rebuilt in the order the groups were formed."""
    t = table(_ordered)
    r = mdav(t, MDAVParams(k=3))
    col = r.outputs["data"].column("lvl").combine_chunks()
    assert col.type.ordered
    assert col.dictionary.to_pylist() == list(LEVELS)


def test_view_columns_rerun_byte_identical():
    t = table(_view)
    a, b = (fair_mdav(t, FairMDAVParams(k=4)) for _ in range(2))
    assert a.outputs["data"].equals(b.outputs["data"])
    assert a.sidecars["lineage"].equals(b.sidecars["lineage"])
