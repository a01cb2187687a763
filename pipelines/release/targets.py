"""Publishing a release to a lakehouse table (a spec's ``target``) by write-audit-publish.

What goes to the table is the shareable copy's outputs (``shared/<output>.parquet``), never the
owner part. The steps map onto the release flow (``privfair.run.flow``):

- **write** (in ``stage``, after the candidate passed validation): an Iceberg target gets the
  release on an audit branch ``privfair-audit-<release>`` that readers of ``main`` do not see;
  a Delta target gets a staging table beside the table;
- **audit** (same step): the rows are read back from the branch or staging table and must be the
  validated rows, and they are validated again as the release's public output
  (``validate_release``); a failure drops the branch / staging table and the candidate is
  quarantined (``main`` never moved);
- **publish** (in ``publish``, before the store's atomic rename): Iceberg ``main`` is
  fast-forwarded to the branch, tagged ``privfair-<release>``, the branch dropped and the table
  properties set, in one commit that requires ``main`` not to have moved since the branch was
  written (a concurrent publish makes this one fail cleanly: nothing half-published); Delta is
  overwritten in one commit whose metadata names the release.

An audit branch or staging table exists only while its release runs. Before writing, a run
removes any it finds (a dead run's; a concurrent run's then fails its publish cleanly): the
branch is dropped and every snapshot no remaining branch or tag reaches is expired, with the
files only those snapshots held, so no snapshot outside ``main``'s history and the tags can be
read by its id; an Iceberg table privfair writes keeps one previous metadata file (``HYGIENE``),
so no older metadata file lists an expired snapshot either. The same sweep follows a failed
audit, a failed fast-forward and a publish. ``residues`` names what dead runs left before the
next write removes it (the ledger counts it as published). Table properties, snapshot
summaries, column docs and Delta commits carry no path and no timing but the commit's time (a
Delta commit is made of files privfair writes, as actions: ``write_deltalake`` records how long
it took).

A partition's release replaces that partition's rows only: the table has a
``privfair_partition`` column and the write is an overwrite filtered on it. Tables are named
``NS.NAME`` for the ``data`` output and ``NS.NAME_<output>`` for any other; Iceberg drops
Arrow's field metadata, so each column's role and the guarantees that name it go into its
``doc``, the public contract into the table properties (``privfair.contract``).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core.order import published_order
from privfair.schemas import contracts as C
from privfair.schemas.errors import ContractViolation, SpecError, StoreError
from privfair.schemas.spec import TargetSpec

__all__ = [
    "PARTITION_COLUMN",
    "Written",
    "catalog_name",
    "column_docs",
    "discard",
    "published_lines",
    "publish",
    "release_of",
    "residues",
    "target_catalog",
    "write_and_audit",
]

PARTITION_COLUMN = "privfair_partition"
LAKEHOUSE = ".lakehouse"
AUDIT_PREFIX = "privfair-audit-"
STAGING_MARK = "__privfair_staging_"
# an Iceberg table privfair writes keeps one previous metadata file, and deletes the others:
# an older metadata file still lists the snapshots expired since (``_sweep_iceberg``)
HYGIENE = {
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "1",
}


@dataclass(frozen=True)
class Written:
    """A release written to its target and audited, not yet published."""

    kind: str
    tables: dict[str, str]  # output -> table name or URL
    ref: str  # the audit branch (Iceberg) or the staging suffix (Delta)
    tag: str


def branch_of(release_id: str) -> str:
    return f"{AUDIT_PREFIX}{release_id}"


def tag_of(release_id: str) -> str:
    return f"privfair-{release_id}"


def column_docs(table: pa.Table, contract: list) -> dict[str, str]:
    """Each column's doc: ``privfair.release.catalog_metadata.Column.description`` (its role, kind,
    favoured/positive values and the guarantees naming it), the form
    ``privfair.io.connectors.roles_from_docs`` reads back."""
    from privfair.release.catalog_metadata import describe

    return {c.name: c.description for c in describe(table.schema, C.contract_to_data(contract))}


# --- where -----------------------------------------------------------------------------------------
def _base(plan) -> Path:
    return Path(plan.spec.spec_dir) if plan.spec.spec_dir is not None else Path.cwd()


def _lakehouse(plan, create: bool = True) -> Path:
    store = plan.open_store()
    if not store.local:
        raise SpecError(
            "target.catalog",
            "a store that is not a local folder has no default lakehouse: give catalog and "
            "warehouse",
        )
    root = Path(store.path(LAKEHOUSE))
    if create:
        (root / "warehouse").mkdir(parents=True, exist_ok=True)
    return root


def _iceberg_names(target: TargetSpec, plan, outputs: list[str]) -> dict[str, str]:
    base = target.table or f"privfair.{plan.name}"
    return {o: base if o == "data" else f"{base}_{o}" for o in outputs}


def catalog_name(target: TargetSpec) -> str:
    """The name the target's Iceberg catalog is opened under (``target.catalog_name``, default
    ``privfair``). A SQL catalog keys every table it holds by that name: a reader opening the
    same database under another name (pyiceberg's ``default``...) sees no table at all."""
    from privfair.io.connectors import ICEBERG_CATALOG

    return target.catalog_name or ICEBERG_CATALOG


def _catalog_location(
    target: TargetSpec, plan, create: bool = True
) -> tuple[str, str | None] | None:
    """(catalog URI, warehouse) of an Iceberg target, both expanded; None when ``create`` is
    false and the default lakehouse has not been created yet."""
    from privfair.io.urls import connection_uri, expand

    if target.conn_id is not None:
        uri = connection_uri(target.conn_id, "target.conn_id")
        warehouse = expand(target.warehouse, "target.warehouse") if target.warehouse else None
    elif target.catalog is None:
        root = _lakehouse(plan, create)
        if not create and not (root / "catalog.db").exists():
            return None
        uri = f"sqlite:///{root / 'catalog.db'}"
        warehouse = (root / "warehouse").as_uri()
    else:
        uri = expand(target.catalog, "target.catalog")
        warehouse = expand(target.warehouse, "target.warehouse") if target.warehouse else None
    return uri, warehouse


def target_catalog(target: TargetSpec, plan, create: bool = True):
    """The Iceberg catalog an ``iceberg`` target publishes into, opened.

    Its location: the target's ``conn_id`` (an Airflow connection), else its ``catalog`` and
    ``warehouse``, else the default lakehouse of the release's store (a SQLite catalog
    ``.lakehouse/catalog.db`` and the warehouse ``.lakehouse/warehouse`` beside the releases);
    it is opened under ``catalog_name(target)``.

    Parameters
    ----------
    target
        The spec's ``target`` (``kind: iceberg``).
    plan
        The release being published: what is read is its ``spec`` (``spec_dir``, the base of
        a relative path) and ``open_store()`` (the store that holds the default lakehouse).
    create
        Whether to create the default lakehouse's folders when they are missing.

    Returns
    -------
    pyiceberg.catalog.Catalog or None
        The catalog; None when ``create`` is false and the default lakehouse has not been
        created yet.

    Raises
    ------
    SpecError
        The default lakehouse is asked of a store that is not a local folder.
    StoreError
        The catalog cannot be opened.
    """
    from privfair.io.connectors import _iceberg_catalog

    where = _catalog_location(target, plan, create)
    if where is None:
        return None
    uri, warehouse = where
    try:
        return _iceberg_catalog(uri, warehouse, _base(plan), target.catalog_name)
    except Exception as e:
        from privfair.io.urls import redact

        raise StoreError(redact(uri), f"the Iceberg catalog cannot be opened: {e}") from None


def _delta_url(target: TargetSpec, plan, output: str) -> str:
    from privfair.io.urls import connection_uri, expand

    if target.conn_id is not None:
        url = connection_uri(target.conn_id, "target.conn_id")
    else:
        url = expand(target.url, "target.url")
    if "://" not in url and not Path(url).is_absolute():
        url = str((_base(plan) / url).resolve())
    return url if output == "data" else f"{url.rstrip('/')}_{output}"


def _staging(url: str, release_id: str) -> str:
    return f"{url.rstrip('/')}{STAGING_MARK}{release_id}"


# --- residues of earlier runs ------------------------------------------------------------------------
def residues(target: TargetSpec, plan, outputs: Iterable[str] | None = None) -> list[str]:
    """What runs of ``plan``'s pipeline left readable on ``target`` (the spec's target) besides
    what they published: an audit branch or staging table exists only while its release runs,
    so one found here is a dead run's (or a run's writing right now), and it was readable until
    the next write to the target removes it (``write_and_audit``). ``outputs``: the outputs
    whose tables are looked at (default: the algorithm's). Only reads: nothing is created or
    removed; a table or default lakehouse that does not exist yet has none.

    Each is named so that ``release_of`` gives its release id:
    ``TABLE@privfair-audit-<release>`` an Iceberg audit branch,
    ``TABLE@privfair-audit-<release>#<snapshot id>`` a snapshot of that release no branch or tag
    reaches (a branch dropped, its snapshots not expired), ``TABLE#<snapshot id>`` such a
    snapshot that names no release, ``URL__privfair_staging_<release>`` a Delta staging table
    (the URL as ``privfair.io.urls.redact`` shows it). ``StoreError`` when the catalog or
    the folder cannot be read."""
    names = list(outputs) if outputs is not None else list(plan.algo.outputs)
    if target.kind == "iceberg":
        return _iceberg_residues(target, plan, names)
    from privfair.io.urls import redact

    return [redact(u) for k in names for u in _stagings(_delta_url(target, plan, k))]


def release_of(residue: str) -> str | None:
    """The release id a name from ``residues`` carries (None: a snapshot naming none).

    >>> release_of("privfair.t@privfair-audit-0a1b2c3d4e5f6a7b#123")
    '0a1b2c3d4e5f6a7b'
    >>> release_of("/lake/t__privfair_staging_0a1b2c3d4e5f6a7b")
    '0a1b2c3d4e5f6a7b'
    >>> release_of("privfair.t#123") is None
    True
    """
    for mark in (STAGING_MARK, "@" + AUDIT_PREFIX):
        if mark in residue:
            return residue.rsplit(mark, 1)[1].split("#", 1)[0] or None
    return None


def _iceberg_residues(target, plan, names: list[str]) -> list[str]:
    from pyiceberg.exceptions import NoSuchTableError

    cat = target_catalog(target, plan, create=False)
    if cat is None:
        return []
    out: list[str] = []
    for name in _iceberg_names(target, plan, names).values():
        try:
            tbl = cat.load_table(name)
        except NoSuchTableError:
            continue
        except Exception as e:
            raise StoreError(name, f"cannot read the Iceberg table: {e}") from None
        out += [f"{name}@{b}" for b in _audit_branches(tbl)]
        for sid in sorted(_unreferenced(tbl)):
            release = (tbl.snapshot_by_id(sid).summary or {}).get("privfair.release")
            out.append(f"{name}@{branch_of(release)}#{sid}" if release else f"{name}#{sid}")
    return out


def _audit_branches(tbl) -> list[str]:
    from pyiceberg.table.refs import SnapshotRefType

    return sorted(
        r
        for r, ref in tbl.refs().items()
        if r.startswith(AUDIT_PREFIX) and ref.snapshot_ref_type == SnapshotRefType.BRANCH
    )


def _reached(tbl, drop: Iterable[str] = ()) -> set[int]:
    """The snapshots a branch or tag other than ``drop`` reaches (its head and ancestors)."""
    drop = set(drop)
    out: set[int] = set()
    for r, ref in tbl.refs().items():
        if r not in drop:
            out |= _lineage(tbl, ref.snapshot_id)
    return out


def _unreferenced(tbl, drop: Iterable[str] = ()) -> set[int]:
    """The snapshots readable by id only once the refs ``drop`` are gone."""
    return {s.snapshot_id for s in tbl.metadata.snapshots} - _reached(tbl, drop)


def _files(tbl, snapshot_ids: Iterable[int]) -> set[str]:
    """Every file the snapshots ``snapshot_ids`` name: manifest lists, manifests, data and
    delete files (a deleted entry's file too)."""
    out: set[str] = set()
    seen: set[str] = set()
    for sid in snapshot_ids:
        snap = tbl.snapshot_by_id(sid)
        if snap is None:
            continue
        out.add(snap.manifest_list)
        for m in snap.manifests(tbl.io):
            if m.manifest_path in seen:
                continue
            seen.add(m.manifest_path)
            out.add(m.manifest_path)
            out |= {e.data_file.file_path for e in m.fetch_manifest_entry(tbl.io, False)}
    return out


def _sweep_iceberg(cat, name: str, branches: Iterable[str] | None = None) -> None:
    """Drop ``branches`` (default: every audit branch) of the table ``name``, expire every
    snapshot no remaining branch or tag reaches, and delete the files only those snapshots
    held and the metadata files that still list them: afterwards no snapshot outside the
    history of ``main`` (and of the table's other branches and tags) can be read, by id or
    from an older metadata file. Nothing to do: no commit."""
    from pyiceberg.table.update.snapshot import ExpireSnapshots, ManageSnapshots

    tbl = cat.load_table(name)
    drop = _audit_branches(tbl) if branches is None else [b for b in branches if b in tbl.refs()]
    expire = _unreferenced(tbl, drop)
    if not drop and not expire:
        return
    gone = _files(tbl, expire) - _files(tbl, _reached(tbl, drop)) if expire else set()
    with tbl.transaction() as tx:
        if any(tbl.properties.get(k) != v for k, v in HYGIENE.items()):
            tx.set_properties(HYGIENE)
        if drop:
            ms = ManageSnapshots(transaction=tx)
            for b in drop:
                ms.remove_branch(b)
            ms._commit_if_ref_updates_exist()
        if expire:
            ExpireSnapshots(transaction=tx).by_ids(sorted(expire)).commit()
    for path in sorted(gone):
        with contextlib.suppress(FileNotFoundError):
            tbl.io.delete(path)
    # the metadata file before this commit lists what was just expired: the next commit drops
    # it from the log and deletes it (HYGIENE)
    tbl = cat.load_table(name)
    with tbl.transaction() as tx:
        tx.set_properties(HYGIENE)


def _stagings(url: str) -> list[str]:
    """The Delta staging tables beside the table at ``url`` (any release's)."""
    import pyarrow.fs as pafs

    url = url.rstrip("/")
    base = url.rsplit("/", 1)[-1]
    beside = url[: len(url) - len(base)]  # the parent, as ``url`` spells it
    try:
        if "://" in url and not url.startswith("file://"):
            fs, path = pafs.FileSystem.from_uri(url)
            infos = fs.get_file_info(
                pafs.FileSelector(path.rsplit("/", 1)[0], allow_not_found=True)
            )
            found = [i.base_name for i in infos if i.type == pafs.FileType.Directory]
        else:
            parent = Path(url.removeprefix("file://")).parent
            found = [p.name for p in parent.iterdir() if p.is_dir()] if parent.is_dir() else []
    except Exception as e:
        from privfair.io.urls import redact

        raise StoreError(redact(url), f"cannot list the Delta table's folder: {e}") from None
    return sorted(beside + f for f in found if f.startswith(base + STAGING_MARK))


def _sweep_delta(url: str) -> None:
    """Delete every staging table beside the Delta table at ``url``."""
    for staging in _stagings(url):
        _remove(staging)


# --- the rows --------------------------------------------------------------------------------------
def _rows(table: pa.Table, partition: str | None) -> pa.Table:
    """The public output as the target holds it: no Arrow metadata, plus the partition key."""
    plain = table.replace_schema_metadata(None)
    plain = pa.Table.from_arrays(
        plain.columns, schema=pa.schema([f.remove_metadata() for f in plain.schema])
    )
    if partition is not None:
        plain = plain.append_column(PARTITION_COLUMN, pa.array([partition] * plain.num_rows))
    return plain


def _own_rows(read: pa.Table, partition: str | None) -> pa.Table:
    """The rows of ``partition`` in a table read back from a target, without the key column
    (the whole table when the release is not a partition's)."""
    if partition is None:
        return read
    return read.filter(pc.equal(read[PARTITION_COLUMN], partition)).drop_columns([PARTITION_COLUMN])


def _same_rows(read: pa.Table, want: pa.Table, partition: str | None) -> bool:
    read = _own_rows(read, partition)
    if read.column_names != want.column_names or read.num_rows != want.num_rows:
        return False
    try:
        read = read.cast(want.schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return read.take(published_order(read)).equals(want.take(published_order(want)))


# --- write and audit ------------------------------------------------------------------------------
def write_and_audit(plan, cand, result, release_id: str, revalidate) -> Written:
    """Write the candidate's public outputs to the target's audit branch / staging table, read
    them back and audit them (module docstring). ``revalidate(outputs)`` validates outputs read
    back from the target as the release's public outputs and returns the failed check ids.
    Raises ``ContractViolation`` (id ``target.audit``) after dropping what it wrote when the
    audit fails; ``StoreError`` when the target cannot be written."""
    from privfair.release.layout import output_file

    target = plan.spec.target
    outputs = {k: cand.read_table(output_file(k)) for k in result.outputs}
    if target.kind == "iceberg":
        written, read = _iceberg_write(target, plan, outputs, release_id)
    else:
        written, read = _delta_write(target, plan, outputs, release_id)
    problems = [
        f"{written.tables[k]}: the rows read back are not the validated rows"
        for k in outputs
        if not _same_rows(read[k], outputs[k], plan.partition)
    ]
    if not problems:
        # the target keeps no Arrow metadata: the candidate's schema gives the roles back
        back = {k: _own_rows(t, plan.partition).cast(outputs[k].schema) for k, t in read.items()}
        problems = [f"{f} fails on the rows read from the target" for f in revalidate(back)]
    if problems:
        discard(plan, written)
        raise ContractViolation(["target.audit"], "\n".join(f"  {p}" for p in problems))
    return written


def _iceberg_write(target, plan, outputs, release_id):
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.expressions import AlwaysTrue, EqualTo

    cat = target_catalog(target, plan)
    names = _iceberg_names(target, plan, list(outputs))
    branch = branch_of(release_id)
    read = {}
    for k, t in outputs.items():
        rows = _rows(t, plan.partition)
        ns = names[k].rsplit(".", 1)[0]
        try:
            cat.create_namespace_if_not_exists(ns)
            try:
                tbl = cat.load_table(names[k])
            except NoSuchTableError:
                tbl = cat.create_table(names[k], schema=rows.schema, properties=HYGIENE)
                # a table with no snapshot can only be written on main: start it empty
                tbl.append(rows.slice(0, 0), snapshot_properties={"privfair.event": "created"})
            if any(tbl.properties.get(p) != v for p, v in HYGIENE.items()):
                with tbl.transaction() as tx:
                    tx.set_properties(HYGIENE)
            # an audit branch exists only while its release runs: one found here is a dead
            # run's (or a concurrent one's, whose publish then fails cleanly); it goes, with
            # every snapshot only a dropped branch reached
            _sweep_iceberg(cat, names[k])
            tbl = cat.load_table(names[k])
            # the branch starts at main, so that it holds main's rows plus this release's
            # and publishing it is a fast-forward
            tbl.manage_snapshots().create_branch(
                tbl.current_snapshot().snapshot_id, branch
            ).commit()
            tbl = cat.load_table(names[k])
            if not _schema_matches(tbl, rows.schema):
                with tbl.update_schema() as u:
                    u.union_by_name(rows.schema)
            props = {"privfair.release": release_id, "privfair.pipeline": plan.name}
            where = AlwaysTrue()
            if plan.partition is not None:
                props["privfair.partition"] = plan.partition
                where = EqualTo(PARTITION_COLUMN, plan.partition)
            with warnings.catch_warnings():
                # the first release of a table has nothing to replace: pyiceberg warns about it
                warnings.filterwarnings("ignore", "Delete operation did not match", UserWarning)
                tbl.overwrite(
                    rows, overwrite_filter=where, snapshot_properties=props, branch=branch
                )
            tbl = cat.load_table(names[k])
            read[k] = tbl.scan(snapshot_id=tbl.refs()[branch].snapshot_id).to_arrow()
        except ContractViolation:
            raise
        except Exception as e:
            raise StoreError(names[k], f"cannot write the Iceberg audit branch: {e}") from None
    return Written("iceberg", names, branch, tag_of(release_id)), read


def _schema_matches(tbl, schema: pa.Schema) -> bool:
    have = tbl.schema().as_arrow()
    return have.names == schema.names


def _delta_write(target, plan, outputs, release_id):
    from deltalake import DeltaTable, write_deltalake

    urls = {k: _delta_url(target, plan, k) for k in outputs}
    read = {}
    for k, t in outputs.items():
        staging = _staging(urls[k], release_id)
        try:
            _sweep_delta(urls[k])  # any staging table beside the target is a dead run's
            write_deltalake(staging, _rows(t, plan.partition), mode="overwrite")
            read[k] = DeltaTable(staging).to_pyarrow_table()
        except Exception as e:
            raise StoreError(staging, f"cannot write the Delta staging table: {e}") from None
    return Written("delta", urls, release_id, tag_of(release_id)), read


def _remove(url: str) -> None:
    if "://" in url and not url.startswith("file://"):
        import pyarrow.fs as pafs

        fs, path = pafs.FileSystem.from_uri(url)
        if fs.get_file_info(path).type != pafs.FileType.NotFound:
            fs.delete_dir(path)
        return
    shutil.rmtree(url.removeprefix("file://"), ignore_errors=True)


def discard(plan, written: Written) -> None:
    """Drop what ``write_and_audit`` wrote: the audit branch with the snapshots only it
    reached (expired, their files deleted: none can be read by id), the staging tables."""
    if written.kind == "iceberg":
        cat = target_catalog(plan.spec.target, plan)
        for name in written.tables.values():
            # the table is gone, or the next write sweeps what is left
            with contextlib.suppress(Exception):
                _sweep_iceberg(cat, name, [written.ref])
    else:
        for url in written.tables.values():
            _remove(_staging(url, written.ref))


# --- publish ----------------------------------------------------------------------------------------
def publish(
    plan, outputs: dict[str, pa.Table], release_id: str, contract: list, cand=None
) -> dict[str, Any]:
    """Make the audited release of ``outputs`` (the candidate's public outputs) what readers
    of the target see (module docstring), with each column's doc (``column_docs``) and the
    public ``contract`` in the same commit; returns ``{table: {"table", "snapshot" |
    "version", "tag"}}``. ``StoreError`` when another run published to the table since this
    one wrote its branch (its branch is dropped: nothing of this release is published).
    ``cand`` (the candidate being published): its owner manifest records where the release
    went (``record``), before the candidate is moved into place."""
    target = plan.spec.target
    text = json.dumps(C.contract_to_data(contract), sort_keys=True)
    docs = {k: column_docs(t, contract) for k, t in outputs.items()}
    if target.kind == "iceberg":
        published = _iceberg_publish(target, plan, docs, release_id, text)
    else:
        published = _delta_publish(target, plan, list(outputs), release_id, text)
    if cand is not None:
        _record_in(cand, record(plan, published))
    return published


def record(plan, published: dict[str, Any]) -> dict[str, Any]:
    """What the owner's manifest says of the release's target (``manifest["target"]``): its
    kind, for Iceberg the catalog's name (``catalog_name``: a reader must open the catalog
    under it), URI (password redacted) and warehouse, and each output's table with the
    snapshot (Iceberg) or version (Delta) this release published and its tag. The owner's
    only: the shareable copy names no table, catalog or location."""
    from privfair.io.urls import redact

    target = plan.spec.target
    names = (
        _iceberg_names(target, plan, list(plan.algo.outputs))
        if target.kind == "iceberg"
        else {o: _delta_url(target, plan, o) for o in plan.algo.outputs}
    )
    by_table = {v: k for k, v in names.items()}
    tables = {}
    for name, rec in published.items():
        row = {"table": redact(str(rec["table"]))}
        for key in ("snapshot", "version", "tag"):
            if rec.get(key) is not None:
                row[key] = rec[key]
        tables[by_table.get(name, name)] = row
    out: dict[str, Any] = {"kind": target.kind}
    if target.kind == "iceberg":
        uri, warehouse = _catalog_location(target, plan)
        out["catalog_name"] = catalog_name(target)
        out["catalog"] = redact(uri)
        if target.conn_id is not None:
            out["conn_id"] = target.conn_id
        if warehouse is not None:
            out["warehouse"] = redact(warehouse)
    elif target.conn_id is not None:
        out["conn_id"] = target.conn_id
    if plan.partition is not None:
        out["partition"] = {"column": PARTITION_COLUMN, "key": plan.partition}
    out["tables"] = tables
    return out


def _record_in(cand, rec: dict[str, Any]) -> None:
    """Add ``rec`` to the candidate's owner manifest as ``target`` (the manifest is not among
    the checksums it lists: nothing else changes)."""
    man = json.loads(cand.store.read_text(*cand.parts, "manifest.json"))
    man["target"] = rec
    cand.write("manifest.json", json.dumps(man, indent=2, sort_keys=True).encode())


def published_lines(man: dict) -> list[str]:
    """The lines ``privfair run`` prints of the release's target (its owner manifest's
    ``target``): each table, with the snapshot or version it published, and for Iceberg the
    catalog to open (its name, URI and warehouse). None without a target.

    >>> published_lines({"target": {"kind": "iceberg", "catalog_name": "privfair",
    ...     "catalog": "sqlite:///s/.lakehouse/catalog.db", "warehouse": "file:///s/wh",
    ...     "tables": {"data": {"table": "privfair.p", "snapshot": 7, "tag": "privfair-ab"}}}})
    ... # doctest: +NORMALIZE_WHITESPACE
    ['  iceberg table: privfair.p, snapshot 7 (tag privfair-ab)',
     "  iceberg catalog: 'privfair' at sqlite:///s/.lakehouse/catalog.db, warehouse file:///s/wh
     (open it under the name 'privfair': another name sees no table)"]
    """
    rec = man.get("target") if isinstance(man, dict) else None
    if not isinstance(rec, dict):
        return []
    kind = rec.get("kind")
    lines = []
    for t in (rec.get("tables") or {}).values():
        at = f"snapshot {t['snapshot']}" if "snapshot" in t else f"version {t.get('version')}"
        tag = f" (tag {t['tag']})" if t.get("tag") else ""
        lines.append(f"  {kind} table: {t.get('table')}, {at}{tag}")
    if kind == "iceberg":
        name = rec.get("catalog_name")
        wh = f", warehouse {rec['warehouse']}" if rec.get("warehouse") else ""
        lines.append(
            f"  iceberg catalog: '{name}' at {rec.get('catalog')}{wh} (open it under the "
            f"name '{name}': another name sees no table)"
        )
    return lines


def _iceberg_publish(target, plan, docs, release_id, contract):
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.table.update.snapshot import ManageSnapshots

    cat = target_catalog(target, plan)
    branch, tag = branch_of(release_id), tag_of(release_id)
    out = {}
    for output, name in _iceberg_names(target, plan, list(docs)).items():
        tbl = cat.load_table(name)
        if branch not in tbl.refs():
            if tag in tbl.refs():  # published by an earlier attempt of this release
                out[name] = {"table": name, "snapshot": tbl.refs()[tag].snapshot_id, "tag": tag}
                continue
            raise StoreError(name, f"the audit branch {branch} is gone: run the release again")
        snap = tbl.refs()[branch].snapshot_id
        main = tbl.current_snapshot()
        try:
            if main is not None and main.snapshot_id not in _lineage(tbl, snap):
                # main moved since the branch was written: moving it to the branch would drop
                # what was published meanwhile (not a fast-forward)
                raise CommitFailedException(f"main is at {main.snapshot_id}, not an ancestor")
            # the transaction requires main to be where it was just read: a publish between
            # this check and the commit fails it
            with tbl.transaction() as tx:
                with tx.update_schema() as u:
                    for col, doc in docs[output].items():
                        u.update_column(col, doc=doc)
                tx.set_properties(
                    {
                        "privfair.pipeline": plan.name,
                        "privfair.release": release_id,
                        "privfair.contract": contract,
                    }
                )
                ms = ManageSnapshots(transaction=tx)
                ms.set_current_snapshot(ref_name=branch)
                if tag not in tbl.refs():
                    ms.create_tag(snap, tag)
                ms.remove_branch(branch)
                ms._commit_if_ref_updates_exist()
        except CommitFailedException as e:
            _sweep_iceberg(cat, name, [branch])
            raise StoreError(
                name,
                f"another run published to this Iceberg table meanwhile ({e}); nothing of this "
                "release was published: run it again",
            ) from None
        try:
            # main reaches every snapshot of the branch it was fast-forwarded to: what goes is
            # any other snapshot no branch or tag reaches
            _sweep_iceberg(cat, name, [])
        except Exception as e:  # published all the same; the next write sweeps again
            warnings.warn(f"{name}: unreferenced snapshots not expired: {e}", stacklevel=2)
        out[name] = {"table": name, "snapshot": snap, "tag": tag}
    return out


def _lineage(tbl, snapshot_id: int) -> set[int]:
    """``snapshot_id`` and its ancestors."""
    seen: set[int] = set()
    at: int | None = snapshot_id
    while at is not None and at not in seen:
        seen.add(at)
        snap = tbl.snapshot_by_id(at)
        at = snap.parent_snapshot_id if snap is not None else None
    return seen


def _delta_publish(target, plan, outputs, release_id, contract):
    from deltalake import DeltaTable

    out = {}
    for k in outputs:
        url = _delta_url(target, plan, k)
        staging = _staging(url, release_id)
        try:
            rows = DeltaTable(staging).to_pyarrow_table()
        except Exception:
            raise StoreError(staging, "the staging table is gone: run the release again") from None
        meta = {"privfair.release": release_id, "privfair.pipeline": plan.name}
        if plan.partition is not None:
            meta["privfair.partition"] = plan.partition
        try:
            _delta_commit(
                url,
                rows,
                meta,
                f"privfair release of {plan.name}; contract: {contract}",
                plan.partition,
            )
        except Exception as e:
            raise StoreError(url, f"cannot publish to the Delta table: {e}") from None
        _remove(staging)
        out[url] = {"table": url, "version": DeltaTable(url).version(), "tag": tag_of(release_id)}
    return out


def _delta_commit(url: str, rows: pa.Table, meta: dict, description: str, partition) -> None:
    """One commit making ``rows`` the Delta table's (``partition``: that partition's rows
    only), its commit info ``meta``: files written here and committed as actions, so the
    commit carries none of the writer's timings (``write_deltalake`` records how long it took)."""
    from deltalake import CommitProperties, DeltaTable, Schema
    from deltalake.transaction import RemoveAction, create_table_with_add_actions

    props = CommitProperties(custom_metadata=meta)
    if not DeltaTable.is_deltatable(url):
        create_table_with_add_actions(
            url,
            Schema.from_arrow(rows.schema),
            [_delta_file(url, rows)],
            mode="error",
            description=description,
            commit_properties=props,
        )
        return
    dt = DeltaTable(url)
    if partition is None:
        dt.create_write_transaction(
            [_delta_file(url, rows)], mode="overwrite", schema=rows.schema, commit_properties=props
        )
        return
    import pyarrow.parquet as pq

    fs, root = _delta_fs(url)
    now = _millis()
    actions: list = [_delta_file(url, rows)]
    for a in pa.table(dt.get_add_actions(flatten=True)).to_pylist():
        lo, hi = a.get(f"min.{PARTITION_COLUMN}"), a.get(f"max.{PARTITION_COLUMN}")
        if lo is not None and hi is not None and not lo <= partition <= hi:
            continue  # none of the partition's rows
        actions.append(RemoveAction(a["path"], True, now, a["size_bytes"]))
        if lo == hi == partition:
            continue
        # the file holds other partitions' rows too: they stay, in a file of their own
        held = pq.read_table(f"{root}/{a['path']}", filesystem=fs)
        other = pc.invert(pc.fill_null(pc.equal(held[PARTITION_COLUMN], partition), False))
        kept = held.filter(other).cast(rows.schema)
        if kept.num_rows:
            actions.append(_delta_file(url, kept))
    dt.create_write_transaction(actions, mode="append", schema=rows.schema, commit_properties=props)


def _millis() -> int:
    import time

    return int(time.time() * 1000)


def _delta_fs(url: str):
    import pyarrow.fs as pafs

    fs, root = pafs.FileSystem.from_uri(url if "://" in url else Path(url).resolve().as_uri())
    return fs, root.rstrip("/")


def _delta_file(url: str, rows: pa.Table):
    """``rows`` written as a data file of the Delta table at ``url``: its add action, with
    the row count and the partition column's bounds as statistics."""
    import uuid

    import pyarrow.parquet as pq
    from deltalake.transaction import AddAction

    fs, root = _delta_fs(url)
    fs.create_dir(root, recursive=True)
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    pq.write_table(rows, f"{root}/{name}", filesystem=fs, compression="snappy")
    stats: dict[str, Any] = {"numRecords": rows.num_rows}
    if PARTITION_COLUMN in rows.column_names and rows.num_rows:
        bounds = pc.min_max(rows[PARTITION_COLUMN])
        stats |= {
            "minValues": {PARTITION_COLUMN: bounds["min"].as_py()},
            "maxValues": {PARTITION_COLUMN: bounds["max"].as_py()},
            "nullCount": {PARTITION_COLUMN: rows[PARTITION_COLUMN].null_count},
        }
    size = fs.get_file_info(f"{root}/{name}").size
    return AddAction(name, size, {}, _millis(), True, json.dumps(stats))
