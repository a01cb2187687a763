"""A privfair release as a component of the user's ``dg`` project (``PrivfairRelease``).

Dagster's components framework builds a project from ``defs.yaml`` files: each names a
component type and its attributes, and ``dg`` lists the types of every installed library that
registers a module under the ``dagster_dg_cli.registry_modules`` entry point (privfair
registers ``privfair.dagster``). ``PrivfairRelease`` is the YAML face of
``privfair.dagster.release_assets``::

    type: privfair.dagster.PrivfairRelease
    attributes:
      spec: people_k5.yaml          # a spec file beside this defs.yaml, or the spec inline
      input: {asset: people}        # the upstream asset whose value is released
      key_prefix: published         # the asset key: [published, people_k5]
      group: privacy
      checks:                       # blocking checks of privfair.dagster.build_privfair_checks
        - asset: people
          demands: [{kind: columns_absent, columns: [ssn]}]

``dg scaffold defs privfair.dagster.PrivfairRelease NAME`` writes such a file
(``PrivfairReleaseScaffolder``): a working release of the built-in German Credit data with the
other attributes commented. ``dg check defs`` validates it; an error names the attribute
(``attributes.spec``, ``attributes.checks.0.demands``...) and the rule.
"""

import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import dagster as dg

from privfair.dagster.translator import PrivfairTranslator
from privfair.schemas.errors import PrivfairError
from privfair.schemas.spec import PipelineSpec

__all__ = [
    "PrivfairRelease",
    "PrivfairReleaseScaffolder",
    "ReleaseAttributeError",
    "ReleaseChecks",
    "ReleaseInput",
    "ReleaseSpec",
    "scaffold_text",
]


class ReleaseAttributeError(ValueError):
    """An attribute of a ``PrivfairRelease`` that cannot be used: ``attribute`` is its dotted
    path under ``attributes`` (``spec.component.params.k``), ``rule`` what is wrong, ``source``
    the component's folder or file when the error is not shown at its line.

    >>> str(ReleaseAttributeError("store", "not empty", "defs/people"))
    "defs/people: PrivfairRelease attribute 'store': not empty"
    """

    def __init__(self, attribute: str, rule: str, source: str | None = None) -> None:
        self.attribute = attribute
        self.rule = rule
        self.source = source
        prefix = f"{source}: " if source else ""
        super().__init__(f"{prefix}PrivfairRelease attribute '{attribute}': {rule}")


class PrivfairReleaseAttributes:
    """Named in Dagster's message: "... resolving from PrivfairReleaseAttributes"."""


def _failed(context: dg.ResolutionContext, below: str, attribute: str, rule: str) -> Exception:
    """The error of ``attribute``, shown by ``dg check defs`` at the line of ``below`` (a dotted
    path under the field being resolved) in the ``defs.yaml``: Dagster's own resolution error,
    with the file, the line and the attribute's path."""
    error = ReleaseAttributeError(attribute, rule)
    at = context
    for part in (p for p in below.split(".") if p):
        at = at.at_path(int(part) if part.isdigit() else part)
    try:
        return at.build_resolve_fn_exc(
            [f"{type(error).__name__}: {error}\n"],
            field_name=attribute,
            model=PrivfairReleaseAttributes(),
        )
    except Exception:  # no source to point at (a component built in Python)
        return error


# --- the attributes ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ReleaseSpec:
    """The ``spec`` attribute, read and validated when the project loads.

    Parameters
    ----------
    spec : PipelineSpec
        The spec, resolved (an inline spec keeps the ``defs.yaml`` folder as its own, so a
        relative path in it is read from there).
    path : Path or None
        The spec file, when ``spec`` named one.
    """

    spec: PipelineSpec
    path: Path | None = None


def _resolve_spec(context: dg.ResolutionContext, raw: Any) -> ReleaseSpec:
    """A spec file (relative to the ``defs.yaml`` folder) or an inline spec, parsed by
    privfair's own reader; its first bad key becomes an error naming ``spec.<key>``."""
    from privfair.spec.catalogue import load_spec, parse_spec

    value = context.resolve_value(raw)
    if isinstance(value, str):
        path = context.resolve_source_relative_path(value)
        if not path.is_file():
            raise _failed(
                context,
                "",
                "spec",
                f"no spec file at {path} (a path is read from the folder of this defs.yaml)",
            )
        try:
            return ReleaseSpec(load_spec(path), path)
        except PrivfairError as e:
            key = getattr(e, "key", None)
            where = f"spec ({value}){': ' + key if key else ''}"
            raise _failed(context, "", where, getattr(e, "rule", str(e))) from None
    if isinstance(value, Mapping):
        folder = context.resolve_source_relative_path(".")
        try:
            spec = parse_spec(dict(value), source="PrivfairRelease attribute 'spec'")
        except PrivfairError as e:
            key = getattr(e, "key", None) or ""
            attribute = f"spec.{key}" if key else "spec"
            raise _failed(context, key, attribute, getattr(e, "rule", str(e))) from None
        return ReleaseSpec(spec.located(folder))
    raise _failed(context, "", "spec", f"a path or a mapping, not {type(value).__name__}")


def _resolve_demands(context: dg.ResolutionContext, raw: Any) -> list[dict[str, Any]]:
    """The demands as a table takes them, parsed now (``privfair.validation.table_checks``),
    so a bad one fails ``dg check defs`` rather than the run."""
    from privfair.validation.table_checks import demands_of

    value = context.resolve_value(raw)
    demands = [dict(d) for d in value or ()]
    where = ".".join(str(p) for p in context.path[1:])  # checks.<i>.demands
    if not demands:
        raise _failed(context, "", where, "give at least one demand")
    try:
        demands_of(demands)
    except PrivfairError as e:
        key = getattr(e, "key", None) or "demands"  # demands.<j>.<field>
        below = key.removeprefix("demands").strip(".")
        raise _failed(
            context, below, f"{where}.{below}".rstrip("."), getattr(e, "rule", str(e))
        ) from None
    return demands


def _resolve_key(context: dg.ResolutionContext, raw: Any) -> dg.AssetKey | None:
    value = context.resolve_value(raw)
    if value is None or isinstance(value, dg.AssetKey):
        return value
    if isinstance(value, str) and value.strip("/"):
        return dg.AssetKey.from_user_string(value)
    if isinstance(value, list) and value and all(isinstance(p, str) and p for p in value):
        return dg.AssetKey(value)
    where = ".".join(str(p) for p in context.path[1:]) or "asset"
    raise _failed(context, "", where, f"an asset key ('a/b' or [a, b]), not {value!r}")


OptionalKey = Annotated[
    dg.AssetKey | None,
    dg.Resolver(
        _resolve_key,
        model_field_type=str | list[str] | None,
        description="An asset key: 'raw/people' or [raw, people].",
    ),
]


@dataclass
class ReleaseInput(dg.Resolvable):
    """The ``input`` attribute: ``{asset: KEY}``, the upstream asset of this project.

    A spec whose dataset gives only roles (``dataset: {columns: {...}}``) releases that
    asset's value, read through the asset's own IO manager; a spec with its own source reads
    the source and the asset is lineage only.
    """

    asset: Annotated[
        dg.AssetKey,
        dg.Resolver(
            _resolve_key,
            model_field_type=str | list[str],
            description="The upstream asset's key: 'raw/people' or [raw, people].",
        ),
    ]


@dataclass
class ReleaseChecks(dg.Resolvable):
    """One entry of the ``checks`` attribute: privfair's table checks on an asset.

    Built by ``privfair.dagster.build_privfair_checks``: one blocking asset check per demand,
    run by Great Expectations with the validator's checkers, on ``asset``'s value (read
    through its IO manager), with class sizes, never values, in the check's metadata.
    ``asset`` defaults to this release's own asset, whose value is the published table.
    """

    demands: Annotated[
        list[dict[str, Any]],
        dg.Resolver(
            _resolve_demands,
            model_field_type=list[dict[str, Any]],
            description="Demands as a spec's guarantees write them, naming their columns: "
            "{kind: k_anonymity, k: 5, quasi_identifiers: [age, zip]}, {kind: columns_absent, "
            "columns: [ssn]}, {kind: t_closeness, ...}, {kind: parity_gap, ...}.",
        ),
    ]
    asset: OptionalKey = None


def _resolve_store(context: dg.ResolutionContext, raw: Any) -> str | None:
    value = context.resolve_value(raw)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _failed(context, "", "store", "a folder or a pyarrow.fs URI (s3://...), not empty")
    return value


def _resolve_execution(context: dg.ResolutionContext, raw: Any) -> dict[str, Any] | None:
    """The release's execution settings, checked when the project loads
    (``privfair.api.execution_settings``): an error names ``execution.<key>``."""
    from privfair.api import execution_settings

    value = context.resolve_value(raw)
    if value is None:
        return None
    try:
        return execution_settings(value)
    except PrivfairError as e:
        key = getattr(e, "key", None) or "execution"
        raise _failed(context, key.removeprefix("execution").strip("."), key, e.rule) from None


def _where(context: dg.ComponentLoadContext) -> str | None:
    """The component's ``defs.yaml`` (or folder), for an error found when building."""
    try:
        folder = Path(context.path)
    except Exception:  # a context without a component path (a component built in Python)
        return None
    yaml_file = folder / "defs.yaml"
    return str(yaml_file if yaml_file.is_file() else folder)


# --- the component ------------------------------------------------------------------------------
class _Named(PrivfairTranslator):
    """The translation the attributes give: a fixed key, owners and tags over the defaults."""

    def __init__(
        self, key: dg.AssetKey | None, owners: Sequence[str], tags: Mapping[str, str]
    ) -> None:
        self._key, self._owners, self._tags = key, list(owners), dict(tags)

    def get_asset_key(self, spec: PipelineSpec) -> dg.AssetKey:
        return self._key or super().get_asset_key(spec)

    def get_owners(self, spec: PipelineSpec) -> list[str]:
        return self._owners or super().get_owners(spec)

    def get_tags(self, spec: PipelineSpec) -> dict[str, str]:
        return {**super().get_tags(spec), **self._tags}


class PrivfairReleaseScaffolder(dg.Scaffolder):
    """What ``dg scaffold defs privfair.dagster.PrivfairRelease NAME`` writes: ``defs.yaml``
    with a release that works as written (the built-in German Credit data, Fair-MDAV with
    k = 10, a k-anonymity demand) and every other attribute commented."""

    def scaffold(self, request: dg.ScaffoldRequest) -> None:
        name = re.sub(r"[^A-Za-z0-9_]+", "_", request.target_path.name).strip("_") or "release"
        if not name[0].isalpha():
            name = f"release_{name}"
        request.target_path.mkdir(parents=True, exist_ok=True)
        (request.target_path / "defs.yaml").write_text(scaffold_text(request.type_name, name))


def scaffold_text(type_name: str, name: str) -> str:
    """The ``defs.yaml`` of a new release named ``name`` (``PrivfairReleaseScaffolder``).

    >>> text = scaffold_text("privfair.dagster.PrivfairRelease", "credit")
    >>> text.splitlines()[0]
    'type: privfair.dagster.PrivfairRelease'
    >>> "name: credit" in text
    True
    """
    return textwrap.dedent(
        f"""\
        type: {type_name}

        # A privfair release: one asset whose materialisation protects the rows, checks every
        # guarantee (one blocking asset check each, plus `contract`) and publishes only when
        # all hold. Its data version is the release's version id.
        attributes:
          # The spec, inline (as here) or a spec file relative to this folder: `spec: my.yaml`.
          spec:
            name: {name}
            description: German Credit through Fair-MDAV (k = 10), sex as the protected column.
            # The rows: a built-in dataset (here), a file or a source (`source: {{kind: sql,
            # ...}}`). To release an upstream asset's value instead, give the roles only, e.g.
            #   dataset:
            #     columns:
            #       age: {{role: quasi_identifier, kind: numeric}}
            #       zip: {{role: quasi_identifier, kind: nominal}}
            #       sex: {{role: protected, kind: binary, favoured: M}}
            #       income: {{role: label, kind: binary, positive: 1}}
            # and name the asset under `input` below.
            dataset:
              name: german
            component:
              name: fair_mdav
              params: {{k: 10, tau: 0.5}}
            # Guarantees demanded besides the algorithm's own (checked before publishing).
            guarantees:
              - {{kind: k_anonymity, k: 10}}

          # The upstream asset of this project whose value is released (its IO manager reads
          # it: pandas, polars or Arrow), or whose lineage a spec with its own source keeps.
          # input:
          #   asset: raw/people

          # Where it runs, over the spec's `execution` (the `privfair` resource's settings win
          # over these): a Spark cluster, its settings, a folder every node reads.
          # execution:
          #   engine: spark
          #   master: spark://spark-master:7077
          #   conf: {{spark.executor.memory: 8g}}

          # Where releases are written: a folder (relative to the project root) or a
          # pyarrow.fs URI. Default: the `privfair` resource's ($PRIVFAIR_STORE, else
          # ./releases).
          # store: releases

          # The asset key (default [<spec name>]), or a prefix, group, owners and tags.
          # asset_key: published/{name}
          # key_prefix: published
          # group: privacy
          # owners: [team:privacy]
          # tags: {{domain: credit}}

          # Extra blocking checks by privfair's checkers (build_privfair_checks), on this
          # release's published table (no `asset`) or on another asset of the project.
          # checks:
          #   - asset: raw/people
          #     demands:
          #       - {{kind: columns_absent, columns: [ssn]}}
        """
    )


@dg.scaffold_with(PrivfairReleaseScaffolder)
@dataclass
class PrivfairRelease(dg.Component, dg.Resolvable):
    """A privfair release: one asset downstream of yours, a blocking check per guarantee.

    ``build_defs`` is ``privfair.dagster.release_assets`` on the attributes: the release asset
    (downstream of ``input``), one blocking check per guarantee plus ``contract``, the
    ``privfair`` resource (also the IO manager that hands a downstream asset the published
    table), and the ``checks`` built by ``privfair.dagster.build_privfair_checks``.

    Attributes
    ----------
    spec : str or mapping
        A spec file, relative to the folder of the ``defs.yaml``, or the spec inline.
    input : {asset: KEY}, optional
        The upstream asset. Without it the spec reads its own dataset or source.
    store : str, optional
        The release store: a folder (a relative one is taken from the project root) or a
        ``pyarrow.fs`` URI. Default: the ``privfair`` resource's.
    asset_key : str, optional
        The release asset's key (``published/people``); default ``[<spec name>]``.
    key_prefix : str or list of str, optional
        Prefixed to the key.
    group, owners, tags : optional
        The asset's group, owners (``team:x`` or e-mails) and tags (added to privfair's).
    checks : list of {asset: KEY, demands: [...]}, optional
        Blocking checks of privfair's table checkers: on ``asset`` (a user's asset of the
        project) or, without ``asset``, on this release's published table.
    execution : {engine, master, workers, conf, scratch}, optional
        Where the release runs, over the spec's ``execution`` (``release_assets(execution=)``);
        the ``privfair`` resource's set fields win over these. Never part of the version.

    Examples
    --------
    >>> rel = PrivfairRelease.from_attributes_dict(attributes={
    ...     "spec": {"name": "people_k5",
    ...              "dataset": {"columns": {"age": {"role": "quasi_identifier"}}},
    ...              "component": {"name": "mdav", "params": {"k": 5}}},
    ...     "input": {"asset": "crm/people"},
    ...     "key_prefix": "published"})
    >>> defs = dg.Definitions.merge(
    ...     dg.Definitions(assets=[dg.AssetSpec(["crm", "people"])]),
    ...     rel.build_defs(dg.ComponentTree.for_test().load_context))
    >>> node = defs.resolve_asset_graph().get(dg.AssetKey(["published", "people_k5"]))
    >>> [k.to_user_string() for k in node.parent_keys]
    ['crm/people']
    """

    spec: Annotated[
        ReleaseSpec,
        dg.Resolver(
            _resolve_spec,
            model_field_type=str | dict[str, Any],
            description="A spec file relative to this defs.yaml's folder, or the spec inline "
            "(name, dataset, component, guarantees...: README, Pipeline specs; `privfair describe "
            "ALGORITHM` lists an algorithm's params).",
        ),
    ]
    input: ReleaseInput | None = None
    store: Annotated[
        str | None,
        dg.Resolver(
            _resolve_store,
            model_field_type=str | None,
            description="Release store: a folder (relative: from the project root) or a "
            "pyarrow.fs URI. Default: the privfair resource's ($PRIVFAIR_STORE, else releases).",
        ),
    ] = None
    asset_key: OptionalKey = None
    key_prefix: str | list[str] | None = None
    group: str | None = None
    owners: list[str] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    checks: list[ReleaseChecks] = field(default_factory=list)
    execution: Annotated[
        dict[str, Any] | None,
        dg.Resolver(
            _resolve_execution,
            model_field_type=dict[str, Any] | None,
            description="Where the release runs, over the spec's execution: {engine: spark, "
            "master: 'spark://HOST:7077', conf: {spark.executor.memory: 8g}, scratch: "
            "'hdfs://...', workers: N}. The privfair resource's set fields win over these.",
        ),
    ] = None

    @classmethod
    def get_spec(cls) -> dg.ComponentTypeSpec:
        return dg.ComponentTypeSpec(
            description="A privfair release: a private and fair copy of an upstream asset's "
            "table, published only when every guarantee holds (one blocking check each).",
            owners=[],
            tags=["privacy", "fairness"],
            produces=["asset", "asset_check", "resource"],
        )

    def translator(self) -> PrivfairTranslator:
        """The translator the attributes give (``asset_key``, ``owners``, ``tags``)."""
        return _Named(self.asset_key, self.owners, self.tags)

    def release_key(self) -> dg.AssetKey:
        """The release asset's key: ``asset_key`` or ``[<spec name>]``, after ``key_prefix``."""
        key = self.translator().get_asset_key(self.spec.spec)
        if self.key_prefix:
            prefix = [self.key_prefix] if isinstance(self.key_prefix, str) else self.key_prefix
            key = dg.AssetKey([*prefix, *key.path])
        return key

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        from privfair.dagster.checks import build_privfair_checks
        from privfair.dagster.factory import release_assets

        store = self.store
        if store is not None and "://" not in store and not Path(store).expanduser().is_absolute():
            store = str((Path(context.project_root) / store).resolve())
        try:
            defs = release_assets(
                self.spec.path or self.spec.spec,
                input=self.input.asset if self.input is not None else None,
                key_prefix=self.key_prefix,
                group=self.group,
                translator=self.translator(),
                store=store,
                execution=self.execution,
            )
        except PrivfairError as e:
            key = getattr(e, "key", None)
            attribute = (
                key if key in ("input", "partitions_def") else f"spec.{key}" if key else "spec"
            )
            raise ReleaseAttributeError(
                attribute, getattr(e, "rule", str(e)), _where(context)
            ) from None
        if not self.checks:
            return defs
        own = self.release_key()
        (release,) = [a for a in defs.assets if isinstance(a, dg.AssetsDefinition)]
        taken = {own: {k.name for k in release.check_keys}}
        extra: list[dg.AssetChecksDefinition] = []
        seen: dict[dg.AssetKey, int] = {}
        for i, entry in enumerate(self.checks):
            target = entry.asset or own
            seen[target] = seen.get(target, 0) + 1
            name = f"{target.to_python_identifier()}__privfair_checks"
            built = build_privfair_checks(
                target, entry.demands, name=name if seen[target] == 1 else f"{name}_{seen[target]}"
            )
            names = {k.name for d in built for k in d.check_keys}
            clash = sorted(names & taken.setdefault(target, set()))
            if clash:
                raise ReleaseAttributeError(
                    f"checks.{i}.demands",
                    f"{target.to_user_string()} already has checks named {clash}: give each "
                    "demand an 'id' (its check is then named '<id>_<kind>')",
                    _where(context),
                )
            taken[target] |= names
            extra.extend(built)
        return dg.Definitions.merge(defs, dg.Definitions(asset_checks=extra))
