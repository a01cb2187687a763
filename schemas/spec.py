"""The pipeline spec envelope: one YAML file per release, loaded into a validated object.

This module validates what every spec shares (name, dataset, schedule, the shape of the
component and guarantee entries) and names no algorithm. The component's parameters and the
demanded guarantees are typed by the algorithm's descriptor (``privfair.spec.catalogue.resolve``),
which attaches them to the spec (``PipelineSpec.params`` / ``PipelineSpec.demands``).

Every mistake becomes a ``SpecError`` naming the dotted key (``component.params.tau``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import date
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from privfair.schemas.errors import SpecError
from privfair.schemas.roles import Kind, Role

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
#: The schedule presets a spec may name, each with its cron (``@once``: run once, no cron). The
#: one table of them: the spec's validation, the orchestrators' schedules and the partitions'
#: schedule rule read it.
CRON_PRESETS: dict[str, str | None] = {
    "@once": None,
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_Value = str | int | float | bool


class Impute(_Model):
    """Fill a column's nulls: with its ``median`` or ``mean`` (numeric columns), its ``mode``
    (the most frequent value; ties go to the smallest), or a given ``value``."""

    impute: Literal["median", "mean", "mode", "value"]
    value: _Value | None = None

    @model_validator(mode="after")
    def _value_given(self) -> Impute:
        if (self.impute == "value") != (self.value is not None):
            raise ValueError("give 'value' with 'impute: value', and only then")
        return self


NullPolicy = Literal["keep", "refuse", "drop"] | Impute


class ColumnSpec(_Model):
    """The role of one column. ``favoured``, ``unfavoured`` and ``positive`` take one value or a
    list of values (a protected attribute's favoured or protected values, a label's desirable
    values). ``nulls`` overrides the dataset's null policy for this column. ``known: true``
    says an attacker may know the column's value of a person (a pass-through column published
    unchanged): the re-identification risk and the l-diversity are measured over an attacker
    background that holds it, besides the quasi-identifiers and the protected attribute
    (``privfair.components.core.risk``)."""

    role: Role
    kind: Kind = Kind.NUMERIC
    favoured: _Value | list[_Value] | None = None
    unfavoured: _Value | list[_Value] | None = None
    positive: _Value | list[_Value] | None = None
    domain: list[str | int | float | None] | None = None
    nulls: NullPolicy | None = None
    known: bool = False

    @model_serializer(mode="wrap")
    def _known_when_set(self, handler):
        """A column not marked ``known`` dumps as it did before the key existed (the specs'
        fingerprints, hence the versions of their releases, stay as they were)."""
        data = handler(self)
        if isinstance(data, dict) and not data.get("known"):
            data.pop("known", None)
        return data


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class SourceSpec(_Model):
    """A table read from a database or a lakehouse (``privfair.io.connectors``).

    - ``sql``: ``url`` (``postgresql://USER@HOST:PORT/DB`` or ``sqlite:///PATH``, through ADBC)
      or ``conn_id`` (a connection's URI: Airflow's ``AIRFLOW_CONN_<ID>`` variable or
      Connection), and ``table`` (``SCHEMA.NAME``) or ``query`` (one ``SELECT``);
    - ``iceberg``: ``catalog`` (a SQL catalog's URI: ``sqlite:///PATH`` or
      ``postgresql://...``; ``catalog_name``, default ``privfair``, the name it keeps the
      tables under), ``warehouse`` (its warehouse URI) and ``table`` (``NS.NAME``),
      pinned by ``snapshot`` (an id) or ``tag`` (a name), else its current snapshot;
    - ``delta``: ``url`` of the table, pinned by ``version``, else its latest;
    - ``file``: ``url`` of a CSV or Parquet file on any pyarrow filesystem (``file://``,
      ``s3://``, ``gs://``, ``hdfs://``...), ``format`` else inferred from the suffix;
    - ``memory``: the table handed to the Python API (``privfair.api.run``), an Arrow
      table or a pandas or polars frame, fingerprinted by its content; ``dataset`` names the
      private dataset it holds (a name, or the atoms of ``privfair.io.identity``), which the
      ledger accounts it against: without it, a DP release or one under ``republish:
      refuse`` is refused. Its roles come from
      ``columns`` (else from the table's own field metadata). A release of it is re-checked by
      passing the same table again (``privfair.api.validate``): the CLI has no table to read.

    ``${VAR}`` in a URL is taken from the environment when the source is read; a password
    written into a URL is refused: credentials come from the environment (``${VAR}``,
    ``PGPASSWORD``), an Airflow Connection or a Dagster resource, never from the spec.
    """

    kind: Literal["sql", "iceberg", "delta", "file", "memory"]
    url: str | None = None
    conn_id: str | None = None
    table: str | None = None
    query: str | None = None
    catalog: str | None = None
    catalog_name: str | None = None
    warehouse: str | None = None
    snapshot: int | None = None
    tag: str | None = None
    version: int | None = Field(default=None, ge=0)
    format: Literal["csv", "parquet"] | None = None
    dataset: str | list[str] | None = None

    @model_validator(mode="after")
    def _fields_of_kind(self) -> SourceSpec:
        allowed = {
            "sql": {"url", "conn_id", "table", "query"},
            "iceberg": {"catalog", "catalog_name", "warehouse", "table", "snapshot", "tag"},
            "delta": {"url", "version"},
            "file": {"url", "format"},
            "memory": {"dataset"},
        }
        _only_keys_of_kind(self, allowed, "source")
        need: list[tuple[str, ...]] = {
            "sql": [("url", "conn_id"), ("table", "query")],
            "iceberg": [("catalog",), ("table",)],
            "delta": [("url",)],
            "file": [("url",)],
            "memory": [],
        }[self.kind]
        for group in need:
            n = sum(getattr(self, k) is not None for k in group)
            if n != 1:
                what = " or ".join(f"'{k}'" for k in group)
                raise ValueError(
                    f"a {self.kind} source needs {'exactly one of ' if len(group) > 1 else ''}{what}"
                )
        if self.snapshot is not None and self.tag is not None:
            raise ValueError("pin an iceberg source by 'snapshot' or by 'tag', not both")
        for k in ("url", "catalog", "warehouse"):
            v = getattr(self, k)
            if v is not None and _literal_password(v):
                raise ValueError(
                    f"'{k}' holds a password: give it as ${{VAR}} (from the environment), "
                    "PGPASSWORD, a conn_id or a resource, never in the spec"
                )
        return self


def _only_keys_of_kind(model: BaseModel, allowed: dict[str, set[str]], what: str) -> None:
    """``ValueError`` naming the first key ``model`` gives that its ``kind`` does not take."""
    kind = model.kind  # type: ignore[attr-defined]
    given = {k for k in type(model).model_fields if k != "kind" and getattr(model, k) is not None}
    extra = sorted(given - allowed[kind])
    if extra:
        raise ValueError(f"'{extra[0]}' is not a key of {_a(kind)} {what}")


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def _literal_password(url: str) -> bool:
    """Whether ``url``'s user-info holds a password that is not a ``${VAR}`` reference."""
    m = re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://([^/@]*)@", url)
    if not m or ":" not in m.group(1):
        return False
    password = m.group(1).split(":", 1)[1]
    return _ENV.fullmatch(password) is None


class CsvSpec(_Model):
    """How a CSV input is written (``dataset.csv``): the field ``delimiter`` (one character,
    default ``,``), the ``quote`` character (default ``"``; ``false``: no quoting) and the
    text ``encoding`` (a Python codec name, default ``utf-8``). Read by pyarrow's CSV reader
    for a ``path`` CSV and a ``source: {kind: file}`` one.

    >>> CsvSpec(delimiter=";", encoding="latin-1").delimiter
    ';'
    """

    delimiter: str = ","
    quote: str | Literal[False] = '"'
    encoding: str = "utf-8"

    @field_validator("delimiter")
    @classmethod
    def _one_char(cls, v: str) -> str:
        if len(v) != 1 or v in "\r\n":
            raise ValueError(f"must be one character other than a line break, not {v!r}")
        return v

    @field_validator("quote")
    @classmethod
    def _quote(cls, v: str | bool) -> str | bool:
        if v is not False and (len(v) != 1 or v in "\r\n"):
            raise ValueError(f"must be one character (or false: no quoting), not {v!r}")
        return v

    @field_validator("encoding")
    @classmethod
    def _codec(cls, v: str) -> str:
        import codecs

        try:
            codecs.lookup(v)
        except LookupError:
            raise ValueError(
                f"'{v}' is not a known text encoding (utf-8, latin-1, cp1252...)"
            ) from None
        return v

    @model_validator(mode="after")
    def _distinct(self) -> CsvSpec:
        if self.quote is not False and self.quote == self.delimiter:
            raise ValueError("'quote' and 'delimiter' must be different characters")
        return self


class DatasetSpec(_Model):
    """Either a built-in dataset (``name``) or a user file (``path`` + ``columns`` roles).

    With ``name``, ``columns`` overrides the role of the named columns of the built-in dataset
    (each must exist). ``quasi_identifiers`` restricts the QIs to a subset (the others are
    dropped); ``exclude`` drops columns before the component sees the table.

    What happens to the columns no algorithm should release is said explicitly:

    - ``private``: columns with role ``private`` are ``refuse``-d (the default: the run stops,
      naming them) or ``drop``-ped; either way the release guarantees they are in no public
      output (``columns_absent``);
    - ``unlabelled``: columns with role ``ignored``, and columns of a file dataset that
      ``columns`` does not list, are ``refuse``-d (the default), ``drop``-ped or ``keep``-t
      (then they pass through the algorithm unchanged, a guarantee it declares and the
      validator checks cell by cell).

    ``nulls`` is what happens to a null, for every column (a column's own ``nulls`` overrides
    it): ``keep`` (the default: the algorithm's own rules decide, most refuse a null where they
    cannot take one), ``refuse`` (the run stops, naming the column and the count), ``drop``
    (rows with a null there are not released) or ``{impute: median|mean|mode}`` /
    ``{impute: value, value: V}``. What was done is recorded in the owner's manifest
    (``input.nulls``) and report.

    ``csv`` says how a CSV file is written (``CsvSpec``: delimiter, quote, encoding).
    """

    name: str | None = None
    path: str | None = None
    source: SourceSpec | None = None
    format: Literal["csv", "parquet"] | None = None
    columns: dict[str, ColumnSpec] | None = None
    quasi_identifiers: list[str] | None = None
    exclude: list[str] = Field(default_factory=list)
    private: Literal["refuse", "drop"] = "refuse"
    unlabelled: Literal["refuse", "drop", "keep"] = "refuse"
    nulls: NullPolicy = "keep"
    csv: CsvSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _handed_over(cls, data: Any) -> Any:
        # roles and no place: the rows are handed over by the caller (an upstream asset, a
        # task's output, a frame): ``dataset: {columns: ...}`` is ``source: {kind: memory}``
        if (
            isinstance(data, dict)
            and data.get("columns")
            and not any(data.get(k) is not None for k in ("name", "path", "source", "format"))
        ):
            return {**data, "source": {"kind": "memory"}}
        return data

    @model_validator(mode="after")
    def _one_source(self) -> DatasetSpec:
        if sum(x is not None for x in (self.name, self.path, self.source)) != 1:
            raise ValueError(
                "give exactly one of 'name' (a built-in dataset), 'path' (a file) or 'source' "
                "(a database, lakehouse or remote table)"
            )
        if self.path is not None and not self.columns:
            raise ValueError(
                "a dataset given by 'path' needs 'columns' with the role of each column"
            )
        if self.source is not None and self.format is not None:
            raise ValueError("give a source's format as 'source.format'")
        if self.csv is not None:
            fmt = self.source.format if self.source is not None else self.format
            if self.name is not None or (self.source is not None and self.source.kind != "file"):
                raise ValueError("'csv' describes a CSV file: a 'path' or a file source")
            if fmt == "parquet":
                raise ValueError("'csv' describes a CSV file, and the format is parquet")
        return self


class ComponentSpec(_Model):
    """The algorithm (a registered descriptor's name) and its parameters, as plain data."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class ExecutionSpec(_Model):
    """Where the component's blocks run (``privfair.components.core.engine``): ``local`` (this machine,
    ``workers`` processes, default its cores) or ``spark`` (a session on ``master``, default
    ``local[<workers or cores>]``). The engine changes where work runs, never what is
    published, so it is not part of a release's version; ``privfair run --engine`` overrides
    it.

    With ``engine: spark``, ``conf`` holds Spark settings (``spark.executor.memory: 8g``...;
    they override privfair's defaults, ``spark.driver.memory: 4g`` and 8 shuffle
    partitions; ``privfair run --conf k=v`` adds to them) and ``scratch`` a location every
    node of the cluster reads (a shared path, ``hdfs://``, ``s3a://``...) through which the
    blocks reach the executors as Parquet; without it they go as Arrow batches over Spark's
    own connections."""

    engine: Literal["local", "spark"] = "local"
    master: str | None = None
    workers: int | None = Field(default=None, ge=1)
    conf: dict[str, str] = Field(default_factory=dict)
    scratch: str | None = None

    @field_validator("conf", mode="before")
    @classmethod
    def _conf_strings(cls, v: Any) -> Any:
        if isinstance(v, dict):  # YAML reads 8 and true: Spark takes them as text
            return {
                str(k): (str(x).lower() if isinstance(x, bool) else str(x))
                if isinstance(x, str | int | float | bool)
                else x
                for k, x in v.items()
            }
        return v

    @model_validator(mode="after")
    def _master(self) -> ExecutionSpec:
        if self.master is not None and self.engine != "spark":
            raise ValueError("'master' is a Spark master URL: set engine: spark to use it")
        if (self.conf or self.scratch is not None) and self.engine != "spark":
            raise ValueError("'conf' and 'scratch' are Spark settings: set engine: spark")
        return self


class PartitionSpec(_Model):
    """How a spec's input is cut into partitions, each released on its own.

    A time partitioning (``granularity``) cuts on the period of a date or timestamp ``column``:
    a partition's key is the ISO date its period starts on (``day``; ``week``: a Monday;
    ``month``: the 1st), and ``start`` (the first period the orchestrators schedule, aligned the
    same way) is required. A key partitioning (``keys``) cuts on a column's values: a fixed
    list, or ``dynamic`` (the keys are the values found in the input). Every input row must
    belong to one partition (a null in ``column`` is refused at ingest).

    >>> PartitionSpec(column="submitted", granularity="week", start="2026-11-02").granularity
    'week'
    """

    column: str
    granularity: Literal["day", "week", "month"] | None = None
    start: date | None = None
    end: date | None = None
    keys: Literal["dynamic"] | list[str] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> PartitionSpec:
        if (self.granularity is None) == (self.keys is None):
            raise ValueError(
                "give exactly one of 'granularity' (day, week or month: a time partitioning) "
                "or 'keys' (a list of values, or dynamic)"
            )
        if self.granularity is None:
            if self.start is not None or self.end is not None:
                raise ValueError("'start' and 'end' belong to a time partitioning (granularity)")
            if isinstance(self.keys, list):
                if not self.keys or any(not k for k in self.keys):
                    raise ValueError("'keys' must list non-empty values")
                if len(set(self.keys)) != len(self.keys):
                    raise ValueError("'keys' lists a value twice")
            return self
        if self.start is None:
            raise ValueError(f"a {self.granularity}ly partitioning needs 'start' (an ISO date)")
        for name in ("start", "end"):
            d = getattr(self, name)
            if d is not None and not aligned(d, self.granularity):
                raise ValueError(
                    f"'{name}' {d} does not start a {self.granularity} ({_ALIGN[self.granularity]})"
                )
        if self.end is not None and self.end <= self.start:
            raise ValueError(f"'end' {self.end} must come after 'start' {self.start}")
        return self


_ALIGN = {"day": "any date", "week": "a Monday", "month": "the 1st of a month"}


def aligned(d: date, granularity: str) -> bool:
    """Whether ``d`` is the first day of a ``granularity`` period (weeks start on Monday)."""
    return (
        granularity == "day"
        or (granularity == "week" and d.weekday() == 0)
        or (granularity == "month" and d.day == 1)
    )


def _positive(name: str, v: float | None) -> float | None:
    if v is not None and (not math.isfinite(v) or v <= 0):
        raise ValueError(f"'{name}' must be a finite number above 0, not {v}")
    return v


class BudgetSpec(_Model):
    """The privacy budget of every differentially private release of a dataset, kept in a
    persistent ledger (``privfair.budget.ledger``) across runs.

    Either ``rho`` (a zCDP budget: releases compose by adding their rho) or ``epsilon`` and
    ``delta`` (an (epsilon, delta)-DP budget: the releases' rhos are added, then converted
    to (epsilon, delta) at this ``delta`` by OpenDP, which is tighter than adding epsilons).
    ``per``: ``partition`` (the default for a partitioned spec) gives each partition the whole
    budget (parallel composition: the partitions are disjoint sets of records), ``dataset``
    one budget for all releases whatever rows they read (a privacy unit that spans
    partitions). The first budgeted release of a dataset records its total and ``per`` as the
    dataset's cap: a later spec may declare less, never more (``privfair.budget.ledger``).
    ``ledger`` is the ledger's URL (``sqlite:///PATH`` or ``postgresql://...``, ``${VAR}``
    taken from the environment; default: the data owner's own, ``$XDG_STATE_HOME/privfair/
    ledger.sqlite``, whatever the store) and ``dataset`` a name the dataset is also known by
    (``privfair.io.identity``: an alias shared with frames in memory; the file, table or
    lakehouse table it reads is its identity whatever the spec calls it). Neither the total
    nor the ledger is part of what a release publishes, so neither is part of its version.
    """

    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    per: Literal["partition", "dataset"] | None = None
    ledger: str | None = None
    dataset: str | None = None

    @model_validator(mode="after")
    def _one_budget(self) -> BudgetSpec:
        _positive("epsilon", self.epsilon)
        _positive("rho", self.rho)
        if self.delta is not None and (not math.isfinite(self.delta) or not 0 < self.delta < 1):
            raise ValueError(f"'delta' must lie in (0, 1), not {self.delta}")
        if self.rho is not None:
            if self.epsilon is not None or self.delta is not None:
                raise ValueError("give either 'rho' or 'epsilon' and 'delta', not both")
        elif self.epsilon is None or self.delta is None:
            raise ValueError("give 'rho' (zCDP), or 'epsilon' and 'delta' ((epsilon, delta)-DP)")
        return self


class RepublishSpec(_Model):
    """What happens when a release of a non-DP algorithm would publish rows an earlier release
    of the same data already published under another grouping (two such copies differenced or
    intersected give people away): ``refuse`` (the default), ``new_partitions`` (only partitions never
    released before are released) or ``allow`` (the owner accepts it; the ledger and the report
    say so). Releases of any pipeline, store or spelling of the same data are compared
    (``privfair.io.identity``). ``ledger``: as ``BudgetSpec.ledger``."""

    policy: Literal["refuse", "new_partitions", "allow"] = "refuse"
    ledger: str | None = None


class TargetSpec(_Model):
    """Where a release is published beside the store (``privfair.release.targets``): what goes there
    is the shareable copy's outputs, never the owner part.

    - ``iceberg``: a table of a SQL catalog (``catalog``: ``sqlite:///PATH`` or
      ``postgresql://...``, ``catalog_name`` default ``privfair``, ``warehouse``), named
      ``table`` (``NS.NAME``, default ``privfair.<pipeline>``); default catalog and warehouse:
      ``<store>/.lakehouse/``; ``conn_id`` instead of ``catalog``: the catalog URI of a
      connection (an Airflow Connection, a Dagster ``connections`` resource). Published by
      write-audit-publish: the release is written to an
      audit branch, validated from it, and ``main`` fast-forwarded to it with a tag
      ``privfair-<release>`` in one commit.
    - ``delta``: the Delta table at ``url`` (or a connection's, ``conn_id``); written to a staging table beside it, validated
      from it, then the table is overwritten in one commit carrying the release's metadata.
    """

    kind: Literal["iceberg", "delta"]
    catalog: str | None = None
    catalog_name: str | None = None
    warehouse: str | None = None
    table: str | None = None
    url: str | None = None
    conn_id: str | None = None

    @model_validator(mode="after")
    def _fields_of_kind(self) -> TargetSpec:
        allowed = {
            "iceberg": {"catalog", "catalog_name", "warehouse", "table", "conn_id"},
            "delta": {"url", "conn_id"},
        }
        _only_keys_of_kind(self, allowed, "target")
        if self.kind == "delta" and (self.url is None) == (self.conn_id is None):
            raise ValueError("a delta target needs exactly one of 'url' or 'conn_id'")
        if self.catalog is not None and self.conn_id is not None:
            raise ValueError("give the catalog as 'catalog' or as 'conn_id', not both")
        if self.table is not None and len(self.table.split(".")) < 2:
            raise ValueError(f"'table' must be NAMESPACE.NAME, not '{self.table}'")
        for k in ("url", "catalog", "warehouse"):
            v = getattr(self, k)
            if v is not None and _literal_password(v):
                raise ValueError(f"'{k}' holds a password: give it as ${{VAR}}, never in the spec")
        return self


class PipelineSpec(_Model):
    name: str
    description: str = ""
    dataset: DatasetSpec
    component: ComponentSpec
    guarantees: list[dict[str, Any]] = Field(default_factory=list)
    schedule: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    execution: ExecutionSpec = Field(default_factory=ExecutionSpec)
    partitions: PartitionSpec | None = None
    budget: BudgetSpec | None = None
    republish: RepublishSpec | None = None
    target: TargetSpec | None = None

    _params: Any = PrivateAttr(default=None)
    _demands: list | None = PrivateAttr(default=None)
    _spec_dir: Path | None = PrivateAttr(default=None)

    @property
    def spec_dir(self) -> Path | None:
        """The folder of the spec file (set by ``load_spec``): a relative ``dataset.path`` is
        resolved against it. Not part of the spec's data, so not of its fingerprint."""
        return self._spec_dir

    def located(self, folder: str | Path | None) -> PipelineSpec:
        """Record the folder of the spec file (in place) and return the spec."""
        self._spec_dir = Path(folder).resolve() if folder is not None else None
        return self

    def attach(self, params: Any, demands: list) -> PipelineSpec:
        """Record the typed parameters and demanded guarantees (done once, by the resolver)."""
        self._params, self._demands = params, list(demands)
        return self

    @property
    def resolved(self) -> bool:
        return self._demands is not None

    @property
    def params(self):
        """The component's typed ``Params`` (set by ``privfair.spec.catalogue.resolve``)."""
        if self._demands is None:
            raise SpecError("component", "spec not resolved against the component registry")
        return self._params

    @property
    def demands(self) -> list:
        """The guarantees the spec demands, typed (set by ``privfair.spec.catalogue.resolve``)."""
        if self._demands is None:
            raise SpecError("guarantees", "spec not resolved against the component registry")
        return list(self._demands)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("must be lower-case letters, digits and '_', starting with a letter")
        return v

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: str | None) -> str | None:
        if v is None or v in CRON_PRESETS:
            return v
        if len(v.split()) != 5:
            raise ValueError(
                "must be a 5-field cron expression or one of " + ", ".join(sorted(CRON_PRESETS))
            )
        return v

    @field_validator("republish", mode="before")
    @classmethod
    def _policy_alone(cls, v: Any) -> Any:
        return {"policy": v} if isinstance(v, str) else v

    @model_validator(mode="after")
    def _one_ledger(self) -> PipelineSpec:
        urls = {x.ledger for x in (self.budget, self.republish) if x is not None and x.ledger}
        if len(urls) > 1:
            raise ValueError("'budget.ledger' and 'republish.ledger' name different ledgers")
        if (
            self.republish is not None
            and self.republish.policy == "new_partitions"
            and self.partitions is None
        ):
            raise ValueError("republish policy 'new_partitions' needs 'partitions'")
        return self

    @property
    def ledger_url(self) -> str | None:
        """The ledger URL the spec names (``budget.ledger`` or ``republish.ledger``), if any."""
        for x in (self.budget, self.republish):
            if x is not None and x.ledger:
                return x.ledger
        return None

    def fingerprint(self) -> str:
        """sha256 of the spec's canonical JSON (key order and formatting do not matter)."""
        # where it runs, what it may spend and whether it may publish again are not what it
        # publishes; an undeclared partitioning leaves the fingerprint of older specs as it was
        skip = {"execution", "budget", "republish", "target"}
        if self.partitions is None:
            skip.add("partitions")
        data = self.model_dump(mode="json", exclude=skip)
        if data["dataset"].get("source") is None:  # specs written before sources keep theirs
            data["dataset"].pop("source", None)
        else:  # which dataset a frame holds is accounting (the ledger's), not what is published
            data["dataset"]["source"].pop("dataset", None)
        if data["dataset"].get("csv") is None:  # and before CSV options
            data["dataset"].pop("csv", None)
        canon = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()

    def with_params(self, overrides: dict[str, Any]) -> dict[str, Any]:
        """This spec as plain data with its component params updated by ``overrides``
        (to be parsed and resolved again)."""
        raw = self.model_dump(mode="json")
        raw["component"]["params"] = {**self.component.params, **overrides}
        return raw


def _key(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "<root>"


def _first_error(e: ValidationError) -> dict:
    """The error to report: a misspelt (unknown) key first, since it usually explains the rest."""
    errs = e.errors()
    return next((x for x in errs if x["type"] == "extra_forbidden"), errs[0])


def parse_spec(raw: Any, source: str | None = None) -> PipelineSpec:
    """Validate a spec envelope given as plain data. Raises ``SpecError`` naming the first bad
    key. The result is not yet resolved: ``privfair.spec.catalogue.parse_spec`` also types the
    component's params and the demanded guarantees."""
    if not isinstance(raw, dict):
        raise SpecError("<root>", "the spec must be a mapping of keys to values", source)
    try:
        spec = PipelineSpec.model_validate(raw)
    except ValidationError as e:
        err = _first_error(e)
        loc = err["loc"]
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        raise SpecError(_key(loc), msg, source) from None
    return spec


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: str, line: int) -> None:
        self.key, self.line = key, line
        super().__init__(f"duplicated key '{key}' on line {line}")


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping naming one key twice (plain YAML keeps the
    last value silently). The error names the key's dotted path (``component.params.k``)."""

    _root: yaml.Node | None = None

    def construct_document(self, node: yaml.Node) -> Any:
        self._root = node
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            seen: set = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    dup = key in seen
                except TypeError:  # an unhashable key: the base class reports it
                    break
                if dup:
                    path = [*_path_to(self._root, node), str(key)]
                    raise _DuplicateKey(".".join(path), key_node.start_mark.line + 1)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _path_to(root: yaml.Node | None, target: yaml.Node) -> list[str]:
    """The dotted-path parts from ``root`` down to the mapping ``target`` (by identity)."""
    stack: list[tuple[yaml.Node, list[str]]] = [(root, [])] if root is not None else []
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if isinstance(node, yaml.MappingNode):
            stack.extend((v, [*path, str(k.value)]) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((v, [*path, str(i)]) for i, v in enumerate(node.value))
    return []


def load_spec(path: str | Path) -> PipelineSpec:
    """Read and validate a YAML spec file's envelope (see ``parse_spec``). The file must be UTF-8
    and name each key once; the spec remembers its folder (``PipelineSpec.spec_dir``)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise SpecError("<file>", f"cannot read spec file: {e.strerror}", str(p)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise SpecError(
            "<file>",
            f"the spec file must be UTF-8 text (byte 0x{data[e.start]:02x} on line {line} "
            "is not valid UTF-8)",
            str(p),
        ) from None
    try:
        raw = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as e:
        raise SpecError(
            e.key, f"duplicated key (line {e.line}): each key may appear once", str(p)
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "<file>"
        rule = f"not valid YAML: {getattr(e, 'problem', e)}"
        if mark is not None:
            line = text.splitlines()[mark.line] if mark.line < len(text.splitlines()) else ""
            key = line.strip().split(":", 1)[0]
            if len(key) > 1024:
                rule += (
                    f"; the key '{key[:40]}…' ({len(key)} characters) is longer than YAML's "
                    "1024-character limit for a plain key: write it as an explicit key "
                    f"('? {key[:12]}…' on its own line, then ': value')"
                )
            elif line.strip():
                rule += f" (in: {line.strip()[:80]!r})"
        raise SpecError(where, rule, str(p)) from None
    return parse_spec(raw, source=str(p)).located(p.parent)
