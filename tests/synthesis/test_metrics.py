"""Synthetic-data metrics (spec 5.4, fact table F3): hand-computed golden values, independent
pure-Python / scipy references on random data, and hypothesis properties (TVD and Cramér's V
ranges, independence gives V = 0, row-permutation invariance of the fairness measures)."""

from __future__ import annotations

import math
from collections import Counter
from itertools import combinations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.stats import chi2_contingency

from privfair.components.synthesis.metrics import (
    acd,
    cramers_v,
    downstream_accuracy,
    fairness_measures,
    marginal,
    one_way_tvd,
    tvd,
    two_way_tvd,
)
from privfair.schemas.errors import InputError

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def same(a: dict, b: dict) -> bool:
    """Equal keys and values, NaN equal to NaN, floats to 1e-12."""
    return a.keys() == b.keys() and all(
        (math.isnan(a[k]) and math.isnan(b[k])) or math.isclose(a[k], b[k], abs_tol=1e-12)
        for k in a
    )


# --------------------------------------------------------------------------- marginals and TVD


def test_marginal_counts_by_hand():
    codes = {"x": np.array([0, 1, 1, 2, 1]), "y": np.array([1, 0, 0, 1, 1])}
    m = marginal(codes, {"x": 3, "y": 2}, ["x", "y"])
    assert m.shape == (3, 2)
    assert m.tolist() == [[0, 1], [2, 1], [0, 1]]
    assert marginal(codes, {"x": 3, "y": 2}, ["y", "x"]).tolist() == m.T.tolist()
    assert marginal(codes, {"x": 4}, ["x"]).tolist() == [1, 3, 1, 0]  # empty trailing code
    assert int(marginal(codes, {}, [])) == 5


@pytest.mark.parametrize(
    ("codes", "sizes"),
    [
        ({"x": np.array([0, 3])}, {"x": 3}),  # code out of range
        ({"x": np.array([-1, 0])}, {"x": 3}),  # negative code
        ({"x": np.array([0.0, 1.0])}, {"x": 3}),  # not integers
        ({"x": np.array([0, 1])}, {}),  # no domain size
        ({"y": np.array([0, 1])}, {"x": 2}),  # column missing
    ],
)
def test_marginal_rejects_bad_codes(codes, sizes):
    with pytest.raises(InputError):
        marginal(codes, sizes, ["x"])


def test_marginal_rejects_ragged_columns():
    with pytest.raises(InputError):
        marginal({"x": np.array([0, 1]), "y": np.array([0])}, {"x": 2, "y": 2}, ["x", "y"])


def test_marginal_equals_naive_count():
    rng = np.random.default_rng(3)
    sizes = {"a": 3, "b": 4, "c": 2}
    codes = {c: rng.integers(0, k, 200) for c, k in sizes.items()}
    m = marginal(codes, sizes, ["c", "a", "b"])
    naive = Counter(zip(codes["c"].tolist(), codes["a"].tolist(), codes["b"].tolist(), strict=True))
    for idx in np.ndindex(m.shape):
        assert m[idx] == naive.get(idx, 0)
    assert m.sum() == 200


def test_tvd_by_hand():
    assert tvd([3, 1], [1, 1]) == pytest.approx(0.25)  # 0.5 * (|3/4 - 1/2| + |1/4 - 1/2|)
    # 0.5 * (|1 - 1/4| + 3 * |0 - 1/4|) = 0.75
    assert tvd([[4, 0], [0, 0]], [[1, 1], [1, 1]]) == pytest.approx(0.75)
    assert tvd([2, 0], [0, 7]) == 1.0  # disjoint supports
    assert tvd([5, 5], [1, 1]) == 0.0  # only the normalised counts matter
    assert tvd([0, 0], [0, 0]) == 0.0
    assert math.isnan(tvd([0, 0], [1, 0]))


@pytest.mark.parametrize(("p", "q"), [([1, 2], [1, 2, 3]), ([1, -1], [1, 1]), ([np.nan], [1])])
def test_tvd_rejects_bad_counts(p, q):
    with pytest.raises(InputError):
        tvd(p, q)


counts = arrays(np.int64, st.integers(1, 12), elements=st.integers(0, 1000))


@SETTINGS
@given(data=st.data(), p=counts)
def test_tvd_is_a_bounded_symmetric_distance(data, p):
    q = data.draw(arrays(np.int64, p.shape, elements=st.integers(0, 1000)))
    if p.sum() == 0 or q.sum() == 0:
        return
    d = tvd(p, q)
    assert 0.0 <= d <= 1.0
    assert d == pytest.approx(tvd(q, p), abs=1e-12)
    assert tvd(p, p) == pytest.approx(0.0, abs=1e-12)
    assert tvd(p, 3 * p) == pytest.approx(0.0, abs=1e-12)


def _random_table(rng: np.random.Generator, sizes: dict[str, int], n: int) -> dict:
    return {c: rng.integers(0, k, n) for c, k in sizes.items()}


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n_real=st.integers(1, 60), n_syn=st.integers(1, 60))
def test_one_way_tvd_is_tvd_of_marginals(seed, n_real, n_syn):
    rng = np.random.default_rng(seed)
    sizes = {"a": 2, "b": 5, "c": 3}
    real, syn = _random_table(rng, sizes, n_real), _random_table(rng, sizes, n_syn)
    got = one_way_tvd(real, syn, sizes)
    assert list(got) == ["a", "b", "c"]
    for c in sizes:
        assert got[c] == tvd(marginal(real, sizes, [c]), marginal(syn, sizes, [c]))


def test_two_way_tvd_pairs_and_values():
    rng = np.random.default_rng(5)
    sizes = {"a": 2, "b": 3, "big": 50, "c": 4}
    real, syn = _random_table(rng, sizes, 80), _random_table(rng, sizes, 70)
    got = two_way_tvd(real, syn, sizes, max_cells=100)
    # "big" pairs with a (100 cells) but not with b (150) or c (200)
    assert list(got) == [("a", "b"), ("a", "big"), ("a", "c"), ("b", "c")]
    for a, b in got:
        assert got[(a, b)] == tvd(marginal(real, sizes, [a, b]), marginal(syn, sizes, [a, b]))
    assert len(two_way_tvd(real, syn, sizes)) == 6  # default max_cells = 10,000 keeps all
    assert two_way_tvd(real, real, sizes) == dict.fromkeys(two_way_tvd(real, real, sizes), 0.0)


# --------------------------------------------------------------------------- Cramér's V and ACD


def test_cramers_v_by_hand():
    # [[8, 2], [2, 8]]: N = 20, E = 5, chi2 = 4 * 9/5 = 7.2, phi2 = 0.36,
    # phi2~ = 0.36 - 1/19, r~ - 1 = c~ - 1 = 1 - 1/19 = 18/19  ->  V^2 = 5.84/18 = 73/225
    assert cramers_v([[8, 2], [2, 8]]) == pytest.approx(math.sqrt(73) / 15, abs=1e-12)
    # [[10, 0, 5], [0, 10, 5]]: N = 30, E = 5, chi2 = 20, phi2 = 2/3, phi2~ = 2/3 - 2/29,
    # r~ - 1 = 28/29, c~ - 1 = 54/29  ->  V^2 = (52/87) * (29/28) = 13/21
    assert cramers_v([[10, 0, 5], [0, 10, 5]]) == pytest.approx(math.sqrt(13 / 21), abs=1e-12)
    # all-zero rows and columns are dropped first
    assert cramers_v([[8, 0, 2], [0, 0, 0], [2, 0, 8]]) == cramers_v([[8, 2], [2, 8]])
    assert cramers_v([[10, 0], [0, 10]]) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "table",
    [
        [[0, 0], [0, 0]],  # N = 0
        [[1, 0], [0, 0]],  # N = 1
        [[3, 4, 5]],  # one row
        [[3], [4]],  # one column
        [[1, 0], [0, 1]],  # N = 2: r~ - 1 = 1 - 1/1 = 0
        [[5, 5], [5, 5]],  # independent: phi2~ = 0
    ],
)
def test_cramers_v_degenerate_tables_are_zero(table):
    assert cramers_v(table) == 0.0


def test_cramers_v_rejects_bad_tables():
    for bad in ([1, 2], [[1, -1], [1, 1]], [[np.inf, 1], [1, 1]]):
        with pytest.raises(InputError):
            cramers_v(bad)


def _reference_v(table: np.ndarray) -> float:
    """The spec 5.4 formula around scipy's chi-square (no Yates correction)."""
    t = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
    n = t.sum()
    if n <= 1 or min(t.shape) < 2:
        return 0.0
    r, c = t.shape
    chi2 = chi2_contingency(t, correction=False)[0]
    phi2 = max(0.0, chi2 / n - (r - 1) * (c - 1) / (n - 1))
    denom = min(r - (r - 1) ** 2 / (n - 1) - 1, c - (c - 1) ** 2 / (n - 1) - 1)
    return 0.0 if denom <= 0 else math.sqrt(phi2 / denom)


tables = arrays(
    np.int64, st.tuples(st.integers(1, 5), st.integers(1, 5)), elements=st.integers(0, 40)
)


@SETTINGS
@given(table=tables)
def test_cramers_v_in_unit_interval_and_matches_scipy(table):
    v = cramers_v(table)
    assert 0.0 <= v <= 1.0
    assert v == pytest.approx(_reference_v(table), abs=1e-9)
    assert cramers_v(table.T) == pytest.approx(v, abs=1e-12)


@SETTINGS
@given(
    u=arrays(np.int64, st.integers(1, 6), elements=st.integers(0, 9)),
    v=arrays(np.int64, st.integers(1, 6), elements=st.integers(0, 9)),
    scale=st.integers(1, 1000),
)
def test_cramers_v_of_an_independent_table_is_zero(u, v, scale):
    assert cramers_v(np.outer(u, v) * scale) == pytest.approx(0.0, abs=1e-6)


def test_acd_by_hand_and_against_pairwise_v():
    # real: a = b (V = 1); synthetic: a, b independent and balanced (V = 0)
    real = {"a": np.array([0, 0, 1, 1] * 5), "b": np.array([0, 0, 1, 1] * 5)}
    syn = {"a": np.array([0, 0, 1, 1] * 5), "b": np.array([0, 1, 0, 1] * 5)}
    assert acd(real, syn, {"a": 2, "b": 2}) == pytest.approx(1.0)
    assert acd(real, real, {"a": 2, "b": 2}) == 0.0
    assert math.isnan(acd(real, syn, {"a": 2, "b": 2}, max_cells=3))  # no pair left

    rng = np.random.default_rng(11)
    sizes = {"a": 2, "b": 3, "big": 60, "c": 4}
    real, syn = _random_table(rng, sizes, 90), _random_table(rng, sizes, 90)
    syn["c"] = syn["b"] + syn["a"]  # dependent in the synthetic table only
    pairs = [(a, b) for a, b in combinations(sizes, 2) if sizes[a] * sizes[b] <= 150]
    expected = np.mean(
        [
            abs(
                cramers_v(marginal(real, sizes, list(p))) - cramers_v(marginal(syn, sizes, list(p)))
            )
            for p in pairs
        ]
    )
    assert acd(real, syn, sizes, max_cells=150) == pytest.approx(expected, abs=1e-12)


# --------------------------------------------------------------------------- fairness measures

# (a, s, y, o) per row; see test_fairness_measures_by_hand for the arithmetic
HAND = np.array(
    [
        [0, 1, 1, 1],
        [0, 1, 1, 0],
        [0, 1, 0, 0],
        [0, 0, 1, 1],
        [0, 0, 0, 1],
        [0, 0, 0, 0],
        [1, 1, 1, 1],
        [1, 1, 0, 1],
        [1, 0, 1, 0],
        [1, 0, 1, 0],
        [2, 0, 1, 1],
        [2, 0, 0, 0],
    ]
)


def test_fairness_measures_by_hand():
    a, s, y, o = HAND.T
    got = fairness_measures(s, o, y, a)
    expected = {
        # P(O=1|S=1) = 3/5 (rows 1,2,3,7,8), P(O=1|S=0) = 3/7
        "dp": 3 / 5 - 3 / 7,
        # TPR: S=1 2/3 (rows 1,2,7), S=0 2/4 (rows 4,9,10,11)
        "tprb": 2 / 3 - 1 / 2,
        # TNR: S=1 1/2 (rows 3,8), S=0 2/3 (rows 5,6,12)
        "tnrb": 2 / 3 - 1 / 2,
        # per stratum rate(S=1), rate(S=0): a=0 1/3, 2/3; a=1 1, 0; a=2 -, 1/2.
        # paper: strata 0 and 1 (6 and 4 rows): (6 * 1/3 + 4 * 1) / 10
        "cdp": 0.6,
        "cdp_reference": abs((1 / 3 + 1) / 2 - (2 / 3 + 0 + 1 / 2) / 3),  # 5/18
        # TPR per stratum: a=0 1/2, 1; a=1 1, 0; a=2 -, 1
        "ctprb": (6 * 0.5 + 4 * 1) / 10,
        "ctprb_reference": abs((0.5 + 1) / 2 - (1 + 0 + 1) / 3),  # 1/12
        # TNR per stratum: a=0 1, 1/2; a=1 0, -; a=2 -, 1  -> only stratum 0 has both
        "ctnrb": 0.5,
        "ctnrb_reference": abs((1 + 0) / 2 - (0.5 + 1) / 2),  # 1/4
    }
    assert same(got, expected)
    assert got["cdp_reference"] == pytest.approx(5 / 18)
    assert got["ctprb_reference"] == pytest.approx(1 / 12)


def test_fairness_measures_keys_codes_and_types():
    a, s, y, o = HAND.T
    assert list(fairness_measures(s, o)) == ["dp"]
    assert list(fairness_measures(s, o, y)) == ["dp", "tprb", "tnrb"]
    assert list(fairness_measures(s, o, strata=a)) == ["dp", "cdp", "cdp_reference"]
    # bool inputs and arbitrary stratum codes give the same numbers
    base = fairness_measures(s, o, y, a)
    relabelled = np.array([100, -5, 7])[a]
    assert same(fairness_measures(s == 1, o == 1, y == 1, relabelled), base)
    assert all(type(v) is float for v in base.values())


def test_fairness_measures_undefined_rates_are_nan():
    s = np.ones(4, dtype=bool)
    got = fairness_measures(s, [1, 0, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1])
    assert got.keys() == {
        "dp",
        "tprb",
        "tnrb",
        "cdp",
        "cdp_reference",
        "ctprb",
        "ctprb_reference",
        "ctnrb",
        "ctnrb_reference",
    }
    assert all(math.isnan(v) for v in got.values())
    empty = fairness_measures(np.zeros(0, bool), np.zeros(0, bool), np.zeros(0, bool), [])
    assert all(math.isnan(v) for v in empty.values())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"s": [0, 2], "o": [0, 1]},  # not binary
        {"s": [0, 1], "o": [0, 1, 1]},  # length mismatch
        {"s": [0, 1], "o": [0, 1], "y": [1]},
        {"s": [0, 1], "o": [0, 1], "strata": [0.5, 1.0]},  # non-integer strata
        {"s": [[0, 1]], "o": [[0, 1]]},  # 2-D
    ],
)
def test_fairness_measures_rejects_bad_inputs(kwargs):
    with pytest.raises(InputError):
        fairness_measures(**kwargs)


def _naive_conditional(s, o, y, a) -> dict[str, float]:
    """Row-by-row pure-Python reference of the conditional metrics (paper and reference forms)."""
    rows = list(zip(s.tolist(), o.tolist(), y.tolist(), a.tolist(), strict=True))
    groups = sorted(set(a.tolist()))
    out: dict[str, float] = {}
    specs = {
        "cdp": (lambda r: True, lambda r: r[1] == 1),
        "ctprb": (lambda r: r[2] == 1, lambda r: r[1] == 1),
        "ctnrb": (lambda r: r[2] == 0, lambda r: r[1] == 0),
    }
    for name, (in_base, event) in specs.items():
        rate: dict[tuple[int, int], float] = {}
        for g in groups:
            for sv in (0, 1):
                sel = [r for r in rows if r[3] == g and r[0] == sv and in_base(r)]
                if sel:
                    rate[(sv, g)] = sum(event(r) for r in sel) / len(sel)
        both = [g for g in groups if (1, g) in rate and (0, g) in rate]
        size = {g: sum(1 for r in rows if r[3] == g) for g in groups}
        total = sum(size[g] for g in both)
        out[name] = (
            sum(size[g] / total * abs(rate[(1, g)] - rate[(0, g)]) for g in both)
            if both
            else math.nan
        )
        r1 = [rate[(1, g)] for g in groups if (1, g) in rate]
        r0 = [rate[(0, g)] for g in groups if (0, g) in rate]
        out[f"{name}_reference"] = (
            abs(sum(r1) / len(r1) - sum(r0) / len(r0)) if r1 and r0 else math.nan
        )
    return out


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 80),
    k=st.integers(1, 12),
    p_s=st.floats(0.0, 1.0),
)
def test_conditional_metrics_match_naive_reference(seed, n, k, p_s):
    rng = np.random.default_rng(seed)
    s = rng.random(n) < p_s
    o, y = rng.random(n) < 0.5, rng.random(n) < 0.6
    a = rng.integers(0, k, n) * 3 - 4  # sparse, partly negative codes
    got = fairness_measures(s, o, y, a)
    naive = _naive_conditional(s, o, y, a)
    assert same({key: got[key] for key in naive}, naive)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60), k=st.integers(1, 6))
def test_fairness_measures_invariant_to_row_permutation(seed, n, k):
    rng = np.random.default_rng(seed)
    s, o, y = (rng.random((3, n)) < 0.5).astype(int)
    a = rng.integers(0, k, n)
    perm = rng.permutation(n)
    assert same(
        fairness_measures(s, o, y, a), fairness_measures(s[perm], o[perm], y[perm], a[perm])
    )


# --------------------------------------------------------------------------- downstream accuracy


@pytest.fixture(scope="module")
def codes_xy() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.integers(0, 4, (120, 3))
    return X, X[:, 0] >= 2  # a rule every model can learn


@pytest.mark.parametrize("model", ["logistic_regression", "random_forest", "linear_regression"])
def test_downstream_accuracy_learns_a_rule(codes_xy, model):
    X, y = codes_xy
    out = downstream_accuracy(X[:80], y[:80], X[80:], y[80:], model, seed=1)
    assert out["accuracy"] == 1.0
    assert out["predictions"].dtype == np.bool_
    assert out["predictions"].tolist() == y[80:].tolist()
    # accuracy counts (TP + TN) / all against the test labels
    flipped = downstream_accuracy(X[:80], y[:80], X[80:], ~y[80:], model, seed=1)
    assert flipped["accuracy"] == 0.0


def test_downstream_accuracy_single_class_and_unseen_codes(codes_xy):
    X, y = codes_xy
    for model in ("logistic_regression", "random_forest", "linear_regression"):
        out = downstream_accuracy(X[:10], np.ones(10, bool), X[80:], y[80:], model)
        assert out["predictions"].all()
        assert out["accuracy"] == pytest.approx(y[80:].mean())
    # a test code never seen in training (one-hot encodes it as all zeros): no crash
    out = downstream_accuracy(X[:80], y[:80], np.array([[7, 0, 0], [0, 9, 9]]), [True, False])
    assert out["predictions"].shape == (2,)


def test_downstream_linear_regression_clips_before_rounding():
    # OLS fits score = x exactly; x = 5 scores 5, clipped to 1 -> True (unclipped would be 5)
    X = np.array([[0], [1]] * 4)
    out = downstream_accuracy(X, X[:, 0], np.array([[0], [1], [5]]), [0, 1, 1], "linear_regression")
    assert out["predictions"].tolist() == [False, True, True]
    assert out["accuracy"] == 1.0


def test_downstream_accuracy_seeded_and_validated(codes_xy):
    X, y = codes_xy
    noisy = y ^ (np.arange(len(y)) % 5 == 0)
    a = downstream_accuracy(X[:80], noisy[:80], X, y, "random_forest", seed=3)
    b = downstream_accuracy(X[:80], noisy[:80], X, y, "random_forest", seed=3)
    assert a["predictions"].tolist() == b["predictions"].tolist()
    assert math.isnan(downstream_accuracy(X, y, X[:0], y[:0])["accuracy"])
    with pytest.raises(InputError):
        downstream_accuracy(X, y, X, y, "mlp")  # type: ignore[arg-type]
    with pytest.raises(InputError):
        downstream_accuracy(X, y, X[:, :2], y)
    with pytest.raises(InputError):
        downstream_accuracy(X[:0], y[:0], X, y)
