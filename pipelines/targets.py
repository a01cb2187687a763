"""Publishing a release to a lakehouse table (a spec's ``target``) by write-audit-publish.

What goes to the table is the shareable copy's outputs (``shared/<output>.parquet``), never the
owner part. The steps map onto the release flow (``pipelines.flow``):

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

A partition's release replaces that partition's rows only: the table has a
``privfair_partition`` column and the write is an overwrite filtered on it. Tables are named
``NS.NAME`` for the ``data`` output and ``NS.NAME_<output>`` for any other; Iceberg drops
Arrow's field metadata, so each column's role and the guarantees that name it go into its
``doc``, the public contract into the table properties (``privfair.contract``).
"""

from __future__ import annotations

import json
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from components.core.order import published_order
from schemas import contracts as C
from schemas.errors import ContractViolation, SpecError, StoreError
from schemas.spec import TargetSpec

__all__ = ["PARTITION_COLUMN", "Written", "column_docs", "discard", "publish", "write_and_audit"]

PARTITION_COLUMN = "privfair_partition"
LAKEHOUSE = ".lakehouse"


@dataclass(frozen=True)
class Written:
    """A release written to its target and audited, not yet published."""

    kind: str
    tables: dict[str, str]  # output -> table name or URL
    ref: str  # the audit branch (Iceberg) or the staging suffix (Delta)
    tag: str


def branch_of(release_id: str) -> str:
    return f"privfair-audit-{release_id}"


def tag_of(release_id: str) -> str:
    return f"privfair-{release_id}"


def column_docs(table: pa.Table, contract: list) -> dict[str, str]:
    """Each column's doc: ``pipelines.catalog_metadata.Column.description`` (its role, kind,
    favoured/positive values and the guarantees naming it), the form
    ``pipelines.connectors.roles_from_docs`` reads back."""
    from pipelines.catalog_metadata import describe

    return {c.name: c.description for c in describe(table.schema, C.contract_to_data(contract))}


# --- where -----------------------------------------------------------------------------------------
def _base(plan) -> Path:
    return Path(plan.spec.spec_dir) if plan.spec.spec_dir is not None else Path.cwd()


def _lakehouse(plan) -> Path:
    store = plan.open_store()
    if not store.local:
        raise SpecError(
            "target.catalog",
            "a store that is not a local folder has no default lakehouse: give catalog and "
            "warehouse",
        )
    root = Path(store.path(LAKEHOUSE))
    (root / "warehouse").mkdir(parents=True, exist_ok=True)
    return root


def _iceberg_names(target: TargetSpec, plan, outputs: list[str]) -> dict[str, str]:
    base = target.table or f"privfair.{plan.name}"
    return {o: base if o == "data" else f"{base}_{o}" for o in outputs}


def _catalog(target: TargetSpec, plan):
    from pipelines.connectors import _iceberg_catalog, connection_uri, expand

    if target.conn_id is not None:
        uri = connection_uri(target.conn_id, "target.conn_id")
        warehouse = expand(target.warehouse, "target.warehouse") if target.warehouse else None
    elif target.catalog is None:
        root = _lakehouse(plan)
        uri = f"sqlite:///{root / 'catalog.db'}"
        warehouse = (root / "warehouse").as_uri()
    else:
        uri = expand(target.catalog, "target.catalog")
        warehouse = expand(target.warehouse, "target.warehouse") if target.warehouse else None
    try:
        return _iceberg_catalog(uri, warehouse, _base(plan), target.catalog_name)
    except Exception as e:
        from pipelines.connectors import redact

        raise StoreError(redact(uri), f"the Iceberg catalog cannot be opened: {e}") from None


def _delta_url(target: TargetSpec, plan, output: str) -> str:
    from pipelines.connectors import connection_uri, expand

    if target.conn_id is not None:
        url = connection_uri(target.conn_id, "target.conn_id")
    else:
        url = expand(target.url, "target.url")
    if "://" not in url and not Path(url).is_absolute():
        url = str((_base(plan) / url).resolve())
    return url if output == "data" else f"{url.rstrip('/')}_{output}"


def _staging(url: str, release_id: str) -> str:
    return f"{url.rstrip('/')}__privfair_staging_{release_id}"


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
    from pipelines.flow import output_file

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

    cat = _catalog(target, plan)
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
                tbl = cat.create_table(names[k], schema=rows.schema)
                # a table with no snapshot can only be written on main: start it empty
                tbl.append(rows.slice(0, 0), snapshot_properties={"privfair.event": "created"})
            if branch in tbl.refs():  # left by a run killed before its fast-forward
                tbl.manage_snapshots().remove_branch(branch).commit()
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
            _remove(staging)
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
    """Drop what ``write_and_audit`` wrote (the audit branch, the staging tables)."""
    if written.kind == "iceberg":
        cat = _catalog(plan.spec.target, plan)
        for name in written.tables.values():
            try:
                tbl = cat.load_table(name)
                if written.ref in tbl.refs():
                    tbl.manage_snapshots().remove_branch(written.ref).commit()
            except Exception:  # nothing to drop, or the table is gone: nothing to undo
                pass
    else:
        for url in written.tables.values():
            _remove(_staging(url, written.ref))


# --- publish ----------------------------------------------------------------------------------------
def publish(plan, outputs: dict[str, pa.Table], release_id: str, contract: list) -> dict[str, Any]:
    """Make the audited release of ``outputs`` (the candidate's public outputs) what readers
    of the target see (module docstring), with each column's doc (``column_docs``) and the
    public ``contract`` in the same commit; returns ``{table: {"table", "snapshot" |
    "version", "tag"}}``. ``StoreError`` when another run published to the table since this
    one wrote its branch (its branch is dropped: nothing of this release is published)."""
    target = plan.spec.target
    text = json.dumps(C.contract_to_data(contract), sort_keys=True)
    docs = {k: column_docs(t, contract) for k, t in outputs.items()}
    if target.kind == "iceberg":
        return _iceberg_publish(target, plan, docs, release_id, text)
    return _delta_publish(target, plan, list(outputs), release_id, text)


def _iceberg_publish(target, plan, docs, release_id, contract):
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.table.update.snapshot import ManageSnapshots

    cat = _catalog(target, plan)
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
            tbl = cat.load_table(name)
            if branch in tbl.refs():
                tbl.manage_snapshots().remove_branch(branch).commit()
            raise StoreError(
                name,
                f"another run published to this Iceberg table meanwhile ({e}); nothing of this "
                "release was published: run it again",
            ) from None
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
    from deltalake import CommitProperties, DeltaTable, write_deltalake

    out = {}
    for k in outputs:
        url = _delta_url(target, plan, k)
        staging = _staging(url, release_id)
        try:
            rows = DeltaTable(staging).to_pyarrow_table()
        except Exception:
            raise StoreError(staging, "the staging table is gone: run the release again") from None
        meta = {"privfair.release": release_id, "privfair.pipeline": plan.name}
        kw: dict[str, Any] = {"mode": "overwrite", "schema_mode": "overwrite"}
        if plan.partition is not None and DeltaTable.is_deltatable(url):
            meta["privfair.partition"] = plan.partition
            key = plan.partition.replace("'", "''")
            kw = {"mode": "overwrite", "predicate": f"{PARTITION_COLUMN} = '{key}'"}
        try:
            write_deltalake(
                url,
                rows,
                commit_properties=CommitProperties(custom_metadata=meta),
                description=f"privfair release of {plan.name}; contract: {contract}",
                **kw,
            )
        except Exception as e:
            raise StoreError(url, f"cannot publish to the Delta table: {e}") from None
        _remove(staging)
        out[url] = {"table": url, "version": DeltaTable(url).version(), "tag": tag_of(release_id)}
    return out
