"""Adult-like tables of any size, seeded, and the spec that releases one.

UCI Adult's rows (as a built-in spec ingests them: the spec's QIs, its family's roles) drawn
with replacement, the numeric QIs jittered so the copies are not duplicates: age and
hours-per-week by a uniform integer in [-2, 2] (clipped to Adult's range), fnlwgt by a factor
exp(N(0, 0.05)); every other column is copied from its row, so the joint distribution of the
nominal QIs, the protected attribute and the label is Adult's.

    uv run python benchmarks/adult_like.py --rows 1000000 --spec adult_fair_mdav \
        --set block_rows=50000 --set trace_sample=2000 --out scale
    uv run privfair run scale/adult_fair_mdav_1m.yaml --engine spark --store releases

writes ``scale/adult_fair_mdav_1m.parquet`` and ``scale/adult_fair_mdav_1m.yaml`` (a file
dataset with the roles of every column, the component and params of the built-in spec, updated
by ``--set``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from privfair.run.flow import ingest
from privfair.schemas.roles import read_roles
from privfair.spec.catalogue import load_spec
from privfair.spec.settings import specs_dir

JITTER_INT = {"age": (17, 90), "hours-per-week": (1, 99)}


def label(rows: int) -> str:
    """1m, 10m, 195k, 48842..."""
    for unit, size in (("m", 1_000_000), ("k", 1_000)):
        if rows % size == 0:
            return f"{rows // size}{unit}"
    return str(rows)


def adult_like(table: pa.Table, rows: int, seed: int = 0) -> pa.Table:
    """``rows`` rows drawn from ``table`` with replacement, numeric QIs jittered (see module
    docstring); schema and roles unchanged."""
    rng = np.random.default_rng(seed)
    take = rng.integers(0, table.num_rows, rows)
    out = table.take(pa.array(take))
    for name, (lo, hi) in JITTER_INT.items():
        if name in out.column_names:
            v = out.column(name).to_numpy(zero_copy_only=False)
            v = np.clip(v + rng.integers(-2, 3, rows), lo, hi)
            i = out.schema.get_field_index(name)
            out = out.set_column(i, out.schema.field(i), pa.array(v, out.schema.field(i).type))
    if "fnlwgt" in out.column_names:
        v = out.column("fnlwgt").to_numpy(zero_copy_only=False).astype(np.float64)
        v = np.rint(v * np.exp(rng.normal(0, 0.05, rows)))
        i = out.schema.get_field_index("fnlwgt")
        out = out.set_column(i, out.schema.field(i), pa.array(v.astype(np.int64)))
    return out.combine_chunks()


def column_specs(table: pa.Table) -> dict:
    """The ``dataset.columns`` of a file spec giving every column its role in ``table``."""
    out = {}
    for c in read_roles(table):
        spec: dict = {"role": c.role.value, "kind": c.kind.value}
        for key in ("favoured", "unfavoured", "positive"):
            v = getattr(c, key)
            if v is not None:
                spec[key] = [x.item() if hasattr(x, "item") else x for x in v]
        if c.domain is not None:
            spec["domain"] = list(c.domain)
        out[c.name] = spec
    return out


def _value(text: str):
    return yaml.safe_load(text)


def write(spec_name: str, rows: int, out: Path, seed: int, overrides: dict) -> Path:
    spec = load_spec(specs_dir() / f"{spec_name}.yaml")
    table = ingest(spec).table
    big = adult_like(table, rows, seed)
    tag = f"{spec_name}_{label(rows)}"
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(big.replace_schema_metadata(None), out / f"{tag}.parquet", compression="zstd")
    doc = {
        "name": tag,
        "description": f"{rows:,} Adult-like rows (benchmarks/adult_like.py, seed {seed}) "
        f"through {spec.component.name}, as {spec_name}.",
        "dataset": {"path": f"{tag}.parquet", "columns": column_specs(table)},
        "component": {
            "name": spec.component.name,
            "params": {**spec.component.params, **overrides},
        },
        "guarantees": list(spec.guarantees),
    }
    path = out / f"{tag}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--spec", default="adult_fair_mdav", help="built-in spec to scale")
    ap.add_argument("--out", type=Path, default=Path("scale"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    overrides = {k: _value(v) for k, v in (s.split("=", 1) for s in args.set)}
    path = write(args.spec, args.rows, args.out, args.seed, overrides)
    rows = pq.read_metadata(path.with_suffix(".parquet")).num_rows
    print(f"{path} ({rows:,} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
