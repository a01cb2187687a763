"""Every shipped spec's release report draws every figure its family defines.

The report turns any error of a family's figure function into one line ("The plots could not be
drawn: ...") so that a broken plot does not hide the rest of the report; that also hid, on every
shipped generalisation spec, a utility sweep that asked for a t below tau(R) and was refused.
So each shipped spec is published here and its report read: figures present, no such line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from privfair.run.flow import run_release
from privfair.spec.catalogue import load_spec
from privfair.spec.settings import DEFAULT_SPECS_DIR

SPECS = sorted(Path(DEFAULT_SPECS_DIR).glob("*.yaml"))

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_the_report_draws_every_figure(tmp_path, path):
    spec = load_spec(path)
    out = run_release(spec, tmp_path)
    assert out.status == "published", out.message
    report = (tmp_path / spec.name / out.version / "report.html").read_text()
    assert "could not be drawn" not in report
    assert report.count('<figure id="fig-') >= 3
