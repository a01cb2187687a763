"""What a spec and a release say, as Dagster metadata (the face's translator).

As ``dagster-dbt`` keeps a project's naming and metadata in a translator apart from the
assets, the builders of ``privfair.dagster.assets`` run the steps and this module turns what
they return into metadata: a spec's description (``spec_metadata``), a task's record
(``ingest_metadata``, ``protect_metadata``, ``release_metadata``, ``evaluation_metadata``),
a validation's checks (``guarantee_description``, ``guarantee_metadata``,
``contract_metadata``) and a manifest's catalogue entries (``column_schema``,
``ledger_metadata``). Nothing here runs a step: it reads the files a step wrote.
"""

import json
from pathlib import Path
from typing import Any

import dagster as dg

from privfair.components.core.descriptor import Algorithm, Metric
from privfair.release.manifest import Manifest
from privfair.schemas.spec import PipelineSpec


def _mv(x: Any) -> Any:
    """A value as Dagster metadata."""
    if x is None:
        return dg.MetadataValue.null()
    if isinstance(x, bool):
        return dg.MetadataValue.bool(x)
    if isinstance(x, int | float):
        return x
    if isinstance(x, str):
        return dg.MetadataValue.text(x)
    return dg.MetadataValue.json(json.loads(json.dumps(x, default=str)))


def _first_line(doc: str | None) -> str:
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def _file_md(path: str) -> dict[str, Any]:
    p = Path(path)
    return {"path": dg.MetadataValue.path(str(p)), "url": dg.MetadataValue.url(p.as_uri())}


def _metric_md(metrics: dict, headline: tuple[Metric, ...]) -> dict[str, Any]:
    """The algorithm's headline metrics as ``metrics/<key>`` metadata."""
    md: dict[str, Any] = {}
    for m in headline:
        v = m.get(metrics)
        if v is not None:
            md[f"metrics/{m.key}"] = _mv(v)
    return md


def _guarantee_name(r: dict) -> str:
    """``<id> <kind>`` of a guarantee (its contract entry or validation result)."""
    return f"{r['id']} {r['kind']}".strip()


# --- a spec --------------------------------------------------------------------------------------
def spec_metadata(path: Path, spec: PipelineSpec, algo: Algorithm) -> dict[str, Any]:
    """The definition metadata of every asset of ``spec`` (read from ``path``): the spec file,
    its component, the algorithm's family, the parameters and the dataset."""
    return {
        "spec_file": dg.MetadataValue.path(str(path)),
        "component": spec.component.name,
        "family": algo.family,
        "params": dg.MetadataValue.json(dict(spec.component.params)),
        "dataset": spec.dataset.name or spec.dataset.path or "",
    }


# --- the steps' records --------------------------------------------------------------------------
def ingest_metadata(out: Any) -> dict[str, Any]:
    """The materialisation metadata of ``raw_table`` from ``tasks.ingest_task``'s record: rows,
    columns, the input's fingerprint and files (and the partition, with its source's
    fingerprint, for a partitioned spec)."""
    info = json.loads(Path(out.input).read_text())
    md = {
        "dagster/row_count": out.rows,
        "columns": out.columns,
        "input_fingerprint": out.fingerprint,
        "input_files": _mv(info.get("files", {})),
    }
    if out.partition is not None:
        md["partition"] = out.partition
        md["source_fingerprint"] = info.get("source_fingerprint", "")
    return md


def protect_metadata(out: Any, overrides: dict, headline: tuple[Metric, ...]) -> dict[str, Any]:
    """The materialisation metadata of ``protected_table`` from ``tasks.protect_task``'s record
    and the run config's ``overrides``: version, rows, parameters, declared guarantees,
    outputs, whether a published release was reused, warnings and the headline metrics."""
    metrics = json.loads(Path(out.metrics).read_text())
    contract = json.loads(Path(out.contract).read_text())
    return {
        "version": out.version,
        "dagster/row_count": out.rows_out,
        "rows_in": out.rows_in,
        "rows_out": out.rows_out,
        "params": _mv(json.loads(Path(out.params).read_text())),
        "overrides": _mv(overrides),
        "declared_guarantees": _mv([_guarantee_name(g) for g in contract]),
        "outputs": _mv(out.outputs),
        "reused_release": _mv(out.reused),
        "warnings": _mv(json.loads(Path(out.result).read_text()).get("warnings", [])),
        **_metric_md(metrics, headline),
    }


def release_metadata(out: Any, headline: tuple[Metric, ...]) -> dict[str, Any]:
    """The materialisation metadata of ``release`` from ``tasks.publish_task``'s record: the
    version, status and folder, links to the report and the shareable copy, and what the
    manifest says (``manifest_metadata``)."""
    md: dict[str, Any] = {
        "version": out.version,
        "status": out.status,
        "release": dg.MetadataValue.path(out.path),
    }
    if out.report:
        rep = _file_md(out.report)
        md["report"], md["report_url"] = rep["path"], rep["url"]
    if out.shared:
        md["shareable_copy"] = dg.MetadataValue.path(out.shared)
        md["shareable_report_url"] = _file_md(str(Path(out.shared) / "report.html"))["url"]
    if out.manifest:
        md.update(manifest_metadata(out.path, out.manifest, headline))
    return md


def manifest_metadata(release: str, manifest: str, headline: tuple[Metric, ...]) -> dict[str, Any]:
    """What the manifest of the release in ``release`` says: publication time, rows, the
    contract's results, the headline metrics, the catalogue entries (``column_schema``), the
    ledger's (``ledger_metadata``) and the partition; a link to the Data Docs if there."""
    man = Manifest.load(manifest)
    val = man.get("validation", {})
    md: dict[str, Any] = {}
    docs_path = (val.get("artefacts") or {}).get("data_docs")
    if docs_path and (Path(release) / docs_path).is_file():
        md["data_docs_url"] = _file_md(str(Path(release) / docs_path))["url"]
    md.update(
        {
            "manifest": dg.MetadataValue.path(manifest),
            "published_at": man.get("published_at", ""),
            "dagster/row_count": sum(
                int(o.get("rows") or 0) for o in (man.get("outputs") or {}).values()
            ),
            "contract/status": val.get("status", "?"),
            "contract/checked": val.get("checked", 0),
            "contract/failed": _mv(val.get("failed", [])),
            "contract/results": _mv(
                {
                    _guarantee_name(r): "PASS" if r["passed"] else "FAIL"
                    for r in val.get("results", [])
                }
            ),
            **_metric_md(man.get("metrics", {}), headline),
            # the output schemas are read where the store is a local folder
            **(column_schema(release, man) if Path(release).is_dir() else {}),
            **ledger_metadata(man),
        }
    )
    if man.get("partition") is not None:
        md["partition"] = man["partition"]
    return md


def evaluation_metadata(out: Any) -> dict[str, Any]:
    """The materialisation metadata of ``evaluation`` from ``tasks.evaluate_task``'s record: a
    Markdown table of accuracy and dPar (mean and 95 % interval) per protection, grid point
    and classifier, links to the page and folder, the grid, folds, points and seconds."""
    import pyarrow.parquet as pq

    rows = pq.read_table(out.summary).to_pylist()
    lines = ["| protection | grid | classifier | accuracy | dPar |", "|---|---|---|---|---|"]
    by: dict[tuple, dict] = {}
    for r in rows:
        by.setdefault((r["protection"], r["grid"], r["classifier"]), {})[r["metric"]] = r
    for (protection, grid, clf), m in sorted(by.items()):
        cells = [
            f"{m[k]['mean']:.3f} [{m[k]['ci_low']:.3f}, {m[k]['ci_high']:.3f}]"
            for k in ("accuracy", "dpar")
        ]
        lines.append(f"| {protection} | {grid} | {clf} | {cells[0]} | {cells[1]} |")
    page = _file_md(out.page)
    return {
        "summary": dg.MetadataValue.md("\n".join(lines)),
        "page": page["path"],
        "page_url": page["url"],
        "folder": dg.MetadataValue.path(out.path),
        "grid": _mv(out.grid),
        "folds": out.folds,
        "points": out.points,
        "seconds": round(out.seconds, 1),
    }


# --- a validation --------------------------------------------------------------------------------
def guarantee_description(g: Any) -> str:
    """The description of a guarantee's check: its title and its kind's first docstring
    paragraph (``g`` one guarantee of the spec's ``outline``)."""
    return f"{g.title}: {_first_line(type(g).__doc__)}"


def guarantee_metadata(r: dict, version: str) -> dict[str, Any]:
    """The metadata of one guarantee's check from its validation result ``r``: the guarantee,
    observed and expected values, offending rows (their count; the first ones if any)."""
    md = {
        "guarantee": _guarantee_name(r),
        "observed": _mv(r.get("observed")),
        "expected": _mv(r.get("expected")),
        "n_offending": int(r.get("n_offending") or 0),
        "version": version,
    }
    if r.get("offending"):
        md["offending (first rows)"] = _mv(r["offending"])
    return md


def contract_metadata(v: Any, by_key: dict, n_schema: int, keys: list[str]) -> dict[str, Any]:
    """The metadata of the ``contract`` check from ``tasks.validate_task``'s record ``v``, its
    results with a key (``by_key``), the number of schema checks and the checks declared
    (``keys``): what was checked and failed, guarantees with no check of their own, and
    where the candidate was quarantined."""
    md = {
        "checked": v.checked,
        "guarantees_checked": len(by_key),
        "schema_checks": n_schema,
        "failed": _mv(v.failed),
        "version": v.version,
        "guarantees_without_own_check": _mv([k for k in by_key if k not in keys]),
    }
    if v.quarantine:
        md["quarantined_at"] = dg.MetadataValue.path(v.quarantine)
    return md


# --- the catalogue -------------------------------------------------------------------------------
def column_schema(release: str, man: dict) -> dict[str, Any]:
    """Catalogue metadata of a published release (``privfair.release.catalog_metadata``):
    ``dagster/table_name`` ``privfair.<pipeline>.<output>`` of its main output (``data`` when
    it has one, else its first), ``dagster/column_schema`` its columns (Arrow type; the
    description names the role and the guarantees naming the column; tag ``privfair/role``);
    with several outputs, ``privfair/tables`` lists every output's table name and columns."""
    from privfair.release.catalog_metadata import columns, table_name

    found = columns(release, man)
    if not found:
        return {}
    main = "data" if "data" in found else next(iter(found))
    tables = {
        out: dg.TableSchema(
            columns=[
                dg.TableColumn(
                    name=c.name,
                    type=c.type,
                    description=c.description,
                    tags={"privfair/role": c.role} if c.role else {},
                )
                for c in cols
            ]
        )
        for out, cols in found.items()
    }
    md: dict[str, Any] = {
        "dagster/table_name": table_name(man["pipeline"], main),
        "dagster/column_schema": tables[main],
    }
    if len(found) > 1:
        md["privfair/tables"] = _mv(
            {
                table_name(man["pipeline"], out): [c.name for c in cols]
                for out, cols in found.items()
            }
        )
    return md


def ledger_metadata(man: dict) -> dict[str, Any]:
    """``privfair/budget_spent`` and ``privfair/budget_remaining`` of the most-spent block after
    a differentially private release, from the manifest's ``ledger`` section; for another
    release, the re-publication policy it was admitted under (``privfair/republish``)."""
    led = man.get("ledger")
    if not isinstance(led, dict):
        return {}
    if led.get("charge") is None:  # not differentially private: recorded, nothing spent
        return {"privfair/republish": _mv(led["policy"])} if led.get("policy") else {}
    md = {
        "privfair/budget_spent": _mv(led.get("spent")),
        "privfair/budget_remaining": _mv(led.get("remaining")),
    }
    if led.get("dataset"):
        md["privfair/ledger_dataset"] = _mv(led["dataset"])
    return md


# --- a release in someone else's project ---------------------------------------------------------
class PrivfairTranslator:
    """How a spec's release asset is named and described in a user's project (as
    ``dagster_dbt.DagsterDbtTranslator`` does for dbt models): subclass it and override any
    method, then give an instance to ``privfair.dagster.release_assets(translator=...)``.

    Each method takes the spec (``PipelineSpec``). The defaults: key ``[<spec name>]``, no
    group (Dagster's ``default``), no owners, tag ``privfair/family``, kinds ``privfair`` and
    the family, the spec's description, the metadata of ``spec_metadata``.

    >>> from privfair import api
    >>> spec = api.spec("people", component="mdav", params={"k": 5},
    ...                 columns={"age": {"role": "quasi_identifier"}})
    >>> class Mine(PrivfairTranslator):
    ...     def get_asset_key(self, spec):
    ...         return dg.AssetKey(["published", spec.name])
    >>> Mine().get_asset_key(spec).to_user_string()
    'published/people'
    """

    def get_asset_key(self, spec: PipelineSpec) -> dg.AssetKey:
        return dg.AssetKey([spec.name])

    def get_group_name(self, spec: PipelineSpec) -> str | None:
        return None

    def get_owners(self, spec: PipelineSpec) -> list[str]:
        return []

    def get_tags(self, spec: PipelineSpec) -> dict[str, str]:
        from privfair.spec.catalogue import algorithm_of

        return {"privfair/family": algorithm_of(spec).family}

    def get_kinds(self, spec: PipelineSpec) -> set[str]:
        from privfair.spec.catalogue import algorithm_of

        return {"privfair", algorithm_of(spec).family}

    def get_description(self, spec: PipelineSpec) -> str:
        from privfair.spec.catalogue import algorithm_of

        algo = algorithm_of(spec)
        return (
            (spec.description or f"{spec.name}: a privfair release.").strip()
            + f"\n\n{algo.title} ({algo.family}). Published only when every guarantee holds "
            "(one blocking check each, plus `contract`); its data version is the release's "
            "version id."
        )

    def get_metadata(self, spec: PipelineSpec, path: Path | None) -> dict[str, Any]:
        from privfair.spec.catalogue import algorithm_of

        md = spec_metadata(path or Path(spec.name), spec, algorithm_of(spec))
        if path is None:
            md.pop("spec_file")
        return md
