"""AIM (McKenna, Mullins, Sheldon & Miklau, "AIM: An Adaptive and Iterative Mechanism for
Differentially Private Synthetic Data", PVLDB 15(11), 2022), on MST's public domains, bins,
compression and ledger, its estimation on our junction tree (``junction``).

Steps, all under one OpenDP privacy filter of the budget rho (``FilterCompositor``):

1. every 1-way marginal, Gaussian of std ``sigma = sqrt(T / (2 (1 - s) rho))`` (T rounds,
   ``s`` = ``select_share``), then MST's compression of each domain from those noisy counts;
2. rounds, until the budget is spent: **select** one attribute pair r by OpenDP's
   report-noisy-max (the exponential mechanism, ``epsilon = sqrt(8 s rho_round)``, zCDP cost
   epsilon^2 / 8) on the quality ``||M_r(data) - M_r(model)||_1 - sqrt(2/pi) sigma n_r``
   (sensitivity 1: the model is a function of earlier noisy answers only), among the
   candidates; **measure** its 2-way marginal by OpenDP's Gaussian of std sigma; **re-fit**
   the model, warm-started; if the model's r-marginal moved by less than
   ``sqrt(2/pi) sigma n_r`` (the round bought less than its noise), halve sigma and double
   epsilon; when what is left is under two rounds' cost, the last round spends all of it;
3. the model fitted once more (``iters``), sampled, uncompressed and decoded.

Every step's noise is chosen from the noisy answers before it (post-processing), and the
filter refuses any step that would take OpenDP's composed total past the budget: the ledger
is OpenDP's and ends equal to the budget.

**Deviations from the paper** (each for speed, each documented in the README):

- The workload and the candidates are the attribute pairs (the paper's workload of all
  2-way marginals; its candidates also hold the 1-way marginals, measured here up front).
- A pair is a candidate only if the graph of the measured pairs stays **chordal** and the
  junction tree's cells stay within ``max_cells`` times the share of the budget spent (the
  paper caps the model size the same way, 80 MB, but lets the graph be any; Private-PGM then
  triangulates it, which on Adult made OpenDP 0.16's ``dp.mbi.AIM`` run past 25 minutes).
  With the graph chordal the measured pairs are exactly the junction tree's edges, inference
  is exact, and each round's fit starts from the last one's potentials.
- Rounds fit ``round_iters`` mirror-descent steps (warm), not to convergence.

>>> from privfair.components.synthesis.examples import aim_example
>>> table, params = aim_example(0)
>>> result = aim(table, params)
>>> result.metrics["privacy"]["rho"] == result.metrics["privacy"]["rho_budget"]
True
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from privfair.components.core.frames import Frame
from privfair.components.core.result import ComponentResult
from privfair.components.synthesis.accounting import (
    FilterCompositor,
    ledger_table,
    rho_budget,
    step_rho,
)
from privfair.components.synthesis.compression import Compression
from privfair.components.synthesis.junction import JTModel, JunctionTree, chordal_with, fit, sample
from privfair.components.synthesis.marginals import Marginals
from privfair.components.synthesis.model import Measurement
from privfair.components.synthesis.params import AIMParams
from privfair.components.synthesis.synthesize import (
    _compression_table,
    _memo,
    _pairs_table,
    _synthesise,
    encode_input,
    groupless,
    one_way_counts,
    pair_counts,
    release_metrics,
)

__all__ = ["aim", "candidates", "candidate_marginals", "quality", "initial_scales"]

_BIAS = math.sqrt(2.0 / math.pi)  # E|N(0, sigma^2)| / sigma: the L1 error noise alone makes


def initial_scales(rho: float, rounds: int, share: float) -> tuple[float, float]:
    """(Gaussian std, Gumbel scale) of a round when the budget is cut into ``rounds``:
    ``(1 - share) rho / rounds = 1 / (2 sigma^2)`` and ``share rho / rounds = 1 / (2 b^2)``
    (OpenDP's zCDP map of report-noisy-max, ``b = 2 / epsilon``).

    >>> [round(x, 2) for x in initial_scales(0.015, 224, 0.1)]
    [91.08, 273.25]
    """
    sigma = math.sqrt(rounds / (2.0 * (1.0 - share) * rho))
    return sigma, math.sqrt(rounds / (2.0 * share * rho))


def quality(exact: np.ndarray, estimate: np.ndarray, sigma: float) -> float:
    """AIM's score of a candidate: the model's L1 error on its marginal, less the error the
    measurement's own noise would leave (``sqrt(2/pi) sigma`` per cell). Changing one record
    moves one cell of ``exact`` by 1, so the score moves by at most 1 (sensitivity 1).

    >>> quality(np.array([5.0, 5.0]), np.array([8.0, 2.0]), 1.0) == 6 - 2 * math.sqrt(2 / math.pi)
    True
    """
    return float(np.abs(exact - estimate).sum() - _BIAS * sigma * exact.size)


def candidates(
    sizes: list[int], edges: list[tuple[int, int]], pairs: list[tuple[int, int]], limit: float
) -> list[tuple[int, int]]:
    """The pairs a round may select: those measured already, and those whose addition keeps
    the graph chordal with the junction tree's cells within ``limit``. Public: it reads the
    compressed sizes and the pairs selected so far only. When none is left, the smallest pair
    that keeps the graph chordal (a round always has one to measure).

    >>> candidates([2, 2, 50], [], [(0, 1), (0, 2), (1, 2)], 10)
    [(0, 1)]
    """
    out, fallback = [], []
    have = set(edges)
    for p in pairs:
        if p in have:
            out.append(p)
            continue
        cliques = chordal_with(len(sizes), edges, p)
        if cliques is None:
            continue
        cells = sum(int(np.prod([sizes[v] for v in c])) for c in cliques)
        (out if cells <= limit else fallback).append((cells, p) if cells > limit else p)
    if not out and fallback:
        out = [min(fallback)[1]]
    return out


def candidate_marginals(
    marginals: Marginals,
    pairs: Sequence[tuple[int, int]],
    compressions: Sequence[Compression],
) -> dict[tuple[int, int], np.ndarray]:
    """The exact 2-way marginal of every pair AIM may select or measure, over the compressed
    codes, keyed by pair: what its selection's quality score reads for every candidate and
    its measurements add noise to. Computed once (the compression is fixed after the 1-way
    round, and the records do not change between rounds), the pairs not counted yet in one
    engine call; the dense tables hold ``sum over pairs i < j of c_i c_j`` int64 cells
    (``c_i`` the compressed sizes; a pair past ``max_cells`` alone is a candidate only as a
    round's fallback).

    Parameters
    ----------
    marginals
        The records' counts (their code matrix, or the frame of it: ``encode_frame``).
    pairs
        Attribute pairs ``(i, j)``, ``i < j``.
    compressions
        Every attribute's compression.

    Returns
    -------
    dict
        Per pair, int64 counts over ``compressions[i].size * compressions[j].size`` cells in
        C order, summing to the row count.

    >>> m = Marginals(np.array([[0, 1], [0, 1], [2, 0]]), [3, 2])
    >>> merged = [Compression.from_kept(np.array([True, False, False])), Compression.identity(2)]
    >>> got = candidate_marginals(m, [(0, 1)], merged)
    >>> got[(0, 1)].tolist(), m.calls
    ([0, 2, 1, 0], 1)
    """
    return dict(zip(pairs, pair_counts(marginals, pairs, compressions), strict=True))


def aim(table: pa.Table | Frame, params: AIMParams) -> ComponentResult:
    """A synthetic copy of ``table`` under (epsilon, delta)-DP (add/remove one record) by AIM
    (see the module docstring).

    Every read of the records is an engine count of their codes (``marginals``): an Arrow
    table's, batch by batch here, or, for a ``SparkFrame``, on the cluster its rows stay on. The first query counts
    every clique the run may read, the d 1-way marginals and every pair, in one engine call
    (one Spark job); each round's scores and measurement read those counts
    (``candidate_marginals``), and the owner's fidelity reads them too.
    """
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    enc = encode_input(table, params, "mst")
    roles, domains, codes = enc.roles, enc.domains, enc.codes
    names, sizes = enc.names, enc.sizes
    d = len(names)
    if d < 2:
        raise ValueError("synthesis needs at least two attributes")
    rho = rho_budget(params.epsilon, params.delta)
    rounds = params.rounds or 16 * d
    share = params.select_share
    comp = FilterCompositor(codes, rho)
    rng = np.random.default_rng(params.seed)
    pairs = [(i, j) for i in range(d) for j in range(i + 1, d)]
    cliques = [(i,) for i in range(d)] + pairs
    marginals = _memo(lambda r: _counted(Marginals(r, sizes), cliques))
    timings["encode"] = time.perf_counter() - t0

    t = time.perf_counter()
    sigma, gumbel = initial_scales(rho, rounds, share)
    s1 = sigma
    exact_one_way = _memo(lambda r: one_way_counts(marginals(r)))
    raw_one_way = [
        comp.gaussian("one_way", names[i], lambda r, i=i: exact_one_way(r)[i], s1) for i in range(d)
    ]
    compressions = [
        Compression.of(y, s1) if params.compress else Compression.identity(len(y))
        for y in raw_one_way
    ]
    csizes = [c.size for c in compressions]
    measurements = []
    for i, (c, y) in enumerate(zip(compressions, raw_one_way, strict=True)):
        cy, var = c.compress_counts(y, s1 * s1)
        measurements.append(Measurement((i,), cy, var))
    timings["one_way"] = time.perf_counter() - t

    exact_pairs = _memo(lambda r: candidate_marginals(marginals(r), pairs, compressions))
    edges: list[tuple[int, int]] = []
    selected: list[tuple[int, int]] = []
    two_way: list[Measurement] = []
    # N is re-estimated from every measurement at each fit (the validator recomputes the row
    # count from all of them)
    model = fit(JunctionTree(csizes, edges), measurements, params.round_iters)
    t_select = t_estimate = 0.0
    last = False
    while not last:
        ta = time.perf_counter()
        cost = step_rho("noisy_max", gumbel) + step_rho("gaussian", sigma)
        if rho - comp.spent < 2 * cost:
            # the last round spends what is left, its scales nudged up by a few ulps until
            # OpenDP's composed total fits (the filter would refuse a rounding error)
            left = rho - comp.spent
            sigma = math.sqrt(1.0 / (2.0 * (1.0 - share) * left))
            gumbel = math.sqrt(1.0 / (2.0 * share * left))
            while not comp.fits([step_rho("noisy_max", gumbel), step_rho("gaussian", sigma)]):
                sigma *= 1.0 + 4 * np.finfo(float).eps
                gumbel *= 1.0 + 4 * np.finfo(float).eps
            last = True
        used = comp.spent + step_rho("noisy_max", gumbel) + step_rho("gaussian", sigma)
        live = candidates(csizes, edges, pairs, params.max_cells * used / rho)
        estimate = model.pair_marginals(live)
        est = [estimate[p].ravel() for p in live]

        def scores(r, live=live, est=est, sigma=sigma):
            x = exact_pairs(r)
            return [quality(x[p], e, sigma) for p, e in zip(live, est, strict=True)]

        k = comp.noisy_max("select", f"round {len(selected)}", scores, gumbel)
        pick = live[k]
        i, j = pick
        y = comp.gaussian(
            "two_way", f"{names[i]}|{names[j]}", lambda r, p=pick: exact_pairs(r)[p], sigma
        )
        two_way.append(Measurement(pick, y, np.full(len(y), sigma * sigma)))
        selected.append(pick)
        if pick not in edges:
            edges.append(pick)
        tb = time.perf_counter()
        t_select += tb - ta
        before = est[k]
        model = fit(
            JunctionTree(csizes, edges),
            measurements + two_way,
            params.iters if last else params.round_iters,
            start=model,
        )
        after = model.marginal(pick).ravel()
        if np.abs(after - before).sum() <= _BIAS * sigma * before.size:
            sigma /= 2
            gumbel /= 2
        t_estimate += time.perf_counter() - tb
    timings["select_measure"] = t_select
    timings["estimate"] = t_estimate

    t = time.perf_counter()
    syn_codes, data = _synthesise(
        sample, model, compressions, domains, table.schema, params.rows, rng
    )
    timings["sample"] = time.perf_counter() - t

    sidecars = {
        "ledger": ledger_table(comp.ledger),
        "measurements": _measurements(names, raw_one_way, selected, two_way, s1),
        "compression": _compression_table(names, domains, compressions),
        "cliques": _pairs_table(names, selected),
        "model": _model_table(names, model),
    }
    t = time.perf_counter()
    metrics = release_metrics(
        table,
        enc,
        marginals(codes),
        data=data,
        syn_codes=syn_codes,
        pairs=selected,
        comp=comp,
        params=params,
        rho=rho,
        exact=True,
        model=model,
        compressions=compressions,
        raw_one_way=raw_one_way,
        two_way=two_way,
    )
    metrics["selector"] = "aim"
    metrics["tree"] = [f"{names[i]}-{names[j]}" for i, j in sorted(edges)]
    metrics["cliques"] = ["|".join(names[v] for v in c) for c in model.tree.cliques]
    metrics["rounds"] = {"planned": rounds, "run": len(selected), "model_cells": model.tree.cells}
    timings["metrics"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    metrics["timings_s"] = {k: round(v, 3) for k, v in timings.items()}
    from privfair.components.synthesis.contract import aim_contract

    return ComponentResult(
        component="aim",
        outputs={"data": data},
        sidecars=sidecars,
        contract=aim_contract(params, table),
        params=params.model_dump(mode="json"),
        metrics=metrics,
        timings=timings,
        warnings=groupless(roles, domains),
    ).stamped()


def _counted(marginals: Marginals, cliques: Sequence[tuple[int, ...]]) -> Marginals:
    """``marginals`` with every clique of ``cliques`` counted (one engine call)."""
    marginals.count(cliques)
    return marginals


def _measurements(names, raw_one_way, selected, two_way, s1) -> pa.Table:
    """The noisy answers as released (``synthesize``'s sidecar) with each one's ``round``
    (0: the 1-way marginals; AIM may measure a pair twice)."""
    query, cell, value, var, rnd = [], [], [], [], []
    for name, y in zip(names, raw_one_way, strict=True):
        query += [name] * len(y)
        cell += range(len(y))
        value += list(y)
        var += [s1 * s1] * len(y)
        rnd += [0] * len(y)
    for r, ((i, j), m) in enumerate(zip(selected, two_way, strict=True), start=1):
        query += [f"{names[i]}|{names[j]}"] * len(m.y)
        cell += range(len(m.y))
        value += list(m.y)
        var += list(m.variance)
        rnd += [r] * len(m.y)
    return pa.table(
        {
            "query": pa.array(query, pa.string()),
            "cell": pa.array(cell, pa.int64()),
            "value": pa.array(value, pa.float64()),
            "variance": pa.array(var, pa.float64()),
            "round": pa.array(rnd, pa.int64()),
        }
    )


def _model_table(names, model: JTModel) -> pa.Table:
    """The fitted model's 2-way marginal of every edge of its graph (counts over compressed
    codes), in ``synthesize``'s long format."""
    a, b, ia, ib, count = [], [], [], [], []
    for i, j in model.tree.edges:
        t = model.marginal((i, j))
        ii, jj = np.indices(t.shape)
        a += [names[i]] * t.size
        b += [names[j]] * t.size
        ia += ii.ravel().tolist()
        ib += jj.ravel().tolist()
        count += t.ravel().tolist()
    return pa.table(
        {
            "a": pa.array(a, pa.string()),
            "b": pa.array(b, pa.string()),
            "code_a": pa.array(ia, pa.int64()),
            "code_b": pa.array(ib, pa.int64()),
            "count": pa.array(count, pa.float64()),
        }
    )
