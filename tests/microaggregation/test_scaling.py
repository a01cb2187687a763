"""``scaling: none``: MDAV and Fair-MDAV distances in raw units (the Fair-MDAV authors' cleanup
leaves numeric QIs unscaled, which their Table 3 k = 100 and Table 5 LR rows need)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from privfair.components.core.checks import check_contract
from privfair.components.microaggregation.audit import evidence
from privfair.components.microaggregation.encoding import encode_qis, scale_of
from privfair.components.microaggregation.fair_mdav import fair_mdav
from privfair.components.microaggregation.mdav import mdav
from privfair.components.microaggregation.params import FairMDAVParams, MDAVParams
from privfair.schemas.errors import InputError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles, read_roles


def _table() -> pa.Table:
    """Two QIs: ``small`` in [0, 1] separates rows {0, 1, 2} from {3, 4, 5}; ``wide`` (raw span
    1000) separates {0, 1, 3} from {2, 4, 5}, and by a small margin in min-max units."""
    roles = TableRoles.of(
        [
            ColumnRole("small", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
            ColumnRole("wide", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
            ColumnRole("PA", Role.PROTECTED, Kind.BINARY, favoured="F"),
            ColumnRole("y", Role.LABEL, Kind.BINARY, positive=1),
        ]
    )
    t = pa.table(
        {
            "small": [0.0, 0.05, 0.1, 0.9, 0.95, 1.0],
            "wide": [0.0, 100.0, 800.0, 150.0, 900.0, 1000.0],
            "PA": ["F", "U", "F", "U", "F", "U"],
            "y": [1, 0, 1, 0, 1, 0],
        }
    )
    return attach_roles(t, roles)


def _groups(result) -> set[frozenset[int]]:
    lin = result.sidecars["lineage"]
    rows, gid = lin.column("row_id").to_numpy(), lin.column("group").to_numpy()
    return {frozenset(rows[gid == g].tolist()) for g in np.unique(gid)}


def test_scale_of_none_is_identity():
    x = np.array([[1.0, -2.0], [3.0, 7.5]])
    off, sc = scale_of(x, "none")
    assert np.array_equal((x - off) / sc, x)


def test_scale_of_refuses_unknown_scaling():
    with pytest.raises(InputError, match="scaling"):
        scale_of(np.zeros((2, 1)), "raw")


@pytest.mark.parametrize("scaling", ["minmax", "zscore"])
def test_default_scalings_unchanged(scaling):
    """The shared rule gives the offsets and scales the component always had."""
    x = np.array([[1.0, 5.0], [3.0, 5.0], [2.0, 5.0]])
    off, sc = scale_of(x, scaling)
    if scaling == "minmax":
        assert off.tolist() == [1.0, 5.0] and sc.tolist() == [2.0, 1.0]
    else:
        assert off.tolist() == [2.0, 5.0] and sc[1] == 1.0
        assert sc[0] == pytest.approx(np.std([1.0, 3.0, 2.0]))


def test_mdav_raw_units_group_by_the_wide_column():
    t = _table()
    scaled = mdav(t, MDAVParams(k=3))
    raw = mdav(t, MDAVParams(k=3, scaling="none"))
    assert _groups(scaled) == {frozenset({0, 1, 2}), frozenset({3, 4, 5})}
    assert _groups(raw) == {frozenset({0, 1, 3}), frozenset({2, 4, 5})}
    frames = evidence(t, raw.outputs, raw.sidecars, MDAVParams(k=3, scaling="none"))
    assert not [r.id for r in check_contract(raw.contract, frames) if not r.passed]


def test_fair_mdav_raw_units_equal_the_benchmarks_emulation():
    """``scaling: none`` is exactly the encoder with offset 0 and scale 1 (what
    ``reproduce_fair_mdav_protocols.py`` patched in to emulate the authors)."""
    t = _table()
    p = FairMDAVParams(grouping="mdav", k=3, correction="negative", scaling="none")
    r = fair_mdav(t, p)
    enc = encode_qis(t, read_roles(t), "none")
    assert np.array_equal(enc.scaled, enc.numeric)
    assert _groups(r) == {frozenset({0, 1, 3}), frozenset({2, 4, 5})}
    frames = evidence(t, r.outputs, r.sidecars, p)
    failed = [c.id for c in check_contract(r.contract, frames) if not c.passed]
    assert not failed
    # the replay (C11) follows the declared scaling: under min-max these groups are not greedy
    minmax = p.model_copy(update={"scaling": "minmax"})
    frames = evidence(t, r.outputs, r.sidecars, minmax)
    c11 = [c for c in r.contract if c.id == "C11"][0].model_copy(update={"scaling": "minmax"})
    assert not check_contract([c11], frames)[0].passed
