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
from fractions import Fraction

import numpy as np
import pyarrow as pa

from components.correction import correct_fairness
from components.encoding import encode_qis, label_01, protected_01
from components.grouping import make_fairlets, mdav
from components.inputs import require_rows, table_roles
from components.metrics import demographic_parity_difference, positive_ratio, t_closeness_binary
from components.microaggregate import microaggregate
from components.result import ComponentResult, lineage_table, stamp
from schemas import contracts as C
from schemas.errors import InputError
from schemas.params import FairMDAVParams
from schemas.roles import Role, TableRoles, attach_roles


def fairlet_sizes(k: int, n_unfavoured: int, n_rows: int) -> tuple[int, int, bool]:
    """(m, n, clamped): m = floor(k * |U|/|D| + 1/2) in exact arithmetic, clamped to [1, k-1]."""
    m = int(Fraction(k * n_unfavoured, n_rows) + Fraction(1, 2))
    clamped = not 1 <= m <= k - 1
    m = min(max(m, 1), k - 1)
    return m, k - m, clamped


def _pr(y: np.ndarray, pa01: np.ndarray) -> dict[str, float]:
    pr = positive_ratio(y, sensitive_features=pa01)
    return {"unfavoured": pr.get(0, float("nan")), "favoured": pr.get(1, float("nan"))}


def declared_contract(
    params: FairMDAVParams,
    *,
    k: int | None = None,
    m: int | None = None,
    n: int | None = None,
    qis: tuple[str, ...] = (),
    protected: str = "*",
    t_input: float = 0.0,
) -> list:
    """The guarantees Fair-MDAV declares for ``params`` (spec section 3, C1-C11, C13, C14).

    Data-dependent values (m, n from the input's unfavoured share, the published QI names, the
    protected column, the input t bound) are passed by the component; called with the defaults
    it gives the contract's shape (ids and kinds), which orchestrators use to name checks
    before any data is read.
    """
    fairlet = params.grouping == "fairlet"
    k = k or params.k or (params.m or 1) + (params.n or 1)
    m, n = m or params.m or 1, n or params.n or 1
    direction = "none" if params.tau == 0 else params.correction
    contract: list = [C.Partition(id="C3", allow_drops=fairlet)]
    if fairlet:
        contract += [C.FairletComposition(id="C1", m=m, n=n), C.FairletCount(id="C2", m=m, n=n)]
    else:
        contract.append(C.GroupSizeRange(id="C4'", min_size=k, max_size=2 * k - 1))
    if params.microaggregate:
        contract += [
            C.KAnonymity(id="C4", k=k, quasi_identifiers=qis),
            C.GroupMeans(id="C4", quasi_identifiers=qis),
            C.MeanPreservation(id="C13", quasi_identifiers=qis),
        ]
    else:
        contract.append(C.QIsUnchanged(id="C4''", quasi_identifiers=qis))
    if fairlet:
        contract += [
            C.TCloseness(id="C5", attribute=protected, t=0.0, reference="output"),
            C.TCloseness(id="C5", attribute=protected, t=float(t_input), reference="input"),
        ]
    contract += [
        C.AttributesPreserved(id="C6", columns=(protected,)),
        C.CorrectionDirection(id="C7", direction=direction),
        C.LocalFairness(id="C8", tau=params.tau),
        C.MinimalCorrection(id="C9", tau=params.tau, direction=params.correction),
    ]
    if fairlet:
        contract.append(C.DemographicParityBound(id="C10", ratio=params.tau))
    contract += [
        C.SeedNearest(id="C11", grouping=params.grouping),
        C.ParameterValidity(
            id="C14",
            k=k,
            m=m if fairlet else None,
            n=n if fairlet else None,
            tau=params.tau,
            derived_from_k=params.m is None,
        ),
    ]
    return contract


def fair_mdav(
    table: pa.Table, params: FairMDAVParams, roles: TableRoles | None = None
) -> ComponentResult:
    """Run Fair-MDAV on ``table`` (roles from its metadata unless given)."""
    t0 = time.perf_counter()
    roles = table_roles(table, roles)
    prot, lab = roles.protected, roles.label
    y = label_01(table, lab)
    pa01, favoured, declared = protected_01(table, prot, y)
    warnings: list[str] = []
    if declared is not None and declared != favoured:
        warnings.append(
            f"column '{prot.name}': the data favour {favoured!r} (higher positive ratio), not the declared {declared!r}; "
            "Fair-MDAV follows the data"
        )
    n_rows, n_u = len(y), int((pa01 == 0).sum())
    n_f = n_rows - n_u
    if params.grouping == "fairlet":
        if params.m is not None:
            m, n, clamped = params.m, params.n, False
        else:
            m, n, clamped = fairlet_sizes(params.k, n_u, n_rows)
        if clamped:
            warnings.append(f"m clamped to {m} so that every fairlet holds both protected groups")
        k = m + n
        require_rows(table, k)  # the plainer rule first: fewer rows than k can form no fairlet
        if n_u < m or n_f < n:
            raise InputError(
                prot.name,
                f"too few rows to form one ({m},{n})-fairlet",
                f"{n_u} unfavoured, {n_f} favoured rows",
            )
    else:
        k, m, n, clamped = params.k, None, None, False
    require_rows(table, k)
    enc = encode_qis(table, roles, params.scaling)
    t1 = time.perf_counter()
    grouping = make_fairlets(enc, pa01, m, n) if params.grouping == "fairlet" else mdav(enc, k)
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
        qi_cols, il = microaggregate(enc, grouping)
        cols.update(qi_cols)
        out_roles += enc.published_roles()
    else:
        il = {
            "il": 0.0,
            "il_attr": 0.0,
            "sse": 0.0,
            "per_attribute": dict.fromkeys(roles.quasi_identifiers, 0.0),
        }
        take = pa.array(order)
        for q in roles.quasi_identifiers:
            cols[q] = table.column(q).take(take)
            out_roles.append(roles[q])
    lab_values = table.column(lab.name).to_numpy(zero_copy_only=False)
    positive_value = lab_values[np.argmax(y == 1)]
    negative_value = lab_values[np.argmax(y == 0)]
    for c in roles:
        if c.role is Role.QUASI_IDENTIFIER:
            continue
        col = table.column(c.name).take(pa.array(order))
        if c.name == lab.name:
            corrected = np.where(y_out == 1, positive_value, negative_value)
            col = pa.array(corrected, type=col.type)
        cols[c.name] = col
        out_roles.append(c)
    out = attach_roles(pa.table(cols), TableRoles.of(out_roles))
    t4 = time.perf_counter()

    # --- declared contract ----------------------------------------------------------------
    qi_names = tuple(r.name for r in out_roles if r.role is Role.QUASI_IDENTIFIER)
    fairlet = params.grouping == "fairlet"
    derived = fairlet and params.m is None and not clamped
    t_in = (0.5 / k if derived else abs(m / k - n_u / n_rows)) if fairlet else 0.0
    contract = declared_contract(
        params, k=k, m=m, n=n, qis=qi_names, protected=prot.name, t_input=t_in
    )
    p_dump = params.model_dump(mode="json")
    out = stamp(out, "fair_mdav", p_dump, contract)

    # --- metrics ----------------------------------------------------------------------------
    pa_out = pa01[order]
    share_in = n_u / n_rows
    t_groups = t_closeness_binary(gid, pa_out, share_in) if len(gid) else np.zeros(0)
    metrics = {
        "input_rows": n_rows,
        "output_rows": int(len(order)),
        "dropped_rows": int(n_rows - len(order)),
        "groups": grouping.n_groups,
        "k": k,
        "m": m,
        "n": n,
        "favoured_value": favoured.item() if hasattr(favoured, "item") else favoured,
        "unfavoured_share_input": share_in,
        "relabelled": int(flags.sum()),
        "positive_ratio_before": _pr(y, pa01),
        "positive_ratio_after": _pr(y_out, pa_out) if len(order) else {},
        "dpar_before": demographic_parity_difference(y, sensitive_features=pa01),
        "dpar_after": demographic_parity_difference(y_out, sensitive_features=pa_out)
        if len(order)
        else None,
        "t_pa_exact": float(t_groups.max()) if len(t_groups) else 0.0,
        "t_pa_bound": 0.5 / k,
        "information_loss": il,
        "group_sizes": np.bincount(np.bincount(gid)).tolist() if len(gid) else [],
    }
    lineage = lineage_table(
        order, gid, grouping.ranks(), np.asarray(grouping.seeds, dtype=np.int64)
    )
    timings = {"encode_s": t1 - t0, "group_s": t2 - t1, "correct_s": t3 - t2, "assemble_s": t4 - t3}
    return ComponentResult("fair_mdav", out, lineage, contract, p_dump, metrics, timings, warnings)
