"""Guarantees checked on a table privfair did not produce (``privfair.validation.check_table``).

* each verdict is the definition's, recomputed here with pandas on random tables (hypothesis):
  k-anonymity is "the smallest class over the QIs has >= k rows", t-closeness "every class's
  total variation distance to the table's distribution is <= t", the parity gap the
  difference of positive rates;
* a result shows counts and class sizes, never a value of the table (the attacker reads the
  check's metadata: a distinctive value must not appear);
* what a table alone cannot decide is refused, naming the demand, never passed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfair.schemas.errors import SpecError
from privfair.validation.table_checks import check_table

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def tables(draw):
    n = draw(st.integers(4, 40))
    zips = draw(st.lists(st.sampled_from(["a", "b", "c", None]), min_size=n, max_size=n))
    ages = draw(st.lists(st.integers(20, 23), min_size=n, max_size=n))
    sex = draw(st.lists(st.sampled_from(["F", "M"]), min_size=n, max_size=n))
    y = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    return pd.DataFrame({"zip": zips, "age": ages, "sex": sex, "y": y})


@SETTINGS
@given(frame=tables(), k=st.integers(1, 6))
def test_k_anonymity_is_the_smallest_class_against_k(frame, k):
    [r] = check_table(frame, [{"kind": "k_anonymity", "k": k, "quasi_identifiers": ["zip", "age"]}])
    sizes = frame.groupby(["zip", "age"], dropna=False).size()
    assert r.passed == bool(sizes.min() >= k)
    assert r.observed == int(sizes.min())
    assert r.n_offending == int((sizes < k).sum())
    assert (
        sorted(o["class_size"] for o in r.offending)
        == sorted(sizes[sizes < k].tolist())[: len(r.offending)]
    )


@SETTINGS
@given(frame=tables(), t=st.sampled_from([0.0, 0.1, 0.25, 0.5]))
def test_t_closeness_is_the_largest_class_distance_against_t(frame, t):
    demand = {"kind": "t_closeness", "t": t, "attribute": "sex", "quasi_identifiers": ["zip"]}
    [r] = check_table(frame, [demand])
    ref = frame["sex"].value_counts(normalize=True)
    dist = []
    for _, part in frame.groupby("zip", dropna=False):
        share = part["sex"].value_counts(normalize=True).reindex(ref.index, fill_value=0)
        dist.append(0.5 * float((share - ref).abs().sum()))
    assert r.passed == bool(max(dist) <= t + 1e-12)
    assert r.observed == pytest.approx(max(dist))


@SETTINGS
@given(frame=tables(), bound=st.sampled_from([0.0, 0.2, 1.0]))
def test_the_parity_gap_is_the_difference_of_positive_rates(frame, bound):
    demand = {
        "kind": "parity_gap",
        "max": bound,
        "protected": "sex",
        "label": "y",
        "favoured": ["M"],
        "positive": [1],
    }
    [r] = check_table(frame, [demand])
    rates = frame.groupby("sex")["y"].mean()
    if len(rates) < 2:
        assert not r.passed  # a group without rows: the gap is undefined
        return
    gap = abs(rates["F"] - rates["M"])
    assert r.passed == bool(gap <= bound + 1e-12)


def test_a_result_never_shows_a_value_of_the_table():
    rare = "Zanzibar-7731"
    frame = pd.DataFrame({"city": ["Leeds"] * 5 + [rare], "sex": ["F", "M"] * 3})
    results = check_table(
        pa.Table.from_pandas(frame),
        [
            {"kind": "k_anonymity", "k": 2, "quasi_identifiers": ["city"]},
            {"kind": "t_closeness", "t": 0.01, "attribute": "sex", "quasi_identifiers": ["city"]},
        ],
    )
    assert [r.passed for r in results] == [False, False]
    for r in results:
        shown = repr((r.observed, r.expected, r.message, r.offending))
        assert rare not in shown and "Leeds" not in shown, shown
    assert results[0].offending == [{"class_size": 1}]
    assert sorted(o["class_size"] for o in results[1].offending) == [1, 5]


@pytest.mark.parametrize(
    ("demand", "key"),
    [
        ({"kind": "retention", "min_share": 0.5}, "demands.0.kind"),
        ({"kind": "attributes_preserved", "columns": ["a"]}, "demands.0.kind"),
        ({"kind": "k_anonymity", "k": 2}, "demands.0.quasi_identifiers"),
        ({"kind": "k_anonymity", "k": 2, "quasi_identifiers": ["nope"]}, "demands.0"),
        ({"kind": "k_anonymity", "k": 0, "quasi_identifiers": ["a"]}, "demands.0"),
        (
            {
                "kind": "t_closeness",
                "t": 0.1,
                "attribute": "a",
                "reference": "input",
                "quasi_identifiers": ["a"],
            },
            "demands.0.reference",
        ),
        ({"kind": "parity_gap", "max": 0.1}, "demands.0"),
    ],
)
def test_what_a_table_alone_cannot_decide_is_refused(demand, key):
    with pytest.raises(SpecError) as e:
        check_table(pa.table({"a": np.arange(4)}), [demand])
    assert e.value.key == key
