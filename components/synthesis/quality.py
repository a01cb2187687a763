"""The quality report of a synthetic table: column shapes, column pair trends and an overall
score, on SDMetrics' definitions (``sdmetrics.reports.single_table.QualityReport``), twice.

**Public** (:func:`measured_quality`, the ``quality`` metric): the synthetic table against
the release's *noisy measurements*, so every score is post-processing of the DP release and
may be shared. Per column, its **shape score** compares the synthetic table's 1-way marginal
with the noisy one (negative noisy counts set to 0, both normalised):

- ``TVComplement = 1 - TVD = 1 - 1/2 sum_v |p(v) - q(v)|`` for a nominal or binary column;
- ``KSComplement = 1 - max_v |F_p(v) - F_q(v)|`` (the Kolmogorov-Smirnov statistic of the
  two cumulative distributions over the column's bins, in their order) for a numeric or
  ordinal one. SDMetrics computes KS on the raw values; the noisy marginal only knows the bins,
  so here the distribution within a bin is not compared.

Per measured pair (the tree's or the selected pairs), its **trend score** is SDMetrics'
``ContingencySimilarity = 1 - TVD`` of the synthetic 2-way table against the noisy one (on the
compressed codes the release measured). A pair the release did not measure has no noisy
answer and no public score. The property scores are the means, and the **overall score** the
mean of the two property scores (as ``QualityReport.get_score``).

**Owner** (:func:`input_quality`): SDMetrics' own ``QualityReport`` on the input against the
synthetic table (every column and pair, raw values), and a privacy panel: SDMetrics'
``DCRBaselineProtection``, the median distance of each synthetic row to its closest input row
against that of random rows drawn over the input's ranges (``min(1, median DCR synthetic /
median DCR random)``: 1 = as far from the input as random data; its distances computed by
:func:`dcr`, SDMetrics' ``calculate_dcr`` vectorised, which costs its pandas cross join about
3 us a pair). Both read the private input:
they stay with the owner. SDMetrics' ``DCROverfittingProtection`` needs a holdout the
synthesizer never saw; a released model is fitted to every input row, and a holdout would take a
second DP run on a split whose budget the ledger does not record, so it is not computed (the
panel says so). Rows are sampled (``QUALITY_SAMPLE`` and ``DCR_SAMPLE``, seed 0) to keep the
owner report's time modest; SDMetrics is the ``quality`` extra (``pip install
'privfair[quality]'``), imported only here.

>>> shape = column_shape(np.array([3.0, 1.0]), np.array([2, 2]), ordered=False)
>>> shape
{'metric': 'TVComplement', 'score': 0.75}
>>> column_shape(np.array([2.0, -1.0, 2.0]), np.array([1, 1, 2]), ordered=True)["score"]
0.75
>>> contingency_similarity(np.array([[2.0, 0.0], [0.0, 2.0]]), np.array([[1, 1], [0, 2]]))
0.75
>>> summary({"a": shape}, {"a|b": 0.75})["score"]
0.75
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from privfair.schemas.roles import Kind, read_roles

__all__ = [
    "QUALITY_SAMPLE",
    "DCR_SAMPLE",
    "column_shape",
    "contingency_similarity",
    "summary",
    "measured_quality",
    "input_quality",
    "dcr",
    "dcr_baseline",
]

QUALITY_SAMPLE = 5000
"""Rows of the input and of the synthetic table SDMetrics' QualityReport reads (owner)."""
DCR_SAMPLE = (1000, 5000)
"""(synthetic rows, input rows) of the DCR panel (SDMetrics' definition, :func:`dcr`)."""


def _dist(counts) -> np.ndarray | None:
    c = np.clip(np.asarray(counts, dtype=np.float64).ravel(), 0.0, None)
    total = c.sum()
    return c / total if total > 0 else None


def column_shape(reference, synthetic, *, ordered: bool) -> dict:
    """The shape score of one column: ``TVComplement`` (``ordered`` False) or
    ``KSComplement`` over the bins in order (``ordered`` True) of the synthetic counts against
    the reference counts (negative counts set to 0); score None when either has no mass."""
    p, q = _dist(reference), _dist(synthetic)
    metric = "KSComplement" if ordered else "TVComplement"
    if p is None or q is None:
        return {"metric": metric, "score": None}
    gap = np.abs(np.cumsum(p) - np.cumsum(q)).max() if ordered else 0.5 * np.abs(p - q).sum()
    return {"metric": metric, "score": round(float(1.0 - gap), 6)}


def contingency_similarity(reference, synthetic) -> float | None:
    """``1 - TVD`` of two 2-way tables (negative reference counts set to 0)."""
    p, q = _dist(reference), _dist(synthetic)
    if p is None or q is None:
        return None
    return round(float(1.0 - 0.5 * np.abs(p - q).sum()), 6)


def _mean(values) -> float | None:
    v = [x for x in values if x is not None]
    return round(float(np.mean(v)), 6) if v else None


def summary(shapes: Mapping[str, dict], trends: Mapping[str, float | None]) -> dict:
    """The report: property scores (means) and the overall score (their mean)."""
    shape, trend = _mean(s["score"] for s in shapes.values()), _mean(trends.values())
    return {
        "score": _mean([shape, trend]),
        "column_shapes": {"score": shape, "columns": dict(shapes)},
        "column_pair_trends": {"score": trend, "pairs": dict(trends)},
    }


def measured_quality(
    names: Sequence[str],
    ordered: Sequence[bool],
    raw_one_way: Sequence[np.ndarray],
    pairs: Sequence[tuple[int, int]],
    two_way: Sequence,
    syn_codes: np.ndarray,
    compressions: Sequence,
) -> dict:
    """The public quality report: the synthetic codes against the noisy 1-way marginals
    (``raw_one_way``, over each declared domain) and the noisy 2-way measurements of
    ``pairs`` (``two_way[k].y``, over the compressed codes). Post-processing only.

    >>> from privfair.components.synthesis.compression import Compression
    >>> from privfair.components.synthesis.model import Measurement
    >>> syn = np.array([[0, 0], [0, 1], [1, 1], [1, 1]])
    >>> comp = [Compression.identity(2), Compression.identity(2)]
    >>> two = [Measurement((0, 1), np.array([2.0, 1.0, -2.0, 1.0]), np.ones(4))]
    >>> q = measured_quality(["a", "b"], [False, True], [np.array([3.0, 1.0]),
    ...                      np.array([-1.0, 5.0])], [(0, 1)], two, syn, comp)
    >>> q["column_shapes"]["columns"]["b"], q["column_pair_trends"]["pairs"], q["score"]
    ({'metric': 'KSComplement', 'score': 0.75}, {'a|b': 0.75}, 0.75)
    """
    shapes = {
        name: column_shape(y, np.bincount(syn_codes[:, i], minlength=len(y)), ordered=o)
        for i, (name, o, y) in enumerate(zip(names, ordered, raw_one_way, strict=True))
    }
    trends = {}
    for (i, j), m in zip(pairs, two_way, strict=True):
        ci, cj = compressions[i], compressions[j]
        cells = ci.codes[syn_codes[:, i]] * cj.size + cj.codes[syn_codes[:, j]]
        counts = np.bincount(cells, minlength=ci.size * cj.size)
        trends[f"{names[i]}|{names[j]}"] = contingency_similarity(m.y, counts)
    return {"reference": "noisy measurements", **summary(shapes, trends)}


def _frames(input_table: pa.Table, synthetic: pa.Table):
    """(input, synthetic) as pandas over the synthetic table's columns, and SDMetrics'
    metadata: a numeric column ``numerical``, every other ``categorical``."""
    kinds, meta = _kinds(synthetic)
    real = _pandas(input_table.select(list(kinds)), kinds)
    return real, _pandas(synthetic, kinds), meta


def _kinds(synthetic: pa.Table) -> tuple[dict, dict]:
    """Each column's pandas dtype (``float64`` numeric, ``object`` otherwise: one dtype per
    column on both sides, an int8 0/1 against an int64 0/1) and SDMetrics' metadata."""
    roles = read_roles(synthetic)
    names = synthetic.column_names
    numeric = {n for n in names if n in roles and roles[n].kind == Kind.NUMERIC}
    kinds = {n: "float64" if n in numeric else "object" for n in names}
    meta = {
        "columns": {n: {"sdtype": "numerical" if n in numeric else "categorical"} for n in names}
    }
    return kinds, meta


def _pandas(table: pa.Table, kinds: dict, rows: np.ndarray | None = None):
    """``table`` (or its ``rows``, in that order) as pandas of ``kinds``' dtypes. Only the
    rows asked for are converted, each value as in the whole column: an integer column with a
    null anywhere reads as floats, as pandas reads the whole column."""
    if rows is not None:
        part = table.take(pa.array(rows.astype(np.int64)))
        cols = [
            c.cast(pa.float64()) if pa.types.is_integer(c.type) and whole.null_count else c
            for c, whole in zip(part.columns, table.columns, strict=True)
        ]
        table = pa.table(cols, names=table.column_names)
    df = table.to_pandas()
    for name, kind in kinds.items():
        df[name] = df[name].astype(kind)
    return df


def _sample_frame(table: pa.Table, n: int, seed: int, kinds: dict):
    """``_sample(_pandas(table, kinds), n, seed)``, converting only the sampled rows: the rows
    pandas' ``DataFrame.sample(n, random_state=seed)`` draws
    (``RandomState(seed).choice(rows, n, replace=False)``), so a million-row input is never
    a frame of Python objects."""
    if table.num_rows <= n:
        return _pandas(table, kinds)
    draw = np.random.RandomState(seed)  # noqa: NPY002 - pandas' own generator for the sample
    return _pandas(table, kinds, draw.choice(table.num_rows, size=n, replace=False))


def _sample(df, n: int, seed: int):
    return df if len(df) <= n else df.sample(n=n, random_state=seed).reset_index(drop=True)


def input_quality(input_table: pa.Table, synthetic: pa.Table, seed: int = 0) -> dict:
    """The owner's quality report and privacy panel, by SDMetrics (see the module docstring).

    Raises
    ------
    ImportError
        Naming the ``quality`` extra, when SDMetrics is not installed.
    """
    try:
        from sdmetrics.reports.single_table import QualityReport
        from sdmetrics.single_table import DCRBaselineProtection
    except ImportError as e:
        raise ImportError(
            "the owner's synthetic-data quality report needs SDMetrics: pip install "
            "'privfair[quality]'"
        ) from e
    kinds, meta = _kinds(synthetic)
    real = input_table.select(list(kinds))
    r_q, s_q = (_sample_frame(t, QUALITY_SAMPLE, seed, kinds) for t in (real, synthetic))
    report = QualityReport()
    report.generate(r_q, s_q, meta, verbose=False)
    shapes = {
        row["Column"]: {"metric": row["Metric"], "score": _round(row["Score"])}
        for _, row in report.get_details("Column Shapes").iterrows()
    }
    trends = {
        f"{row['Column 1']}|{row['Column 2']}": _round(row["Score"])
        for _, row in report.get_details("Column Pair Trends").iterrows()
    }
    props = dict(report.get_properties()[["Property", "Score"]].itertuples(False, None))

    class _Seeded(DCRBaselineProtection):
        _seed = seed  # SDMetrics' random baseline draws from default_rng(cls._seed)

    n_syn, n_real = DCR_SAMPLE
    dcr = dcr_baseline(
        _sample_frame(real, n_real, seed, kinds),
        _sample_frame(synthetic, n_syn, seed, kinds),
        meta,
        _Seeded,
    )
    return {
        "reference": "input",
        "score": _round(report.get_score()),
        "column_shapes": {"score": _round(props["Column Shapes"]), "columns": shapes},
        "column_pair_trends": {"score": _round(props["Column Pair Trends"]), "pairs": trends},
        "sample_rows": {"input": len(r_q), "synthetic": len(s_q)},
        "privacy": {
            "dcr_baseline_protection": _round(dcr["score"]),
            "median_dcr_synthetic": _round(dcr["median_DCR_to_real_data"]["synthetic_data"]),
            "median_dcr_random": _round(dcr["median_DCR_to_real_data"]["random_data_baseline"]),
            "sample_rows": {
                "synthetic": min(n_syn, synthetic.num_rows),
                "input": min(n_real, input_table.num_rows),
            },
            "dcr_overfitting_protection": None,
            "overfitting_note": (
                "not computed: the released model was fitted to every input row, so no "
                "holdout exists (a second DP run on a split would spend budget the ledger "
                "does not record)"
            ),
        },
        "sdmetrics": _version(),
    }


def dcr(dataset, reference, metadata: dict) -> np.ndarray:
    """Per row of ``dataset``, its distance to the closest row of ``reference``: SDMetrics'
    ``calculate_dcr`` (0.25), vectorised. A column's distance is, numerical, ``|a - b|``
    over the reference's range (capped at 1; a range of 0: 1 when they differ), 1 when one
    side is null and 0 when both are; categorical, 0 when equal or both null, else 1; a
    row's distance is the mean over the columns.

    >>> import pandas as pd
    >>> meta = {"columns": {"x": {"sdtype": "numerical"}, "c": {"sdtype": "categorical"}}}
    >>> ref = pd.DataFrame({"x": [0.0, 10.0], "c": ["a", "b"]})
    >>> dcr(pd.DataFrame({"x": [1.0, 10.0], "c": ["b", "b"]}), ref, meta).tolist()
    [0.45, 0.0]
    """
    cols = [c for c in metadata["columns"] if c in dataset.columns and c in reference.columns]
    parts = []
    for c in cols:
        if metadata["columns"][c]["sdtype"] == "numerical":
            a = dataset[c].to_numpy(np.float64)
            b = reference[c].to_numpy(np.float64)
            parts.append(("num", a, b, np.nanmax(b) - np.nanmin(b) if np.isfinite(b).any() else 0))
        else:
            codes, _ = pd.factorize(pd.concat([dataset[c], reference[c]], ignore_index=True))
            parts.append(("cat", codes[: len(dataset)], codes[len(dataset) :], None))
    out = np.empty(len(dataset))
    step = max(1, 2_000_000 // max(len(reference), 1))  # about 16 MB of distances a chunk
    for lo in range(0, len(dataset), step):
        total = np.zeros((min(step, len(dataset) - lo), len(reference)))
        for kind, a, b, rng in parts:
            x, y = a[lo : lo + step, None], b[None, :]
            if kind == "cat":  # a null is code -1 on both sides: equal
                total += x != y
                continue
            with np.errstate(invalid="ignore", divide="ignore"):
                d = np.abs(x - y)
                d = (d > 0).astype(float) if rng == 0 else np.minimum(d / rng, 1.0)
            nx, ny = np.isnan(x), np.isnan(y)
            total += np.where(nx | ny, (nx != ny).astype(float), d)
        out[lo : lo + step] = (total / len(parts)).min(axis=1)
    return out


def dcr_baseline(real, synthetic, metadata: dict, metric) -> dict:
    """SDMetrics' ``DCRBaselineProtection.compute_breakdown`` (0.25, one iteration) with
    :func:`dcr` for its distances: random rows drawn by the metric's own generator
    (``metric._generate_random_data``, its seed ``metric._seed``; the null mask from numpy's
    global generator, seeded 0 here), score ``min(1, median DCR synthetic / median DCR
    random)``."""
    # SDMetrics draws the baseline's null mask from numpy's legacy global generator
    state = np.random.get_state()  # noqa: NPY002
    np.random.seed(0)  # noqa: NPY002
    try:
        random = metric._generate_random_data(real, len(synthetic))
    finally:
        np.random.set_state(state)  # noqa: NPY002
    med_syn = float(np.median(dcr(synthetic, real, metadata)))
    med_rand = float(np.median(dcr(random, real, metadata)))
    return {
        "score": min(med_syn / med_rand, 1.0) if med_rand != 0 else np.nan,
        "median_DCR_to_real_data": {"synthetic_data": med_syn, "random_data_baseline": med_rand},
    }


def _round(x) -> float | None:
    return round(float(x), 6) if x is not None and np.isfinite(x) else None


def _version() -> str:
    from importlib.metadata import version

    return version("sdmetrics")
