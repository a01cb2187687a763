"""The attacker of a DP release reads its shareable copy: the synthetic table (its values and its
Parquet schema metadata), the public metrics (``Algorithm.public.public_metrics``), the
contract, the params and the public report's figures. None of it may be an exact statistic of
the private input (issue 21, point 4).

The input has a distinctive row count (12,347) and a distinctive protected x outcome table
(sex x income: 4,321 / 2,717 / 3,190 / 2,119), and comes as pandas wrote it to Parquet. The
attack of the issue: the synthetic table's own marginals plus a reported TVD against the input
give the input's 1-way shares (two candidates each), the input's parity gap gives the joint
share, the 2-way TVD and whole counts pick the candidate. The attacker also knows the exact
row count (background knowledge, as the old manifest's ``input.rows`` gave it): the strongest
case.

- On the owner part (every metric) the attack recovers the exact table: the test can fail.
- On the shareable part the exact row count, counts and shares (a share within 1e-6) appear
  nowhere, and the attack recovers no candidate table.

The main releases declare a public row count (``rows``: 1,000, not the input's): every share
of the synthetic table is then a multiple of 1/1,000 (each input share is at least 1e-5 away
from one) and every count of it is below the input's, so "appears nowhere" is exact. Under the
default policy the synthetic row count is the noisy total rounded, which equals the true count
with probability about 1/(sigma sqrt(2 pi)), a few per cent at epsilon = 1: a DP outcome the
attacker cannot tell from any other value, so that policy is attacked with the reconstruction
only (over a thousand runs, the public attack's best candidate missed some cell by about 80
records at the median and never by fewer than 3).
"""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from privfair.components.synthesis import MST, PREFAIR
from privfair.components.synthesis.figures import figures
from privfair.components.synthesis.params import MSTParams, PreFairParams
from privfair.schemas.contracts import contract_to_json
from privfair.schemas.errors import InputError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles, read_roles

N = 12_347
CELLS = {(0, 0): 4_321, (0, 1): 2_717, (1, 0): 3_190, (1, 1): 2_119}  # (sex, income) -> count
PUBLIC_ROWS = 1_000
EDU = ("low", "mid", "high")
# the distinctive numbers: the row count, the four cells and the four 1-way counts
COUNTS = (
    {N, *CELLS.values()}
    | {sum(c for (s, _), c in CELLS.items() if s == v) for v in (0, 1)}
    | {sum(c for (_, o), c in CELLS.items() if o == v) for v in (0, 1)}
)
SHARES = {c / N for c in COUNTS if c != N}


def _input() -> pa.Table:
    """The private input, as read from a Parquet file written by pandas (whose schema
    metadata records the RangeIndex: start 0, stop = the row count)."""
    rng = np.random.default_rng(21)
    sex = np.concatenate([np.full(c, s) for (s, _), c in CELLS.items()])
    income = np.concatenate([np.full(c, o) for (_, o), c in CELLS.items()])
    p_edu = {
        (0, 0): (0.6, 0.3, 0.1),
        (0, 1): (0.2, 0.4, 0.4),
        (1, 0): (0.5, 0.35, 0.15),
        (1, 1): (0.15, 0.35, 0.5),
    }
    edu = np.concatenate([rng.choice(EDU, size=c, p=p_edu[k]) for k, c in CELLS.items()])
    order = rng.permutation(N)
    df = pd.DataFrame(
        {
            "sex": sex[order].astype(np.int8),
            "edu": edu[order],
            "income": income[order].astype(np.int8),
        }
    )
    roles = TableRoles.of(
        [
            ColumnRole("sex", Role.PROTECTED, Kind.BINARY, favoured=1),
            ColumnRole("edu", Role.ADMISSIBLE, Kind.NOMINAL, domain=EDU),
            ColumnRole("income", Role.LABEL, Kind.BINARY, positive=1),
        ]
    )
    return attach_roles(pa.Table.from_pandas(df), roles)


def _run(algo, rows: int | None):
    cls = PreFairParams if algo is PREFAIR else MSTParams
    params = cls(epsilon=1.0, delta=1e-9, rows=rows, iters=300, seed=5)
    return algo(_input(), params)


# --- what the attacker reads --------------------------------------------------------------------
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _numbers(obj) -> list[float]:
    """Every number in a JSON-like value, numbers written inside strings included."""
    if isinstance(obj, bool) or obj is None:
        return []
    if isinstance(obj, int | float):
        return [float(obj)]
    if isinstance(obj, bytes):
        obj = obj.decode("utf-8", "replace")
    if isinstance(obj, str):
        return [float(x) for x in _NUMBER.findall(obj)]
    if isinstance(obj, dict):
        return [x for k, v in obj.items() for x in (*_numbers(k), *_numbers(v))]
    if isinstance(obj, list | tuple):
        return [x for v in obj for x in _numbers(v)]
    return _numbers(str(obj))


def _table_numbers(t: pa.Table) -> list[float]:
    """The synthetic table's schema metadata (schema and fields), and the counts and shares of
    every 1-way and 2-way marginal (what anyone computes from the table)."""
    out = _numbers(dict(t.schema.metadata or {}))
    for f in t.schema:
        out += _numbers(dict(f.metadata or {}))
    df = t.to_pandas()
    for k in (1, 2):
        for cols in itertools.combinations(df.columns, k):
            counts = df.groupby(list(cols), dropna=False).size()
            out += [float(c) for c in counts] + [c / len(df) for c in counts]
    out.append(float(len(df)))
    return out


def _public_view(algo, result) -> dict:
    """The shareable copy as the release flow builds it from ``algo.public``."""
    metrics = algo.public.public_metrics(result.metrics)
    contract = json.loads(contract_to_json(result.contract))
    man = {
        "metrics": metrics,
        "contract": contract,
        "params": result.params,
        "pipeline": "attack",
        "component": result.component,
    }
    drawn = [
        f for f in figures(man, dict(result.outputs), None, {}) if f.name in algo.public.figures
    ]
    return {"manifest": man, "figures": [f.svg + f.caption for f in drawn]}


def _appears(numbers: list[float]) -> list[str]:
    found = []
    for x in numbers:
        if any(abs(x - c) < 1e-6 for c in COUNTS):
            found.append(f"count {x:g}")
        if any(abs(x - s) < 1e-6 for s in SHARES):
            found.append(f"share {x!r}")
    return found


# --- the attack of the issue --------------------------------------------------------------------
def _pair(d: dict, a: str, b: str):
    return d.get(f"{a}|{b}", d.get(f"{b}|{a}"))


def _joint(p_s: float, p_o: float, p11: float) -> np.ndarray:
    """Shares [[s0 o0, s0 o1], [s1 o0, s1 o1]] from P(s=1), P(o=1), P(s=1, o=1)."""
    return np.array([[1 - p_s - p_o + p11, p_o - p11], [p_s - p11, p11]])


def _gaps(node, path=()):
    """``(side, dp)`` of every ``sex->income`` parity gap in the fairness metrics, the side
    named by the other keys on its path (``input``, ``synthetic``), whatever the nesting."""
    if not isinstance(node, dict):
        return
    if "sex->income" in path and node.get("dp") is not None:
        yield "/".join(k for k in path if k != "sex->income"), node["dp"]
    for k, v in node.items():
        yield from _gaps(v, (*path, k))


def attack(
    data: pa.Table, metrics: dict, n: int | None = None
) -> dict[tuple[str, str], list[np.ndarray]]:
    """The candidate sex x income share tables of the input, per TVD block of ``metrics`` (a
    metric holding ``one_way`` and ``two_way``) and per parity gap of ``sex->income`` (the
    ``fairness`` entry of each side it reports): the synthetic table's 1-way shares plus or
    minus the block's 1-way TVD, the joint share from the gap. With a 2-way TVD of sex x
    income in the block, only the candidates that reproduce it (to its 6 decimals) are kept;
    with the row count ``n``, only those whose counts are whole numbers (to the
    precision of the 6-decimal TVDs)."""
    s = np.asarray(data.column("sex").to_numpy(), dtype=float)
    o = np.asarray(data.column("income").to_numpy(), dtype=float)
    ps, po = s.mean(), o.mean()
    syn = _joint(ps, po, (s * o).mean())
    gaps = dict(_gaps(metrics.get("fairness") or {}))
    out: dict[tuple[str, str], list[np.ndarray]] = {}
    for name, block in metrics.items():
        if not isinstance(block, dict) or not isinstance(block.get("one_way"), dict):
            continue
        t_s, t_o = block["one_way"].get("sex"), block["one_way"].get("income")
        if t_s is None or t_o is None:
            continue
        t_2 = _pair(block.get("two_way") or {}, "sex", "income")
        for side, gap in gaps.items():
            found = out.setdefault((name, side), [])
            for p_s, p_o, g in itertools.product(
                {ps - t_s, ps + t_s}, {po - t_o, po + t_o}, {gap, -gap}
            ):
                if not (0 < p_s < 1 and 0 < p_o < 1):
                    continue
                cand = _joint(p_s, p_o, p_s * p_o + g * p_s * (1 - p_s))
                if (cand < 0).any():
                    continue
                if t_2 is not None and abs(0.5 * np.abs(cand - syn).sum() - t_2) > 2e-6:
                    continue
                off = np.abs(cand * n - np.round(cand * n)).max() if n else 0.0
                if off > max(0.02, 2e-6 * (n or 0)):
                    continue
                found.append(cand)
    return out


def _recovered(candidates: dict) -> list:
    """The (block, side) pairs with a candidate giving the input's exact counts."""
    return [key for key, cands in candidates.items() if any(_exact(c) for c in cands)]


def _exact(cand: np.ndarray) -> bool:
    """The candidate gives the input's four counts (rounded with the true row count)."""
    return all(round(cand[s, o] * N) == c for (s, o), c in CELLS.items())


def _shares() -> np.ndarray:
    out = np.zeros((2, 2))
    for (s, o), c in CELLS.items():
        out[s, o] = c / N
    return out


# --- tests --------------------------------------------------------------------------------------
def test_the_input_is_distinctive():
    """The shares are at least 1e-5 away from any multiple of 1/1,000 (the public row count)
    and the counts above 1,000: no share or count of the synthetic table can match them."""
    t = _input()
    assert t.num_rows == N and b"pandas" in t.schema.metadata
    assert str(N) in t.schema.metadata[b"pandas"].decode()
    for share in SHARES:
        assert abs(share * PUBLIC_ROWS - round(share * PUBLIC_ROWS)) / PUBLIC_ROWS > 1e-5
    assert min(COUNTS) > PUBLIC_ROWS


@pytest.mark.parametrize("algo", [MST, PREFAIR], ids=["mst", "prefair"])
def test_the_shareable_copy_holds_no_exact_statistic(algo):
    result = _run(algo, PUBLIC_ROWS)
    data = result.outputs["data"]
    view = _public_view(algo, result)

    # the owner part: the attack of the issue recovers the exact table
    owner = attack(data, result.metrics, N)[("fidelity", "input")]
    assert [c for c in owner if _exact(c) and np.abs(c - _shares()).max() < 2e-6]

    # the shareable part: no exact count, row count or share anywhere ...
    numbers = (
        _table_numbers(data)
        + _numbers(view["manifest"])
        + [x for svg in view["figures"] for x in _numbers(svg)]
    )
    assert not _appears(numbers), _appears(numbers)
    # ... though it carries fidelity and fairness to attack
    public = view["manifest"]["metrics"]
    assert public["measured_fidelity"]["one_way"].keys() == {"sex", "edu", "income"}
    assert public["fairness"]["synthetic"]["sex->income"]["dp"] is not None
    assert "fidelity" not in public and "input" not in public["fairness"]
    # ... and the same attack recovers nothing
    assert not _recovered(attack(data, public))


@pytest.mark.parametrize("algo", [MST, PREFAIR], ids=["mst", "prefair"])
def test_the_default_row_policy_resists_the_attack(algo):
    """Rows = the model's noisy total (the default): the owner metrics give the table away,
    the public ones do not."""
    result = _run(algo, None)
    data = result.outputs["data"]
    owner = attack(data, result.metrics, N)[("fidelity", "input")]
    assert [c for c in owner if _exact(c)]
    public = algo.public.public_metrics(result.metrics)
    assert not _recovered(attack(data, public))
    assert not any(abs(x - N) < 1e-6 for x in _numbers(dict(data.schema.metadata or {})))


# --- error messages ------------------------------------------------------------------------------
def test_an_out_of_domain_value_is_counted_not_shown():
    """A value outside the declared domain is refused naming the column, the rule and how many
    rows: never the value (an error message leaves the owner's area)."""
    t = _input()
    edu = t.column("edu").to_pylist()
    edu[17] = "doctorate-4711"
    i = t.schema.get_field_index("edu")
    bad = t.set_column(i, t.schema.field(i), pa.array(edu, t.schema.field(i).type))
    with pytest.raises(InputError) as e:
        MST(bad, MSTParams(epsilon=1.0))
    assert e.value.column == "edu" and "outside the declared public domain" in e.value.rule
    assert "4711" not in str(e.value) and "doctorate" not in str(e.value)
    assert "1 rows" in str(e.value)


def test_an_out_of_range_number_is_counted_not_shown():
    t = _input()
    ages = np.full(N, 30, dtype=np.int64)
    ages[[3, 9]] = [81_723, -4_409]
    t = attach_roles(
        t.append_column("age", pa.array(ages)),
        TableRoles.of([*read_roles(t), ColumnRole("age", Role.IGNORED, Kind.NUMERIC)]),
    )
    with pytest.raises(InputError) as e:
        MST(t, MSTParams(epsilon=1.0, bins={"age": (18.0, 65.0, 91.0)}))
    msg = str(e.value)
    assert e.value.column == "age" and "2 rows" in msg
    assert "81723" not in msg and "4409" not in msg and "81,723" not in msg
    assert str(N) not in msg


def test_metric_errors_name_counts_not_values():
    from privfair.components.synthesis import metrics as M

    with pytest.raises(InputError) as e:
        M.marginal({"a": np.array([0, 1, 7_321])}, {"a": 2}, ["a"])
    assert "7321" not in str(e.value) and "1 rows" in str(e.value)
    with pytest.raises(InputError) as e:
        M.two_way_tvd(
            {"a": np.zeros(N, int), "b": np.zeros(N - 1, int)},
            {"a": np.zeros(3, int), "b": np.zeros(3, int)},
            {"a": 2, "b": 2},
        )
    assert str(N) not in str(e.value) and str(N - 1) not in str(e.value)
    with pytest.raises(InputError) as e:
        M.downstream_accuracy(np.zeros((7, 2)), np.zeros(7), np.zeros((N, 3)), np.zeros(N))
    assert str(N) not in str(e.value)
