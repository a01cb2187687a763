"""Would a compiled kernel without the engine's pruning bring Fair-MDAV under 1 s? A probe.

Usage (from the repository root; numba is not a privfair dependency, so it runs in an
environment of its own)::

    PRIVFAIR_DATA_DIR=../shared/data uv run --with numba==0.68.1 python benchmarks/compiled_kernel_probe.py

What runs
---------
Fair-MDAV's MakeFairlets on UCI Adult, k = 10, twice on the same inputs (the encoding, the
protected attribute and the fairlet sizes (m, n) that ``fair_mdav`` hands its grouping, taken
from one component call):

- *engine*: ``components.microaggregation.grouping.make_fairlets``, the shipped engine (running
  sums, an anchor's triangle bound for the farthest record, signatures and numeric boxes for
  the nearest ones; NumPy calls per group);
- *kernel*: the same algorithm as one numba function (``fairlets``) that visits every remaining
  record for each decision (no pruning): squared distances in the mixed numeric/nominal form of
  ``components.microaggregation.encoding``, the farthest record as the lowest row within
  ``TIE_TOL`` of the largest distance, the nearest ones by (distance, row) with distances within
  ``TIE_TOL`` chained into ties, as ``grouping.nearest_in`` orders them.

It reports the engine's time, the kernel's first call (compilation included) and its best
call, numba's import in a fresh interpreter, and how many of the engine's fairlets the kernel
reproduces (same rows, same seed, same creation order). The kernel's arithmetic is not the
engine's (direct differences in float64, not the expanded form and extended-precision sums),
so equal groupings are measured here, not guaranteed. The report goes to stdout and to
``benchmarks/results_compiled_kernel_probe.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _harness import machine

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

TIE_TOL = 1e-11  # components.microaggregation.grouping.TIE_TOL, checked in main
K = 10


def _kernels():
    """The numba functions (compiled on first call)."""
    from numba import njit

    @njit(cache=False)
    def _nearest(d, rows, n, k, tie):
        """Positions (into ``d[:n]``) of the k nearest: the k-th smallest distance, every entry
        within ``tie`` of it, ordered by (distance, row) with ties chained, the first k."""
        if k <= 0:
            return np.empty(0, np.int64)
        kth = np.inf
        if n > k:
            kth = np.partition(d[:n].copy(), k - 1)[k - 1]
        pos = np.empty(n, np.int64)
        c = 0
        for i in range(n):
            if (d[i] <= kth + tie) if kth < np.inf else (d[i] < np.inf):
                pos[c] = i
                c += 1
        pos = pos[:c]
        o = pos[np.argsort(rows[pos], kind="mergesort")]
        o = o[np.argsort(d[o], kind="mergesort")]
        block = np.zeros(c, np.int64)
        for t in range(1, c):
            block[t] = block[t - 1] + (0 if d[o[t]] - d[o[t - 1]] <= tie else 1)
        key = block * (rows.max() + 1) + rows[o]
        return o[np.argsort(key, kind="mergesort")][: min(k, c)]

    @njit(cache=False)
    def fairlets(x, codes, offsets, n_levels, pa01, m, n, tie):
        """MakeFairlets over every remaining record: (seeds, members) in creation order."""
        n_rows, q = x.shape
        a_count = codes.shape[1]
        sets = [np.flatnonzero(pa01 == 0), np.flatnonzero(pa01 == 1)]
        sizes = np.array([len(sets[0]), len(sets[1])])
        need = np.array([m, n])
        sums = np.zeros(q)
        counts = np.zeros(n_levels)
        for i in range(n_rows):
            for j in range(q):
                sums[j] += x[i, j]
            for a in range(a_count):
                if codes[i, a] >= 0:
                    counts[offsets[a] + codes[i, a]] += 1
        buf = np.empty(n_rows)
        table = np.empty(n_levels)
        centre = np.empty(q)
        seeds = []
        members = []
        while sizes[0] >= m and sizes[1] >= n:
            alive = sizes[0] + sizes[1]
            for j in range(q):
                centre[j] = sums[j] / alive
            const = 0.0
            for lv in range(n_levels):
                share = counts[lv] / alive
                table[lv] = 1.0 - 2.0 * share
                const += share * share
            # the farthest record from the centre: the lowest row within ``tie`` of the largest
            best = -np.inf
            for s in range(2):
                rows = sets[s]
                for i in range(sizes[s]):
                    r = rows[i]
                    acc = const
                    for j in range(q):
                        t = x[r, j] - centre[j]
                        acc += t * t
                    for a in range(a_count):
                        if codes[r, a] >= 0:
                            acc += table[offsets[a] + codes[r, a]]
                    buf[r] = acc
                    best = max(best, acc)
            seed, seed_set = n_rows, -1
            for s in range(2):
                rows = sets[s]
                for i in range(sizes[s]):
                    r = rows[i]
                    if r < seed and buf[r] >= best - tie:
                        seed, seed_set = r, s
            group = []
            for s in range(2):
                rows = sets[s]
                size = sizes[s]
                for i in range(size):
                    r = rows[i]
                    acc = 0.0
                    for j in range(q):
                        t = x[r, j] - x[seed, j]
                        acc += t * t
                    for a in range(a_count):
                        c, cs = codes[r, a], codes[seed, a]
                        if c != cs:
                            acc += (1.0 if c >= 0 else 0.0) + (1.0 if cs >= 0 else 0.0)
                    buf[i] = np.inf if r == seed else acc
                k = need[s] - (1 if s == seed_set else 0)
                chosen = _nearest(buf, rows, size, k, tie)
                dead = np.zeros(size, np.bool_)
                if s == seed_set:
                    group.append(seed)
                    for i in range(size):
                        dead[i] = dead[i] or rows[i] == seed
                for c in chosen:
                    dead[c] = True
                    group.append(rows[c])
                kept = 0
                for i in range(size):
                    r = rows[i]
                    if dead[i]:
                        for j in range(q):
                            sums[j] -= x[r, j]
                        for a in range(a_count):
                            if codes[r, a] >= 0:
                                counts[offsets[a] + codes[r, a]] -= 1
                    else:
                        rows[kept] = r
                        kept += 1
                sizes[s] = kept
            seeds.append(seed)
            members.append(np.array(group))
        return seeds, members

    return fairlets


def grouping_inputs(data_dir: str | None):
    """(encoding, pa01, m, n) as ``fair_mdav`` hands them to its grouping on Adult, k = 10."""
    from bench_microaggregation import build_data

    from components.microaggregation import blocking
    from components.microaggregation.fair_mdav import fair_mdav
    from components.microaggregation.params import FairMDAVParams

    seen: dict = {}
    shipped = blocking.make_fairlets

    def spy(enc, pa01, m, n):
        seen.update(enc=enc, pa01=pa01, m=m, n=n)
        return shipped(enc, pa01, m, n)

    blocking.make_fairlets = spy
    try:
        fair_mdav(build_data("adult", data_dir), FairMDAVParams(k=K))
    finally:
        blocking.make_fairlets = shipped
    return seen["enc"], seen["pa01"], seen["m"], seen["n"]


def numba_import_seconds() -> float:
    """numba's import in a fresh interpreter, after NumPy's (best of 3)."""
    code = (
        "import time, numpy; s = time.perf_counter(); import numba; print(time.perf_counter() - s)"
    )
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], check=True, capture_output=True, text=True
            ).stdout
        )
        for _ in range(3)
    ]
    return min(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("PRIVFAIR_DATA_DIR"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(HERE / "results_compiled_kernel_probe.md"))
    args = parser.parse_args()
    import numba

    from components.microaggregation import grouping

    assert grouping.TIE_TOL == TIE_TOL, "the probe's tie tolerance must be the engine's"
    enc, pa01, m, n = grouping_inputs(args.data_dir)
    engine_s = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        ref = grouping.make_fairlets(enc, pa01, m, n)
        engine_s.append(time.perf_counter() - start)

    x = np.ascontiguousarray(enc.scaled, dtype=np.float64)
    codes = np.ascontiguousarray(enc.codes, dtype=np.int64)
    levels = np.array([len(a.levels) for a in enc.nominal], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(levels)[:-1]]).astype(np.int64)
    call = (x, codes, offsets, int(levels.sum()), pa01.astype(np.int64), m, n, TIE_TOL)
    fairlets = _kernels()
    start = time.perf_counter()
    seeds, members = fairlets(*call)
    first_s = time.perf_counter() - start
    kernel_s = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        seeds, members = fairlets(*call)
        kernel_s.append(time.perf_counter() - start)

    same = sum(
        int(s == rs and set(g.tolist()) == set(rg.tolist()))
        for s, g, rs, rg in zip(seeds, members, ref.seeds, ref.members, strict=False)
    )
    info = machine()
    lines = [
        "# A compiled MakeFairlets without pruning, against the engine (Fair-MDAV, Adult, k = 10)",
        "",
        "- Command: `PRIVFAIR_DATA_DIR=../shared/data uv run --with numba==0.68.1 python "
        "benchmarks/compiled_kernel_probe.py`",
        f"- Date {info['date']}; {info['cpus']} cores ({info['cpu']}); Python {info['python']}, "
        f"numpy {info['numpy']}, numba {numba.__version__}",
        f"- {len(pa01):,} rows, (m, n) = ({m}, {n}), best of {args.repeats}",
        "",
        "| | seconds |",
        "|---|---|",
        f"| engine (`grouping.make_fairlets`) | {min(engine_s):.2f} |",
        f"| kernel, first call (compilation included) | {first_s:.2f} |",
        f"| kernel, best call | {min(kernel_s):.2f} |",
        f"| numba's import, fresh interpreter | {numba_import_seconds():.2f} |",
        "",
        f"Fairlets: engine {len(ref.seeds):,}, kernel {len(seeds):,}; the kernel reproduces "
        f"{same:,} of them (same seed, same rows, same place in the creation order).",
        "",
    ]
    text = "\n".join(lines)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
