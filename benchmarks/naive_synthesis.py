"""The naive reference for the synthesis benchmark: each column sampled independently from its
true (noise-free, non-private) 1-way marginal, on the same coded Adult. Its 2-way TVD is what
a synthesiser scores when it keeps none of the pairwise dependence.

Usage: ``PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/naive_synthesis.py``
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_synthesis import codes as coded
from bench_synthesis import load

from privfair.components.synthesis import metrics as M


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    table, params = load("adult_prefair")
    codes = coded(table, params)
    names = table.column_names
    rng = np.random.default_rng(0)
    real = {n: codes[:, i] for i, n in enumerate(names)}
    sizes = {n: int(codes[:, i].max()) + 1 for i, n in enumerate(names)}
    out = []
    for _ in range(10):
        syn = {n: rng.permutation(real[n]) for n in names}
        out.append(
            (
                np.mean(list(M.one_way_tvd(real, syn, sizes).values())),
                np.mean(list(M.two_way_tvd(real, syn, sizes).values())),
            )
        )
    one, two = np.mean(out, axis=0)
    print(
        f"independent columns (true 1-way marginals), 10 draws: 1-way TVD {one:.4f}, "
        f"2-way TVD {two:.4f}"
    )


if __name__ == "__main__":
    main()
