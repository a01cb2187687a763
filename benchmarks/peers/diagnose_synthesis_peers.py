"""Recompute, in OUR environment, the fidelity of the synthetic tables that
``run_synthesis_peers.py --diagnose --save-synthetic PATH`` saved, and break the 2-way TVD
down by the pair's distance in the tree the peer's MST measured.

For each run JSON given, it reads run 0's ``saved_synthetic`` (the peer's default sampler,
mbi 1.1.0 ``method="round"``), ``saved_synthetic_iid`` (the same fitted model, i.i.d. draws)
and ``diagnostic.model_cliques``, and compares both tables with the input codes and with a
naive table (every column independently permuted: true 1-way marginals, no dependence; mean
of 10 draws), using ``privfair.components.synthesis.metrics.one_way_tvd`` / ``two_way_tvd`` with
``sizes`` = largest input code + 1 (widened by one for a column holding OpenDP's null)::

    uv run python benchmarks/peers/diagnose_synthesis_peers.py \
        --codes /tmp/synpeers/adult_codes.parquet /tmp/synpeers/diag/sn_diag.json ... \
        [--out evidence.json]
"""

from __future__ import annotations

import argparse
import json
from collections import deque
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from privfair.components.synthesis import metrics as M

STRONG = [
    "marital-status|relationship",
    "relationship|sex",
    "education-num|occupation",
    "relationship|income",
    "marital-status|sex",
    "age|marital-status",
    "occupation|sex",
    "relationship|hours-per-week",
    "occupation|hours-per-week",
]


def load(path) -> tuple[list[str], dict[str, np.ndarray]]:
    t = pq.read_table(path)
    return t.column_names, {c: t.column(c).to_numpy().astype(np.int64) for c in t.column_names}


def distances(columns: list[str], edges: list[list[str]]) -> dict[tuple[str, str], int]:
    """Shortest-path lengths between all columns in the (tree) graph of ``edges``."""
    adj: dict[str, set[str]] = {c: set() for c in columns}
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    out = {}
    for s in columns:
        seen, todo = {s: 0}, deque([s])
        while todo:
            u = todo.popleft()
            for v in adj[u]:
                if v not in seen:
                    seen[v] = seen[u] + 1
                    todo.append(v)
        for t, d in seen.items():
            out[s, t] = d
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--codes", type=Path, required=True, help="the input code matrix")
    ap.add_argument("runs", type=Path, nargs="+", help="run JSONs written with --diagnose")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    columns, real = load(args.codes)
    base = {c: int(real[c].max()) + 1 for c in columns}

    def score(syn):
        sizes = {c: max(base[c], int(syn[c].max()) + 1) for c in columns}
        one = M.one_way_tvd(real, syn, sizes)
        two = {f"{a}|{b}": v for (a, b), v in M.two_way_tvd(real, syn, sizes).items()}
        return float(np.mean(list(one.values()))), two

    rng = np.random.default_rng(0)
    draws = [score({c: rng.permutation(real[c]) for c in columns})[1] for _ in range(10)]
    naive = {k: float(np.mean([d[k] for d in draws])) for k in draws[0]}
    result = {"naive_two_way_tvd": round(float(np.mean(list(naive.values()))), 4), "runs": []}
    for path in args.runs:
        doc = json.loads(path.read_text())
        rec = doc["runs"][0]
        tree = rec["diagnostic"]["model_cliques"]
        dist = distances(columns, tree)
        entry = {
            "peer": doc["peer"],
            "json": str(path),
            "measured_tree": ["-".join(e) for e in tree],
            "metrics_py": {},
        }
        pairs = {}
        for kind, key in (
            ("default_round", "saved_synthetic"),
            ("iid_same_model", "saved_synthetic_iid"),
        ):
            cols, syn = load(rec[key])
            if cols != columns:
                raise SystemExit(f"{rec[key]}: columns {cols} != input {columns}")
            one, pairs[kind] = score(syn)
            entry["metrics_py"][kind] = {
                "one_way_tvd": round(one, 4),
                "two_way_tvd": round(float(np.mean(list(pairs[kind].values()))), 4),
            }
        by: dict[str, list[str]] = {}
        for k in naive:
            a, b = k.split("|")
            by.setdefault(str(dist[a, b]) if dist[a, b] < 3 else "3+", []).append(k)
        entry["two_way_tvd_by_tree_distance"] = {
            d: {
                "pairs": len(ks),
                "naive": round(float(np.mean([naive[k] for k in ks])), 4),
                **{kind: round(float(np.mean([p[k] for k in ks])), 4) for kind, p in pairs.items()},
                "round_worse_than_naive": sum(pairs["default_round"][k] > naive[k] for k in ks),
            }
            for d, ks in sorted(by.items())
        }
        entry["pairs"] = {
            k: {
                "tree_distance": dist[tuple(k.split("|"))],
                "naive": round(naive[k], 3),
                **{kind: round(p[k], 3) for kind, p in pairs.items()},
            }
            for k in STRONG
            if k in naive
        }
        result["runs"].append(entry)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
