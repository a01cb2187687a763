"""Each row's *input position* on the Spark engine: the index it has in the table
``load_dataset`` reads locally from the same Parquet file or dataset folder.

``load_dataset`` reads a Parquet file's rows in their order, and a dataset folder's parts
(``parquet_parts``) in name order, each part's rows in order. A row of a frame read with
``spark.read.parquet`` has no such index (Spark splits a file into several tasks and packs
the splits in its own order), so the lineage sidecar of a row-level family would have nothing
to name. ``with_positions`` builds it on the executors from Spark's hidden file-metadata
columns: ``_metadata.row_index`` (the row's index within its file, which Spark's Parquet
reader computes from the row groups' row counts, whichever split reads them) and
``_metadata.file_path`` (the file), plus one aggregate per file (its row count, collected:
one row a file, no row of the table) giving each file's offset in name order
(``file_offsets``); ``position_of`` states the rule.

Spark's CSV source numbers no row (its ``_metadata`` has no ``row_index``): a CSV read on the
executors has no exact position, and ``with_positions`` refuses it rather than guess one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from privfair.schemas.errors import DataSourceError, InputError, SpecError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["POSITION", "file_offsets", "position_of", "spark_file_name", "with_positions"]

#: The column ``with_positions`` adds by default (a name no dataset column is expected to take).
POSITION = "__row"

#: Spark settings under which a file source may skip a file's rows without failing: a missing
#: or unreadable part would then read as an empty one, and every later position would shift.
_SKIPPING = ("spark.sql.files.ignoreCorruptFiles", "spark.sql.files.ignoreMissingFiles")


def file_offsets(names: Iterable[str], counts: Mapping[str, int]) -> dict[str, int]:
    """Each file's offset in the local read order: the rows of the files before it in name
    order. ``names`` are the files' names (``file_names(path)``'s keys); ``counts`` their row
    counts, a file missing from it holding no row (an empty part).

    >>> file_offsets(["d/b.parquet", "d/a.parquet", "d/c.parquet"], {"d/a.parquet": 3, "d/c.parquet": 2})
    {'d/a.parquet': 0, 'd/b.parquet': 3, 'd/c.parquet': 3}
    """
    offsets, at = {}, 0
    for name in sorted(names):
        offsets[name] = at
        at += counts.get(name, 0)
    return offsets


def position_of(offsets: Mapping[str, int], name: str, row_index: int) -> int:
    """The input position of the row ``row_index`` (its index within its file, from 0) of the
    file ``name``: the file's offset in name order (``file_offsets``) plus ``row_index``.

    This is the index of the row in the table ``load_dataset`` reads from the same file or
    folder (a file's rows in order; a folder's parts in name order, each part's rows in order).
    ``with_positions`` computes the same sum as a Spark column, on the executors.

    Parameters
    ----------
    offsets : Mapping[str, int]
        Each file's offset, as ``file_offsets`` gives them.
    name : str
        The file's name, a key of ``offsets`` (``<folder>/<part>`` for a folder's part).
    row_index : int
        The row's index within its file (Spark's ``_metadata.row_index``).

    Returns
    -------
    int
        The row's position in the local read order.

    Examples
    --------
    Three parts of 3, 0 and 2 rows: the second row of the last part is the table's fifth.

    >>> offsets = file_offsets(["d/a.parquet", "d/b.parquet", "d/c.parquet"],
    ...                        {"d/a.parquet": 3, "d/c.parquet": 2})
    >>> position_of(offsets, "d/c.parquet", 1)
    4
    """
    return offsets[name] + row_index


def spark_file_name(file_path: str) -> str:
    """The on-disk name of the file Spark's ``_metadata.file_path`` names: that column is a
    URI (``file:`` scheme, a space as ``%20``, a ``%`` as ``%25``, ``#`` and ``?`` escaped,
    other characters as they are), decoded here (never as a form: a ``+`` stays a ``+``).

    >>> spark_file_name("file:/data/my%20d%C3%A9p/p%2541+q%23%3F.parquet")
    'p%41+q#?.parquet'
    >>> spark_file_name("file:/data/a%20b%20é.parquet")
    'a b é.parquet'
    """
    return Path(unquote(urlsplit(file_path).path)).name


def with_positions(
    df: DataFrame, path: Path, names: Mapping[str, Path], column: str = POSITION
) -> DataFrame:
    """``df`` with an int64 column ``column``: each row's input position, the index it has in
    the table ``load_dataset`` reads from ``path`` (``position_of``: the offset of its file in
    name order plus its index within the file), computed by the executors.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        The frame ``spark.read.parquet`` reads from ``path``'s URI (or a projection of it,
        through which Spark still resolves the hidden ``_metadata`` column), every row of
        every file in it: no filter, no join.
    path : pathlib.Path
        The ``dataset.path`` read: a Parquet file or a Parquet dataset folder.
    names : Mapping[str, pathlib.Path]
        ``file_names(path)``: each file's name (``<folder>/<part>`` for a part) and its path.
    column : str
        The name of the column added; ``InputError`` if ``df`` has a column of that name.

    Returns
    -------
    pyspark.sql.DataFrame
        ``df`` and ``column``. One Spark job runs here: an aggregate per file (its row count
        and the least and greatest row index, one row a file, collected); no row of the table
        comes to this process, and none is read by it.

    Raises
    ------
    SpecError
        ``dataset.path`` when ``df`` is read by a source that numbers no row (Spark's CSV
        source): a CSV has no exact position on the executors.
    DataSourceError
        When the executors read a file that is not in ``names`` (the folder changed, or a
        file name Spark spells otherwise than this process), when a file's row indices are
        not ``0 .. n-1``, or when Spark is set to skip missing or corrupt files.
    TypeError
        When ``df`` is not read from files (no ``_metadata`` column).
    """
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    from privfair.components.core.engine import cluster_job

    if column in df.columns:
        raise InputError(
            column,
            "is the name of the column the Spark engine gives each row's input position",
            "rename the dataset's column",
        )
    try:
        meta = df.metadataColumn("_metadata")
        fields = df.select(meta.alias("m")).schema["m"].dataType.fieldNames()
    except AnalysisException:
        raise TypeError("with_positions needs a frame read from files (no _metadata)") from None
    if "row_index" not in fields:
        raise SpecError(
            "dataset.path",
            f"{path.name} is a CSV: Spark's CSV reader gives no row its position in the file, "
            "so a row-level family cannot name each published row's input row on the Spark "
            "engine; convert the file to Parquet, or run on the local engine",
        )
    conf = df.sparkSession.conf
    for key in _SKIPPING:
        if str(conf.get(key, "false")).lower() == "true":
            raise DataSourceError(
                f"{key} is true: Spark would read a missing or corrupt part of {path.name} as "
                "empty, and every later row's input position would be wrong; unset it"
            )
    by_name = {p.name: name for name, p in names.items()}
    with cluster_job(f"counting the rows of each file of {path.name}"):
        rows = (
            df.select(meta["file_path"].alias("f"), meta["row_index"].alias("i"))
            .groupBy("f")
            .agg(F.count(F.lit(1)).alias("n"), F.min("i").alias("lo"), F.max("i").alias("hi"))
            .collect()
        )
    counts: dict[str, int] = {}
    spelled: dict[str, str] = {}
    for r in rows:
        name = by_name.get(spark_file_name(r["f"]))
        if name is None:
            raise DataSourceError(
                f"the executors read {r['f']}, which is none of the files of '{path.name}' "
                f"this process listed ({sorted(names)}): the folder changed while it was read"
            )
        if r["lo"] != 0 or r["hi"] != r["n"] - 1:
            raise DataSourceError(
                f"Spark read {r['n']} rows of {name} with row indices {r['lo']} .. {r['hi']}: "
                "not each row once, so no input position is exact"
            )
        counts[name] = int(r["n"])
        spelled[r["f"]] = name
    offsets = file_offsets(names, counts)
    if not spelled:  # no file holds a row
        return df.withColumn(column, F.lit(None).cast("bigint"))
    lookup = F.create_map(
        *[x for f, n in spelled.items() for x in (F.lit(f), F.lit(offsets[n]).cast("bigint"))]
    )
    offset = lookup[meta["file_path"]]
    position = F.when(
        offset.isNull(),
        F.raise_error(
            F.concat(F.lit("a file read after its rows were counted: "), meta["file_path"])
        ),
    ).otherwise(offset + meta["row_index"])
    return df.withColumn(column, position.cast("bigint"))
