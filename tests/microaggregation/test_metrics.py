"""Metrics against independent computations, and the mixed-form distance identity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfair.components.core.metrics import (
    demographic_parity_difference,
    demographic_parity_ratio,
    equal_opportunity_difference,
    equalized_odds_sum,
    information_loss,
    k_anonymity,
    positive_ratio,
    t_closeness_binary,
)
from privfair.components.microaggregation import kernel
from privfair.components.microaggregation.encoding import encode_qis
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles


@pytest.fixture
def preds() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    s = rng.integers(0, 2, 500)
    y = rng.integers(0, 2, 500)
    yp = np.where(rng.random(500) < 0.8, y, 1 - y)
    return y, yp, s


def _rates(y, yp, s, g):
    m = s == g
    tpr = ((yp == 1) & (y == 1) & m).sum() / ((y == 1) & m).sum()
    tnr = ((yp == 0) & (y == 0) & m).sum() / ((y == 0) & m).sum()
    return tpr, tnr


def test_equalized_odds_is_the_papers_sum(preds):
    y, yp, s = preds
    tpr0, tnr0 = _rates(y, yp, s, 0)
    tpr1, tnr1 = _rates(y, yp, s, 1)
    assert equalized_odds_sum(y, yp, sensitive_features=s) == pytest.approx(
        abs(tpr0 - tpr1) + abs(tnr0 - tnr1)
    )
    assert equal_opportunity_difference(y, yp, sensitive_features=s) == pytest.approx(
        abs(tpr0 - tpr1)
    )


def test_parity_difference_and_ratio(preds):
    _, yp, s = preds
    pr = pd.Series(yp).groupby(s).mean()
    assert positive_ratio(yp, sensitive_features=s) == pytest.approx(pr.to_dict())
    assert demographic_parity_difference(yp, sensitive_features=s) == pytest.approx(
        abs(pr[0] - pr[1])
    )
    assert demographic_parity_ratio(yp, sensitive_features=s) == pytest.approx(pr.min() / pr.max())


def test_k_anonymity_is_the_smallest_class():
    df = pd.DataFrame({"a": [1, 1, 1, 2, 2, None], "b": ["x", "x", "x", "y", "y", "y"]})
    assert k_anonymity(df, ["a", "b"]) == 1  # the null row is a class of its own
    assert k_anonymity(df.iloc[:5], ["a", "b"]) == 2
    assert k_anonymity(df.iloc[:0], ["a"]) == 0


def test_t_closeness_binary():
    groups = np.array([0, 0, 0, 1, 1, 1])
    attr = np.array([0, 1, 1, 0, 0, 1])
    np.testing.assert_allclose(
        t_closeness_binary(groups, attr, 0.5), [abs(1 / 3 - 0.5), abs(2 / 3 - 0.5)]
    )


def test_information_loss_formula():
    rng = np.random.default_rng(1)
    x = rng.random((40, 3))
    groups = np.repeat(np.arange(8), 5)
    means = pd.DataFrame(x).groupby(groups).transform("mean").to_numpy()
    il = information_loss(x, means, ["a", "a", "b"])
    sse = ((x - means) ** 2).sum()
    assert il["il"] == pytest.approx(np.sqrt(sse / 40))
    assert il["il_attr"] == pytest.approx(np.sqrt(sse / (40 * 3)))
    assert il["per_attribute"]["b"] == pytest.approx(
        np.sqrt(((x[:, 2] - means[:, 2]) ** 2).sum() / 40)
    )


def _mixed_table(n: int, seed: int) -> tuple[pa.Table, TableRoles]:
    rng = np.random.default_rng(seed)
    cats = np.array(["a", "b", "c", None], dtype=object)
    t = pa.table(
        {
            "x": rng.normal(size=n),
            "z": rng.integers(0, 50, n),
            "c1": pa.array(cats[rng.integers(0, 4, n)]),
            "c2": pa.array(np.array(["p", "q", None], dtype=object)[rng.integers(0, 3, n)]),
        }
    )
    roles = TableRoles.of(
        [
            ColumnRole("x", Role.QUASI_IDENTIFIER),
            ColumnRole("z", Role.QUASI_IDENTIFIER),
            ColumnRole("c1", Role.QUASI_IDENTIFIER, Kind.NOMINAL),
            ColumnRole("c2", Role.QUASI_IDENTIFIER, Kind.NOMINAL),
        ]
    )
    return t, roles


@pytest.mark.parametrize("scaling", ["minmax", "zscore", "none"])
def test_mixed_distances_equal_dense_one_hot(scaling):
    """The grouping never builds the one-hot matrix; its distances (to a row, and to the mean
    of the remaining rows) must equal the dense squared Euclidean distances of the paper's
    encoding (missing -> all-zero block)."""
    t, roles = _mixed_table(300, 3)
    enc = encode_qis(t, roles, scaling)
    dense = enc.dense(scaled=True)
    x = np.ascontiguousarray(enc.scaled)
    codes = np.ascontiguousarray(enc.codes)
    for row in (0, 17, 299):
        np.testing.assert_allclose(
            kernel.distances_to_row(x, codes, row),
            ((dense - dense[row]) ** 2).sum(axis=1),
            atol=1e-9,
        )
    alive = np.ones(300, dtype=bool)
    alive[::3] = False
    levels = np.array([len(a.levels) for a in enc.nominal], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(levels)[:-1]]).astype(np.int64)
    d = kernel.distances_to_centre(x, codes, offsets, int(levels.sum()), alive)
    centre = dense[alive].mean(axis=0)
    np.testing.assert_allclose(d[alive], ((dense[alive] - centre) ** 2).sum(axis=1), atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    values=st.sampled_from([["F", "U"], [0, 1], [True, False], [1.5, -2.0], ["Male", "Female"]]),
    n=st.integers(2, 60),
    seed=st.integers(0, 2**16),
)
def test_the_effect_of_an_arrow_column_is_the_effect_of_its_values(values, n, seed):
    """``effect`` codes an Arrow column in Arrow (no Python object per row): what it reports is
    what it reports on the same values as a NumPy array."""
    from privfair.components.microaggregation.fair_mdav import effect

    rng = np.random.default_rng(seed)
    col = [values[i] for i in rng.integers(0, 2, n)]
    col[:2] = values  # both values present, as binary_values demands
    y = rng.integers(0, 2, n).astype(np.int8)
    order = np.sort(rng.choice(n, rng.integers(1, n + 1), replace=False))
    y_out = rng.integers(0, 2, len(order)).astype(np.int8)
    flags = rng.random(len(order)) < 0.3
    favoured = values[int(rng.integers(0, 2))]
    args = (y, order, y_out, flags, favoured, 0.1, "PA")
    as_numpy = effect(np.array(col, dtype=object), *args)
    as_arrow = effect(pa.chunked_array([col[: n // 2], col[n // 2 :]]), *args)
    assert repr(as_arrow) == repr(as_numpy)  # NaN where a group has no published row


@pytest.mark.parametrize(
    ("column", "value", "distinct", "expected"),
    [
        (pa.chunked_array([["a", None, "b"]]), "a", None, [1, 0, 0]),
        (pa.chunked_array([[True, False]]), 1, [False, True], [1, 0]),  # as Python compares
        (pa.chunked_array([[1, 2]]), 1.5, None, [0, 0]),  # not rounded to the column's type
        (pa.chunked_array([[1, 2]]), "1", None, [0, 0]),  # another type: no row
        (pa.chunked_array([pa.array(["x", "y"]).dictionary_encode()]), "y", None, [0, 1]),
        (pa.chunked_array([[0.5, 1.0]], pa.float32()), 0.5, [0.5, 1.0], [1, 0]),
    ],
)
def test_an_indicator_compares_as_the_values_do(column, value, distinct, expected):
    from privfair.components.microaggregation.encoding import indicator

    got = indicator(column, value, distinct)
    assert got.dtype == np.int8 and got.tolist() == expected
    as_objects = column.to_numpy(zero_copy_only=False)
    if distinct is not None:
        value = next(d for d in distinct if d == value)
    assert got.tolist() == [int(v == value) for v in as_objects]
