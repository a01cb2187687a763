"""Export the integer code matrix our MST / PreFair run on, for the synthesis peers.

Runs in OUR environment (it imports privfair) and writes what the standalone peer script
``run_synthesis_peers.py`` reads, so that every peer sees exactly the input our synthesis
family sees: the dataset of a spec (default ``pipelines/specs/adult_mst.yaml``: UCI Adult,
48,842 rows, ``education`` excluded), loaded with the synthesis family's role presets, each
column encoded on its PUBLIC domain (declared levels, a last code for a null of a string
column; the spec's ``component.params.bins`` for numeric columns)::

    PRIVFAIR_DATA_DIR=/work/shared/data uv run python benchmarks/peers/export_adult_codes.py \
        /tmp/adult_codes.parquet [--spec pipelines/specs/adult_mst.yaml]

``--keep education`` exports the 14-attribute variant (the spec's excluded ``education`` kept,
on its declared public levels), as used for the OpenDP failure report.

Output: one int column per attribute (codes 0..size-1, in the table's column order) and, in the
Parquet schema metadata,

* ``privfair.sizes``: JSON ``{column: domain size}`` (sizes of the public domains, which may
  exceed the largest code that occurs: a value may be absent from the data);
* ``privfair.labels``: JSON ``{column: [label of code 0, ...]}``;
* ``privfair.source``: JSON with the spec, dataset record (file hashes) and row count.

Printed: the columns, their domain sizes and the number of codes that occur.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from privfair.components.synthesis import FAMILY
from privfair.components.synthesis.domain import encode_table, public_domains
from privfair.io.ingest import load_dataset
from privfair.schemas.roles import read_roles
from privfair.spec.catalogue import load_spec

ROOT = Path(__file__).resolve().parents[2]


def export(
    spec_path: Path, out: Path, data_dir: str | None = None, keep: tuple[str, ...] = ()
) -> dict:
    spec = load_spec(spec_path)
    params = spec.params  # MSTParams / PreFairParams, validated by the catalogue
    dataset = spec.dataset
    if keep:  # a variant of the spec: these columns are not excluded
        unknown = sorted(set(keep) - set(dataset.exclude))
        if unknown:
            raise SystemExit(f"--keep {unknown}: not in the spec's dataset.exclude")
        exclude = [c for c in dataset.exclude if c not in keep]
        dataset = dataset.model_copy(update={"exclude": exclude})
    table, record = load_dataset(
        dataset, data_dir=data_dir, presets=FAMILY.dataset_roles, base_dir=spec.spec_dir
    )
    bins = {c: params.edges(c) for c in params.bins}
    domains = public_domains(table, read_roles(table), bins)
    clamp = getattr(params, "out_of_domain", "refuse") == "clamp"
    codes, clamped = encode_table(table, domains, clamp=clamp)
    sizes = {name: int(d.size) for name, d in domains.items()}
    if codes.min() < 0 or any(codes[:, i].max() >= s for i, s in enumerate(sizes.values())):
        raise RuntimeError("a code lies outside 0..size-1")
    dtype = pa.int32() if max(sizes.values()) < 2**31 else pa.int64()
    arrays = [pa.array(codes[:, i], type=dtype) for i in range(codes.shape[1])]
    source = {
        "spec": spec.name,
        "spec_file": str(spec_path),
        "kept_despite_exclude": list(keep),
        "dataset": record["dataset"],
        "files": record["files"],
        "fingerprint": record["fingerprint"],
        "rows": table.num_rows,
        "clamped": clamped,
    }
    meta = {
        b"privfair.sizes": json.dumps(sizes).encode(),
        b"privfair.labels": json.dumps({n: d.labels() for n, d in domains.items()}).encode(),
        b"privfair.source": json.dumps(source).encode(),
    }
    schema = pa.schema([pa.field(n, dtype) for n in sizes], metadata=meta)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), out)
    occurring = {n: int(np.unique(codes[:, i]).size) for i, n in enumerate(sizes)}
    return {"out": str(out), **source, "sizes": sizes, "codes_occurring": occurring}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the Parquet file to write")
    ap.add_argument("--spec", type=Path, default=ROOT / "pipelines/specs/adult_mst.yaml")
    ap.add_argument("--data-dir", default=None, help="default: $PRIVFAIR_DATA_DIR")
    ap.add_argument(
        "--keep",
        action="append",
        default=[],
        help="a column of the spec's dataset.exclude to keep anyway (repeatable); e.g. "
        "--keep education gives the 14-attribute Adult of the OpenDP failure report",
    )
    args = ap.parse_args(argv)
    info = export(args.spec, args.out, args.data_dir, tuple(args.keep))
    print(json.dumps(info, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
