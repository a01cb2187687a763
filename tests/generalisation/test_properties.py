"""Property tests of the generalisation contract on random tables (hypothesis): Lemma 8 and
Theorems 10/15/20/23 hold on every release, and the structural invariants of spec 2.2-2.3."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from privfair.components.generalisation.audit import build_audit
from privfair.components.generalisation.checks import labels_of, p_minus_of
from privfair.components.generalisation.dmondrian import dmondrian
from privfair.components.generalisation.dsabre import dichotomize, dsabre
from privfair.components.generalisation.examples import table as random_table
from privfair.components.generalisation.inputs import prepare
from privfair.components.generalisation.itemsets import audit_itemsets
from privfair.components.generalisation.measures import t_max, tau
from privfair.components.generalisation.params import DMondrianParams, DSabreParams

CASES = st.tuples(
    st.integers(0, 10_000),  # table seed
    st.floats(0.0, 1.0),  # t as a share of t_max
    st.integers(1, 4),  # k
    st.sampled_from(["dmondrian", "dsabre"]),
)


def _k_over(prep, k: int) -> str:
    """k over q-blocks where each PD group holds k rows, else over classes."""
    a, b, c, d = prep.counts
    return "q_blocks" if min(a + b, c + d) >= k else "classes"


def _run(seed, share, k, name):
    table = random_table(seed)
    prep = prepare(table, None)
    t = math.floor(share * t_max(prep.p_minus) * 1e6) / 1e6
    k = min(k, table.num_rows)
    common = {"t": t, "k": k, "k_over": _k_over(prep, k), "single_class": "allow"}
    if name == "dmondrian":
        return table, prep, t, k, dmondrian(table, DMondrianParams(**common, utility_queries=0))
    return table, prep, t, k, dsabre(table, DSabreParams(**common, seed=seed, utility_queries=0))


@settings(max_examples=40, deadline=None)
@given(case=CASES)
def test_every_itemset_within_the_bounds_at_t_eff(case):
    table, prep, t, k, result = _run(*case)
    frame = build_audit(table, result.table, result.sidecars["lineage"])
    t_eff = max(t, prep.tau_r)
    found = audit_itemsets(labels_of(frame), p_minus_of(frame), t_eff, random_itemsets=200, seed=1)
    assert found.violations == 0, found.offenders[:3]
    assert found.max_tau <= t_eff + 1e-9


@settings(max_examples=40, deadline=None)
@given(case=CASES)
def test_structure(case):
    table, prep, t, k, result = _run(*case)
    lineage = result.sidecars["lineage"]
    # each input row's class (the rows are published in an order of their values)
    cls = np.empty(table.num_rows, dtype=np.int64)
    cls[lineage.column("row_id").to_numpy()] = lineage.column("class").to_numpy()
    sizes = np.bincount(cls)
    assert sizes.sum() == table.num_rows and (sizes > 0).all()  # I1: a partition
    assert sizes.min() >= max(k, 1)  # I4 / C7
    cell = prep.cell
    counts = np.stack([np.bincount(cls[cell == j], minlength=len(sizes)) for j in range(4)], 1)
    if _k_over(prep, k) == "q_blocks":  # C7 over q-blocks: each group of a class 0 or >= k
        groups = np.stack([counts[:, 0] + counts[:, 1], counts[:, 2] + counts[:, 3]], 1)
        assert ((groups == 0) | (groups >= k)).all()
    taus = tau(*counts.T, prep.p_minus)
    assert (taus <= max(t, prep.tau_r) + 1e-12).all()  # I2 / C5
    if t < prep.tau_r:
        assert len(sizes) == 1
    if case[3] == "dsabre":  # I5, I7: the leaves are Dichotomize's, whatever the seed
        want = sorted(dichotomize(prep.counts, t, k, prep.p_minus, _k_over(prep, k)))
        assert sorted(map(tuple, counts.tolist())) == want


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(-50, 50) | st.integers(-(2**62), 2**62), min_size=1, max_size=4).flatmap(
        lambda bounds: st.lists(
            st.tuples(*[st.integers(min(0, b), max(0, b)) for b in bounds]), min_size=1
        )
    )
)
def test_row_codes_are_the_ids_of_a_row_wise_unique(rows):
    """The mixed-radix packing (and its row-wise fallback when the ranges overflow int64)
    numbers the distinct rows exactly as ``np.unique(axis=0)`` does."""
    from privfair.components.generalisation.itemsets import row_codes

    cols = [np.array(c, dtype=np.int64) for c in zip(*rows, strict=True)]
    want = np.unique(np.column_stack(cols), axis=0, return_inverse=True)[1].ravel()
    np.testing.assert_array_equal(row_codes(cols), want)


def _same_labels(a, b) -> None:
    assert a.names == b.names
    for f in ("lo", "hi", "sizes", "cell"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))


@settings(max_examples=30, deadline=None)
@given(case=CASES)
def test_the_report_reads_the_labels_the_audit_frame_holds(case):
    """The report's discrimination figure reads the labels without building the audit frame
    (``release_labels``, ``original_labels``); they are the frame's, to the last bit."""
    from privfair.components.generalisation.audit import (
        original_audit,
        original_labels,
        release_labels,
    )

    table, _, _, _, result = _run(*case)
    lineage = result.sidecars["lineage"]
    labels, p_minus = release_labels(table, result.table, lineage)
    frame = build_audit(table, result.table, lineage)
    _same_labels(labels, labels_of(frame))
    assert p_minus == p_minus_of(frame)
    labels, p_minus = original_labels(table)
    frame = original_audit(table)
    _same_labels(labels, labels_of(frame))
    assert p_minus == p_minus_of(frame)


@settings(max_examples=40, deadline=None)
@given(case=CASES)
def test_labels_materialised_in_order_are_the_sorted_release(case):
    """``published_table`` orders the rows on stand-ins and builds the labels once, in that
    order; the result is, byte for byte, the table with every label in place put in canonical
    order (``publish_in_order``)."""
    import pyarrow as pa

    from privfair.components.core.order import publish_in_order
    from privfair.components.generalisation.publish import (
        class_ranges,
        group_column,
        group_field,
        published_table,
    )

    table, prep, _, _, result = _run(*case)
    lineage = result.sidecars["lineage"]
    classes = np.empty(table.num_rows, dtype=np.int64)
    classes[lineage.column("row_id").to_numpy()] = lineage.column("class").to_numpy()
    lo, hi = class_ranges(prep.ranks, classes)
    naive = prep.table
    for j, d in enumerate(prep.domains):
        i = naive.schema.get_field_index(d.name)
        naive = naive.set_column(i, d.field(naive.schema.field(i)), d.to_arrow(lo[:, j], hi[:, j]))
    if prep.pd_as_groups:
        i = naive.schema.get_field_index(prep.pd)
        field = group_field(naive.schema.field(i), prep.roles[prep.pd])
        naive = naive.set_column(i, field, group_column(prep.protected))
    ids = pa.table({"row_id": pa.array(np.arange(table.num_rows)), "class": pa.array(classes)})
    want = publish_in_order(naive, ids)
    got = published_table(prep, classes, lo, hi)
    assert got[0].equals(want[0], check_metadata=True)
    assert got[1].equals(want[1], check_metadata=True)
    assert result.table.equals(want[0], check_metadata=True)


@settings(max_examples=300, deadline=None)
@given(
    st.floats(0.0, 0.99, allow_nan=False),
    st.floats(0.0, 1.0, allow_nan=False),
    st.floats(0.0, 1.0, allow_nan=False),
)
def test_the_utility_sweep_never_asks_for_t_below_tau_r(tau_r, share, t_share):
    """The report's utility-against-t sweep rounds its grid to 4 decimals; a value rounded below
    tau(R) would be refused and take every plot of the report with it (a 3M-row release's
    tau(R) = 0.08395 rounded to 0.0839)."""
    from privfair.components.generalisation.figures import sweep_grid

    top = tau_r + share * (1.0 - tau_r)
    t = tau_r + t_share * (top - tau_r)
    grid = sweep_grid(tau_r, top, t)
    assert min(grid) >= tau_r and t in grid
    assert max(grid) <= max(round(top, 4), t)


_CELL = st.none() | st.lists(st.sampled_from(["a", "b", "c", "d", "zz"]), max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(_CELL, max_size=30), st.lists(st.integers(0, 30), max_size=4), st.booleans())
def test_a_value_set_is_read_back_as_its_slice_of_the_domain(cells, cuts, sliced):
    """``Domain.from_arrow`` on a list column: (first, last) rank of a cell that is a non-empty
    contiguous ascending slice of the domain, (-1, -1) for anything else (an unknown value, a
    gap, a wrong order, an empty or null cell), as a reading of each cell on its own gives,
    however the column is cut into chunks (slices of one array, or arrays of their own, as a
    release read back from its row groups holds them)."""
    import pyarrow as pa

    from privfair.components.generalisation.domains import Domain

    values = ["a", "b", "c", "d"]
    domain = Domain.of("x", pa.chunked_array([pa.array(values)]), "nominal")
    whole = pa.array(cells, pa.list_(pa.string()))
    bounds = [0, *sorted(min(c, len(cells)) for c in cuts), len(cells)]
    chunks = [whole.slice(a, b - a) for a, b in zip(bounds, bounds[1:], strict=False)]
    if not sliced:  # each chunk an array of its own, its offsets from 0
        chunks = [pa.concat_arrays([c]) for c in chunks]
    lo, hi = domain.from_arrow(pa.chunked_array(chunks, whole.type))
    for i, cell in enumerate(cells):
        ranks = [values.index(v) if v in values else -1 for v in cell or []]
        ok = bool(ranks) and min(ranks) >= 0 and ranks == list(range(ranks[0], ranks[-1] + 1))
        assert (lo[i], hi[i]) == ((ranks[0], ranks[-1]) if ok else (-1, -1)), cell


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-5, 5) | st.integers(-(2**40), 2**40), max_size=50))
def test_dense_codes_are_the_ids_of_a_unique(key):
    from privfair.components.generalisation.itemsets import dense_codes

    key = np.array(key, dtype=np.int64)
    want = np.unique(key, return_inverse=True)[1].ravel()
    np.testing.assert_array_equal(dense_codes(key), want)


_PD_VALUE = st.none() | st.sampled_from(["protected", "unprotected", "White", "Black", ""])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(_PD_VALUE, _PD_VALUE, st.booleans()), min_size=1, max_size=30),
    st.booleans(),
)
def test_pd_groups_compares_each_row_as_its_objects_do(rows, groups):
    """C1 (PD attribute) compares each distinct (published, wanted) pair once; its verdict and
    its count of rows not publishing their own value are those of comparing every row's
    values, a null publishing a null."""
    import pandas as pd
    import pyarrow as pa

    from privfair.components.core.evidence import _audited
    from privfair.components.generalisation import guarantees as G
    from privfair.components.generalisation.checks import check_pd_groups

    out, inp, prot = zip(*rows, strict=True)
    frame = pd.DataFrame(
        {
            "__retained": np.ones(len(rows), dtype=bool),
            "__out_col__race": _audited(pa.chunked_array([pa.array(out, pa.string())])),
            "__in_col__race": _audited(pa.chunked_array([pa.array(inp, pa.string())])),
            "__protected": np.array(prot, dtype=np.int8),
            "__pd_out": pd.factorize(pd.Series(out, dtype=object), use_na_sentinel=False)[0],
        }
    )
    got = check_pd_groups(G.PublishedGroups(id="C1.pd", attribute="race", groups=groups), frame)
    # the comparison of every row's objects, as the checker made it before
    objects = frame["__out_col__race"].to_numpy(dtype=object)
    want = (
        np.where(np.array(prot), "protected", "unprotected").astype(object)
        if groups
        else frame["__in_col__race"].to_numpy(dtype=object)
    )
    same = [a == b or (pd.isna(a) and pd.isna(b)) for a, b in zip(objects, want, strict=True)]
    wrong = ~np.array(same, dtype=bool)
    assert (not wrong.any()) or not got.passed
    if not got.passed and wrong.any():
        assert f"{int(wrong.sum())} of {len(rows)} rows do not publish" in got.message
    rows_off = sum(o["rows"] for o in got.offending) if not got.passed else 0
    assert rows_off == int(wrong.sum())


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.lists(st.sampled_from(["White", "Black", "", "é", "Other"]), max_size=40),
        st.lists(st.integers(-3, 3) | st.integers(-(2**62), 2**62), max_size=40),
        st.lists(st.sampled_from([0.0, -0.0, 1.5, -2.0]), max_size=40),
        st.lists(st.booleans(), max_size=40),
    ),
    st.integers(1, 4),
)
def test_the_pd_ranks_codes_are_those_of_np_unique(values, pieces):
    """The utility measures' PD codes (``_sorted_codes``) are ``np.unique``'s inverse of the
    column's values, however it is chunked."""
    import pyarrow as pa

    from privfair.components.generalisation.publish import _sorted_codes

    whole = pa.array(values)
    step = max(1, len(values) // pieces)
    column = pa.chunked_array(
        [whole.slice(a, step) for a in range(0, len(values), step)] or [whole], whole.type
    )
    want = np.unique(np.array(values, dtype=object), return_inverse=True)[1].ravel()
    np.testing.assert_array_equal(_sorted_codes(column), want)
