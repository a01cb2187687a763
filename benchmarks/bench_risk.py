"""Re-identification risk and l-diversity of published copies: ours against pycanon, same run.

For each release (its shareable copy in a store, default ``releases/``: publish it first with
``privfair run pipelines/specs/<name>.yaml``), times

- ours: ``privfair.components.core.risk.risk_metrics`` on the Arrow table (what every
  row-level run computes: the prosecutor and marketer risk, uniques, class sizes, the distinct
  and entropy l-diversity of the label), best of ``--repeats``;
- pycanon 1.0.1: ``k_anonymity``, ``l_diversity`` and ``entropy_l_diversity`` over the same
  background and label, on the table as pandas (generalised cells as text), one run;

and checks both give the same k (1 / highest prosecutor risk) and l. An ``xN`` entry repeats
the table N times with a column of jitter (every class N times as many rows: the work grows,
the answers are known).

    PRIVFAIR_DATA_DIR=/work/shared/data .venv/bin/python benchmarks/bench_risk.py
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from privfair.components.core.risk import background, diversity_columns, risk_metrics
from privfair.release.store import resolve_release

ROOT = Path(__file__).resolve().parents[1]
RELEASES = ("german_fair_mdav", "german_dmondrian", "german_dsabre", "adult_fair_mdav",
            "adult_dmondrian")  # fmt: skip


def _plain(table: pa.Table):
    df = table.to_pandas()
    for c in df.columns:
        if df[c].dtype == object:
            df[c] = df[c].map(lambda v: json.dumps(v, default=list, sort_keys=True))
    return df


def _best(fn, repeats: int) -> tuple[float, object]:
    best, out = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _measure(name: str, table: pa.Table, repeats: int, pycanon: bool) -> dict:
    from pycanon import anonymity

    cols, label = background(table), diversity_columns(table)[0]
    ours_s, ours = _best(lambda: risk_metrics(table), repeats)
    risk = ours["reidentification_risk"]
    row = {
        "release": name,
        "rows": table.num_rows,
        "background": len(cols),
        "ours_s": ours_s,
        "k": round(1 / risk["prosecutor"]["highest"]),
        "l": ours["l_diversity"][label]["distinct"],
        "entropy_l": ours["l_diversity"][label]["entropy"],
    }
    if pycanon:
        df = _plain(table)
        t0 = time.perf_counter()
        k = anonymity.k_anonymity(df, cols)
        ld = anonymity.l_diversity(df, cols, [label])
        el = anonymity.entropy_l_diversity(df, cols, [label])
        row |= {"pycanon_s": time.perf_counter() - t0, "pycanon_k": k, "pycanon_l": ld}
        row["same"] = (k, ld) == (row["k"], row["l"]) and el in (
            math.floor(row["entropy_l"] + 1e-9),
            math.floor(row["entropy_l"] - 1e-9),
        )
    return row


def _times(table: pa.Table, n: int) -> pa.Table:
    """``table`` repeated ``n`` times: every class ``n`` times as large."""
    return pa.concat_tables([table] * n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=str(ROOT / "releases"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--times", type=int, default=10, help="the xN copy of Adult Fair-MDAV")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "results_risk.md"))
    args = ap.parse_args()
    rows = []
    for name in RELEASES:
        folder = resolve_release(Path(args.store) / name / "latest") / "shared"
        table = pq.read_table(folder / "data.parquet")
        rows.append(_measure(name, table, args.repeats, pycanon=True))
        print(rows[-1], flush=True)
        if name == "adult_fair_mdav" and args.times > 1:
            big = _times(table, args.times)
            rows.append(_measure(f"{name} x{args.times}", big, args.repeats, pycanon=True))
            print(rows[-1], flush=True)
    lines = [
        "# Re-identification risk and l-diversity: ours vs pycanon",
        "",
        f"`.venv/bin/python benchmarks/bench_risk.py` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}, load "
        f"{os.getloadavg()[0]:.1f}); ours best of {args.repeats}, pycanon one run.",
        "",
        "| release | rows | background columns | k = 1/highest risk | l (distinct) | entropy l | ours (s) | pycanon (s) | same k, l, entropy l |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['release']} | {r['rows']:,} | {r['background']} | {r['k']} | {r['l']} | "
            f"{r['entropy_l']:.3f} | {r['ours_s']:.3f} | {r.get('pycanon_s', float('nan')):.2f} | "
            f"{r.get('same')} |"
        )
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
