"""Where the blocks of a large table run: in this process, a local process pool, or Apache Spark.

A component that scales does two kinds of distributed work, and asks the *current* engine for
both (``current_engine``; the flow activates the spec's engine around the run with
``using``):

- ``map_blocks(table, key, fn, schema)``: ``fn`` runs once per distinct value of the ``key``
  column, on every row with that value (an Arrow table), and returns an Arrow table of
  ``schema``; the results come back concatenated in key order, each block's rows in the order
  ``fn`` returned them, but a block's rows may reach ``fn`` in any order (sort them if it
  matters). ``fn`` must be picklable (a module-level function or a ``functools.partial`` of
  one) and must not depend on schema metadata: Spark drops it.
- ``map_parts(parts, n_parts, key, fn, schema)``: the same, for blocks the caller makes one at
  a time (an iterable of tables, each holding one value of ``key``, in key order): the whole
  table they come from is never built, and each is dropped once sent.
- ``group_counts(table, keys)``: for each tuple of column names, the number of rows of each
  combination of their values (a distributed group-by count; the count column is ``count``).
  ``table`` is an Arrow table or a frame (``privfair.components.core.frames``): a
  ``TableFrame`` counted batch by batch in this process, a ``SparkFrame`` on the executors.

Every engine gives the same results for the same calls; only where the work runs differs. So
the engine is an execution setting, not part of a release's version: what decides a
component's output (its block size, say) is one of its parameters.

>>> import pyarrow as pa
>>> t = pa.table({"b": [1, 0, 1, 0], "x": [1.0, 2.0, 3.0, 4.0]})
>>> out = LocalEngine().map_blocks(t, "b", _example_sum, pa.schema([("b", pa.int64()), ("s", pa.float64())]))
>>> out.to_pydict()
{'b': [0, 1], 's': [6.0, 4.0]}
>>> LocalEngine().group_counts(t, [("b",)])[0].sort_by("b").to_pydict()
{'b': [0, 1], 'count': [2, 2]}
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from privfair.components.core.frames import Frame, RowsNotRead, TableFrame, batch_counts
from privfair.schemas.errors import ClusterError, PrivfairError, SpecError

__all__ = [
    "Engine",
    "LocalEngine",
    "SparkEngine",
    "current_engine",
    "using",
    "make_engine",
    "given_session",
    "DEFAULT_CONF",
    "master_endpoints",
    "split_by_key",
    "worker_python",
    "BatchTaker",
    "shown_master",
    "SparkFrame",
    "RowsOnCluster",
    "null_count",
    "cluster_job",
]

BlockFn = Callable[[pa.Table], pa.Table]


def _example_sum(t: pa.Table) -> pa.Table:
    return pa.table({"b": [t.column("b")[0].as_py()], "s": [pc.sum(t.column("x")).as_py()]})


def worker_python(table: pa.Table) -> pa.Table:
    """The interpreter and pyarrow version a block runs under, one row per block: how a user
    (and the tests) see that Spark's workers use the project's environment."""
    import sys as _sys

    key = table.column(0)[0].as_py() if table.num_rows else None
    return pa.table(
        {
            table.column_names[0]: [key],
            "python": [_sys.executable],
            "pyarrow": [pa.__version__],
        }
    )


def split_by_key(table: pa.Table, key: str, compact: bool = False) -> list[tuple[object, pa.Table]]:
    """The rows of each distinct ``key`` value, in key order (input order within a key): one
    stable sort, then zero-copy slices of the sorted table; with ``compact``, each block is
    taken from ``table`` on its own instead, to send to another process (a slice pickles with
    its parent's whole buffers: 10M rows for every block of a 10M-row table)."""
    if table.num_rows == 0:
        return []
    if compact:
        return list(_compact_blocks(table, key))
    order, keys, starts, ends = _runs(table, key)
    sorted_ = table.take(order)
    return [
        (keys[s].item(), sorted_.slice(int(s), int(e - s)))
        for s, e in zip(starts, ends, strict=True)
    ]


def _runs(table: pa.Table, key: str):
    """(stable sort order of ``key``, the sorted keys, start and end of each key's run)."""
    order = pc.sort_indices(table, sort_keys=[(key, "ascending")])
    keys = table.column(key).take(order).to_numpy()
    cuts = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    return order, keys, np.concatenate([[0], cuts]), np.concatenate([cuts, [len(keys)]])


def _compact_blocks(table: pa.Table, key: str) -> Iterator[tuple[object, pa.Table]]:
    """(key, block) of ``split_by_key(table, key, compact=True)``, taken one at a time."""
    if table.num_rows == 0:
        return
    order, keys, starts, ends = _runs(table, key)
    batches = BatchTaker(table)
    for s, e in zip(starts, ends, strict=True):
        yield keys[s].item(), batches.take(order.slice(int(s), int(e - s)))


class BatchTaker:
    """``table.take(rows)`` for one block's rows of a many-chunk table at the block's cost:
    Arrow's take on a chunked table costs the whole table per call (268 blocks of a 20M-row
    table of two chunks took 4 minutes), so each batch takes its own rows instead."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.batches = table.to_batches()
        self.starts = np.cumsum([0] + [b.num_rows for b in self.batches])

    def take(self, rows: pa.Array) -> pa.Table:
        if len(self.batches) <= 1:
            return self.table.take(rows)
        idx = rows.to_numpy().astype(np.int64)
        where = np.searchsorted(self.starts, idx, side="right") - 1
        order = np.argsort(where, kind="stable")
        cuts = np.searchsorted(where[order], np.arange(len(self.batches) + 1))
        parts = [
            self.batches[b].take(pa.array(idx[order[cuts[b] : cuts[b + 1]]] - self.starts[b]))
            for b in range(len(self.batches))
            if cuts[b + 1] > cuts[b]
        ]
        taken = pa.Table.from_batches(parts, schema=self.table.schema).combine_chunks()
        # back to the order of ``rows`` (a no-op for the ascending rows of a stable sort)
        return taken if (np.diff(order) > 0).all() else taken.take(np.argsort(order))


def _concat(parts: list[pa.Table], schema: pa.Schema) -> pa.Table:
    return pa.concat_tables([p.cast(schema) for p in parts]) if parts else schema.empty_table()


class Engine:
    """What every engine offers (see the module's docstring)."""

    name = "engine"
    workers: int | None = 1
    calls = 0  # map_blocks / group_counts calls served: a run that made none ran in-process

    def map_blocks(self, table: pa.Table, key: str, fn: BlockFn, schema: pa.Schema) -> pa.Table:
        n_blocks = len(pc.unique(table.column(key)))
        blocks = (b for _, b in _compact_blocks(table, key))
        return self.map_parts(blocks, n_blocks, key, fn, schema)

    def map_parts(
        self, parts: Iterable[pa.Table], n_parts: int, key: str, fn: BlockFn, schema: pa.Schema
    ) -> pa.Table:
        raise NotImplementedError(f"{type(self).__name__} does not run blocks")

    def group_counts(self, table: pa.Table, keys: Sequence[Sequence[str]]) -> list[pa.Table]:
        raise NotImplementedError(f"{type(self).__name__} does not count")

    def describe(self) -> dict:
        """What a release's manifest records about where it ran."""
        return {"engine": self.name, "workers": self.workers}

    def close(self) -> None:
        """Release the engine's resources (worker processes, a Spark session)."""


class LocalEngine(Engine):
    """Blocks run in this process (``workers=1``) or in a pool of ``workers`` processes; group-by
    counts are Arrow's hash aggregation."""

    name = "local"

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise PrivfairError(f"execution.workers: must be at least 1, got {workers}")
        self.workers = workers

    def map_parts(
        self, parts: Iterable[pa.Table], n_parts: int, key: str, fn: BlockFn, schema: pa.Schema
    ) -> pa.Table:
        self.calls += 1
        if self.workers == 1 or n_parts <= 1:  # one block at a time, in this process
            return _concat([fn(b) for b in parts], schema)
        # spawn, not fork: the orchestrators that call us run threads
        import multiprocessing as mp

        out: list[pa.Table] = []
        with ProcessPoolExecutor(
            min(self.workers, n_parts), mp_context=mp.get_context("spawn")
        ) as pool:
            # a few blocks in flight at a time: each is a copy, so the whole table is never
            # held twice
            pending: collections.deque = collections.deque()
            for block in parts:
                pending.append(pool.submit(fn, block))
                del block
                if len(pending) >= 2 * self.workers:
                    out.append(pending.popleft().result())
            out += [f.result() for f in pending]
        return _concat(out, schema)

    def group_counts(self, table: pa.Table, keys: Sequence[Sequence[str]]) -> list[pa.Table]:
        """Arrow's hash aggregation of ``table``, or of a ``TableFrame`` batch by batch (one
        pass for all ``keys``, ``frames.batch_counts``: the same tables)."""
        if isinstance(table, SparkFrame):
            raise PrivfairError(
                "execution.engine: this input's rows are on a Spark cluster; count them with "
                "the spark engine"
            )
        self.calls += 1
        if isinstance(table, TableFrame):
            return batch_counts(table, keys)
        out = []
        for cols in keys:
            g = table.select(list(cols)).group_by(list(cols), use_threads=False)
            out.append(g.aggregate([([], "count_all")]).rename_columns([*cols, "count"]))
        return out


class RowsOnCluster(RowsNotRead):
    """A step asked a ``SparkFrame`` for its rows: they stay on the cluster (a bug of the
    step, named here, never a silent collect to the driver)."""


class SparkFrame(Frame):
    """A table whose rows stay on a Spark cluster: a DataFrame the executors read, and the
    Arrow ``schema`` privfair works in (types normalised, roles in the field metadata), what
    ``schema``, ``column_names`` and ``num_columns`` give without a job.

    The count-based families take one where they take an Arrow table: ``SparkEngine``'s
    ``group_counts`` counts it on the executors (``LocalEngine`` refuses it), ``num_rows`` and
    ``null_count`` are one aggregate each (kept), ``map_batches`` runs a function on every
    Arrow batch of it where the rows are, ``sums`` is one aggregate and ``persist`` Spark's
    (a ``Frame`` of ``privfair.components.core.frames``, as ``TableFrame`` is locally).
    Asking it for a column's values (``column``, ``frame[name]``) raises ``RowsOnCluster``:
    no step collects the rows to the driver.

    >>> import pyarrow as pa
    >>> SparkFrame(None, pa.schema([("a", pa.int64())]), rows=3).num_rows
    3
    >>> try:
    ...     SparkFrame(None, pa.schema([("a", pa.int64())])).column("a")
    ... except RowsOnCluster as e:
    ...     print(e)
    column 'a': the rows of this table stay on the Spark cluster; this step must count them through the engine (group_counts)
    """

    def __init__(self, df, schema: pa.Schema, rows: int | None = None) -> None:
        self.df = df
        self.schema = schema
        self._rows = rows
        self._nulls: dict[str, int] | None = None

    @property
    def num_rows(self) -> int:
        if self._rows is None:
            with cluster_job("counting the input's rows"):
                self._rows = int(self.df.count())
        return self._rows

    def null_counts(self) -> dict[str, int]:
        """Each column's number of nulls, all in one aggregate on the executors."""
        if self._nulls is None:
            from pyspark.sql import functions as F

            names = self.column_names
            if not names:
                return {}
            with cluster_job("counting the input's nulls"):
                row = self.df.agg(
                    *(
                        F.count(F.when(F.col(_q(n)).isNull(), 1)).alias(f"n{i}")
                        for i, n in enumerate(names)
                    )
                ).first()
            self._nulls = {n: int(row[f"n{i}"]) for i, n in enumerate(names)}
        return self._nulls

    def with_schema(self, schema: pa.Schema) -> SparkFrame:
        """The frame of ``schema``'s columns (a subset, in its order), with that schema."""
        out = SparkFrame(self.df.select(*(_q(n) for n in schema.names)), schema, self._rows)
        if self._nulls is not None:
            out._nulls = {n: self._nulls[n] for n in schema.names}
        return out

    def map_batches(self, fn: BlockFn, schema: pa.Schema) -> SparkFrame:
        """``fn`` on every Arrow batch of the frame's rows, on the executors (each batch in
        the frame's ``schema``, its roles dropped), giving a frame of ``schema``."""
        from pyspark.sql.pandas.types import from_arrow_schema

        mapped = self.df.mapInArrow(
            _on_batches(fn, self.schema.remove_metadata(), schema), from_arrow_schema(schema)
        )
        return SparkFrame(mapped, schema, self._rows)

    def sums(self, names: Sequence[str], what: str = "summing columns") -> dict[str, int]:
        """Each column's sum (0 for no value), all in one aggregate on the executors (its
        failure a ``ClusterError`` saying ``what`` the job was doing)."""
        from pyspark.sql import functions as F

        if not names:
            return {}
        with cluster_job(what):
            row = self.df.agg(
                *(F.sum(F.col(_q(n))).alias(f"s{i}") for i, n in enumerate(names))
            ).first()
        return {n: int(row[f"s{i}"] or 0) for i, n in enumerate(names)}

    def min_max(self, names: Sequence[str]) -> dict[str, tuple]:
        """Each column's (minimum, maximum) over its non-null values, all in one aggregate on
        the executors."""
        from pyspark.sql import functions as F

        if not names:
            return {}
        with cluster_job("reading the numeric columns' ranges"):
            row = self.df.agg(
                *(F.min(F.col(_q(n))).alias(f"lo{i}") for i, n in enumerate(names)),
                *(F.max(F.col(_q(n))).alias(f"hi{i}") for i, n in enumerate(names)),
            ).first()
        return {n: (row[f"lo{i}"], row[f"hi{i}"]) for i, n in enumerate(names)}

    def persist(self) -> SparkFrame:
        """The frame kept in the executors' memory for the jobs that follow (Spark's
        ``persist``)."""
        out = SparkFrame(self.df.persist(), self.schema, self._rows)
        out._nulls = self._nulls
        return out

    def unpersist(self) -> None:
        self.df.unpersist()

    def column(self, name: str):
        raise RowsOnCluster(
            f"column '{name}': the rows of this table stay on the Spark cluster; this step "
            "must count them through the engine (group_counts)"
        )

    __getitem__ = column


@contextlib.contextmanager
def cluster_job(what: str) -> Iterator[None]:
    """A Spark job of a ``SparkFrame``'s, its failure a ``ClusterError`` naming the current
    engine's master and what the job was doing (never a Java stack)."""
    try:
        yield
    except PrivfairError:
        raise
    except Exception as e:
        engine = _CURRENT.get()
        master = engine.master if isinstance(engine, SparkEngine) else "unknown"
        raise ClusterError(master, f"failed {what}: {_spark_message(e)}") from None


def _q(name: str) -> str:
    """A column name as Spark reads it literally (a dot or a space in it is no path)."""
    return "`" + name.replace("`", "``") + "`"


def _on_batches(fn: BlockFn, given: pa.Schema, schema: pa.Schema):
    """What a Spark Python worker runs for ``SparkFrame.map_batches``: each batch cast to the
    schema privfair reads the frame in (Spark's own Arrow types may be other layouts), then
    ``fn``, its result cast to the declared ``schema``."""
    plain = pa.schema([f.remove_metadata() for f in given])
    out = pa.schema([f.remove_metadata() for f in schema])

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            t = pa.Table.from_batches([b]).cast(plain)
            yield from fn(t).cast(out).to_batches()

    return run


def null_count(table, name: str) -> int:
    """The number of nulls of column ``name`` of an Arrow table or a frame (for a
    ``SparkFrame``, one aggregate for all its columns, on the executors)."""
    if isinstance(table, Frame):
        return table.null_counts()[name]
    return table.column(name).null_count


def _in_block(fn: BlockFn, schema: pa.Schema) -> BlockFn:
    """What a Spark Python worker runs for one group: the component's function, its result cast
    to the declared schema (Spark checks it by name and type). A plain annotated function:
    Spark picks the grouped-map flavour from the type hints (a ``partial`` has none)."""

    def run(table: pa.Table) -> pa.Table:
        return fn(table).cast(schema)

    return run


MASTER_FORMS = (
    "local, local[N], local[*], local[N,F], local-cluster[N,C,M], spark://HOST:PORT"
    "[,HOST:PORT...], yarn, k8s://[https://]HOST:PORT, sc://HOST[:PORT] (Spark Connect)"
)
"""The Spark master URLs ``SparkEngine`` takes (those Spark itself parses)."""

PROBE_TIMEOUT = 5.0
"""Seconds to open a TCP connection to a standalone master before the session starts."""

CONNECT_TIMEOUT_ENV = "PRIVFAIR_SPARK_CONNECT_TIMEOUT"
DEFAULT_CONNECT_TIMEOUT = 30.0
"""Seconds a session on a standalone master (``spark://``) may take to start and register, or
a Spark Connect server (``sc://``) to answer a first job (``$PRIVFAIR_SPARK_CONNECT_TIMEOUT``);
Spark alone retries an unresponsive master for a minute, and a Connect client waits for ever
on a server that never answers."""

_LOCAL = re.compile(r"local(\[\s*([0-9]+|\*)\s*(,\s*[0-9]+\s*)?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*[1-9][0-9]*\s*,\s*[1-9][0-9]*\s*,\s*[0-9]+\s*\]")
_CONNECT = re.compile(r"sc://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::([0-9]{1,5}))?(/;.*|/)?")
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})")


def _master_error(master: str, rule: str) -> SpecError:
    return SpecError(
        "execution.master", f"'{shown_master(master)}' is not a Spark master URL: {rule}"
    )


def master_endpoints(master: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` of each master of a standalone cluster URL (``spark://h1:p1,h2:p2``),
    ``[]`` for the other forms Spark takes (``MASTER_FORMS``). Raises ``SpecError`` (key
    ``execution.master``) naming the URL when it is none of them.

    >>> master_endpoints("spark://10.0.0.5:7077,backup:7077")
    [('10.0.0.5', 7077), ('backup', 7077)]
    >>> master_endpoints("local[2]")
    []
    """
    m = _LOCAL.fullmatch(master)
    if m:
        if m.group(2) == "0":
            raise _master_error(master, "local[0] runs no thread; give local[N] with N >= 1")
        return []
    if _LOCAL_CLUSTER.fullmatch(master) or master == "yarn":
        return []
    if master.startswith("k8s://") and len(master) > len("k8s://"):
        return []
    if master.startswith("sc://"):  # Spark Connect: sc://HOST[:PORT][/;param=value...]
        hp = _CONNECT.fullmatch(master)
        if hp is None:
            raise _master_error(master, "a Spark Connect server is sc://HOST[:PORT][/;k=v...]")
        port = int(hp.group(2) or 15002)
        if not 0 < port < 65536:
            raise _master_error(master, f"port {port} is not between 1 and 65535")
        return [(hp.group(1).strip("[]"), port)]
    if master.startswith("spark://"):
        out = []
        for part in master.removeprefix("spark://").split(","):
            hp = _HOST_PORT.fullmatch(part.strip())
            if hp is None:
                raise _master_error(
                    master, f"'{part}' is not HOST:PORT (a standalone master is spark://HOST:PORT)"
                )
            port = int(hp.group(2))
            if not 0 < port < 65536:
                raise _master_error(master, f"port {port} is not between 1 and 65535")
            out.append((hp.group(1).strip("[]"), port))
        return out
    raise _master_error(master, f"Spark takes {MASTER_FORMS}")


_SECRET_PARAM = re.compile(r"(;\s*token\s*=)[^;]*", re.IGNORECASE)
_USERINFO = re.compile(r"^([a-z][a-z0-9+.-]*://(?:[a-z][a-z0-9+.-]*://)?)[^/@]*@", re.IGNORECASE)


def shown_master(master: str) -> str:
    """``master`` as a manifest, a log or an error message may show it: a Spark Connect
    ``token`` parameter and the user information of a URL (``https://user:secret@host``) are
    hidden, since a release's manifest travels with its shareable copy and neither is needed
    to say where it ran.

    >>> shown_master("sc://spark.example.com:443/;use_ssl=true;token=s3cr3t;user_id=ana")
    'sc://spark.example.com:443/;use_ssl=true;token=<hidden>;user_id=ana'
    >>> shown_master("k8s://https://admin:pw@10.0.0.1:6443")
    'k8s://https://<hidden>@10.0.0.1:6443'
    >>> shown_master("spark://10.0.0.5:7077")
    'spark://10.0.0.5:7077'
    """
    return _USERINFO.sub(r"\1<hidden>@", _SECRET_PARAM.sub(r"\1<hidden>", master))


def _unreachable(host: str, port: int, timeout: float) -> str | None:
    """Why no TCP connection to ``host:port`` opens within ``timeout`` seconds (the name
    lookup included), or None when one does."""
    why: list[str | None] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                why.append(None)
        except socket.gaierror as e:
            why.append(f"the host name does not resolve ({e.strerror or e})")
        except ConnectionRefusedError:
            why.append("nothing listens on that port (connection refused)")
        except TimeoutError:
            why.append(f"no answer within {timeout:g} s")
        except OSError as e:
            why.append(e.strerror or str(e))

    t = threading.Thread(target=probe, name="privfair-spark-probe", daemon=True)
    t.start()
    t.join(timeout)
    return why[0] if why else f"no answer within {timeout:g} s"


DEFAULT_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.log.level": "ERROR",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.driver.memory": "4g",
    "spark.driver.maxResultSize": "0",
}
"""The settings of a session ``SparkEngine`` starts; ``execution.conf`` / ``--conf`` override
them (the results of a cluster's blocks come back to the driver: no cap on their size)."""


def _is_remote(session) -> bool:
    """Whether ``session`` is a Spark Connect client's (no JVM, no ``sparkContext``)."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def _session_master(session) -> str:
    """The master ``session`` runs on: its SparkContext's (the session's ``spark.master``
    setting is whatever the last builder asked for, even when getOrCreate reused it), or
    what a Spark Connect server says."""
    try:
        if not _is_remote(session):
            return str(session.sparkContext.master)
        return str(session.conf.get("spark.master"))
    except Exception:  # noqa: BLE001 - a server that does not say
        return "spark-connect" if _is_remote(session) else "unknown"


def _connect_timeout() -> float:
    raw = os.environ.get(CONNECT_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_CONNECT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise PrivfairError(f"${CONNECT_TIMEOUT_ENV}: a number of seconds above 0, got '{raw}'")
    return value


def _spark_message(e: BaseException) -> str:
    """The line of a (Java) error that says what went wrong, without the stack; for a Python
    worker's exception, the last line of its traceback (``ValueError: ...``)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    if any(ln.startswith("Traceback (most recent call last)") for ln in lines):
        body = lines[: next((i for i, ln in enumerate(lines) if "JVM stacktrace" in ln), None)]
        raised = [ln for ln in body if re.match(r"[A-Za-z_][\w.]*(Error|Exception)\b", ln)]
        if raised:
            return raised[-1]
    for ln in lines:  # a failed stage: what the last attempt of its task hit
        cause = re.search(r"most recent failure: Lost task .*?\): (.+)", ln)
        if cause:
            return "a task failed: " + cause.group(1)
    useful = [
        ln.removeprefix(": ")
        for ln in lines
        if not ln.startswith(("at ", "An error occurred", "JVM stacktrace"))
    ]
    return (useful or lines or [type(e).__name__])[0]


class SparkEngine(Engine):
    """Blocks run through Spark's Arrow-native grouped map (``groupBy(key).applyInArrow``);
    group-by counts are Spark's.

    ``master``: a Spark master URL (``local[2]``, ``spark://host:7077``, ``sc://host:15002``
    for Spark Connect... see ``MASTER_FORMS``); ``conf``: Spark settings, over
    ``DEFAULT_CONF``; ``session``: a caller's session to run on instead (never stopped here).
    How the rows reach the executors (``exchange``): on a ``local[N]`` master through a
    Parquet file in this process's private temp folder, and the results likewise; on a
    cluster as Arrow batches over Spark's own connections (``createDataFrame``, results by
    ``toArrow``), so executors on other hosts, or running as another user, need no file of
    the driver's; with ``scratch`` (a path or URI every node reads: a shared folder,
    ``hdfs://``, ``s3a://``...) through a Parquet file in a folder of the run there.

    Spark's Python workers are pointed at this interpreter (``PYSPARK_PYTHON``, unless already
    set, or ``conf['spark.pyspark.python']``): by default they start the system ``python3``,
    which has none of privfair's dependencies.

    A master URL Spark would not parse is refused here (``SpecError``, key
    ``execution.master``), before any JVM starts; so is a standalone master
    (``spark://HOST:PORT``) that no TCP connection reaches within ``PROBE_TIMEOUT`` seconds
    (``PrivfairError`` naming the URL). A session on a standalone master that has not started
    and registered within ``connect_timeout`` seconds (default
    ``$PRIVFAIR_SPARK_CONNECT_TIMEOUT``, else ``DEFAULT_CONNECT_TIMEOUT``) is given up with a
    ``PrivfairError``, as is a session Spark fails to start. A cluster that gives the run no
    executor within that time, or a Spark job that fails, is a ``ClusterError`` naming the
    master and the reason (never a Java stack).
    """

    name = "spark"

    def __init__(
        self,
        master: str = "local[2]",
        conf: dict[str, str] | None = None,
        scratch: str | Path | None = None,
        connect_timeout: float | None = None,
        session=None,
    ) -> None:
        try:
            from pyspark.sql import SparkSession
        except ImportError:  # pragma: no cover - pyspark is in the lock, as the 'spark' extra
            raise PrivfairError(
                "execution.engine: 'spark' needs pyspark; install privfair with the 'spark' extra"
            ) from None
        # we exchange Arrow only, never pandas: pyspark's warning about pandas 3 does not apply
        warnings.filterwarnings(
            "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
        )
        conf = dict(conf or {})
        self._given = conf  # execution.conf / --conf, named when a session fails to start
        self.connect_timeout = connect_timeout if connect_timeout else _connect_timeout()
        self._session = None
        self._owned = False
        self._scratch = Path(tempfile.mkdtemp(prefix="privfair-spark-"))  # this process's own
        self.scratch = str(scratch) if scratch is not None else None
        self._shared_dir = None
        if session is not None:  # the caller's: used as it is, never stopped
            self.remote = _is_remote(session)
            self.master = _session_master(session)
            self._endpoints = []
            self._session = session
            for k, v in conf.items():
                try:
                    session.conf.set(k, v)
                except Exception as e:
                    raise ClusterError(
                        self.master, f"refused the setting {k}={v}: {_spark_message(e)}"
                    ) from None
            self._builder = None
        else:
            self._endpoints = master_endpoints(master)
            self.remote = master.startswith("sc://")
            self.master = shown_master(master)  # what messages and the manifest name
        if not self.remote and shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise PrivfairError(
                "execution.engine: 'spark' needs a Java runtime (17 or later) on PATH or in "
                "JAVA_HOME; `bash .ci/deps` installs Debian's openjdk-17-jre-headless"
            )
        if self._endpoints:
            problems = [
                f"{host}:{port}: {why}"
                for host, port in self._endpoints
                if (why := _unreachable(host, port, PROBE_TIMEOUT)) is not None
            ]
            if len(problems) == len(self._endpoints):
                what = "Spark Connect server" if self.remote else "Spark master"
                kind = "a Spark Connect server" if self.remote else "a standalone master"
                raise PrivfairError(
                    f"execution.master: cannot reach the {what} at '{self.master}' "
                    f"({'; '.join(problems)}); {kind} must accept connections before a run "
                    "starts"
                )
        if "spark.pyspark.python" in conf:  # what the executors' Python workers start
            os.environ["PYSPARK_PYTHON"] = conf["spark.pyspark.python"]
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if session is None and self.remote:
            # a Connect server's session: its static settings are the server's own
            self._builder = SparkSession.builder.remote(master)
            for k, v in conf.items():
                self._builder = self._builder.config(k, v)
        elif session is None:
            self._builder = SparkSession.builder.master(master).appName("privfair")
            for k, v in {**DEFAULT_CONF, **conf}.items():
                self._builder = self._builder.config(k, v)
        local = _LOCAL.fullmatch(self.master) is not None and not self.remote
        self.exchange = "scratch" if scratch is not None else "driver-disk" if local else "arrow"
        cores = self.master.removeprefix("local[").removesuffix("]")
        self.workers = (
            (os.cpu_count() or 1) if cores == "*" else int(cores) if cores.isdigit() else None
        )
        if session is not None:
            self._described(session)

    @property
    def spark(self):
        """The Spark session, started on first use (an algorithm that sends nothing to the
        engine costs no JVM). A session this process already runs is reused, and left running
        on ``close``; so is a session the caller gave. A reused session keeps its own master,
        which is what the manifest then records (with a warning when another was asked for)."""
        if self._session is None:
            from pyspark.sql import SparkSession

            owned = self.remote or SparkSession.getActiveSession() is None
            session = self._start() if owned and self._endpoints else self._create()
            self._owned = owned
            self._session = session
            if not owned:
                running = shown_master(_session_master(session))
                if running != self.master:
                    warnings.warn(
                        f"execution.master: '{self.master}' asked for, but this process already "
                        f"runs a Spark session on '{running}': the run uses that session",
                        stacklevel=2,
                    )
                    self.master = running
            if not self.remote:
                self._session.sparkContext.setLogLevel("ERROR")
            if owned and not self.remote and _LOCAL.fullmatch(self.master) is None:
                self._await_executors()
            if self.remote:
                self._await_answer()
            self._described(session)
        return self._session

    def _described(self, session) -> None:
        if not _is_remote(session):
            self.workers = session.sparkContext.defaultParallelism

    def _await_executors(self) -> None:
        """Wait (``connect_timeout`` seconds) until a cluster gives this application an
        executor: Spark itself would wait for ever on a job no worker can take ("Initial job
        has not accepted any resources")."""
        import time

        tracker = self._session.sparkContext.statusTracker()
        t0 = time.monotonic()
        while len(tracker.getExecutorInfos()) <= 1:  # the driver is listed too
            if time.monotonic() - t0 > self.connect_timeout:
                self._session.stop()
                self._session = None
                raise ClusterError(
                    self.master,
                    f"gave this application no executor within {self.connect_timeout:g} s: "
                    "no worker is registered with the master, or none has the free cores and "
                    "memory asked for (spark.executor.cores, spark.executor.memory); raise "
                    f"${CONNECT_TIMEOUT_ENV} for a slow cluster",
                )
            time.sleep(0.2)

    def _await_answer(self) -> None:
        """Wait (``connect_timeout`` seconds) until a Spark Connect server runs one tiny job
        (``range(1).count()``): a Connect client's session starts without a word to the
        server, and its first request waits for ever on a port that accepts but never
        answers, or on a server whose cluster gives it no executor. Given up with a
        ``ClusterError`` naming the master, the client's channel closed: that ends the
        request, and pyspark's exit hook, which asks the server to clean up unless the client
        is closed, would otherwise keep the process from ever exiting."""
        box: dict = {}
        done = threading.Event()
        session = self._session

        def ask() -> None:
            try:
                box["rows"] = session.range(1).count()
            except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
                box["error"] = e
            finally:
                done.set()

        threading.Thread(target=ask, name="privfair-spark-connect-probe", daemon=True).start()
        if not done.wait(self.connect_timeout):
            self._session = None
            with contextlib.suppress(Exception):
                session.client.close()
            raise ClusterError(
                self.master,
                f"did not answer within {self.connect_timeout:g} s: the port accepts "
                "connections but no Spark Connect server ran a job there (is it one? does its "
                f"cluster give it an executor?); raise ${CONNECT_TIMEOUT_ENV} for a slow "
                "cluster",
            )
        if "error" in box:
            self._session = None
            raise ClusterError(
                self.master, f"failed a first job: {_spark_message(box['error'])}"
            ) from None

    def _create(self):
        try:
            return self._builder.getOrCreate()
        except Exception as e:
            given = "; ".join(f"{k}={v}" for k, v in self._given.items())
            raise PrivfairError(
                f"execution.master: no Spark session on '{self.master}': {_spark_message(e)}"
                + (f" (with the Spark settings given: {given})" if given else "")
            ) from e

    def _start(self):
        """``_create`` on a standalone master, given up after ``connect_timeout`` seconds: Spark
        retries an unresponsive master for a minute. A session that starts after that is
        stopped at once (nobody waits for it any more)."""
        box: dict = {}
        lock = threading.Lock()
        done = threading.Event()

        def start() -> None:
            try:
                session = self._create()
            except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
                box["error"] = e
            else:
                with lock:
                    if box.get("abandoned"):
                        session.stop()
                    else:
                        box["session"] = session
            finally:
                done.set()

        threading.Thread(target=start, name="privfair-spark-start", daemon=True).start()
        finished = done.wait(self.connect_timeout)
        with lock:
            if not finished and "session" not in box:
                box["abandoned"] = True
                raise PrivfairError(
                    f"execution.master: no Spark session on '{self.master}' within "
                    f"{self.connect_timeout:g} s: the master accepts connections but did not "
                    f"register this application (is it a Spark master? raise "
                    f"${CONNECT_TIMEOUT_ENV} for a slow cluster)"
                )
        if "error" in box:
            raise box["error"]
        return box["session"]

    def describe(self) -> dict:
        return {"engine": self.name, "master": self.master, "workers": self.workers}

    def _folder(self, name: str) -> str:
        path = self._scratch / name
        shutil.rmtree(path, ignore_errors=True)
        return str(path)

    def _failed(self, e: BaseException, what: str) -> ClusterError:
        return ClusterError(self.master, f"failed {what}: {_spark_message(e)}")

    def _frame(self, parts: Iterable[pa.Table], name: str):
        """A DataFrame of the tables ``parts`` (one schema), and what to remove once used.

        Where the executors find the rows (``exchange``): ``driver-disk`` (a ``local[N]``
        master: the executors are threads of this process) a Parquet file in this process's
        private temp folder; ``scratch``: a Parquet file in the run's folder of the scratch
        location (``scratch``, every node reads it); ``arrow``: Arrow batches sent to the
        cluster by Spark itself (``createDataFrame``), no file at all."""
        if self.exchange == "arrow":
            tables = [p.replace_schema_metadata(None) for p in parts]
            if not tables:
                return None, None
            table = pa.concat_tables([t.cast(tables[0].schema) for t in tables])
            del tables
            return self.spark.createDataFrame(table), None
        if self.exchange == "scratch":
            fs, base, uri = self._shared()
            dst, read = f"{base}/{name}.parquet", f"{uri}/{name}.parquet"
        else:
            fs = None
            dst = read = self._folder(name) + ".parquet"
        writer = None
        try:  # each part becomes its own row groups of one file, written as it comes
            for part in parts:
                part = part.replace_schema_metadata(None)
                if writer is None:
                    writer = pq.ParquetWriter(dst, part.schema, compression="zstd", filesystem=fs)
                writer.write_table(part.cast(writer.schema))
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            return None, None
        if fs is not None and isinstance(fs, pafs.LocalFileSystem):
            os.chmod(dst, 0o644)  # the executors run as another user

        def remove() -> None:
            with contextlib.suppress(OSError, FileNotFoundError):
                (fs or pafs.LocalFileSystem()).delete_file(dst)

        return self.spark.read.parquet(read), remove

    def _shared(self):
        """(pyarrow file system, its path, Spark's URI) of this run's folder of the scratch
        location, made on first use: a folder every user reads (0755) for a local path."""
        if self._shared_dir is None:
            self._shared_dir = _shared_folder(str(self.scratch))
        return self._shared_dir

    def map_blocks(self, table: pa.Table, key: str, fn: BlockFn, schema: pa.Schema) -> pa.Table:
        n_blocks = len(pc.unique(table.column(key)))
        return self.map_parts([table], n_blocks, key, fn, schema)

    def map_parts(
        self, parts: Iterable[pa.Table], n_parts: int, key: str, fn: BlockFn, schema: pa.Schema
    ) -> pa.Table:
        from pyspark.sql.pandas.types import from_arrow_schema

        df, remove = self._frame(parts, "blocks-in")
        if df is None:
            return schema.empty_table()
        self.calls += 1
        try:
            df = df.repartition(max(n_parts, 1), key)
            out = df.groupBy(key).applyInArrow(_in_block(fn, schema), from_arrow_schema(schema))
            if self.exchange == "driver-disk":
                dst = self._folder("blocks-out")
                out.write.mode("overwrite").parquet(dst)
                got = pq.read_table(dst, schema=schema)
                shutil.rmtree(dst, ignore_errors=True)
            else:  # the results come back over Spark's own connection to the driver
                got = out.toArrow().cast(schema)
        except PrivfairError:
            raise
        except Exception as e:
            raise self._failed(e, "running the blocks") from None
        finally:
            if remove is not None:
                remove()
        # part files come back in no set order: blocks in key order, rows as fn returned them
        # (Arrow's sort is stable)
        return got.take(pc.sort_indices(got, sort_keys=[(key, "ascending")]))

    def group_counts(self, table: pa.Table, keys: Sequence[Sequence[str]]) -> list[pa.Table]:
        """All key sets in one Spark job: ``GROUP BY GROUPING SETS`` over their columns, split
        on the driver by ``grouping_id()`` (a bit per column left out of the set, first column
        most significant), so a data null is never confused with a column the set omits. A
        ``SparkFrame`` is counted where its rows are; an Arrow table or a ``TableFrame`` is sent
        first."""
        if not keys:
            return []
        self.calls += 1
        cols = list(dict.fromkeys(c for ks in keys for c in ks))
        if isinstance(table, SparkFrame):  # read where the rows are: nothing sent, nothing held
            df, remove = table.df.select(*(_q(c) for c in cols)), None
        else:  # a local frame is sent batch by batch, as its batch functions give them
            parts = (
                (b.select(cols) for b in table.batches())
                if isinstance(table, TableFrame)
                else [table.select(cols)]
            )
            df, remove = self._frame(parts, "counts-in")
            if df is None:
                rows = table.schema.empty_table() if isinstance(table, TableFrame) else table
                df, remove = self.spark.createDataFrame(rows.select(cols)), None
        q = _q

        sets = ", ".join("(" + ", ".join(q(c) for c in ks) + ")" for ks in keys)
        view = f"privfair_counts_{os.getpid()}_{id(self)}"
        try:
            df.createOrReplaceTempView(view)
            got = self.spark.sql(
                f"SELECT {', '.join(q(c) for c in cols)}, grouping_id() AS __gid, "
                f"count(1) AS __count FROM {view} GROUP BY GROUPING SETS ({sets})"
            ).toArrow()
            self.spark.catalog.dropTempView(view)
        except PrivfairError:
            raise
        except Exception as e:
            raise self._failed(e, "counting") from None
        finally:
            if remove is not None:
                remove()
        gid = got.column("__gid").to_numpy()
        out = []
        for ks in keys:
            want = sum(1 << (len(cols) - 1 - i) for i, c in enumerate(cols) if c not in ks)
            part = got.filter(pa.array(gid == want))
            schema = pa.schema(
                [table.schema.field(c).remove_metadata() for c in ks]
                + [pa.field("count", pa.int64())]
            )
            out.append(
                pa.table(
                    [part.column(c) for c in ks] + [part.column("__count")], names=[*ks, "count"]
                ).cast(schema)
            )
        return out

    def close(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)
        if self._shared_dir is not None:
            fs, base, _ = self._shared_dir
            with contextlib.suppress(OSError, FileNotFoundError):
                fs.delete_dir(base)
            self._shared_dir = None
        if self._session is not None and self._owned:
            self._session.stop()
        self._session = None


def _shared_folder(scratch: str):
    """(pyarrow file system, path, Spark URI) of a new folder of this run under ``scratch``: a
    local path (or ``file://``) gets a folder every user can read (0755) where the executors,
    running as another user, read what the driver wrote; a URI (``hdfs://``, ``s3a://``,
    ``gs://``, ``abfs://``...) a folder named ``privfair-<random>`` under it."""
    import uuid

    if "://" not in scratch or scratch.startswith("file://"):
        parent = Path(scratch.removeprefix("file://")).expanduser()
        try:
            parent.mkdir(parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix="privfair-spark-", dir=parent))
            os.chmod(folder, 0o755)
        except OSError as e:
            raise PrivfairError(
                f"execution.scratch: cannot make a folder under '{scratch}': {e.strerror or e}"
            ) from None
        return pafs.LocalFileSystem(), str(folder), folder.as_uri()
    name = f"privfair-spark-{uuid.uuid4().hex[:12]}"
    scheme, _, rest = scratch.partition("://")
    arrow_uri = f"{'s3' if scheme in ('s3a', 's3n') else scheme}://{rest}"
    try:
        fs, base = pafs.FileSystem.from_uri(arrow_uri)
        fs.create_dir(f"{base.rstrip('/')}/{name}")
    except Exception as e:  # noqa: BLE001 - any file system's own error, named
        raise PrivfairError(f"execution.scratch: cannot use '{scratch}': {e}") from None
    return fs, f"{base.rstrip('/')}/{name}", f"{scratch.rstrip('/')}/{name}"


_CURRENT: contextvars.ContextVar[Engine | None] = contextvars.ContextVar(
    "privfair_engine", default=None
)


def current_engine() -> Engine:
    """The engine activated by ``using``; outside one, this process alone."""
    return _CURRENT.get() or LocalEngine()


@contextlib.contextmanager
def using(engine: Engine) -> Iterator[Engine]:
    """Make ``engine`` the current one for the calls inside the block."""
    token = _CURRENT.set(engine)
    try:
        yield engine
    finally:
        _CURRENT.reset(token)


_SESSION: contextvars.ContextVar = contextvars.ContextVar("privfair_spark_session", default=None)


@contextlib.contextmanager
def given_session(session) -> Iterator[None]:
    """Inside the block, a ``spark`` engine ``make_engine`` makes runs on ``session`` (a
    caller's ``SparkSession``, classic or Spark Connect), which it never stops."""
    token = _SESSION.set(session)
    try:
        yield
    finally:
        _SESSION.reset(token)


def make_engine(
    name: str = "local",
    master: str | None = None,
    workers: int | None = None,
    conf: dict[str, str] | None = None,
    scratch: str | None = None,
) -> Engine:
    """The engine a spec's ``execution`` (or the CLI's ``--engine``/``--master``/``--conf``)
    names.

    ``local``: ``workers`` processes (default: the machine's cores); ``spark``: a session on
    ``master`` (default ``local[<workers or cores>]``) with the Spark settings ``conf``, or the
    session ``given_session`` names.
    """
    cores = os.cpu_count() or 1
    if name == "local":
        if master is not None:
            raise PrivfairError("execution.master: only the 'spark' engine takes a master URL")
        return LocalEngine(workers or cores)
    if name == "spark":
        session = _SESSION.get()
        if session is not None:
            return SparkEngine(conf=conf, scratch=scratch, session=session)
        return SparkEngine(master or f"local[{workers or cores}]", conf=conf, scratch=scratch)
    raise PrivfairError(f"execution.engine: unknown engine '{name}' (known: local, spark)")
