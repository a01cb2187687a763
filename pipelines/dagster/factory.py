"""A privfair release as one asset of the user's own Dagster project (``release_assets``).

The user's project already has assets: a dbt model, a table loaded from Postgres, a frame an
upstream asset computes. ``release_assets(spec, input=their_asset)`` gives back definitions to
merge with theirs (``dg.Definitions.merge(my_defs, release_defs)``):

* **one release asset**, downstream of ``input`` (the lineage edge), whose materialisation is
  one ``privfair run`` of the spec: ingest, protect, validate, publish, the same flow
  (``privfair.run.flow.run_release``), so the same rows and spec give the same version and
  byte-identical files whichever way they are released;
* **one blocking asset check per guarantee** (the data-free outline of the algorithm's contract
  plus the spec's demands, ``privfair.spec.catalogue.check_keys``) and ``contract`` (the whole
  validation, schema checks included), all from the one validation of the candidate. A
  guarantee that fails reports its check as failed and fails the step: nothing is published
  (the candidate is quarantined) and no asset downstream of the release runs;
* **where the rows come from**: a spec whose dataset gives only roles (``dataset: {columns:
  {...}}``) reads ``input``'s value through the user's IO manager (a pandas, polars or Arrow
  frame; ``privfair.io.files.as_table``), and the ledger accounts it as the dataset
  ``dagster-asset:<key>`` besides any name the spec gives (``source.dataset``); a spec with
  its own source (a SQL table, an Iceberg table, a file) reads that source and ``input`` is
  lineage only (``deps``), as a dbt model's asset is for the table it builds;
* **metadata**: the release's folder, version and status, ``dagster/column_schema``,
  ``dagster/row_count``, the headline metrics, the ledger's spend; the asset's data version
  is the release's version id (it changes exactly when the rows, the spec or the code do);
* **partitions**: the spec's (``partitions_def_of``), or ``partitions_def`` (e.g. the
  upstream asset's), which then must cut the rows by the spec's ``partitions`` so the ledger
  accounts each partition's rows; a run releases ``context.partition_key``;
* **resources**: one key, ``privfair`` (``PrivfairResource``: the store, data folder,
  connections and where releases run, a cluster's settings or your ``SparkSession``, also the
  IO manager that hands a downstream asset the published table); no executor, no job, no
  sensor: the user's project decides how it runs;
* **where it runs**: the spec's ``execution``, under the release's own ``execution``, under
  the resource's settings (``engine``, ``master``, ``workers``, ``conf``, ``scratch``, or
  its ``spark`` session); never part of the version.

Importing this module builds nothing; each call builds one spec's definitions.
"""

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from privfair.dagster.partitions import partitions_def_of
from privfair.dagster.resources import PrivfairResource, default_resource
from privfair.dagster.translator import (
    PrivfairTranslator,
    guarantee_description,
    guarantee_metadata,
    manifest_metadata,
)
from privfair.schemas.errors import ContractViolation, PrivfairError, SpecError
from privfair.schemas.spec import PipelineSpec

__all__ = ["CONTRACT_CHECK", "AssetLike", "release_assets", "upstream_key"]

CONTRACT_CHECK = "contract"
#: What names an upstream asset: a key, its user string (``"raw/people"``), its path, or a
#: definition holding one asset.
AssetLike = dg.AssetKey | str | Sequence[str] | dg.AssetsDefinition | dg.AssetSpec | dg.SourceAsset
#: The atom prefix an upstream asset's rows are accounted under (``privfair.io.identity``).
ASSET_DATASET = "dagster-asset:"


def upstream_key(asset: AssetLike, *, key: str = "input") -> dg.AssetKey:
    """The asset key ``asset`` names (``SpecError`` naming ``key`` when it names none, or
    several).

    >>> upstream_key("raw/people").path
    ['raw', 'people']
    >>> upstream_key(dg.AssetSpec(["crm", "customers"])).to_user_string()
    'crm/customers'
    """
    if isinstance(asset, dg.AssetKey):
        return asset
    if isinstance(asset, str):
        return dg.AssetKey.from_user_string(asset)
    if isinstance(asset, (dg.AssetSpec, dg.SourceAsset)):
        return asset.key
    if isinstance(asset, dg.AssetsDefinition):
        keys = list(asset.keys)
        if len(keys) != 1:
            raise SpecError(
                key,
                f"the definition holds {len(keys)} assets "
                f"({', '.join(k.to_user_string() for k in keys[:5])}): give one asset's key",
            )
        return keys[0]
    if isinstance(asset, Sequence) and asset and all(isinstance(p, str) for p in asset):
        return dg.AssetKey(list(asset))
    raise SpecError(
        key, f"not an asset: {type(asset).__name__} (give an AssetKey, a key string or an asset)"
    )


def _spec_of(
    spec: PipelineSpec | str | Path | Mapping[str, Any],
) -> tuple[PipelineSpec, Path | None]:
    """The spec and the file it was read from (None for an object or an inline mapping)."""
    from privfair.spec.catalogue import load_spec, parse_spec

    if isinstance(spec, PipelineSpec):
        return spec, None
    if isinstance(spec, Mapping):
        return parse_spec(dict(spec), source="release_assets(spec=...)"), None
    path = Path(spec)
    return load_spec(path), path.resolve()


def _handed_over(spec: PipelineSpec) -> bool:
    src = spec.dataset.source
    return src is not None and src.kind == "memory"


def release_assets(
    spec: PipelineSpec | str | Path | Mapping[str, Any],
    *,
    input: AssetLike | None = None,
    key_prefix: str | Sequence[str] | None = None,
    group: str | None = None,
    translator: PrivfairTranslator | None = None,
    partitions_def: dg.PartitionsDefinition | None = None,
    store: str | None = None,
    resource: PrivfairResource | None = None,
    execution: Mapping[str, Any] | None = None,
) -> dg.Definitions:
    """The definitions of one privfair release inside a user's Dagster project.

    Parameters
    ----------
    spec : path, PipelineSpec or mapping
        A YAML spec file, a spec object (``privfair.api.spec``) or an inline spec.
    input : AssetKey, str, AssetsDefinition or AssetSpec, optional
        The upstream asset. Its value is the input when the spec's dataset gives only roles;
        otherwise the spec reads its own source and the asset is lineage.
    key_prefix : str or list of str, optional
        Prefixed to the asset key (the translator's, default ``[<spec name>]``).
    group : str, optional
        The asset group (default: the translator's, else Dagster's ``default``).
    translator : PrivfairTranslator, optional
        Names and describes the asset (key, group, owners, tags, kinds, metadata).
    partitions_def : dg.PartitionsDefinition, optional
        Partitions of the release (default: the spec's ``partitions``); only for a spec whose
        ``partitions`` cut the rows by a column, so that each key's rows are accounted.
    store : str, optional
        The release store of this release (default: the ``privfair`` resource's).
    resource : PrivfairResource, optional
        Bound under ``privfair`` (default: one shared instance). Give the same object to every
        call of a project: ``Definitions.merge`` needs one object per resource key.
    execution : mapping, optional
        This release's execution settings over the spec's (``engine``, ``master``,
        ``workers``, ``conf``, ``scratch``), checked now (``SpecError`` naming
        ``execution.<key>``); the resource's set fields win over them at run time.

    Returns
    -------
    dg.Definitions
        One asset with its checks and the ``privfair`` resource; no executor.

    Raises
    ------
    SpecError
        A spec that cannot be read, an ``input`` that names no asset, a spec whose rows are
        handed over without ``input``, partitions the spec does not declare.

    Examples
    --------
    >>> import dagster as dg
    >>> from privfair import api
    >>> @dg.asset
    ... def people():
    ...     ...
    >>> spec = api.spec("people_k5", component="mdav", params={"k": 5}, columns={
    ...     "age": {"role": "quasi_identifier", "kind": "numeric"},
    ...     "sex": {"role": "protected", "kind": "nominal", "favoured": "M"},
    ...     "income": {"role": "label", "kind": "binary", "positive": 1}})
    >>> defs = dg.Definitions.merge(dg.Definitions(assets=[people]),
    ...                             release_assets(spec, input=people, key_prefix="published"))
    >>> graph = defs.resolve_asset_graph()
    >>> [k.to_user_string() for k in graph.get(dg.AssetKey(["published", "people_k5"])).parent_keys]
    ['people']
    >>> checks = {c.name for c in graph.get(dg.AssetKey(["published", "people_k5"])).check_keys}
    >>> {"C4_k_anonymity", "contract"} <= checks
    True
    """
    from privfair.api import execution_settings

    s, path = _spec_of(spec)
    own = execution_settings(execution)
    tr = translator or PrivfairTranslator()
    up = upstream_key(input) if input is not None else None
    handed = _handed_over(s)
    if handed and up is None:
        raise SpecError(
            "input",
            f"the dataset of '{s.name}' gives roles only (its rows are handed over): give the "
            "upstream asset whose value it releases",
        )
    if partitions_def is not None and s.partitions is None:
        raise SpecError(
            "partitions_def",
            f"'{s.name}' declares no partitions: give the spec's 'partitions' (the column the "
            "rows are cut by), so that the ledger accounts each partition's rows",
        )
    pdef = partitions_def or partitions_def_of(s)
    key = tr.get_asset_key(s)
    if key_prefix:
        prefix = [key_prefix] if isinstance(key_prefix, str) else list(key_prefix)
        key = dg.AssetKey([*prefix, *key.path])
    checks = _check_specs(s, key, pdef)
    release = _release_asset(s, path, key, up, handed, checks, pdef, tr, group, store, own)
    return dg.Definitions(assets=[release], resources={"privfair": resource or default_resource()})


def _check_specs(
    s: PipelineSpec, key: dg.AssetKey, pdef: dg.PartitionsDefinition | None
) -> list[dg.AssetCheckSpec]:
    """One blocking check per guarantee of the spec's outline, then ``contract``."""
    from privfair.spec.catalogue import check_keys, outline

    template = outline(s)
    specs = [
        dg.AssetCheckSpec(
            k,
            asset=key,
            blocking=True,
            description=guarantee_description(g),
            partitions_def=pdef,
        )
        for k, g in zip(check_keys(template), template, strict=True)
    ]
    specs.append(
        dg.AssetCheckSpec(
            CONTRACT_CHECK,
            asset=key,
            blocking=True,
            description="The whole validation of the candidate release passes: every "
            "guarantee of the contract rebuilt from the spec, the declared contract holding "
            "all of them, and the schema expectations, run by Great Expectations on the files "
            "to be published.",
            partitions_def=pdef,
        )
    )
    return specs


def _release_asset(
    s: PipelineSpec,
    path: Path | None,
    key: dg.AssetKey,
    up: dg.AssetKey | None,
    handed: bool,
    checks: list[dg.AssetCheckSpec],
    pdef: dg.PartitionsDefinition | None,
    tr: PrivfairTranslator,
    group: str | None,
    store: str | None,
    own: dict[str, Any],
) -> dg.AssetsDefinition:
    names = [c.name for c in checks]
    decorate = dg.asset(
        key=key,
        ins={"rows": dg.AssetIn(up)} if handed else None,
        deps=[up] if up is not None and not handed else None,
        check_specs=checks,
        partitions_def=pdef,
        group_name=group or tr.get_group_name(s),
        owners=tr.get_owners(s) or None,
        tags=tr.get_tags(s),
        kinds=tr.get_kinds(s),
        metadata=tr.get_metadata(s, path),
        description=tr.get_description(s),
        io_manager_key="privfair",
    )

    def materialise(context: dg.AssetExecutionContext, res: PrivfairResource, rows: Any):
        return _materialise(context, res, s, up, rows, names, store, own)

    if handed:

        def release(
            context: dg.AssetExecutionContext, privfair: dg.ResourceParam[PrivfairResource], rows
        ):
            yield from materialise(context, privfair, rows)

    else:

        def release(
            context: dg.AssetExecutionContext, privfair: dg.ResourceParam[PrivfairResource]
        ):
            yield from materialise(context, privfair, None)

    release.__name__ = key.to_python_identifier()
    with warnings.catch_warnings():  # partitioned asset checks: preview in Dagster 1.13
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return decorate(release)


def _materialise(
    context: dg.AssetExecutionContext,
    res: PrivfairResource,
    s: PipelineSpec,
    up: dg.AssetKey | None,
    rows: Any,
    names: list[str],
    store: str | None,
    own: dict[str, Any],
):
    """One ``privfair run`` of ``s``: the check results, then the materialisation."""
    from privfair.api import in_memory, with_settings
    from privfair.components.core.engine import given_session
    from privfair.io.files import as_table
    from privfair.run.flow import run_release
    from privfair.spec.catalogue import algorithm_of

    seen: dict[str, Any] = {}
    try:
        eff = with_settings(s, own, res.execution(), keys=("execution", res.CONFIG_KEY))
        session = res.session()
        table = None
        if rows is not None:
            table = as_table(rows)
            eff = in_memory(eff, f"{ASSET_DATASET}{up.to_user_string()}" if up else None)
        partition = context.partition_key if eff.partitions is not None else None
        with res.scope(), given_session(session):
            out = run_release(
                eff,
                store or res.resolved_store(),
                res.resolved_data_dir(),
                partition=partition,
                table=table,
                on_validated=lambda v: seen.update(summary=v.summary()),
            )
    except ContractViolation as e:
        if "summary" in seen:  # the verdicts are reported, then the step fails: nothing published
            yield from _check_results(seen["summary"], names, "")
        raise dg.Failure(
            description=f"{s.name}: not published. {e}",
            metadata={"failed": dg.MetadataValue.json(list(e.failed))},
            allow_retries=False,
        ) from None
    except PrivfairError as e:
        raise dg.Failure(
            description=f"{s.name}: {type(e).__name__}: {e}", allow_retries=False
        ) from None
    from privfair.release.manifest import Manifest
    from privfair.release.store import Store

    st = Store.open(store or res.resolved_store())
    man = Manifest.read(st, out.pipeline, out.version)
    summary = out.validation.summary() if out.validation is not None else dict(man.validation)
    md: dict[str, Any] = {
        "privfair/path": out.path,
        "privfair/version": out.version,
        "privfair/status": out.status,
    }
    if st.local:
        md.update(
            manifest_metadata(
                out.path, str(Path(out.path) / "manifest.json"), algorithm_of(s).headline
            )
        )
    with warnings.catch_warnings():  # data_version of a MaterializeResult: beta in Dagster 1.13
        warnings.simplefilter("ignore", dg.BetaWarning)
        yield dg.MaterializeResult(
            metadata=md,
            check_results=list(_check_results(summary, names, out.version)),
            data_version=dg.DataVersion(out.version),
        )


def _check_results(summary: Mapping[str, Any], names: list[str], version: str):
    """The result of each declared check from one validation's summary; a declared check with
    no result fails (a guarantee the validation did not report cannot pass)."""
    by_key = {r["key"]: r for r in summary.get("results", []) if r.get("key")}
    for name in names:
        if name == CONTRACT_CHECK:
            passed = summary.get("status") == "passed"
            failed = list(summary.get("failed") or [])
            yield dg.AssetCheckResult(
                check_name=name,
                passed=passed,
                metadata={
                    "checked": int(summary.get("checked") or 0),
                    "failed": dg.MetadataValue.json(failed),
                    "version": version,
                },
                description=f"{int(summary.get('checked') or 0) - len(failed)}/"
                f"{int(summary.get('checked') or 0)} checks hold"
                + ("" if passed else "; candidate quarantined, nothing published"),
            )
            continue
        r = by_key.get(name)
        if r is None:
            yield dg.AssetCheckResult(
                check_name=name,
                passed=False,
                description="no validation result for this guarantee",
            )
            continue
        yield dg.AssetCheckResult(
            check_name=name,
            passed=bool(r["passed"]),
            metadata=guarantee_metadata(r, version),
            description=r.get("message") or None,
        )
