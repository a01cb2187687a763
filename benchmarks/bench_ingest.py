"""Ingest of a large file: wall time and the driver's peak private memory, streamed into a map
(the working tree) against the code before (``--baseline``), in the same run.

    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/adult_like.py --rows 10000000 \\
        --spec adult_dmondrian --set block_rows=50000 --out scale
    uv run python benchmarks/bench_ingest.py scale/adult_dmondrian_10m.yaml --baseline ca39161

Each measurement is a fresh interpreter running ``privfair.run.flow.ingest`` of the spec (what
``privfair run`` does before it protects: the file read, labelled, checked and held in a
memory-mapped copy) on one tree, that tree's own code (``harness.prepare_tree``: a tree from
before the rename runs ``pipelines.flow.ingest``; the child checks where it imported it from), sampled by ``harness.tracked``: the driver's private memory
is its RSS less file-backed pages, so the mapped table it keeps is not counted, what it
decoded on the way is. The spec's Parquet file is also written beside it as CSV and as a
SQLite table read through ADBC (``--formats``), and each format is measured; the table each tree ingested is fingerprinted
the same way in both trees (1,000 rows spread over it), so the script also shows that both
read the same rows.
Writes a Markdown table to stdout and ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import yaml
from harness import ROOT, export_code, machine, prepare_tree, result, tracked

CHILD = """
import hashlib, json, os, sys, time
from harness import imported_from, tree_module
load_spec = tree_module("privfair.spec.catalogue").load_spec
ingest = tree_module("privfair.run.flow").ingest
where = imported_from(os.getcwd(), {top!r}, {flow!r})
print("imported:", json.dumps(where), file=sys.stderr)
t0 = time.perf_counter()
ing = ingest(load_spec({spec!r}))
wall = time.perf_counter() - t0
n = ing.table.num_rows  # 1,000 rows spread over the table: a digest chunking cannot change
sample = ing.table.take(list(range(0, n, max(1, n // 1000)))).to_pydict()
h = hashlib.sha256(json.dumps(sample, default=str, sort_keys=True).encode())
assert {top!r} == "privfair" or "privfair" not in sys.modules, "the old tree imported privfair"
print(json.dumps({{"ingest_s": wall, "rows": ing.table.num_rows, "head": h.hexdigest()[:12],
                  "fingerprint": ing.input["fingerprint"][:12]}}))
"""


def spec_as(spec: Path, fmt: str, folder: Path) -> Path:
    """``spec`` with its Parquet dataset rewritten as ``fmt`` (written once, beside it)."""
    data = yaml.safe_load(spec.read_text())
    parquet = spec.parent / data["dataset"]["path"]
    if fmt == "parquet":
        return spec
    stem = parquet.with_suffix("").name
    if fmt == "csv":
        path = folder / f"{stem}.csv"
        if not path.exists():
            pacsv.write_csv(pq.read_table(parquet).replace_schema_metadata(None), path)
        data["dataset"]["path"] = str(path)
    elif fmt == "sqlite":  # a database table: streamed from the cursor, then put in value order
        path = folder / f"{stem}.sqlite"
        if not path.exists():
            import adbc_driver_sqlite.dbapi as sqlite

            with sqlite.connect(str(path)) as conn, conn.cursor() as cur:
                cur.adbc_ingest("adult", pq.read_table(parquet).replace_schema_metadata(None))
                conn.commit()
        del data["dataset"]["path"]
        data["dataset"]["source"] = {"kind": "sql", "url": f"sqlite:///{path}", "table": "adult"}
    else:
        raise SystemExit(f"--formats: '{fmt}' is not parquet, csv or sqlite")
    out = folder / f"{spec.stem}_{fmt}.yaml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", type=Path, help="a spec whose dataset is a Parquet file")
    ap.add_argument("--baseline", default="ca39161", help="the code before (a git revision)")
    ap.add_argument("--formats", default="parquet,csv,sqlite")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out", type=Path, default=result("results_ingest.md"))
    args = ap.parse_args(argv)
    spec = args.spec.resolve()
    with tempfile.TemporaryDirectory(prefix="privfair-ingest-") as tmp:
        base = Path(tmp) / "baseline"
        commit = export_code(args.baseline, base)
        trees = {
            f"baseline ({commit[:7]})": prepare_tree(base),
            "new (working tree)": prepare_tree(ROOT),
        }
        rows = []
        for fmt in args.formats.split(","):
            path = spec_as(spec, fmt, spec.parent)
            for _ in range(args.rounds):
                for name, tree in trees.items():
                    names = {"top": tree.top, "flow": tree.module("privfair.run.flow")}
                    code = CHILD.format(spec=str(path), **names)
                    got = tracked([sys.executable, "-c", code], tree.root, tree.env())
                    if got["rc"] != 0:
                        print(got["stderr"][-2000:], file=sys.stderr)
                        return 1
                    res = json.loads(got["stdout"].strip().splitlines()[-1])
                    shown = [ln for ln in got["stderr"].splitlines() if ln.startswith("imported:")]
                    print(name, *shown, file=sys.stderr)
                    rows.append((fmt, name, res, got))
                    print(
                        fmt,
                        name,
                        f"{res['ingest_s']:.1f} s",
                        f"{got['driver_private_gb']:.2f} GiB",
                        file=sys.stderr,
                    )
    info = machine()
    lines = [
        "# Ingest of a large file: streamed into a map against the code before",
        "",
        f"- Command: `uv run python benchmarks/bench_ingest.py {args.spec} --baseline {args.baseline}`",
        f"- Date {info['date']}; {info['cpus']} cores ({info['cpu']}); Python {info['python']}, "
        f"pyarrow {info['pyarrow']}",
        "- Each row a fresh interpreter running `privfair.run.flow.ingest` of the spec; driver "
        "private memory = its RSS less file-backed pages (the mapped table is not counted)",
        "",
        "| format | tree | rows | ingest (s) | wall with start-up (s) | driver private peak (GiB) "
        "| driver RSS peak (GiB) | values digest | input fingerprint |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for fmt, name, res, got in rows:
        lines.append(
            f"| {fmt} | {name} | {res['rows']:,} | {res['ingest_s']:.1f} | {got['wall_s']:.1f} "
            f"| {got['driver_private_gb']:.2f} | {got['driver_gb']:.2f} | {res['head']} "
            f"| {res['fingerprint']} |"
        )
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
