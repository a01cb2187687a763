"""An input MDAV or Fair-MDAV refuses is refused before the grouping runs (issue 43): its
compiled rounds (numba, ~30 s to compile on a fresh installation) are not loaded, not even
imported, for a table that is then refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from privfair.components.microaggregation.params import FairMDAVParams, MDAVParams
from privfair.schemas.errors import InputError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles

REPO = Path(__file__).resolve().parents[2]


def table(label_values=(0, 1, 2), protected=True) -> pa.Table:
    cols = [
        ColumnRole("x", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
        ColumnRole("y", Role.LABEL, Kind.BINARY, positive=1),
    ]
    data = {"x": [float(i) for i in range(12)], "y": [label_values[i % 3] for i in range(12)]}
    if protected:
        cols.append(ColumnRole("PA", Role.PROTECTED, Kind.BINARY, favoured=1))
        data["PA"] = [i % 2 for i in range(12)]
    return attach_roles(pa.table(data), TableRoles.of(cols))


def no_grouping(*args, **kwargs):
    raise AssertionError("the grouping ran before the input was checked")


@pytest.mark.parametrize("protected", [True, False])
def test_mdav_refuses_a_three_valued_label_before_grouping(monkeypatch, protected):
    import privfair.components.microaggregation.mdav as mdav

    monkeypatch.setattr(mdav, "group_rows", no_grouping)
    with pytest.raises(InputError) as e:
        mdav.mdav(table(protected=protected), MDAVParams(k=3))
    assert e.value.column == "y" and "found 3: [0, 1, 2]" in str(e.value)
    with pytest.raises(InputError):  # the contract the release is validated against, too
        mdav.contract(MDAVParams(k=3), table(protected=protected))


def test_mdav_refuses_a_declared_positive_value_the_label_lacks(monkeypatch):
    import privfair.components.microaggregation.mdav as mdav

    monkeypatch.setattr(mdav, "group_rows", no_grouping)
    with pytest.raises(InputError, match="positive"):
        mdav.mdav(table(label_values=(0, 2, 0)), MDAVParams(k=3))


def test_mdav_passes_a_two_valued_label_through(monkeypatch):
    from privfair.components.microaggregation.mdav import mdav

    out = mdav(table(label_values=(0, 1, 1)), MDAVParams(k=3)).outputs["data"]
    assert sorted(out.column("y").to_pylist()) == sorted([(0, 1, 1)[i % 3] for i in range(12)])


def test_fair_mdav_refuses_a_three_valued_label_before_grouping(monkeypatch):
    import privfair.components.microaggregation.fair_mdav as fair_mdav

    monkeypatch.setattr(fair_mdav, "group_rows", no_grouping)
    with pytest.raises(InputError, match="exactly two distinct values"):
        fair_mdav.fair_mdav(table(), FairMDAVParams(k=3, tau=1.0))


def test_a_refused_input_never_imports_the_compiled_rounds():
    """In a fresh interpreter: the contract and the run of a refused input leave numba (and
    the kernel module) unimported."""
    code = (
        "import sys\n"
        "sys.path.insert(0, 'tests/microaggregation')\n"
        "from test_inputs_before_grouping import table\n"
        "from privfair.components.microaggregation.mdav import contract, mdav\n"
        "from privfair.components.microaggregation.fair_mdav import fair_mdav\n"
        "from privfair.components.microaggregation.params import FairMDAVParams, MDAVParams\n"
        "from privfair.schemas.errors import InputError\n"
        "for call in (lambda: contract(MDAVParams(k=3), table()),\n"
        "             lambda: mdav(table(), MDAVParams(k=3)),\n"
        "             lambda: fair_mdav(table(), FairMDAVParams(k=3, tau=1.0))):\n"
        "    try:\n"
        "        call()\n"
        "    except InputError:\n"
        "        pass\n"
        "    else:\n"
        "        raise SystemExit('not refused')\n"
        "print(sorted(m for m in ('numba', 'privfair.components.microaggregation.kernel')\n"
        "             if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", proc.stdout
