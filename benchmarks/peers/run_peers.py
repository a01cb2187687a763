"""Run the PyPI Mondrian / generalisation peers of dMondrian on UCI Adult.

Standalone on purpose: this script imports only the standard library, pandas, numpy and
the peer package under test (``anonypy`` or ``anjana``), never privfair. Run it in the
peer's own throwaway environment, e.g.::

    uv run --isolated --no-project --with anonypy==0.2.1 --with pandas==3.1.1 \
        python benchmarks/peers/run_peers.py --peer anonypy \
        --data-dir /work/shared/data --out /tmp/peers-anonypy.json

    uv run --isolated --no-project --with anjana==1.2.3 \
        python benchmarks/peers/run_peers.py --peer anjana \
        --data-dir /work/shared/data --out /tmp/peers-anjana.json

Runs (income is the sensitive attribute throughout):

* ``anonypy`` Mondrian: ``Preserver(df, qis, "income").anonymize_k_anonymity(k)`` with
  k=10, and its t-closeness mode ``anonymize_t_closeness(k, t)`` with t=0.15 (the mode
  needs a k as well; k=10 by default, as in the issue's reference observation).
* ``anjana`` full-domain generalisation: ``anjana.anonymity.t_closeness(df, [], qis,
  "income", k, t, supp_level, hierarchies)`` with t=0.15 and k=1 (the smallest k it
  accepts; ``--anjana-k 1,10`` adds the k=10 run of the reference observation).

QI sets: ``ours`` (age, workclass, education, marital-status, occupation, relationship,
race: the 6 PND attributes of the spec's Adult setup plus the PD attribute race), ``nine``
(``ours`` + sex, native-country) and ``ref`` (the QIs used for the reference observation
in the peers survey: age, education-num, capital-gain, capital-loss, hours-per-week, sex,
race, marital-status, workclass). ``--qis all`` means ours + nine.

Per run the JSON records: the wall time of the anonymise call alone and of the whole run
(input preparation + anonymise + turning the output into rows + statistics), the number
of published equivalence classes (rows grouped by their published QI values), the
smallest and largest class, rows published (suppressed rows are missing), and how many
classes violate t-closeness: |share(income <=50K in class) - global share| > t, which is
the variational distance (= EMD with equal ground distance) on the binary sensitive
attribute. The global share is that of the 48,842 input rows; the count against the
share of the published rows is recorded too (they differ only after suppression).

A peer that cannot be imported, raises, or exceeds ``--timeout`` is recorded with its
error string instead of crashing the script. ``--via-uv`` runs each peer in its own
``uv run --isolated --no-project --with ...`` child and merges the JSON; a peer whose
environment cannot be built is then recorded as ``install_error``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import importlib.metadata
import json
import os
import platform
import signal
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import pandas as pd

COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
]
NUMERIC = {"age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"}
SENSITIVE = "income"
NEGATIVE = "<=50K"

QI_SETS = {
    "ours": [
        "age",
        "workclass",
        "education",
        "marital-status",
        "occupation",
        "relationship",
        "race",
    ],
    "nine": [
        "age",
        "workclass",
        "education",
        "marital-status",
        "occupation",
        "relationship",
        "race",
        "sex",
        "native-country",
    ],
    "ref": [
        "age",
        "education-num",
        "capital-gain",
        "capital-loss",
        "hours-per-week",
        "sex",
        "race",
        "marital-status",
        "workclass",
    ],
}


# --------------------------------------------------------------------------- data


def load_adult(data_dir: Path) -> pd.DataFrame:
    """All 48,842 rows of adult.data + adult.test; '?' kept as its own value."""
    frames = []
    for name, skip in (("adult.data", 0), ("adult.test", 1)):
        frame = pd.read_csv(
            data_dir / name,
            header=None,
            names=COLUMNS,
            sep=",",
            skipinitialspace=True,
            skiprows=skip,
            na_filter=False,  # '?' stays a value of its own
            skip_blank_lines=True,
            dtype={c: (np.int64 if c in NUMERIC else object) for c in COLUMNS},
        )
        frames.append(frame)
    df = pd.concat(frames, ignore_index=True)
    df[SENSITIVE] = df[SENSITIVE].str.rstrip(".")
    for c in COLUMNS:
        if c not in NUMERIC:
            df[c] = df[c].astype(object)
    if len(df) != 48842:
        raise ValueError(f"expected 48,842 Adult rows, read {len(df)}")
    if set(df[SENSITIVE].unique()) != {"<=50K", ">50K"}:
        raise ValueError(f"unexpected income labels {sorted(df[SENSITIVE].unique())}")
    return df


# --------------------------------------------------------------------------- stats


def class_stats(
    published: pd.DataFrame, qis: list[str], t: float, global_share: float, weight=None
) -> dict:
    """Equivalence classes of a published table = rows grouped by their published QI values.

    ``weight`` names a column of row multiplicities (anonypy publishes one row per
    (class, sensitive value) with a count).
    """
    if len(published) == 0:
        return {
            "n_classes": 0,
            "min_class": None,
            "max_class": None,
            "rows_published": 0,
        }
    keys = published[qis].astype(str)
    w = published[weight].to_numpy(np.int64) if weight else np.ones(len(published), dtype=np.int64)
    neg = (published[SENSITIVE].astype(str).str.rstrip(".") == NEGATIVE).to_numpy() * w
    frame = keys.assign(_w=w, _neg=neg)
    grouped = frame.groupby(qis, sort=False, dropna=False)[["_w", "_neg"]].sum()
    size = grouped["_w"].to_numpy(np.int64)
    nneg = grouped["_neg"].to_numpy(np.int64)
    share = nneg / size
    rows = int(size.sum())
    pub_share = float(nneg.sum() / rows)
    dist = np.abs(share - global_share)
    dist_pub = np.abs(share - pub_share)
    order = np.argsort(-size)
    return {
        "n_classes": len(size),
        "min_class": int(size.min()),
        "max_class": int(size.max()),
        "largest_classes": [int(s) for s in size[order[:5]]],
        "rows_published": rows,
        "classes_over_t": int((dist > t + 1e-12).sum()),
        "rows_in_classes_over_t": int(size[dist > t + 1e-12].sum()),
        "max_distance": round(float(dist.max()), 6),
        "published_share_le50k": round(pub_share, 6),
        "classes_over_t_vs_published_share": int((dist_pub > t + 1e-12).sum()),
        "max_distance_vs_published_share": round(float(dist_pub.max()), 6),
        "qi_distinct_values": {q: int(keys[q].nunique()) for q in qis},
    }


# --------------------------------------------------------------------------- timeouts


class RunTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: int):
    if not seconds or not hasattr(signal, "SIGALRM"):
        yield
        return

    def _raise(signum, frame):
        raise RunTimeout(f"run exceeded --timeout {seconds} s and was abandoned")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def wait_for_quiet(max_load: float, max_wait: float) -> tuple[float | None, float]:
    """Wait (checking every 15 s, at most ``max_wait`` s) while the 1-minute load average is
    above ``max_load``. Returns the load when measuring starts and the seconds waited."""
    if not hasattr(os, "getloadavg"):
        return None, 0.0
    waited = 0.0
    while os.getloadavg()[0] > max_load and waited < max_wait:
        time.sleep(15)
        waited += 15
    return round(os.getloadavg()[0], 2), waited


def version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


# --------------------------------------------------------------------------- anonypy


def run_anonypy(df: pd.DataFrame, qis: list[str], mode: str, k: int, t: float, gshare: float):
    """anonypy 0.2.x: ``Preserver(df, feature_columns, sensitive_column)``.

    Categorical QIs must have pandas dtype ``category`` (anonypy splits those by halving
    their list of distinct values and publishes the comma-joined value set); numeric QIs
    are cut at the median and published as "min-max". The output is a list of dicts,
    one per (partition, income value) with a ``count``; nothing is suppressed.
    """
    import anonypy  # an ImportError is recorded by the caller

    t0 = time.perf_counter()
    data = df[qis + [SENSITIVE]].copy()
    for c in qis:
        if c not in NUMERIC:
            data[c] = data[c].astype("category")
    data[SENSITIVE] = data[SENSITIVE].astype("category")
    preserver = anonypy.Preserver(data, qis, SENSITIVE)
    ta = time.perf_counter()
    if mode == "k":
        rows = preserver.anonymize_k_anonymity(k)
    else:
        rows = preserver.anonymize_t_closeness(k, t)
    tb = time.perf_counter()
    published = pd.DataFrame(rows)
    stats = class_stats(published, qis, t, gshare, weight="count")
    t1 = time.perf_counter()
    return tb - ta, t1 - t0, stats, {}


# --------------------------------------------------------------------------- anjana


def build_hierarchies(df: pd.DataFrame, qis: list[str]) -> dict:
    """Simple generalisation hierarchies in anjana's format.

    anjana wants, per QI, ``{level: sequence}`` where level 0 lists the distinct raw
    values and level i lists, position by position, the generalisation of that value at
    level i (the same layout as its README's CSV hierarchies).

    * numeric QIs (age, and the numeric ones of the ``ref`` set): intervals of width w
      aligned at 0 for w in (5, 10, 20) for age, rendered "[lo, hi)", then "*";
      other numeric QIs: widths chosen relative to their range (1/32, 1/8, 1/2 of it),
      then "*";
    * categorical QIs: the value itself, then "*".
    """
    hierarchies = {}
    for q in qis:
        values = np.array(sorted(df[q].unique()))
        if q in NUMERIC:
            if q == "age":
                widths = [5, 10, 20]
            else:
                span = int(values.max() - values.min()) + 1
                widths = sorted({max(1, span // 32), max(1, span // 8), max(1, span // 2)})
            levels = {0: values}
            for i, w in enumerate(widths, start=1):
                lo = (values // w) * w
                levels[i] = np.array([f"[{a}, {a + w})" for a in lo], dtype=object)
            levels[len(widths) + 1] = np.array(["*"] * len(values), dtype=object)
        else:
            levels = {
                0: values.astype(object),
                1: np.array(["*"] * len(values), dtype=object),
            }
        hierarchies[q] = levels
    return hierarchies


def run_anjana(
    df: pd.DataFrame,
    qis: list[str],
    k: int,
    t: float,
    supp_level: float,
    gshare: float,
):
    """anjana 1.2.x ``t_closeness(data, ident, quasi_ident, sens_att, k, t, supp_level,
    hierarchies) -> DataFrame``: k-anonymity first (full-domain generalisation of the QI
    with most distinct values, plus suppression of small classes up to ``supp_level``
    percent), then more generalisation until pycanon's t <= t. Returns an empty frame if
    it cannot reach t. It needs a default RangeIndex (pycanon mixes labels and positions).
    """
    from anjana.anonymity import t_closeness

    t0 = time.perf_counter()
    data = df[qis + [SENSITIVE]].copy().reset_index(drop=True)
    hierarchies = build_hierarchies(data, qis)
    ta = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):  # anjana prints its progress
        out = t_closeness(data, [], qis, SENSITIVE, k, t, supp_level, hierarchies)
    tb = time.perf_counter()
    stats = class_stats(out, qis, t, gshare)
    levels = {}
    if len(out):
        for q in qis:
            vals = set(out[q].astype(str))
            for lvl, seq in hierarchies[q].items():
                if vals <= {str(v) for v in seq}:
                    levels[q] = int(lvl)
                    break
    t1 = time.perf_counter()
    extra = {"generalisation_levels": levels, "empty_output": len(out) == 0}
    return tb - ta, t1 - t0, stats, extra


# --------------------------------------------------------------------------- via uv


def _drop_opts(argv: list[str], names: dict[str, bool]) -> list[str]:
    """``argv`` without the options in ``names`` (value: whether the option takes a value)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in names:
            skip = names[name] and "=" not in a
            continue
        out.append(a)
    return out


def run_via_uv(args, peers: list[str], argv: list[str]) -> int:
    """One child process per peer, each in a throwaway uv environment; merged JSON."""
    import subprocess
    import tempfile

    passthrough = _drop_opts(
        argv,
        {
            "--via-uv": False,
            "--peer": True,
            "--out": True,
            "--anonypy-with": True,
            "--anjana-with": True,
        },
    )
    merged = {"meta": {"via_uv": True, "envs": {}}, "dataset": None, "runs": []}
    for peer in peers:
        spec = args.anonypy_with if peer == "anonypy" else args.anjana_with
        withs = [w.strip() for w in spec.split(",") if w.strip()]
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / f"{peer}.json"
            cmd = ["uv", "run", "--isolated", "--no-project"]
            for w in withs:
                cmd += ["--with", w]
            cmd += ["python", str(Path(__file__).resolve()), "--peer", peer, "--out", str(out)]
            cmd += passthrough
            print("[uv] " + " ".join(cmd), file=sys.stderr, flush=True)
            proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if proc.returncode == 0 and out.exists():
                child = json.loads(out.read_text())
                merged["meta"]["envs"][peer] = {"with": withs, **child["meta"]}
                merged["dataset"] = merged["dataset"] or child["dataset"]
                merged["runs"].extend(child["runs"])
            else:
                tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
                merged["meta"]["envs"][peer] = {"with": withs, "returncode": proc.returncode}
                merged["runs"].append(
                    {
                        "peer": peer,
                        "status": "install_error" if not out.exists() else "error",
                        "error": f"`{' '.join(cmd)}` exited {proc.returncode}: {tail}",
                    }
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(merged, indent=2) + "\n")
    print(json.dumps(merged["runs"], indent=1, default=str))
    return 0


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=Path(os.environ.get("PRIVFAIR_DATA_DIR", ".")))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--peer", choices=["anonypy", "anjana", "all"], default="all")
    ap.add_argument(
        "--qis",
        default="all",
        help="ours | nine | ref, a comma list of them, or all (= ours,nine)",
    )
    ap.add_argument("--k", type=int, default=10, help="anonypy k (both modes)")
    ap.add_argument("--t", type=float, default=0.15)
    ap.add_argument(
        "--anjana-k",
        default="1",
        help="comma-separated k values for anjana's t-closeness (default 1)",
    )
    ap.add_argument(
        "--anjana-supp",
        type=float,
        default=0.0,
        help="anjana supp_level, percent of rows it may suppress (default 0)",
    )
    ap.add_argument("--timeout", type=int, default=600, help="per-run cap in seconds")
    ap.add_argument(
        "--max-load",
        type=float,
        default=1.5,
        help="before each run wait while the 1-min load average is above this (2-core box)",
    )
    ap.add_argument("--max-wait", type=float, default=180, help="longest wait for --max-load")
    ap.add_argument(
        "--via-uv",
        action="store_true",
        help="run each peer in its own `uv run --isolated --no-project` environment (see "
        "--anonypy-with / --anjana-with) and merge the results; an environment that "
        "cannot be built is recorded as an install error",
    )
    ap.add_argument("--anonypy-with", default="anonypy==0.2.1,pandas==3.1.1")
    ap.add_argument("--anjana-with", default="anjana==1.2.3")
    args = ap.parse_args(argv)
    qi_names = ["ours", "nine"] if args.qis == "all" else args.qis.split(",")
    bad = [q for q in qi_names if q not in QI_SETS]
    if bad:
        ap.error(f"unknown QI set(s) {bad}; choose from {sorted(QI_SETS)} or all")
    peers = ["anonypy", "anjana"] if args.peer == "all" else [args.peer]
    if args.via_uv:
        return run_via_uv(args, peers, argv if argv is not None else sys.argv[1:])

    t_load = time.perf_counter()
    df = load_adult(args.data_dir)
    load_s = time.perf_counter() - t_load
    gshare = float((df[SENSITIVE] == NEGATIVE).mean())
    plan = []
    for qn in qi_names:
        for peer in peers:
            if peer == "anonypy":
                plan.append(("anonypy", qn, {"mode": "k-anonymity", "k": args.k}))
                plan.append(("anonypy", qn, {"mode": "t-closeness", "k": args.k, "t": args.t}))
            else:
                for k in (int(x) for x in args.anjana_k.split(",") if x.strip()):
                    plan.append(
                        (
                            "anjana",
                            qn,
                            {
                                "mode": "t-closeness",
                                "k": k,
                                "t": args.t,
                                "supp_level": args.anjana_supp,
                            },
                        )
                    )

    result = {
        "meta": {
            "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "nproc": os.cpu_count(),
            "loadavg_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "versions": {
                p: version(p) for p in ("anonypy", "anjana", "pycanon", "pandas", "numpy")
            },
            "argv": sys.argv[1:],
            # must be False: the peers must not see the project's environment
            # (plain `uv run --no-project --with ...` layers it under the overlay; use
            # --isolated as in the README)
            "project_venv_on_path": any(
                p.rstrip("/").endswith(".venv/lib/python3.11/site-packages") or "/.venv/" in p
                for p in sys.path
            ),
        },
        "dataset": {
            "rows": len(df),
            "global_share_le50k": round(gshare, 6),
            "load_s": round(load_s, 3),
            "t": args.t,
            "qi_sets": {q: QI_SETS[q] for q in qi_names},
        },
        "runs": [],
    }

    for peer, qn, params in plan:
        qis = QI_SETS[qn]
        rec = {"peer": peer, "version": version(peer), "qis": qn, **params}
        load, waited = wait_for_quiet(args.max_load, args.max_wait)
        rec["loadavg_1m_before"] = load
        rec["waited_for_load_s"] = waited
        print(f"[run] {peer} {qn} {params}", file=sys.stderr, flush=True)
        try:
            with time_limit(args.timeout):
                if peer == "anonypy":
                    mode = "k" if params["mode"] == "k-anonymity" else "t"
                    anon_s, total_s, stats, extra = run_anonypy(
                        df, qis, mode, params["k"], args.t, gshare
                    )
                else:
                    anon_s, total_s, stats, extra = run_anjana(
                        df, qis, params["k"], args.t, params["supp_level"], gshare
                    )
            rec.update(
                status="ok",
                anonymise_s=round(anon_s, 3),
                total_s=round(total_s, 3),
                **stats,
                **extra,
            )
            rec["rows_suppressed"] = len(df) - stats["rows_published"]
        except BaseException as exc:  # noqa: BLE001 - record, don't crash
            if isinstance(exc, KeyboardInterrupt):
                raise
            rec.update(
                status="error",
                error=f"{type(exc).__name__}: {exc}",
                traceback=traceback.format_exc(limit=3),
            )
        print(
            f"[done] {json.dumps({k: v for k, v in rec.items() if k != 'traceback'})}",
            file=sys.stderr,
            flush=True,
        )
        result["runs"].append(rec)

    result["meta"]["loadavg_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["runs"], indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
