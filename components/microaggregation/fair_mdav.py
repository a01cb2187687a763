"""Fair-MDAV (Gonzalez-Zelaya, Salas, Megias, Missier; ACM TKDD 18(3), 2023).

    G      <- MakeFairlets(D, m, n)           exactly m unfavoured + n favoured rows per group
    G      <- Microaggregate(G)   if ma       QIs replaced by the group mean -> (m+n)-anonymity
    D_corr <- CorrectFairness(G, tau, nc)     relabel until upr >= tau * fpr in every group

with m = floor(k * |U|/|D| + 1/2), n = k - m unless given. Leftover rows are dropped. The
``grouping="mdav"`` variant replaces fairlets by standard MDAV k-groups (spec section 1.8).
The output declares contracts C1-C11, C13, C14 of the spec; C12 (determinism) is a property of
the code, checked by the test-suite.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core import memory
from privfair.components.core.inputs import absent_value, require_count
from privfair.components.core.metrics import (
    t_closeness_binary,
)
from privfair.components.core.result import ComponentResult
from privfair.components.microaggregation import guarantees as G
from privfair.components.microaggregation.blocking import block_sizes, group_rows
from privfair.components.microaggregation.columns import (
    in_input_order,
    levels_as,
    plain,
    publish_order_typed,
    take,
)
from privfair.components.microaggregation.correction import correct_fairness
from privfair.components.microaggregation.encoding import (
    EncodedQIs,
    binary_values,
    encode_qis,
    favoured_of,
    indicator,
    label_01,
    missing_values,
    ordinal_nulls,
    positive_value,
    protected_01,
)
from privfair.components.microaggregation.inputs import AUTO, binary_roles, prepare
from privfair.components.microaggregation.lineage import lineage_table
from privfair.components.microaggregation.microaggregate import publish_qis, qi_contract
from privfair.components.microaggregation.params import FairMDAVParams
from privfair.schemas import contracts as C
from privfair.schemas.errors import InputError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles

__all__ = [
    "Checked",
    "GroupCounts",
    "Tally",
    "checked",
    "release_metrics",
    "effect_of",
    "group_counts_of",
    "fair_mdav",
    "contract",
    "fairlet_sizes",
    "effect",
]


def fairlet_sizes(k: int, n_unfavoured: int, n_rows: int) -> tuple[int, int, bool]:
    """(m, n, clamped): m = floor(k * |U|/|D| + 1/2) in exact arithmetic, clamped to [1, k-1]."""
    m = int(Fraction(k * n_unfavoured, n_rows) + Fraction(1, 2))
    clamped = not 1 <= m <= k - 1
    m = min(max(m, 1), k - 1)
    return m, k - m, clamped


@dataclass(frozen=True)
class Facts:
    """What the contract depends on, computed from the params and the input only."""

    k: int
    m: int | None
    n: int | None
    clamped: bool
    qi_guarantees: tuple
    protected: str
    passthrough: tuple[str, ...]
    t_input: float


def _facts(
    params: FairMDAVParams, table, roles: TableRoles, n_rows: int, n_u: int, enc=None
) -> Facts:
    """k, m, n and the guarantees' parameters, from the table's schema and values (``enc``,
    ``qi_contract``) and its counts: ``n_rows`` rows, ``n_u`` of them unfavoured."""
    prot = roles.with_role(Role.PROTECTED)[0].name
    lab = roles.with_role(Role.LABEL)[0].name
    fairlet = params.grouping == "fairlet"
    if not fairlet:
        k, m, n, clamped = params.k, None, None, False
    elif params.m is not None:
        m, n, clamped = params.m, params.n, False
        k = m + n
    else:
        m, n, clamped = fairlet_sizes(params.k, n_u, n_rows)
        k = m + n
    if params.microaggregate:
        enc = enc if enc is not None else encode_qis(table, roles, params.scaling)
        qi = tuple(qi_contract(params.publish, k, table, enc, params.decimals))
    else:
        qi = (G.QIsUnchanged(id="C4''", quasi_identifiers=tuple(roles.quasi_identifiers)),)
    derived = fairlet and params.m is None and not clamped
    t_in = (0.5 / k if derived else abs(m / k - n_u / n_rows)) if fairlet else 0.0
    passthrough = tuple(
        c.name for c in roles if c.role is not Role.QUASI_IDENTIFIER and c.name != lab
    )
    return Facts(k, m, n, clamped, qi, prot, passthrough, float(t_in))


def _contract(params: FairMDAVParams, f: Facts) -> list:
    fairlet = params.grouping == "fairlet"
    direction = "none" if params.tau == 0 else params.correction
    out: list = [C.Partition(id="C3", allow_drops=fairlet)]
    if fairlet:
        out += [G.FairletComposition(id="C1", m=f.m, n=f.n), G.FairletCount(id="C2", m=f.m, n=f.n)]
    else:
        out.append(G.GroupSizeRange(id="C4'", min_size=f.k, max_size=2 * f.k - 1))
    out += list(f.qi_guarantees)
    if fairlet:
        out += [
            C.TCloseness(id="C5", attribute=f.protected, t=0.0, within="group", reference="output"),
            C.TCloseness(
                id="C5", attribute=f.protected, t=f.t_input, within="group", reference="input"
            ),
        ]
    out += [
        C.AttributesPreserved(id="C6", columns=f.passthrough),
        G.CorrectionDirection(id="C7", direction=direction),
        G.LocalFairness(id="C8", tau=params.tau),
        G.MinimalCorrection(id="C9", tau=params.tau, direction=params.correction),
    ]
    if fairlet:
        out.append(G.DemographicParityBound(id="C10", ratio=params.tau))
    out += [
        G.SeedNearest(
            id="C11",
            grouping=params.grouping,
            scaling=params.scaling,
            sample=params.trace_sample,
            seed=params.seed,
            **_blocked(params.block_rows, params.grouping, f.k, f.m, f.n),
        ),
        G.ParameterValidity(
            id="C14",
            k=f.k,
            m=f.m if fairlet else None,
            n=f.n if fairlet else None,
            tau=params.tau,
            derived_from_k=params.m is None,
        ),
    ]
    return out


def _blocked(block_rows: int | None, grouping: str, k: int, m, n) -> dict:
    if block_rows is None:
        return {}
    bm, bn = block_sizes(grouping, k, m, n)
    return {"block_rows": block_rows, "block_m": bm, "block_n": bn}


def contract(params: FairMDAVParams, table: pa.Table | None = None) -> list:
    """The guarantees Fair-MDAV owes for ``params`` on ``table`` (spec section 3: C1-C11, C13,
    C14), computed from the params and the input alone.

    Parameters
    ----------
    params : FairMDAVParams
    table : pyarrow.Table or None
        The input, roles in its field metadata. None gives the data-free outline: the same ids
        and kinds, with placeholder values (m, n, the column names).

    Returns
    -------
    list of Guarantee

    Notes
    -----
    m = floor(k |U| / |D| + 1/2) clamped to [1, k - 1] (exact rationals), n = k - m; the input
    t bound is 1/(2k) when m was derived from k and |m/k - |U|/|D|| otherwise.
    """
    if table is None:
        k = params.k or (params.m or 1) + (params.n or 1)
        m = params.m or 1 if params.grouping == "fairlet" else None
        n = params.n or 1 if params.grouping == "fairlet" else None
        qi = (
            tuple(qi_contract(params.publish, k, None, None))
            if params.microaggregate
            else (G.QIsUnchanged(id="C4''"),)
        )
        return _contract(params, Facts(k, m, n, False, qi, "*", ("*",), 0.0))
    table, roles, _ = prepare(table)
    prot, lab = binary_roles(table, roles)
    y = label_01(table, lab)
    pa01, _, _ = protected_01(table, prot, y)
    return _contract(params, _facts(params, table, roles, len(pa01), int((pa01 == 0).sum())))


def _py(v):
    return v.item() if hasattr(v, "item") else v


def effect(
    values: np.ndarray | pa.ChunkedArray,
    y: np.ndarray,
    order: np.ndarray,
    y_out: np.ndarray,
    flags: np.ndarray,
    favoured,
    max_drop_share: float,
    column: str,
) -> tuple[dict, list[str]]:
    """What the protection did, per protected value: rows dropped, labels changed (by
    direction), the signed parity gap PR(unfavoured) - PR(favoured) before and after and which
    group the published labels favour; with warnings when the gap reverses or when more than
    ``max_drop_share`` of a group is dropped.

    >>> s, w = effect(np.array(["F", "F", "U", "U"]), np.array([1, 0, 0, 0]), np.array([0, 1, 2]),
    ...               np.array([1, 0, 1]), np.array([False, False, True]), "F", 0.3, "PA")
    >>> s["parity_before"], s["parity_after"], s["dropped_by_group"]
    (-0.5, 0.5, {'F': 0, 'U': 1})
    >>> w[0].startswith("the gap reverses")
    True
    """
    counts = group_counts_of(values, y, order, y_out, flags)
    return effect_of(counts, favoured, max_drop_share, column)


def group_counts_of(
    values: np.ndarray | pa.ChunkedArray,
    y: np.ndarray,
    order: np.ndarray,
    y_out: np.ndarray,
    flags: np.ndarray,
) -> dict:
    """Each protected value's ``GroupCounts``: ``values`` and ``y`` the input's protected
    column and 0/1 labels, ``order`` the published rows' input positions, ``y_out`` and
    ``flags`` their labels and relabel flags."""
    levels, codes = _codes(values)
    kept = codes[order]
    counts = {}
    for i, level in enumerate(levels):
        in_g, mask = codes == i, kept == i
        counts[_py(level)] = GroupCounts(
            rows=int(in_g.sum()),
            positives=int(y[in_g].sum()),
            kept=int(mask.sum()),
            kept_positives=int(y_out[mask].sum()),
            up=int((flags & mask & (y_out == 1)).sum()),
            down=int((flags & mask & (y_out == 0)).sum()),
        )
    return counts


@dataclass(frozen=True)
class GroupCounts:
    """One protected value's rows in and out of a release: ``rows`` and ``positives`` in the
    input, ``kept`` and ``kept_positives`` published, ``up`` / ``down`` relabelled negative to
    positive / positive to negative. What the metrics read of the rows: counts, so a cluster
    sends them back and the driver holds no row."""

    rows: int
    positives: int
    kept: int
    kept_positives: int
    up: int
    down: int

    @property
    def pr_in(self) -> float:
        return self.positives / self.rows

    @property
    def pr_out(self) -> float:
        return self.kept_positives / self.kept if self.kept else float("nan")


def release_metrics(
    facts: Facts,
    favoured,
    counts: dict,
    summary: dict,
    groups: int,
    t_max: float,
    il: dict,
    group_sizes: list[int],
) -> dict:
    """A Fair-MDAV release's metrics from its counts (``GroupCounts`` per protected value,
    ``effect_of``'s ``summary``), its number of groups, the largest |share of unfavoured rows in
    a group - share in the input| (``t_max``), the information loss and the histogram of group
    sizes: the same numbers from a table in this process or from a cluster's aggregates."""
    fav = counts[_py(favoured)]
    unf = next(c for v, c in counts.items() if v != _py(favoured))
    n_rows = fav.rows + unf.rows
    kept = fav.kept + unf.kept

    def ratios(pairs) -> dict[str, float]:
        return {name: pr for name, (present, pr) in pairs if present}

    before = ratios([("unfavoured", (True, unf.pr_in)), ("favoured", (True, fav.pr_in))])
    after = ratios(
        [("unfavoured", (unf.kept > 0, unf.pr_out)), ("favoured", (fav.kept > 0, fav.pr_out))]
    )
    return {
        "input_rows": n_rows,
        "output_rows": kept,
        "dropped_rows": n_rows - kept,
        "groups": groups,
        "k": facts.k,
        "m": facts.m,
        "n": facts.n,
        "favoured_value": _py(favoured),
        "unfavoured_share_input": unf.rows / n_rows,
        "relabelled": sum(c.up + c.down for c in counts.values()),
        "positive_ratio_before": {
            "unfavoured": before.get("unfavoured", float("nan")),
            "favoured": before.get("favoured", float("nan")),
        },
        "positive_ratio_after": {
            "unfavoured": after.get("unfavoured", float("nan")),
            "favoured": after.get("favoured", float("nan")),
        }
        if kept
        else {},
        "dpar_before": float(max(before.values()) - min(before.values())),
        "dpar_after": float(max(after.values()) - min(after.values())) if kept else None,
        "t_pa_exact": t_max,
        "t_pa_bound": 0.5 / facts.k,
        "information_loss": il,
        "group_sizes": group_sizes,
    } | summary


def effect_of(counts: dict, favoured, max_drop_share: float, column: str) -> tuple[dict, list[str]]:
    """``effect`` from each protected value's ``GroupCounts`` (``counts[value]``)."""
    levels = list(counts)
    groups = sorted(range(len(levels)), key=lambda i: (levels[i] != favoured, str(levels[i])))
    fav = next((i for i in groups if levels[i] == favoured), None)
    unf = next((i for i in groups if levels[i] != favoured), fav)
    dropped, changed, pr_in, pr_out, n_in = {}, {}, {}, {}, {}
    for i in groups:
        c = counts[levels[i]]
        g = str(levels[i])
        n_in[i] = c.rows
        dropped[g] = c.rows - c.kept
        changed[g] = {"negative_to_positive": c.up, "positive_to_negative": c.down}
        pr_in[i] = c.pr_in
        pr_out[i] = c.pr_out
    n_out = sum(c.kept for c in counts.values())
    before = pr_in[unf] - pr_in[fav]
    after = pr_out[unf] - pr_out[fav] if n_out else float("nan")
    now = unf if after > 0 else fav if after < 0 else None
    summary = {
        "dropped_by_group": dropped,
        "relabelled_by_group": changed,
        "parity_before": before,
        "parity_after": after,
        "favoured_after": None if now is None else levels[now],
    }
    notes = []
    if before * after < 0 and abs(after) > 1e-12:
        notes.append(
            f"the gap reverses on '{column}' (a reversal of the bias: signed gap "
            f"{before:+.3f} -> {after:+.3f}): before, {_py(favoured)!r} had the higher positive "
            f"rate ({pr_in[fav]:.3f} vs {pr_in[unf]:.3f}); after, {levels[unf]!r} has it "
            f"({pr_out[unf]:.3f} vs {pr_out[fav]:.3f}); a parity_gap demand bounds only the "
            "gap's size unless it says direction: no_reversal"
        )
    for i in groups:
        g = levels[i]
        share = dropped[str(g)] / n_in[i] if n_in[i] else 0.0
        if share > max_drop_share:
            notes.append(
                f"{dropped[str(g)]} of {n_in[i]} rows with {column} = {g!r} dropped "
                f"({share:.1%}, above {max_drop_share:.0%})"
            )
    return summary, notes


def _codes(values: np.ndarray | pa.ChunkedArray) -> tuple[list, np.ndarray]:
    """(the distinct values; per row the index of its value). An Arrow column is coded in
    Arrow: a 10M-row string column as NumPy objects is ~0.6 GB, and ``np.unique`` sorts them
    in Python (7 s)."""
    if isinstance(values, np.ndarray):
        levels, codes = np.unique(values, return_inverse=True)
        return levels.tolist(), codes
    enc = pc.dictionary_encode(values).combine_chunks()
    return enc.dictionary.to_pylist(), enc.indices.to_numpy(zero_copy_only=False)


@dataclass
class Checked:
    """A Fair-MDAV input that passed every rule, with what the rules computed of it: the
    label and protected attribute as 0/1 (1 positive, 1 favoured), the QI encoding and the
    facts (k, m, n...)."""

    table: pa.Table
    roles: TableRoles
    warnings: list[str]
    protected: ColumnRole
    label: ColumnRole
    y: np.ndarray | None
    pa01: np.ndarray | None
    favoured: object
    enc: EncodedQIs
    facts: Facts


@dataclass(frozen=True)
class Tally:
    """A table's rows per (protected value, label value): ``counts[(p, l)]``, what Fair-MDAV's
    input rules read of its rows beyond its schema and distinct values (the favoured group, m
    and n). A Spark frame's comes from one count on the executors (``blockwise.plan_of_frame``).
    """

    counts: dict[tuple, int]
    nulls: dict[str, int]  # each column's missing values

    @property
    def rows(self) -> int:
        return sum(self.counts.values())

    def of(self, protected, label=None) -> int:
        """Rows holding ``protected`` (and ``label``, when given)."""
        return sum(
            c for (p, lv), c in self.counts.items() if p == protected and label in (None, lv)
        )


def checked(table: pa.Table, params: FairMDAVParams, tally: Tally | None = None) -> Checked:
    """``table`` checked against Fair-MDAV's input rules (``InputError`` naming the column and
    the rule), with its encoding and facts: the one place ``fair_mdav``, its contract and its
    blockwise plan (``blockwise.plan_of``) read them.

    With ``tally`` (the rows' counts), ``table`` stands in for a table whose rows are elsewhere
    (a Spark cluster): it holds the same columns, types and distinct values, each numeric
    column's minimum and maximum, and a null where a column has one (``blockwise.stand_in``);
    every count comes from ``tally``. ``y`` and ``pa01`` are then None."""
    table, roles, warnings = prepare(table)
    n_rows = tally.rows if tally is not None else table.num_rows
    # the plainer rule first: fewer rows than k can form no group, whatever the roles say
    require_count(n_rows, params.k if params.k is not None else params.m + params.n)
    if tally is not None:  # the stand-in's one null is not the count: the tally's is
        for c, what in (
            (roles.with_role(Role.PROTECTED), "protected attribute"),
            (roles.with_role(Role.LABEL), "label"),
        ):
            if len(c) == 1 and tally.nulls.get(c[0].name):
                raise missing_values(c[0].name, what, tally.nulls[c[0].name], n_rows)
    prot, lab = binary_roles(table, roles)
    label_values, label_distinct = binary_values(table, lab.name, "label")
    positive = positive_value(lab.positive[0] if lab.positive else None, label_distinct)
    if positive not in label_distinct:
        raise absent_value(lab.name, "positive", positive, label_distinct)
    pa_values, pa_distinct = binary_values(table, prot.name, "protected attribute")
    declared = prot.favoured[0] if prot.favoured else None
    y = pa01 = None
    if tally is None:
        y = indicator(label_values, positive, label_distinct)
        rows = [indicator(pa_values, v, pa_distinct).astype(bool) for v in pa_distinct]
        held = [int(r.sum()) for r in rows]
        pr = [int(y[r].sum()) / h for r, h in zip(rows, held, strict=True)]
    else:
        held = [tally.of(v) for v in pa_distinct]
        pr = [tally.of(v, positive) / h for v, h in zip(pa_distinct, held, strict=True)]
    favoured = favoured_of(pa_distinct, pr, declared)
    if declared is not None and declared != AUTO and declared != favoured:
        rates = ", ".join(f"{_py(v)!r}: {r:.3f}" for v, r in zip(pa_distinct, pr, strict=True))
        raise InputError(
            prot.name,
            f"the declared favoured value {declared!r} is not the group the data favour",
            f"positive rates {rates}; declare favoured: {favoured!r}, or favoured: auto to "
            "follow the data",
        )
    if tally is None:
        pa01 = indicator(pa_values, favoured, pa_distinct)
    n_f = held[pa_distinct.index(favoured)]
    n_u = n_rows - n_f
    if tally is not None:
        for q in roles.with_role(Role.QUASI_IDENTIFIER):
            if q.kind is Kind.ORDINAL and tally.nulls.get(q.name):
                raise ordinal_nulls(q.name, tally.nulls[q.name])
    enc = encode_qis(table, roles, params.scaling)
    facts = _facts(params, table, roles, n_rows, n_u, enc)
    if facts.clamped:
        warnings.append(f"m clamped to {facts.m} so that every fairlet holds both protected groups")
    require_count(n_rows, facts.k)  # the plainer rule first: fewer rows than k form no fairlet
    if params.grouping == "fairlet" and (n_u < facts.m or n_f < facts.n):
        raise InputError(
            prot.name,
            f"too few rows to form one ({facts.m},{facts.n})-fairlet",
            f"{n_u} unfavoured, {n_f} favoured rows",
        )
    return Checked(table, roles, warnings, prot, lab, y, pa01, favoured, enc, facts)


def fair_mdav(table: pa.Table, params: FairMDAVParams) -> ComponentResult:
    """Run Fair-MDAV on ``table`` (roles in its field metadata).

    Parameters
    ----------
    table : pyarrow.Table
        Quasi-identifiers, one binary protected attribute and one binary label (roles in the
        field metadata); every other column passes through unchanged (no ``private`` column).
    params : FairMDAVParams

    Returns
    -------
    ComponentResult
        ``outputs["data"]``: the fairlets (QIs as group means with ``microaggregate``, one-hot
        shares for nominal QIs), labels corrected, rows in canonical order
        (``privfair.components.core.order.published_order``: sorted by their published values, so the
        order reveals neither the input's nor the grouping's); ``sidecars["lineage"]``: input
        row, group, rank and seed flag of each published row.

    Raises
    ------
    InputError
        A column breaks a rule (non-binary protected attribute or label, fewer rows than k,
        too few rows of one protected group for one fairlet...), named with the rule.

    Notes
    -----
    In a fairlet with m_g unfavoured (a positive) and n_g favoured (b positive) rows, positive
    correction relabels r* = min(m_g - a, max(0, ceil(tau b m_g / n_g) - a)) unfavoured
    negatives, the fewest that give upr = a'/m_g >= tau fpr = tau b/n_g.

    Examples
    --------
    Toy A of the specification (section 1.9): five rows give two (1, 1)-fairlets; the leftover
    favoured row is dropped and the unfavoured negative of the first fairlet is relabelled (the
    rows come sorted by their published values):

    >>> import pyarrow as pa
    >>> from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles
    >>> roles = TableRoles.of([
    ...     ColumnRole("X", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
    ...     ColumnRole("PA", Role.PROTECTED, Kind.BINARY, favoured="F"),
    ...     ColumnRole("y", Role.LABEL, Kind.BINARY, positive=1)])
    >>> t = attach_roles(pa.table({"X": [0.95, 0.05, 0.06, 1.03, 0.03],
    ...     "PA": ["F", "F", "F", "U", "U"], "y": [1, 0, 1, 0, 0]}), roles)
    >>> r = fair_mdav(t, FairMDAVParams(m=1, n=1, tau=1.0))
    >>> r.outputs["data"].column("X").to_pylist()
    [0.04, 0.04, 0.99, 0.99]
    >>> r.outputs["data"].column("y").to_pylist()
    [0, 0, 1, 1]
    """
    t0 = time.perf_counter()
    c = checked(table, params)
    table, roles, warnings, prot, lab = c.table, c.roles, c.warnings, c.protected, c.label
    y, pa01, favoured, enc, facts = c.y, c.pa01, c.favoured, c.enc, c.facts
    del c
    k, m, n = facts.k, facts.m, facts.n
    n_rows, n_u = len(y), int((pa01 == 0).sum())
    t1 = time.perf_counter()
    grouping = group_rows(enc, pa01, params.grouping, k, m, n, params.block_rows)
    t2 = time.perf_counter()
    order = grouping.row_order()
    gid = grouping.group_ids()
    tau = params.tau_fraction
    y_out, flags = correct_fairness(
        gid,
        pa01[order],
        y[order],
        grouping.n_groups,
        tau,
        params.correction,
        params.relabel_order,
        params.seed,
    )
    t3 = time.perf_counter()

    # --- assemble the published table -----------------------------------------------------
    cols: dict[str, pa.Array] = {}
    out_roles = []
    if params.microaggregate:
        qi_cols, qi_roles, il = publish_qis(params.publish, table, enc, grouping, params.decimals)
        cols.update(qi_cols)
        out_roles += qi_roles
    else:
        il = {
            "il": 0.0,
            "il_attr": 0.0,
            "sse": 0.0,
            "per_attribute": dict.fromkeys(roles.quasi_identifiers, 0.0),
        }
        rows = pa.array(order)
        for q in roles.quasi_identifiers:
            cols[q] = take(table.column(q), rows)
            out_roles.append(roles[q])
    del enc  # ~0.8 GB at 10M rows, no longer read: it goes before the release is ordered
    lab_values = table.column(lab.name)  # two of its values are read, not a copy of all
    positive_value = lab_values[int(np.argmax(y == 1))].as_py()
    negative_value = lab_values[int(np.argmax(y == 0))].as_py()
    for c in roles:
        if c.role is Role.QUASI_IDENTIFIER:
            continue
        if c.name == lab.name:
            # the corrected label in the input's type (a dictionary keeps its categories)
            col = levels_as(
                (_py(negative_value), _py(positive_value)),
                y_out,
                table.schema.field(c.name).type,
                table.column(c.name),
            )
        else:
            col = take(table.column(c.name), pa.array(order))
        cols[c.name] = col
        out_roles.append(c)
    cols, out_roles = in_input_order(cols, out_roles, table.column_names)
    out = attach_roles(pa.table(cols), TableRoles.of(out_roles))
    # the table alone holds the columns now, so that a large one can wait mapped on disk
    # while its ordered copy is made
    cols = qi_cols = col = None
    out = memory.mapped(out)
    lineage = lineage_table(
        order, gid, grouping.ranks(), np.asarray(grouping.seeds, dtype=np.int64)
    )
    # published in an order of the published values alone, never in grouping order (which
    # anyone who knows the QIs can replay); the lineage keeps the map
    out, lineage = publish_order_typed(out, lineage)
    t4 = time.perf_counter()

    p_dump = params.model_dump(mode="json")

    # --- metrics ----------------------------------------------------------------------------
    pa_out = pa01[order]
    t_groups = t_closeness_binary(gid, pa_out, n_u / n_rows) if len(gid) else np.zeros(0)
    counts = group_counts_of(plain(table.column(prot.name)), y, order, y_out, flags)
    summary, notes = effect_of(counts, favoured, params.max_drop_share, prot.name)
    metrics = release_metrics(
        facts,
        favoured,
        counts,
        summary,
        grouping.n_groups,
        float(t_groups.max()) if len(t_groups) else 0.0,
        il,
        np.bincount(np.bincount(gid)).tolist() if len(gid) else [],
    )
    warnings += notes
    timings = {"encode_s": t1 - t0, "group_s": t2 - t1, "correct_s": t3 - t2, "assemble_s": t4 - t3}
    return ComponentResult(
        "fair_mdav",
        {"data": out},
        {"lineage": lineage},
        _contract(params, facts),
        p_dump,
        metrics,
        timings,
        warnings,
    ).stamped()
