"""How an algorithm is described to the rest of privfair: one ``Algorithm`` per algorithm, one
``Family`` per package, and ``KindCheck`` for each guarantee kind a family brings.

Everything heavy is referenced by a ``"module:attribute"`` string and imported on first use
(``resolve``), so discovering the families (which the Airflow DAG file does on every parse)
imports only pydantic models.

>>> from privfair.components.core.registry import algorithm
>>> algo = algorithm("mdav")
>>> algo.family, algo.outputs, algo.sidecars
('microaggregation', ('data',), ('lineage',))
>>> [g.kind for g in algo.outline(algo.params(k=5))][:2]
['partition', 'group_size_range']
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from privfair.schemas.contracts import Guarantee, kind_of
from privfair.schemas.numbers import finite

__all__ = [
    "Params",
    "Metric",
    "RISK_METRICS",
    "RISK_HEADLINE",
    "Figure",
    "Disclosure",
    "KindCheck",
    "Algorithm",
    "Cost",
    "Family",
    "OptIn",
    "resolve",
]


class Params(BaseModel):
    """Base of every algorithm's parameters: frozen, unknown keys refused, every number finite
    (``privfair.schemas.numbers.finite``: NaN and ±inf are refused, naming the parameter)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="after")
    @classmethod
    def _finite(cls, value: Any) -> Any:
        return finite(value)


class OptIn(BaseModel):
    """Mixin: the fields named in ``opt_in`` are written out (``model_dump``, hence a release's
    manifest, params and contract) only when set away from their default. An option added
    later with a default that keeps the old behaviour then leaves every existing release's
    bytes as they were; a spec that sets it is recorded with it.

    >>> class P(OptIn):
    ...     opt_in = ("x",)
    ...     x: bool = False
    >>> P().model_dump(), P(x=True).model_dump()
    ({}, {'x': True})
    """

    opt_in: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        for name in self.opt_in:
            if getattr(self, name) == type(self).model_fields[name].default:
                data.pop(name, None)
        return data


def resolve(ref: str | Callable) -> Callable:
    """The object a ``"package.module:attribute"`` reference names (imported on first use)."""
    if callable(ref):
        return ref
    module, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Metric:
    """A headline metric: ``key`` is a dotted path into the run's metrics (``a.b``), ``label``
    what a person reads; ``signed`` marks a value whose sign carries meaning. ``missing``
    states why the value (or a part of it) can be absent (None), for a reader who would
    otherwise see ``None`` with no reason."""

    key: str
    label: str
    missing: str = ""

    def get(self, metrics: Mapping[str, Any]) -> Any:
        v: Any = metrics
        for part in self.key.split("."):
            if not isinstance(v, Mapping) or part not in v:
                return None
            v = v[part]
        return v


#: What every row-level run reports of its published table (``Algorithm.__call__``), functions
#: of that table alone: a row-level family declares them public and shows ``RISK_HEADLINE``.
RISK_METRICS = ("reidentification_risk", "l_diversity")
RISK_HEADLINE = (
    Metric(
        "reidentification_risk.prosecutor.highest",
        "highest prosecutor risk (attacker knows the QIs, protected attribute, known columns)",
    ),
    Metric(
        "reidentification_risk.prosecutor.records_at_highest",
        "share of records at the highest prosecutor risk",
    ),
    Metric("reidentification_risk.marketer", "marketer risk (classes / rows)"),
    Metric("reidentification_risk.uniques", "sample uniques (share of records)"),
)


@dataclass(frozen=True)
class Figure:
    """One figure of a release report: an id, an inline SVG and an HTML caption."""

    name: str
    svg: str
    caption: str


@dataclass(frozen=True)
class Disclosure:
    """What of a release may leave the data owner's area besides its public outputs.

    The release flow builds the *shareable copy* (``privfair export``) from this declaration
    and nothing else: the public outputs, a public manifest and a public report. Every other
    file, metric, figure, warning, timing and validation detail stays in the owner part.

    - ``metrics``: dotted keys (as ``Metric.key``) of the run's metrics that are functions of
      the public outputs, of public parameters or, for a differentially private algorithm, of
      its noisy measurements only (post-processing). A key names a whole sub-tree.
    - ``figures``: names of the figures the public report draws. They are drawn from the public
      manifest and the public outputs alone: the family's figure function is called with
      ``input_table=None`` and no sidecars, and only these names are kept.
    - ``covers`` / ``does_not_cover``: what the guarantee means for a reader of the shareable
      copy, and what it does not promise, in one sentence each (shown in the public report).

    >>> d = Disclosure(metrics=("rows", "privacy.epsilon"))
    >>> d.public_metrics({"rows": 3, "privacy": {"epsilon": 1.0, "rho": 0.1}, "tvd": 0.2})
    {'privacy': {'epsilon': 1.0}, 'rows': 3}
    """

    metrics: tuple[str, ...] = ()
    figures: tuple[str, ...] = ()
    covers: str = ""
    does_not_cover: str = ""

    def public_metrics(self, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """The declared keys of ``metrics`` (nested as in the run's metrics), nothing else."""
        out: dict[str, Any] = {}
        for key in sorted(self.metrics):
            value = Metric(key, key).get(metrics)
            if value is None:
                continue
            *parents, leaf = key.split(".")
            node = out
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        return out


@dataclass(frozen=True)
class Cost:
    """The privacy cost of one release, known before any noise is drawn: ``rho`` (zCDP, what
    the ledger composes), ``epsilon`` and ``delta`` (OpenDP's conversion of ``rho`` at the
    release's delta), per privacy ``unit`` (one ``record`` added or removed).

    >>> Cost(rho=0.01, epsilon=1.0, delta=1e-9).unit
    'record'
    """

    rho: float
    epsilon: float
    delta: float
    unit: str = "record"


@dataclass(frozen=True)
class KindCheck:
    """A guarantee kind with its pure checker.

    ``check``: ``fn(guarantee, frame) -> CheckResult``; ``frame``: the name of the evidence frame
    it reads (``published``, ``audit``...). ``corrupt`` (for the test battery):
    ``fn(guarantee, input_table, outputs, sidecars, rng) -> (outputs, sidecars)`` returning a
    release that violates the guarantee, or None where no such release exists.
    ``unbreakable``: for a kind without ``corrupt``, why no published file can break it (its
    checker reads only the parameters and the input).
    ``by_group``: the guarantee holds on a release iff it holds on each part of the release's
    evidence that keeps every group whole (a per-group or per-row rule), so it can be checked
    part by part where the data is (``privfair.components.core.parts``).
    ``summarise`` and ``decide``, for a rule over the whole table (a count, a share, a sum):
    ``summarise(guarantee, frame) -> DataFrame`` reduces a part's evidence to a small frame of
    additive rows (counts or sums per key), and ``decide(guarantee, summary) -> CheckResult``
    gives the verdict from the parts' summaries concatenated; the checker is
    ``decide(g, summarise(g, frame))``, so a release checked in parts gets exactly the whole
    table's verdict (sums of floats up to their rounding).
    """

    model: type[Guarantee]
    check: str
    frame: str
    corrupt: str | None = None
    unbreakable: str = ""  # why no release can break it, when ``corrupt`` is None
    by_group: bool = False
    summarise: str | None = None
    decide: str | None = None

    @property
    def kind(self) -> str:
        return kind_of(self.model)

    @property
    def in_parts(self) -> bool:
        """Whether a release cut into parts (``privfair.components.core.parts``) checks it there."""
        return self.by_group or self.summarise is not None


@dataclass(frozen=True)
class Algorithm:
    """One algorithm, as every driver sees it.

    - ``params``: its ``Params`` model;
    - ``run``: ``fn(table, params) -> ComponentResult``;
    - ``contract``: ``fn(params, table | None) -> list[Guarantee]``, the guarantees the algorithm
      owes for ``params`` on ``table``, computed from the spec, the params and the input only.
      With ``table=None`` it is the data-free *outline* (ids and kinds; data-dependent values
      are placeholders) that lets an orchestrator name its checks before reading data;
    - ``evidence``: ``fn(input_table, outputs, sidecars, params) -> {frame name: DataFrame}``,
      what its checkers read;
    - ``evidence_parts``: ``fn(input_table, outputs, sidecars, params, contract) ->
      EvidenceParts | None`` (``privfair.components.core.parts``): the release's evidence cut into parts
      that keep every group whole, for its ``by_group`` kinds to be checked part by part on the
      engine; None where the release cannot be cut so (the validator then builds the whole
      evidence on the driver);
    - ``example``: ``fn(seed) -> (table, params)``, a small valid input for the test battery;
    - ``headline``: the metrics a person looks at first; ``figures``:
      ``fn(manifest, outputs, input_table, sidecars) -> list[Figure]`` for the report;
    - ``input_measures``: ``fn(name, params as JSON data, input_table) -> dict``, what the
      owner's report reads from the params and the input alone (reruns of the algorithm, on at
      most ``privfair.components.core.inputs.RERUN_ROWS`` rows): a run measures it beside the release
      (``privfair.release.beside``) and keeps it in the owner's manifest under ``input_measures``,
      where ``figures`` reads it (and measures it itself where it is missing);
    - ``outputs`` (published) and ``sidecars`` (internal, never distributed): table names;
    - ``row_level``: each row of the (first) public output is one input row, mapped back by the
      ``lineage`` sidecar, so the validator also checks that output's columns, types and row
      count against the input (a table release), and its run reports the re-identification
      risk and l-diversity of that output (``privfair.components.core.risk.risk_metrics``:
      metrics ``reidentification_risk`` and ``l_diversity``, functions of the published table
      alone). False for an algorithm that publishes new, aggregate tables (a report): its own
      contract then states what its outputs hold;
    - ``public``: what besides its outputs may be handed out (``Disclosure``): nothing unless
      declared;
    - ``replayable``: the same input and params give byte-identical outputs. False for a
      differentially private algorithm, whose noise comes from a cryptographic generator that
      takes no seed (a noise seed in a spec would let anyone who reads the spec subtract the
      noise). A release is still never re-drawn: its version is fixed by the spec, the input
      and the code, so a re-run finds it published and spends no budget.
    - ``cost``: ``fn(params, table) -> Cost`` for a differentially private algorithm, its
      privacy cost from the params and the input's schema only (never its values), equal to
      what the run's ``privacy.rho`` metric reports; None for an algorithm that is not DP.
    - ``counts_input``: its run, its evidence and its owner's measures read the input only
      through the engine's counts (``group_counts``, null and row counts of a
      ``privfair.components.core.engine.SparkFrame``), never a column's values; on the Spark
      engine a file input of such an algorithm is read by the executors and never held by
      the driver (``privfair.run.flow.on_cluster``). True or False, or ``module:function``
      of the params for an algorithm where that depends on them (ATR's ``decisions: model``
      fits a classifier on the records): ``reads_counts_only`` answers for given params.
    """

    name: str
    title: str
    params: type[Params]
    run: str
    contract: str
    evidence: str
    example: str
    headline: tuple[Metric, ...] = ()
    figures: str | None = None
    input_measures: str | None = None
    outputs: tuple[str, ...] = ("data",)
    sidecars: tuple[str, ...] = ()
    paper: str = ""
    family: str = ""
    row_level: bool = True
    replayable: bool = True
    public: Disclosure = field(default_factory=Disclosure)
    cost: str | None = None
    evidence_parts: str | None = None
    counts_input: bool | str = False

    def reads_counts_only(self, params: Params) -> bool:
        """Whether a run with ``params`` reads its input only through engine counts
        (``counts_input``, or its function's answer for ``params``)."""
        if isinstance(self.counts_input, str):
            return bool(resolve(self.counts_input)(params))
        return self.counts_input

    def privacy_cost(self, params: Params, table=None) -> Cost | None:
        """What one release with ``params`` on ``table`` (its schema) spends, before it runs;
        None for an algorithm that is not differentially private."""
        return None if self.cost is None else resolve(self.cost)(params, table)

    def measure_input(self, params: Params, table) -> dict | None:
        """``input_measures`` of ``params`` on ``table``; None where the algorithm has none."""
        if self.input_measures is None:
            return None
        return resolve(self.input_measures)(self.name, params.model_dump(mode="json"), table)

    def outline(self, params: Params) -> list[Guarantee]:
        return list(resolve(self.contract)(params, None))

    def required_contract(self, params: Params, table) -> list[Guarantee]:
        return list(resolve(self.contract)(params, table))

    def __call__(self, table, params: Params):
        """Run the algorithm on ``table``; what ingest noted in the input's schema metadata for
        the owner (``inputs.OWNER_ONLY_METADATA``: the dropped columns and why) is in none of
        its outputs, whatever the family copied from its input."""
        from privfair.components.core.inputs import without_owner_metadata

        result = resolve(self.run)(table, params)
        result.outputs = {k: without_owner_metadata(t) for k, t in result.outputs.items()}
        result.sidecars = {k: without_owner_metadata(t) for k, t in result.sidecars.items()}
        if self.row_level and result.outputs:
            # every row-level family reports what an attacker measures on its published table
            # (a function of that table alone: its roles name the attacker's background)
            from privfair.components.core.risk import risk_metrics

            result.metrics = {**result.metrics, **risk_metrics(next(iter(result.outputs.values())))}
        return result


@dataclass(frozen=True)
class Family:
    """One package of algorithms: its descriptors, its own guarantee kinds, and per built-in
    dataset the role overrides its algorithms need (``{dataset: {column: ColumnSpec data}}``)."""

    name: str
    package: str
    algorithms: tuple[Algorithm, ...]
    kinds: tuple[KindCheck, ...] = ()
    dataset_roles: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(
        default_factory=lambda: MappingProxyType({})
    )
