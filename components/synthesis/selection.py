"""Which 2-way marginals to measure: the tree selection of MST, Greedy-PreFair (Algorithm 2)
and Exponential-PreFair (Algorithm 1, corrected), and the fairness predicate they share with
the validator (spec 3.3-3.5).

A tree over the attributes is **fair** when, after deleting the admissible attributes, no
connected component holds both a protected attribute and an outcome: every tree path from a
protected attribute to an outcome then passes through an admissible one, whatever the edges'
orientation (Def. 2, Prop. 1), so a model that factorises over the tree makes each outcome
independent of the protected attributes given the admissible ones (Prop. 3).

>>> roles = Roles(d=4, protected=(0,), admissible=(1,), outcomes=(2,))
>>> fair([(0, 1), (1, 2), (2, 3)], roles), fair([(0, 3), (3, 2), (1, 2)], roles)
(True, False)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Roles",
    "fair",
    "components",
    "candidate_pairs",
    "kruskal",
    "best_fair_tree",
    "edge_scores",
    "separator",
    "tree_path",
    "DisjointSets",
]

Edge = tuple[int, int]


@dataclass(frozen=True)
class Roles:
    """Attribute indices ``0..d-1`` by role: protected (P), admissible (A), outcomes (O); the
    others are unlabelled (U)."""

    d: int
    protected: tuple[int, ...] = ()
    admissible: tuple[int, ...] = ()
    outcomes: tuple[int, ...] = ()

    @property
    def inadmissible(self) -> set[int]:
        """Every attribute that is neither admissible nor an outcome (P and U)."""
        return set(range(self.d)) - set(self.admissible) - set(self.outcomes)


class DisjointSets:
    """Union-find over ``0..n-1`` (path halving; ``union`` is False when already joined)."""

    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        p = self.parent
        while p[x] != x:
            p[x] = p[p[x]]
            x = p[x]
        return x

    def union(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.parent[max(ra, rb)] = min(ra, rb)
        return True


def components(edges: Sequence[Edge], nodes: Sequence[int]) -> list[set[int]]:
    """Connected components of the graph on ``nodes`` with the ``edges`` between them."""
    nodes = list(nodes)
    index = {v: i for i, v in enumerate(nodes)}
    dsu = DisjointSets(len(nodes))
    for a, b in edges:
        if a in index and b in index:
            dsu.union(index[a], index[b])
    groups: dict[int, set[int]] = {}
    for v in nodes:
        groups.setdefault(dsu.find(index[v]), set()).add(v)
    return list(groups.values())


def fair(edges: Sequence[Edge], roles: Roles) -> bool:
    """The FAIR predicate (spec 3.5) of a forest: no component of the forest without the
    admissible attributes holds both a protected attribute and an outcome."""
    keep = [v for v in range(roles.d) if v not in set(roles.admissible)]
    prot, outs = set(roles.protected), set(roles.outcomes)
    return not any(c & prot and c & outs for c in components(edges, keep))


def separator(edges: Sequence[Edge], roles: Roles, outcome: int) -> tuple[int, ...]:
    """S_o (spec 4.2): the admissible attributes adjacent to the component of ``outcome`` in
    the forest without admissible attributes; in a fair tree they separate it from every
    protected attribute."""
    A = set(roles.admissible)
    keep = [v for v in range(roles.d) if v not in A]
    comp = next(c for c in components(edges, keep) if outcome in c)
    adj = {b for a, b in edges if a in comp and b in A} | {
        a for a, b in edges if b in comp and a in A
    }
    return tuple(sorted(adj))


def candidate_pairs(roles: Roles, greedy_filter: bool) -> list[Edge]:
    """Every attribute pair ``(i, j)``, ``i < j``; with ``greedy_filter`` (Algorithm 2, line 6)
    without the pairs joining an outcome to an inadmissible attribute (P or U). Outcome-outcome
    pairs stay (spec A8). Built as a new list, never by removing from the one being read (the
    authors' filter skipped candidates that way, spec A7)."""
    pairs = list(itertools.combinations(range(roles.d), 2))
    if not greedy_filter:
        return pairs
    outs, bad = set(roles.outcomes), roles.inadmissible
    return [(i, j) for i, j in pairs if not ((i in outs and j in bad) or (j in outs and i in bad))]


def kruskal(candidates: Sequence[Edge], d: int, pick: Callable[[list[int]], int]) -> list[Edge]:
    """MST's private Kruskal (spec 1.3, Algorithm 2 lines 9-12): d - 1 rounds, each choosing,
    by ``pick(indices into candidates)`` -> position in that list, one candidate pair that
    joins two components. With an arg-max ``pick`` it is Kruskal's maximum spanning tree."""
    dsu = DisjointSets(d)
    chosen: list[Edge] = []
    for _ in range(d - 1):
        live = [k for k, (i, j) in enumerate(candidates) if dsu.find(i) != dsu.find(j)]
        if not live:
            break
        i, j = candidates[live[pick(live)]]
        dsu.union(i, j)
        chosen.append((i, j))
    return chosen


def best_fair_tree(
    weights: Mapping[Edge, float], roles: Roles, max_forests: int = 5_000_000
) -> tuple[list[Edge], bool]:
    """The fair spanning tree of largest total weight, exactly: ``(edges, exact)``.

    A tree's fairness depends only on its edges among the inadmissible-or-outcome attributes
    N = P u U u O (a forest F), and given F the best completion is a maximum spanning tree
    of the graph where F's components are contracted and only edges touching an admissible
    attribute remain. So the optimum is the best, over the fair forests F of N, of w(F) plus
    that completion: every fair forest is enumerated once (edges added in increasing order,
    a forest pruned as soon as a component joins P and O, which no added edge can undo).
    This replaces the paper's best-first search over partial trees (Alg. 1, lines 9-15, with
    the labelled de-duplication the authors' code lacked, spec A6) with the same optimum in
    |fair forests of N| x O(d^2) instead of up to d^(d-2) states.

    When more than ``max_forests`` forests would be enumerated, it returns the greedy tree
    (Kruskal on the filtered pairs) and ``exact=False`` (spec 3.4, item 4).
    """
    d = roles.d
    A = set(roles.admissible)
    if not A:
        raise ValueError("a fair tree needs at least one admissible attribute")
    N = [v for v in range(d) if v not in A]
    prot, outs = set(roles.protected), set(roles.outcomes)
    w = {tuple(sorted(e)): float(x) for e, x in weights.items()}
    n_edges = [e for e in itertools.combinations(N, 2)]
    # edges touching an admissible attribute, heaviest first (ties: lowest pair first)
    a_edges = sorted(
        (e for e in itertools.combinations(range(d), 2) if e[0] in A or e[1] in A),
        key=lambda e: (-w.get(e, 0.0), e),
    )
    best: tuple[float, list[Edge]] = (-np.inf, [])
    count = 0

    def complete(forest: list[Edge]) -> tuple[float, list[Edge]]:
        dsu = DisjointSets(d)
        for a, b in forest:
            dsu.union(a, b)
        total = sum(w.get(e, 0.0) for e in forest)
        edges = list(forest)
        for a, b in a_edges:
            if dsu.union(a, b):
                total += w.get((a, b), 0.0)
                edges.append((a, b))
        return total, edges

    def grow(start: int, forest: list[Edge], comp: dict[int, frozenset]) -> None:
        nonlocal best, count
        count += 1
        if count > max_forests:
            raise _TooMany
        total, edges = complete(forest)
        if total > best[0] + 1e-12:
            best = (total, edges)
        for k in range(start, len(n_edges)):
            a, b = n_edges[k]
            ca, cb = comp[a], comp[b]
            if ca is cb:
                continue
            merged = ca | cb
            if merged & prot and merged & outs:
                continue
            new = dict(comp)
            for v in merged:
                new[v] = merged
            grow(k + 1, [*forest, (a, b)], new)

    try:
        grow(0, [], {v: frozenset([v]) for v in N})
    except _TooMany:
        pairs = candidate_pairs(roles, greedy_filter=True)
        scores = [w.get(e, 0.0) for e in pairs]
        return kruskal(pairs, d, lambda live: int(np.argmax([scores[k] for k in live]))), False
    return sorted(tuple(sorted(e)) for e in best[1]), True


class _TooMany(Exception):
    pass


def edge_scores(
    tables: Sequence[np.ndarray], pairs: Sequence[Edge], estimate: Sequence[np.ndarray]
) -> np.ndarray:
    """q_ij = || M_ij(D) - N^ mu^_i (x) mu^_j ||_1 for each pair (spec 1.3): the L1 distance
    between the true 2-way count table and the independent model's, ``estimate`` holding the
    fitted 1-way count vectors (each summing to the model's total N^). Adding or removing one
    record changes one cell of M_ij by 1, so each score has sensitivity 1.

    Parameters
    ----------
    tables
        ``tables[k]``: the exact count table of ``pairs[k] = (i, j)``, of
        ``len(estimate[i]) * len(estimate[j])`` cells in C order (``Marginals.dense``).
    pairs
        The attribute pairs scored.
    estimate
        The independent model's 1-way count vectors, one per attribute.

    Returns
    -------
    np.ndarray
        One score per pair.
    """
    out = np.empty(len(pairs))
    total = float(np.sum(estimate[0])) if len(estimate) else 0.0
    for k, (i, j) in enumerate(pairs):
        est = np.outer(estimate[i], estimate[j]).ravel() / total if total > 0 else 0.0
        out[k] = np.abs(np.asarray(tables[k], dtype=float) - est).sum()
    return out


def tree_path(edges: Sequence[tuple], src, dst) -> list | None:
    """The path from ``src`` to ``dst`` in the forest ``edges`` (node labels of any hashable
    type), by breadth-first search; None when they are not connected.

    >>> tree_path([("a", "b"), ("b", "c"), ("b", "d")], "a", "d")
    ['a', 'b', 'd']
    """
    adjacency: dict = {}
    for a, b in edges:
        adjacency.setdefault(a, []).append(b)
        adjacency.setdefault(b, []).append(a)
    prev, queue = {src: None}, [src]
    while queue:
        v = queue.pop(0)
        if v == dst:
            out = [v]
            while prev[out[-1]] is not None:
                out.append(prev[out[-1]])
            return out[::-1]
        for u in adjacency.get(v, ()):
            if u not in prev:
                prev[u] = v
                queue.append(u)
    return None
