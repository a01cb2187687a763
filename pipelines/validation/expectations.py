"""Great Expectations (1.x) form of a release's contract: one expectation per guarantee, plus
built-in expectations for what GX covers natively (schema, nulls, value sets, row count).

One source of truth. Every guarantee expectation calls the same pure checker the CLI uses
(``privfair.components.core.checks.check_guarantee``) through ONE generic table metric,
``privfair.guarantee``, whose value kwargs carry the guarantee as JSON. The expectation classes
are *generated*, one per registered guarantee kind (``privfair.components.core.registry.kind_checks``):
``ExpectKAnonymity``, ``ExpectTCloseness``... (one per kind, a family's own included), their pydantic fields taken from the
guarantee model field for field (the guarantee's ``id`` becomes ``guarantee_id``, because ``id``
is taken by GX). Adding a kind to a family adds its expectation; nothing here changes. The
expectation's result holds ``observed_value``, the checker's ``message``, ``expected``,
``n_offending`` and the ``offending`` groups.

An expectation runs on the evidence frame its kind reads (``KindCheck.frame``: ``published``,
``audit``...); ``compile_suites`` builds one suite per frame. Because GX silently drops
expectations whose class is not registered when a persisted suite is reloaded, ``round_trip``
serialises the suites to JSON, reloads them in a fresh context and raises ``PrivfairError`` if a
suite holds fewer guarantee expectations than the contract declares (``count_declared``).

Importing this module registers the expectations with GX; import it before loading any
persisted suite (``privfair.validation.validate`` does).
"""

from __future__ import annotations

import json
import logging
import math
from abc import abstractmethod
from collections import Counter
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from great_expectations.compatibility import pydantic
from great_expectations.core.expectation_suite import ExpectationSuite
from great_expectations.core.metric_domain_types import MetricDomainTypes
from great_expectations.execution_engine import PandasExecutionEngine
from great_expectations.expectations import core as gxe
from great_expectations.expectations.expectation import BatchExpectation
from great_expectations.expectations.metrics.metric_provider import metric_value
from great_expectations.expectations.metrics.table_metric_provider import TableMetricProvider
from great_expectations.expectations.registry import get_metric_kwargs
from great_expectations.render import (
    LegacyDiagnosticRendererType,
    LegacyRendererType,
    RenderedStringTemplateContent,
)
from great_expectations.render.renderer.renderer import renderer
from great_expectations.validator.metric_configuration import MetricConfiguration

from privfair.components.core.checks import (
    CheckerError,
    CheckResult,
    check_guarantee,
    compose,
    describe_error,
)
from privfair.components.core.registry import families, kind_checks
from privfair.schemas.contracts import SCHEMA_CHECK_ID, Guarantee, kind_of, parse_guarantee
from privfair.schemas.errors import PrivfairError
from privfair.schemas.roles import Role, read_roles

if TYPE_CHECKING:
    from great_expectations.core.expectation_validation_result import (
        ExpectationValidationResult,
    )
    from great_expectations.data_context import AbstractDataContext
    from great_expectations.expectations.expectation import Expectation

GUARANTEE_METRIC = "privfair.guarantee"
#: the id of the validator's built-in checks of the published table's schema (one result)
BUILTIN_ID = SCHEMA_CHECK_ID
META_KEY = "privfair"
PUBLISHED = "published"  # the frame built-in expectations run on
PARTS = "parts"  # the per-part results of by-group guarantees (privfair.components.core.parts)

_BASE_FIELDS = {"id", "kind"}


def _jsonable(obj: Any) -> Any:
    """Plain JSON types (numpy scalars -> Python, tuples -> lists, NaN -> None)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return _jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


# --- the one generic metric -----------------------------------------------------------------
class GuaranteeMetric(TableMetricProvider):
    """Runs the guarantee's pure checker on the batch; the value is ``CheckResult.to_dict()``."""

    metric_name = GUARANTEE_METRIC
    value_keys = ("guarantee",)

    @metric_value(engine=PandasExecutionEngine)
    def _pandas(
        cls,
        execution_engine: PandasExecutionEngine,
        metric_domain_kwargs: dict,
        metric_value_kwargs: dict,
        metrics: dict,
        runtime_configuration: dict,
    ) -> dict:
        df, _, _ = execution_engine.get_compute_domain(
            metric_domain_kwargs, domain_type=MetricDomainTypes.TABLE
        )
        families()  # every kind registered before parsing
        g = parse_guarantee(json.loads(metric_value_kwargs["guarantee"]))
        if "__result" in df.columns:  # checked part by part on the engine: compose
            return _composed(g, metric_value_kwargs["guarantee"], df)
        # the batch is the frame the guarantee's checker reads
        frame = kind_checks()[g.kind].frame
        try:
            result = check_guarantee(g, {frame: df})
            return _jsonable(result.to_dict())
        except Exception as e:  # no verdict: ``to_check_result`` raises ``CheckerError``
            return {"raised": describe_error(e), "id": g.id, "kind": g.kind}


def _composed(g, text: str, df) -> dict:
    """The verdict of a guarantee checked in parts from the per-part results frame (``PARTS``):
    a by-group rule's results composed, a whole-table rule decided from the parts' summaries."""
    # the same guarantee, whatever order its JSON lists a mapping's keys in
    same = [
        t for t in df["__guarantee"].unique() if t == text or parse_guarantee(json.loads(t)) == g
    ]
    rows = df[df["__guarantee"].isin(same)].drop_duplicates("__part")
    raised = rows["__raised"].dropna()
    if len(raised):
        return {
            "raised": f"in part(s) {sorted(rows.loc[raised.index, '__part'])[:5]}: "
            f"{raised.iloc[0]}",
            "id": g.id,
            "kind": g.kind,
        }
    parts = [
        {"part": int(p), "retained": int(n), "result": json.loads(r)}
        for p, n, r in zip(rows["__part"], rows["__retained"], rows["__result"], strict=True)
    ]
    if not parts:
        return _jsonable(CheckResult.failed(g, "no part results for this guarantee").to_dict())
    return _jsonable(compose(g, parts).to_dict())


# --- the generic guarantee expectation --------------------------------------------------------
class GuaranteeExpectation(BatchExpectation):
    """Base of every guarantee expectation: each generated subclass sets ``guarantee_model``
    and carries the guarantee's fields; everything else is generic."""

    guarantee_id: str = ""

    args_keys: ClassVar[tuple[str, ...]] = ()
    success_keys: ClassVar[tuple[str, ...]] = ()

    @property
    @abstractmethod
    def guarantee_model(self) -> type:  # pragma: no cover - overridden by a ClassVar
        """The ``privfair.schemas.contracts`` model this expectation mirrors."""

    @classmethod
    def guarantee_kind(cls) -> str:
        return kind_of(cls.guarantee_model)  # type: ignore[arg-type]

    @classmethod
    def mirrored_fields(cls) -> list[str]:
        return [f for f in cls.guarantee_model.model_fields if f not in _BASE_FIELDS]  # type: ignore[attr-defined]

    @classmethod
    def batch(cls) -> str:
        return kind_checks()[cls.guarantee_kind()].frame

    @classmethod
    def from_guarantee(cls, g, **kwargs: Any) -> GuaranteeExpectation:
        data = g.model_dump(exclude=_BASE_FIELDS)
        return cls(guarantee_id=g.id, **data, **kwargs)

    def to_guarantee(self):
        data = {f: getattr(self, f) for f in self.mirrored_fields()}
        return self.guarantee_model.model_validate({"id": self.guarantee_id, **data})  # type: ignore[attr-defined]

    @pydantic.root_validator(skip_on_failure=True)
    def _valid_guarantee(cls, values: dict) -> dict:
        model = cls.guarantee_model
        data = {f: values.get(f) for f in cls.mirrored_fields() if f in values}
        model.model_validate({"id": values.get("guarantee_id", ""), **data})  # type: ignore[attr-defined]
        return values

    def get_validation_dependencies(self, execution_engine=None, runtime_configuration=None):
        deps = super().get_validation_dependencies(
            execution_engine=execution_engine, runtime_configuration=runtime_configuration
        )
        domain = get_metric_kwargs(
            GUARANTEE_METRIC, configuration=self.configuration, runtime_configuration=None
        )["metric_domain_kwargs"]
        deps.set_metric_configuration(
            GUARANTEE_METRIC,
            MetricConfiguration(
                metric_name=GUARANTEE_METRIC,
                metric_domain_kwargs=domain,
                metric_value_kwargs={"guarantee": self.to_guarantee().model_dump_json()},
            ),
        )
        return deps

    # Data Docs: a readable line per guarantee instead of GX's generic kwargs dump
    @classmethod
    @renderer(renderer_type=LegacyRendererType.PRESCRIPTIVE)
    def _prescriptive_renderer(cls, configuration=None, result=None, runtime_configuration=None):
        kwargs = dict(configuration.kwargs) if configuration is not None else {}
        args = []
        for f in cls.mirrored_fields():
            v = kwargs[f] if f in kwargs else cls.__fields__[f].default
            if isinstance(v, list | tuple) and len(v) > 4:
                v = f"<{len(v)} columns>"
            args.append(f"{f}={v}")
        styling = (runtime_configuration or {}).get("styling", {})
        return [
            RenderedStringTemplateContent(
                content_block_type="string_template",
                string_template={
                    "template": "Guarantee $guarantee_id $kind ($args): $doc",
                    "params": {
                        "guarantee_id": kwargs.get("guarantee_id") or "-",
                        "kind": cls.guarantee_kind(),
                        "args": ", ".join(args),
                        "doc": (cls.__doc__ or "").strip(),
                    },
                    "styling": styling,
                },
            )
        ]

    @classmethod
    @renderer(renderer_type=LegacyDiagnosticRendererType.OBSERVED_VALUE)
    def _diagnostic_observed_value_renderer(
        cls, configuration=None, result=None, runtime_configuration=None
    ) -> str:
        r = (result.result if result is not None else None) or {}
        if not r:
            return "--"
        text = f"{r.get('message', '')} (observed: {r.get('observed_value')})"
        offending, n = r.get("offending") or [], int(r.get("n_offending") or 0)
        if offending and not result.success:
            more = f" and {n - 5} more" if n > 5 else ""
            text += f"; offending: {offending[:5]}{more}"
        return text

    def _validate(self, metrics: dict, runtime_configuration=None, execution_engine=None) -> dict:
        r = metrics[GUARANTEE_METRIC]
        if "raised" in r:  # the checker raised: no verdict (see ``to_check_result``)
            return {
                "success": False,
                "result": {
                    "raised": r["raised"],
                    "message": f"the checker raised {r['raised']}",
                    "guarantee_id": r["id"],
                    "kind": r["kind"],
                },
            }
        return {
            "success": bool(r["passed"]),
            "result": {
                "observed_value": r["observed"],
                "expected": r["expected"],
                "message": r["message"],
                "n_offending": r["n_offending"],
                "offending": r["offending"],
                "guarantee_id": r["id"],
                "kind": r["kind"],
            },
        }


def _class_name(kind: str) -> str:
    return "Expect" + "".join(part.capitalize() for part in kind.split("_"))


def generate(model: type[Guarantee]) -> type[GuaranteeExpectation]:
    """The expectation class of one guarantee model: its fields, defaults and docstring."""
    annotations: dict[str, Any] = {"guarantee_model": ClassVar[type]}
    namespace: dict[str, Any] = {
        "__doc__": (model.__doc__ or "").strip(),
        "__module__": __name__,
        "guarantee_model": model,
    }
    for name, f in model.model_fields.items():
        if name in _BASE_FIELDS:
            continue
        annotations[name] = f.annotation
        if not f.is_required():
            namespace[name] = f.default
    namespace["__annotations__"] = annotations
    return type(_class_name(kind_of(model)), (GuaranteeExpectation,), namespace)


EXPECTATIONS: dict[str, type[GuaranteeExpectation]] = {
    kind: generate(kc.model) for kind, kc in kind_checks().items()
}
"""Guarantee kind -> its generated expectation class."""

GUARANTEE_TYPES: dict[str, str] = {cls.expectation_type: k for k, cls in EXPECTATIONS.items()}
"""GX expectation type -> guarantee kind."""


# --- suites -----------------------------------------------------------------------------------
def expectation_for(g, index: int | None = None) -> GuaranteeExpectation:
    """The expectation of guarantee ``g``; ``index`` (its contract position) goes in ``meta``."""
    if g.kind not in EXPECTATIONS:
        raise PrivfairError(f"no expectation for guarantee kind '{g.kind}' in this version")
    meta = {META_KEY: {"index": index}} if index is not None else None
    return EXPECTATIONS[g.kind].from_guarantee(g, meta=meta)


def expected_columns(contract: list, input_table: pa.Table) -> list[str]:
    """The columns a table release must publish: the quasi-identifiers its contract names (the
    input's QIs when none is named) followed by every other column of the input except private
    ones (protected attribute, label, sensitive, kept unlabelled columns...)."""
    roles = read_roles(input_table)
    qis: list[str] = []
    for g in contract:
        for q in getattr(g, "quasi_identifiers", ()) or ():
            if q not in qis:
                qis.append(q)
    if not qis:
        qis = list(roles.quasi_identifiers)
    rest = [
        c.name
        for c in roles
        if c.role not in (Role.QUASI_IDENTIFIER, Role.PRIVATE) and c.name not in qis
    ]
    return qis + rest


def builtin_expectations(
    contract: list, published_table: pa.Table, input_table: pa.Table, lineage: pa.Table | None
) -> list[Expectation]:
    """Built-in GX expectations on the published table: the column set, no nulls in the role
    columns that had none in the input, the protected attributes' and labels' values within those of the input, their
    types equal to the input's, and (with a lineage sidecar) one published row per lineage row."""
    roles = read_roles(input_table)
    cols = expected_columns(contract, input_table)
    meta = {META_KEY: {"builtin": True}}
    out: list[Expectation] = [
        gxe.ExpectTableColumnsToMatchSet(column_set=cols, exact_match=True, meta=meta)
    ]
    if lineage is not None:
        out.append(gxe.ExpectTableRowCountToEqual(value=int(lineage.num_rows), meta=meta))
    # role columns stay complete where the input was (a QI whose group value is a missing
    # value may publish nulls only if the input had them)
    role_cols = [
        c
        for c in cols
        if c not in roles
        or (
            roles[c].role in (Role.QUASI_IDENTIFIER, Role.PROTECTED, Role.LABEL)
            and input_table.column(c).null_count == 0
        )
    ]
    out += [gxe.ExpectColumnValuesToNotBeNull(column=c, meta=meta) for c in role_cols]
    fixed: dict[str, tuple] = {}
    for g in contract:
        fixed |= g.published_values()
    for c in roles:
        if c.role not in (Role.PROTECTED, Role.LABEL):
            continue
        if c.name in fixed:  # published in a form the contract fixes (a PD attribute's groups)
            values = sorted(fixed[c.name])
            out.append(gxe.ExpectColumnValuesToBeInSet(column=c.name, value_set=values, meta=meta))
            continue
        distinct = pc.unique(input_table.column(c.name)).to_pylist()
        values = sorted(v for v in distinct if v is not None)
        out.append(gxe.ExpectColumnValuesToBeInSet(column=c.name, value_set=values, meta=meta))
        dtype = input_table.schema.field(c.name).type
        if pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_boolean(dtype):
            out.append(
                gxe.ExpectColumnValuesToBeOfType(
                    column=c.name, type_=dtype.to_pandas_dtype().__name__, meta=meta
                )
            )
    return out


def compile_suites(
    contract: list,
    published_table: pa.Table,
    input_table: pa.Table,
    lineage: pa.Table | None,
    builtins: bool = True,
    parts: frozenset[int] = frozenset(),
) -> dict[str, ExpectationSuite]:
    """``{frame: suite}``: one expectation per guarantee of ``contract`` on the evidence frame
    its checker reads (on ``PARTS`` for the contract positions in ``parts``: checked part by
    part), plus (``builtins``: a row-level release) the built-ins on the ``published`` frame.
    Raises ``PrivfairError`` for a kind with no expectation."""
    missing = sorted({g.kind for g in contract if g.kind not in EXPECTATIONS})
    if missing:
        raise PrivfairError(f"no expectation for guarantee kind(s) {missing} in this version")
    per_frame: dict[str, list] = {PUBLISHED: []}
    for i, g in enumerate(contract):
        e = expectation_for(g, i)
        per_frame.setdefault(PARTS if i in parts else e.batch(), []).append(e)
    if builtins:
        per_frame[PUBLISHED] += builtin_expectations(
            contract, published_table, input_table, lineage
        )
    return {
        b: ExpectationSuite(name=f"privfair_{b}", expectations=exps)
        for b, exps in per_frame.items()
    }


def count_declared(contract: list, parts: frozenset[int] = frozenset()) -> dict[str, Counter]:
    """Per frame, how many guarantee expectations of each kind the contract requires (those at
    the positions in ``parts`` on ``PARTS``)."""
    checks = kind_checks()
    out: dict[str, Counter] = {}
    for i, g in enumerate(contract):
        if g.kind not in checks:
            raise PrivfairError(f"no checker for guarantee kind '{g.kind}' in this version")
        frame = PARTS if i in parts else checks[g.kind].frame
        out.setdefault(frame, Counter())[g.kind] += 1
    return out


def count_held(suite: ExpectationSuite) -> Counter:
    """Guarantee expectations in ``suite``, by guarantee kind."""
    return Counter(
        GUARANTEE_TYPES[e.expectation_type]
        for e in suite.expectations
        if e.expectation_type in GUARANTEE_TYPES
    )


def check_suites(
    contract: list,
    suites: dict[str, ExpectationSuite],
    dropped: dict[str, list] | None = None,
    parts: frozenset[int] = frozenset(),
) -> None:
    """Raise ``PrivfairError`` when a suite holds fewer guarantee expectations than ``contract``
    declares for its batch. ``dropped``: GX's messages about expectations it dropped, per suite."""
    declared = count_declared(contract, parts)
    for b, want in declared.items():
        held = count_held(suites[b]) if b in suites else Counter()
        missing = sorted(k for k, n in want.items() if held[k] < n)
        if missing:
            n_held = sum(min(held[k], n) for k, n in want.items())
            why = "; ".join((dropped or {}).get(b, [])) or (
                "is privfair.validation.expectations imported and every kind registered?"
            )
            raise PrivfairError(
                f"suite {b} holds {n_held} of {sum(want.values())} declared guarantees: "
                f"missing kinds {missing} ({why})"
            )


def suites_to_json(suites: dict[str, ExpectationSuite]) -> dict[str, str]:
    """Each suite as the JSON GX persists."""
    return {b: json.dumps(s.to_json_dict(), sort_keys=True) for b, s in suites.items()}


def load_suites(
    texts: dict[str, str],
    context: AbstractDataContext | None = None,
    dropped: dict[str, list] | None = None,
) -> dict[str, ExpectationSuite]:
    """Reload suites from their JSON the way GX loads a persisted suite (its expectations store,
    which drops an expectation whose type is not registered with only a log line). Those log
    lines are collected into ``dropped`` (per suite) instead of being printed."""
    if context is None:
        context = new_context()
    store = context.expectations_store
    suites = {}
    for b, text in texts.items():
        with _captured_drops() as messages:
            suites[b] = store.deserialize_suite_dict(store.deserialize(text))
        if dropped is not None:
            dropped[b] = messages
    return suites


def round_trip(
    contract: list,
    suites: dict[str, ExpectationSuite],
    context: AbstractDataContext | None = None,
    parts: frozenset[int] = frozenset(),
) -> dict[str, ExpectationSuite]:
    """Serialise ``suites``, reload them in ``context`` (a fresh one by default), check that
    nothing was lost or changed, and return the reloaded suites."""
    dropped: dict[str, list] = {}
    reloaded = load_suites(suites_to_json(suites), context, dropped)
    check_suites(contract, reloaded, dropped, parts)
    for b, s in reloaded.items():
        if len(s.expectations) != len(suites[b].expectations):
            raise PrivfairError(
                f"suite {b} holds {len(s.expectations)} of {len(suites[b].expectations)} "
                f"expectations after reloading ({'; '.join(dropped.get(b, []))})"
            )
        for e in s.expectations:
            index = ((e.meta or {}).get(META_KEY) or {}).get("index")
            changed = (
                isinstance(e, GuaranteeExpectation)
                and index is not None
                and e.to_guarantee() != contract[index]
            )
            if changed:
                raise PrivfairError(
                    f"suite {b}: guarantee {contract[index].title} changed in the round "
                    f"trip: {e.to_guarantee()!r}"
                )
    return reloaded


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def _captured_drops():
    """Collect (instead of printing) GX's log lines about expectations it drops on load."""
    log = logging.getLogger("great_expectations.core.expectation_suite")
    handler, propagate = _Capture(), log.propagate
    log.addHandler(handler)
    log.propagate = False
    try:
        yield handler.messages
    finally:
        log.removeHandler(handler)
        log.propagate = propagate


def _no_batch_fingerprint() -> None:
    """GX fingerprints every pandas batch under 1 GB (``HASH_THRESHOLD``) as a batch marker:
    ``hash_pandas_object``, or, for a frame with a list or struct cell (generalised labels),
    a pickle of the whole frame (46 s of the 58 s GX took over a 1M-row dMondrian release).
    The marker is never read by validation, so it is switched off."""
    from great_expectations.execution_engine import pandas_execution_engine as pee

    if hasattr(pee, "HASH_THRESHOLD"):
        pee.HASH_THRESHOLD = 0


def new_context() -> AbstractDataContext:
    """An ephemeral GX context with progress bars off (and no batch fingerprints)."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    _no_batch_fingerprint()

    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    return ctx


def release_context() -> None:
    """Forget the context ``new_context`` made. GX keeps the last one in its module-level
    project manager, and with it every batch's dataframe: the evidence frames of a validation
    (gigabytes at 10M rows) would outlive it into the cost of protection and the report."""
    from great_expectations.data_context.data_context.context_factory import set_context

    set_context(None)


# --- results back to CheckResults -------------------------------------------------------------
def _error(evr: ExpectationValidationResult, typed: bool = False) -> str:
    """The exception message GX recorded for ``evr`` ('' if none). GX 1.x keys
    ``exception_info`` by metric id when a metric raised, or holds one flat record. ``typed``:
    the traceback's last line (``KeyError: 'x'``) where GX recorded one."""
    info = evr.exception_info or {}
    records = [info] if "raised_exception" in info else list(info.values())
    messages = []
    for r in records:
        if not (isinstance(r, dict) and r.get("raised_exception")):
            continue
        lines = str(r.get("exception_traceback") or "").strip().splitlines()
        last = lines[-1].strip() if typed and lines else ""
        messages.append(last if ":" in last else str(r.get("exception_message")))
    return "; ".join(dict.fromkeys(messages))


def _distinct(values: list) -> list:
    out: list = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def to_check_result(evr: ExpectationValidationResult, guarantee=None) -> CheckResult:
    """A GX expectation result as a ``CheckResult``: guarantee expectations carry the checker's
    fields; built-ins get id ``schema``, their expectation type as kind and a message built from
    GX's result (or the exception GX recorded).

    A guarantee expectation whose checker raised (or that holds no result) has no verdict:
    ``CheckerError`` is raised, never a failed ``CheckResult``."""
    cfg = evr.expectation_config
    res = dict(evr.result or {})
    if cfg.type in GUARANTEE_TYPES:
        gid = guarantee.id if guarantee is not None else cfg.kwargs.get("guarantee_id", "")
        kind = GUARANTEE_TYPES[cfg.type]
        raised = res.get("raised") or _error(evr, typed=True) or ("" if res else "no result")
        if raised:
            raise CheckerError([(gid, kind, raised)])
        return CheckResult(
            res.get("guarantee_id", gid),
            res.get("kind", kind),
            bool(evr.success),
            res.get("observed_value"),
            res.get("expected"),
            res.get("message", ""),
            list(res.get("offending") or []),
            int(res.get("n_offending") or 0),
        )

    error = _error(evr)
    kw = {k: v for k, v in cfg.kwargs.items() if k not in ("batch_id", "result_format")}
    column = kw.pop("column", None)
    where = f"column '{column}': " if column else ""
    observed = _jsonable(res.get("observed_value"))
    offending: list[dict] = []
    n_offending = 0
    if error:
        message = f"{where}{error}"
    elif cfg.type == "expect_table_columns_to_match_set":
        mismatched = (res.get("details") or {}).get("mismatched") or {}
        missing, unexpected = mismatched.get("missing", []), mismatched.get("unexpected", [])
        offending = [{"missing": c} for c in missing] + [{"unexpected": c} for c in unexpected]
        n_offending = len(offending)
        message = (
            f"columns missing from the published table: {missing}; not in its schema: {unexpected}"
            if offending
            else f"the {len(observed or [])} published columns match the schema"
        )
    elif "unexpected_count" in res:
        n_offending = int(res.get("unexpected_count") or 0)
        observed = {
            "unexpected_count": n_offending,
            "unexpected_percent": _jsonable(res.get("unexpected_percent")),
        }
        values = _distinct(_jsonable(list(res.get("partial_unexpected_list") or [])))
        offending = [{"column": column, "value": v} for v in values] if n_offending else []
        message = f"{where}{n_offending} of {res.get('element_count')} values unexpected" + (
            f", e.g. {values[:5]}" if n_offending else ""
        )
    elif cfg.type == "expect_table_row_count_to_equal":
        message = f"{observed} published rows; the lineage sidecar has {kw.get('value')}"
    elif cfg.type == "expect_column_values_to_be_of_type":
        message = f"{where}type {observed}, expected {kw.get('type_')}"
    else:
        message = f"{where}observed {observed!r}"
    return CheckResult(
        BUILTIN_ID,
        cfg.type,
        bool(evr.success) and not error,
        observed,
        _jsonable({"column": column, **kw} if column else kw) or None,
        message,
        offending,
        n_offending,
    )


def contract_index(evr: ExpectationValidationResult) -> int | None:
    """The contract position recorded in a guarantee expectation's meta (None for built-ins)."""
    meta = (evr.expectation_config.meta or {}).get(META_KEY) or {}
    return meta.get("index")
