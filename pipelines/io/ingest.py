"""Loading the input table of a pipeline: a built-in dataset or a user file, with roles.

``load_dataset`` returns the typed Arrow table (roles in the field metadata) and an ``input``
record of where it came from: the dataset name or file path, the sha256 of every raw file, one
fingerprint over them, and the row count. ``validate_table`` holds the generic bad-input rules;
each family checks its own (binary protected attribute, at least one QI...) before it runs.
"""

from __future__ import annotations

import codecs
import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.compute as pc

from privfair.components.core import memory
from privfair.components.core.inputs import META_DROPPED
from privfair.io.files import (
    SOURCE_CSV,
    csv_frame,
    parquet_parts,
    parts_schema,
    read_csv,
    read_parquet_folder,
    spark_uri,
    table_fingerprint,
)
from privfair.io.sources import ENV_DATA_DIR, fingerprint_digests, locate, sha256_file
from privfair.schemas.datasets import DATASETS
from privfair.schemas.errors import DataSourceError, InputError, SpecError
from privfair.schemas.roles import ColumnRole, Kind, Role, TableRoles, attach_roles, read_roles
from privfair.schemas.spec import ColumnSpec, DatasetSpec, Impute, PartitionSpec
from privfair.spec.partitions import check_key, key_column, keys_of, select


def load_dataset(
    ds: DatasetSpec,
    data_dir: str | Path | None = None,
    presets: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    base_dir: str | Path | None = None,
    partitions: PartitionSpec | None = None,
    partition: str | None = None,
    table: pa.Table | None = None,
    empty_partition: bool = False,
) -> tuple[pa.Table, dict[str, Any]]:
    """The table a spec's ``dataset`` names, with roles attached, and its ``input`` record.
    ``empty_partition``: a partition without rows is released like any other (a DP
    synthesis's release must not exist only when someone has a row there), not refused.

    - built-in (``name``): every raw file is located and verified (``privfair.io.sources.locate``,
      searching ``data_dir`` first), then prepared by its ``DatasetDefinition``; the family's
      role ``presets`` for that dataset, then the spec's ``columns``, override the built-in
      roles (a column that does not exist is a ``SpecError`` naming ``dataset.columns.<col>``);
    - file (``path``): an absolute path is used as is; a relative one is looked up beside the
      spec file (``base_dir``, the spec's folder; the current directory when the spec has
      none), then in ``data_dir``, then in ``$PRIVFAIR_DATA_DIR``. It is read as ``format``
      (csv or parquet, else inferred from the suffix; a CSV must be UTF-8, and its empty
      cells are nulls; a large file is streamed into a memory map, ``read_csv`` and
      ``memory.mapped_parquet``; a folder is a Parquet dataset, its part files read in name
      order, ``read_parquet_folder``, each in the record's ``files`` as ``<folder>/<part>``)
      and given the roles in ``columns``; columns not listed there are
      unlabelled (role ``ignored``). The input record names it as written in the spec (a relative path) or by its
      file name (an absolute one): no local absolute path is published;
    - source (``source``): a database table or query, an Iceberg or Delta table or a remote
      file (``privfair.io.connectors.read_source``), labelled like a file; its fingerprint is
      that of its pin (snapshot, version) or of its content, and the record's ``source`` says
      the kind and the pin;
    - in memory (``source: {kind: memory}``): ``table``, handed over by the Python API
      (``_load_memory``); without it ``DataSourceError`` says to pass the same table again;
    - ``quasi_identifiers`` keeps only those QIs (the others are dropped); ``exclude`` drops
      columns; then ``dataset.private`` and ``dataset.unlabelled`` refuse, drop or keep the
      ``private`` and unlabelled columns (``_apply_policies``);
    - with ``partitions``, every row must belong to a partition; ``partition`` keeps the rows
      of that one (before the column policies, so the partition column may be dropped). The
      record's ``blocks`` are the partitions the rows cover (``["*"]`` without partitions) and
      a partition's ``fingerprint`` is that of its key and its rows' content
      (``table_fingerprint``), so a partition whose rows did not change keeps its version when
      the rest of the source grows; ``source_fingerprint`` is the whole source's;
    - the result is checked by ``validate_table``.
    """
    pin = None
    memory = ds.source is not None and ds.source.kind == "memory"
    if table is not None and not memory:
        raise SpecError(
            "dataset",
            "a table was handed over, but the spec reads its dataset from elsewhere; give "
            "dataset.source: {kind: memory} (privfair.api.run does)",
        )
    if memory:
        table, label, digests = _load_memory(ds, table)
    elif ds.name is not None:
        table, label, digests = _load_builtin(ds.name, data_dir)
        table = _override(table, (presets or {}).get(ds.name, {}), "preset", ds.name)
        table = _override(table, ds.columns or {}, "dataset.columns", ds.name)
    elif ds.source is not None:
        table, label, digests, pin = _load_source(ds, base_dir)
    else:
        table, label, digests = _load_file(ds, base_dir, data_dir)
    fingerprint = fingerprint_digests(digests)
    part: dict[str, Any] = {"blocks": keys_of(table, partitions)}
    if partition is not None:
        table = select(table, partitions, check_key(partitions, partition))
        part = {
            "partition": partition,
            "blocks": [partition],
            "source_fingerprint": fingerprint,
        }
        fingerprint = partition_fingerprint(partition, table)
        if table.num_rows == 0 and not empty_partition:
            raise InputError(
                partitions.column, f"partition '{partition}' has no rows in dataset '{label}'"
            )
    table, dropped = select_columns(table, ds, label)
    table, nulls = apply_null_policy(table, ds)
    validate_table(table, empty=empty_partition and partition is not None)
    record = {
        "dataset": label,
        "files": digests,
        "fingerprint": fingerprint,
        "rows": table.num_rows,
        "dropped_columns": dropped,
        **part,
    }
    if ds.source is not None:
        record["source"] = {"kind": ds.source.kind, "pin": pin}
    if nulls:
        record["nulls"] = nulls
    return table, record


def partition_fingerprint(key: str, rows: pa.Table) -> str:
    """The fingerprint of partition ``key`` holding ``rows`` (the source's rows of that key, as
    read, before the spec's column policies): sha256 of the key and ``table_fingerprint``, so
    it changes when and only when that partition's rows change."""
    return hashlib.sha256(json.dumps([key, table_fingerprint(rows)]).encode()).hexdigest()


def source_versions(
    ds: DatasetSpec,
    data_dir: str | Path | None = None,
    presets: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    base_dir: str | Path | None = None,
    partitions: PartitionSpec | None = None,
) -> tuple[str, dict[str, str]]:
    """What the source holds now, from one read of it: the whole source's fingerprint (the
    ``fingerprint`` of an unpartitioned release's input record) and, with ``partitions``, each
    partition key found in it with the ``fingerprint`` a release of that partition records
    (``partition_fingerprint``; ``{}`` without partitions). The orchestrators compare these
    with what they saw before to tell which releases are stale.

    The table is read as ``load_dataset`` reads it (same files, presets and roles), and the key
    column computed once; no row-level Python."""
    if ds.source is not None and ds.source.kind == "memory":
        table, _, digests = _load_memory(ds, None)
    elif ds.name is not None:
        table, _, digests = _load_builtin(ds.name, data_dir)
        table = _override(table, (presets or {}).get(ds.name, {}), "preset", ds.name)
        table = _override(table, ds.columns or {}, "dataset.columns", ds.name)
    else:
        table, _, digests = _load_file(ds, base_dir, data_dir)
    whole = fingerprint_digests(digests)
    if partitions is None:
        return whole, {}
    keys = key_column(table, partitions)
    return whole, {
        k: partition_fingerprint(k, table.filter(pc.equal(keys, k)))
        for k in sorted(pc.unique(keys).to_pylist())
    }


# --- types ---------------------------------------------------------------------------------------
def normalise_type(t: pa.DataType) -> pa.DataType:
    """The type privfair works in for a column read as ``t``: dictionaries (a pandas
    Categorical) by their values, large and view strings, binaries and lists by their plain
    forms, timestamps with a zone as UTC timestamps without one; every other type as it is.

    >>> normalise_type(pa.dictionary(pa.int8(), pa.large_string(), ordered=True))
    DataType(string)
    >>> normalise_type(pa.timestamp("ms", "Europe/Paris"))
    TimestampType(timestamp[ms])
    """
    if pa.types.is_dictionary(t):
        return normalise_type(t.value_type)
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return pa.list_(normalise_type(t.value_type))
    if pa.types.is_list(t):
        return pa.list_(normalise_type(t.value_type))
    if pa.types.is_timestamp(t) and t.tz is not None:
        return pa.timestamp(t.unit)  # Arrow stores UTC: the instants are unchanged
    return t


def normalise_types(table: pa.Table) -> tuple[pa.Table, dict[str, list]]:
    """``table`` with every column in its ``normalise_type`` and without the metadata the
    writer stored beside the data (pandas records its index, with the input's row count);
    also the categories of each ordered dictionary column (a pandas ordered Categorical), in
    their order, for a role that needs a domain order and declares none."""
    fields, columns, orders = [], [], {}
    for f, col in zip(table.schema, table.columns, strict=True):
        t = normalise_type(f.type)
        if pa.types.is_dictionary(f.type) and f.type.ordered and col.num_chunks:
            cats = col.chunk(0).dictionary.cast(t).to_pylist()
            if all(c.dictionary.equals(col.chunk(0).dictionary) for c in col.chunks):
                orders[f.name] = cats
        if t != f.type:
            try:
                col = col.cast(t)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise InputError(f.name, f"cannot read a column of type {f.type}", str(e)) from None
        fields.append(pa.field(f.name, t))
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields)), orders


# --- nulls ---------------------------------------------------------------------------------------
def _impute_value(table: pa.Table, name: str, rule: Impute):
    col = table.column(name)
    if rule.impute == "value":
        try:
            return pa.scalar(rule.value).cast(col.type).as_py()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise SpecError(
                f"dataset.columns.{name}.nulls.value",
                f"{rule.value!r} is not a value of the column's type {col.type}",
            ) from None
    numeric = pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
    if rule.impute in ("median", "mean") and not numeric:
        raise SpecError(
            f"dataset.columns.{name}.nulls",
            f"impute: {rule.impute} needs a numeric column; '{name}' is {col.type} (use mode "
            "or value)",
        )
    if rule.impute == "median":
        v = pc.quantile(col, q=0.5, interpolation="lower")[0].as_py()
    elif rule.impute == "mean":
        v = pc.mean(col).as_py()
        if pa.types.is_integer(col.type) and v is not None:
            v = round(v)
    else:
        counts = pa.table({"v": col}).group_by("v").aggregate([([], "count_all")])
        counts = counts.filter(pc.is_valid(counts["v"]))
        if counts.num_rows:
            top = pc.max(counts["count_all"]).as_py()
            v = pc.min(counts.filter(pc.equal(counts["count_all"], top))["v"]).as_py()
        else:
            v = None
    if v is None:
        raise InputError(name, f"every value is null: nothing to impute the {rule.impute} from")
    return v


def apply_null_policy(table: pa.Table, ds: DatasetSpec) -> tuple[pa.Table, dict[str, dict]]:
    """``table`` after the spec's null policy (``DatasetSpec.nulls``, or a column's own
    ``nulls``), and what was done per column with nulls: ``{column: {"policy", "nulls",
    "imputed_with"?}}``; ``drop`` removes the rows with a null in any such column (their count
    is ``{"dropped_rows": n}`` under ``"*"``). Recorded in the owner's manifest only: the
    counts and imputed values are statistics of the input."""
    columns = ds.columns or {}
    out: dict[str, dict] = {}
    drop_mask = None
    for name in table.column_names:
        spec = columns.get(name)
        policy = spec.nulls if spec is not None and spec.nulls is not None else ds.nulls
        n = table.column(name).null_count
        if policy == "keep" or n == 0:
            continue
        if policy == "refuse":
            raise InputError(
                name,
                "has nulls and the spec refuses them (nulls: refuse)",
                f"{n} null rows; to release it, set dataset.columns.{name}.nulls (or "
                "dataset.nulls) to drop (the rows are not released), {impute: median | mean | "
                "mode} or {impute: value, value: V}, or keep (the algorithm decides)",
            )
        if policy == "drop":
            nulls = pc.is_null(table.column(name))
            drop_mask = nulls if drop_mask is None else pc.or_(drop_mask, nulls)
            out[name] = {"policy": "drop", "nulls": n}
            continue
        value = _impute_value(table, name, policy)
        i = table.schema.get_field_index(name)
        filled = pc.fill_null(table.column(name), pa.scalar(value, table.column(name).type))
        table = table.set_column(i, table.schema.field(i), filled)
        out[name] = {"policy": f"impute {policy.impute}", "nulls": n, "imputed_with": value}
    if drop_mask is not None:
        before = table.num_rows
        table = table.filter(pc.invert(drop_mask))
        out["*"] = {"policy": "drop", "dropped_rows": before - table.num_rows}
    return table, out


def _load_builtin(name: str, data_dir: str | Path | None) -> tuple[pa.Table, str, dict[str, str]]:
    definition = DATASETS.get(name)
    if definition is None:
        known = ", ".join(sorted(DATASETS))
        raise SpecError("dataset.name", f"unknown built-in dataset '{name}'; known: {known}")
    paths = {raw.name: locate(raw, data_dir) for raw in definition.files}
    table = definition.prepare(paths)
    return table, name, {raw.name: raw.sha256 for raw in definition.files}


def _column_role(name: str, spec: ColumnSpec) -> ColumnRole:
    return ColumnRole(
        name=name,
        role=spec.role,
        kind=spec.kind,
        favoured=spec.favoured,
        unfavoured=spec.unfavoured,
        positive=spec.positive,
        domain=tuple(spec.domain) if spec.domain is not None else None,
        known=spec.known,
    )


def _override(table: pa.Table, columns: Mapping[str, Any], key: str, dataset: str) -> pa.Table:
    """``table`` with the roles of ``columns`` (ColumnSpec or its plain data) replaced."""
    if not columns:
        return table
    roles = read_roles(table)
    for col, spec in columns.items():
        if col not in table.column_names:
            raise SpecError(
                f"{key}.{col}",
                f"not a column of built-in dataset '{dataset}'; "
                f"columns: {', '.join(table.column_names)}",
            )
        cs = spec if isinstance(spec, ColumnSpec) else ColumnSpec.model_validate(spec)
        new = _column_role(col, cs)
        roles = roles.replace(new) if col in roles else TableRoles.of([*roles, new])
    return attach_roles(table, roles.select(table.column_names))


def locate_file(
    written: str, base_dir: str | Path | None = None, data_dir: str | Path | None = None
) -> Path:
    """The dataset file (or Parquet dataset folder) a spec's ``dataset.path`` names: absolute
    as is; relative beside the spec (``base_dir``, else the current directory), then in
    ``data_dir``, then in ``$PRIVFAIR_DATA_DIR``. ``DataSourceError`` lists every place looked
    at."""
    path = Path(written).expanduser()
    if path.is_absolute():
        if not (path.is_file() or path.is_dir()):
            raise DataSourceError(f"dataset file not found: {path}")
        return path
    env = os.environ.get(ENV_DATA_DIR)
    folders = [Path(base_dir) if base_dir is not None else Path.cwd()]
    folders += [Path(d).expanduser() for d in (data_dir, env) if d]
    tried = []
    for folder in folders:
        candidate = (folder / path).resolve()
        if candidate.is_file() or candidate.is_dir():
            return candidate
        if candidate not in tried:
            tried.append(candidate)
    where = "; ".join(str(t) for t in tried)
    raise DataSourceError(
        f"dataset file '{written}' not found (looked for {where}); a relative dataset.path is "
        "taken relative to the spec file's folder, then --data-dir / $PRIVFAIR_DATA_DIR"
    )


def _check_utf8(path: Path) -> None:
    """``InputError`` naming the file unless it is UTF-8 text (read in 1 MiB chunks)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    line, offset = 1, 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as e:
                at = max(e.start, 0)
                line += chunk[:at].count(b"\n")
                raise InputError(
                    None,
                    f"{path.name} is not UTF-8 text",
                    f"byte 0x{e.object[e.start]:02x} on line {line} (near offset {offset + at}); "
                    "save the CSV as UTF-8",
                ) from None
            line += chunk.count(b"\n")
            offset += len(chunk)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise InputError(
                None, f"{path.name} is not UTF-8 text", "it ends inside a multi-byte character"
            ) from None


def _load_file(
    ds: DatasetSpec, base_dir: str | Path | None = None, data_dir: str | Path | None = None
) -> tuple[pa.Table, str, dict[str, str]]:
    assert ds.path is not None and ds.columns is not None
    path = locate_file(ds.path, base_dir, data_dir)
    fmt = file_format(ds, path)
    if fmt is None:
        raise SpecError(
            "dataset.format", f"cannot tell the format of '{path.name}'; give csv or parquet"
        )
    if ds.csv is not None and fmt != "csv":
        raise SpecError("dataset.csv", f"'{path.name}' is read as {fmt}, not as a CSV")
    try:
        if fmt == "csv":
            csv = ds.csv
            if csv is None or codecs.lookup(csv.encoding).name == "utf-8":
                _check_utf8(path)
            table = read_csv(path, csv)
        elif path.is_dir():
            table = read_parquet_folder(path)
        else:
            table = memory.mapped_parquet(str(path))
    except (pa.ArrowInvalid, OSError) as e:
        raise InputError(None, f"cannot read {path.name} as {fmt}", str(e)) from None
    table = label_columns(table, ds.columns, path.name)
    return table, file_label(ds), {name: sha256_file(p) for name, p in file_names(path).items()}


def file_format(ds: DatasetSpec, path: Path) -> str | None:
    """How ``dataset.path`` (found at ``path``) is read: ``dataset.format``, else by the
    suffix (``.csv``; ``.parquet`` / ``.pq``); a folder is a Parquet dataset (``SpecError``
    when the spec says it is a CSV); None when nothing tells."""
    if path.is_dir():
        if ds.format not in (None, "parquet"):
            raise SpecError(
                "dataset.format",
                f"'{path.name}' is a folder: it is read as a Parquet dataset, not as {ds.format}",
            )
        return "parquet"
    return ds.format or {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}.get(
        path.suffix.lower()
    )


def file_names(path: Path) -> dict[str, Path]:
    """The files a ``dataset.path`` read holds, by the name its input record's ``files`` gives
    each: a file by its name, a Parquet dataset folder's parts by ``<folder>/<part>``
    (``parquet_parts``). The fingerprint hashes these names with the contents
    (``fingerprint_digests``): where the folder lies does not change it, its name does, as a
    file's name does."""
    if path.is_dir():
        return {f"{path.name}/{p.name}": p for p in parquet_parts(path)}
    return {path.name: path}


def file_label(ds: DatasetSpec) -> str:
    """The input record's ``dataset`` of a ``dataset.path``: as written in the spec (a relative
    path), or the file's (or folder's) name: never a local absolute path."""
    assert ds.path is not None
    written = Path(ds.path).expanduser()
    return written.name if written.is_absolute() else Path(ds.path).as_posix()


def label_columns(
    table: pa.Table,
    columns: Mapping[str, ColumnSpec],
    what: str,
    observed: frozenset[str] = frozenset(),
) -> pa.Table:
    """``table`` (as read from a file or source named ``what``) with its types normalised and
    the roles of ``columns``; a column not listed is unlabelled (role ``ignored``: the
    dataset's ``unlabelled`` policy decides). ``InputError`` for a listed column that is not
    there or a repeated column name.

    An ``ordinal`` column without a declared ``domain`` takes an ordered Categorical's order,
    and its role records that this domain was read off the input (``domain_from_input``): the
    categories are a fact about the data (a pandas Categorical built from the values holds
    exactly the values that occur), which a family publishing only public domains refuses.
    ``observed`` names the columns whose domain in ``columns`` came from the input likewise
    (roles read back from a table's own field metadata)."""
    table, orders = normalise_types(table)
    names = table.column_names
    if len(set(names)) != len(names):
        _raise_duplicates(names)
    roles = []
    for col, spec in columns.items():
        if col not in names:
            raise InputError(col, f"not a column of {what}", f"columns: {', '.join(names)}")
        from_input = col in observed and spec.domain is not None
        if spec.domain is None and spec.kind is Kind.ORDINAL and col in orders:
            spec = spec.model_copy(update={"domain": orders[col]})  # the Categorical's order
            from_input = True
        role = _column_role(col, spec)
        if from_input:
            role = dataclasses.replace(role, domain_from_input=True)
        roles.append(role)
    roles += [
        ColumnRole(name=n, role=Role.IGNORED, kind=_kind_of(table, n))
        for n in names
        if n not in columns
    ]
    return attach_roles(table, TableRoles.of(roles).select(names))


def _load_source(
    ds: DatasetSpec, base_dir: str | Path | None
) -> tuple[pa.Table, str, dict[str, str], dict | None]:
    """A ``dataset.source`` read through ``privfair.io.connectors`` and labelled."""
    from privfair.io.connectors import read_source, roles_from_docs

    assert ds.source is not None
    token = SOURCE_CSV.set(ds.csv)  # a file source's CSV is read by read_csv, with these
    try:
        read = read_source(ds.source, base_dir)
    finally:
        SOURCE_CSV.reset(token)
    # roles the source's comments/docs declare, then the spec's, which win
    kept = {c: ColumnSpec.model_validate(v) for c, v in roles_from_docs(read.docs).items()}
    columns = {**kept, **(ds.columns or {})}
    if not columns:
        raise SpecError(
            "dataset.columns",
            f"no column roles: give them here, or in the comments/docs of {read.label}'s "
            "columns ('privfair role: ROLE (KIND)')",
        )
    table = label_columns(read.table, columns, read.label)
    return table, read.label, {read.label: read.fingerprint}, read.pin


MEMORY = "table given in memory (Python API)"


def _load_memory(ds: DatasetSpec, table: pa.Table | None) -> tuple[pa.Table, str, dict[str, str]]:
    """A table handed over in memory (``source: {kind: memory}``), labelled like a file: the
    roles in the table's own field metadata (a table privfair published keeps them), then the
    spec's ``columns``, which win. Its fingerprint is its content's (``table_fingerprint``
    of the normalised, labelled table, so a pandas frame and the Arrow table it converts to, or the same
    rows read in other chunks, have one fingerprint); the input record names it ``<memory>``:
    nothing says where it came from, so re-checking a release of it needs the same table."""
    if table is None:
        raise DataSourceError(
            "the input of this spec is a table given in memory (dataset.source.kind: memory): "
            "there is no file to read; pass the same table through the Python API "
            "(privfair.api.run(spec, table) to release, privfair.api.validate(release, table) "
            "to re-check)"
        )
    if not isinstance(table, pa.Table):
        raise InputError(None, "an in-memory input must be an Arrow table", type(table).__name__)
    # the table's own roles, then the spec's, which win
    own = read_roles(table)
    columns = {c.name: _column_spec(c) for c in own} | dict(ds.columns or {})
    if not columns:
        raise SpecError(
            "dataset.columns",
            "no column roles: give them here, or pass a table whose fields carry privfair roles",
        )
    # a domain the table's own metadata says was read off an input stays marked as such
    observed = frozenset(
        c.name for c in own if c.domain_from_input and c.name not in (ds.columns or {})
    )
    labelled = label_columns(table, columns, "the in-memory table", observed)
    # over the values and the roles they were given (normalised: no writer's metadata), so
    # roles taken from the table's own metadata still change the version when they change
    return labelled, MEMORY, {MEMORY: table_fingerprint(labelled)}


def _column_spec(c: ColumnRole) -> ColumnSpec:
    """The ``ColumnSpec`` of a role read from a field's metadata."""
    return ColumnSpec(
        role=c.role,
        kind=c.kind,
        favoured=_one_or_list(c.favoured),
        unfavoured=_one_or_list(c.unfavoured),
        positive=_one_or_list(c.positive),
        domain=list(c.domain) if c.domain is not None else None,
        known=c.known,
    )


def _one_or_list(values: Any) -> Any:
    if values is None or isinstance(values, str | int | float | bool):
        return values
    values = list(values)
    return values if values else None


def _kind_of(table: pa.Table, name: str) -> Kind:
    t = table.schema.field(name).type
    numeric = pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
    return Kind.NUMERIC if numeric else Kind.NOMINAL


META_PRIVATE = b"privfair.private_columns"


def private_columns(table: pa.Table) -> list[str]:
    """The ``private`` columns the dataset had (refused or dropped at ingest), as recorded in
    the ingested table's schema metadata: every release must keep them out of its outputs."""
    raw = (table.schema.metadata or {}).get(META_PRIVATE)
    return json.loads(raw) if raw else []


def select_columns(
    table: pa.Table, ds: DatasetSpec, label: str
) -> tuple[pa.Table, dict[str, list[str]]]:
    """The columns of a labelled ``table`` (or a frame's empty table of its schema) a release
    reads: ``quasi_identifiers`` and ``exclude`` (``_select``), then the ``private`` and
    ``unlabelled`` policies (``_apply_policies``), each dropped column recorded with the spec key
    that dropped it (``_record_dropped``). Also what the policies dropped, the input record's
    ``dropped_columns``. One rule for ``load_dataset`` and ``load_frame``: the frame a cluster
    reads has the columns the local ingest keeps."""
    before = table.column_names
    table = _select(table, ds, label)
    why = _selected_out(before, table.column_names, ds)
    table, dropped = _apply_policies(table, ds)
    why |= {c: "dataset.private: drop" for c in dropped["private"]}
    why |= {c: "dataset.unlabelled: drop (it has no role)" for c in dropped["unlabelled"]}
    return _record_dropped(table, why), dropped


def _selected_out(before: list[str], after: list[str], ds: DatasetSpec) -> dict[str, str]:
    """Why each column ``_select`` removed is gone: ``dataset.exclude`` or not listed in
    ``dataset.quasi_identifiers``."""
    gone = [n for n in before if n not in set(after)]
    return {
        n: "dataset.exclude" if n in ds.exclude else "dataset.quasi_identifiers (not listed)"
        for n in gone
    }


def _record_dropped(table: pa.Table, why: dict[str, str]) -> pa.Table:
    """``table`` with the columns ingest dropped, and the spec key that dropped each, in its
    schema metadata (``privfair.components.core.inputs.META_DROPPED``): a parameter naming one of
    them is refused saying so (``privfair.components.core.inputs.absent_column``), not as a column
    the table never had. Owner side only: no family copies its input's schema metadata into
    what it publishes."""
    meta = dict(table.schema.metadata or {})
    meta.pop(META_DROPPED, None)
    if why:
        meta[META_DROPPED] = json.dumps(why, sort_keys=True).encode()
    return table.replace_schema_metadata(meta or None)


def _refused_private(ds: DatasetSpec, private: list[str]) -> list[str]:
    """The ``private`` columns ``dataset.private`` refuses: none under ``drop``; under
    ``refuse`` (the default) those whose role the spec's own ``dataset.columns`` does not
    declare (a built-in dataset's, a family preset's, a source's documented or an in-memory
    table's own role). A column the spec itself gives role ``private`` is dropped whatever
    the policy, as its role says, and guaranteed absent like every private column."""
    if ds.private == "drop":
        return []
    return [n for n in private if n not in declared_private(ds)]


def declared_private(ds: DatasetSpec) -> set[str]:
    """The columns the spec's ``dataset.columns`` gives role ``private``."""
    return {n for n, c in (ds.columns or {}).items() if c.role is Role.PRIVATE}


def _apply_policies(table: pa.Table, ds: DatasetSpec) -> tuple[pa.Table, dict[str, list[str]]]:
    """Refuse, drop or keep the ``private`` and unlabelled (``ignored``) columns as the spec's
    ``dataset.private`` / ``dataset.unlabelled`` say (``_refused_private``: a column the spec's
    ``columns`` gives role ``private`` is always dropped); record the private ones in the
    metadata."""
    roles = read_roles(table)
    private = [c.name for c in roles.with_role(Role.PRIVATE)]
    unlabelled = [c.name for c in roles.with_role(Role.IGNORED)]
    refused = _refused_private(ds, private)
    if refused:
        raise SpecError(
            "dataset.private",
            f"columns with role 'private' would reach the algorithm: {', '.join(refused)} "
            "(their role comes from the dataset, not from this spec's columns); set "
            "'private: drop' to release without them (they are never published), or give "
            "them role 'private' under dataset.columns yourself",
        )
    if unlabelled and ds.unlabelled == "refuse":
        raise SpecError(
            "dataset.unlabelled",
            f"columns without a role (unlisted or 'ignored'): {', '.join(unlabelled)}; give "
            "each a role under 'columns', or set 'unlabelled: drop' (not released) or "
            "'unlabelled: keep' (published unchanged)",
        )
    dropped = {"private": private, "unlabelled": unlabelled if ds.unlabelled == "drop" else []}
    gone = set(dropped["private"]) | set(dropped["unlabelled"])
    kept = [n for n in table.column_names if n not in gone]
    meta = dict(table.schema.metadata or {})
    if private:
        meta[META_PRIVATE] = json.dumps(private).encode()
    out = attach_roles(table.select(kept), roles.select(kept))
    return out.replace_schema_metadata(meta or None), dropped


def _select(table: pa.Table, ds: DatasetSpec, label: str) -> pa.Table:
    """Apply ``quasi_identifiers`` (the other QIs are dropped: an explicit choice) and
    ``exclude``."""
    roles = read_roles(table)
    names = table.column_names
    for n in [*(ds.quasi_identifiers or []), *ds.exclude]:
        if n not in names:
            raise InputError(n, f"not a column of dataset {label}")
    if ds.quasi_identifiers is not None:
        keep = set(ds.quasi_identifiers)
        for n in ds.quasi_identifiers:
            c = next((r for r in roles if r.name == n), None)
            if c is None or c.role is not Role.QUASI_IDENTIFIER:
                found = c.role.value if c is not None else "none"
                raise InputError(
                    n, f"not a quasi-identifier of dataset {label}", f"its role is {found}"
                )
            if n in ds.exclude:
                raise InputError(n, "listed in both quasi_identifiers and exclude")
    excluded = set(ds.exclude)
    if ds.quasi_identifiers is not None:
        excluded |= {c.name for c in roles.with_role(Role.QUASI_IDENTIFIER)} - keep
    kept = [n for n in names if n not in excluded]
    return attach_roles(table.select(kept), roles.select(kept))


def _raise_duplicates(names: list[str]) -> None:
    dup = sorted({n for n in names if names.count(n) > 1})
    raise InputError(dup[0], "column names must be unique", f"duplicated: {', '.join(dup)}")


def validate_table(table: pa.Table, empty: bool = False) -> None:
    """Raise ``InputError(column, rule)`` for the first generic bad-input rule ``table`` breaks.

    - it has no rows or no columns (column ``None``, "table is empty");
    - two columns share a name;
    - a NUMERIC quasi-identifier has a non-numeric Arrow type, or NaN / +-inf values.

    Rules that only some algorithms need (a binary protected attribute or label, a minimum
    number of rows...) belong to the family, which checks them before it runs.
    """
    if (table.num_rows == 0 and not empty) or table.num_columns == 0:
        raise InputError(None, "table is empty")
    names = table.column_names
    if len(set(names)) != len(names):
        _raise_duplicates(names)
    for c in read_roles(table):
        col = table[c.name]
        if c.role is Role.QUASI_IDENTIFIER and c.kind is Kind.NUMERIC:
            t = col.type
            if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)):
                raise InputError(
                    c.name, "a numeric quasi-identifier must have a numeric type", f"found {t}"
                )
            if pa.types.is_floating(t):
                n_nan = pc.sum(pc.is_nan(col)).as_py() or 0
                n_inf = pc.sum(pc.is_inf(col)).as_py() or 0
                if n_nan or n_inf:
                    raise InputError(
                        c.name,
                        "a numeric quasi-identifier must not contain NaN or infinite values",
                        f"{n_nan} NaN, {n_inf} infinite",
                    )


# --- a file the executors read (the Spark engine's count-based families) -----------------------
def frame_file(ds: DatasetSpec, base_dir: str | Path | None = None, data_dir=None) -> Path | None:
    """The Parquet file, Parquet dataset folder or UTF-8 CSV file of ``ds`` that a Spark run
    can leave on the cluster (``load_frame``), or None when the dataset is read here: a
    built-in dataset, a source, a table in memory, a CSV in another encoding (Spark decodes
    other encodings otherwise than Python's codecs)."""
    if ds.path is None or ds.name is not None or ds.source is not None:
        return None
    path = locate_file(ds.path, base_dir, data_dir)
    fmt = file_format(ds, path)
    utf8 = ds.csv is None or codecs.lookup(ds.csv.encoding).name == "utf-8"
    return path if fmt == "parquet" or (fmt == "csv" and utf8) else None


def load_frame(
    ds: DatasetSpec,
    spark,
    base_dir: str | Path | None = None,
    data_dir: str | Path | None = None,
):
    """``load_dataset`` of a Parquet ``dataset.path`` (a file, or a dataset folder of part
    files) or a UTF-8 CSV one whose rows stay on a Spark cluster: a ``SparkFrame``
    (``spark.read.parquet``, or ``privfair.io.files.csv_frame``: every cell read as text and
    typed as ``read_csv`` types it, on the executors) and the same input record.

    What ingest does to a table is done to the frame's schema (types normalised, the spec's
    roles, ``exclude`` / ``quasi_identifiers``, the ``private`` and ``unlabelled`` policies,
    the dropped columns recorded), the counts it needs are aggregates on the executors (rows,
    nulls), and each file's sha256 is computed there too (``binaryFile``, Spark SQL's
    ``sha2(content, 256)``), with a folder's parts' schemas read off their footers
    (``parts_schema``'s rule) and a CSV's bytes checked to be UTF-8: the ``files``, the fingerprint, the version and the ledger's
    identity are those of ``load_dataset`` on the same files, and this process never reads a
    byte of them (they may be readable by the executors' user alone; it lists a folder's
    names). The null policies that change rows (``drop``, ``impute``) are refused on a column
    that has nulls (``SpecError``): they would rewrite the rows here.

    A folder's rows are counted, never ordered: the count-based families' releases do not
    depend on their input's row order (the counts do not).

    Spark reads every Parquet column as nullable, as pyarrow reads a file written from pandas
    or Arrow; a file that declares a column ``required`` is read here as nullable.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    from privfair.components.core.engine import SparkFrame, cluster_job

    assert ds.path is not None and ds.columns is not None
    path = frame_file(ds, base_dir, data_dir)
    if path is None:
        raise SpecError(
            "dataset.path",
            "only a Parquet file or dataset folder, or a UTF-8 CSV, is read on the Spark cluster",
        )
    names = file_names(path)  # a folder's listing: names, no content
    csv = file_format(ds, path) == "csv"
    what = (
        "a CSV file" if csv else "a Parquet dataset folder" if path.is_dir() else "a Parquet file"
    )
    uri = spark_uri(path)
    with cluster_job(f"reading {path.name} ({what}) on its executors"):
        digests, footer = _executor_digests(spark, path, names, csv)
        if csv:
            df, read = csv_frame(spark, uri, path.name, ds.csv)
        else:
            df = spark.read.parquet(uri)
            read = to_arrow_schema(df.schema, timezone="UTC")
    if footer is not None:
        _same_types(path.name, footer, read)
    empty = pa.schema([pa.field(f.name, f.type) for f in read]).empty_table()
    labelled = label_columns(empty, ds.columns, path.name)
    table, dropped = select_columns(labelled, ds, file_label(ds))
    frame = SparkFrame(df, read).with_schema(table.schema)
    _frame_nulls(frame, ds)
    validate_frame(frame)
    record = {
        "dataset": file_label(ds),
        "files": digests,
        "fingerprint": fingerprint_digests(digests),
        "rows": frame.num_rows,
        "dropped_columns": dropped,
        "blocks": ["*"],
    }
    return frame, record


def _executor_digests(
    spark, path: Path, names: dict[str, Path], csv: bool = False
) -> tuple[dict[str, str], pa.Schema | None]:
    """The sha256 of each of ``names`` (``file_names(path)``), computed by the executors
    (``binaryFile``): ``{name: sha256}``, keyed as ``load_dataset`` keys them; and, for
    Parquet, the schema pyarrow reads the file (or folder) in, off each part's footer there
    too (``parts_schema``: a folder's parts must agree). For a ``csv``, a file that is not
    UTF-8 text is an ``InputError`` as the local ingest's (``_check_utf8``), and no schema.
    ``DataSourceError`` when the executors find other files than those listed here (the
    folder changed while it was read)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    cols = [F.col("path"), F.sha2(F.col("content"), 256).alias("sha")]
    if csv:
        cols.append(F.is_valid_utf8(F.col("content")).alias("utf8"))
    else:
        cols.append(F.udf(_footer_schema, BinaryType())(F.col("content")).alias("schema"))
    rows = spark.read.format("binaryFile").load(spark_uri(path)).select(*cols).collect()
    by_file = {Path(unquote(urlsplit(r["path"]).path)).name: r for r in rows}
    prefix = f"{path.name}/" if path.is_dir() else ""
    got = {prefix + n: r["sha"] for n, r in by_file.items()}
    if set(got) != set(names):
        raise DataSourceError(
            f"the files of '{path.name}' changed while they were read: the executors found "
            f"{sorted(got)}, this process listed {sorted(names)}"
        )
    if csv:
        if not all(r["utf8"] for r in rows):
            raise InputError(None, f"{path.name} is not UTF-8 text", "save the CSV as UTF-8")
        return got, None
    read = [(n, pa.ipc.read_schema(pa.py_buffer(by_file[n]["schema"]))) for n in sorted(by_file)]
    return got, parts_schema(path.name, read)


def _same_types(name: str, footer: pa.Schema, read: pa.Schema) -> None:
    """``SpecError`` naming the first column Spark reads in another type than pyarrow does
    (``footer``, as ``load_dataset`` reads the file ``name``; both as ``normalise_type`` makes
    them): an unsigned integer Spark widens (uint8 to int16, uint64 to a decimal), a timestamp
    with a zone... The frame would hold other values than the table this process reads, and
    the release would publish them in another schema."""
    if footer.names != read.names:
        raise SpecError(
            "dataset.path",
            f"Spark reads the columns of {name} as {read.names}, pyarrow as {footer.names}; "
            "run on the local engine",
        )
    for f, g in zip(footer, read, strict=True):
        local, spark = normalise_type(f.type), normalise_type(g.type)
        if local != spark:
            raise SpecError(
                f"dataset.columns.{f.name}",
                f"Spark reads column '{f.name}' of {name} ({local}) as {spark}, "
                "not as this process reads it; store it in a type Spark reads as pyarrow does "
                "(a signed integer, a timestamp without a zone) or run on the local engine",
            )


def _footer_schema(content: bytes) -> bytes:
    """The Arrow schema of the Parquet file whose bytes are ``content`` (its footer, as
    pyarrow reads it), serialised: what an executor sends back of a part file."""
    import pyarrow.parquet as pq

    return pq.read_schema(pa.BufferReader(content)).serialize().to_pybytes()


def _frame_nulls(frame, ds: DatasetSpec) -> None:
    """``apply_null_policy`` of a frame: ``keep`` (or no null) passes, ``refuse`` is refused as
    there, a policy that rewrites rows is refused naming the column."""
    columns = ds.columns or {}
    for name, n in frame.null_counts().items():
        spec = columns.get(name)
        policy = spec.nulls if spec is not None and spec.nulls is not None else ds.nulls
        if policy == "keep" or n == 0:
            continue
        if policy == "refuse":
            raise InputError(
                name,
                "has nulls and the spec refuses them (nulls: refuse)",
                f"{n} null rows; to release it, set dataset.columns.{name}.nulls (or "
                "dataset.nulls) to drop (the rows are not released), {impute: median | mean | "
                "mode} or {impute: value, value: V}, or keep (the algorithm decides)",
            )
        raise SpecError(
            f"dataset.columns.{name}.nulls",
            f"'{name}' has {n} nulls: a null policy that drops or imputes rows is not applied "
            "to rows left on the Spark cluster; keep the nulls (nulls: keep, and a null level "
            "in the column's public domain) or run on the local engine",
        )


def validate_frame(frame) -> None:
    """``validate_table`` of a ``SparkFrame``: rows (one count) and columns; a numeric
    quasi-identifier is no column of the count-based families, so none is read."""
    if frame.num_rows == 0 or frame.num_columns == 0:
        raise InputError(None, "table is empty")
    names = frame.column_names
    if len(set(names)) != len(names):
        _raise_duplicates(names)
    for c in read_roles(frame):
        if c.role is Role.QUASI_IDENTIFIER:
            raise InputError(
                c.name,
                "a quasi-identifier's values are checked row by row: run on the local engine",
            )
