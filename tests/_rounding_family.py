"""The source of a throw-away privfair family, for the tests that install one the way a user's
own would be (as a module on a path, or as a wheel): one algorithm rounding a numeric
quasi-identifier down to a multiple of ``step``, with its own guarantee kind and checker."""

from __future__ import annotations

from string import Template

_SOURCE = Template('''
"""A third-party family (${family}): rounds one numeric quasi-identifier down to a multiple of
``step``. It imports privfair's public names only."""
from typing import ClassVar, Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from privfair.components.core.checks import make_result
from privfair.components.core.descriptor import Algorithm, Family, KindCheck, Metric, Params
from privfair.components.core.evidence import lineage_audit
from privfair.components.core.inputs import table_roles
from privfair.components.core.result import ComponentResult
from privfair.schemas import contracts as C
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles


class RoundParams(Params):
    step: int = Field(10, ge=1, description="rounding step")


class RoundedTo(C.Guarantee):
    """Every value of ``column`` is a multiple of ``step``."""
    kind: Literal['$kind'] = '$kind'
    column_fields: ClassVar[tuple] = ("column",)
    column: str
    step: int


def check_rounded(g, published):
    if g.column not in published.columns:
        return make_result(g, False, None, g.step, f"no column {g.column}")
    bad = published[published[g.column] % g.step != 0]
    return make_result(g, bad.empty, len(bad), 0, f"{len(bad)} values of {g.column} off the step")


def _qi(table):
    roles = table_roles(table)
    return roles, roles.with_role(Role.QUASI_IDENTIFIER)[0].name


def contract(params, table=None):
    if table is None:
        qi, rest = "*", ("*",)
    else:
        roles, qi = _qi(table)
        rest = tuple(c.name for c in roles if c.name != qi)
    return [
        C.Partition(id="${prefix}1", allow_drops=False),
        RoundedTo(id="${prefix}2", column=qi, step=params.step),
        C.AttributesPreserved(id="${prefix}3", columns=rest),
    ]


def run(table, params):
    roles, qi = _qi(table)
    i = table.schema.get_field_index(qi)
    values = table.column(qi).to_numpy()
    out = table.set_column(i, table.schema.field(i), pa.array(values // params.step * params.step))
    lineage = pa.table({"row_id": pa.array(np.arange(table.num_rows), pa.int64())})
    return ComponentResult(
        '$algorithm', {"data": out}, {"lineage": lineage}, contract(params, table),
        params.model_dump(mode="json"), {"rows": table.num_rows}, {}, [],
    ).stamped()


def evidence(input_table, outputs, sidecars, params):
    data = outputs["data"]
    roles = table_roles(input_table)
    return {
        "published": data.to_pandas(),
        "audit": lineage_audit(input_table, data, sidecars["lineage"], roles.names),
    }


def example(seed):
    rng = np.random.default_rng(seed)
    roles = TableRoles.of([ColumnRole("x", Role.QUASI_IDENTIFIER, Kind.NUMERIC),
                           ColumnRole("note", Role.SENSITIVE, Kind.NOMINAL)])
    n = int(rng.integers(5, 30))
    t = pa.table({"x": pa.array(rng.integers(0, 1000, n), pa.int64()),
                  "note": pa.array([f"n{i}" for i in range(n)])})
    return attach_roles(t, roles), RoundParams(step=int(rng.integers(2, 50)))


ALGORITHM = Algorithm(
    name='$algorithm', title='$title', params=RoundParams,
    run=f"{__name__}:run", contract=f"{__name__}:contract", evidence=f"{__name__}:evidence",
    example=f"{__name__}:example", headline=(Metric("rows", "rows"),),
    outputs=("data",), sidecars=("lineage",),
)
FAMILY = Family(
    name='$family', package=__name__, algorithms=(ALGORITHM,),
    kinds=(KindCheck(RoundedTo, f"{__name__}:check_rounded", "published"),),
)
''')


def family_source(family: str, algorithm: str, kind: str, title: str, prefix: str) -> str:
    """The module's text: family ``family`` with one algorithm ``algorithm`` whose contract is
    ``{prefix}1`` (a partition), ``{prefix}2`` (every value of the QI a multiple of ``step``, of
    the family's own kind ``kind``) and ``{prefix}3`` (the other columns unchanged)."""
    return _SOURCE.substitute(
        family=family, algorithm=algorithm, kind=kind, title=title, prefix=prefix
    )
