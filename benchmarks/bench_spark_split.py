"""The k-d split of a blocked release on Spark (``spark_split.spark_blocks``) against the NumPy
split on the driver (``blocking.split_blocks``): wall time on Adult-like rows
(``benchmarks/adult_like.py``, 1M by default), encoded as a Fair-MDAV run encodes them
(fairlets of 12 rows), on a ``local[2]`` session (``SparkEngine``'s settings).

Usage (from the repository root)::

    PRIVFAIR_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_spark_split.py
    PRIVFAIR_DATA_DIR=../shared/data .venv/bin/python benchmarks/bench_spark_split.py \\
        --rows 200000 --block-rows 20000 --local-rows 200000,50000

What is timed
-------------
- ``split_blocks``: the NumPy split of the encoded arrays, in this process.
- ``spark_blocks``: from a Parquet file of the encoded QIs (row, x0.., c0.., pa) that the
  executors read, to the (row, block) pairs written to Parquet by the executors, for each
  ``--local-rows`` (blocks above it are cut by DataFrame levels, the rest finished per block by
  the NumPy rule on the executors). The ids are then read back (not timed) and must equal
  ``split_blocks``'s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from adult_like import adult_like

from privfair.components.core.engine import SparkEngine
from privfair.components.microaggregation.blocking import block_sizes, split_blocks
from privfair.components.microaggregation.encoding import encode_qis, label_01, protected_01
from privfair.components.microaggregation.fair_mdav import fairlet_sizes
from privfair.components.microaggregation.inputs import binary_roles, prepare
from privfair.components.microaggregation.spark_split import spark_blocks
from privfair.io.ingest import load_dataset
from privfair.schemas.spec import DatasetSpec


def encoded(rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """(x, codes, pa01, m, n) of ``rows`` Adult-like rows, as Fair-MDAV (k = 12) encodes them."""
    table, roles, _ = prepare(load_dataset(DatasetSpec(name="adult"))[0])
    table = adult_like(table, rows, seed=0)
    prot, lab = binary_roles(table, roles)
    pa01, _, _ = protected_01(table, prot, label_01(table, lab))
    enc = encode_qis(table, roles)
    m, n, _ = fairlet_sizes(12, int((pa01 == 0).sum()), len(pa01))
    bu, bf = block_sizes("fairlet", 12, m, n)
    return enc.numeric, enc.codes, pa01, bu, bf


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--block-rows", type=int, default=50_000)
    ap.add_argument("--local-rows", default="1000000,250000,100000")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)
    x, codes, pa01, m, n = encoded(args.rows)
    print(f"{args.rows} rows, {x.shape[1]} numeric + {codes.shape[1]} nominal QIs, m={m} n={n}")
    t0 = time.perf_counter()
    want = split_blocks(x, codes, pa01, m, n, args.block_rows)
    print(
        f"split_blocks (NumPy, driver): {time.perf_counter() - t0:.1f} s, {want.max() + 1} blocks"
    )
    tmp = Path(tempfile.mkdtemp(prefix="privfair-bench-split-"))
    engine = SparkEngine(args.master)
    try:
        cols = {"row": pa.array(np.arange(len(pa01), dtype=np.int64)), "pa": pa.array(pa01)}
        cols |= {f"x{j}": pa.array(x[:, j]) for j in range(x.shape[1])}
        cols |= {f"c{j}": pa.array(codes[:, j]) for j in range(codes.shape[1])}
        pq.write_table(pa.table(cols), tmp / "qis.parquet")
        spark = engine.spark
        for local_rows in [int(v) for v in args.local_rows.split(",")]:
            df = spark.read.parquet(str(tmp / "qis.parquet"))
            out = str(tmp / f"blocks-{local_rows}")
            t0 = time.perf_counter()
            got = spark_blocks(
                df,
                [f"x{j}" for j in range(x.shape[1])],
                [f"c{j}" for j in range(codes.shape[1])],
                "pa",
                "row",
                m,
                n,
                args.block_rows,
                local_rows=local_rows,
            )
            got.select("row", "block").write.parquet(out)
            wall = time.perf_counter() - t0
            ids = pq.read_table(out).sort_by("row").column("block").to_numpy()
            same = bool(np.array_equal(ids, want))
            print(
                f"spark_blocks ({args.master}, local_rows={local_rows}): {wall:.1f} s, same={same}"
            )
            if not same:
                return 1
    finally:
        engine.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
