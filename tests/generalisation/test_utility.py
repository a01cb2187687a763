"""Information loss LM and the count-query workload (dmondrian-dsabre spec 4.3, 4.4, AMB-14/15).

The toy-example LM values of spec 4.3 (dMondrian and the paper's dSabre outcome at t = 0.25);
hand-checked estimates with partial overlaps; exactness without generalisation; the AMB-15
sampling rules (arity, attributes, ranges, decision, rejection of empty queries, determinism);
a hypothesis property (estimates add up over a partition of one attribute's range); and a
brute-force, loop-per-query reference for ``estimate`` and the exact counts, also run with the
module's tiling / bitset thresholds forced small so every internal path is exercised.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfair.components.generalisation import utility as U
from privfair.components.generalisation.utility import (
    Queries,
    draw_queries,
    estimate,
    information_loss,
    query_error,
)

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)

# --------------------------------------------------------------------------------------------
# the toy table of Ex. 19 (spec 2.2): purpose (housing < car), emp (no < yes), sex
# (female < male) as ranks; decision 1 = "+"

TOY = np.array(
    [
        # purpose, emp, sex, decision        ID
        [0, 0, 0, 0],  # 1  housing no  female -
        [0, 0, 0, 0],  # 2  housing no  female -
        [0, 0, 0, 1],  # 3  housing no  female +
        [0, 0, 1, 0],  # 4  housing no  male   -
        [0, 0, 1, 1],  # 5  housing no  male   +
        [0, 1, 0, 0],  # 6  housing yes female -
        [0, 1, 0, 1],  # 7  housing yes female +
        [0, 1, 0, 1],  # 8  housing yes female +
        [0, 1, 1, 0],  # 9  housing yes male   -
        [0, 1, 1, 0],  # 10 housing yes male   -
        [0, 1, 1, 1],  # 11 housing yes male   +
        [0, 1, 1, 1],  # 12 housing yes male   +
        [1, 0, 0, 1],  # 13 car     no  female +
        [1, 0, 1, 0],  # 14 car     no  male   -
        [1, 0, 1, 1],  # 15 car     no  male   +
        [1, 1, 0, 0],  # 16 car     yes female -
        [1, 1, 1, 1],  # 17 car     yes male   +
    ]
)
TOY_ORIG = TOY[:, :3]
TOY_DEC = TOY[:, 3]
TOY_SIZES = np.array([2, 2, 2])


def labels_of(orig: np.ndarray, classes: list[set[int]], pnd: int) -> tuple[np.ndarray, ...]:
    """PND_ranges (spec 2.2) of 1-based ID classes: each PND cell becomes its class's
    [min, max]; the remaining (PD) columns stay as they are."""
    lo, hi = orig.copy(), orig.copy()
    covered = sorted(i for c in classes for i in c)
    assert covered == list(range(1, len(orig) + 1))
    for c in classes:
        rows = np.array(sorted(c)) - 1
        lo[rows, :pnd] = orig[rows, :pnd].min(axis=0)
        hi[rows, :pnd] = orig[rows, :pnd].max(axis=0)
    return lo, hi


def test_toy_lm_dmondrian():
    # spec 2.2: t = 0.25 leaves {1..5, 13, 14, 15} and {6..12, 16, 17}; purpose -> housing-car
    lo, hi = labels_of(TOY_ORIG, [{1, 2, 3, 4, 5, 13, 14, 15}, {6, 7, 8, 9, 10, 11, 12, 16, 17}], 2)
    assert (lo[:, 0] == 0).all() and (hi[:, 0] == 1).all()  # all 17 purposes generalised
    assert (lo[:, 1:] == hi[:, 1:]).all()  # emp kept, sex (PD) never generalised
    lm = information_loss(lo, hi, TOY_SIZES)
    assert lm["lm_sum"] == pytest.approx(1.0)
    assert lm["lm_norm"] == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    "last_two",
    [[{2, 8}, {13, 16}], [{2, 13}, {8, 16}]],  # the two outcomes spec 2.3 allows
)
def test_toy_lm_dsabre_paper_outcome(last_two):
    classes = [{1, 3, 4, 5, 11}, {6, 7}, {9, 12}, {14, 15}, {10, 17}, *last_two]
    lo, hi = labels_of(TOY_ORIG, classes, 2)
    generalised = lo != hi
    assert generalised.sum() == 11  # "six less generalizations" than dMondrian's 17
    unchanged = {i + 1 for i in np.flatnonzero(~generalised.any(axis=1))}
    assert unchanged == {6, 7, 9, 12, 14, 15}
    lm = information_loss(lo, hi, TOY_SIZES)
    assert lm["lm_sum"] == pytest.approx(11 / 17)
    assert lm["lm_norm"] == pytest.approx(11 / 51)
    assert round(lm["lm_norm"], 3) == 0.216


def test_toy_lm_hand_built_labels():
    """The paper's dSabre outcome written cell by cell: emp "no-yes" for IDs 1-5, 8, 11, 13, 16
    ({2, 8}, {13, 16} variant); purpose "housing-car" for IDs 10 and 17."""
    lo, hi = TOY_ORIG.copy(), TOY_ORIG.copy()
    emp_gen = np.array([1, 2, 3, 4, 5, 8, 11, 13, 16]) - 1
    lo[emp_gen, 1], hi[emp_gen, 1] = 0, 1
    purpose_gen = np.array([10, 17]) - 1
    lo[purpose_gen, 0], hi[purpose_gen, 0] = 0, 1
    lm = information_loss(lo, hi, TOY_SIZES)
    assert lm == pytest.approx({"lm_sum": 11 / 17, "lm_norm": 11 / 51})
    # PD left out of the arrays but counted as a QI attribute: same numbers
    assert information_loss(lo[:, :2], hi[:, :2], TOY_SIZES[:2], n_qi=3) == pytest.approx(lm)


def test_lm_edge_cases():
    # a one-value domain contributes 0; a full-domain label contributes 1
    lo = np.array([[0, 0, 0], [0, 2, 0]])
    hi = np.array([[0, 4, 0], [0, 2, 0]])
    lm = information_loss(lo, hi, [1, 5, 1])
    assert lm["lm_sum"] == pytest.approx(0.5)
    assert lm["lm_norm"] == pytest.approx(0.5 / 3)
    # nothing generalised -> 0; everything collapsed -> lm_norm 1
    orig = np.array([[0, 1], [2, 0]])
    assert information_loss(orig, orig, [3, 2]) == {"lm_sum": 0.0, "lm_norm": 0.0}
    full = information_loss(np.zeros((2, 2), int), np.array([[2, 1], [2, 1]]), [3, 2])
    assert full == pytest.approx({"lm_sum": 2.0, "lm_norm": 1.0})
    assert information_loss(np.zeros((0, 2), int), np.zeros((0, 2), int), [3, 2]) == {
        "lm_sum": 0.0,
        "lm_norm": 0.0,
    }


@pytest.mark.parametrize(
    ("lo", "hi", "sizes", "match"),
    [
        ([[1]], [[0]], [2], "lo <= hi"),
        ([[0]], [[2]], [2], "outside"),
        ([[-1]], [[0]], [2], "outside"),
        ([[0, 0]], [[0]], [2], "attributes"),
        ([[0]], [[0]], [2, 2], "sizes"),
        ([0], [0], [2], "2-d"),
        ([[0.5]], [[1.0]], [2], "integer"),
    ],
)
def test_label_validation(lo, hi, sizes, match):
    with pytest.raises(ValueError, match=match):
        information_loss(lo, hi, sizes)


# --------------------------------------------------------------------------------------------
# queries by hand


def make_queries(mask, v, w, dec_lo, dec_hi, sizes) -> Queries:
    """Queries built by hand; unconstrained attributes get the full range, prec is unused."""
    mask = np.asarray(mask, dtype=bool)
    sizes = np.asarray(sizes)
    m = mask.shape[0]
    v = np.where(mask, np.asarray(v), 0)
    w = np.where(mask, np.asarray(w), sizes - 1)
    return Queries(
        mask, v, w, np.asarray(dec_lo), np.asarray(dec_hi), np.zeros(m, dtype=np.int64), sizes
    )


def test_estimate_partial_overlap_by_hand():
    sizes = [4, 3]
    lo = np.array([[0, 1], [2, 0], [0, 0], [0, 2]])
    hi = np.array([[3, 2], [2, 0], [3, 2], [1, 2]])
    dec = np.array([1, 1, 0, 1])
    qs = make_queries(
        mask=[[True, True], [False, True], [True, False]],
        v=[[1, 0], [0, 2], [1, 0]],
        w=[[2, 1], [0, 2], [1, 0]],
        dec_lo=[1, 0, 0],
        dec_hi=[1, 1, 0],
        sizes=sizes,
    )
    est = estimate(qs, lo, hi, dec, sizes)
    # q0: A in [1,2], B in [0,1], decision +:
    #   row 0: 2/4 * 1/2 = 0.25; row 1: 1 * 1 = 1; row 2: decision -, out; row 3: B = {2}: 0
    # q1: B in [2,2], any decision: row 0: 1/2; row 1: 0; row 2: 1/3; row 3: 1
    # q2: A in [1,1], decision -: row 2 only, 1/4
    np.testing.assert_allclose(est, [1.25, 0.5 + 1 / 3 + 1, 0.25])


def test_estimate_exact_without_generalisation():
    rng = np.random.default_rng(3)
    sizes = np.array([7, 3, 12, 2])
    orig = rng.integers(0, sizes, size=(500, 4))
    dec = rng.integers(0, 2, size=500)
    qs = draw_queries(orig, sizes, n_queries=2000, seed=5, decision=dec)
    est = estimate(qs, orig, orig, dec, sizes)
    assert np.array_equal(est, qs.prec)
    res = query_error(orig, orig, orig, dec, sizes, n_queries=2000, seed=5)
    assert res == {
        "median_relative_error": 0.0,
        "mean_relative_error": 0.0,
        "n_queries": 2000,
        "seed": 5,
    }


def test_estimate_exact_on_never_generalised_attributes():
    """Queries touching only un-generalised attributes are answered exactly even when other
    attributes are generalised; the rest are not (here)."""
    rng = np.random.default_rng(4)
    sizes = np.array([9, 5, 2])
    orig = rng.integers(0, sizes, size=(300, 3))
    dec = rng.integers(0, 2, size=300)
    lo, hi = orig.copy(), orig.copy()
    lo[:, 0], hi[:, 0] = 0, 8  # attribute 0 fully collapsed
    qs = draw_queries(orig, sizes, n_queries=500, seed=1, decision=dec)
    est = estimate(qs, lo, hi, dec, sizes)
    exact = ~qs.mask[:, 0]
    assert np.array_equal(est[exact], qs.prec[exact])
    # attribute 0 constrained: est = count without it * |[v, w]| / 9
    rest = qs.mask[:, 0]
    without = make_queries(
        np.c_[np.zeros(len(qs), bool), qs.mask[:, 1:]],
        qs.v,
        qs.w,
        qs.dec_lo,
        qs.dec_hi,
        sizes,
    )
    base = estimate(without, orig, orig, dec, sizes)
    np.testing.assert_allclose(est[rest], base[rest] * (qs.w[rest, 0] - qs.v[rest, 0] + 1) / 9)


def test_toy_query_error_positive_after_generalisation():
    lo, hi = labels_of(TOY_ORIG, [{1, 2, 3, 4, 5, 13, 14, 15}, {6, 7, 8, 9, 10, 11, 12, 16, 17}], 2)
    res = query_error(TOY_ORIG, lo, hi, TOY_DEC, TOY_SIZES, n_queries=500, seed=0)
    assert res["n_queries"] == 500 and res["seed"] == 0
    assert res["mean_relative_error"] > 0
    assert res["median_relative_error"] >= 0


# --------------------------------------------------------------------------------------------
# the workload (AMB-15)


def test_draw_queries_rules():
    # every combination present, so no query is ever rejected and frequencies are the sampler's
    sizes = np.array([3, 2, 4, 2, 3, 2, 2])
    grid = np.array(list(itertools.product(*[range(s) for s in sizes])))
    orig = np.repeat(grid, 2, axis=0)
    dec = np.tile([0, 1], len(grid))
    qs = draw_queries(orig, sizes, n_queries=20_000, seed=11, decision=dec)
    assert len(qs) == 20_000
    arity = qs.arity
    assert arity.min() == 1 and arity.max() == 5
    np.testing.assert_allclose(np.bincount(arity)[1:] / len(qs), 0.2, atol=0.02)
    # attributes: each equally likely overall
    np.testing.assert_allclose(qs.mask.sum(0) / arity.sum(), 1 / 7, atol=0.01)
    # ranges: sorted, within the domain, full where unconstrained; v == w w.p. 1/|dom|
    assert (qs.v <= qs.w).all() and (qs.v >= 0).all() and (qs.w < sizes).all()
    assert (qs.v[~qs.mask] == 0).all()
    assert (qs.w[~qs.mask] == np.broadcast_to(sizes - 1, qs.w.shape)[~qs.mask]).all()
    j = 2
    on = qs.mask[:, j]
    assert np.mean(qs.v[on, j] == qs.w[on, j]) == pytest.approx(1 / sizes[j], abs=0.03)
    # decision: {0}, {1} w.p. 1/4 each, both w.p. 1/2
    kinds = qs.dec_lo * 2 + qs.dec_hi  # 0: {0}; 1: both; 3: {1}
    assert set(np.unique(kinds)) == {0, 1, 3}
    np.testing.assert_allclose(
        np.bincount(kinds, minlength=4)[[0, 1, 3]] / len(qs), [0.25, 0.5, 0.25], atol=0.02
    )
    # attrs: the constrained indices, padded
    attrs = qs.attrs
    assert attrs.shape == (len(qs), 5)
    assert ((attrs >= 0).sum(1) == arity).all()


def test_draw_queries_small_q_and_max_arity():
    orig = np.array([[0, 1], [1, 0], [1, 1]])
    dec = np.array([0, 1, 1])
    qs = draw_queries(orig, [2, 2], n_queries=300, seed=2, decision=dec)
    assert set(np.unique(qs.arity)) == {1, 2}  # min(5, q)
    qs1 = draw_queries(orig, [2, 2], n_queries=300, seed=2, max_arity=1, decision=dec)
    assert (qs1.arity == 1).all()


def test_draw_queries_rejects_empty_and_is_deterministic():
    rng = np.random.default_rng(0)
    sizes = np.array([40, 30, 25, 2])
    orig = rng.integers(0, sizes, size=(60, 4))  # sparse: many candidate queries are empty
    dec = rng.integers(0, 2, size=60)
    a = draw_queries(orig, sizes, n_queries=3000, seed=7, decision=dec)
    b = draw_queries(orig, sizes, n_queries=3000, seed=7, decision=dec)
    c = draw_queries(orig, sizes, n_queries=3000, seed=8, decision=dec)
    small = draw_queries(orig, sizes, n_queries=100, seed=7, decision=dec)
    assert (a.prec > 0).all()
    for f in ("mask", "v", "w", "dec_lo", "dec_hi", "prec"):
        assert np.array_equal(getattr(a, f), getattr(b, f))
        assert np.array_equal(getattr(small, f), getattr(a, f)[:100])  # a prefix
    assert not np.array_equal(a.v, c.v)
    assert a.seed == 7
    # the exact counts are right
    assert np.array_equal(a.prec[:300], brute_force(a, orig, orig, dec)[:300])
    # and query_error is reproducible
    lo, hi = np.maximum(orig - 2, 0), np.minimum(orig + 2, sizes - 1)
    lo[:, 3], hi[:, 3] = orig[:, 3], orig[:, 3]
    r1 = query_error(orig, lo, hi, dec, sizes, n_queries=500, seed=3)
    r2 = query_error(orig, lo, hi, dec, sizes, n_queries=500, seed=3)
    assert r1 == r2


def test_draw_queries_validation():
    orig = np.array([[0, 1]])
    with pytest.raises(ValueError, match="empty"):
        draw_queries(np.zeros((0, 2), int), [2, 2], decision=np.zeros(0, int))
    with pytest.raises(ValueError, match="0/1"):
        draw_queries(orig, [2, 2], decision=[2])
    with pytest.raises(ValueError, match="shape"):
        draw_queries(orig, [2, 2], decision=[0, 1])
    with pytest.raises(ValueError, match="outside"):
        draw_queries(orig, [2, 1], decision=[0])
    with pytest.raises(ValueError, match="max_arity"):
        draw_queries(orig, [2, 2], max_arity=0, decision=[0])
    assert len(draw_queries(orig, [2, 2], n_queries=0, decision=[0])) == 0
    qs = draw_queries(orig, [2, 2], n_queries=5, decision=[0])
    with pytest.raises(ValueError, match="attributes"):
        estimate(qs, [[0]], [[0]], [0], [2])
    with pytest.raises(ValueError, match="sizes"):
        estimate(qs, [[0, 1]], [[0, 1]], [0], [3, 2])


# --------------------------------------------------------------------------------------------
# brute force reference and properties


def brute_force(queries: Queries, lo, hi, decision) -> np.ndarray:
    """est of every query by a plain loop over queries, rows and attributes (spec 4.4)."""
    lo, hi = np.asarray(lo), np.asarray(hi)
    out = np.zeros(len(queries))
    for i in range(len(queries)):
        total = 0.0
        for r in range(lo.shape[0]):
            if not queries.dec_lo[i] <= decision[r] <= queries.dec_hi[i]:
                continue
            p = 1.0
            for j in range(lo.shape[1]):
                if queries.mask[i, j]:
                    a, b = int(lo[r, j]), int(hi[r, j])
                    v, w = int(queries.v[i, j]), int(queries.w[i, j])
                    p *= max(0, min(b, w) - max(a, v) + 1) / (b - a + 1)
            total += p
        out[i] = total
    return out


@st.composite
def tables(draw, max_rows: int = 25, max_q: int = 4):
    """Original ranks, a decision, and labels [lo, hi] containing them: either class ranges
    (PND_ranges of random classes) or arbitrary random intervals; the last attribute (PD) kept."""
    q = draw(st.integers(1, max_q))
    sizes = np.array(draw(st.lists(st.integers(1, 6), min_size=q, max_size=q)))
    n = draw(st.integers(1, max_rows))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    orig = rng.integers(0, sizes, size=(n, q))
    dec = rng.integers(0, 2, size=n)
    if draw(st.booleans()):
        classes = rng.integers(0, draw(st.integers(1, 6)), size=n)
        lo, hi = orig.copy(), orig.copy()
        for c in np.unique(classes):
            rows = classes == c
            lo[rows, :-1] = orig[rows, :-1].min(axis=0)
            hi[rows, :-1] = orig[rows, :-1].max(axis=0)
    else:
        lo = orig - rng.integers(0, orig + 1)
        hi = orig + rng.integers(0, sizes - orig)
    return orig, lo, hi, dec, sizes, seed


@SETTINGS
@given(tables())
def test_estimate_and_prec_match_brute_force(data):
    orig, lo, hi, dec, sizes, seed = data
    qs = draw_queries(orig, sizes, n_queries=40, seed=seed, max_arity=3, decision=dec)
    assert (qs.prec > 0).all()
    assert np.array_equal(qs.prec, brute_force(qs, orig, orig, dec))
    np.testing.assert_allclose(estimate(qs, lo, hi, dec, sizes), brute_force(qs, lo, hi, dec))


@pytest.mark.parametrize(
    "force",
    [
        {},
        {"_TILE_BYTES": 64, "_MIN_CHUNK": 1, "_MAX_CHUNK": 3},  # many row blocks and chunks
        {"_PREFIX_BYTES": 0, "_BITS_BYTES": 8},  # bitsets built per query
        {"_DRAW_ROUND": 7},  # many small candidate rounds
    ],
)
def test_internal_paths_match_brute_force(monkeypatch, force):
    for name, value in force.items():
        monkeypatch.setattr(U, name, value)
    rng = np.random.default_rng(9)
    # wide domains (the per-row factor path), narrow ones (the factor-table and grid paths)
    sizes = np.array([60, 3, 25, 4, 2])
    orig = rng.integers(0, sizes, size=(150, 5))
    dec = rng.integers(0, 2, size=150)
    lo = np.maximum(orig - rng.integers(0, 9, size=orig.shape), 0)
    hi = np.minimum(orig + rng.integers(0, 9, size=orig.shape), sizes - 1)
    lo[:, 4], hi[:, 4] = orig[:, 4], orig[:, 4]
    lo[:, 1], hi[:, 1] = orig[:, 1], orig[:, 1]
    qs = draw_queries(orig, sizes, n_queries=150, seed=1, decision=dec)
    assert np.array_equal(qs.prec, brute_force(qs, orig, orig, dec))
    np.testing.assert_allclose(estimate(qs, lo, hi, dec, sizes), brute_force(qs, lo, hi, dec))


@SETTINGS
@given(tables(max_rows=40), st.data())
def test_estimates_add_up_over_a_partition(data, draw):
    """Splitting one attribute's full range into consecutive pieces: the estimates of the pieces
    sum to the estimate with that attribute unconstrained (and likewise for the decision)."""
    orig, lo, hi, dec, sizes, seed = data
    q = len(sizes)
    base = draw_queries(orig, sizes, n_queries=8, seed=seed, decision=dec)
    j = draw.draw(st.integers(0, q - 1))
    cuts = sorted(set(draw.draw(st.lists(st.integers(1, max(1, sizes[j] - 1)), max_size=4))))
    cuts = [c for c in cuts if c < sizes[j]]
    pieces = list(zip([0, *cuts], [c - 1 for c in cuts] + [sizes[j] - 1], strict=True))
    without = make_queries(
        base.mask & (np.arange(q) != j), base.v, base.w, base.dec_lo, base.dec_hi, sizes
    )
    total = estimate(without, lo, hi, dec, sizes)
    parts = np.zeros(len(base))
    for a, b in pieces:
        mask = without.mask.copy()
        mask[:, j] = True
        v, w = without.v.copy(), without.w.copy()
        v[:, j], w[:, j] = a, b
        parts += estimate(
            make_queries(mask, v, w, base.dec_lo, base.dec_hi, sizes), lo, hi, dec, sizes
        )
    np.testing.assert_allclose(parts, total, rtol=1e-9, atol=1e-9)
    # the decision: {0} + {1} = both
    m = len(base)
    one = [
        make_queries(without.mask, without.v, without.w, [d] * m, [d] * m, sizes) for d in (0, 1)
    ]
    both = make_queries(without.mask, without.v, without.w, [0] * m, [1] * m, sizes)
    np.testing.assert_allclose(
        estimate(one[0], lo, hi, dec, sizes) + estimate(one[1], lo, hi, dec, sizes),
        estimate(both, lo, hi, dec, sizes),
    )


def test_scale_smoke():
    """A few thousand queries on a mid-sized table run and agree with a brute-force sample."""
    rng = np.random.default_rng(2)
    sizes = np.array([70, 9, 16, 7, 14, 6, 2])
    n = 12_000
    orig = rng.integers(0, sizes, size=(n, len(sizes)))
    dec = rng.integers(0, 2, size=n)
    order = np.lexsort(orig.T[::-1])
    classes = np.empty(n, int)
    classes[order] = np.arange(n) // 4
    srt = np.argsort(classes, kind="stable")
    starts = np.arange(0, n, 4)
    lo, hi = orig.copy(), orig.copy()
    lo[srt, :-1] = np.repeat(np.minimum.reduceat(orig[srt, :-1], starts), 4, axis=0)[:n]
    hi[srt, :-1] = np.repeat(np.maximum.reduceat(orig[srt, :-1], starts), 4, axis=0)[:n]
    qs = draw_queries(orig, sizes, n_queries=3000, seed=0, decision=dec)
    est = estimate(qs, lo, hi, dec, sizes)
    sample = qs._subset(np.arange(0, 3000, 500))
    np.testing.assert_allclose(est[::500], brute_force(sample, lo, hi, dec))
    assert np.array_equal(sample.prec, brute_force(sample, orig, orig, dec))


def test_more_validation():
    with pytest.raises(ValueError, match="same shape"):
        information_loss([[0], [0]], [[0]], [1])
    with pytest.raises(ValueError, match="positive"):
        information_loss([[0]], [[0]], [0])
    with pytest.raises(ValueError, match="n_qi"):
        information_loss([[0]], [[0]], [1], n_qi=0)
    with pytest.raises(ValueError, match="n_queries"):
        draw_queries([[0]], [1], n_queries=-1, decision=[0])
    with pytest.raises(ValueError, match="at least one"):
        draw_queries(np.zeros((1, 0), int), np.zeros(0, int), decision=[0])
    with pytest.raises(ValueError, match="same shape"):
        query_error([[0, 0]], [[0]], [[0]], [0], [1])


def test_draw_gives_up_when_nothing_is_accepted(monkeypatch):
    # one row at rank 0 of two 1000-value domains: almost every candidate is empty
    monkeypatch.setattr(U, "_DRAW_ROUND", 1)
    monkeypatch.setattr(U, "_MAX_EMPTY_ROUNDS", 3)
    with pytest.raises(ValueError, match="non-zero count"):
        draw_queries([[0, 0]], [1000, 1000], n_queries=5, seed=0, max_arity=2, decision=[1])


def test_dense_ids_compress_wide_keys():
    rng = np.random.default_rng(1)
    cols = [rng.integers(0, 3, size=400) * 10**6 for _ in range(5)]  # radix 3e6 each: > 2**62
    ids = U._dense_ids(cols, [3 * 10**6] * 5)
    rows = np.stack(cols, axis=1)
    _, expected = np.unique(rows, axis=0, return_inverse=True)
    # equal rows <-> equal ids
    assert len(np.unique(ids)) == len(np.unique(expected))
    pairs = np.unique(np.c_[ids, expected.reshape(-1)], axis=0)
    assert len(pairs) == len(np.unique(ids))


def test_many_distinct_labels_match_brute_force():
    """Eight wide attributes: the row key needs compressing, most factors are computed per row."""
    rng = np.random.default_rng(5)
    sizes = np.full(8, 400)
    sizes[-1] = 2
    orig = rng.integers(0, sizes, size=(800, 8))
    dec = rng.integers(0, 2, size=800)
    lo = np.maximum(orig - rng.integers(0, 30, size=orig.shape), 0)
    hi = np.minimum(orig + rng.integers(0, 30, size=orig.shape), sizes - 1)
    lo[:, -1], hi[:, -1] = orig[:, -1], orig[:, -1]
    qs = draw_queries(orig, sizes, n_queries=40, seed=3, decision=dec)
    assert np.array_equal(qs.prec, brute_force(qs, orig, orig, dec))
    np.testing.assert_allclose(estimate(qs, lo, hi, dec, sizes), brute_force(qs, lo, hi, dec))
