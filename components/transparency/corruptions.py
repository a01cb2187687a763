"""Reports that break one transparency guarantee each, for the test battery.

Each takes ``(guarantee, input_table, outputs, sidecars, rng)`` and returns ``(outputs,
sidecars)`` with the public tables changed as a bug or a tampering would, or None when no
report can break the guarantee (C0 and C11 read only the input and the params).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = [
    "break_sandwich",
    "break_announced",
    "break_fidelity",
    "break_optimum",
    "break_bound",
    "break_global",
    "break_structure",
    "break_mass",
    "break_fairness",
    "break_public_fields",
]


def _set(table: pa.Table, name: str, values) -> pa.Table:
    i = table.schema.get_field_index(name)
    return table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))


def _rules(outputs, d1: np.ndarray) -> dict:
    rules = _set(outputs["decision_rules"], "announced_d1", d1)
    return {**outputs, "decision_rules": _set(rules, "announced_d0", 1.0 - d1)}


def _announced(outputs) -> np.ndarray:
    return np.asarray(outputs["decision_rules"].column("announced_d1").to_pylist(), dtype=float)


def break_announced(g, input_table, outputs, sidecars, rng):
    """Announce a cell outside [0, 1]."""
    d1 = _announced(outputs)
    d1[0] = 1.5
    return _rules(outputs, d1), sidecars


def break_fidelity(g, input_table, outputs, sidecars, rng):
    """Announce the cell whose true rule is farthest from 1/2 at the end of [0, 1] farthest
    from that rule (none breaks delta-fidelity when every true rule is within 1 - delta of
    both ends: delta = 0, or every rule 1/2 at delta <= 1/2)."""
    true = np.asarray(sidecars["audit_cells"].column("d1_true").to_pylist(), dtype=float)
    far = np.maximum(true, 1.0 - true)
    i = int(np.argmax(far))
    if g.fidelity == "delta" and far[i] <= 1 - g.level + 1e-6:
        return None
    d1 = _announced(outputs)
    d1[i] = 0.0 if true[i] >= 0.5 else 1.0
    return _rules(outputs, d1), sidecars


def break_sandwich(g, input_table, outputs, sidecars, rng):
    """In a group whose true confidence C* is below 1, announce a positive decision for its
    first cell only: the adversary is then certain (confidence 1 > C*)."""
    audit = sidecars["audit_cells"]
    group = np.asarray(audit.column("group").to_pylist())
    p = np.asarray(audit.column("p_x").to_pylist(), dtype=float)
    d1 = np.asarray(audit.column("d1_true").to_pylist(), dtype=float)
    for gid in np.unique(group):
        sel = np.flatnonzero((group == gid) & (p > 0))
        if len(sel) < 2:
            continue
        conf = [np.max(m[sel]) / m[sel].sum() for m in (p * d1, p * (1 - d1)) if m[sel].sum() > 0]
        if max(conf) < 1 - 1e-9:
            new = _announced(outputs)
            new[sel] = 0.0
            new[sel[0]] = 1.0
            return _rules(outputs, new), sidecars
    return None


def break_optimum(g, input_table, outputs, sidecars, rng):
    """Publish the true-ish, unprotected confidence: every group's value lowered."""
    s = outputs["privacy_summary"]
    v = np.asarray(s.column("max_adversary_confidence").to_pylist(), dtype=float) * 0.9
    return {**outputs, "privacy_summary": _set(s, "max_adversary_confidence", v)}, sidecars


def break_bound(g, input_table, outputs, sidecars, rng):
    """In a group whose beta* + slack is below 1, announce a positive decision for its
    largest cell only (the adversary is then certain of it) and publish that confidence, 1:
    published and achieved agree, the bound does not (None when every cap reaches 1)."""
    groups = sidecars["audit_groups"].to_pydict()
    audit = sidecars["audit_cells"]
    group = np.asarray(audit.column("group").to_pylist())
    p = np.asarray(audit.column("p_x").to_pylist(), dtype=float)
    for gid, beta in zip(groups["group"], groups["beta_star"], strict=True):
        sel = np.flatnonzero((group == gid) & (p > 0))
        if len(sel) < 2 or not beta + g.slack < 1 - 1e-6:
            continue
        d1 = _announced(outputs)
        d1[sel] = 0.0
        d1[sel[np.argmax(p[sel])]] = 1.0
        out = _rules(outputs, d1)
        s = out["privacy_summary"]
        v = np.asarray(s.column("max_adversary_confidence").to_pylist(), dtype=float)
        v[gid] = 1.0  # the summary lists the groups in order, then the global row
        v[-1] = 1.0
        return {**out, "privacy_summary": _set(s, "max_adversary_confidence", v)}, sidecars
    return None


def break_global(g, input_table, outputs, sidecars, rng):
    """Understate beta*_global in the summary."""
    s = outputs["privacy_summary"]
    scope = s.column("scope").to_pylist()
    v = np.asarray(s.column("max_adversary_confidence").to_pylist(), dtype=float)
    v[[i for i, x in enumerate(scope) if x == "global"]] *= 0.5
    return {**outputs, "privacy_summary": _set(s, "max_adversary_confidence", v)}, sidecars


def _populated_group(sidecars) -> np.ndarray | None:
    """The cells of the first group with two populated cells or more."""
    audit = sidecars["audit_cells"]
    group = np.asarray(audit.column("group").to_pylist())
    p = np.asarray(audit.column("p_x").to_pylist(), dtype=float)
    for gid in np.unique(group):
        sel = np.flatnonzero((group == gid) & (p > 0))
        if len(sel) >= 2:
            return sel
    return None


def break_structure(g, input_table, outputs, sidecars, rng):
    """Announce a positive decision for one cell of a group and a negative one for the rest:
    no case of the optimum has that shape (a beta_min group's largest cells would announce
    S_1/N, strictly between 0 and 1)."""
    sel = _populated_group(sidecars)
    if sel is None:
        return None
    d1 = _announced(outputs)
    d1[sel] = 0.0
    d1[sel[0]] = 1.0
    return _rules(outputs, d1), sidecars


def break_mass(g, input_table, outputs, sidecars, rng):
    """Push a group's positive mass past its admissible range [M1/beta*, N - M0/beta*]: all
    positive when M0 > 0, all negative when M1 > 0 (with both 0 any mass is admissible)."""
    groups = sidecars["audit_groups"]
    m1 = np.asarray(groups.column("M1").to_pylist(), dtype=float)
    m0 = np.asarray(groups.column("M0").to_pylist(), dtype=float)
    audit = sidecars["audit_cells"]
    group = np.asarray(audit.column("group").to_pylist())
    for gid in range(len(m1)):
        if m0[gid] > 1e-6 or m1[gid] > 1e-6:
            d1 = _announced(outputs)
            d1[group == gid] = 1.0 if m0[gid] > 1e-6 else 0.0
            return _rules(outputs, d1), sidecars
    return None


def break_fairness(g, input_table, outputs, sidecars, rng):
    """Publish a fairness value that the published rules do not give."""
    f = outputs["fairness"]
    if f.num_rows == 0:
        return None
    v = np.asarray(f.column("value").to_pylist(), dtype=float)
    v[0] = v[0] + 0.37
    return {**outputs, "fairness": _set(f, "value", v)}, sidecars


def break_public_fields(g, input_table, outputs, sidecars, rng):
    """Leak the true rule into the public decision rules."""
    rules = outputs["decision_rules"]
    d1 = sidecars["audit_cells"].column("d1_true")
    return {**outputs, "decision_rules": rules.append_column("d1_true", d1)}, sidecars
