"""The input of a shipped transparency report, as the pipeline's ingest gives it to ATR: the
attack tests, the engine tests and the Spark frame tests read it from here."""

from __future__ import annotations

import pyarrow as pa

from privfair.components.transparency import FAMILY
from privfair.components.transparency.params import ATRParams
from privfair.schemas.roles import ColumnRole, Kind, Role, attach_roles, read_roles
from privfair.spec.catalogue import load_spec
from privfair.spec.settings import DEFAULT_SPECS_DIR


def shipped_report(builtin_table, name: str) -> tuple[pa.Table, ATRParams]:
    """(the built-in dataset of ``pipelines/specs/<name>.yaml`` with the family's role presets
    attached, the spec's params).

    ``builtin_table`` is the suite's fixture (``tests/conftest.py``)."""
    spec = load_spec(DEFAULT_SPECS_DIR / f"{name}.yaml")
    dataset = spec.dataset.name
    table = builtin_table(dataset)
    roles = read_roles(table)
    for col, preset in FAMILY.dataset_roles[dataset].items():
        roles = roles.replace(
            ColumnRole(
                col, Role(preset["role"]), Kind(preset["kind"]), positive=preset.get("positive")
            )
        )
    return attach_roles(table, roles), spec.params
