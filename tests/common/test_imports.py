"""In the ``privfair`` command's own process, Great Expectations is imported without the
integrations privfair never hands it and with ``scipy.stats`` deferred; elsewhere, whole
(``privfair.validation.gx_import``). Each check runs in a fresh interpreter, where nothing else has
imported them yet."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "pipelines" / "specs"


def _python(script: str, *argv: str) -> dict:
    """Run ``script`` in a fresh interpreter at the repository's root; its last stdout line
    is JSON."""
    done = subprocess.run(
        [sys.executable, "-c", script, *argv], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_PROBE = """
import importlib, json, sys
import privfair  # as every privfair process: see ``privfair._hide_spark_connect``
own, first = sys.argv[1] == "own", sys.argv[2:]
for name in first:
    importlib.import_module(name)
from privfair.validation.gx_import import GX_INTEGRATIONS, import_great_expectations, own_the_process
if own:
    own_the_process()
gx = import_great_expectations()
from great_expectations.compatibility import pyspark, sqlalchemy
from great_expectations.compatibility.not_imported import NotImported
seen = {
    "spark": not isinstance(pyspark.pyspark, NotImported),
    "sql": not isinstance(sqlalchemy.sqlalchemy, NotImported),
    "loaded": sorted(n for n in GX_INTEGRATIONS if sys.modules.get(n) is not None),
    "left_hidden": sorted(n for n in GX_INTEGRATIONS if n in sys.modules and sys.modules[n] is None),
    "suite": type(gx.ExpectationSuite(name="probe")).__name__,
    "stats_ran": "scipy.stats._stats_py" in sys.modules,
}
try:
    import sqlalchemy
    seen["sql_after"] = True
except ImportError:
    seen["sql_after"] = False
from scipy import stats
seen["cdf"] = float(stats.norm.cdf(0.0))  # the first read runs the deferred module
seen["stats_ran_after"] = "scipy.stats._stats_py" in sys.modules
from sklearn.linear_model import LogisticRegression
seen["fit"] = LogisticRegression().fit([[0.0], [1.0], [2.0], [3.0]], [0, 0, 1, 1]).predict([[3.0]]).tolist()
print(json.dumps(seen))
"""


def test_the_command_s_process_imports_great_expectations_without_its_integrations():
    seen = _python(_PROBE, "own")
    assert not seen["spark"] and not seen["sql"]
    assert seen["loaded"] == [] and seen["left_hidden"] == []
    assert seen["suite"] == "ExpectationSuite"
    assert seen["sql_after"]  # only hidden during Great Expectations' import (installed: airflow)
    assert not seen["stats_ran"]  # deferred: bound, not run
    assert seen["cdf"] == 0.5 and seen["stats_ran_after"]
    assert seen["fit"] == [1]  # scikit-learn, which reads SciPy's statistics, works after it


def test_an_integration_the_process_already_loaded_is_left_to_great_expectations():
    seen = _python(_PROBE, "own", "sqlalchemy")
    assert seen["sql"] and not seen["spark"]
    assert seen["loaded"] == ["sqlalchemy"] and seen["left_hidden"] == []


def test_a_process_shared_with_the_user_s_code_imports_great_expectations_whole():
    """A notebook or an orchestrator's worker: the user's own suites may read Spark or SQL,
    and its threads may import."""
    seen = _python(_PROBE, "shared")
    installed = {n: importlib.util.find_spec(n) is not None for n in ("pyspark", "sqlalchemy")}
    assert (seen["spark"], seen["sql"]) == (installed["pyspark"], installed["sqlalchemy"])
    assert seen["stats_ran"]  # not deferred


_RUN = """
import atexit, json, sys, tempfile
from privfair.validation.gx_import import GX_INTEGRATIONS

def report():  # run by the command's exit
    print(json.dumps({
        "gx": "great_expectations" in sys.modules,
        "loaded": sorted(n for n in GX_INTEGRATIONS if sys.modules.get(n) is not None),
    }))

atexit.register(report)
sys.argv = ["privfair", "run", sys.argv[1], "--store", tempfile.mkdtemp(), "--quiet"]
from privfair.cli import entry
entry()
"""


def test_the_privfair_command_validates_with_great_expectations_imported_that_way():
    seen = _python(_RUN, str(SPECS / "german_dmondrian.yaml"))  # exit code 0: checked there
    assert seen == {"gx": True, "loaded": []}


def test_great_expectations_imported_before_privfair_leaves_the_process_alive(tmp_path):
    """With the ``spark`` extra installed, Great Expectations probes ``pyspark.sql.connect`` at
    its import; without Spark Connect's dependencies that probe ends a ``python -c`` process
    (it takes it for a doctest run). The extra brings them, so a user's process lives on."""
    done = subprocess.run(
        [sys.executable, "-c", "import great_expectations; import privfair; print('alive')"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0 and done.stdout.strip() == "alive", done.stderr[-2000:]
