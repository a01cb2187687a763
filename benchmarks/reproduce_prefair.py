"""PreFair's Table 3 (Greedy-PreFair as a percentage of MST, epsilon = 1) re-run through
``privfair.evaluation.evaluate.evaluate``, beside the paper's cells and the authors' notebook outputs.

Usage (from the repository root)::

    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/reproduce_prefair.py          # 19-41 min
    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/reproduce_prefair.py --quick  # ~1 min

Protocol (spec ``prefair.md`` sections 5 and 6.1):

- datasets: Adult (``adult_prefair.yaml``: roles as the authors ran them, spec A9, without
  fnlwgt) and COMPAS (``compas_prefair.yaml``, the project's ProPublica preparation); as
  diagnostics, COMPAS in the authors' FairML preparation (6,172 rows, 8 columns, rebuilt here
  from the same ProPublica file, spec 5.1), scored with S = Sex and with S = Race (spec A11);
- methods: Greedy-PreFair (the spec as given) and MST (the same spec with the component name
  swapped to ``mst`` and the PreFair-only parameters dropped; for Adult this equals
  ``adult_mst.yaml``, which is checked);
- ``evaluate`` with ``--folds`` stratified folds and ``--seeds`` seeds (default 5 x 2 = 10
  synthetic tables per method, the paper's 10), the synthesiser run on the training fold only,
  classifiers ``mlp`` (Table 3's) and ``lr`` trained on its output and scored on the untouched
  real test fold; both methods see the same folds (same ``evaluate`` seed);
- the protected attribute S is ``sex`` (the authors' choice for Adult, spec A11's default for
  COMPAS): the columns are reordered so that S is the first protected column ``evaluate``
  reads;
- conditional measures: Table 3 used the authors' form (spec A12), ``evaluate``'s
  ``*_reference``; the strata are the joint admissible values of the test rows. The admissible
  numeric columns are snapped to their public bin's lower edge (input, and the synthetic
  output as post-processing), so that strata and features live on the synthesiser's public
  domain as in the authors' pre-binned data; for Adult a logistic-regression re-score of the
  same synthetic tables on the raw (unbinned) input measures whether this matters;
- data quality (1-way and 2-way TVD, ACD with the bias-corrected Cramer's V) and runtime
  (the whole generator, its metrics excluded) come from the same synthetic tables, read off
  each release's metrics (``components/synthesis/metrics.py``, against the training fold the
  synthesiser saw);
- per cell: 100 x mean(Greedy) / mean(MST), with a 95 % paired bootstrap interval over the
  (seed, fold) runs; a paper cell inside that interval is "within", inside it widened by
  sqrt(2) (the paper's cell is itself a ratio of 10-run means) "within combined noise",
  otherwise "differs";
- diagnostics that explain differences: the test-set sampling floor of Greedy's
  unconditional measures (our folds against the authors' whole-table test set), Adult's
  strata counts (ours, raw and snapped, and the authors' with fnlwgt), one-column classifiers
  on FairML COMPAS, and Greedy's trees on FairML COMPAS under the authors' candidate filter
  (spec A7, emulated by labelling Sex and Age_Above_FourtyFive admissible for the
  synthesiser only; ``--a7-runs``).

Why Adult's DP and CDP ratios fall below the paper's is tested by ``reproduce_prefair_dp.py``
(the same synthetic tables under our classifier and protocol and under the authors').

Results: Markdown on stdout and in ``benchmarks/results/results_reproduce_prefair.md`` (``--quick``:
stdout only unless ``--out`` is given); per-run values as JSON with ``--json PATH``. A saved
run is rendered again with ``--from-json PATH``, and ``--pool PATH ...`` adds earlier saved
runs, cell by cell, in an *Across runs* table (the run-to-run spread of a 10-run ratio)::

    ... reproduce_prefair.py --from-json run3.json --pool run1.json run2.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import sys
import time
import warnings
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from harness import result, spec_file

from privfair.components.core.descriptor import Algorithm
from privfair.components.core.inputs import group_indicator, outcome_indicator
from privfair.components.core.metrics import fairness_measures
from privfair.components.synthesis.inputs import index_roles
from privfair.components.synthesis.params import MSTParams
from privfair.components.synthesis.selection import fair
from privfair.evaluation.evaluate import evaluate, mean_interval
from privfair.run.flow import ingest
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles, read_roles
from privfair.schemas.spec import PipelineSpec
from privfair.spec.catalogue import algorithm_of, load_spec, parse_spec
from privfair.spec.settings import resolve_data_dir

SPECS = spec_file("adult_prefair").parent
OUT = result("results_reproduce_prefair.md")

# Table 3 of the paper (spec 6.1, fact table F4), Greedy-PreFair as % of MST, epsilon = 1, MLP
CELLS = [
    "tvd1",
    "tvd2",
    "acd",
    "accuracy",
    "dp",
    "tprb",
    "tnrb",
    "cdp",
    "ctprb",
    "ctnrb",
    "runtime",
]
HEAD = {
    "tvd1": "TVD 1-way",
    "tvd2": "TVD 2-way",
    "acd": "ACD",
    "accuracy": "Accuracy",
    "dp": "DP",
    "tprb": "TPRB",
    "tnrb": "TNRB",
    "cdp": "CDP",
    "ctprb": "CTPRB",
    "ctnrb": "CTNRB",
    "runtime": "Runtime",
}


def _cells(*v: float) -> dict[str, float]:
    return dict(zip(CELLS, v, strict=True))


PAPER = {
    "adult": _cells(100.5, 106.0, 131.6, 99.8, 64.4, 67.9, 10.2, 64.8, 25.7, 11.7, 92.9),
    "compas": _cells(96.5, 119.8, 103.3, 86.2, 66.2, 70.3, 73.0, 50.0, 50.5, 53.1, 97.8),
}
# the authors' notebook outputs (spec 6.5): means over 10 runs, epsilon = 1 (MLP for the ML
# cells, runtime in seconds)
REFERENCE = {
    "adult": {
        "mst": _cells(
            0.0087156,
            0.053312,
            0.0075401,
            0.80244,
            0.056395,
            0.026391,
            0.017336,
            0.084973,
            0.040121,
            0.025973,
            192.44,
        ),
        "greedy": _cells(
            0.0087657,
            0.056516,
            0.0077720,
            0.80149,
            0.036354,
            0.017919,
            0.0017698,
            0.055080,
            0.010348,
            0.0030399,
            178.82,
        ),
    },
    "compas": {"mst": {"runtime": 75.99}, "greedy": {"runtime": 74.33}},
}
QUALITY = ("tvd1", "tvd2", "acd", "runtime")
ML = ("accuracy", "dp", "tprb", "tnrb", "cdp", "ctprb", "ctnrb")
# Table 3's ML cells in evaluate's names: the reference form of the conditional measures (A12)
EVAL_NAME = {
    "accuracy": "accuracy",
    "dp": "dpar",
    "tprb": "tprb",
    "tnrb": "tnrb",
    "cdp": "cdp_reference",
    "ctprb": "ctprb_reference",
    "ctnrb": "ctnrb_reference",
}
PAPER_FORM = {"cdp": "cdp", "ctprb": "ctprb", "ctnrb": "ctnrb"}
ARMS = ("mst", "greedy")
ARM_TITLE = {"mst": "MST", "greedy": "Greedy-PreFair", "none": "none (real training fold)"}


@dataclass
class Dataset:
    """One dataset of the reproduction: its input table, its two specs and how to read it.

    ``flipped``: the table's positive label is the paper's negative one (COMPAS ``no_recid``
    against the paper's Two_yr_Recidivism = 1), so the paper's TPRB is our TNRB and back.
    """

    key: str
    title: str
    paper: str
    table: pa.Table
    specs: dict[str, PipelineSpec]
    protected: str
    label: str
    flipped: bool = False
    sensitivity: bool = False
    notes: list[str] = field(default_factory=list)

    def metric(self, cell: str, form: dict[str, str] = EVAL_NAME) -> str:
        """``evaluate``'s metric name for a Table 3 cell."""
        if self.flipped:
            cell = {"tprb": "tnrb", "tnrb": "tprb", "ctprb": "ctnrb", "ctnrb": "ctprb"}.get(
                cell, cell
            )
        return form.get(cell, EVAL_NAME[cell])


# ------------------------------------------------------------------------------- inputs


def mst_spec(prefair: PipelineSpec, name: str) -> PipelineSpec:
    """``prefair`` with the component swapped to ``mst`` and PreFair-only parameters dropped."""
    raw = prefair.model_dump(mode="json")
    raw["name"] = name
    raw["component"]["name"] = "mst"
    raw["component"]["params"] = {
        k: v for k, v in raw["component"]["params"].items() if k in MSTParams.model_fields
    }
    return parse_spec(raw, source=f"{prefair.name} (component swapped to mst)").located(
        prefair.spec_dir
    )


def derived_spec(base: PipelineSpec, name: str, params: dict[str, Any]) -> PipelineSpec:
    """``base`` renamed, its component params updated by ``params``."""
    raw = base.model_dump(mode="json")
    raw["name"] = name
    raw["component"]["params"] = {**raw["component"]["params"], **params}
    return parse_spec(raw, source=f"{base.name} (derived)").located(base.spec_dir)


def protected_first(table: pa.Table, column: str) -> pa.Table:
    """``table`` with ``column`` moved before the other protected columns (``evaluate`` scores
    the first protected column it reads)."""
    roles = read_roles(table)
    first = next(c.name for c in roles.with_role(Role.PROTECTED))
    if first == column:
        return table
    names = [c for c in table.column_names if c != column]
    names.insert(names.index(first), column)
    return table.select(names)


def snap_to_bins(table: pa.Table, params: MSTParams) -> pa.Table:
    """The admissible numeric columns with public bins set to their bin's lower edge (the
    smallest integer of the bin for an integer column); other columns unchanged."""
    admissible = {c.name for c in read_roles(table).with_role(Role.ADMISSIBLE)}
    for i, f in enumerate(table.schema):
        edges = params.edges(f.name)
        if f.name not in admissible or edges is None:
            continue
        e = np.asarray(edges, dtype=float)
        x = table.column(i).cast(pa.float64()).to_numpy(zero_copy_only=False)
        k = np.clip(np.searchsorted(e, x, side="right") - 1, 0, len(e) - 2)
        lo = np.ceil(e[k]) if pa.types.is_integer(f.type) else e[k]
        table = table.set_column(i, f, pa.array(lo).cast(f.type))
    return table


FAIRML_BINS = {"Number_of_Priors": {"start": 0, "stop": 40, "step": 1}}
# the two outcome edges the authors' Greedy filter let through on COMPAS (spec A7)
A7_ADMITTED = {"Sex": Role.ADMISSIBLE, "Age_Above_FourtyFive": Role.ADMISSIBLE}


def relabel(table: pa.Table, changes: dict[str, Role]) -> pa.Table:
    """``table`` with the roles of the columns in ``changes`` replaced (kind and domain kept)."""
    roles = read_roles(table)
    for name, role in changes.items():
        c = roles[name]
        roles = roles.replace(ColumnRole(name, role, c.kind, domain=c.domain))
    return attach_roles(table, roles)


def compas_fairml(path: Path) -> pa.Table:
    """COMPAS as the authors ran it (spec 5.1): FairML's ``propublica_data_for_fairml.csv``
    rebuilt from ProPublica's ``compas-scores-two-years.csv`` with ProPublica's filter
    (|days_b_screening_arrest| <= 30, is_recid != -1, charge degree F or M, a score text):
    6,172 rows, 2,809 recidivists, 1,175 women."""
    df = pd.read_csv(path)
    df = df[
        df.days_b_screening_arrest.between(-30, 30)
        & (df.is_recid != -1)
        & (df.c_charge_degree != "O")
        & (df.score_text != "N/A")
    ]
    races = ("Caucasian", "African-American", "Asian", "Hispanic", "Native American", "Other")
    cols = {
        "Two_yr_Recidivism": pa.array(df.two_year_recid.to_numpy(), pa.int8()),
        "Number_of_Priors": pa.array(df.priors_count.to_numpy(), pa.int64()),
        "score_factor": pa.array((df.score_text != "Low").to_numpy(), pa.int8()),
        "Age_Above_FourtyFive": pa.array((df.age > 45).to_numpy(), pa.int8()),
        "Age_Below_TwentyFive": pa.array((df.age < 25).to_numpy(), pa.int8()),
        "Sex": pa.array((df.sex == "Female").to_numpy(), pa.int8()),
        "Misdemeanor": pa.array((df.c_charge_degree == "M").to_numpy(), pa.int8()),
        "Race": pa.array(df.race.to_numpy(), pa.string()),
    }
    roles = TableRoles.of(
        [
            ColumnRole("Two_yr_Recidivism", Role.LABEL, Kind.BINARY, positive=1),
            ColumnRole("Number_of_Priors", Role.ADMISSIBLE, Kind.NUMERIC),
            ColumnRole("score_factor", Role.IGNORED, Kind.BINARY),
            ColumnRole("Age_Above_FourtyFive", Role.IGNORED, Kind.BINARY),
            ColumnRole("Age_Below_TwentyFive", Role.IGNORED, Kind.BINARY),
            ColumnRole("Sex", Role.PROTECTED, Kind.BINARY, favoured=0),
            ColumnRole("Misdemeanor", Role.ADMISSIBLE, Kind.BINARY),
            ColumnRole("Race", Role.PROTECTED, Kind.NOMINAL, favoured="Caucasian", domain=races),
        ]
    )
    return attach_roles(pa.table(cols), roles)


def datasets(names: Sequence[str]) -> list[Dataset]:
    """The datasets named (``adult``, ``compas``, ``compas_fairml``), loaded."""
    out = []
    if "adult" in names:
        greedy = load_spec(SPECS / "adult_prefair.yaml")
        mst = mst_spec(greedy, "adult_mst")
        shipped = load_spec(SPECS / "adult_mst.yaml")
        same = shipped.params.model_dump() == mst.params.model_dump()
        same = same and shipped.dataset == greedy.dataset
        table = protected_first(ingest(greedy).table, "sex")
        out.append(
            Dataset(
                "adult",
                "Adult",
                "adult",
                snap_to_bins(table, greedy.params),
                {"mst": mst, "greedy": greedy},
                "sex",
                "income",
                sensitivity=True,
                notes=[
                    f"{table.num_rows:,} rows, {table.num_columns} attributes "
                    "(authors: 48,842 x 14, with fnlwgt, private-pgm's pre-binned copy)",
                    "MST spec derived from `adult_prefair.yaml` "
                    + ("(identical to `adult_mst.yaml`)" if same else "(DIFFERS from adult_mst)"),
                    "S = sex (female = 1), outcome income > 50K = 1",
                ],
            )
        )
    if "compas" in names:
        greedy = load_spec(SPECS / "compas_prefair.yaml")
        table = ingest(greedy).table
        out.append(
            Dataset(
                "compas",
                "COMPAS (project preparation)",
                "compas",
                snap_to_bins(table, greedy.params),
                {"mst": mst_spec(greedy, "compas_mst"), "greedy": greedy},
                "sex",
                "no_recid",
                flipped=True,
                notes=[
                    f"{table.num_rows:,} rows, {table.num_columns} attributes (ProPublica "
                    "file after dropna; label no_recid, so the paper's TPRB is our TNRB)",
                    "MST spec derived from `compas_prefair.yaml` (no shipped COMPAS MST spec)",
                    "S = sex (female = 1); admissible priors_count, c_charge_degree",
                ],
            )
        )
    fairml = [n for n in names if n in ("compas_fairml", "compas_fairml_race")]
    if fairml:
        base = load_spec(SPECS / "compas_prefair.yaml")
        greedy = derived_spec(base, "compas_fairml_prefair", {"bins": FAIRML_BINS})
        table = compas_fairml(_data_file("compas-scores-two-years.csv"))
        for key in fairml:
            s = "Race" if key.endswith("race") else "Sex"
            out.append(
                Dataset(
                    key,
                    f"COMPAS, the authors' FairML preparation, S = {s}",
                    "compas",
                    protected_first(table, s),
                    {"mst": mst_spec(greedy, "compas_fairml_mst"), "greedy": greedy},
                    s,
                    "Two_yr_Recidivism",
                    notes=[
                        f"{table.num_rows:,} rows, {table.num_columns} attributes: FairML's "
                        "`propublica_data_for_fairml.csv` rebuilt from the ProPublica file "
                        "(spec 5.1: 2,809 recidivists, 1,175 women, race counts as listed "
                        "there); label Two_yr_Recidivism = 1 as in the paper",
                        "roles as the authors ran them: protected Sex, Race; admissible "
                        "Number_of_Priors, Misdemeanor; unlabelled score_factor, "
                        "Age_Above_FourtyFive, Age_Below_TwentyFive",
                        "S = Sex (female = 1)"
                        if s == "Sex"
                        else "S = Race: every race other than Caucasian = 1 (spec A11 leaves "
                        "the paper's COMPAS S open)",
                    ],
                )
            )
    return out


def _data_file(name: str) -> Path:
    folder = resolve_data_dir()
    if folder is None:
        raise SystemExit(f"set PRIVFAIR_DATA_DIR (the folder of {name})")
    return Path(folder) / name


# ------------------------------------------------------------------------------- running


@dataclass
class Recorder:
    """``evaluate``'s ``apply``: runs the spec's synthesiser on the training fold (exactly as
    ``evaluate`` would), records the release's data quality, runtime and tree, keeps the
    release, and returns it with the admissible bins snapped (post-processing)."""

    algo: Algorithm
    snap: Callable[[pa.Table], pa.Table]
    protected: str
    label: str
    seed: int = 0
    runs: list[dict] = field(default_factory=list)
    releases: dict[tuple[int, int], pa.Table] = field(default_factory=dict)
    _fold: int = 0

    def start(self, seed: int) -> None:
        self.seed, self._fold = seed, 0

    def __call__(self, train: pa.Table, params: MSTParams) -> pa.Table:
        t = time.perf_counter()
        res = self.algo(train, params)
        seconds = time.perf_counter() - t - res.timings.get("metrics", 0.0)
        out = res.outputs["data"]
        tree = res.sidecars["tree"].to_pylist()
        nbrs = sorted(
            {e["b"] for e in tree if e["a"] == self.label}
            | {e["a"] for e in tree if e["b"] == self.label}
        )
        names = train.column_names
        edges = [(names.index(e["a"]), names.index(e["b"])) for e in tree]
        fid = res.metrics["fidelity"]
        syn = synthetic_fairness(out, self.protected, self.label)
        self.runs.append(
            {
                "seed": self.seed,
                "fold": self._fold,
                "tvd1": fid["one_way_tvd"],
                "tvd2": fid["two_way_tvd"],
                "acd": fid["acd"],
                "runtime": seconds,
                "fair_tree": fair(edges, index_roles(read_roles(train))),
                "outcome_neighbours": nbrs,
                "synthetic_dp": syn.get("dp"),
                "synthetic_cdp": syn.get("cdp"),
                "rows": out.num_rows,
            }
        )
        self.releases[(self.seed, self._fold)] = out
        self._fold += 1
        return self.snap(out)


def synthetic_fairness(table: pa.Table, protected: str, label: str) -> dict[str, float]:
    """DP of the label itself on a (synthetic) table, and its conditional form (paper and
    reference) given the joint admissible value."""
    roles = read_roles(table)
    s = group_indicator(table.column(protected), roles[protected])
    y = outcome_indicator(table.column(label), roles[label])
    cols = [c.name for c in roles.with_role(Role.ADMISSIBLE)]
    joint = np.stack(
        [table.column(c).cast(pa.string()).to_numpy(zero_copy_only=False) for c in cols], 1
    )
    strata = np.unique(joint.astype(str), axis=0, return_inverse=True)[1].reshape(-1)
    m = fairness_measures(s, y, strata=strata)
    return {k: m[k] for k in ("dp", "cdp", "cdp_reference")}


@dataclass
class Replay:
    """``apply`` that hands back the release recorded for (seed, fold), unsnapped."""

    releases: dict[tuple[int, int], pa.Table]
    seed: int = 0
    _fold: int = 0

    def start(self, seed: int) -> None:
        self.seed, self._fold = seed, 0

    def __call__(self, train: pa.Table, params: MSTParams) -> pa.Table:
        out = self.releases[(self.seed, self._fold)]
        self._fold += 1
        return out


def run_dataset(
    ds: Dataset, seeds: Sequence[int], folds: int, classifiers: Sequence[str]
) -> dict[str, Any]:
    """Both methods through ``evaluate`` on the same folds; per-run ML scores and quality."""
    ml: list[dict] = []
    quality: dict[str, list[dict]] = {}
    raw_strata: list[dict] = []
    recorders = {}
    for arm in ARMS:
        spec = ds.specs[arm]
        params = spec.params
        rec = Recorder(
            algorithm_of(spec),
            lambda t, p=params: snap_to_bins(t, p),
            ds.protected,
            ds.label,
        )
        recorders[arm] = rec
        for seed in seeds:
            rec.start(seed)
            t = time.perf_counter()
            ev = evaluate(
                spec,
                ds.table,
                folds=folds,
                seed=seed,
                classifiers=classifiers,
                apply=rec,
                progress=lambda m: print(m, file=sys.stderr),
            )
            print(f"{ds.key} {arm} seed {seed}: {time.perf_counter() - t:.0f} s", file=sys.stderr)
            for r in ev.folds.to_pylist():
                prot = r["protection"]
                ml.append(
                    {
                        "arm": "none" if prot == "none" else arm,
                        "evaluated_with": arm,
                        "seed": seed,
                        "fold": r["fold"],
                        "classifier": r["classifier"],
                        "metric": r["metric"],
                        "value": r["value"],
                    }
                )
        quality[arm] = rec.runs
    if ds.sensitivity:
        raw_table = protected_first(ingest(ds.specs["greedy"]).table, ds.protected)
        for arm in ARMS:
            replay = Replay(recorders[arm].releases)
            for seed in seeds:
                replay.start(seed)
                ev = evaluate(
                    ds.specs[arm],
                    raw_table,
                    folds=folds,
                    seed=seed,
                    classifiers=["lr"],
                    apply=replay,
                    progress=lambda m: print(m, file=sys.stderr),
                )
                raw_strata += [
                    {**r, "seed": seed, "arm": "none" if r["protection"] == "none" else arm}
                    for r in ev.folds.to_pylist()
                ]
    return {"ml": ml, "quality": quality, "raw_strata": raw_strata}


# ------------------------------------------------------------------------------- statistics


def t_interval(x: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95 % t-interval of the finite values of ``x`` (``evaluate``'s interval)."""
    return mean_interval(x[np.isfinite(x)])


def ratio(g: np.ndarray, m: np.ndarray, key: str, boots: int = 4000) -> tuple[float, float, float]:
    """100 x mean(g) / mean(m) and its 95 % paired percentile-bootstrap interval (``g[i]`` and
    ``m[i]`` share run i's seed and fold); the resampling is seeded by ``key``, so a cell shows
    the same interval wherever it is printed."""
    ok = np.isfinite(g) & np.isfinite(m)
    g, m = g[ok], m[ok]
    if len(g) == 0 or m.mean() == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    idx = rng.integers(0, len(g), size=(boots, len(g)))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = 100 * g[idx].mean(1) / m[idx].mean(1)
    lo, hi = np.nanpercentile(r, [2.5, 97.5])
    return float(100 * g.mean() / m.mean()), float(lo), float(hi)


def verdict(paper: float | None, r: float, lo: float, hi: float) -> str:
    """Whether the paper's cell lies in our bootstrap interval (or in it widened by sqrt(2))."""
    if paper is None or not math.isfinite(r):
        return "-"
    if lo <= paper <= hi:
        return "within"
    w = math.sqrt(2)
    if r - w * (r - lo) <= paper <= r + w * (hi - r):
        return "within combined noise"
    return "differs (paper lower)" if paper < lo else "differs (paper higher)"


def values(res: dict, arm: str, clf: str, metric: str, key: str = "ml") -> np.ndarray:
    """Per-run values of one arm's metric, ordered by (seed, fold); the ``none`` arm from the
    MST call (the Greedy call scores the same raw fold identically)."""
    if metric in QUALITY:
        rows = sorted(res["quality"][arm], key=lambda r: (r["seed"], r["fold"]))
        return np.array([r[metric] for r in rows], dtype=float)
    rows = [
        r
        for r in res[key]
        if r["arm"] == arm
        and r["classifier"] == clf
        and r["metric"] == metric
        and (arm != "none" or r.get("evaluated_with", "mst") == "mst")
    ]
    rows.sort(key=lambda r: (r["seed"], r["fold"]))
    return np.array([r["value"] for r in rows], dtype=float)


# ------------------------------------------------------------------------------- diagnostics


def a7_trees(runs: int) -> dict[str, dict[str, Any]]:
    """Greedy-PreFair's trees on the whole FairML COMPAS table, with our candidate filter and
    with the authors' (spec A7: Sex and Age_Above_FourtyFive labelled admissible for the
    synthesiser, which admits exactly the two outcome edges their filter let through): the
    outcome's neighbours and whether the tree is fair by the true roles."""
    base = load_spec(SPECS / "compas_prefair.yaml")
    spec = derived_spec(base, "compas_fairml_prefair", {"bins": FAIRML_BINS})
    table = compas_fairml(_data_file("compas-scores-two-years.csv"))
    algo, names, label = algorithm_of(spec), table.column_names, "Two_yr_Recidivism"
    truth = index_roles(read_roles(table))
    out: dict[str, dict[str, Any]] = {}
    for name, source in (("ours", table), ("authors' filter", relabel(table, A7_ADMITTED))):
        fair_trees, neighbours = 0, {}
        for _ in range(runs):
            tree = algo(source, spec.params).sidecars["tree"].to_pylist()
            edges = [(names.index(e["a"]), names.index(e["b"])) for e in tree]
            fair_trees += fair(edges, truth)
            for e in tree:
                if label in (e["a"], e["b"]):
                    n = e["b"] if e["a"] == label else e["a"]
                    neighbours[n] = neighbours.get(n, 0) + 1
        out[name] = {"runs": runs, "fair": fair_trees, "neighbours": neighbours}
    return out


def _indicators(ds: Dataset) -> tuple[np.ndarray, np.ndarray]:
    roles = read_roles(ds.table)
    s = group_indicator(ds.table.column(ds.protected), roles[ds.protected])
    y = outcome_indicator(ds.table.column(ds.label), roles[ds.label])
    return s, y


def floors(ds: Dataset, res: dict, clf: str, folds: int) -> dict[str, tuple[float, float, float]]:
    """Per unconditional measure (``dpar``, ``tprb``, ``tnrb``): Greedy's mean, and the
    |difference| expected from the test set's binomial noise alone, sqrt(2/pi) * sqrt(p (1 - p)
    (1/n1 + 1/n0)), if both groups had Greedy's overall rate p: for our test fold (the table
    / folds) and for the whole table (the authors' test set)."""
    s, y = _indicators(ds)
    groups = {"dpar": np.ones_like(y), "tprb": y, "tnrb": ~y}
    pos, neg = y.sum() / folds, (~y).sum() / folds
    prec = values(res, "greedy", clf, "precision")
    rec = values(res, "greedy", clf, "recall")
    tp = rec * pos
    pp = np.divide(tp, prec, out=np.zeros_like(tp), where=prec > 0)
    rate = {
        "dpar": float(np.mean(pp / (pos + neg))),
        "tprb": float(np.mean(rec)),
        "tnrb": float(np.mean(1 - (pp - tp) / neg)),
    }
    out = {}
    for k, base in groups.items():
        n1, n0 = float((base & s).sum()), float((base & ~s).sum())
        p = rate[k]

        def floor(scale: float, p: float = p, n1: float = n1, n0: float = n0) -> float:
            return math.sqrt(2 / math.pi * p * (1 - p) * (scale / n1 + scale / n0))

        out[k] = (float(np.nanmean(values(res, "greedy", clf, k))), floor(folds), floor(1.0))
    return out


def strata_shares(table: pa.Table, columns: Sequence[str]) -> tuple[int, float]:
    """The number of joint values of ``columns`` and the share of rows alone in theirs."""
    joint = np.stack(
        [
            table.column(c).cast(pa.string()).fill_null("").to_numpy(zero_copy_only=False)
            for c in columns
        ],
        1,
    ).astype(str)
    _, counts = np.unique(joint, axis=0, return_counts=True)
    return len(counts), float((counts == 1).sum() / table.num_rows)


def adult_strata(ds: Dataset) -> dict[str, tuple[int, float]]:
    """Strata of the conditional measures on the whole Adult table: ours (bins snapped, raw)
    and the authors' admissible set, which adds fnlwgt (private-pgm's 100 bins, whose edges we
    do not have: equal-width and equal-frequency bracket them)."""
    adm = [c.name for c in read_roles(ds.table).with_role(Role.ADMISSIBLE)]
    raw = ingest(ds.specs["greedy"]).table
    out = {"ours, bins snapped": strata_shares(ds.table, adm), "ours, raw": strata_shares(raw, adm)}
    from privfair.schemas.datasets import ADULT_COLUMNS

    cols = list(ADULT_COLUMNS)
    frames = [
        pd.read_csv(_data_file(f), names=cols, skipinitialspace=True, skiprows=skip)
        for f, skip in (("adult.data", 0), ("adult.test", 1))
    ]
    df = pd.concat(frames).dropna(subset=["fnlwgt"])
    for how, cut in (("equal-width", pd.cut), ("equal-frequency", pd.qcut)):
        df["fnlwgt_bin"] = cut(df["fnlwgt"], 100, labels=False)
        sizes = df.groupby([*adm, "fnlwgt_bin"], dropna=False).size()
        out[f"authors' (+ fnlwgt, 100 {how} bins)"] = (
            len(sizes),
            float((sizes == 1).sum() / len(df)),
        )
    return out


def single_rules(ds: Dataset, columns: Sequence[str]) -> dict[str, tuple[float, float]]:
    """For a classifier that sees one column only (the majority label of each of its values,
    on the whole table): |P(y^ = 1 | S = 1) - P(y^ = 1 | S = 0)| and its accuracy."""
    s, y = _indicators(ds)
    out = {}
    for c in columns:
        x = ds.table.column(c).to_numpy(zero_copy_only=False)
        rate = pd.Series(y).groupby(x).mean()
        pred = pd.Series(x).map(rate).to_numpy() > 0.5
        out[c] = (float(abs(pred[s].mean() - pred[~s].mean())), float((pred == y).mean()))
    return out


# ------------------------------------------------------------------------------- report


def _f(x: float, digits: int = 4) -> str:
    return "nan" if not math.isfinite(x) else f"{x:.{digits}f}"


def _pct(x: float) -> str:
    return "nan" if not math.isfinite(x) else f"{x:.1f}"


def _ci(t: tuple[float, float, float]) -> str:
    return f"{_pct(t[0])} [{_pct(t[1])}, {_pct(t[2])}]"


def cell_ratio(
    ds: Dataset,
    res: dict,
    clf: str,
    cell: str,
    form: dict[str, str] = EVAL_NAME,
    key: str = "ml",
) -> tuple[float, float, float]:
    """Table 3's ``cell`` (100 x Greedy / MST) with its bootstrap interval."""
    name = cell if cell in QUALITY else ds.metric(cell, form)
    m, g = (values(res, a, clf, name, key) for a in ARMS)
    return ratio(g, m, f"{ds.key}/{clf}/{name}/{key}")


def _mean(res: dict, arm: str, clf: str, metric: str) -> float:
    return float(np.nanmean(values(res, arm, clf, metric)))


def _trees(res: dict, arm: str) -> tuple[int, int, str]:
    runs = res["quality"][arm]
    nb: dict[str, int] = {}
    for r in runs:
        for n in r["outcome_neighbours"]:
            nb[n] = nb.get(n, 0) + 1
    shown = ", ".join(f"{k} {v}" for k, v in sorted(nb.items(), key=lambda kv: -kv[1]))
    return sum(r["fair_tree"] for r in runs), len(runs), shown


def _compare(r: tuple[float, float, float], paper: float) -> str:
    if r[2] < paper:
        return "fall further than"
    if r[1] > paper:
        return "fall less than"
    return "fall as far as"


def findings(dsets: list[Dataset], results: dict, extras: dict, meta: dict) -> list[str]:
    """The reading of the run: each statement with the numbers it rests on."""
    by = {ds.key: ds for ds in dsets}
    main = meta["classifiers"][0]
    lr = "lr" if "lr" in meta["classifiers"] else main
    out = ["## Findings", ""]
    if "adult" in by:
        ds, res = by["adult"], results["adult"]
        c = {cell: cell_ratio(ds, res, main, cell) for cell in CELLS}
        cl = {cell: cell_ratio(ds, res, lr, cell) for cell in ML}
        fm, nm, shm = _trees(res, "mst")
        fg, ng, shg = _trees(res, "greedy")
        out += [
            f"- **Adult, data quality.** TVD 1-way {_ci(c['tvd1'])} % (paper 100.5), "
            f"2-way {_ci(c['tvd2'])} % (paper 106.0). ACD {_ci(c['acd'])} % against the paper's "
            "131.6 % and the authors' notebook's 103.1 %: the paper's cell does not match the "
            "authors' own outputs (spec A21) and their ACD is another formula (A13), so neither "
            "the cell nor the raw values (ours "
            f"{_f(_mean(res, 'mst', main, 'acd'))}, theirs 0.0075) are comparable. Accuracy "
            f"{_ci(c['accuracy'])} % (paper 99.8).",
            f"- **Adult, fairness.** MST's tree is fair in {fm} of {nm} "
            f"runs (income's neighbours: {shm}), Greedy's in {fg} of {ng} ({shg}). Downstream "
            f"({main}) DP {_f(_mean(res, 'mst', main, 'dpar'))} -> "
            f"{_f(_mean(res, 'greedy', main, 'dpar'))} (authors 0.056 -> 0.036), CDP "
            f"{_f(_mean(res, 'mst', main, 'cdp_reference'))} -> "
            f"{_f(_mean(res, 'greedy', main, 'cdp_reference'))} (0.085 -> 0.055). Our DP and CDP "
            f"{_compare(c['dp'], 64.4)} the paper's ({_pct(c['dp'][0])} and {_pct(c['cdp'][0])} % with "
            f"{main}, {_pct(cl['dp'][0])} and {_pct(cl['cdp'][0])} % with {lr}, against 64.4 and "
            "64.8 %). The classifier explains it (`reproduce_prefair_dp.py`, "
            "`results_reproduce_prefair_dp.md`): on the same synthetic tables, the authors' MLP "
            "on integer codes gives DP and CDP ratios near theirs (and their absolute DP), "
            "evaluate's MLP on one-hot features ratios less than half of them; scoring the whole "
            "table instead of the test fold changes little. Their 14th attribute (fnlwgt, "
            "admissible) is not in our Adult and stays untested.",
        ]
        fl = extras.get("floors", {}).get("adult")
        if fl:
            tn = fl["tnrb"]
            out.append(
                "- **Adult, TNRB and CTNRB are ratios of a noise floor.** |TNR_f - TNR_m| "
                "expected from the test rows' sampling alone (at our Greedy's rate) is "
                f"{_f(tn[2])} on the whole table, the authors' test set, where their Greedy "
                "measured 0.0018: their 10.2 % (TNRB) and 11.7 % (CTNRB) are that floor over "
                f"MST's value. On our test folds (one fifth) the floor is {_f(tn[1])}, "
                f"{100 * tn[1] / _mean(res, 'mst', main, 'tnrb'):.0f} % of our MST's {main} "
                f"TNRB. With {lr} our Greedy sits near it (TNRB "
                f"{_f(_mean(res, 'greedy', lr, 'tnrb'))}) and the cells come out "
                f"{_ci(cl['tnrb'])} and {_ci(cl['ctnrb'])} %; {main} trained on "
                f"Greedy's tables keeps a TNRB of {_f(tn[0])}, {tn[0] / tn[1]:.1f} times the "
                f"floor, so {_ci(c['tnrb'])} and {_ci(c['ctnrb'])} % ({main}). CTPRB "
                f"{_ci(c['ctprb'])} % ({main}; {lr} {_ci(cl['ctprb'])} %, paper 25.7): the "
                "reference form on the positive rows of near-unique strata is mostly noise "
                f"(our MST's {main} CTPRB {_f(_mean(res, 'mst', main, 'ctprb_reference'))}, "
                "the authors' 0.040).",
            )
        st = extras.get("strata", {})
        if st and res["raw_strata"]:
            diffs = [
                abs(
                    cell_ratio(ds, res, "lr", cc, form)[0]
                    - cell_ratio(ds, res, "lr", cc, form, key="raw_strata")[0]
                )
                for cc in ("cdp", "ctprb", "ctnrb")
                for form in (EVAL_NAME,)
            ]
            ours_b, ours_r = st["ours, bins snapped"], st["ours, raw"]
            auth = [v for k, v in st.items() if k.startswith("authors")]
            out.append(
                "- **Adult, the strata.** Snapping capital gain and loss to their public bins "
                f"takes the joint admissible values from {ours_r[0]:,} to {ours_b[0]:,} "
                f"({100 * ours_r[1]:.0f} % -> {100 * ours_b[1]:.0f} % of rows alone in theirs) "
                "and moves the reference-form CDP/CTPRB/CTNRB ratios of the same releases by "
                f"at most {max(diffs):.1f} points (lr re-score), inside their intervals: it "
                "does not matter here. The authors' strata were much finer, since fnlwgt in "
                "100 bins was admissible in their runs: "
                + " to ".join(f"{100 * v[1]:.0f} %" for v in auth)
                + " of rows alone in their stratum; our Adult has no fnlwgt, so this "
                "difference stays.",
            )
        out.append(
            f"- **Runtime.** Our generator takes {_f(_mean(res, 'mst', main, 'runtime'), 1)} s "
            f"(MST) and {_f(_mean(res, 'greedy', main, 'runtime'), 1)} s (Greedy) per "
            "Adult training fold on 2 cores shared with other jobs (authors: 192 and 179 s), "
            "COMPAS about 1 s; the runtime ratios (Adult "
            f"{_ci(c['runtime'])} %) mostly measure the machine's load."
        )
    fair_cells = ("dp", "tprb", "tnrb", "cdp", "ctprb", "ctnrb")
    if "compas" in by:
        ds, res = by["compas"], results["compas"]
        c = {cell: cell_ratio(ds, res, main, cell) for cell in CELLS}
        cl = {cell: cell_ratio(ds, res, lr, cell) for cell in ML}
        fm, nm, shm = _trees(res, "mst")
        span = [c[k][0] for k in fair_cells]
        span_lr = [cl[k][0] for k in fair_cells]
        out.append(
            "- **COMPAS (project preparation): the constraint "
            + ("never binds" if fm == nm else f"binds in {nm - fm} of {nm} runs")
            + f".** MST's tree is fair in {fm} of {nm} runs (the outcome's neighbours: {shm}), "
            f"so Greedy-PreFair samples from the same kind of tree: TVD 2-way "
            f"{_ci(c['tvd2'])} %, accuracy {_ci(c['accuracy'])} % (paper 119.8, 86.2). The six "
            f"fairness cells, {min(span):.0f}-{max(span):.0f} % ({main}) and "
            f"{min(span_lr):.0f}-{max(span_lr):.0f} % ({lr}), are then this protocol's noise "
            "for a null comparison: ratios of 10-run means of small disparities move by tens "
            "of points without any difference between the methods. The paper's COMPAS row "
            "cannot appear on this preparation, which has no COMPAS score column (FairML's "
            "score_factor, the attribute MST ties the outcome to on the authors' data, below) "
            "and other attributes and filters.",
        )
    pooled = [k for k in ("compas_fairml", "compas_fairml_race") if k in by]
    if pooled:
        q = {}
        for cell in ("tvd1", "tvd2", "acd"):
            m, g = (
                np.concatenate([values(results[k], a, main, cell) for k in pooled]) for a in ARMS
            )
            q[cell] = ratio(g, m, f"pooled/{cell}")
        n = sum(len(results[k]["quality"]["mst"]) for k in pooled)
        out.append(
            "- **COMPAS, FairML preparation, data quality** (pooled over the S = Sex and S = "
            f"Race runs, the same synthesiser on the same folds: {n} tables per method): TVD "
            f"1-way {_ci(q['tvd1'])} %, 2-way {_ci(q['tvd2'])} %, ACD {_ci(q['acd'])} % (paper "
            "96.5, 119.8, 103.3). Greedy costs some 2-way fidelity here, as in the paper, but "
            "less than its 'almost 20 %'.",
        )
    verdicts: dict[str, int] = {}
    for key in pooled:
        ds, res = by[key], results[key]
        verdicts[key] = sum(
            verdict(PAPER["compas"][k], *cell_ratio(ds, res, main, k)).startswith("within")
            for k in fair_cells
        )
    for key in pooled:
        ds, res = by[key], results[key]
        c = {cell: cell_ratio(ds, res, main, cell) for cell in CELLS}
        cl = {cell: cell_ratio(ds, res, lr, cell) for cell in ML}
        fm, nm, shm = _trees(res, "mst")
        rules = extras.get("rules", {}).get(key, {})
        rule_txt = "; ".join(
            f"{col} alone gives DP {_f(v[0], 3)} (accuracy {_f(v[1], 3)})"
            for col, v in rules.items()
        )
        s_name = "sex" if key == "compas_fairml" else "race"
        out.append(
            f"- **COMPAS, FairML preparation, S = {s_name}.** MST's tree is fair in {fm} of "
            f"{nm} runs (outcome's neighbours: {shm}); Greedy's outcome is tied to "
            f"Number_of_Priors. MST's {main} gives DP {_f(_mean(res, 'mst', main, 'dpar'), 3)}"
            f", CDP {_f(_mean(res, 'mst', main, 'cdp_reference'), 3)} (the paper's Fig. 8 "
            "text: MST's disparities '> 0.15'). Greedy's ratios "
            f"({main}): DP {_ci(c['dp'])}, TPRB {_ci(c['tprb'])}, TNRB {_ci(c['tnrb'])}, "
            f"CDP {_ci(c['cdp'])}, CTPRB {_ci(c['ctprb'])}, CTNRB {_ci(c['ctnrb'])} % (paper "
            f"66.2, 70.3, 73.0, 50.0, 50.5, 53.1): {verdicts[key]} of 6 within the paper's "
            f"noise; {lr}: DP {_ci(cl['dp'])}, CDP {_ci(cl['cdp'])} %; paper-form CDP "
            f"({main}) {_ci(cell_ratio(ds, res, main, 'cdp', PAPER_FORM))} %. By {s_name}, "
            f"{rule_txt}.",
        )
    if len(pooled) == 2:
        sex, race = verdicts["compas_fairml"], verdicts["compas_fairml_race"]
        out.append(
            "- **COMPAS, which S.** Fixing the tree to Number_of_Priors "
            + (
                "raises the disparity by sex and lowers the one by race, as the one-column "
                "classifiers above predict; "
                if cell_ratio(by["compas_fairml"], results["compas_fairml"], main, "dp")[0] > 100
                and cell_ratio(by["compas_fairml_race"], results["compas_fairml_race"], main, "dp")[
                    0
                ]
                < 100
                else "changes the disparities by sex and by race differently; "
            )
            + f"with the {main} (Table 3's classifier) {race} of the six fairness cells are "
            f"within the paper's noise for S = race against {sex} for S = sex, and only by "
            "race does MST show disparities above 0.15. The paper's COMPAS row fits S = race "
            "better (spec A11: the authors' COMPAS notebook is missing). Accuracy "
            f"{_ci(cell_ratio(by['compas_fairml_race'], results['compas_fairml_race'], main, 'accuracy'))}"
            " % against the paper's 86.2 % does not reproduce in any COMPAS variant (not "
            "explained; our classifiers and feature coding differ from theirs).",
        )
    a7 = extras.get("a7")
    if a7:
        ours, theirs = a7["ours"], a7["authors' filter"]

        def nb(d: dict) -> str:
            return ", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: -kv[1]))

        out.append(
            "- **The authors' COMPAS candidate filter (A7).** Their Greedy candidate "
            "filter let (outcome, Sex) and (outcome, Age_Above_FourtyFive) through. Emulated on "
            f"the whole FairML table ({theirs['runs']} runs), the outcome's neighbours were "
            f"{nb(theirs['neighbours'])} and the tree was fair by the true roles in "
            f"{theirs['fair']} of {theirs['runs']} (our filter: {nb(ours['neighbours'])}; "
            f"{ours['fair']} of {ours['runs']})"
            + (
                ": the admitted edges are never chosen, so the bug does not explain the "
                "COMPAS differences."
                if theirs["fair"] == theirs["runs"]
                else "."
            ),
        )
    return out + [""]


def render(dsets: list[Dataset], results: dict, meta: dict, extras: dict | None = None) -> str:
    """The Markdown report."""
    extras = extras or {}
    clfs = meta["classifiers"]
    main = clfs[0]
    lines = [
        f"# PreFair Table 3 through `evaluate` ({meta['date']})",
        "",
        f"Command: `{meta['command']}`; wall time {meta['wall_s'] / 60:.1f} min on "
        f"{meta['cpus']} CPUs (shared with other benchmarks; 1-minute load average "
        f"{meta['load'][0]:.1f} at the start, {meta['load'][1]:.1f} at the end), Python "
        f"{meta['python']}.",
        "",
        f"epsilon = 1, delta = 1e-9; {meta['folds']} stratified folds x seeds "
        f"{meta['seeds']} = {meta['runs']} synthetic tables per method and dataset (the paper: "
        "10); the synthesiser runs on the training fold, classifiers "
        f"({', '.join(clfs)}; `evaluate`'s scikit-learn models) train on its output and are "
        "scored on the real test fold. Both methods see the same folds. Ratios are "
        "100 x mean(Greedy-PreFair) / mean(MST) with a 95 % paired bootstrap interval over the "
        "runs; verdict: the paper's cell inside that interval = *within*, inside it widened by "
        "sqrt(2) (the paper's cell is a ratio of 10-run means too) = *within combined noise*. "
        "CDP/CTPRB/CTNRB are the authors' form (`*_reference`, spec A12), as Table 3 used. "
        "A percentile bootstrap of 10 heavy-tailed runs under-covers: between runs of this "
        "script the fairness ratios move by more than these intervals suggest (see *Across "
        "runs* when earlier runs are pooled with `--pool`).",
        "",
    ]
    if meta.get("rendered"):
        lines += [f"Rendered from that run's saved per-run values by `{meta['rendered']}`.", ""]
    lines += [
        "## Table 3 (Greedy-PreFair as % of MST, epsilon = 1)",
        "",
        "| dataset | source | " + " | ".join(HEAD[c] for c in CELLS) + " |",
        "|---|---|" + "---|" * len(CELLS),
    ]
    shown_paper: set[str] = set()
    for ds in dsets:
        res = results[ds.key]
        if ds.paper not in shown_paper and ds.paper in PAPER:
            shown_paper.add(ds.paper)
            paper = PAPER[ds.paper]
            name = ds.paper.capitalize() if ds.paper == "adult" else "COMPAS"
            lines.append(f"| {name} | paper | " + " | ".join(_pct(paper[c]) for c in CELLS) + " |")
            ref = REFERENCE.get(ds.paper, {})
            cells = [
                _pct(100 * ref["greedy"][c] / ref["mst"][c]) if c in ref.get("mst", {}) else "-"
                for c in CELLS
            ]
            lines.append(f"| {name} | authors' notebook | " + " | ".join(cells) + " |")
        for clf in clfs:
            cells = [
                "" if c in QUALITY and clf != main else f"**{_ci(cell_ratio(ds, res, clf, c))}**"
                for c in CELLS
            ]
            lines.append(f"| {ds.title} | ours, {clf} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += findings(dsets, results, extras, meta)
    if extras.get("pool"):
        lines += _across_runs(dsets, results, extras["pool"], meta)
    for ds in dsets:
        lines += _dataset_section(ds, results[ds.key], meta, extras)
    if extras.get("a7"):
        lines += ["## The authors' COMPAS candidate filter (spec A7), trees only", ""]
        for name, d in extras["a7"].items():
            nb = ", ".join(
                f"{k} {v}" for k, v in sorted(d["neighbours"].items(), key=lambda kv: -kv[1])
            )
            lines.append(
                f"- Greedy-PreFair, {name}, whole FairML table, {d['runs']} runs: fair by the "
                f"true roles in {d['fair']}; the outcome's neighbours (runs): {nb}"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def _across_runs(
    dsets: list[Dataset], results: dict, pool: list[tuple[str, dict]], meta: dict
) -> list[str]:
    """Each cell's ratio in this run and in earlier runs of this script, and all of them
    pooled (their runs concatenated) with its bootstrap interval and verdict."""
    clfs = meta["classifiers"]
    lines = [
        "## Across runs",
        "",
        "The same cells from independent runs of this script (same folds and classifier "
        f"seeds, fresh privacy noise): this run ({meta['date']}), then "
        + ", ".join(label for label, _ in pool)
        + "; *pooled* concatenates their runs.",
        "",
    ]
    for ds in dsets:
        earlier = [res[ds.key] for _, res in pool if ds.key in res]
        if not earlier:
            continue
        sets = [results[ds.key], *earlier]
        paper = PAPER.get(ds.paper, {})
        lines += [
            f"**{ds.title}**",
            "",
            "| cell | classifier | per run set | pooled [95 % bootstrap] | runs | paper | "
            "verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        for clf in clfs:
            for c in CELLS if clf == clfs[0] else ML:
                name = c if c in QUALITY else ds.metric(c)
                per, ms, gs = [], [], []
                for res in sets:
                    m, g = (values(res, a, clf, name) for a in ARMS)
                    ms.append(m)
                    gs.append(g)
                    per.append(_pct(100 * np.nanmean(g) / np.nanmean(m)))
                m, g = np.concatenate(ms), np.concatenate(gs)
                r = ratio(g, m, f"pooled/{ds.key}/{clf}/{name}")
                p = paper.get(c)
                lines.append(
                    f"| {HEAD[c]} | {clf} | {' / '.join(per)} | {_ci(r)} | {len(m)} | "
                    f"{_pct(p) if p is not None else '-'} | {verdict(p, *r)} |"
                )
        lines.append("")
    return lines


def _dataset_section(ds: Dataset, res: dict, meta: dict, extras: dict) -> list[str]:
    clfs = meta["classifiers"]
    main = clfs[0]
    paper = PAPER.get(ds.paper, {})
    ref = REFERENCE.get(ds.paper, {})
    lines = [f"## {ds.title}", ""] + [f"- {n}" for n in ds.notes] + [""]
    lines += [
        f"| cell | paper | authors' notebook | ours, {main} [95 % bootstrap] | verdict | "
        + "".join(f"ours, {c} (verdict) | " for c in clfs[1:])
        + f"ours, {main}, paper-form conditional |",
        "|---|---|---|---|---|" + "---|" * len(clfs[1:]) + "---|",
    ]
    for c in CELLS:
        r = cell_ratio(ds, res, main, c)
        p = paper.get(c)
        rr = _pct(100 * ref["greedy"][c] / ref["mst"][c]) if c in ref.get("mst", {}) else "-"
        others = []
        for clf in clfs[1:]:
            if c in QUALITY:
                others.append("(same releases)")
                continue
            r2 = cell_ratio(ds, res, clf, c)
            others.append(f"{_ci(r2)} ({verdict(p, *r2)})")
        pf = _ci(cell_ratio(ds, res, main, c, PAPER_FORM)) if c in PAPER_FORM else ""
        lines.append(
            f"| {HEAD[c]} | {_pct(p) if p is not None else '-'} | {rr} | {_ci(r)} | "
            f"{verdict(p, *r)} | " + "".join(f"{o} | " for o in others) + f"{pf} |"
        )
    lines += [
        "",
        f"Raw means [95 % t-interval over the {meta['runs']} runs]"
        + (" and the authors' notebook means (spec 6.5)" if ref.get("mst", {}).get("tvd1") else "")
        + ":",
        "",
        "| metric | classifier | MST | Greedy-PreFair | none (real training fold) | "
        "authors' MST | authors' Greedy |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in QUALITY:
        cells = []
        d = 2 if c == "runtime" else 4
        for arm in ARMS:
            mean, lo, hi = t_interval(values(res, arm, main, c))
            cells.append(f"{_f(mean, d)} [{_f(lo, d)}, {_f(hi, d)}]")
        refs = [str(ref.get(a, {}).get(c, "-")) for a in ARMS]
        unit = " (s)" if c == "runtime" else ""
        lines.append(
            f"| {HEAD[c]}{unit} | - | {cells[0]} | {cells[1]} | - | {refs[0]} | {refs[1]} |"
        )
    for clf in clfs:
        for c in ML:
            name = ds.metric(c)
            cells = []
            for arm in (*ARMS, "none"):
                mean, lo, hi = t_interval(values(res, arm, clf, name))
                cells.append(f"{_f(mean)} [{_f(lo)}, {_f(hi)}]")
            refs = [str(ref.get(a, {}).get(c, "-")) if clf == "mlp" else "-" for a in ARMS]
            lines.append(
                f"| {HEAD[c]} (`{name}`) | {clf} | {cells[0]} | {cells[1]} | {cells[2]} | "
                f"{refs[0]} | {refs[1]} |"
            )
    lines += ["", "Trees of the releases:", ""]
    for arm in ARMS:
        runs = res["quality"][arm]
        fair_n, n, shown = _trees(res, arm)
        dp = np.array([r["synthetic_dp"] for r in runs if r["synthetic_dp"] is not None])
        cdp = np.array([r["synthetic_cdp"] for r in runs if r["synthetic_cdp"] is not None])
        lines.append(
            f"- {ARM_TITLE[arm]}: fair tree in {fair_n} of {n} runs; the outcome's tree "
            f"neighbours (runs): {shown}; on the synthetic table itself |P(y | S=1) - "
            f"P(y | S=0)| = {_f(float(dp.mean()) if len(dp) else math.nan, 3)}, its conditional "
            f"form (paper) {_f(float(cdp.mean()) if len(cdp) else math.nan, 3)}"
        )
    lines.append("")
    fl = extras.get("floors", {}).get(ds.key)
    if fl:
        back = {"dpar": "dp", "tprb": "tprb", "tnrb": "tnrb"}
        if ds.flipped:
            back = {"dpar": "dp", "tprb": "tnrb", "tnrb": "tprb"}
        lines += [
            f"Sampling floor of Greedy's unconditional measures ({main}): the |rate "
            "difference| expected from the test rows' binomial noise alone, at Greedy's overall "
            "rate:",
            "",
            "| measure | Greedy, ours | floor on our test fold | floor on the whole table "
            "(the authors' test set) | authors' Greedy |",
            "|---|---|---|---|---|",
        ]
        for k, (mean, ours, whole) in fl.items():
            cell = back[k]
            a = ref.get("greedy", {}).get(cell, "-") if ds.key == ds.paper else "-"
            lines.append(f"| {HEAD[cell]} (`{k}`) | {_f(mean)} | {_f(ours)} | {_f(whole)} | {a} |")
        lines.append("")
    st = extras.get("strata") if ds.key == "adult" else None
    if st:
        lines += [
            "Strata of the conditional measures on the whole table (joint admissible values):",
            "",
            "| admissible columns | strata | rows alone in their stratum |",
            "|---|---|---|",
        ]
        lines += [f"| {k} | {v[0]:,} | {100 * v[1]:.1f} % |" for k, v in st.items()]
        lines.append("")
    rules = extras.get("rules", {}).get(ds.key)
    if rules:
        lines += [
            f"One-column classifiers on the whole table (majority label per value), S = "
            f"{ds.protected}: "
            + "; ".join(f"{c}: DP {_f(v[0], 3)}, accuracy {_f(v[1], 3)}" for c, v in rules.items())
            + ".",
            "",
        ]
    if res["raw_strata"]:
        lines += [
            "Do the strata matter? The same releases re-scored by `evaluate` with `lr` on the "
            "raw input (admissible capital-gain and -loss unbinned, releases not snapped: the "
            "strata are the raw joint values), against the binned run above:",
            "",
            "| measure (lr) | MST binned | MST raw | Greedy binned | Greedy raw | ratio binned | "
            "ratio raw |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in ("accuracy", "dp", "cdp", "ctprb", "ctnrb"):
            for form in (EVAL_NAME, PAPER_FORM) if c in PAPER_FORM else (EVAL_NAME,):
                name = ds.metric(c, form)
                b = [values(res, a, "lr", name) for a in ARMS]
                w = [values(res, a, "lr", name, key="raw_strata") for a in ARMS]
                lines.append(
                    f"| `{name}` | {_f(b[0].mean())} | {_f(w[0].mean())} | {_f(b[1].mean())} | "
                    f"{_f(w[1].mean())} | {_ci(cell_ratio(ds, res, 'lr', c, form))} | "
                    f"{_ci(cell_ratio(ds, res, 'lr', c, form, key='raw_strata'))} |"
                )
        lines.append("")
    none = [r for r in res["ml"] if r["arm"] == "none"]
    by: dict[tuple, list[float]] = {}
    for r in none:
        by.setdefault((r["seed"], r["fold"], r["classifier"], r["metric"]), []).append(r["value"])
    diff = max((abs(v[0] - v[1]) for v in by.values() if len(v) == 2 and v[0] == v[0]), default=0.0)
    lines += [
        f"Same folds check: the unprotected arm, scored once in the MST call and once in the "
        f"Greedy call, differs by at most {diff:.2g} (0 = identical folds and models).",
        "",
    ]
    return lines


def run(
    args: argparse.Namespace, clfs: list[str], seeds: list[int], command: str
) -> tuple[list[Dataset], dict, dict, dict]:
    """The whole protocol: every dataset through ``evaluate``, then the diagnostics."""
    t0 = time.perf_counter()
    load0 = os.getloadavg()[0]
    dsets = datasets([d.strip() for d in args.datasets.split(",")])
    results = {ds.key: run_dataset(ds, seeds, args.folds, clfs) for ds in dsets}
    extras: dict[str, Any] = {
        "floors": {ds.key: floors(ds, results[ds.key], clfs[0], args.folds) for ds in dsets},
        "rules": {
            ds.key: single_rules(ds, ["Number_of_Priors", "score_factor"])
            for ds in dsets
            if ds.key.startswith("compas_fairml")
        },
    }
    if any(ds.key == "adult" for ds in dsets):
        extras["strata"] = adult_strata(next(ds for ds in dsets if ds.key == "adult"))
    if args.a7_runs > 0:
        extras["a7"] = a7_trees(args.a7_runs)
    meta = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="minutes"),
        "command": command,
        "wall_s": time.perf_counter() - t0,
        "cpus": os.cpu_count(),
        "load": (load0, os.getloadavg()[0]),
        "python": platform.python_version(),
        "folds": args.folds,
        "seeds": seeds,
        "runs": args.folds * len(seeds),
        "classifiers": clfs,
    }
    return dsets, results, extras, meta


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 folds, 1 seed, lr only")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seeds", type=int, default=2, help="evaluate seeds 0 .. N-1")
    ap.add_argument("--classifiers", default="mlp,lr", help="the first one is Table 3's")
    ap.add_argument("--datasets", default="adult,compas,compas_fairml,compas_fairml_race")
    ap.add_argument("--a7-runs", type=int, default=20, help="A7 tree diagnostic (0: skip)")
    ap.add_argument("--out", default=None, help=f"Markdown file (default {OUT.name})")
    ap.add_argument("--json", default=None, help="also write the per-run values here")
    ap.add_argument(
        "--from-json", default=None, help="render a run saved with --json instead of running"
    )
    ap.add_argument(
        "--pool", nargs="*", default=[], help="earlier runs saved with --json, pooled per cell"
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.folds, args.seeds, args.classifiers, args.a7_runs = 3, 1, "lr", 3
    out = Path(args.out) if args.out else (None if args.quick else OUT)
    clfs = [c.strip() for c in args.classifiers.split(",") if c.strip()]
    seeds = list(range(args.seeds))
    warnings.filterwarnings("ignore", message=".*Maximum iterations.*")
    given = list(argv if argv is not None else sys.argv[1:])
    command = "PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/reproduce_prefair.py"
    command += "".join(f" {a}" for a in given)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        meta, extras = saved["meta"], saved.get("extras", {})
        meta["rendered"] = command
        dsets = datasets(list(saved["results"]))
        results = {ds.key: saved["results"][ds.key] for ds in dsets}
        clfs = meta["classifiers"]
    else:
        dsets, results, extras, meta = run(args, clfs, seeds, command)
    extras["pool"] = []
    for p in args.pool:
        saved = json.loads(Path(p).read_text())
        extras["pool"].append((f"`{p}` ({saved['meta']['date']})", saved["results"]))
    md = render(dsets, results, meta, extras)
    print(md)
    if out is not None:
        out.write_text(md)
    if args.json:
        keep = {k: v for k, v in extras.items() if k != "pool"}
        Path(args.json).write_text(
            json.dumps({"meta": meta, "results": results, "extras": keep}, default=str)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
