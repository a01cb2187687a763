"""The shareable copy of a release: what a data owner may hand out, and nothing else.

A release has two parts. The **owner part** (the release folder itself: ``manifest.json``,
``report.html``, ``internal/`` sidecars, ``validation/``) holds everything the validator and the
owner need: input fingerprints and file hashes, input-side metrics, the cost of protection,
every check's observed values and offending rows. The **shareable copy** (``shared/`` inside the
release, copied out by ``privfair export``) holds only

- the public outputs (``<output>.parquet``, in the order the family publishes them: for a
  row-level release a function of the published values only),
- ``manifest.json``: the public manifest (``public_manifest``): the spec's public parts, the
  parameters, the contract, each check's verdict (pass/fail, no observed values), the metrics
  the family's descriptor declares public (``Algorithm.public``), what the guarantee covers and
  does not, the public release id, and the sha256 of every other file of the copy,
- ``report.html``: the public report (``privfair.release.report.render_public_report``), drawn from the
  public manifest and the public outputs only.

Nothing in it is a function of the private input alone: the release id is keyed by the store's
secret (``public_id``), and no input fingerprint, input hash, row count of the input, timing,
warning or check detail is copied. A differentially private family declares public only what is
computed from its noisy measurements, its synthetic output and public parameters.

>>> public_id(b"k" * 32, "loans", "0123456789abcdef")
'a7abcd6001d4a632'
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa

from privfair.components.core.descriptor import Algorithm
from privfair.release.store import SHARED, resolve_release
from privfair.schemas import contracts as C
from privfair.schemas.errors import StoreError
from privfair.schemas.spec import PipelineSpec

FORMAT = "privfair-shared/1"
MANIFEST = "manifest.json"
REPORT = "report.html"

# What the shareable copy never holds, as its manifest tells a reader.
OWNER_ONLY = (
    "the internal sidecars (input row ids, audit tables, ledgers, fitted models)",
    "the input's fingerprint, file hashes and row count, and every input-side metric",
    "each check's observed values and offending rows (the Great Expectations results)",
    "the cost of protection (classifiers trained on the private input)",
    "warnings and timings of the run",
)


def shared_file(name: str) -> str:
    """Where the file ``name`` of the shareable copy lies inside the release folder."""
    return f"{SHARED}/{name}"


def public_id(secret: bytes, pipeline: str, version: str) -> str:
    """The release's id in its shareable copy: HMAC-SHA256 of ``pipeline/version`` under the
    store's key, 16 hex digits. The owner's version id is a hash of the input fingerprint, so
    anyone holding a candidate input could test it against that id; this one cannot be computed
    without the key."""
    return hmac.new(secret, f"{pipeline}/{version}".encode(), hashlib.sha256).hexdigest()[:16]


def public_spec(spec: PipelineSpec) -> dict[str, Any]:
    """The spec as a reader of the shareable copy may see it: its name, description, component
    and parameters, demanded guarantees, schedule, the built-in dataset's name and the declared
    column roles. The input's location (path, source), excluded and ``private`` column names,
    tags and where it ran stay with the owner."""
    d = spec.model_dump(mode="json")
    ds = d.get("dataset") or {}
    columns = {
        c: v for c, v in (ds.get("columns") or {}).items() if (v or {}).get("role") != "private"
    }
    return {
        "name": d["name"],
        "description": d.get("description", ""),
        "component": d["component"],
        "guarantees": d.get("guarantees") or [],
        "schedule": d.get("schedule"),
        "dataset": {
            "name": ds.get("name"),
            "columns": columns or None,
            "quasi_identifiers": ds.get("quasi_identifiers"),
        },
    }


def public_headline(algo: Algorithm, public_metrics: dict) -> dict[str, str]:
    """``{metric key: label}`` of the headline metrics the descriptor declares public."""
    return {m.key: m.label for m in algo.headline if m.get(public_metrics) is not None}


def verdicts(summary: dict) -> dict[str, Any]:
    """The validation as the shareable copy states it: the status and each check's verdict,
    without observed values, messages or offending rows (computed on the owner's evidence)."""
    return {
        "status": summary.get("status"),
        "checked": summary.get("checked"),
        "guarantees_checked": summary.get("guarantees_checked"),
        "schema_checks": summary.get("schema_checks"),
        "failed": list(summary.get("failed") or []),
        "results": [
            {k: r.get(k) for k in ("id", "key", "kind", "passed")}
            for r in summary.get("results") or []
        ],
    }


def public_manifest(
    spec: PipelineSpec,
    algo: Algorithm,
    release_id: str,
    code_version: str,
    result_params: dict,
    contract: list,
    metrics: dict,
    validation_summary: dict,
    outputs: dict[str, pa.Table],
    partition: str | None = None,
    charge: dict | None = None,
) -> dict[str, Any]:
    """The public manifest (module docstring); ``checksums`` is added by the writer. A
    partition's release names its partition key (a period or value the owner chose to
    release, not something read from the rows); a differentially private one its privacy
    ``charge`` (rho, epsilon, delta: functions of its public params), never the ledger's
    blocks, budget or other releases."""
    pub = algo.public.public_metrics(metrics)
    where = {"partition": partition} if partition is not None else {}
    if charge is not None:
        where["privacy_charge"] = charge
    return {
        **where,
        "format": FORMAT,
        "pipeline": spec.name,
        "release": release_id,
        "component": algo.name,
        "title": algo.title,
        "family": algo.family,
        "paper": algo.paper,
        "code_version": code_version,
        "spec": public_spec(spec),
        "params": result_params,
        "contract": C.contract_to_data(contract),
        "validation": verdicts(validation_summary),
        "metrics": pub,
        "headline": public_headline(algo, pub),
        "disclosure": {
            "covers": algo.public.covers,
            "does_not_cover": algo.public.does_not_cover,
            "owner_only": list(OWNER_ONLY),
        },
        "outputs": {k: {"file": f"{k}.parquet", "rows": t.num_rows} for k, t in outputs.items()},
    }


def _sha256(path: Path) -> tuple[str, int]:
    h, size = hashlib.sha256(), 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def verify_copy(folder: Path) -> tuple[dict, str | None]:
    """(public manifest, what is wrong with the shareable copy in ``folder`` or None): its
    manifest is a public manifest and every file it lists is there with its checksum, and no
    other file is."""
    mpath = folder / MANIFEST
    try:
        man = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return {}, f"{mpath} cannot be read: {e}"
    if not isinstance(man, dict) or man.get("format") != FORMAT:
        return {}, f"{mpath} is not the manifest of a shareable copy (format {FORMAT})"
    sums = man.get("checksums") or {}
    present = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    extra = [p for p in present if p != MANIFEST and p not in sums]
    if extra:
        return man, f"files not listed in its manifest: {', '.join(extra)}"
    for name, want in sorted(sums.items()):
        path = folder / name
        if not path.is_file():
            return man, f"{name} is missing"
        digest, size = _sha256(path)
        if size != want.get("size") or digest != want.get("sha256"):
            return man, f"{name} checksum differs"
    return man, None


def export(release: str | Path, dest: str | Path) -> tuple[Path, dict]:
    """Write the shareable copy of ``release`` (a release folder or a ``latest`` pointer) to
    the folder ``dest``, which must not exist or be empty: copied aside, checked against its
    own manifest, then renamed into place. Returns (dest, public manifest). ``StoreError``
    names the path and the rule when the release has no complete shareable copy."""
    folder = resolve_release(Path(release))
    src = folder / SHARED
    if not (folder / "manifest.json").is_file():
        raise StoreError(str(folder), "not a release folder (no manifest.json)")
    if not (src / MANIFEST).is_file():
        raise StoreError(
            str(folder),
            "this release has no shareable copy (shared/manifest.json): it was published "
            "before privfair wrote one; run its spec again to publish a release that has one",
        )
    man, problem = verify_copy(src)
    if problem is not None:
        raise StoreError(str(src), f"the shareable copy is not intact: {problem}")
    target = Path(dest).expanduser().resolve()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise StoreError(str(target), "the export destination must not exist or be empty")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.export-{uuid.uuid4().hex[:8]}"
    try:
        shutil.copytree(src, tmp, copy_function=shutil.copyfile)
        _, problem = verify_copy(tmp)
        if problem is not None:
            raise StoreError(str(tmp), f"the copy does not match its manifest: {problem}")
        for p in [tmp, *tmp.rglob("*")]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        if target.exists():
            target.rmdir()
        os.rename(tmp, target)
    except OSError as e:
        raise StoreError(str(target), f"cannot write the export: {e.strerror or e}") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target, man
