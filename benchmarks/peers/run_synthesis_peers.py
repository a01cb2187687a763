"""Run the PyPI DP-synthesis peers of our MST / PreFair on the code matrix they all share.

Standalone on purpose: this script imports only the standard library, numpy, pyarrow and the
peer under test, never privfair. Its input is the integer code matrix that
``export_adult_codes.py`` writes from OUR environment (one int column per attribute, codes
0..size-1 on the public domain; the domain sizes in the Parquet metadata ``privfair.sizes``),
so every peer sees exactly what our synthesis family sees. Run each peer in its own
throwaway environment (``--isolated``: a plain ``--no-project --with`` puts the project's
``.venv`` under the overlay; ``meta.project_venv_on_path`` must be false)::

    uv run --isolated --no-project --python 3.11 --with smartnoise-synth==1.0.8 \
        --with pyarrow==26.0.1 python benchmarks/peers/run_synthesis_peers.py \
        --peer smartnoise --codes /tmp/adult_codes.parquet --runs 10 --out /tmp/sn.json

    uv run --isolated --no-project --python 3.11 --with "opendp[mbi]==0.16.0" \
        --with polars==1.36.1 --with pyarrow==26.0.1 python benchmarks/peers/run_synthesis_peers.py \
        --peer opendp --codes /tmp/adult_codes.parquet --runs 10 --out /tmp/odp.json

    uv run --isolated --no-project --python 3.11 --with mbi==2.0.0 \
        python benchmarks/peers/run_synthesis_peers.py --peer mbi \
        --measurements M.npz --out-marginals F.npz --iters 1000 [--out fit.json]
    uv run --isolated --no-project --python 3.11 --with mbi==2.0.0 \
        python benchmarks/peers/run_synthesis_peers.py --peer mbi --self-test

Synthesis peers (``--runs`` R runs each, at ``--epsilon`` 1, ``--delta`` 1e-9):

* ``smartnoise``: ``Synthesizer.create("mst", epsilon=eps, delta=delta)``, ``.fit(df,
  transformer=..., categorical_columns=all, preprocessor_eps=0.0)``, ``.sample(n_rows)``.
  With only ``categorical_columns`` SmartNoise's ``LabelTransformer`` would read each
  column's categories off the private data (no budget is charged for that, and a value absent
  from the data gets no code). So by default (``--smartnoise-domain public``) the transformer
  is a ``TableTransformer`` of ``LabelTransformer(nullable=False)``, one per column, fitted
  beforehand on a PUBLIC frame that lists every code 0..size-1 of every column: it is then
  ``fit_complete``, ``fit`` does not refit it, nothing is spent on preprocessing, and its
  cardinalities are the public domain sizes. ``--smartnoise-domain data`` gives the
  package's default instead (categories inferred from the data).
* ``opendp``: ``dp.Context.compositor(data=<polars LazyFrame of the codes>,
  privacy_unit=dp.unit_of(contributions=1), privacy_loss=dp.loss_of(rho=rho),
  split_evenly_over=1)``, ``.query().contingency_table(keys={col: [0..size-1]},
  algorithm=dp.mbi.MST()).release().synthesize(rows=n_rows)``; ``rho`` is the zCDP budget whose
  OpenDP conversion (``make_zCDP_to_approxDP`` + ``make_fix_delta``, the same binary search as
  SmartNoise's ``cdp_rho``) gives (eps, delta). With every column keyed the release is pure
  zCDP. OpenDP adds a null key to every keyset, so a synthetic column may hold null: it is
  counted as an extra, out-of-domain code. A run that raises is recorded with its exact error
  text and how many noisy-max selections MST had started (calls of its
  ``binary_search_chain``: one per selection, then one for the measurements; 0 when the run
  failed before the first selection, e.g. when charging the selection step itself).
  ``--budget-check`` (no data) lists the attribute counts for which OpenDP's own split of
  rho makes that charge fail (see ``opendp_budget_check``).
  ``--opendp-keys discover`` gives no keys (OpenDP discovers them under (rho, delta)).

Per run: ``seconds`` (wall, fit + sample only; the input frame is built before the clock
starts), ``fit_s`` / ``sample_s``; peak memory as ``ru_maxrss_mb`` (``getrusage`` maxrss: the
WHOLE process's high-water mark since it started, so it never goes down from run to run) and
``vm_hwm_mb`` (``VmHWM`` of ``/proc/self/status`` after it was reset through
``/proc/self/clear_refs`` just before the run: the peak of this run, when the reset worked);
the mean 1-way TVD over the attributes and the mean 2-way TVD over all attribute pairs of the
synthetic codes against the input codes (TVD = 0.5 * sum |p - q| of the normalised count
tables, numpy ``bincount``; a synthetic code outside 0..size-1, e.g. OpenDP's null, is a cell
of its own that the input never has). Summaries: mean and median over the runs that finished.

``--save-synthetic PATH`` writes run 0's synthetic codes (Parquet, the input's column names and
order, int64, a null as code ``size``) for inspection. ``--diagnose`` adds, untimed after each
run, ``diagnostic.model_cliques`` (the 2-way cliques of the fitted model: the tree MST
measured) and ``diagnostic.iid_sample`` (the fidelity of a second draw from the SAME fitted
model with mbi's i.i.d. sampler, ``method="sample"``; with ``--save-synthetic`` also written
to ``PATH`` with suffix ``.iid.parquet``). Why: both peers sample through mbi 1.1.0's
``MarkovRandomField.synthetic_data`` with its default ``method="round"``, which gives each
child column its values in ROW ORDER within each parent group (rank-based rounding, no
shuffle), so columns generated under the same parents come out comonotone. Tree edges stay
exact but pairs off the tree get a spurious dependence, and the 2-way TVD ends up above the
independent-columns baseline. mbi 2.0 fixed this (ryan112358/mbi PR #145, "Spurious
correlations in rounding"), but smartnoise-synth 1.0.8 requires ``mbi<2`` and
``opendp[mbi]`` 0.16 requires ``mbi==1.1.0``. The timed output stays the peer's default.

Estimation-only mode (``--peer mbi``): reads noisy measurements from an ``.npz`` (for each
measurement k: ``clique_k`` (array of 1 or 2 column names), ``y_k`` (noisy counts, flattened
C-order over the clique's domain sizes), ``std_k`` (float); ``sizes``: a JSON string
``{column: size}`` in column order; optional ``known_total``), fits ``mbi`` 2.0.0's
``MirrorDescent().estimate(Domain, [LinearMeasurement(y, clique, stddev)], iters=...)`` (JAX on
CPU, float64 unless ``--float32``; without ``known_total`` mbi takes its minimum-variance
estimate of the total from the measurements) and writes, for every measured clique, the fitted
model's marginal counts (``marginal_k``, flattened C-order; ``clique_k``; ``shape_k``) plus
``fit_seconds`` (``estimate`` until its marginals are computed, JIT compilation included),
``project_seconds``, ``iters`` and ``total`` to ``--out-marginals``; the same marginals also
under the key ``"a|b"`` (``"a"`` for a 1-way clique) and ``seconds`` (the first fit's time), the
names ``benchmarks/bench_synthesis.py`` reads. ``--fits N`` repeats the fit
(the later fits reuse the compiled programs) and records every time. ``--self-test`` builds a
3-attribute, 600-row table, measures it with Gaussian noise, runs this mode and checks the
result.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata
import itertools
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

VERSIONS = (
    "smartnoise-synth",
    "smartnoise-sql",
    "opendp",
    "mbi",
    "jax",
    "jaxlib",
    "polars",
    "pandas",
    "numpy",
    "pyarrow",
    "torch",
)


# --------------------------------------------------------------------------- input


def load_codes(path: Path) -> tuple[np.ndarray, list[str], list[int], dict]:
    """The ``rows x columns`` int64 code matrix, its column names, the public domain sizes
    (``privfair.sizes``) and the ``privfair.source`` record."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    meta = table.schema.metadata or {}
    if b"privfair.sizes" not in meta:
        raise ValueError(f"{path}: no 'privfair.sizes' in the Parquet schema metadata")
    sizes_map = json.loads(meta[b"privfair.sizes"])
    columns = list(table.column_names)
    if list(sizes_map) != columns:
        raise ValueError(f"{path}: sizes {list(sizes_map)} do not match columns {columns}")
    codes = np.stack([table.column(c).to_numpy().astype(np.int64) for c in columns], axis=1)
    sizes = [int(sizes_map[c]) for c in columns]
    if codes.min() < 0 or np.any(codes.max(axis=0) >= np.asarray(sizes)):
        raise ValueError(f"{path}: a code lies outside 0..size-1")
    source = json.loads(meta.get(b"privfair.source", b"{}"))
    return codes, columns, sizes, source


def save_codes(path: Path, arr: np.ndarray, columns: list[str], sizes: list[int], info: dict):
    """Write a synthetic code matrix as Parquet: one int64 column per attribute, under the
    input's column names and in its order, the input's ``privfair.sizes`` and ``info`` (as
    ``privfair.synthetic``) in the schema metadata. A code ``== size`` is a null the peer
    sampled (OpenDP's extra key)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({c: pa.array(arr[:, j], pa.int64()) for j, c in enumerate(columns)})
    meta = {
        b"privfair.sizes": json.dumps(dict(zip(columns, sizes, strict=True))).encode(),
        b"privfair.synthetic": json.dumps(info).encode(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.replace_schema_metadata(meta), path)


# --------------------------------------------------------------------------- fidelity


def _hist(x: np.ndarray, length: int) -> np.ndarray:
    counts = np.bincount(x, minlength=length).astype(np.float64)
    return counts / max(counts.sum(), 1.0)


def fidelity(real: np.ndarray, synth: np.ndarray, sizes: list[int]) -> dict:
    """Mean 1-way and 2-way TVD of ``synth`` against ``real``. A synthetic code outside
    0..size-1 (a null mapped to ``size``) is an extra cell, so each column's table has
    ``max(size, largest code + 1)`` cells."""
    d = real.shape[1]
    ext = [max(sizes[j], int(synth[:, j].max()) + 1 if len(synth) else 0) for j in range(d)]
    one = [
        0.5 * np.abs(_hist(real[:, j], ext[j]) - _hist(synth[:, j], ext[j])).sum() for j in range(d)
    ]
    two = []
    for a, b in itertools.combinations(range(d), 2):
        cells = ext[a] * ext[b]
        p = _hist(real[:, a] * ext[b] + real[:, b], cells)
        q = _hist(synth[:, a] * ext[b] + synth[:, b], cells)
        two.append(0.5 * np.abs(p - q).sum())
    out_of_domain = int(sum((synth[:, j] >= sizes[j]).sum() for j in range(d)))
    return {
        "one_way_tvd": float(np.mean(one)),
        "two_way_tvd": float(np.mean(two)),
        "one_way_tvd_max": float(np.max(one)),
        "two_way_tvd_max": float(np.max(two)),
        "pairs": len(two),
        "synthetic_rows": int(len(synth)),
        "out_of_domain_cells": out_of_domain,
    }


# --------------------------------------------------------------------------- memory


def reset_peak() -> bool:
    """Reset this process's ``VmHWM`` (Linux >= 4.0: write 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def status_mb(key: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def maxrss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


# --------------------------------------------------------------------------- smartnoise


def run_smartnoise(
    codes, columns, sizes, eps, delta, domain_mode, extra: dict, diag=None, mechanism="mst"
):
    import pandas as pd
    from snsynth import Synthesizer
    from snsynth.transform import LabelTransformer, TableTransformer

    df = pd.DataFrame(codes, columns=columns)
    transformer = None
    if domain_mode == "public":
        # every code of every column, from the public sizes only (no private data)
        public = pd.DataFrame(
            {
                c: np.minimum(np.arange(max(sizes)), s - 1)
                for c, s in zip(columns, sizes, strict=True)
            }
        )
        transformer = TableTransformer([LabelTransformer(nullable=False) for _ in columns])
        transformer.fit(public)
        assert transformer.fit_complete and transformer.cardinality == sizes
    t0 = time.perf_counter()
    synth = Synthesizer.create(mechanism, epsilon=eps, delta=delta)
    synth.fit(df, transformer=transformer, categorical_columns=list(columns), preprocessor_eps=0.0)
    t1 = time.perf_counter()
    out = synth.sample(len(df))
    t2 = time.perf_counter()
    used = synth._transformer
    extra.update(
        cardinality=list(used.cardinality),
        transformer_fitted_on="public sizes" if domain_mode == "public" else "private data",
        epsilon_after_preprocessing=synth.epsilon,
        preprocessor_spent=list(used.odometer.spent),
    )
    arr = out[columns].to_numpy().astype(np.int64)
    if diag is not None:  # called by main after the run's memory is read: untimed

        def draw():
            model = synth.synthesizer  # mbi MarkovRandomField on col0.. (compressed domain)
            name = {f"col{j}": c for j, c in enumerate(columns)}
            diag["model_cliques"] = [[name[a] for a in cl] for cl in model.cliques if len(cl) > 1]
            # the same model and post-processing as Synthesizer.sample(), but mbi's i.i.d.
            # sampler (method="sample") instead of its default rank-based "round"
            data = synth.undo_compress_fn(model.synthetic_data(rows=len(df), method="sample"))
            rows = [tuple(t[1:]) for t in data.df.itertuples()]
            iid = synth._transformer.inverse_transform(rows)
            diag["iid"] = iid[columns].to_numpy().astype(np.int64)

        diag["draw"] = draw
    return arr, t1 - t0, t2 - t1


# --------------------------------------------------------------------------- opendp


def zcdp_rho(eps: float, delta: float) -> float:
    """The rho whose OpenDP zCDP -> (eps, delta) conversion gives ``eps`` at ``delta`` (a
    Gaussian mechanism's scale found by binary search, as SmartNoise's ``cdp_rho``)."""
    import opendp.prelude as dp

    dp.enable_features("contrib", "idealized-numerics")
    space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)

    def adp(scale):
        return dp.c.make_fix_delta(
            dp.c.make_zCDP_to_approxDP(dp.m.make_gaussian(*space, scale)), delta=delta
        )

    scale = dp.binary_search_param(adp, d_in=1.0, d_out=(eps, delta))
    return float(dp.m.make_gaussian(*space, scale).map(1.0))


def opendp_budget_check(eps: float, delta: float, max_selections: int = 40) -> dict:
    """Without data: for which numbers of MST selections k (= attributes - 1) does OpenDP's
    own composition of the k per-selection budgets exceed the selection budget it split off?

    Replays the arithmetic of ``opendp.extras.mbi`` for every column keyed and the default
    ``MST()``: ``make_contingency_table`` gives the one-way marginals half of rho and MST
    ``d_multiway = prior(prior(rho - rho / 2))``; ``MST.make_marginals`` measures with 0.9 of
    it and selects with ``d_select = prior(prior(d_multiway - 0.9 d_multiway))``;
    ``_make_mst_select`` gives each of its k noisy-max steps ``prior(d_select / k)`` and
    composes them (``then_adaptive_composition``). The k-fold composition is built with
    OpenDP's ``make_adaptive_composition`` and its privacy map compared with ``d_select``: a
    larger value is exactly the "insufficient budget for query" error, raised when the
    selection step is charged, before any selection runs."""
    import opendp.prelude as dp
    from opendp.extras.mbi._utilities import prior

    dp.enable_features("contrib")
    rho = zcdp_rho(eps, delta)
    d_multiway = float(prior(prior(rho - rho * 0.5)))
    d_select = float(prior(prior(d_multiway - d_multiway * 0.9)))
    fails, example = [], {}
    for k in range(1, max_selections + 1):
        per = float(prior(d_select / k))
        m = dp.c.make_adaptive_composition(
            dp.vector_domain(dp.atom_domain(T=int)),
            dp.symmetric_distance(),
            dp.zero_concentrated_divergence(),
            d_in=1,
            d_mids=[per] * k,
        )
        total = float(m.map(1))
        if total > d_select:
            fails.append(k)
            example.setdefault(str(k), f"{total!r} > {d_select!r}")
    return {
        "rho": rho,
        "d_select": d_select,
        "selections_that_fail": fails,
        "attribute_counts_that_fail": [k + 1 for k in fails],
        "first_failures": dict(list(example.items())[:3]),
    }


def run_opendp(
    codes, columns, sizes, eps, delta, keys_mode, extra: dict, diag=None, mechanism="mst"
):
    import opendp.extras.mbi._mst as mst_mod
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    rho = zcdp_rho(eps, delta)
    lf = pl.LazyFrame({c: codes[:, j] for j, c in enumerate(columns)})
    calls = {"n": 0}
    original = mst_mod.binary_search_chain

    def counting(*args, **kwargs):  # instrumentation only: counts, then delegates
        calls["n"] += 1
        return original(*args, **kwargs)

    mst_mod.binary_search_chain = counting
    extra.update(rho=rho, keys=keys_mode)
    try:
        t0 = time.perf_counter()
        if keys_mode == "public":
            ctx = dp.Context.compositor(
                data=lf,
                privacy_unit=dp.unit_of(contributions=1),
                privacy_loss=dp.loss_of(rho=rho),
                split_evenly_over=1,
            )
            keys = {c: list(range(s)) for c, s in zip(columns, sizes, strict=True)}
        else:
            ctx = dp.Context.compositor(
                data=lf,
                privacy_unit=dp.unit_of(contributions=1),
                privacy_loss=dp.loss_of(rho=rho, delta=delta),
                split_evenly_over=1,
            )
            keys = None
        algorithm = dp.mbi.AIM() if mechanism == "aim" else dp.mbi.MST()  # defaults
        query = ctx.query().contingency_table(keys=keys, algorithm=algorithm)
        table = query.release()
        t1 = time.perf_counter()
        frame = table.synthesize(rows=len(codes))
        t2 = time.perf_counter()
    finally:
        mst_mod.binary_search_chain = original
        extra["mst_binary_search_chain_calls"] = calls["n"]

    def to_codes(frame):
        arr = np.empty((frame.height, len(columns)), dtype=np.int64)
        nulls = {}
        for j, (c, s) in enumerate(zip(columns, sizes, strict=True)):
            col = frame[c]  # the keys are the codes; null (OpenDP's extra key) -> code `size`
            nulls[c] = int(col.null_count())
            arr[:, j] = col.cast(pl.Int64).fill_null(s).to_numpy()
        return arr, {c: n for c, n in nulls.items() if n}

    arr, extra["synthetic_nulls"] = to_codes(frame)
    extra["model_domain"] = {str(k): int(v) for k, v in table.model.domain.config.items()}
    if diag is not None:  # called by main after the run's memory is read: untimed

        def draw():
            diag["model_cliques"] = [list(cl) for cl in table.model.cliques if len(cl) > 1]
            # the same release, OpenDP's other public sampler: i.i.d. draws ("sample")
            iid = table.synthesize(rows=len(codes), method="sample")
            diag["iid"], diag["iid_nulls"] = to_codes(iid)

        diag["draw"] = draw
    return arr, t1 - t0, t2 - t1


# --------------------------------------------------------------------------- mbi (estimation)


def _jax_setup(x64: bool):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ["JAX_ENABLE_X64"] = "1" if x64 else "0"
    os.environ.setdefault("JAX_ENABLE_COMPILATION_CACHE", "false")
    import jax

    jax.config.update("jax_enable_x64", x64)
    jax.config.update("jax_enable_compilation_cache", False)
    return jax


def read_measurements(path: Path):
    z = np.load(path, allow_pickle=False)
    sizes = json.loads(str(z["sizes"]))
    ks = sorted(int(k.split("_", 1)[1]) for k in z.files if k.startswith("clique_"))
    ms = []
    for k in ks:
        clique = tuple(str(x) for x in np.atleast_1d(z[f"clique_{k}"]))
        y = np.asarray(z[f"y_{k}"], dtype=np.float64).ravel()
        cells = int(np.prod([sizes[c] for c in clique]))
        if y.size != cells:
            raise ValueError(f"y_{k}: {y.size} values, clique {clique} has {cells} cells")
        ms.append((k, clique, y, float(z[f"std_{k}"])))
    total = float(z["known_total"]) if "known_total" in z.files else None
    return sizes, ms, total


def run_mbi(measurements: Path, out_marginals: Path, iters: int, fits: int, x64: bool) -> dict:
    jax = _jax_setup(x64)
    from mbi import Domain, LinearMeasurement
    from mbi.estimation import MirrorDescent

    sizes, ms, total = read_measurements(measurements)
    domain = Domain.fromdict(sizes)
    lms = [LinearMeasurement(y, clique, stddev=std) for _, clique, y, std in ms]
    fit_s, project_s = [], []
    peaks = []
    for _ in range(max(1, fits)):
        reset_peak()
        t0 = time.perf_counter()
        model = MirrorDescent().estimate(domain, lms, known_total=total, iters=iters)
        jax.block_until_ready(model.marginals)
        t1 = time.perf_counter()
        margs = {
            k: np.asarray(model.project(clique).datavector(flatten=True), dtype=np.float64)
            for k, clique, _, _ in ms
        }
        t2 = time.perf_counter()
        fit_s.append(round(t1 - t0, 4))
        project_s.append(round(t2 - t1, 4))
        peaks.append(status_mb("VmHWM"))
    arrays = {
        "fit_seconds": np.array(fit_s),
        "project_seconds": np.array(project_s),
        "iters": np.array(iters),
        "total": np.array(float(model.total)),
    }
    arrays["seconds"] = np.array(fit_s[0])  # alias read by benchmarks/bench_synthesis.py
    for k, clique, _, _ in ms:
        arrays[f"marginal_{k}"] = margs[k]
        arrays[f"clique_{k}"] = np.array(clique)
        arrays[f"shape_{k}"] = np.array([sizes[c] for c in clique])
        arrays["|".join(clique)] = margs[k]  # alias: the marginal keyed "a|b" (or "a")
    out_marginals.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out_marginals, **arrays)
    return {
        "peer": "mbi",
        "mode": "estimation only: MirrorDescent().estimate",
        "measurements": str(measurements),
        "out_marginals": str(out_marginals),
        "attributes": len(sizes),
        "measured_cliques": len(ms),
        "iters": iters,
        "x64": x64,
        "known_total": total,
        "model_total": float(model.total),
        "fit_seconds": fit_s,
        "project_seconds": project_s,
        "vm_hwm_mb": peaks,
        "ru_maxrss_mb": maxrss_mb(),
    }


def mbi_self_test(iters: int) -> dict:
    """3 attributes (sizes 3, 4, 2), 600 correlated rows; 1-way and two 2-way measurements
    with Gaussian noise (std 4); the fitted marginals must be close to the truth."""
    rng = np.random.default_rng(7)
    n = 600
    a = rng.integers(0, 3, n)
    b = np.clip(a + rng.integers(0, 2, n), 0, 3)
    c = (b >= 2).astype(np.int64) ^ (rng.random(n) < 0.1)
    data = {"a": a, "b": b, "c": c}
    sizes = {"a": 3, "b": 4, "c": 2}
    cliques = [("a",), ("b",), ("c",), ("a", "b"), ("b", "c")]
    std = 4.0
    arrays = {"sizes": np.array(json.dumps(sizes))}
    truth = {}
    for k, cl in enumerate(cliques):
        idx = np.zeros(n, dtype=np.int64)
        for col in cl:
            idx = idx * sizes[col] + data[col]
        x = np.bincount(idx, minlength=int(np.prod([sizes[col] for col in cl]))).astype(float)
        truth[k] = x
        arrays[f"clique_{k}"] = np.array(cl)
        arrays[f"y_{k}"] = x + rng.normal(0, std, x.size)
        arrays[f"std_{k}"] = np.array(std)
    with tempfile.TemporaryDirectory() as tmp:
        mpath, opath = Path(tmp) / "m.npz", Path(tmp) / "f.npz"
        np.savez(mpath, **arrays)
        info = run_mbi(mpath, opath, iters, 1, True)
        z = np.load(opath)
        errs = {}
        for k, cl in enumerate(cliques):
            got = z[f"marginal_{k}"]
            assert list(z[f"clique_{k}"]) == list(cl), (z[f"clique_{k}"], cl)
            assert got.shape == truth[k].shape
            assert np.array_equal(z["|".join(cl)], got)
            errs["".join(cl)] = 0.5 * np.abs(got / got.sum() - truth[k] / n).sum()
        assert abs(float(z["total"]) - n) < 30, float(z["total"])
        # the noise alone is ~ std * sqrt(cells) / n per table; the fit must be of that order
        assert max(errs.values()) < 0.08, errs
    info["self_test"] = {
        "rows": n,
        "tvd_vs_truth": {k: round(v, 4) for k, v in errs.items()},
        "status": "ok",
    }
    return info


# --------------------------------------------------------------------------- main


def innermost_error(text: str) -> str:
    """The innermost message of a (possibly nested OpenDP FFI) error text: its last line
    that is not only closing quotes and brackets."""
    lines = [ln.strip() for ln in text.strip().splitlines()]
    lines = [ln for ln in lines if ln.strip("\"')] ")]
    return lines[-1] if lines else text


def version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def summary(values: list[float]) -> dict | None:
    if not values:
        return None
    return {
        "mean": round(statistics.fmean(values), 6),
        "median": round(statistics.median(values), 6),
        "min": round(min(values), 6),
        "max": round(max(values), 6),
        "n": len(values),
    }


def meta_block(argv: list[str]) -> dict:
    return {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "nproc": os.cpu_count(),
        "nice": os.nice(0),
        "loadavg_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "versions": {p: version(p) for p in VERSIONS if version(p)},
        "argv": argv,
        "project_venv_on_path": any(
            "/.venv/" in p or p.rstrip("/").endswith(".venv") for p in sys.path
        ),
    }


def child_run(args, i: int) -> dict:
    """Run ``i`` alone in a fresh interpreter of this environment; its run record."""
    import subprocess

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--peer", args.peer]
        cmd += ["--codes", str(args.codes), "--runs", "1", "--seed", str(args.seed + i)]
        cmd += ["--epsilon", repr(args.epsilon), "--delta", repr(args.delta)]
        cmd += ["--smartnoise-domain", args.smartnoise_domain]
        cmd += ["--opendp-keys", args.opendp_keys, "--out", str(out)]
        cmd += ["--mechanism", args.mechanism]
        if args.limit_rows:
            cmd += ["--limit-rows", str(args.limit_rows)]
        if args.diagnose:
            cmd += ["--diagnose"]
        if args.save_synthetic and i == 0:
            cmd += ["--save-synthetic", str(args.save_synthetic)]
        print(f"[run {i}] fresh process", file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if proc.returncode == 0 and out.exists():
            rec = json.loads(out.read_text())["runs"][0]
        else:
            tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
            rec = {"status": "error", "error": f"child exited {proc.returncode}: {tail}"}
    rec["run"] = i
    print(
        f"[done {i}] " + json.dumps({k: v for k, v in rec.items() if k != "traceback"}),
        file=sys.stderr,
        flush=True,
    )
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer", choices=["smartnoise", "opendp", "mbi"], required=True)
    ap.add_argument("--codes", type=Path, help="the code matrix from export_adult_codes.py")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument(
        "--seed",
        type=int,
        default=0,
        help="numpy seed of run i is seed + i "
        "(sampling, SmartNoise's exponential mechanism); OpenDP noise is unseeded",
    )
    ap.add_argument("--limit-rows", type=int, default=None, help="smoke tests: first N rows")
    ap.add_argument("--smartnoise-domain", choices=["public", "data"], default="public")
    ap.add_argument("--opendp-keys", choices=["public", "discover"], default="public")
    ap.add_argument(
        "--mechanism",
        choices=["mst", "aim"],
        default="mst",
        help="smartnoise / opendp: the synthesizer (SmartNoise's 'aim', OpenDP's dp.mbi.AIM() "
        "with its defaults)",
    )
    ap.add_argument(
        "--budget-check",
        action="store_true",
        help="opendp: no data, no runs; which attribute counts make OpenDP's MST overrun its "
        "own selection budget at (--epsilon, --delta)",
    )
    ap.add_argument(
        "--process-per-run",
        action="store_true",
        help="run each run in a fresh interpreter (sys.executable, same environment): cold "
        "JIT caches and a per-run peak RSS; without it the runs share one process",
    )
    ap.add_argument("--out", type=Path, help="JSON result file")
    ap.add_argument(
        "--save-synthetic",
        type=Path,
        metavar="PATH",
        help="write run 0's synthetic codes to PATH (Parquet, the input's column names and "
        "order, int64; a null is code == size); with --diagnose also the i.i.d. draw from "
        "the same fitted model to PATH with suffix .iid.parquet",
    )
    ap.add_argument(
        "--diagnose",
        action="store_true",
        help="after each (timed) run, untimed: record the fitted model's cliques (the tree "
        "MST measured) and the fidelity of a second draw from the SAME model with mbi's "
        "i.i.d. sampler (method='sample') instead of the peer's default ('round')",
    )
    ap.add_argument("--measurements", type=Path, help="mbi: the noisy measurements (.npz)")
    ap.add_argument("--out-marginals", type=Path, help="mbi: the fitted marginals (.npz)")
    ap.add_argument("--iters", type=int, default=1000, help="mbi: MirrorDescent iterations")
    ap.add_argument("--fits", type=int, default=1, help="mbi: fits to time (same inputs)")
    ap.add_argument("--float32", action="store_true", help="mbi: JAX in float32")
    ap.add_argument("--self-test", action="store_true", help="mbi: tiny synthetic check")
    args = ap.parse_args(argv)
    argv_used = sys.argv[1:] if argv is None else argv
    meta = meta_block(argv_used)

    if args.peer == "mbi":
        if args.self_test:
            info = mbi_self_test(args.iters)
        else:
            if not (args.measurements and args.out_marginals):
                ap.error("--peer mbi needs --measurements and --out-marginals (or --self-test)")
            info = run_mbi(
                args.measurements, args.out_marginals, args.iters, args.fits, not args.float32
            )
        result = {"meta": meta, **info}
        text = json.dumps(result, indent=2)
        print(text)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n")
        return 0

    if args.budget_check:
        if args.peer != "opendp":
            ap.error("--budget-check is for --peer opendp")
        result = {"meta": meta, "peer": "opendp", "epsilon": args.epsilon, "delta": args.delta}
        result["budget_check"] = opendp_budget_check(args.epsilon, args.delta)
        text = json.dumps(result, indent=2)
        print(json.dumps(result["budget_check"], indent=1))
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n")
        return 0

    if args.codes is None:
        ap.error("--codes is required for smartnoise / opendp")
    codes, columns, sizes, source = load_codes(args.codes)
    if args.limit_rows:
        codes = codes[: args.limit_rows]
    result = {
        "meta": meta,
        "peer": args.peer,
        "dataset": {
            "codes": str(args.codes),
            "rows": int(len(codes)),
            "columns": columns,
            "sizes": dict(zip(columns, sizes, strict=True)),
            "source": source,
        },
        "epsilon": args.epsilon,
        "delta": args.delta,
        "runs": [],
    }
    if args.peer == "smartnoise":
        result["smartnoise_domain"] = args.smartnoise_domain
        try:
            from snsynth.utils import cdp_rho

            result["rho"] = float(cdp_rho(args.epsilon, args.delta))
        except Exception as exc:  # noqa: BLE001 - informative only
            result["rho"] = f"unavailable: {exc}"
    else:
        result["opendp_keys"] = args.opendp_keys

    result["mechanism"] = args.mechanism
    result["process_per_run"] = args.process_per_run
    for i in range(args.runs):
        if args.process_per_run:
            result["runs"].append(child_run(args, i))
            continue
        np.random.seed(args.seed + i)  # noqa: NPY002 - the peers draw from the global RNG
        rec = {"run": i, "seed": args.seed + i, "loadavg_1m_before": round(os.getloadavg()[0], 2)}
        rec["peak_reset"] = reset_peak()
        rec["vm_rss_before_mb"] = status_mb("VmRSS")
        print(f"[run {i}] {args.peer}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        extra: dict = {}
        diag: dict | None = {} if args.diagnose else None
        try:
            if args.peer == "smartnoise":
                synth, fit_s, sample_s = run_smartnoise(
                    codes,
                    columns,
                    sizes,
                    args.epsilon,
                    args.delta,
                    args.smartnoise_domain,
                    extra,
                    diag,
                    args.mechanism,
                )
            else:
                synth, fit_s, sample_s = run_opendp(
                    codes,
                    columns,
                    sizes,
                    args.epsilon,
                    args.delta,
                    args.opendp_keys,
                    extra,
                    diag,
                    args.mechanism,
                )
            rec.update(
                status="ok",
                seconds=round(fit_s + sample_s, 3),
                fit_s=round(fit_s, 3),
                sample_s=round(sample_s, 3),
            )
            rec["vm_hwm_mb"] = status_mb("VmHWM")
            rec["ru_maxrss_mb"] = maxrss_mb()
            rec.update(fidelity(codes, synth, sizes))
            if diag is not None:
                diag["draw"]()
                rec["diagnostic"] = {
                    "model_cliques": diag["model_cliques"],
                    "iid_sample": fidelity(codes, diag["iid"], sizes),
                    "iid_nulls": diag.get("iid_nulls"),
                }
            if args.save_synthetic and i == 0:
                info = {"peer": args.peer, "run": i, "seed": args.seed + i, "sampler": "default"}
                save_codes(args.save_synthetic, synth, columns, sizes, info)
                rec["saved_synthetic"] = str(args.save_synthetic)
                if diag is not None:
                    iid_path = args.save_synthetic.with_suffix(".iid.parquet")
                    save_codes(iid_path, diag["iid"], columns, sizes, {**info, "sampler": "iid"})
                    rec["saved_synthetic_iid"] = str(iid_path)
        except Exception as exc:  # noqa: BLE001 - record, don't crash
            rec.update(
                status="error",
                seconds_until_error=round(time.perf_counter() - t0, 3),
                error=f"{type(exc).__name__}: {exc}",
                error_innermost=innermost_error(f"{type(exc).__name__}: {exc}"),
                traceback=traceback.format_exc(limit=-6),
            )
            rec["vm_hwm_mb"] = status_mb("VmHWM")
            rec["ru_maxrss_mb"] = maxrss_mb()
        rec.update(extra)
        print(
            f"[done {i}] " + json.dumps({k: v for k, v in rec.items() if k != "traceback"}),
            file=sys.stderr,
            flush=True,
        )
        result["runs"].append(rec)

    ok = [r for r in result["runs"] if r["status"] == "ok"]
    result["summary"] = {
        "runs": len(result["runs"]),
        "ok": len(ok),
        "errors": sorted(
            {r.get("error_innermost", r["error"]) for r in result["runs"] if r["status"] == "error"}
        ),
        "seconds": summary([r["seconds"] for r in ok]),
        "fit_s": summary([r["fit_s"] for r in ok]),
        "sample_s": summary([r["sample_s"] for r in ok]),
        "vm_hwm_mb": summary([r["vm_hwm_mb"] for r in ok if r["vm_hwm_mb"] is not None]),
        "ru_maxrss_mb_max": max((r["ru_maxrss_mb"] for r in result["runs"]), default=None),
        "one_way_tvd": summary([r["one_way_tvd"] for r in ok]),
        "two_way_tvd": summary([r["two_way_tvd"] for r in ok]),
    }
    result["meta"]["loadavg_end"] = list(os.getloadavg())
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
