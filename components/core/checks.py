"""Pure checkers: each recomputes one guarantee from an evidence frame and names the offenders.

A checker is ``fn(guarantee, frame) -> CheckResult``. The frame is built by the algorithm's
evidence builder from the published outputs, the sidecars and the input (never from numbers the
algorithm reported about itself). The CLI and the Great Expectations expectations both call
these functions (``check_guarantee``).

This module holds the result type and the checkers of the kinds every family shares (their
table, ``SHARED_KINDS``, is ``privfair.components.core.kinds``, re-exported here); a family's own
kinds carry their checkers in its package.

Evidence columns the shared checkers read (see ``privfair.components.core.evidence``): ``__row_id``,
``__retained``, ``__out_count``, one ``__<field>`` per lineage field (``__group``...), and
``__in_col__<c>`` / ``__out_col__<c>`` for the audited columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from privfair.components.core.classes import (  # the classes' helpers, re-exported
    class_ids,
    class_sizes,
    hashable,
    published_frame,
)
from privfair.components.core.descriptor import resolve
from privfair.components.core.kinds import SHARED_KINDS
from privfair.components.core.registry import kind_check
from privfair.components.core.risk import class_diversity, reidentification_risk
from privfair.schemas import contracts as C
from privfair.schemas.errors import CheckerError, PrivfairError
from privfair.schemas.roles import GROUP_PROTECTED, GROUP_UNPROTECTED

__all__ = [
    "CheckResult",
    "CheckerError",
    "describe_error",
    "published_frame",
    "hashable",
    "make_result",
    "check_guarantee",
    "check_contract",
    "compose_parts",
    "compose_summaries",
    "compose",
    "summarise_guarantee",
    "summary_to_data",
    "summary_from_data",
    "SHARED_KINDS",
    "check_k_anonymity",
    "class_ids",
    "class_sizes",
    "check_t_closeness",
    "check_attributes_preserved",
    "check_partition",
    "check_columns_absent",
    "check_reidentification_risk",
    "check_l_diversity",
]

MAX_OFFENDERS = 20


@dataclass
class CheckResult:
    id: str
    kind: str
    passed: bool
    observed: Any = None
    expected: Any = None
    message: str = ""
    offending: list[dict] = field(default_factory=list)
    n_offending: int = 0
    key: str = ""  # the guarantee's check name in a release (set by the validator)

    def to_dict(self) -> dict:
        return {
            "key": self.key,
            "id": self.id,
            "kind": self.kind,
            "passed": self.passed,
            "observed": self.observed,
            "expected": self.expected,
            "message": self.message,
            "n_offending": self.n_offending,
            "offending": self.offending,
        }

    @classmethod
    def failed(cls, g: C.Guarantee, message: str) -> CheckResult:
        return cls(g.id, g.kind, False, message=message)  # type: ignore[attr-defined]


def describe_error(e: BaseException) -> str:
    """``Type: message`` of an exception (a ``KeyError``'s message alone is just the key)."""
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def make_result(
    g, passed: bool, observed, expected, message: str, offending: pd.DataFrame | list | None = None
) -> CheckResult:
    """A ``CheckResult`` for guarantee ``g``; at most ``MAX_OFFENDERS`` offenders are kept."""
    if isinstance(offending, pd.DataFrame):
        n = len(offending)
        rows = offending.head(MAX_OFFENDERS).reset_index().to_dict(orient="records")
    else:
        rows = list(offending or [])
        n = len(rows)
        rows = rows[:MAX_OFFENDERS]
    clean = [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in rows]
    return CheckResult(g.id, g.kind, bool(passed), observed, expected, message, clean, n)


#: the column of a summary (``KindCheck.summarise``) whose evidence lacks what the rule reads
UNFIT = "__unfit"


def unfit(message: str) -> pd.DataFrame:
    """The summary of evidence that lacks what a rule reads: its reason, kept by every part."""
    return pd.DataFrame({UNFIT: [message]})


def unfit_result(g, summary: pd.DataFrame, expected) -> CheckResult | None:
    """The failed result of a summary of unfit evidence (``unfit``), None for any other."""
    if UNFIT not in summary.columns:
        return None
    return make_result(g, False, None, expected, str(summary[UNFIT].iloc[0]))


def retained(audit: pd.DataFrame, columns=None) -> pd.DataFrame:
    """The audit rows whose input row was published; with ``columns``, only those columns
    (those of them the frame has): a checker names what it reads, so a wide audit frame (one-hot
    QIs in and out) is not copied whole for each guarantee."""
    mask = audit["__retained"].to_numpy()
    if columns is not None:
        columns = [c for c in dict.fromkeys(columns) if c in audit.columns]
    if mask.all():  # no copy of a frame every row of which was published (checkers only read)
        return audit if columns is None else audit[columns]
    if columns is None:
        return audit[mask]
    return audit.loc[mask, columns]


def retained_column(audit: pd.DataFrame, name: str, dtype=None) -> np.ndarray:
    """Column ``name`` of ``retained(audit)`` as a NumPy array (``dtype``: as
    ``Series.to_numpy``), without a copy of the frame: a checker reading a wide audit frame's
    columns one at a time (Fair-MDAV's one-hot QIs in and out: 205 of them on Adult, whose
    ``retained`` copy alone took 0.27 s) copies only those.

    >>> audit = pd.DataFrame({"__retained": [True, False, True], "x": [1, 2, 3]})
    >>> retained_column(audit, "x", np.float64)
    array([1., 3.])
    """
    values = audit[name].to_numpy()[audit["__retained"].to_numpy()]  # rows first: a dropped
    return values if dtype is None else values.astype(dtype, copy=False)  # row may hold NA


# --- published frame -----------------------------------------------------------------------------
def check_k_anonymity(g: C.KAnonymity, published: pd.DataFrame) -> CheckResult:
    """Every equivalence class over the QI columns has >= k rows."""
    missing = [q for q in g.quasi_identifiers if q not in published.columns]
    if missing:
        return make_result(
            g, False, None, g.k, f"quasi-identifier columns missing from the table: {missing[:5]}"
        )
    if not g.quasi_identifiers:
        return make_result(g, False, None, g.k, "no quasi-identifier columns named")
    if len(published) == 0:
        return make_result(g, False, 0, g.k, "no rows published")
    sizes = class_sizes(published, list(g.quasi_identifiers))
    small = sizes[sizes < g.k]
    bad = pd.DataFrame({"class_size": small})
    return make_result(
        g,
        len(small) == 0,
        int(sizes.min()),
        g.k,
        f"{len(small)} of {len(sizes)} equivalence classes have fewer than {g.k} rows"
        if len(small)
        else f"smallest of {len(sizes)} equivalence classes has {int(sizes.min())} rows",
        bad,
    )


def check_columns_absent(g: C.ColumnsAbsent, published: pd.DataFrame) -> CheckResult:
    """No listed column is a column of the published table."""
    found = [c for c in g.columns if c in published.columns]
    return make_result(
        g,
        not found,
        found or [],
        [],
        f"private columns published: {found}"
        if found
        else f"none of the {len(g.columns)} private columns is published",
        [{"column": c} for c in found],
    )


def _names(columns, shown: int = 6) -> str:
    """``columns`` for a message: the first ``shown`` of them and how many more."""
    columns = list(columns)
    more = f" and {len(columns) - shown} more" if len(columns) > shown else ""
    return ", ".join(columns[:shown]) + more


def _background_missing(g, published: pd.DataFrame, expected) -> CheckResult | None:
    """The failed result of a guarantee over an attacker background (and ``column``) the
    published table lacks, or of an empty one; None when every column is there."""
    named = [*g.background, *([g.column] if getattr(g, "column", "") else [])]
    missing = [c for c in named if c not in published.columns]
    if missing:
        return make_result(g, False, None, expected, f"not published: {', '.join(missing[:5])}")
    if not g.background:
        return make_result(g, False, None, expected, "no attacker background named")
    if len(published) == 0:
        return make_result(g, False, None, expected, "no rows published")
    return None


def check_reidentification_risk(g: C.ReidentificationRisk, published: pd.DataFrame) -> CheckResult:
    """The re-identification risk over ``g.background`` is at most ``g.max``: prosecutor,
    1 / (smallest class); marketer, classes / rows (``privfair.components.core.risk``)."""
    if (bad := _background_missing(g, published, g.max)) is not None:
        return bad
    risk = reidentification_risk(published, list(g.background))
    sizes = np.bincount(class_ids(published, list(g.background)))
    seen = f"over the background ({_names(g.background)})"
    observed = {k: risk[k] for k in ("prosecutor", "marketer", "uniques", "classes", "rows")}
    if g.model == "prosecutor":
        value = risk["prosecutor"]["highest"]
        small = sizes[1.0 / sizes > g.max + 1e-12]
        offending = pd.DataFrame({"class_size": np.sort(small)})
        message = (
            f"highest prosecutor risk {seen} = 1/{int(sizes.min())} ({value:.4g}) "
            f"{'<=' if value <= g.max + 1e-12 else '>'} {g.max}: {len(small)} of {len(sizes)} "
            f"classes smaller than 1/max, holding {int(small.sum())} of {len(published)} rows"
        )
    else:
        value = risk["marketer"]
        offending = []
        message = (
            f"marketer risk {seen} = {len(sizes)} classes / {len(published)} rows "
            f"({value:.4g}) {'<=' if value <= g.max + 1e-12 else '>'} {g.max}"
        )
    ok = value <= g.max + 1e-12
    return make_result(g, ok, observed, g.max, message, [] if ok else offending)


def check_l_diversity(g: C.LDiversity, published: pd.DataFrame) -> CheckResult:
    """Every class over ``g.background`` holds at least ``g.l`` distinct values of
    ``g.column`` (``measure: distinct``), or exp(entropy) >= l (``entropy``)."""
    if (bad := _background_missing(g, published, g.l)) is not None:
        return bad
    cols = [c for c in g.background if c != g.column]
    sizes, distinct, entropy = class_diversity(published, cols, g.column)
    measured = distinct if g.measure == "distinct" else entropy
    low = measured < g.l - 1e-9
    value = float(measured.min()) if g.measure == "entropy" else int(measured.min())
    offending = pd.DataFrame(
        {"class_size": sizes[low], "distinct": distinct[low], "entropy_l": entropy[low]}
    )
    return make_result(
        g,
        not low.any(),
        {"distinct": int(distinct.min()), "entropy": float(entropy.min())},
        g.l,
        f"{g.measure} l-diversity of '{g.column}' over the background ({_names(cols)}) = "
        f"{value:.4g}: {int(low.sum())} of {len(sizes)} classes below l = {g.l}",
        offending,
    )


# --- audit frame -----------------------------------------------------------------------------------
def summarise_partition(g: C.Partition, audit: pd.DataFrame) -> pd.DataFrame:
    """The input rows not published exactly once (``__row_id``, ``__out_count``)."""
    off = audit["__out_count"].to_numpy() != 1
    return audit.loc[off, ["__row_id", "__out_count"]].reset_index(drop=True)


def decide_partition(g: C.Partition, summary: pd.DataFrame) -> CheckResult:
    s = summary.set_axis(summary["__row_id"].to_numpy(np.int64)).sort_index(kind="stable")
    counts = s["__out_count"].to_numpy(np.int64)
    dup = s[counts > 1]
    dropped = int((counts == 0).sum())
    ok = dup.empty and (g.allow_drops or dropped == 0)
    msg = f"{len(dup)} input rows published more than once; {dropped} input rows dropped"
    if not g.allow_drops:
        msg += " (no drop allowed)"
    offenders = dup[["__row_id", "__out_count"]]
    if not g.allow_drops and dropped:
        offenders = pd.concat([offenders, s.loc[counts == 0, ["__row_id", "__out_count"]]])
    return make_result(
        g,
        ok,
        {"duplicated": len(dup), "dropped": dropped},
        {"duplicated": 0, "drops_allowed": g.allow_drops},
        msg,
        offenders,
    )


def check_partition(g: C.Partition, audit: pd.DataFrame) -> CheckResult:
    """Each published row maps to one input row, no input row is published twice, and (unless
    drops are allowed) every input row is published."""
    return decide_partition(g, summarise_partition(g, audit))


def _objects(values: pd.Series) -> pd.Series:
    """``values`` as Python objects, every missing value as None."""
    return values.astype(object).where(values.notna(), None)


def _value_order(values) -> pd.Index:
    """The distinct ``values`` in one order whatever order they come in: a distance summed over
    them is the same to the last bit on the whole table and on its parts."""
    distinct = list(dict.fromkeys(values))
    return pd.Index(sorted(distinct, key=lambda v: (v is None, type(v).__name__, repr(v))))


def summarise_t_closeness(g: C.TCloseness, audit: pd.DataFrame) -> pd.DataFrame:
    """Per class (``__class``) and published value (``__value``), its published rows (``__n``);
    with an ``input`` reference, rows with ``__ref`` true count the value over every input row."""
    cls_col, out_col, in_col = (
        f"__{g.within}",
        f"__out_col__{g.attribute}",
        f"__in_col__{g.attribute}",
    )
    if cls_col not in audit.columns:
        return unfit(f"no class structure '{g.within}' in this release's evidence")
    if out_col not in audit.columns:
        return unfit(f"attribute '{g.attribute}' is not a published, audited column")
    if g.reference == "input" and in_col not in audit.columns:
        return unfit(f"attribute '{g.attribute}' is not in the input")
    r = retained(audit, [cls_col, out_col])
    codes, uniques = pd.factorize(_objects(r[out_col]), use_na_sentinel=False)
    classes, cls_codes = np.unique(r[cls_col].to_numpy(), return_inverse=True)
    nv = max(len(uniques), 1)
    counts = np.bincount(cls_codes.ravel() * nv + codes, minlength=len(classes) * nv)
    keys = np.flatnonzero(counts)
    n = counts[keys]
    frames = [
        pd.DataFrame(
            {
                "__ref": np.zeros(len(keys), dtype=bool),
                "__class": classes[keys // nv],
                "__value": np.asarray(uniques, dtype=object)[keys % nv],
                "__n": n,
            }
        )
    ]
    if g.reference == "input":
        ref_codes, ref_uniques = pd.factorize(_objects(audit[in_col]), use_na_sentinel=False)
        frames.append(
            pd.DataFrame(
                {
                    "__ref": np.ones(len(ref_uniques), dtype=bool),
                    "__class": None,
                    "__value": np.asarray(ref_uniques, dtype=object),
                    "__n": np.bincount(ref_codes, minlength=len(ref_uniques)),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def decide_t_closeness(g: C.TCloseness, summary: pd.DataFrame) -> CheckResult:
    if (unfitted := unfit_result(g, summary, g.t)) is not None:
        return unfitted
    is_ref = summary["__ref"].to_numpy(bool)
    rows = summary[~is_ref]
    refs = summary[is_ref] if g.reference == "input" else rows  # output: the published values
    n = rows["__n"].to_numpy(np.int64)
    if n.sum() == 0:
        return make_result(g, False, None, g.t, "no rows published")
    uniques = _value_order([*refs["__value"], *rows["__value"]])
    nv = len(uniques)
    ref_n = refs["__n"].to_numpy(np.int64)
    ref = np.bincount(uniques.get_indexer(refs["__value"]), weights=ref_n, minlength=nv)
    ref = ref / ref_n.sum()
    classes, cls_codes = np.unique(rows["__class"].to_numpy(), return_inverse=True)
    counts = np.bincount(
        cls_codes.ravel() * nv + uniques.get_indexer(rows["__value"]),
        weights=n,
        minlength=len(classes) * nv,
    ).reshape(len(classes), nv)
    shares = counts / counts.sum(axis=1, keepdims=True)
    dist = pd.Series(0.5 * np.abs(shares - ref).sum(axis=1), index=classes, name="t")
    bad = dist[dist > g.t + 1e-12]
    observed = float(dist.max())
    return make_result(
        g,
        bad.empty,
        observed,
        g.t,
        f"max distance of '{g.attribute}' over {len(dist)} classes ({g.within}) = {observed:.6g} "
        f"against its {g.reference} distribution; {len(bad)} classes above t = {g.t}",
        pd.DataFrame({"t": bad}),
    )


def check_t_closeness(g: C.TCloseness, audit: pd.DataFrame) -> CheckResult:
    """max over classes of TVD(P_class(attribute), P_reference(attribute)) <= t.

    Classes are the values of the evidence column ``__<within>`` over the published rows; the
    reference is the attribute's distribution over the published rows (``output``) or over every
    input row (``input``). Nulls count as a value of their own."""
    return decide_t_closeness(g, summarise_t_closeness(g, audit))


def check_attributes_preserved(g: C.AttributesPreserved, audit: pd.DataFrame) -> CheckResult:
    """Every listed column is published and equals the input value of the same row (nulls equal
    nulls)."""
    r = retained(audit, [f"__{s}_col__{c}" for c in g.columns for s in ("in", "out")])
    off = []
    for c in g.columns:
        a, b = f"__in_col__{c}", f"__out_col__{c}"
        if a not in r.columns or b not in r.columns:
            off.append({"column": c, "changed_rows": None, "reason": "not published"})
            continue
        x, y = r[a], r[b]
        same = (x.isna() & y.isna()).to_numpy() | (
            x.astype(object).to_numpy() == y.astype(object).to_numpy()
        )
        changed = int((~same).sum())
        if changed:
            off.append({"column": c, "changed_rows": changed, "reason": "values changed"})
    return make_result(
        g,
        not off,
        off or 0,
        0,
        f"{len(off)} of {len(g.columns)} preserved columns changed or missing: "
        + ", ".join(f"{o['column']} ({o['reason']})" for o in off)
        if off
        else f"{len(g.columns)} columns unchanged",
        off,
    )


def _groups(g: C.ParityGap, values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(protected-group mask, favoured-group mask) of a protected column's values; a column
    published as its groups (``GROUP_PROTECTED`` / ``GROUP_UNPROTECTED``) by those names."""
    v = values.astype(object)
    named = {GROUP_PROTECTED, GROUP_UNPROTECTED}
    present = set(v.dropna().unique())
    if present and present <= named and not present & set(g.favoured):
        prot = (v == GROUP_PROTECTED).to_numpy()
        return prot, (v == GROUP_UNPROTECTED).to_numpy()
    if g.unfavoured:
        prot = v.isin(list(g.unfavoured)).to_numpy()
    else:
        prot = ~v.isin(list(g.favoured)).to_numpy()
    fav = v.isin(list(g.favoured)).to_numpy() if g.favoured else ~prot
    return prot, fav


def check_parity_gap(g: C.ParityGap, published: pd.DataFrame) -> CheckResult:
    """|P(label in positive | protected group) - P(label in positive | favoured group)| <= max,
    over the published rows; a group without published rows fails (its rate is undefined).
    Under ``direction: no_reversal`` the signed published gap (protected minus favoured) must
    also not have the opposite sign of the input's (``input_sign``, recomputed from the input
    when the contract is rebuilt: ``ParityGap.completed``); a published gap within 1e-12 of 0
    reverses nothing."""
    missing = [c for c in (g.protected, g.label) if c not in published.columns]
    if missing:
        return make_result(g, False, None, g.max, f"not published: {', '.join(missing)}")
    prot, fav = _groups(g, published[g.protected])
    pos = published[g.label].astype(object).isin(list(g.positive)).to_numpy()
    sizes = {"protected": int(prot.sum()), "favoured": int(fav.sum())}
    empty = [k for k, n in sizes.items() if n == 0]
    if empty:
        return make_result(
            g, False, None, g.max, f"no published row in the {' and '.join(empty)} group"
        )
    rates = {"protected": float(pos[prot].mean()), "favoured": float(pos[fav].mean())}
    signed = rates["protected"] - rates["favoured"]
    gap = abs(signed)
    small = gap <= g.max + 1e-12
    reversed_ = (
        g.direction == "no_reversal"
        and g.input_sign is not None
        and g.input_sign != 0
        and gap > 1e-12
        and (signed > 0) != (g.input_sign > 0)
    )
    if g.direction == "no_reversal" and g.input_sign is None:
        return make_result(
            g, False, None, g.max, "direction: no_reversal, but the input's sign was not computed"
        )
    ok = small and not reversed_
    message = (
        f"positive rate of '{g.label}': {rates['protected']:.4f} (protected) vs "
        f"{rates['favoured']:.4f} (favoured) on '{g.protected}': gap {gap:.4f} "
        f"{'<=' if small else '>'} {g.max}"
    )
    if g.direction == "no_reversal":
        before = {1: "above", -1: "below", 0: "level with"}[g.input_sign or 0]
        message += (
            f"; reversed: the input's protected group was {before} the favoured group, the "
            f"published one is {'above' if signed > 0 else 'below'} it (signed gap "
            f"{signed:+.4f})"
            if reversed_
            else f"; no reversal (the input's protected group was {before} the favoured one)"
        )
    return make_result(
        g,
        ok,
        {
            "gap": gap,
            **({"signed_gap": signed, "reversed": reversed_} if g.direction != "any" else {}),
            **{f"rate_{k}": v for k, v in rates.items()},
        },
        g.max,
        message,
        []
        if ok
        else [{"group": k, "rows": sizes[k], "positive_rate": v} for k, v in rates.items()],
    )


def summarise_retention(g: C.Retention, audit: pd.DataFrame) -> pd.DataFrame:
    """Per value of the protected column (``value``), its input rows kept (``kept``) and all of
    them (``rows``)."""
    col = f"__in_col__{g.protected}"
    if col not in audit.columns:
        return unfit(f"'{g.protected}' is not an audited input column")
    codes, uniques = pd.factorize(_objects(audit[col]), use_na_sentinel=False)
    kept = audit["__retained"].to_numpy()
    return pd.DataFrame(
        {
            "value": np.asarray(uniques, dtype=object),
            "kept": np.bincount(codes[kept], minlength=len(uniques)),
            "rows": np.bincount(codes, minlength=len(uniques)),
        }
    )


def decide_retention(g: C.Retention, summary: pd.DataFrame) -> CheckResult:
    if (unfitted := unfit_result(g, summary, g.min_share)) is not None:
        return unfitted
    counts = pd.DataFrame(
        {
            "value": summary["value"].astype(object),
            "sum": summary["kept"].to_numpy(np.int64),
            "size": summary["rows"].to_numpy(np.int64),
        }
    )
    shares = counts.groupby("value", dropna=False)[["sum", "size"]].sum()
    shares["mean"] = shares["sum"] / shares["size"]
    bad = shares[shares["mean"] < g.min_share - 1e-12]
    worst = float(shares["mean"].min())
    return make_result(
        g,
        bad.empty,
        worst,
        g.min_share,
        f"smallest share of a '{g.protected}' group kept: {worst:.4f} over {len(shares)} "
        f"groups; {len(bad)} below {g.min_share}",
        [
            {"value": k, "kept": int(r["sum"]), "rows": int(r["size"]), "share": float(r["mean"])}
            for k, r in bad.iterrows()
        ],
    )


def check_retention(g: C.Retention, audit: pd.DataFrame) -> CheckResult:
    """Every value of the protected column keeps at least ``min_share`` of its input rows
    (``__retained`` of the audit frame, i.e. the lineage)."""
    return decide_retention(g, summarise_retention(g, audit))


def compose_parts(g: C.Guarantee, parts: list[dict]) -> CheckResult:
    """The verdict of a ``by_group`` guarantee from its results on the parts of a release
    (``privfair.components.core.parts``): it holds iff it holds on every part holding published rows (a
    part without any says nothing of a per-group rule; when no part holds any, every part
    counts, as the whole table's empty evidence would). ``parts``: per part, ``part``,
    ``retained`` and ``result`` (``CheckResult.to_dict()``).

    >>> from privfair.schemas.contracts import KAnonymity
    >>> g = KAnonymity(id="C4", k=2)
    >>> ok = {"passed": True, "observed": 1, "message": "fine", "n_offending": 0, "offending": []}
    >>> bad = ok | {"passed": False, "message": "2 groups", "n_offending": 2, "offending": [{"group": 7}]}
    >>> r = compose_parts(g, [{"part": 0, "retained": 5, "result": ok},
    ...                       {"part": 1, "retained": 0, "result": bad},
    ...                       {"part": 2, "retained": 4, "result": bad}])
    >>> r.passed, r.n_offending, r.offending, r.observed["parts_failing"]
    (False, 2, [{'group': 7, 'part': 2}], [2])
    """
    counted = [p for p in parts if p["retained"] > 0] or list(parts)
    failing = [p for p in counted if not p["result"]["passed"]]
    offending: list[dict] = []
    for p in failing:
        offending += [o | {"part": p["part"]} for o in p["result"]["offending"]]
    shown = (failing or counted)[:1]
    first = shown[0]["result"] if shown else {}
    return CheckResult(
        g.id,  # type: ignore[attr-defined]
        g.kind,  # type: ignore[attr-defined]
        bool(counted) and not failing,
        {
            "parts": len(counted),
            "parts_failing": [p["part"] for p in failing][:MAX_OFFENDERS],
            "part": shown[0]["part"] if shown else None,
            "observed": first.get("observed"),
        },
        first.get("expected"),
        f"checked in {len(counted)} parts of whole groups, {len(failing)} failing"
        + (f"; part {shown[0]['part']}: {first.get('message', '')}" if shown else ""),
        offending[:MAX_OFFENDERS],
        sum(int(p["result"]["n_offending"]) for p in failing),
    )


def summary_to_data(summary: pd.DataFrame) -> dict:
    """A part's summary of a whole-table rule (``KindCheck.summarise``) as JSON-able data, as
    ``privfair.components.core.parts.check_part`` sends it (re-exported there)."""
    return {"summary": {c: summary[c].tolist() for c in summary.columns}}


def summary_from_data(data: dict) -> pd.DataFrame:
    """The summary ``summary_to_data`` sent, every column as Python objects (a column of
    integers with a None among them stays integers and None, as on the whole table)."""
    return pd.DataFrame({c: pd.Series(v, dtype=object) for c, v in data["summary"].items()})


def summarise_guarantee(g: C.Guarantee, frames: dict[str, pd.DataFrame | None]) -> pd.DataFrame:
    """``g``'s summary (``KindCheck.summarise``) of the evidence frame its kind reads."""
    kc = kind_check(g.kind)  # type: ignore[attr-defined]
    if kc is None or kc.summarise is None:
        raise PrivfairError(f"guarantee kind '{g.kind}' has no summary to check it in parts")  # type: ignore[attr-defined]
    frame = frames.get(kc.frame)
    if frame is None:
        return unfit(f"this release has no '{kc.frame}' evidence to check it on")
    return resolve(kc.summarise)(g, frame)


def compose_summaries(g: C.Guarantee, summaries: list[pd.DataFrame]) -> CheckResult:
    """The verdict of a whole-table guarantee from the summaries of a release's parts: its
    ``decide`` over their rows concatenated (one unfit part makes the evidence unfit).

    >>> from privfair.schemas.contracts import Retention
    >>> g = Retention(id="R", protected="sex", min_share=0.9)
    >>> parts = [pd.DataFrame({"value": ["F", "M"], "kept": [9, 5], "rows": [9, 5]}),
    ...          pd.DataFrame({"value": ["F"], "kept": [0], "rows": [2]})]
    >>> r = compose_summaries(g, parts)
    >>> r.passed, r.offending
    (False, [{'value': 'F', 'kept': 9, 'rows': 11, 'share': 0.8181818181818182}])
    """
    if not summaries:
        return CheckResult.failed(g, "no part results for this guarantee")
    bad = [s for s in summaries if UNFIT in s.columns]
    whole = bad[0] if bad else pd.concat(summaries, ignore_index=True)
    return resolve(kind_check(g.kind).decide)(g, whole)  # type: ignore[union-attr, attr-defined]


def compose(g: C.Guarantee, parts: list[dict]) -> CheckResult:
    """The verdict of a guarantee checked in parts (``KindCheck.in_parts``) from its parts'
    results, each ``{"part", "retained", "result"}`` as ``privfair.components.core.parts.check_part``
    sends them: a by-group rule's ``CheckResult`` (``compose_parts``) or a whole-table rule's
    summary (``compose_summaries``)."""
    kc = kind_check(g.kind)  # type: ignore[attr-defined]
    if kc is not None and not kc.by_group and kc.summarise is not None:
        return compose_summaries(g, [summary_from_data(p["result"]) for p in parts])
    return compose_parts(g, parts)


def check_guarantee(g: C.Guarantee, frames: dict[str, pd.DataFrame | None]) -> CheckResult:
    """Run ``g``'s checker on the evidence frame its kind reads. A checker that raises is not a
    verdict: the exception propagates (validation turns it into ``CheckerError``)."""
    kc = kind_check(g.kind)  # type: ignore[attr-defined]
    if kc is None:
        return CheckResult.failed(g, f"no checker for guarantee kind '{g.kind}' in this version")  # type: ignore[attr-defined]
    frame = frames.get(kc.frame)
    if frame is None:
        return CheckResult.failed(g, f"this release has no '{kc.frame}' evidence to check it on")
    return resolve(kc.check)(g, frame)


def check_contract(contract: list, frames: dict[str, pd.DataFrame | None]) -> list[CheckResult]:
    """Every guarantee's checker; results in contract order."""
    return [check_guarantee(g, frames) for g in contract]
