"""t below tau(R) (issue 22, "gates that do not gate").

Below tau(R) no cut (or split) can be d-allowable (invariant I2): the release is one class with
every PND attribute at its full range. Before issue 22 dMondrian and dSabre published that one
class silently; now it is refused, naming t, tau(R) and the rule, unless the spec accepts it
(``single_class: allow``).
"""

from __future__ import annotations

import pytest

from privfair.components.core.checks import check_contract
from privfair.components.generalisation.audit import evidence
from privfair.components.generalisation.dmondrian import dmondrian
from privfair.components.generalisation.dsabre import dsabre
from privfair.components.generalisation.examples import toy_table
from privfair.components.generalisation.params import DMondrianParams, DSabreParams
from privfair.run.flow import ingest
from privfair.schemas.errors import InputError
from privfair.spec.catalogue import load_spec
from privfair.spec.settings import DEFAULT_SPECS_DIR

ALGOS = [(dmondrian, DMondrianParams), (dsabre, DSabreParams)]


@pytest.fixture(scope="module")
def german():
    return ingest(load_spec(DEFAULT_SPECS_DIR / "german_dmondrian.yaml")).table


@pytest.mark.parametrize(("algo", "P"), ALGOS)
def test_t_below_tau_r_is_refused(german, algo, P):
    """German: tau(R) = 0.052 (Table 1); t = 0.03 is below it."""
    with pytest.raises(InputError) as e:
        algo(german, P(t=0.03, utility_queries=0))
    assert e.value.column == "t"
    msg = str(e.value)
    assert "t = 0.03" in msg and "tau(R) = 0.05" in msg
    assert "one class" in msg and "single_class: allow" in msg


@pytest.mark.parametrize(("algo", "P"), ALGOS)
def test_t_below_tau_r_publishes_one_class_when_the_spec_allows_it(german, algo, P):
    params = P(t=0.03, utility_queries=0, single_class="allow")
    result = algo(german, params)
    assert result.metrics["classes"] == 1
    assert result.metrics["t_eff"] == pytest.approx(result.metrics["tau_r"])
    frames = evidence(german, result.outputs, result.sidecars, params)
    assert all(r.passed for r in check_contract(result.contract, frames))


@pytest.mark.parametrize(("algo", "P"), ALGOS)
def test_t_at_tau_r_is_not_refused(algo, P):
    """The toy table: tau(R) = 1/34 (0.0294); a cut is d-allowable at t = tau(R) exactly
    (inclusive test, AMB-5), so t = tau(R) is a valid request."""
    algo(toy_table(), P(t=1 / 34, utility_queries=0))
    with pytest.raises(InputError, match="tau"):
        algo(toy_table(), P(t=0.02, utility_queries=0))
