"""The Python API: what the ``privfair`` command line does, for a notebook.

Build a spec in code (``spec``) or load one (``load_spec``), release a table you hold in
memory (an Arrow table, a pandas or polars frame: no file needed) or the spec's own input
(``run``), and get a typed ``Release`` back: its public outputs as Arrow tables or pandas
frames, a verdict per guarantee, the metrics and headline, the report and the shareable copy.
``validate`` re-checks a release, ``export`` writes its shareable copy, ``evaluate`` measures
the cost of protection, ``describe`` shows an algorithm's parameters. Errors are the CLI's
(``privfair.schemas.errors``): a bad spec or input raises a ``PrivfairError`` naming the key, column or
path and the rule; a broken guarantee raises ``ContractViolation`` and publishes nothing.

An in-memory input is fingerprinted by its content (values, types and roles), so the same
table gives the same version, and the manifest records it as given in memory
(``input.source.kind: memory``): ``privfair validate`` cannot re-read it and says so, while
``validate(release, table)`` re-checks it against the same table.

Example (run by the test suite as a doctest):

>>> import tempfile
>>> import pandas as pd
>>> from privfair import api
>>> people = pd.DataFrame({
...     "age": [23, 25, 31, 35, 41, 44, 52, 58, 61, 67, 29, 38],
...     "hours": [40, 38, 45, 50, 40, 35, 60, 40, 20, 10, 42, 48],
...     "sex": ["F", "M"] * 6,
...     "income": [0, 1, 0, 1, 1, 0, 1, 1, 0, 0, 1, 0],
... })
>>> toy = api.spec(
...     "toy_mdav",
...     component="mdav",
...     params={"k": 3},
...     columns={
...         "age": {"role": "quasi_identifier"},
...         "hours": {"role": "quasi_identifier"},
...         "sex": {"role": "protected", "kind": "nominal", "favoured": "M"},
...         "income": {"role": "label", "kind": "binary", "positive": 1},
...     },
...     demands=[{"kind": "k_anonymity", "k": 3}],
...     dataset_name="people",
... )
>>> work = tempfile.TemporaryDirectory()
>>> store = work.name + "/releases"
>>> release = api.run(toy, people, store=store)
>>> release.status, release.passed
('published', True)
>>> all(v.passed for v in release.verdicts)
True
>>> data = release.to_pandas()                 # the published table, as a pandas frame
>>> int(data.groupby(["age", "hours"]).size().min()) >= 3
True
>>> sorted(release.outputs)
['data']
>>> api.run(toy, people, store=store).status   # same table, spec and code: same version
'exists'
>>> api.validate(release, people).passed       # re-checked against the same table
True
>>> copy = api.export(release, work.name + "/copy")   # what may be handed out
>>> sorted(p.name for p in copy.iterdir())
['data.parquet', 'manifest.json', 'report.html']
>>> print(api.describe("mdav").splitlines()[0])
mdav: MDAV microaggregation
>>> work.cleanup()
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from privfair.io.files import as_table
from privfair.schemas.errors import SpecError
from privfair.schemas.spec import PipelineSpec

__all__ = [
    "Release",
    "Verdict",
    "Revalidation",
    "Evaluated",
    "spec",
    "load_spec",
    "as_table",
    "EXECUTION_KEYS",
    "execution_settings",
    "with_settings",
    "run",
    "open_release",
    "validate",
    "export",
    "evaluate",
    "algorithms",
    "describe",
    "current",
]


def _default_store() -> str:
    return os.environ.get("PRIVFAIR_STORE", "releases")


# --- typed results ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """One check of a release: the guarantee's ``id`` and ``kind``, whether it held and why."""

    id: str
    kind: str
    passed: bool
    message: str = ""

    @classmethod
    def of(cls, r: Mapping[str, Any]) -> Verdict:
        return cls(
            str(r.get("id", "")),
            str(r.get("kind", "")),
            bool(r.get("passed")),
            str(r.get("message") or ""),
        )


@dataclass(frozen=True)
class Release:
    """A published release as the data owner sees it (read from its folder in the store).

    Attributes
    ----------
    pipeline, version : str
        The spec's name and the release's version id (owner-side; the shareable copy shows
        ``public_id`` instead).
    status : str
        ``published``, ``exists`` (this version was already published: nothing ran) or
        ``rebuilt`` (an incomplete folder of it was quarantined first); ``open`` when read back
        with ``open_release``.
    path, report, shared : str
        The release folder, its owner report (``report.html``) and its shareable copy
        (``shared/``, what ``export`` copies out).
    passed : bool
        Whether every check held when it was published.
    verdicts : tuple of Verdict
        One per guarantee (and the declared-contract check); ``schema_checks`` the built-in
        ones.
    metrics : dict
        The run's metrics (owner-side: input-side values included).
    headline : dict
        The algorithm's headline metrics, ``{label: value}`` (None where the run has none).
    component, params, warnings, input :
        The algorithm, its resolved parameters, the run's warnings, the input record (where it
        came from, its fingerprint: owner-only).
    """

    pipeline: str
    version: str
    status: str
    path: str
    report: str
    shared: str
    passed: bool
    verdicts: tuple[Verdict, ...] = field(repr=False)
    schema_checks: tuple[Verdict, ...] = field(repr=False)
    metrics: dict = field(repr=False)
    headline: dict = field(repr=False)
    component: str = ""
    params: dict = field(default_factory=dict)
    warnings: tuple[str, ...] = field(default=(), repr=False)
    input: dict = field(default_factory=dict, repr=False)
    output_files: dict[str, str] = field(default_factory=dict, repr=False)
    _fs: Any = field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        """What ``privfair run`` prints: status, version, paths, the tally, the headline."""
        held = sum(v.passed for v in self.verdicts)
        lines = [
            f"{self.status}: {self.pipeline} {self.version}",
            f"  release: {self.path}",
            f"  shareable copy: {self.shared}",
            f"  guarantees: {held}/{len(self.verdicts)} hold",
        ]
        lines += [f"  {k}: {v}" for k, v in self.headline.items() if v is not None]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    @property
    def outputs(self) -> dict[str, pa.Table]:
        """Every public output as an Arrow table (read from the shareable copy on each call)."""
        return {name: self.table(name) for name in self.output_files}

    def table(self, name: str = "data") -> pa.Table:
        """The public output ``name`` as an Arrow table (roles in its field metadata).

        Raises
        ------
        KeyError
            ``name`` is not one of this release's outputs (the message lists them).
        """
        if name not in self.output_files:
            raise KeyError(f"no output '{name}'; outputs: {', '.join(self.output_files)}")
        return pq.read_table(f"{self.path}/{self.output_files[name]}", filesystem=self._fs)

    def to_pandas(self, name: str = "data"):
        """The public output ``name`` as a pandas DataFrame."""
        return self.table(name).to_pandas()


@dataclass(frozen=True)
class Revalidation:
    """What ``validate`` recomputed: ``passed`` when every check holds."""

    passed: bool
    verdicts: tuple[Verdict, ...]
    schema_checks: tuple[Verdict, ...]

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in (*self.verdicts, *self.schema_checks) if not v.passed]


@dataclass(frozen=True)
class Evaluated:
    """The cost of protection (``evaluate``): ``summary`` (mean and 95 % interval per grid
    point, protection, classifier and metric), ``folds`` (one row per fold), the seconds it
    took and, when written, the files (``evaluation.html``...)."""

    spec: str
    summary: pa.Table
    folds: pa.Table
    seconds: float
    files: dict[str, str] = field(default_factory=dict)


# --- specs and tables ---------------------------------------------------------------------------
def spec(
    name: str,
    *,
    component: str,
    params: Mapping[str, Any] | None = None,
    columns: Mapping[str, Any] | None = None,
    dataset: Mapping[str, Any] | None = None,
    demands: Iterable[Mapping[str, Any]] = (),
    description: str = "",
    dataset_name: str | None = None,
    **more: Any,
) -> PipelineSpec:
    """A pipeline spec built in code, validated as a YAML spec is.

    Parameters
    ----------
    name : str
        The pipeline's name (its folder in the store).
    component : str
        The algorithm (``algorithms()`` lists them; ``describe(name)`` its parameters).
    params : mapping, optional
        The algorithm's parameters (``component.params``).
    columns : mapping, optional
        The role of each column, as under ``dataset.columns`` (``{"role": ..., "kind": ...}``).
    dataset : mapping, optional
        The spec's ``dataset``; default ``{"source": {"kind": "memory"}}``: the table passed
        to ``run``. ``columns`` is added to it (merged with its own ``columns``).
    dataset_name : str, optional
        The private dataset the table passed to ``run`` holds (``source.dataset``): the
        ledger accounts every release of it, through any spec, store or spelling, against
        this name. Without it a DP release, or one under ``republish: refuse`` (the
        default), of a table in memory is refused: the ledger could not tell whose rows it
        holds.
    demands : iterable of mapping
        Extra guarantees (``guarantees``), e.g. ``{"kind": "k_anonymity", "k": 5}``.
    description : str
    **more
        Any other spec key (``schedule``, ``budget``, ``republish``...).

    Raises
    ------
    SpecError
        Naming the first bad key, as for a YAML spec.
    """
    from privfair.spec.catalogue import parse_spec

    ds = dict(dataset) if dataset is not None else {"source": {"kind": "memory"}}
    if columns is not None:
        ds["columns"] = {**(ds.get("columns") or {}), **{k: _plain(v) for k, v in columns.items()}}
    if dataset_name is not None:
        if (ds.get("source") or {}).get("kind") != "memory":
            raise SpecError("dataset_name", "names the dataset of a table in memory only")
        ds["source"] = {**ds["source"], "dataset": dataset_name}
    raw = {
        "name": name,
        "description": description,
        "dataset": ds,
        "component": {"name": component, "params": dict(params or {})},
        "guarantees": [dict(d) for d in demands],
        **more,
    }
    return parse_spec(raw, source="privfair.api.spec")


def _plain(v: Any) -> Any:
    return v.model_dump(mode="json", exclude_none=True) if hasattr(v, "model_dump") else dict(v)


def load_spec(path: str | Path) -> PipelineSpec:
    """A spec from its YAML file (``SpecError`` naming the first bad key)."""
    from privfair.spec.catalogue import load_spec as _load

    return _load(path)


def _spec_of(spec_or_path: PipelineSpec | str | Path) -> PipelineSpec:
    return spec_or_path if isinstance(spec_or_path, PipelineSpec) else load_spec(spec_or_path)


def in_memory(s: PipelineSpec, dataset: str | Sequence[str] | None = None) -> PipelineSpec:
    """``s`` reading the table handed to ``run`` instead of its file or source: its dataset
    becomes ``source: {kind: memory}`` keeping ``columns`` and the column policies (a new
    spec, so a new version). A built-in dataset's roles are not in the spec: it is refused
    (``SpecError``) unless ``columns`` names every role the table needs.

    ``dataset`` adds names or atoms (``privfair.io.identity``) of the private dataset the
    table holds to the ones the spec already gives: where the rows came from (an upstream
    asset, a task's file). Which dataset a frame holds is accounting, not what is
    published: it does not change the version."""
    from privfair.spec.catalogue import parse_spec

    ds = s.dataset
    more = [dataset] if isinstance(dataset, str) else list(dataset or [])
    if ds.source is not None and ds.source.kind == "memory":
        if not more:
            return s
        raw = s.model_dump(mode="json", exclude_none=True)
        given = raw["dataset"]["source"].get("dataset") or []
        given = [given] if isinstance(given, str) else list(given)
        raw["dataset"]["source"]["dataset"] = list(dict.fromkeys([*given, *more]))
        return parse_spec(raw, source=f"{s.name} (in memory)").located(s.spec_dir)
    if ds.name is not None and not ds.columns:
        raise SpecError(
            "dataset.name",
            f"'{s.name}' reads built-in dataset '{ds.name}', whose roles are not in the spec; "
            "to release a table of your own give its roles (api.spec(..., columns=...) or "
            "dataset.columns)",
        )
    raw = s.model_dump(mode="json", exclude_none=True)
    kept = {
        k: v for k, v in raw["dataset"].items() if k not in ("name", "path", "source", "format")
    }
    # the frame holds the rows of the dataset the spec was written for: the ledger keeps
    # accounting them there (privfair.io.identity)
    from privfair.io.identity import atoms_of

    atoms = list(dict.fromkeys([*atoms_of(s), *more]))
    raw["dataset"] = {**kept, "source": {"kind": "memory", **({"dataset": atoms} if atoms else {})}}
    return parse_spec(raw, source=f"{s.name} (in memory)").located(s.spec_dir)


# --- where a release runs -------------------------------------------------------------------------
EXECUTION_KEYS = ("engine", "master", "workers", "conf", "scratch")
"""The settings of a spec's ``execution`` a caller may give over the spec's own."""


def execution_settings(given: Any, key: str = "execution") -> dict[str, Any]:
    """``given`` (a mapping of ``EXECUTION_KEYS``) checked on its own, before any spec: the set
    values (None and ``""`` are unset, an empty ``conf`` too), ``conf`` as text (a number or
    a boolean as Spark writes it, as in a YAML spec). Raises ``SpecError`` whose key is
    ``key`` and the setting (``execution.conf.spark.executor.memory``) and whose rule says what
    is wrong: an unknown setting or engine, a master URL Spark would not parse, a ``conf``
    that is not a map of setting name to text, a ``workers`` below 1.

    >>> execution_settings({"engine": "spark", "master": "", "conf": {"spark.executor.cores": 2}})
    {'engine': 'spark', 'conf': {'spark.executor.cores': '2'}}
    >>> execution_settings({"engine": "dask"}, key="resources.privfair.config")
    Traceback (most recent call last):
    ...
    privfair.schemas.errors.SpecError: spec key 'resources.privfair.config.engine': unknown engine 'dask' (known: local, spark)
    """
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise SpecError(
            key, f"a mapping of {', '.join(EXECUTION_KEYS)}, not {type(given).__name__}"
        )
    out: dict[str, Any] = {}
    for k, v in given.items():
        if k not in EXECUTION_KEYS:
            raise SpecError(
                f"{key}.{k}", f"not an execution setting (known: {', '.join(EXECUTION_KEYS)})"
            )
        if v is None or (isinstance(v, str) and not v.strip()):
            continue
        if k == "conf":
            conf = _spark_conf(v, f"{key}.conf")
            if conf:
                out["conf"] = conf
        elif k == "workers":
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise SpecError(f"{key}.workers", f"a number of processes (1 or more), not {v!r}")
            if v:  # 0: unset, as the orchestrators' forms write it
                out["workers"] = v
        elif not isinstance(v, str):
            raise SpecError(f"{key}.{k}", f"text, not {type(v).__name__} ({v!r})")
        else:
            out[k] = v.strip()
    engine = out.get("engine")
    if engine is not None and engine not in ("local", "spark"):
        raise SpecError(f"{key}.engine", f"unknown engine '{engine}' (known: local, spark)")
    if "master" in out:
        from privfair.components.core.engine import master_endpoints

        try:  # the URL's form only: whether it answers is known when the run starts
            master_endpoints(out["master"])
        except SpecError as e:
            raise SpecError(f"{key}.master", e.rule) from None
    if engine == "local" and ({"master", "conf", "scratch"} & set(out)):
        spark_only = ", ".join(sorted({"master", "conf", "scratch"} & set(out)))
        raise SpecError(f"{key}.engine", f"'local' takes no Spark setting ({spark_only})")
    return out


def _spark_conf(value: Any, key: str) -> dict[str, str]:
    """Spark settings as Spark takes them, name -> text (``SpecError`` naming the setting)."""
    if not isinstance(value, Mapping):
        raise SpecError(
            key,
            "Spark settings: a map of setting name to text (spark.executor.memory: 8g), not "
            f"{type(value).__name__}",
        )
    out: dict[str, str] = {}
    for name, v in value.items():
        if not isinstance(name, str) or not name.strip():
            raise SpecError(key, f"a Spark setting's name is text, not {name!r}")
        if isinstance(v, bool):
            v = str(v).lower()
        elif isinstance(v, int | float):
            v = str(v)
        if not isinstance(v, str):
            raise SpecError(
                f"{key}.{name}",
                f"a Spark setting's value is text (or a number), not {type(v).__name__} ({v!r})",
            )
        out[name.strip()] = v
    return out


def with_settings(
    spec: PipelineSpec, *layers: Mapping[str, Any] | None, keys: Sequence[str] = ()
) -> PipelineSpec:
    """``spec`` with each layer of execution settings over its own ``execution``, later layers
    winning (a release's own settings, then a deployment's), as ``privfair run --engine
    --master --conf`` does: ``conf`` adds to the spec's settings (a setting named again takes
    the later value), an engine ``local`` drops the spec's Spark settings. Each layer is
    checked by ``execution_settings`` under its key in ``keys`` (default ``execution``). Where
    a release runs is not part of its version: the result has the spec's version.

    >>> s = spec("toy", component="mdav", params={"k": 2},
    ...          columns={"age": {"role": "quasi_identifier"}},
    ...          execution={"engine": "spark", "conf": {"spark.executor.memory": "2g"}})
    >>> with_settings(s, {"master": "local[1]", "conf": {"spark.executor.cores": "2"}}).execution
    ExecutionSpec(engine='spark', master='local[1]', workers=None, conf={'spark.executor.memory': '2g', 'spark.executor.cores': '2'}, scratch=None)
    >>> with_settings(s, {"engine": "local"}).execution.conf
    {}
    """
    from privfair.spec.catalogue import parse_spec

    merged = spec.execution.model_dump(mode="json")
    touched = False
    for i, layer in enumerate(layers):
        key = keys[i] if i < len(keys) else "execution"
        given = execution_settings(layer, key)
        if not given:
            continue
        touched = True
        spark_only = sorted({"master", "conf", "scratch"} & set(given))
        if spark_only and given.get("engine", merged.get("engine")) == "local":
            raise SpecError(
                f"{key}.engine",
                f"{', '.join(spark_only)} are Spark settings and '{spec.name}' runs on the "
                "local engine: give engine: spark too",
            )
        if given.get("engine") == "local":  # the spec's Spark settings do not apply
            merged.update(master=None, conf={}, scratch=None)
        conf = {**(merged.get("conf") or {}), **given.pop("conf", {})}
        merged.update(given, conf=conf)
    if not touched:
        return spec
    raw = spec.model_dump(mode="json")
    raw["execution"] = merged
    return parse_spec(raw, source=f"{spec.name} (execution)").located(spec.spec_dir)


# --- release ------------------------------------------------------------------------------------
def run(
    spec: PipelineSpec | str | Path,
    table: Any = None,
    *,
    store: str | Path | None = None,
    data_dir: str | Path | None = None,
    params: Mapping[str, Any] | None = None,
    partition: str | None = None,
    dataset: str | Sequence[str] | None = None,
    execution: Mapping[str, Any] | None = None,
    spark: Any = None,
) -> Release:
    """Ingest, protect, validate and publish one release (``privfair run``).

    Parameters
    ----------
    spec : PipelineSpec or path
        A spec from ``spec`` or ``load_spec``, or a YAML file's path.
    table : Arrow table, pandas or polars DataFrame, optional
        The input, in memory (``as_table``); a spec reading a file or a source is turned to
        read it (``in_memory``). None: the spec's own dataset is read, as the CLI does.
    store : path or URI, optional
        The release store (default ``$PRIVFAIR_STORE``, else ``releases``).
    data_dir : path, optional
        Where the raw files of a built-in dataset are (default ``$PRIVFAIR_DATA_DIR``).
    params : mapping, optional
        Overrides of the algorithm's parameters (``--set``).
    partition : str, optional
        One partition of a partitioned spec (``--partition``).
    dataset : str or list of str, optional
        With ``table``: the name (or ``privfair.io.identity`` atoms) of the private dataset
        the frame holds, which the ledger accounts it against (``in_memory``).
    execution : mapping, optional
        Where it runs, over the spec's ``execution`` (``with_settings``): ``{"engine": "spark",
        "master": "spark://HOST:7077", "conf": {"spark.executor.memory": "8g"}}``; the
        version is the same.
    spark : SparkSession, optional
        The caller's Spark session (classic or Spark Connect): the release runs on the Spark
        engine through it (the spec's ``execution.master`` aside, its ``conf`` set on it),
        and the session is left running.

    Returns
    -------
    Release

    Raises
    ------
    ContractViolation
        A guarantee failed: nothing published, the candidate quarantined.
    PrivfairError
        A bad spec, input or store (``SpecError``, ``InputError``, ``StoreError``...), or a
        Spark cluster that cannot be used (``ClusterError``).
    """
    from privfair.components.core.engine import given_session
    from privfair.run.flow import run_release
    from privfair.spec.catalogue import with_execution, with_params

    s = _spec_of(spec)
    if params:
        s = with_params(s, dict(params))
    s = with_settings(s, execution)
    arrow = None
    if table is not None:
        arrow = as_table(table)
        s = in_memory(s, dataset)
    elif dataset is not None:
        raise SpecError("dataset", "names the dataset a frame holds: give the frame (table=)")
    if spark is not None:
        s = with_execution(s, engine="spark")
        with given_session(spark):
            out = run_release(
                s, store or _default_store(), data_dir, partition=partition, table=arrow
            )
    else:
        out = run_release(s, store or _default_store(), data_dir, partition=partition, table=arrow)
    return open_release(out.path, status=out.status)


def open_release(path: str | Path, status: str = "open") -> Release:
    """The ``Release`` in folder ``path`` (``<store>/<pipeline>/<version>`` or ``.../latest``).

    Raises
    ------
    StoreError
        Not a release folder, or its manifest cannot be read.
    """
    from privfair.release.manifest import Manifest, ManifestError
    from privfair.release.store import Store, resolve_release
    from privfair.schemas.errors import StoreError

    text = str(path)
    local = "://" not in text or text.startswith("file://")
    # absolute, so the release stays readable after the notebook changes its folder
    folder = str(resolve_release(Path(text.removeprefix("file://"))).resolve()) if local else text
    store = Store.open(str(Path(folder).parent.parent) if local else folder.rsplit("/", 2)[0])
    fs = store.fs
    try:
        with fs.open_input_stream(f"{folder}/manifest.json") as f:
            man = Manifest.parse(f.read())
    except (OSError, ManifestError) as e:
        raise StoreError(folder, f"not a release folder (manifest.json: {e})") from None
    verdicts = tuple(Verdict.of(r) for r in man.verdicts)
    schema = tuple(Verdict.of(r) for r in man.schema_results)
    metrics = man.metrics
    headline = {m.label: m.get(metrics) for m in _headline(man)}
    return Release(
        pipeline=man["pipeline"],
        version=man["version"],
        status=status,
        path=folder,
        report=f"{folder}/report.html",
        shared=f"{folder}/shared",
        passed=(man.get("validation") or {}).get("status") == "passed",
        verdicts=verdicts,
        schema_checks=schema,
        metrics=metrics,
        headline=headline,
        component=man.get("component", ""),
        params=man.get("params") or {},
        warnings=tuple(man.get("warnings") or ()),
        input=man.get("input") or {},
        output_files={k: v["file"] for k, v in (man.get("outputs") or {}).items()},
        _fs=fs,
    )


def _headline(man: dict) -> list:
    """The headline metrics in the algorithm's order (the manifest's JSON sorts its keys);
    the manifest's own list for an algorithm no longer registered."""
    from privfair.components.core.descriptor import Metric
    from privfair.components.core.registry import algorithm as _algorithm
    from privfair.components.core.registry import known_names

    recorded = man.get("headline") or {}
    if man.get("component") in known_names():
        order = [m for m in _algorithm(man["component"]).headline if m.key in recorded]
        if len(order) == len(recorded):
            return order
    return [Metric(key, label) for key, label in recorded.items()]


def _folder(release: Release | str | Path) -> Path:
    return Path(release.path if isinstance(release, Release) else release)


def validate(
    release: Release | str | Path, table: Any = None, *, data_dir: str | Path | None = None
) -> Revalidation:
    """Recompute every guarantee of a published release (``privfair validate``).

    ``table``: the input of a release made from a table in memory (the same table: its
    fingerprint must match the recorded one, else ``DataSourceError``); None for a release
    whose spec reads a file or a source, which is read again.
    """
    from privfair.run.flow import revalidate

    arrow = as_table(table) if table is not None else None
    v = revalidate(_folder(release), data_dir, table=arrow)
    return Revalidation(
        v.passed,
        tuple(Verdict(r.id, r.kind, r.passed, r.message or "") for r in v.guarantees),
        tuple(Verdict(r.id, r.kind, r.passed, r.message or "") for r in v.schema_checks),
    )


def export(release: Release | str | Path, dest: str | Path) -> Path:
    """Write the release's shareable copy to ``dest`` (``privfair export``: it must not exist
    or be empty); returns the folder written."""
    from privfair.release.share import export as _export

    folder, _ = _export(_folder(release), dest)
    return folder


def evaluate(
    spec: PipelineSpec | str | Path,
    table: Any = None,
    *,
    grid: Mapping[str, Sequence[Any]] | None = None,
    folds: int = 5,
    seed: int = 0,
    classifiers: Sequence[str] = ("lr", "rf", "sgd", "gnb"),
    drop_protected: bool = False,
    protect_test: bool = False,
    data_dir: str | Path | None = None,
    out: str | Path | None = None,
) -> Evaluated:
    """The cost of protection (``privfair evaluate``) on ``table`` (or the spec's input):
    stratified folds, the algorithm on the training folds only, each classifier trained on the
    protected and on the raw fold and scored on the untouched test fold, for every combination
    of ``grid`` (``{"k": [5, 10]}``). With ``out``, its files are written to
    ``out/<spec>/``; nothing is written otherwise."""
    from privfair.evaluation.evaluate import evaluate as _evaluate
    from privfair.evaluation.evaluate import write
    from privfair.evaluation.options import EvaluateOptions
    from privfair.run.flow import ReleasePlan

    options = EvaluateOptions.of(
        {
            "grid": {k: list(v) for k, v in (grid or {}).items()},
            "folds": folds,
            "seed": seed,
            "classifiers": list(classifiers),
            "drop_protected": drop_protected,
            "protect_test": protect_test,
        }
    )
    s = _spec_of(spec)
    arrow = None
    if table is not None:
        arrow = as_table(table)
        s = in_memory(s)
    ing = ReleasePlan.of(s, data_dir=data_dir, table=arrow).ingest()
    ev = _evaluate(s, ing.table, **options.arguments(), input_fingerprint=ing.input["fingerprint"])
    files = write(ev, Path(out) / s.name) if out is not None else {}
    return Evaluated(s.name, ev.summary, ev.folds, ev.seconds, files)


# --- the algorithms ------------------------------------------------------------------------------
def algorithms() -> list[str]:
    """The names of every registered algorithm."""
    from privfair.components.core.registry import known_names

    return known_names()


def describe(algorithm: str) -> str:
    """``algorithm``'s parameters with type, default, range and meaning (``privfair describe``).

    Raises
    ------
    SpecError
        An unknown algorithm (the known ones listed).
    """
    from privfair.components.core import reference

    return reference.describe(reference.named(algorithm))


def current(store: str | Path, pipeline: str, output: str = "data") -> pa.Table:
    """The public ``output`` of ``pipeline``'s current releases as one table: for a
    partitioned pipeline each partition's current release (``privfair releases --current``:
    the version ``latest`` names when it is of that partition, else the newest), its
    shareable ``shared/<output>.parquet`` in key order with the column ``privfair_partition``
    first (as a lakehouse target holds it); for an unpartitioned one, ``latest``'s. ``latest``
    alone is the last partition run.

    Raises
    ------
    StoreError
        The store cannot be opened, the pipeline has no release, or a file cannot be read.
    """
    from privfair.release.store import Store, read_current

    return read_current(Store.open(store), pipeline, output)
