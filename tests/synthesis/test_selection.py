"""Tree selection against the paper (spec 3.3-3.5, 4.4): the FAIR predicate's hand cases,
Greedy-PreFair optimal on saturated instances, the exact search equal to brute force over
every labelled tree, the Fig. 6 instance (optimum 30, greedy 24), and the authors' candidate
filter bug (A7) caught by the validator's fair_tree check."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfair.components.synthesis.checks import check_fair_tree
from privfair.components.synthesis.guarantees import FairTree
from privfair.components.synthesis.selection import (
    Roles,
    best_fair_tree,
    candidate_pairs,
    fair,
    kruskal,
    separator,
)


def trees(d: int):
    """Every labelled spanning tree on d nodes (Pruefer sequences)."""
    if d == 1:
        yield []
        return
    if d == 2:
        yield [(0, 1)]
        return
    for seq in itertools.product(range(d), repeat=d - 2):
        degree = [1] * d
        for v in seq:
            degree[v] += 1
        edges, seq = [], list(seq)
        for v in seq:
            leaf = min(u for u in range(d) if degree[u] == 1)
            edges.append(tuple(sorted((leaf, v))))
            degree[leaf] -= 1
            degree[v] -= 1
        a, b = [u for u in range(d) if degree[u] == 1]
        edges.append((a, b))
        yield edges


def weight(edges, w):
    return sum(w[tuple(sorted(e))] for e in edges)


def brute_force(w, roles):
    return max(weight(t, w) for t in trees(roles.d) if fair(t, roles))


def argmax_pick(scores, pairs):
    return lambda live: int(np.argmax([scores[pairs[k]] for k in live]))


def greedy(w, roles):
    pairs = candidate_pairs(roles, greedy_filter=True)
    return kruskal(pairs, roles.d, argmax_pick(w, pairs))


# --- the FAIR predicate: spec 4.4 item 6 -------------------------------------------------------
# nodes: P=0, A=1, O=2, U=3, U'=4, O2=5
R = Roles(d=6, protected=(0,), admissible=(1,), outcomes=(2, 5))


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ([(0, 2)], False),  # P-O direct
        ([(0, 3), (3, 2)], False),  # P-U-O
        ([(0, 1), (1, 2)], True),  # P-A-O
        ([(0, 3), (3, 1), (1, 4), (4, 2)], True),  # P-U-A-U-O
        ([(0, 2), (2, 1), (1, 5)], False),  # P-O1, O1-A-O2
        ([(0, 1), (1, 2), (2, 5)], True),  # P-A-O1-O2
    ],
)
def test_fair_predicate_hand_cases(edges, expected):
    assert fair(edges, R) is expected


def test_separator_is_the_admissible_neighbourhood_of_the_outcome_component():
    roles = Roles(d=5, protected=(0,), admissible=(1, 3), outcomes=(2,))
    assert separator([(0, 1), (1, 2), (2, 4), (4, 3)], roles, 2) == (1, 3)


# --- optimality ---------------------------------------------------------------------------------
def random_instance(draw_roles, d, seed):
    rng = np.random.default_rng(seed)
    w = {
        e: float(rng.integers(1, 11)) + rng.random() * 1e-3
        for e in itertools.combinations(range(d), 2)
    }
    return w


@st.composite
def instances(draw, saturated: bool):
    d = draw(st.integers(min_value=3, max_value=7))
    labels = draw(
        st.lists(st.sampled_from("PAOU"[: 3 if saturated else 4]), min_size=d, max_size=d)
    )
    labels[0], labels[1], labels[2] = "P", "A", "O"
    roles = Roles(
        d=d,
        protected=tuple(i for i, x in enumerate(labels) if x == "P"),
        admissible=tuple(i for i, x in enumerate(labels) if x == "A"),
        outcomes=tuple(i for i, x in enumerate(labels) if x == "O"),
    )
    return roles, random_instance(None, d, draw(st.integers(0, 2**16)))


@settings(max_examples=40, deadline=None)
@given(instances(saturated=True))
def test_greedy_is_optimal_on_saturated_instances(inst):
    """Spec 4.4 item 1: with every attribute labelled, noise-free Greedy-PreFair is the
    max-weight fair tree (Prop. 6)."""
    roles, w = inst
    tree = greedy(w, roles)
    assert fair(tree, roles) and len(tree) == roles.d - 1
    assert weight(tree, w) == pytest.approx(brute_force(w, roles))


@settings(max_examples=40, deadline=None)
@given(instances(saturated=False))
def test_exact_search_equals_brute_force(inst):
    """Spec 4.4 items 2 and 5: the exponential selector's search returns a fair spanning tree
    of the brute-force optimum weight, and greedy never beats it."""
    roles, w = inst
    tree, exact = best_fair_tree(w, roles)
    assert exact and fair(tree, roles) and len(tree) == roles.d - 1
    best = brute_force(w, roles)
    assert weight(tree, w) == pytest.approx(best)
    g = greedy(w, roles)
    assert fair(g, roles) and weight(g, w) <= best + 1e-9


def test_figure_6_exponential_30_greedy_24():
    """Spec 6.4: the five Adult attributes of Fig. 6 (edu admissible, sex protected, income the
    outcome, relation and age unlabelled): Exponential-PreFair's optimum weighs 30,
    Greedy-PreFair's tree 24, picking sex-age, age-edu, sex-relation, edu-income in order."""
    edu, sex, relation, age, income = range(5)
    roles = Roles(d=5, protected=(sex,), admissible=(edu,), outcomes=(income,))
    w = {e: 0.0 for e in itertools.combinations(range(5), 2)}
    for (a, b), x in {
        (sex, age): 9,
        (age, edu): 9,
        (sex, relation): 5,
        (edu, income): 1,
        (sex, edu): 8,
        (income, age): 8,
        (income, sex): 9,
        (relation, age): 5,
    }.items():
        w[tuple(sorted((a, b)))] = float(x)
    tree, exact = best_fair_tree(w, roles)
    assert exact and weight(tree, w) == 30 == brute_force(w, roles)
    pairs = candidate_pairs(roles, greedy_filter=True)
    g = kruskal(pairs, 5, argmax_pick(w, pairs))
    assert weight(g, w) == 24
    # the paper picks sex-age before age-edu: both weigh 9, our ties go to the lower pair
    assert set(g) == {(sex, age), (edu, age), (sex, relation), (edu, income)}


def test_the_search_falls_back_to_greedy_when_capped():
    roles = Roles(d=6, protected=(0,), admissible=(1,), outcomes=(2,))
    w = random_instance(None, 6, 3)
    tree, exact = best_fair_tree(w, roles, max_forests=2)
    assert not exact and fair(tree, roles) and len(tree) == 5


# --- the authors' candidate filter (A7) -------------------------------------------------------
def authors_filter(pairs, outcome, admissible):
    """The reference code's filter: removes from the list it is iterating over, so the pair
    after each removed one is never looked at."""
    candidates = list(pairs)
    for pair in candidates:
        if outcome in pair and not (set(pair) - {outcome}) <= set(admissible):
            candidates.remove(pair)
    return candidates


def test_outcome_first_no_forbidden_pair_is_a_candidate():
    """Spec 4.4 item 4, with COMPAS's column order (the outcome first): our filter leaves no
    outcome-inadmissible pair; the authors' lets (outcome, Age_Above_FourtyFive) and
    (outcome, Sex) through."""
    cols = [
        "Two_yr_Recidivism",
        "Number_of_Priors",
        "score_factor",
        "Age_Above_FourtyFive",
        "Age_Below_TwentyFive",
        "Sex",
        "Misdemeanor",
        "Race",
    ]
    roles = Roles(d=8, protected=(5, 7), admissible=(1, 6), outcomes=(0,))
    ours = candidate_pairs(roles, greedy_filter=True)
    assert not [p for p in ours if 0 in p and (set(p) - {0}) & roles.inadmissible]
    theirs = authors_filter(itertools.combinations(range(8), 2), 0, roles.admissible)
    leaked = {cols[p[1]] for p in theirs if 0 in p and p[1] in roles.inadmissible}
    assert leaked == {"Age_Above_FourtyFive", "Sex"}


def test_the_validator_catches_a_tree_built_with_the_authors_filter():
    """Kruskal on the authors' candidates, where the leaked (outcome, Sex) pair scores highest,
    returns a tree joining the outcome to Sex: the fair_tree check fails on it, and passes on
    the tree from our filter."""
    cols = ["o", "priors", "score", "age45", "age25", "sex", "misd", "race"]
    roles = Roles(d=8, protected=(5, 7), admissible=(1, 6), outcomes=(0,))
    w = {e: 1.0 for e in itertools.combinations(range(8), 2)}
    w[(0, 5)] = 100.0
    g = FairTree(
        protected=("sex", "race"),
        admissible=("priors", "misd"),
        outcomes=("o",),
        neighbours_admissible=True,
    )

    def frame(tree):
        return pd.DataFrame(
            [("tree", cols[a], cols[b]) for a, b in tree], columns=["source", "a", "b"]
        )

    theirs = authors_filter(itertools.combinations(range(8), 2), 0, roles.admissible)
    bad_tree = kruskal(theirs, 8, argmax_pick(w, theirs))
    assert (0, 5) in bad_tree
    assert not check_fair_tree(g, frame(bad_tree)).passed
    ours = candidate_pairs(roles, greedy_filter=True)
    assert check_fair_tree(g, frame(kruskal(ours, 8, argmax_pick(w, ours)))).passed
