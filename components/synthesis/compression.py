"""MST's domain compression (spec 1.3): a value whose noisy 1-way count is below three noise
standard deviations is merged with the other such values of its attribute into one code.
It reads only the noisy counts, so it is post-processing; undoing it draws a merged value
uniformly among the merged ones, independently of everything else, which keeps every
conditional independence of the model (spec 2.4).

>>> c = Compression.of(np.array([50.0, 2.0, 40.0, -3.0]), std=5.0)
>>> c.codes.tolist(), c.size, c.merged.tolist()
([0, 2, 1, 2], 3, [1, 3])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Compression", "THRESHOLD"]

THRESHOLD = 3.0


@dataclass(frozen=True)
class Compression:
    """``codes[v]``: the compressed code of original value v (kept values keep their order,
    0..k-1; merged values share code k); ``merged``: the original values merged."""

    codes: np.ndarray
    merged: np.ndarray

    @classmethod
    def of(cls, noisy: np.ndarray, std: float, threshold: float = THRESHOLD) -> Compression:
        keep = np.asarray(noisy) >= threshold * std
        return cls.from_kept(keep)

    @classmethod
    def from_kept(cls, keep: np.ndarray) -> Compression:
        keep = np.asarray(keep, dtype=bool)
        codes = np.full(len(keep), int(keep.sum()), dtype=np.int64)
        codes[keep] = np.arange(int(keep.sum()))
        return cls(codes, np.flatnonzero(~keep))

    @classmethod
    def identity(cls, size: int) -> Compression:
        return cls.from_kept(np.ones(size, dtype=bool))

    @property
    def size(self) -> int:
        return int(self.codes.max()) + 1 if len(self.codes) else 0

    def compress_counts(self, noisy: np.ndarray, variance: float):
        """The noisy counts of the compressed codes and their variances (a merged cell sums
        the merged values' counts, so its variance is their number times ``variance``)."""
        y = np.bincount(self.codes, weights=noisy, minlength=self.size)
        var = np.bincount(self.codes, minlength=self.size).astype(float) * variance
        return y, var

    def expand(self, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Original values of compressed ``codes``: a merged code becomes one of the merged
        values, uniformly at random."""
        inverse = np.full(self.size, -1, dtype=np.int64)
        kept = np.flatnonzero(self.codes < len(self.codes) - len(self.merged))
        inverse[self.codes[kept]] = kept
        out = inverse[codes]
        if len(self.merged):
            where = codes == self.size - 1
            out[where] = self.merged[rng.integers(0, len(self.merged), int(where.sum()))]
        return out
