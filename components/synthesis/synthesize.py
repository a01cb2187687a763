"""MST and PreFair end to end (spec 1.3, 3.2): encode on the public domain, measure the 1-way
marginals, compress, select the tree, measure its 2-way marginals, fit the tree model, sample,
decode. Every access to the records is a planned OpenDP step of one compositor
(``accounting``); everything after it is post-processing.

The exact counts behind those steps are taken by the current execution engine
(``marginals``; in this process or on Spark): one engine call for the d 1-way marginals, one
for every 2-way marginal the selection scores (the tree's are among them). Noise, selection,
the model and sampling run here.

The input is read as a frame (``privfair.components.core.frames``) on every engine: an Arrow
table's ``TableFrame`` is encoded and counted batch by batch in this process, a ``SparkFrame``
(rows left on a Spark cluster) on the executors (``marginals.encode_frame``); every query
reads the same exact counts, so the release is the same mechanism on the same counts, and no
``rows x d`` code matrix is ever built. Of the owner's metrics (``release_metrics``, MST's,
PreFair's and AIM's), ``fidelity`` is computed from the input's exact 1- and 2-way counts (the
run's own, any it lacks in one more engine call); ``fairness.input`` needs each record's
group, outcome and strata, read from an Arrow table's columns, and is not computed for a
``SparkFrame`` (``None``, said in ``owner_notes``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from privfair.components.core.engine import SparkFrame
from privfair.components.core.frames import Frame, as_frame
from privfair.components.core.inputs import group_indicator, outcome_indicator
from privfair.components.core.result import ComponentResult
from privfair.components.synthesis import metrics as M
from privfair.components.synthesis.accounting import (
    NEIGHBOURING,
    Compositor,
    calls,
    epsilon_of,
    ledger_table,
    plan,
)
from privfair.components.synthesis.compression import Compression
from privfair.components.synthesis.domain import (
    ColumnDomain,
    declared_domains,
    decode_table,
    encode_table,
    value_type,
)
from privfair.components.synthesis.inputs import index_roles, synthesis_roles
from privfair.components.synthesis.marginals import Marginals, encode_frame
from privfair.components.synthesis.model import (
    Measurement,
    fit_independent,
    fit_tree,
    noisy_total,
    sample,
)
from privfair.components.synthesis.params import MSTParams, PreFairParams, noisy_rows, selector_of
from privfair.components.synthesis.quality import measured_quality
from privfair.components.synthesis.selection import (
    Roles,
    best_fair_tree,
    candidate_pairs,
    edge_scores,
    fair,
    kruskal,
)
from privfair.schemas.roles import Kind, Role, TableRoles

__all__ = [
    "measured_fidelity",
    "mst",
    "prefair",
    "synthesize",
    "Encoded",
    "encode_input",
    "one_way_counts",
    "pair_counts",
    "release_metrics",
]


def mst(table: pa.Table, params: MSTParams) -> ComponentResult:
    """MST (McKenna, Miklau & Sheldon 2021): see ``synthesize``."""
    return synthesize(table, params, "mst")


def prefair(table: pa.Table, params: PreFairParams) -> ComponentResult:
    """PreFair (Pujol, Gilad & Machanavajjhala 2023) with its ``selector``: see
    ``synthesize``."""
    return synthesize(table, params, params.selector)


def synthesize(table: pa.Table, params: MSTParams, selector: str) -> ComponentResult:
    """A synthetic copy of ``table`` under (epsilon, delta)-DP (add/remove one record).

    Steps: d Gaussian 1-way marginals; domain compression; tree selection (``mst``: noisy
    Kruskal on all pairs; ``greedy``: on the pairs Algorithm 2 allows; ``exponential``: Gaussian
    noisy scores, then the exact best fair tree); d - 1 Gaussian 2-way marginals on the tree;
    the tree model fitted to all of them; ``rows`` records sampled (default: the model's noisy
    total) and decoded into the input's schema.
    """
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    fair_mode = selector != "mst"
    enc = encode_input(table, params, selector)
    roles, idx, domains, codes = enc.roles, enc.idx, enc.domains, enc.codes
    names, sizes = enc.names, enc.sizes
    d = len(names)
    rho, steps = plan(params.epsilon, params.delta, d, selector, params.split)
    schedule = [
        steps[p] for p in ("one_way", "select", "two_way") for _ in range(calls(p, d, selector))
    ]
    comp = Compositor(codes, schedule)
    rng = np.random.default_rng(params.seed)
    # the exact counts of the records the compositor hands every query (one Arrow table of
    # their codes, built once; the engine's answers kept for the later phases)
    marginals = _memo(lambda r: Marginals(r, sizes))
    timings["encode"] = time.perf_counter() - t0

    # phase 1: the 1-way marginals, then compression (post-processing of the noisy counts)
    t = time.perf_counter()
    s1 = steps["one_way"].scale
    exact_one_way = _memo(lambda r: one_way_counts(marginals(r)))
    raw_one_way = [
        comp.gaussian("one_way", names[i], lambda r, i=i: exact_one_way(r)[i], s1) for i in range(d)
    ]
    compressions = [
        Compression.of(y, s1) if params.compress else Compression.identity(len(y))
        for y in raw_one_way
    ]
    csizes = [c.size for c in compressions]
    one_way = []
    for i, (c, y) in enumerate(zip(compressions, raw_one_way, strict=True)):
        cy, var = c.compress_counts(y, s1 * s1)
        one_way.append(Measurement((i,), cy, var))
    timings["one_way"] = time.perf_counter() - t

    # phase 2: the tree
    t = time.perf_counter()
    estimate = fit_independent(one_way, noisy_total(one_way))
    s2 = steps["select"].scale
    exact = True
    if selector == "exponential":
        pairs = candidate_pairs(idx, greedy_filter=False)
        scores = _memo(
            lambda r: edge_scores(pair_counts(marginals(r), pairs, compressions), pairs, estimate)
        )
        noisy = {
            (i, j): comp.gaussian(
                "select", f"{names[i]}|{names[j]}", lambda r, k=k: scores(r)[k : k + 1], s2
            )[0]
            for k, (i, j) in enumerate(pairs)
        }
        tree, exact = best_fair_tree(noisy, idx, getattr(params, "max_forests", 5_000_000))
    else:
        pairs = candidate_pairs(idx, greedy_filter=selector == "greedy")
        scores = _memo(
            lambda r: edge_scores(pair_counts(marginals(r), pairs, compressions), pairs, estimate)
        )
        rounds = iter(range(d))

        def pick(live: list[int]) -> int:
            return comp.noisy_max("select", f"round {next(rounds)}", lambda r: scores(r)[live], s2)

        tree = kruskal(pairs, d, pick)
    tree = [tuple(sorted(e)) for e in tree]
    timings["select"] = time.perf_counter() - t

    # phase 3: the 2-way marginals on the tree
    t = time.perf_counter()
    s3 = steps["two_way"].scale
    exact_two_way = _memo(lambda r: pair_counts(marginals(r), tree, compressions))
    two_way = []
    for k, (i, j) in enumerate(tree):
        fn = lambda r, k=k: exact_two_way(r)[k]  # noqa: E731
        y = comp.gaussian("two_way", f"{names[i]}|{names[j]}", fn, s3)
        two_way.append(Measurement((i, j), y, np.full(len(y), s3 * s3)))
    timings["two_way"] = time.perf_counter() - t

    # post-processing: estimation, sampling, decoding
    t = time.perf_counter()
    model = fit_tree(one_way + two_way, csizes, tree, iters=params.iters)
    timings["estimate"] = time.perf_counter() - t
    t = time.perf_counter()
    syn_codes, data = _synthesise(
        sample, model, compressions, domains, table.schema, params.rows, rng
    )
    timings["sample"] = time.perf_counter() - t

    sidecars = {
        "ledger": ledger_table(comp.ledger),
        "measurements": _measurements_table(names, raw_one_way, tree, two_way, s1),
        "compression": _compression_table(names, domains, compressions),
        "tree": _pairs_table(names, tree),
        "model": _model_table(names, model),
    }
    t = time.perf_counter()
    metrics = release_metrics(
        table,
        enc,
        marginals(codes),
        data=data,
        syn_codes=syn_codes,
        pairs=tree,
        comp=comp,
        params=params,
        rho=rho,
        exact=exact,
        model=model,
        compressions=compressions,
        raw_one_way=raw_one_way,
        two_way=two_way,
    )
    timings["metrics"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - t0
    metrics["timings_s"] = {k: round(v, 3) for k, v in timings.items()}
    from privfair.components.synthesis.contract import contract

    return ComponentResult(
        component="prefair" if fair_mode else "mst",
        outputs={"data": data},
        sidecars=sidecars,
        contract=contract(params, table),
        params=params.model_dump(mode="json"),
        metrics=metrics,
        timings=timings,
        warnings=(
            [
                f"exponential: more than {params.max_forests} forests; the greedy tree was used "
                "(not the exact optimum)"
            ]
            if not exact
            else []
        )
        + groupless(roles, domains),
    ).stamped()


def groupless(roles, domains: dict) -> list[str]:
    """A warning for each protected column whose declared roles and public domain give it no
    protected group: it declares neither ``favoured`` nor ``unfavoured`` values, and 0 (the
    protected value when none is declared) is not one of its levels, so every pair of it is
    n/a in the parity metrics, whatever the spec's admissible attributes. Read off the spec's
    roles and domains alone.

    >>> from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles
    >>> from privfair.components.synthesis.domain import ColumnDomain
    >>> r = TableRoles.of([ColumnRole("sex", Role.PROTECTED, Kind.BINARY, domain=("F", "M"))])
    >>> groupless(r, {"sex": ColumnDomain("sex", pa.string(), levels=("F", "M"))})[0][:40]
    "protected column 'sex' has no protected "
    """
    out = []
    for c in roles.with_role(Role.PROTECTED):
        if c.favoured is not None or c.unfavoured is not None:
            continue
        d = domains.get(c.name)
        levels = d.levels if d is not None and d.levels is not None else None
        if levels is not None and any(v == 0 and not isinstance(v, bool) for v in levels):
            continue
        out.append(
            f"protected column '{c.name}' has no protected group: it declares neither "
            "favoured nor unfavoured values and 0 is not one of its levels, so its parity is "
            f"n/a; declare dataset.columns.{c.name}.favoured (or unfavoured)"
        )
    return out


@dataclass(frozen=True)
class Encoded:
    """A run's input on its public domain: the checked ``roles`` and their index sets
    ``idx``, the ``domains`` (column order), the frame of the ``rows x d`` codes ``codes``
    (``marginals.encode_frame``: encoded batch by batch when counted, or on the cluster for a
    ``SparkFrame``) and the clamped value counts."""

    roles: TableRoles
    idx: Roles
    domains: dict[str, ColumnDomain]
    codes: Frame
    clamped: dict[str, int]

    @property
    def names(self) -> list[str]:
        return list(self.domains)

    @property
    def sizes(self) -> list[int]:
        return [d.size for d in self.domains.values()]


def encode_input(table: pa.Table | Frame, params: MSTParams, selector: str) -> Encoded:
    """The first step of ``synthesize``: roles checked (PreFair's when ``selector`` is not
    ``mst``), public domains, codes.

    Parameters
    ----------
    table
        The input, with its roles: an Arrow table (read as a ``TableFrame``) or a frame.
    params
        The run's parameters (bins, out-of-domain rule).
    selector
        ``mst``, ``greedy`` or ``exponential``.

    Returns
    -------
    Encoded
        What the mechanisms work on.
    """
    roles = synthesis_roles(table, fair=selector != "mst")
    domains = declared_domains(table, roles, params)
    clamp = params.out_of_domain == "clamp"
    codes, clamped = encode_frame(as_frame(table), domains, clamp=clamp)  # where the rows are
    return Encoded(roles, index_roles(roles), domains, codes, clamped)


def one_way_counts(marginals: Marginals) -> list[np.ndarray]:
    """The exact 1-way marginal of every attribute over its declared domain (phase 1), all in
    one engine call.

    Parameters
    ----------
    marginals
        The records' counts.

    Returns
    -------
    list[np.ndarray]
        One int64 count vector per attribute.
    """
    d = len(marginals.sizes)
    marginals.count([(i,) for i in range(d)])
    return [marginals.dense((i,)) for i in range(d)]


def pair_counts(
    marginals: Marginals, pairs: Sequence[tuple[int, int]], compressions: Sequence[Compression]
) -> list[np.ndarray]:
    """The exact 2-way marginals of ``pairs`` over the compressed codes (the selection's and
    the tree's), the pairs not counted yet in one engine call.

    Parameters
    ----------
    marginals
        The records' counts.
    pairs
        Attribute pairs ``(i, j)``.
    compressions
        Every attribute's compression.

    Returns
    -------
    list[np.ndarray]
        Per pair, int64 counts over ``compressions[i].size * compressions[j].size`` cells in C
        order.
    """
    marginals.count(pairs)
    maps = [c.codes for c in compressions]
    return [marginals.dense(p, maps) for p in pairs]


def _memo(fn: Callable[[np.ndarray], object]) -> Callable[[np.ndarray], object]:
    """``fn`` computed once per records array (the last one seen; the compositor hands every
    query the same array)."""
    cache: dict[int, object] = {}

    def wrapped(records: np.ndarray):
        if id(records) not in cache:
            cache.clear()
            cache[id(records)] = fn(records)
        return cache[id(records)]

    return wrapped


def _measurements_table(names, raw_one_way, tree, two_way, s1) -> pa.Table:
    """The noisy answers as released: 1-way on the declared domain, 2-way on the compressed
    codes, each cell with its noise variance."""
    query, cell, value, var = [], [], [], []
    for name, y in zip(names, raw_one_way, strict=True):
        query += [name] * len(y)
        cell += range(len(y))
        value += list(y)
        var += [s1 * s1] * len(y)
    for (i, j), m in zip(tree, two_way, strict=True):
        q = f"{names[i]}|{names[j]}"
        query += [q] * len(m.y)
        cell += range(len(m.y))
        value += list(m.y)
        var += list(m.variance)
    return pa.table(
        {
            "query": pa.array(query, pa.string()),
            "cell": pa.array(cell, pa.int64()),
            "value": pa.array(value, pa.float64()),
            "variance": pa.array(var, pa.float64()),
        }
    )


def _synthesise(draw, model, compressions, domains, schema: pa.Schema, rows: int | None, rng):
    """(synthetic codes, synthetic table): ``rows`` rows (else the model's noisy total,
    ``noisy_rows``) drawn from ``model`` by ``draw(model, rows, rng)`` over the compressed
    domains, each code expanded back to its column's domain and decoded to ``schema``.
    Post-processing of the fitted model only."""
    n_rows = rows if rows is not None else noisy_rows(model.total)
    syn_c = draw(model, n_rows, rng)
    syn_codes = np.stack([c.expand(syn_c[:, i], rng) for i, c in enumerate(compressions)], axis=1)
    return syn_codes, decode_table(syn_codes, domains, schema, rng)


def _pairs_table(names: list[str], pairs) -> pa.Table:
    """The sidecar of the attribute pairs a model was measured on, in order (public: chosen
    from the noisy measurements, or by a DP selection)."""
    return pa.table(
        {
            "position": pa.array(range(len(pairs)), pa.int64()),
            "a": [names[i] for i, _ in pairs],
            "b": [names[j] for _, j in pairs],
        }
    )


def _compression_table(names, domains: dict[str, ColumnDomain], compressions) -> pa.Table:
    attr, code, label, ccode = [], [], [], []
    for name, c in zip(names, compressions, strict=True):
        labels = domains[name].labels()
        attr += [name] * len(c.codes)
        code += range(len(c.codes))
        label += labels
        ccode += c.codes.tolist()
    return pa.table(
        {
            "attribute": pa.array(attr, pa.string()),
            "code": pa.array(code, pa.int64()),
            "label": pa.array(label, pa.string()),
            "compressed": pa.array(ccode, pa.int64()),
        }
    )


def _model_table(names, model) -> pa.Table:
    """The fitted model's edge marginals (counts over the compressed codes), long format."""
    a, b, ia, ib, count = [], [], [], [], []
    for (p, c), table in model.edge.items():
        i, j = (p, c) if p < c else (c, p)
        t = table if p < c else table.T
        ii, jj = np.indices(t.shape)
        n = t.size
        a += [names[i]] * n
        b += [names[j]] * n
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


def release_metrics(
    table: pa.Table | SparkFrame,
    enc: Encoded,
    counts: Marginals,
    *,
    data: pa.Table,
    syn_codes: np.ndarray,
    pairs: Sequence[tuple[int, int]],
    comp: Compositor,
    params: MSTParams,
    rho: float,
    exact: bool,
    model,
    compressions: Sequence[Compression],
    raw_one_way: Sequence[np.ndarray],
    two_way: Sequence[Measurement],
) -> dict:
    """The account of one MST, PreFair or AIM run for people (never used to validate), in two
    parts.

    Public (declared in ``privfair.components.synthesis.PUBLIC``): functions of the public
    parameters and roles, of the noisy measurements and of the synthetic table only, so
    publishing them is post-processing of the DP release: ``rows``, ``attributes``,
    ``selector``, ``privacy`` (the plan), ``tree`` (the measured ``pairs``, in order) and
    ``fair_tree``, ``exact_search``, ``compressed_sizes``, ``model`` (fitted to the noisy
    measurements), ``measured_fidelity`` (the synthetic table against the noisy
    measurements), ``quality`` and ``fairness.synthetic``.

    Owner only: ``fidelity`` and ``fairness.input`` compare with the private input,
    ``clamped`` counts its values and ``timings_s`` grow with its size; an evaluation for the
    data owner, outside the DP guarantee. ``fidelity`` comes from exact counts, those the
    run's ``counts`` hold already and the rest in one engine call (``_fidelity_of_counts``:
    the numbers the code matrix would give). ``fairness.input`` reads an Arrow table's group,
    outcome and admissible columns; an input whose rows stay on the cluster (a
    ``SparkFrame``) gets none (it needs every record's group and outcome; said in
    ``owner_notes``).
    """
    roles, idx, names, sizes = enc.roles, enc.idx, enc.names, enc.sizes
    tree = list(pairs)
    syn = {n: syn_codes[:, i] for i, n in enumerate(names)}
    size = dict(zip(names, sizes, strict=True))
    on_cluster = isinstance(table, SparkFrame)
    one, two, acd = _fidelity_of_counts(counts, names, syn)
    spent = comp.total
    out = {
        "rows": data.num_rows,
        "attributes": len(names),
        "selector": selector_of(params),
        "privacy": {
            "epsilon": epsilon_of(spent, params.delta),
            "epsilon_target": params.epsilon,
            "delta": params.delta,
            "rho": spent,
            "rho_budget": rho,
            "neighbouring": NEIGHBOURING,
            "conversion": "OpenDP make_zCDP_to_approxDP (Canonne, Kamath & Steinke 2020)",
            "steps": len(comp.ledger),
            "phases": _phases(comp.ledger),
        },
        "tree": [f"{names[i]}-{names[j]}" for i, j in tree],
        "fair_tree": fair(tree, idx) if idx.admissible else None,
        "exact_search": exact,
        "compressed_sizes": {n: c.size for n, c in zip(names, compressions, strict=True)},
        "model": {"iterations": model.iterations, "total": model.total, "loss": model.loss},
        "measured_fidelity": measured_fidelity(
            names, raw_one_way, tree, two_way, syn_codes, compressions
        ),
        "quality": measured_quality(
            names,
            [roles[n].kind in (Kind.NUMERIC, Kind.ORDINAL) for n in names],
            raw_one_way,
            tree,
            two_way,
            syn_codes,
            compressions,
        ),
        "fidelity": {
            "one_way_tvd": float(np.mean(list(one.values()))),
            "two_way_tvd": float(np.mean(list(two.values()))),
            "acd": acd,
            "one_way": {k: round(v, 6) for k, v in one.items()},
            "two_way": {f"{a}|{b}": round(v, 6) for (a, b), v in two.items()},
        },
        "fairness": {
            "synthetic": _fairness(data, roles, syn, size),
            "input": None if on_cluster else _input_fairness(table, enc, params),
        },
    }
    if on_cluster:
        out["owner_notes"] = [
            "fairness.input is not computed: the input's rows stay on the Spark cluster, and "
            "it needs each record's group, outcome and strata; fidelity is computed from the "
            "input's exact 1- and 2-way counts, counted there"
        ]
    if enc.clamped:
        out["clamped"] = enc.clamped
    return out


def _fidelity_of_counts(counts: Marginals, names: Sequence[str], syn: dict):
    """``metrics.one_way_tvd``, ``two_way_tvd`` and ``acd`` of the input against ``syn``, the
    input's side from its exact 1- and 2-way counts over the declared domains (``counts``: the
    run's own, any clique it lacks counted in one engine call on the frame of its codes): the
    same numbers as from its code matrix."""
    sizes = counts.sizes
    size = dict(zip(names, sizes, strict=True))
    pairs = M._pairs(list(names), size, 10_000)
    at = {n: i for i, n in enumerate(names)}
    counts.count([(i,) for i in range(len(names))] + [(at[a], at[b]) for a, b in pairs])
    one = {n: M.tvd(counts.dense((i,)), M.marginal(syn, size, [n])) for i, n in enumerate(names)}
    real2 = {(a, b): counts.dense((at[a], at[b])).reshape(size[a], size[b]) for a, b in pairs}
    syn2 = M._pair_tables(syn, size, pairs)
    two = {p: M.tvd(real2[p], syn2[p]) for p in pairs}
    acd = (
        float(np.mean([abs(M.cramers_v(real2[p]) - M.cramers_v(syn2[p])) for p in pairs]))
        if pairs
        else float("nan")
    )
    return one, two, acd


def _phases(ledger: list[dict]) -> dict:
    """Per phase of the ledger (in order): its steps, their mechanism and noise scale, and the
    rho they spent. All fixed by the plan (params, d, selector), none read from the records."""
    out: dict[str, dict] = {}
    for r in ledger:
        p = out.setdefault(
            r["phase"], {"steps": 0, "mechanism": r["mechanism"], "scale": r["scale"], "rho": 0.0}
        )
        p["steps"] += 1
        p["rho"] += r["rho"]
    return out


def measured_fidelity(
    names: Sequence[str],
    raw_one_way: Sequence[np.ndarray],
    tree: Sequence[tuple[int, int]],
    two_way: Sequence[Measurement],
    syn_codes: np.ndarray,
    compressions: Sequence[Compression],
) -> dict:
    """How closely the synthetic table follows what the release measured: the TVD of each
    measured marginal of the synthetic table against the noisy answer (negative noisy counts
    set to 0, then both normalised), and the ACD over the measured pairs.

    A function of the noisy measurements and the synthetic table only (post-processing of the
    DP release), so it may be published; unlike ``fidelity`` it says nothing exact about the
    input. 1-way: every attribute over its declared domain; 2-way: the tree's edges over the
    compressed codes. A marginal whose noisy counts are all <= 0 has no distribution: None.

    >>> from privfair.components.synthesis.compression import Compression
    >>> syn = np.array([[0, 0], [0, 1], [1, 1], [1, 1]])
    >>> comp = [Compression.identity(2), Compression.identity(2)]
    >>> two = [Measurement((0, 1), np.array([2.0, 1.0, -2.0, 1.0]), np.ones(4))]
    >>> f = measured_fidelity(["a", "b"], [np.array([3.0, 1.0]), np.array([-1.0, 5.0])],
    ...                       [(0, 1)], two, syn, comp)
    >>> f["one_way"], f["two_way"], f["one_way_tvd"]
    ({'a': 0.25, 'b': 0.25}, {'a|b': 0.25}, 0.25)
    """
    one: dict[str, float | None] = {}
    for i, (name, y) in enumerate(zip(names, raw_one_way, strict=True)):
        counts = np.bincount(syn_codes[:, i], minlength=len(y))
        one[name] = _finite(M.tvd(np.clip(y, 0.0, None), counts))
    two: dict[str, float | None] = {}
    v_noisy, v_syn = [], []
    for (i, j), m in zip(tree, two_way, strict=True):
        ci, cj = compressions[i], compressions[j]
        cells = ci.codes[syn_codes[:, i]] * cj.size + cj.codes[syn_codes[:, j]]
        counts = np.bincount(cells, minlength=ci.size * cj.size)
        noisy = np.clip(m.y, 0.0, None)
        two[f"{names[i]}|{names[j]}"] = _finite(M.tvd(noisy, counts))
        if noisy.sum() > 0:
            v_noisy.append(M.cramers_v(noisy.reshape(ci.size, cj.size)))
            v_syn.append(M.cramers_v(counts.reshape(ci.size, cj.size)))
    acd = float(np.mean(np.abs(np.subtract(v_noisy, v_syn)))) if v_noisy else None
    return {
        "one_way_tvd": _mean(one.values()),
        "two_way_tvd": _mean(two.values()),
        "acd": acd,
        "one_way": {k: _round(v) for k, v in one.items()},
        "two_way": {k: _round(v) for k, v in two.items()},
    }


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _mean(values) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.mean(v)) if v else None


def _fairness(t: pa.Table, roles, codes: dict, sizes: dict) -> dict:
    """Per (protected, outcome) of table ``t`` (``codes``: its columns as codes): demographic
    parity and its conditional form (strata: every admissible attribute jointly); None when
    one group is empty."""
    adm = [c.name for c in roles.with_role(Role.ADMISSIBLE)]
    strata = _strata(codes, adm, sizes) if adm else None
    out = {}
    for p in roles.with_role(Role.PROTECTED):
        for o in roles.with_role(Role.LABEL):
            s = group_indicator(_plain(t.column(p.name)), p)
            y = outcome_indicator(_plain(t.column(o.name)), o)
            if s.all() or not s.any():
                out[f"{p.name}->{o.name}"] = None
                continue
            f = M.fairness_measures(s, y, strata=strata)
            out[f"{p.name}->{o.name}"] = {
                k: _round(f.get(k)) for k in ("dp", "cdp", "cdp_reference")
            }
    return out


def _plain(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """``column`` in its plain value type (a dictionary by its values, any string layout as
    ``large_string``), which the shared value tests compare in."""
    vt = value_type(column.type)
    return column if column.type == vt else column.cast(vt)


def _input_fairness(table: pa.Table, enc: Encoded, params: MSTParams) -> dict:
    """``_fairness`` of the input: its admissible columns' codes (``encode_table`` of those
    columns alone, as the run encodes them), the group and outcome read off ``table``."""
    roles = enc.roles
    pairs = roles.with_role(Role.PROTECTED) and roles.with_role(Role.LABEL)
    adm = [c.name for c in roles.with_role(Role.ADMISSIBLE)] if pairs else []
    codes, _ = encode_table(
        table, {n: enc.domains[n] for n in adm}, clamp=params.out_of_domain == "clamp"
    )
    real = {n: codes[:, i] for i, n in enumerate(adm)}
    return _fairness(table, roles, real, dict(zip(enc.names, enc.sizes, strict=True)))


def _strata(codes: dict, columns: list[str], sizes: dict) -> np.ndarray:
    """One code per joint value of ``columns`` (renumbered after each column: no overflow)."""
    key = np.zeros(len(codes[columns[0]]), dtype=np.int64)
    for c in columns:
        key = np.unique(key * sizes[c] + codes[c], return_inverse=True)[1].astype(np.int64)
    return key


def _round(x):
    return None if x is None or not np.isfinite(x) else round(float(x), 6)
