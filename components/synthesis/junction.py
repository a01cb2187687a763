"""The junction-tree graphical model behind AIM: fitted to noisy marginals of any attribute
sets that lie within the cliques of a chordal graph, warm-started when the graph grows, and
sampled.

**Structure**: the graph's edges are the measured attribute pairs; it is kept chordal (AIM
adds a pair only if the graph stays so, ``chordal_with``), so its maximal cliques, found by
maximum cardinality search (Tarjan & Yannakakis 1984), joined by a maximum-weight spanning
tree on separator sizes, form a junction tree and exact inference is one upward and one
downward pass over the clique tables.

**Estimation** (Private-PGM's problem, McKenna, Sheldon & Miklau 2019): the distribution mu
that factorises over the cliques and minimises ``sum over measured cells (N mu(cell) - y)^2 /
var``, by mirror descent on the clique log-potentials with Armijo backtracking (the
``model.fit_tree`` iteration on cliques of any size). ``fit`` starts from given potentials:
AIM passes the previous round's, re-expressed on the new cliques (each old clique lies in a
new one, so the distribution is unchanged and only the new measurement has to be fitted).

**Sampling**: ancestral along the junction tree from its root, each clique's new attributes
drawn given the separator's values with Private-PGM's controlled rounding (``model._round``).

>>> m = [Measurement((0,), np.array([60.0, 40.0]), np.ones(2)),
...      Measurement((0, 1), np.array([50.0, 10.0, 10.0, 30.0]), np.ones(4))]
>>> jt = JunctionTree([2, 2], [(0, 1)])
>>> model = fit(jt, m, iters=300)
>>> np.round(model.marginal((0, 1)), 1).tolist()
[[50.0, 10.0], [10.0, 30.0]]
>>> sample(model, 100, np.random.default_rng(0)).shape
(100, 2)
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from privfair.components.synthesis.model import Measurement, _round, noisy_total

__all__ = ["chordal_with", "maximal_cliques", "JunctionTree", "JTModel", "fit", "sample"]

Clique = tuple[int, ...]


def _mcs_order(d: int, adj: list[set[int]]) -> list[int]:
    """A maximum cardinality search order (each next vertex has the most visited neighbours)."""
    weight = [0] * d
    seen = [False] * d
    order = []
    for _ in range(d):
        v = max((u for u in range(d) if not seen[u]), key=lambda u: (weight[u], -u))
        seen[v] = True
        order.append(v)
        for u in adj[v]:
            if not seen[u]:
                weight[u] += 1
    return order


def _adjacency(d: int, edges: Iterable[tuple[int, int]]) -> list[set[int]]:
    adj: list[set[int]] = [set() for _ in range(d)]
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    return adj


def maximal_cliques(d: int, edges: Iterable[tuple[int, int]]) -> list[Clique] | None:
    """The maximal cliques of the graph on ``d`` vertices, or None if it is not chordal.

    In a maximum cardinality search order, a graph is chordal iff each vertex's earlier
    neighbours form a clique; those neighbours with the vertex are then the candidate cliques.

    >>> maximal_cliques(4, [(0, 1), (1, 2), (0, 2), (2, 3)])
    [(0, 1, 2), (2, 3)]
    >>> maximal_cliques(4, [(0, 1), (1, 2), (2, 3), (3, 0)]) is None
    True
    """
    adj = _adjacency(d, edges)
    order = _mcs_order(d, adj)
    pos = {v: i for i, v in enumerate(order)}
    cands = []
    for v in order:
        earlier = {u for u in adj[v] if pos[u] < pos[v]}
        if earlier:
            # the earlier neighbours must be pairwise adjacent: check against the latest of them
            last = max(earlier, key=pos.__getitem__)
            if not (earlier - {last}) <= adj[last]:
                return None
        cands.append(frozenset(earlier | {v}))
    out = [c for c in cands if not any(c < o for o in cands)]
    return sorted({tuple(sorted(c)) for c in out})


def chordal_with(d: int, edges: Sequence[tuple[int, int]], new: tuple[int, int]) -> list | None:
    """The maximal cliques after adding ``new`` to ``edges``, None if the graph is no longer
    chordal."""
    return maximal_cliques(d, [*edges, new])


class JunctionTree:
    """The junction tree of the chordal graph on ``sizes`` with ``edges``: its maximal
    ``cliques``, and ``order``, a list of (parent, child) clique indices in breadth-first order
    from clique 0 (a forest's components are joined through empty separators)."""

    def __init__(self, sizes: Sequence[int], edges: Sequence[tuple[int, int]]):
        self.sizes = [int(s) for s in sizes]
        d = len(self.sizes)
        cliques = maximal_cliques(d, edges)
        if cliques is None:
            raise ValueError("the graph of the measured pairs is not chordal")
        self.edges = sorted({tuple(sorted(e)) for e in edges})
        self.cliques: list[Clique] = cliques
        k = len(cliques)
        # Prim's maximum spanning tree on separator sizes gives a junction tree of a chordal
        # graph's maximal cliques (Jensen & Jensen 1994)
        inside, self.order = {0}, []
        while len(inside) < k:
            best = max(
                (
                    (len(set(cliques[p]) & set(cliques[c])), -c, p, c)
                    for p in inside
                    for c in range(k)
                    if c not in inside
                ),
            )
            self.order.append((best[2], best[3]))
            inside.add(best[3])
        self.children: dict[int, list[int]] = {c: [] for c in range(k)}
        for p, c in self.order:
            self.children[p].append(c)
        self.home = {
            v: min((i for i, c in enumerate(cliques) if v in c), key=lambda i: len(cliques[i]))
            for v in range(d)
        }

    def shape(self, c: int) -> tuple[int, ...]:
        return tuple(self.sizes[v] for v in self.cliques[c])

    @property
    def cells(self) -> int:
        """The model's size: cells over all clique tables."""
        return sum(int(np.prod(self.shape(c))) for c in range(len(self.cliques)))

    def containing(self, attrs: Sequence[int]) -> int | None:
        """The smallest clique holding every attribute of ``attrs`` (None: none does)."""
        s = set(attrs)
        fits = [i for i, c in enumerate(self.cliques) if s <= set(c)]
        return min(fits, key=lambda i: int(np.prod(self.shape(i)))) if fits else None

    def separator(self, p: int, c: int) -> Clique:
        return tuple(v for v in self.cliques[c] if v in self.cliques[p])

    def calibrate(self, theta: list[np.ndarray]) -> list[np.ndarray]:
        """The clique marginals (probabilities) of the model with log-potentials ``theta``."""
        phi = [np.exp(t - t.max()) for t in theta]
        up: dict[int, np.ndarray] = {}
        inner: dict[int, np.ndarray] = {}
        for p, c in reversed(self.order):
            b = phi[c]
            for g in self.children[c]:
                b = b * _expand(up[g], self.separator(c, g), self.cliques[c], self.sizes)
            inner[c] = b
            m = _marg(b, self.cliques[c], self.separator(p, c))
            up[c] = m / m.sum()
        belief = [None] * len(self.cliques)
        b = phi[0]
        for g in self.children[0]:
            b = b * _expand(up[g], self.separator(0, g), self.cliques[0], self.sizes)
        belief[0] = b / b.sum()
        for p, c in self.order:
            sep = self.separator(p, c)
            parent = _marg(belief[p], self.cliques[p], sep)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(up[c] > 0, parent / up[c], 0.0)
            b = inner[c] * _expand(ratio, sep, self.cliques[c], self.sizes)
            belief[c] = b / b.sum()
        return belief


def _letters(attrs: Sequence[int]) -> str:
    # einsum's axis letters: attribute v is letter v, the carried copy (-1) the last one, "Z"
    return "".join(string.ascii_letters[v] for v in attrs)


def _marg(table: np.ndarray, attrs: Sequence[int], keep: Sequence[int]) -> np.ndarray:
    """``table`` over ``attrs`` summed onto ``keep`` (in ``keep``'s order)."""
    if tuple(attrs) == tuple(keep):
        return table
    return np.einsum(f"{_letters(attrs)}->{_letters(keep)}", table)


def _expand(table: np.ndarray, attrs: Sequence[int], into: Sequence[int], sizes) -> np.ndarray:
    """``table`` over ``attrs`` (a subset of ``into``, in ``into``'s order) shaped to broadcast
    over ``into``."""
    order = [v for v in into if v in attrs]
    t = table if list(attrs) == order else np.einsum(f"{_letters(attrs)}->{_letters(order)}", table)
    return t.reshape([sizes[v] if v in attrs else 1 for v in into])


@dataclass
class JTModel:
    """A fitted model: its ``tree``, log-potentials ``theta``, clique marginals ``belief``
    (probabilities), the noisy ``total`` N, the final ``loss`` and ``iterations``."""

    tree: JunctionTree
    theta: list[np.ndarray]
    belief: list[np.ndarray]
    total: float
    loss: float
    iterations: int

    def marginal(self, attrs: Sequence[int]) -> np.ndarray:
        """The counts (summing to N) of attributes ``attrs`` in one clique, over their
        sizes in ``attrs``' order."""
        c = self.tree.containing(attrs)
        if c is None:
            raise ValueError(f"{tuple(attrs)} lies in no clique")
        return self.total * _marg(self.belief[c], self.tree.cliques[c], tuple(attrs))

    def pair_marginals(self, pairs: Sequence[tuple[int, int]]) -> dict:
        """The counts of every pair of ``pairs``, whether or not it lies in one clique: the
        joint of attribute i with each clique's attributes is carried down the junction tree
        rooted at i's clique (``P(i, C) = P(i, S) mu_C / mu_S``), then summed onto j. The
        variable carried is the pair's smaller one, so the work is about the sum of those
        sizes times the model's cells."""
        tree = self.tree
        out: dict[tuple[int, int], np.ndarray] = {}
        todo: dict[int, list[int]] = {}
        for i, j in pairs:
            if tree.containing((i, j)) is not None:
                out[(i, j)] = self.marginal((i, j))
            else:
                a, b = (i, j) if tree.sizes[i] <= tree.sizes[j] else (j, i)
                todo.setdefault(a, []).append(b)
        for a, targets in todo.items():
            joint = self._carry(a)
            for b in targets:
                c = tree.containing((b,))
                m = self.total * _marg(joint[c], (-1, *tree.cliques[c]), (-1, b))
                out[(a, b) if a < b else (b, a)] = m if a < b else m.T
        return out

    def _carry(self, a: int) -> dict[int, np.ndarray]:
        """For each clique C, P(a, C) as a table over (a, *C) (axis letter of ``-1``)."""
        tree = self.tree
        k = len(tree.cliques)
        adj: dict[int, list[int]] = {c: [] for c in range(k)}
        for p, c in tree.order:
            adj[p].append(c)
            adj[c].append(p)
        root = tree.home[a]
        na = tree.sizes[a]
        r = tree.cliques[root]
        eye = np.eye(na).reshape([na] + [na if v == a else 1 for v in r])
        joint = {root: eye * self.belief[root][None]}
        queue, seen = [root], {root}
        while queue:
            p = queue.pop(0)
            for c in adj[p]:
                if c in seen:
                    continue
                seen.add(c)
                queue.append(c)
                sep = tree.separator(p, c)
                pa_s = _marg(joint[p], (-1, *tree.cliques[p]), (-1, *sep))
                mu_s = _expand(
                    _marg(self.belief[c], tree.cliques[c], sep), sep, tree.cliques[c], tree.sizes
                )
                with np.errstate(divide="ignore", invalid="ignore"):
                    cond = np.where(mu_s > 0, self.belief[c] / mu_s, 0.0)
                sizes = {**dict(enumerate(tree.sizes)), -1: na}
                joint[c] = _expand(pa_s, (-1, *sep), (-1, *tree.cliques[c]), sizes) * cond[None]
        return joint


def _loss_grad(tree: JunctionTree, assigned, total: float, belief):
    loss = 0.0
    grads = [None] * len(tree.cliques)
    for c, ms in assigned.items():
        mu = total * belief[c]
        g = np.zeros_like(mu)
        for m in ms:
            est = _marg(mu, tree.cliques[c], m.clique).ravel()
            r = est - m.y
            loss += float(np.sum(r * r / m.variance))
            gm = (2 * r / m.variance).reshape([tree.sizes[v] for v in m.clique])
            g = g + _expand(gm, m.clique, tree.cliques[c], tree.sizes)
        grads[c] = g
    return loss, grads


def warm_start(tree: JunctionTree, old: JTModel | None) -> list[np.ndarray]:
    """Log-potentials on ``tree``'s cliques giving ``old``'s distribution: each old clique's
    potential added into a new clique that holds it (zeros without ``old``)."""
    theta = [np.zeros(tree.shape(c)) for c in range(len(tree.cliques))]
    if old is None:
        return theta
    for oc, t in zip(old.tree.cliques, old.theta, strict=True):
        c = tree.containing(oc)
        theta[c] = theta[c] + _expand(t, oc, tree.cliques[c], tree.sizes)
    return theta


def fit(
    tree: JunctionTree,
    measurements: Sequence[Measurement],
    iters: int = 1000,
    start: JTModel | None = None,
    total: float | None = None,
) -> JTModel:
    """The model on ``tree`` minimising the weighted squared error to ``measurements``, by
    mirror descent with backtracking from ``start``'s distribution (uniform without)."""
    total = noisy_total(measurements) if total is None else float(total)
    assigned: dict[int, list[Measurement]] = {}
    for m in measurements:
        c = tree.containing(m.clique)
        if c is None:
            raise ValueError(f"measurement on {m.clique} lies in no clique of the model")
        assigned.setdefault(c, []).append(m)
    theta = warm_start(tree, start)
    belief = tree.calibrate(theta)
    loss, grads = _loss_grad(tree, assigned, total, belief)
    alpha = 1.0 / max(total, 1.0)
    done = 0
    for step in range(1, iters + 1):
        done = step
        alpha *= 2
        for _ in range(30):
            nt = [t - alpha * g if g is not None else t for t, g in zip(theta, grads, strict=True)]
            nb = tree.calibrate(nt)
            new_loss, ng = _loss_grad(tree, assigned, total, nb)
            decrease = sum(
                float(np.sum(g * total * (b - n)))
                for g, b, n in zip(grads, belief, nb, strict=True)
                if g is not None
            )
            if loss - new_loss >= 0.5 * alpha * decrease or alpha < 1e-300:
                break
            alpha *= 0.5
        improved = loss - new_loss
        theta, belief, loss, grads = nt, nb, new_loss, ng
        if 0 <= improved <= 1e-10 * max(loss, 1.0):
            break
    return JTModel(tree, theta, belief, total, loss, done)


def sample(model: JTModel, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` records (codes, ``n x d``) drawn along the junction tree: the root clique's
    attributes jointly, then each child's new attributes given its separator's values."""
    tree = model.tree
    d = len(tree.sizes)
    out = np.zeros((n, d), dtype=np.int64)
    root = tree.cliques[0]
    counts = _round(model.belief[0].ravel(), n, rng)
    cells = rng.permutation(np.repeat(np.arange(len(counts)), counts))
    for v, col in zip(root, np.unravel_index(cells, tree.shape(0)), strict=True):
        out[:, v] = col
    for p, c in tree.order:
        sep = tree.separator(p, c)
        new = tuple(v for v in tree.cliques[c] if v not in sep)
        cond = _marg(model.belief[c], tree.cliques[c], sep + new)
        ssize = int(np.prod([tree.sizes[v] for v in sep])) if sep else 1
        nshape = tuple(tree.sizes[v] for v in new)
        cond = cond.reshape(ssize, -1)
        key = (
            np.ravel_multi_index([out[:, v] for v in sep], [tree.sizes[v] for v in sep])
            if sep
            else np.zeros(n, dtype=np.int64)
        )
        order = np.argsort(key, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=ssize))])
        drawn = np.empty(n, dtype=np.int64)
        for s in np.flatnonzero(np.diff(bounds)):
            lo, hi = bounds[s], bounds[s + 1]
            k = _round(cond[s], hi - lo, rng)
            drawn[order[lo:hi]] = rng.permutation(np.repeat(np.arange(len(k)), k))
        for v, col in zip(new, np.unravel_index(drawn, nshape), strict=True):
            out[:, v] = col
    return out
