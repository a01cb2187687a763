"""Validation cost on UCI Adult: evidence build and every checker of the Fair-MDAV contract,
with the greedy-trace check (C11) replaying every group, beside a plain dense replay (the
previous checker's method: gather the remaining rows and recompute their mean and distances
from scratch for each group) timed on a sample of groups and extrapolated to all of them.

    PRIVFAIR_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_validation.py [--sample 200]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from harness import spec_file


def dense_replay(audit, ids: np.ndarray) -> float:
    """Seconds for the dense per-group replay of ``ids`` (seed farthest from the mean of the
    remaining rows, members nearest the seed), the method C11 used before."""
    num = [c for c in audit.columns if c.startswith("__in_num__")]
    hot = [c for c in audit.columns if c.startswith("__in_hot__")]
    x = audit[num].to_numpy(dtype=np.float64)
    lo, hi = x.min(axis=0), x.max(axis=0)
    x = np.hstack([(x - lo) / np.where(hi > lo, hi - lo, 1.0), audit[hot].to_numpy(np.float64)])
    grp = audit["__group"].to_numpy()
    key = np.where(grp < 0, np.iinfo(np.int64).max, grp)
    t0 = time.perf_counter()
    for gi in ids:
        rows = np.flatnonzero(key >= gi)
        xr = x[rows]
        d_ref = ((xr - xr.mean(axis=0)) ** 2).sum(axis=1)
        seed = rows[int(np.argmax(d_ref))]
        ((xr - x[seed]) ** 2).sum(axis=1)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--sample", type=int, default=200, help="groups replayed by the dense baseline")
    args = p.parse_args()

    from privfair.components.core.descriptor import resolve
    from privfair.components.core.registry import kind_checks
    from privfair.run import flow
    from privfair.spec.catalogue import load_spec

    spec = load_spec(spec_file("adult_fair_mdav"))
    ing = flow.ingest(spec)
    t = time.perf_counter()
    result = flow.protect(spec, ing)
    protect_s = time.perf_counter() - t
    algo = flow.algorithm_of(spec)
    t = time.perf_counter()
    frames = resolve(algo.evidence)(ing.table, result.outputs, result.sidecars, spec.params)
    evidence_s = time.perf_counter() - t
    print(f"Adult, Fair-MDAV k=10: protect {protect_s:.2f} s, evidence {evidence_s:.2f} s")
    print("| guarantee | seconds | holds |\n|---|---:|---|")
    checks = kind_checks()
    total = 0.0
    for g in result.contract:
        kc = checks[g.kind]
        t = time.perf_counter()
        r = resolve(kc.check)(g, frames[kc.frame])
        dt = time.perf_counter() - t
        total += dt
        print(f"| {g.title} | {dt:.3f} | {r.passed} |")
    audit = frames["audit"]
    n_groups = int(audit["__group"].max()) + 1
    ids = np.sort(
        np.random.default_rng(0).choice(n_groups, min(args.sample, n_groups), replace=False)
    )
    dense = dense_replay(audit, ids)
    print(f"all checkers: {total:.2f} s")
    print(
        f"dense replay baseline: {dense:.2f} s for {len(ids)} of {n_groups} groups, "
        f"~{dense * n_groups / len(ids):.0f} s extrapolated to all"
    )


if __name__ == "__main__":
    main()
