"""Recompute k-anonymity and t-closeness of a published release with pycanon.

Standalone on purpose (no privfair imports): run it in pycanon's own environment, e.g.::

    uv run --isolated --no-project --with pycanon==1.3.6 --with pyarrow==24.0.0 \
        python benchmarks/peers/pycanon_check.py --release /tmp/release.parquet \
        --qis age,workclass,education,marital-status,occupation,relationship,race \
        --sensitive income

Our generalised PND columns are Arrow ``struct<lo, hi>`` (numeric / ordinal ranges) or
``list<string>`` (value sets of nominal attributes). pycanon groups rows with
``DataFrame.groupby`` and needs hashable cells, so every QI cell is first turned into a
canonical string:

* struct with fields ``lo`` and ``hi`` -> ``"[lo, hi]"`` (also when lo == hi);
  any other struct -> ``"(f1=v1, f2=v2, ...)"`` in field order;
* list / large list -> ``"{a|b|c}"`` with the elements rendered and **sorted**, so
  the same value set written in another order is the same class;
* null -> ``"<null>"`` (pandas' groupby would otherwise drop the row silently);
* any other scalar -> ``str(value)``.

``--two-groups race=White`` (repeatable) replaces a column by two groups before the check:
cells equal to one of the listed values (``|``-separated) become ``"{White}"``, all other cells
(null included) ``"not {White}"``. Use it for the PD attribute, which dMondrian / dSabre
publish unchanged but whose guarantee is about protected vs unprotected only: with the raw
5-valued race as a QI, the q-blocks (class x race value) are not the ones Theorem 20 covers.

The sensitive column is cast to ``str`` so that pycanon takes its categorical branch
(t = max over classes of 0.5 * sum |p_class - p_global|, the equal-distance EMD; for a
binary decision this is |share_class - share_global|).

Equivalence classes: ``--classes-by-columns`` (the default) groups rows by their
canonical QI values, as pycanon does. ``--class-column NAME`` instead takes a published
class-id column as the only QI (useful to check that two classes are not merged by equal
labels). The index is reset to 0..n-1 first: pycanon mixes index labels and positions.

Output (stdout, and ``--out`` if given): JSON ``{"k", "t", "rows", "classes", ...}`` plus
a direct NumPy recomputation of t (``t_direct``) and the pycanon timings.

``--self-test`` writes a tiny parquet with struct / list / scalar QI columns to a
temporary directory, checks it and asserts the known answer.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

NULL = "<null>"


def _scalar(v) -> str:
    if v is None:
        return NULL
    if isinstance(v, float) and v.is_integer():
        return str(int(v)) if abs(v) < 2**53 else repr(v)
    return str(v)


def canonical(v) -> str:
    """Canonical, hashable string of one Arrow cell as returned by ``to_pylist``."""
    if v is None:
        return NULL
    if isinstance(v, dict):
        if set(v) == {"lo", "hi"}:
            return f"[{canonical(v['lo'])}, {canonical(v['hi'])}]"
        return "(" + ", ".join(f"{key}={canonical(val)}" for key, val in v.items()) + ")"
    if isinstance(v, (list, tuple, np.ndarray)):
        return "{" + "|".join(sorted(canonical(x) for x in v)) + "}"
    return _scalar(v)


def load_release(
    path: Path, columns: list[str], two_groups: dict[str, list[str]] | None = None
) -> pd.DataFrame:
    """Read the needed columns with pyarrow and canonicalise them into a pandas frame."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=columns)
    data = {}
    for name in columns:
        cells = [canonical(v) for v in table.column(name).to_pylist()]
        if two_groups and name in two_groups:
            members = set(two_groups[name])
            inside = "{" + "|".join(sorted(members)) + "}"
            cells = [inside if c in members else "not " + inside for c in cells]
        data[name] = cells
    return pd.DataFrame(data, dtype=object).reset_index(drop=True)


def parse_two_groups(specs: list[str] | None) -> dict[str, list[str]]:
    """``["race=White", "sex=Male|M"]`` -> ``{"race": ["White"], "sex": ["Male", "M"]}``."""
    out = {}
    for spec in specs or []:
        col, sep, values = spec.partition("=")
        if not sep or not col or not values:
            raise ValueError(f"--two-groups wants COLUMN=VALUE[|VALUE...], got {spec!r}")
        out[col] = values.split("|")
    return out


def direct_t(df: pd.DataFrame, qis: list[str], sensitive: str) -> tuple[float, int, int]:
    """Equal-distance EMD t, k and #classes recomputed with a single groupby."""
    onehot = pd.get_dummies(df[sensitive]).astype(np.int64)
    global_p = onehot.to_numpy().mean(axis=0)
    grouped = onehot.groupby([df[q] for q in qis], sort=False, dropna=False).sum()
    counts = grouped.to_numpy()
    sizes = counts.sum(axis=1)
    dist = 0.5 * np.abs(counts / sizes[:, None] - global_p).sum(axis=1)
    return float(dist.max()), int(sizes.min()), len(sizes)


def check(
    release: Path,
    qis: list[str],
    sensitive: str,
    class_column: str | None = None,
    two_groups: dict[str, list[str]] | None = None,
) -> dict:
    from pycanon import anonymity

    cols = list(dict.fromkeys(qis + [sensitive] + ([class_column] if class_column else [])))
    t0 = time.perf_counter()
    df = load_release(release, cols, two_groups)
    load_s = time.perf_counter() - t0
    df[sensitive] = df[sensitive].astype(str)
    group_cols = [class_column] if class_column else qis

    t1 = time.perf_counter()
    k = int(anonymity.k_anonymity(df, group_cols))
    t2 = time.perf_counter()
    t = float(anonymity.t_closeness(df, group_cols, [sensitive]))
    t3 = time.perf_counter()
    t_dir, k_dir, n_classes = direct_t(df, group_cols, sensitive)
    return {
        "k": k,
        "t": t,
        "rows": len(df),
        "classes": n_classes,
        "classes_by": "column:" + class_column if class_column else "qi-columns",
        "qis": qis,
        "two_groups": two_groups or {},
        "sensitive": sensitive,
        "sensitive_values": sorted(df[sensitive].unique().tolist()),
        "t_direct": t_dir,
        "k_direct": k_dir,
        "agree": bool(k == k_dir and abs(t - t_dir) <= 1e-9),
        "seconds": {
            "load_canonicalise": round(load_s, 3),
            "pycanon_k": round(t2 - t1, 3),
            "pycanon_t": round(t3 - t2, 3),
        },
        "pycanon_version": importlib.metadata.version("pycanon"),
        "release": str(release),
    }


def self_test() -> dict:
    """Tiny release with struct<lo, hi>, list<string> and plain string QIs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng_type = pa.struct([("lo", pa.int64()), ("hi", pa.int64())])
    age = pa.array(
        [
            {"lo": 20, "hi": 29},
            {"lo": 20, "hi": 29},
            {"lo": 20, "hi": 29},
            {"lo": 30, "hi": 39},
            {"lo": 30, "hi": 39},
            {"lo": 30, "hi": 39},
            {"lo": 40, "hi": 40},
            {"lo": 40, "hi": 40},
        ],
        type=rng_type,
    )
    # row 2 lists the same value set in another order: still the same class
    occ = pa.array(
        [["a", "b"], ["b", "a"], ["a", "b"], ["c"], ["c"], ["c"], None, None],
        type=pa.list_(pa.string()),
    )
    race = pa.array(["W", "W", "W", "B", "B", "B", "A", "A"])
    income = pa.array(["<=50K", ">50K", "<=50K", "<=50K", "<=50K", "<=50K", ">50K", ">50K"])
    cls = pa.array([0, 0, 0, 1, 1, 1, 2, 2])
    table = pa.table(
        {"age": age, "occupation": occ, "race": race, "income": income, "class_id": cls}
    )
    # global share of <=50K = 5/8; classes: 2/3, 3/3, 0/2 -> distances 1/24, 3/8, 5/8
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tiny.parquet"
        pq.write_table(table, path)
        by_cols = check(path, ["age", "occupation", "race"], "income")
        by_id = check(path, ["age", "occupation", "race"], "income", class_column="class_id")
        # race W vs the rest: same three classes here, since every class has one race
        grouped = check(path, ["age", "occupation", "race"], "income", two_groups={"race": ["W"]})
        # only race as QI, split W vs not W: {W} 2/3 vs not {W} 3/5 -> t = |3/5 - 5/8|
        race_only = check(path, ["race"], "income", two_groups={"race": ["W"]})
    assert grouped["classes"] == 3 and abs(grouped["t"] - 0.625) < 1e-12, grouped
    assert race_only["classes"] == 2 and race_only["k"] == 3, race_only
    assert abs(race_only["t"] - 1 / 24) < 1e-12 and race_only["agree"], race_only
    for res in (by_cols, by_id):
        assert res["k"] == 2, res
        assert res["rows"] == 8, res
        assert res["classes"] == 3, res
        assert abs(res["t"] - 0.625) < 1e-12, res
        assert res["agree"], res
    assert canonical({"lo": 20, "hi": 29}) == "[20, 29]"
    assert canonical(["b", "a"]) == "{a|b}"
    assert canonical(None) == NULL
    assert canonical(3.0) == "3"
    return {"self_test": "ok", "by_columns": by_cols, "by_class_column": by_id}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", type=Path, help="parquet file of the published table")
    ap.add_argument("--qis", help="comma-separated quasi-identifier columns")
    ap.add_argument("--sensitive", default="income", help="sensitive (decision) column")
    grp = ap.add_mutually_exclusive_group()
    grp.add_argument(
        "--classes-by-columns",
        dest="class_column",
        action="store_const",
        const=None,
        help="equivalence classes = rows with equal canonical QI values (default)",
    )
    grp.add_argument("--class-column", dest="class_column", help="use this class-id column instead")
    ap.add_argument(
        "--two-groups",
        action="append",
        metavar="COL=V1|V2",
        help="replace COL by two groups: its listed values vs the rest (repeatable)",
    )
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    ap.add_argument("--self-test", action="store_true", help="run on a built-in tiny parquet")
    args = ap.parse_args(argv)

    if args.self_test:
        result = self_test()
    else:
        if not args.release or not args.qis:
            ap.error("--release and --qis are required (or --self-test)")
        qis = [q.strip() for q in args.qis.split(",") if q.strip()]
        result = check(
            args.release,
            qis,
            args.sensitive,
            args.class_column,
            parse_two_groups(args.two_groups),
        )
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    if not args.self_test and not result["agree"]:
        print("pycanon and the direct recomputation disagree", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
