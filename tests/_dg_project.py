"""The user's ``dg`` project the Dagster component tests build (in this venv, and in a fresh venv
with the built wheel), and the script that reads back what its runs did.

The project is the one ``dg scaffold project`` makes, cut to what the tests need: a package
``userproj`` whose ``definitions.py`` loads the ``defs`` folder (with the in-process executor,
so that a run's steps share the test's environment), the user's asset module
``defs/people.py`` and the release's ``defs/people_k5/defs.yaml``.
"""

from __future__ import annotations

from pathlib import Path

PYPROJECT = """\
[project]
name = "userproj"
version = "0.1.0"
requires-python = ">=3.11"

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "userproj"
"""
DEFINITIONS = """\
from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions.merge(
        dg.load_from_defs_folder(path_within_project=Path(__file__).parent),
        dg.Definitions(executor=dg.in_process_executor),
    )
"""
#: every run of the instance, oldest first: status, materialised assets, check verdicts
RUNS = """\
import json

import dagster as dg
from dagster._core.events import DagsterEventType

with dg.DagsterInstance.get() as instance:
    out = []
    for run in reversed(instance.get_runs()):
        mats, checks = {}, {}
        for rec in instance.all_logs(run.run_id):
            ev = rec.dagster_event
            if ev is None:
                continue
            if ev.event_type == DagsterEventType.ASSET_MATERIALIZATION:
                m = ev.step_materialization_data.materialization
                mats[m.asset_key.to_user_string()] = {
                    "metadata": {k: str(v.value) for k, v in m.metadata.items()},
                    "tags": dict(m.tags or {}),
                }
            elif ev.event_type == DagsterEventType.ASSET_CHECK_EVALUATION:
                e = ev.event_specific_data
                checks[f"{e.asset_key.to_user_string()}:{e.check_name}"] = e.passed
        out.append({"status": run.status.value, "materialized": mats, "checks": checks})
print(json.dumps(out))
"""


def write_project(root: Path, people: str, defs_yaml: str) -> Path:
    """Write the project into ``root``: the user's asset module ``people`` and the release
    component's ``defs_yaml`` (named ``people_k5``); returns ``root``."""
    defs = root / "userproj" / "defs"
    (defs / "people_k5").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "userproj" / "__init__.py").write_text("")
    (defs / "__init__.py").write_text("")
    (root / "userproj" / "definitions.py").write_text(DEFINITIONS)
    (defs / "people.py").write_text(people)
    (defs / "people_k5" / "defs.yaml").write_text(defs_yaml)
    return root
