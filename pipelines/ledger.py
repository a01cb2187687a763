"""The privacy-budget ledger: every release of a dataset, across runs, in one transactional table.

A ledger lives at a URL: ``sqlite:///PATH`` (stdlib ``sqlite3``, WAL; the default is the
store's own ``<store>/.privfair/ledger.sqlite``, 0600) or ``postgresql://...`` (ADBC, the
``postgres`` extra). ``${VAR}`` in a URL is read from the environment; a URL is shown and
recorded only with its password redacted (``redact``).

One row (an *entry*) per release and block: a release of a partitioned spec charges every
partition it reads (``per: partition``: parallel composition, each partition a disjoint set of
records with the whole budget), a release under ``per: dataset`` the single block ``*``. The
rules the ledger enforces:

- **Reserve before noise**: a differentially private release reserves its cost (its rho) in
  one transaction that also checks the budget (``Ledger.reserve``): SQLite ``BEGIN
  IMMEDIATE``, PostgreSQL ``pg_advisory_xact_lock`` on the budget's key, so two runs that
  want the last of a budget serialise and only one gets it. A refusal is ``BudgetExceeded``.
- **A charge stays**: every entry but a ``refused`` one counts, whether its release was then
  published, quarantined, failed, or killed while ``reserved``: the noise may have been drawn.
- **Composition in zCDP**: a block's spent rho is the sum of its entries' rho (plus the
  entries of block ``*``, which read every block); an (epsilon, delta) budget holds while
  OpenDP's conversion of that sum at the budget's delta stays within epsilon
  (``composed_epsilon``), tighter than adding epsilons.

>>> redact("postgresql://ann:s3cret@db:5432/ledger")
'postgresql://ann:***@db:5432/ledger'
>>> acc = compose([0.01, 0.02], {"rho": 0.035})
>>> round(acc["spent"]["rho"], 12), round(acc["remaining"]["rho"], 12), acc["fits"]
(0.03, 0.005, True)
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipelines.connectors import expand, redact  # one rule for ${VAR} and for what a URL shows
from schemas.errors import PrivfairError, StoreError

__all__ = [
    "SCHEMA_VERSION",
    "COUNTED",
    "BudgetExceeded",
    "RepublishRefused",
    "Ledger",
    "Entry",
    "compose",
    "composed_epsilon",
    "redact",
    "expand",
    "default_url",
]

SCHEMA_VERSION = 1
TABLE = "privfair_ledger"
META = "privfair_ledger_meta"
#: Entry statuses whose charge counts: all but ``refused`` (nothing ran).
COUNTED = ("reserved", "published", "quarantined", "failed")
STATUSES = (*COUNTED, "refused")
#: Relative slack for float sums (three releases of rho r fit a budget of 3 r).
_SLACK = 1e-9


class BudgetExceeded(PrivfairError):
    """A differentially private release would spend more than its dataset's declared budget:
    nothing ran, nothing is published (the CLI exits 2)."""


class RepublishRefused(PrivfairError):
    """A release would publish rows an earlier release of its pipeline published under another
    grouping, and the spec's ``republish`` policy does not allow it (the CLI exits 2)."""


# --- URLs ----------------------------------------------------------------------------------------


def default_url(store_path: str) -> str:
    """The store's own ledger: ``sqlite:///<store>/.privfair/ledger.sqlite``."""
    return f"sqlite:///{Path(store_path) / '.privfair' / 'ledger.sqlite'}"


# --- composition -----------------------------------------------------------------------------
def composed_epsilon(rho: float, delta: float) -> float:
    """epsilon of (epsilon, delta)-DP for a total of ``rho`` zCDP, by OpenDP's conversion."""
    from components.synthesis.accounting import epsilon_of

    return epsilon_of(float(rho), float(delta))


def compose(rhos: Iterable[float], budget: dict | None, cost: float = 0.0) -> dict:
    """The account of one block: its entries' ``rhos`` composed (zCDP: summed) plus ``cost``,
    against ``budget`` (``{"rho": R}`` or ``{"epsilon": E, "delta": D}``, None: no cap).

    Returns ``{"spent": {"rho", "epsilon"}, "remaining": {"rho", "epsilon"} | None,
    "fits": bool}``; under an (epsilon, delta) budget ``remaining.rho`` is the rho left before
    OpenDP's conversion at delta reaches epsilon (``accounting.rho_budget``).
    """
    total = math.fsum([*rhos, cost])
    if budget is None:
        return {"spent": {"rho": total, "epsilon": None}, "remaining": None, "fits": True}
    if budget.get("rho") is not None:
        cap = float(budget["rho"])
        return {
            "spent": {"rho": total, "epsilon": None},
            "remaining": {"rho": max(0.0, cap - total), "epsilon": None},
            "fits": total <= cap * (1 + _SLACK),
        }
    from components.synthesis.accounting import rho_budget

    eps, delta = float(budget["epsilon"]), float(budget["delta"])
    cap = rho_budget(eps, delta)
    spent_eps = composed_epsilon(total, delta)
    return {
        "spent": {"rho": total, "epsilon": spent_eps},
        "remaining": {"rho": max(0.0, cap - total), "epsilon": max(0.0, eps - spent_eps)},
        "fits": spent_eps <= eps * (1 + _SLACK),
    }


# --- entries ---------------------------------------------------------------------------------
_COLUMNS = (
    "id",
    "run_id",
    "dataset",
    "unit",
    "block",
    "pipeline",
    "version",
    "partition",
    "family",
    "rho",
    "epsilon",
    "delta",
    "budget",
    "per",
    "policy",
    "digest",
    "status",
    "note",
    "created_at",
    "updated_at",
)


@dataclass(frozen=True)
class Entry:
    """One row of the ledger: one release's charge on one block."""

    id: int
    run_id: str
    dataset: str
    unit: str
    block: str
    pipeline: str
    version: str
    partition: str | None
    family: str | None
    rho: float | None
    epsilon: float | None
    delta: float | None
    budget: str | None  # the declared budget, JSON
    per: str | None
    policy: str | None
    digest: str | None  # sha256 over the release's public output files
    status: str
    note: str | None
    created_at: str
    updated_at: str

    @property
    def counted(self) -> bool:
        return self.status in COUNTED and self.rho is not None

    def as_dict(self) -> dict[str, Any]:
        return {c: getattr(self, c) for c in _COLUMNS}


@dataclass(frozen=True)
class Charge:
    """What ``Ledger.reserve`` recorded: the run's id, its first entry, the blocks charged and
    the account of the most-spent block after this release."""

    run_id: str
    entry: int
    blocks: tuple[str, ...]
    account: dict


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _spent_rhos(entries: Sequence[Entry], block: str, per: str) -> list[float]:
    """The rhos that count against ``block``, each release (run) once: per dataset, every
    release whatever it read; per partition, the releases with an entry on that block or on
    ``*`` (a release that read every block)."""
    by_run: dict[str, float] = {}
    for e in entries:
        if e.counted and (per == "dataset" or e.block in (block, "*")):
            by_run[e.run_id] = max(by_run.get(e.run_id, 0.0), float(e.rho))  # type: ignore[arg-type]
    return list(by_run.values())


def account(
    entries: Sequence[Entry],
    blocks: Sequence[str],
    per: str,
    budget: dict | None,
    cost: float = 0.0,
) -> tuple[str, dict, bool]:
    """(most-spent block, its ``compose`` account, whether every block fits) after charging
    ``cost`` on ``blocks``."""
    worst: tuple[str, dict] | None = None
    fits = True
    for b in blocks:
        acc = compose(_spent_rhos(entries, b, per), budget, cost)
        fits = fits and acc["fits"]
        if worst is None or acc["spent"]["rho"] > worst[1]["spent"]["rho"]:
            worst = (b, acc)
    assert worst is not None
    return worst[0], worst[1], fits


# --- backends --------------------------------------------------------------------------------
class _Backend:
    id_type = "INTEGER PRIMARY KEY AUTOINCREMENT"

    def sql(self, text: str) -> str:
        return text


def _wal(conn: sqlite3.Connection, wait_s: float = 60.0) -> None:
    """Put the ledger in WAL mode. Two processes opening a new ledger at once race to switch
    it, and SQLite answers the loser 'database is locked' at once, without its busy timeout:
    so the switch is retried for up to ``wait_s`` seconds."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class _SQLite(_Backend):
    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def transaction(self, lock_key: str | None) -> Iterator[Any]:
        if not self.path.exists():  # the owner's only, from the start (its -wal/-shm follow it)
            try:
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            except OSError as e:
                raise StoreError(
                    str(self.path), f"cannot create the ledger: {e.strerror}"
                ) from None
        conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            _wal(conn)
            conn.execute("BEGIN IMMEDIATE")  # one writer at a time: check-and-reserve is atomic
            cur = conn.cursor()
            try:
                yield cur
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()


class _Postgres(_Backend):
    id_type = "BIGSERIAL PRIMARY KEY"

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None  # one connection per ledger object: connecting takes ~0.2 s

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __del__(self) -> None:
        with suppress(Exception):  # closing at interpreter exit may fail: nothing to do
            self.close()

    def sql(self, text: str) -> str:
        n = iter(range(1, 1000))
        return re.sub(r"\?", lambda _: f"${next(n)}", text)

    @contextmanager
    def transaction(self, lock_key: str | None) -> Iterator[Any]:
        from adbc_driver_postgresql import dbapi

        if self._conn is None:
            self._conn = dbapi.connect(self.url)
        conn = self._conn
        cur = conn.cursor()
        try:
            # the schema's creation and every check-and-reserve of one budget serialise here
            cur.execute("SELECT pg_advisory_xact_lock(hashtext($1))", (lock_key or TABLE,))
            yield _PgCursor(cur, self)
        except BaseException:
            try:
                conn.rollback()
            except Exception:  # a broken connection: open a new one next time
                self.close()
            raise
        else:
            conn.commit()
        finally:
            cur.close()


class _PgCursor:
    """A cursor taking ``?`` placeholders (ADBC's PostgreSQL driver takes ``$n``)."""

    def __init__(self, cur: Any, backend: _Postgres) -> None:
        self.cur, self.backend = cur, backend

    def execute(self, text: str, params: Sequence[Any] = ()) -> _PgCursor:
        self.cur.execute(self.backend.sql(text), tuple(params) if params else None)
        return self

    def fetchall(self) -> list[tuple]:
        return self.cur.fetchall()

    def fetchone(self) -> tuple | None:
        return self.cur.fetchone()


class Ledger:
    """A privacy-budget ledger at a URL (``Ledger.open``)."""

    def __init__(self, backend: _Backend, shown: str) -> None:
        self._b = backend
        self.url = shown  # redacted
        self.own = False  # the store's own ledger (manifests name it without its path)

    @classmethod
    def open(cls, url: str, key: str = "budget.ledger") -> Ledger:
        """The ledger at ``url`` (``${VAR}`` expanded), its table created on first use.
        ``StoreError`` naming the redacted URL when it is malformed, unreachable or not a
        privfair ledger of a known schema version."""
        url = expand(url, key)
        shown = redact(url)
        scheme = url.split("://", 1)[0].lower() if "://" in url else ""
        if scheme == "sqlite":
            rest = url[len("sqlite://") :]
            if not rest.startswith("/") or rest == "/":
                raise StoreError(shown, "a SQLite ledger URL is sqlite:///PATH")
            path = Path(rest[1:])  # sqlite:///relative, sqlite:////absolute
            try:
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError as e:
                raise StoreError(
                    shown, f"cannot create the ledger's folder: {e.strerror}"
                ) from None
            backend: _Backend = _SQLite(path)
        elif scheme in ("postgresql", "postgres"):
            try:
                import adbc_driver_postgresql  # noqa: F401
            except ImportError:
                raise StoreError(
                    shown,
                    "a PostgreSQL ledger needs the 'postgres' extra (adbc-driver-postgresql)",
                ) from None
            backend = _Postgres(url)
        else:
            raise StoreError(shown, "a ledger URL is sqlite:///PATH or postgresql://USER@HOST/DB")
        ledger = cls(backend, shown)
        ledger._init()
        return ledger

    # -- plumbing --
    @contextmanager
    def _tx(self, lock_key: str | None = None) -> Iterator[Any]:
        try:
            with self._b.transaction(lock_key) as cur:
                yield cur
        except (PrivfairError, KeyboardInterrupt):
            raise
        except Exception as e:  # the driver's errors: unreachable, refused, corrupt...
            if isinstance(e, sqlite3.Error) or type(e).__module__.startswith("adbc_driver"):
                raise StoreError(self.url, f"the ledger cannot be used: {e}") from None
            raise

    def _init(self) -> None:
        with self._tx() as cur:
            cur.execute(f"CREATE TABLE IF NOT EXISTS {META} (key TEXT PRIMARY KEY, value TEXT)")
            cols = ", ".join(
                f"{c} {self._b.id_type}"
                if c == "id"
                else f"{c} DOUBLE PRECISION"
                if c in ("rho", "epsilon", "delta")
                else f"{c} TEXT"
                for c in _COLUMNS
            )
            cur.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} ({cols})")
            cur.execute(f"CREATE INDEX IF NOT EXISTS {TABLE}_key ON {TABLE} (dataset, unit)")
            row = cur.execute(f"SELECT value FROM {META} WHERE key = ?", ("schema",)).fetchone()
            if row is None:
                cur.execute(
                    f"INSERT INTO {META} (key, value) VALUES (?, ?)",
                    ("schema", str(SCHEMA_VERSION)),
                )
            elif str(row[0]) != str(SCHEMA_VERSION):
                raise StoreError(
                    self.url,
                    f"ledger schema version {row[0]}, this privfair reads {SCHEMA_VERSION}",
                )

    @staticmethod
    def _rows(cur: Any, where: str = "", params: Sequence[Any] = ()) -> list[Entry]:
        rows = cur.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM {TABLE} {where} ORDER BY id", params
        ).fetchall()
        return [Entry(*r) for r in rows]

    # -- the API --
    def reserve(
        self,
        *,
        dataset: str,
        blocks: Sequence[str],
        per: str,
        pipeline: str,
        version: str,
        partition: str | None,
        family: str | None,
        cost: Any | None,
        budget: dict | None,
        policy: str | None,
        unit: str = "record",
        digest: str | None = None,
    ) -> Charge:
        """Check the budget and record this release on ``blocks`` in one transaction.

        ``cost`` (``descriptor.Cost`` or None for a non-DP release) is charged on every block;
        with a ``budget`` that any block cannot afford, the attempt is recorded as ``refused``
        (it counts nothing) and ``BudgetExceeded`` names the dataset, the blocks, what is
        spent and left, and the cost."""
        blocks = ["*"] if per == "dataset" else list(blocks)
        run_id = uuid.uuid4().hex
        rho = float(cost.rho) if cost is not None else None
        lock = f"{dataset}|{unit}"
        with self._tx(lock) as cur:
            entries = self._rows(cur, "WHERE dataset = ? AND unit = ?", (dataset, unit))
            worst, acc, fits = account(entries, blocks, per, budget, rho or 0.0)
            status = "reserved" if fits or rho is None else "refused"
            now = _now()
            ids = []
            for b in blocks:
                row = cur.execute(
                    f"INSERT INTO {TABLE} ({', '.join(_COLUMNS[1:])}) VALUES "
                    f"({', '.join('?' * (len(_COLUMNS) - 1))}) RETURNING id",
                    (
                        run_id,
                        dataset,
                        unit,
                        b,
                        pipeline,
                        version,
                        partition,
                        family,
                        rho,
                        float(cost.epsilon) if cost is not None else None,
                        float(cost.delta) if cost is not None else None,
                        json.dumps(budget, sort_keys=True) if budget is not None else None,
                        per,
                        policy,
                        digest,
                        status,
                        None,
                        now,
                        now,
                    ),
                ).fetchone()
                ids.append(int(row[0]))
        if status == "refused":
            left = compose(_spent_rhos(entries, worst, per), budget)
            raise BudgetExceeded(
                f"privacy budget of '{dataset}' exhausted on block(s) "
                f"{', '.join(b for b in blocks)}: spent {_fmt(left['spent'])} of "
                f"{_fmt(budget)}, remaining {_fmt(left['remaining'])}; this release of "
                f"'{pipeline}' costs rho={rho:.6g} (epsilon={cost.epsilon:.6g} at "
                f"delta={cost.delta:g}); nothing ran (ledger {self.url}, entry {ids[0]})"
            )
        return Charge(run_id, ids[0], tuple(blocks), {"block": worst, **acc})

    def mark(self, run_id: str, status: str, note: str | None = None) -> None:
        """Set the status of every entry of a run (a ``refused`` entry stays refused)."""
        if status not in STATUSES:
            raise ValueError(f"unknown ledger status {status!r}")
        with self._tx() as cur:
            cur.execute(
                f"UPDATE {TABLE} SET status = ?, note = COALESCE(?, note), updated_at = ? "
                "WHERE run_id = ? AND status <> 'refused'",
                (status, note, _now(), run_id),
            )

    def entries(self, dataset: str | None = None, pipeline: str | None = None) -> list[Entry]:
        """Every entry (of ``dataset`` / ``pipeline`` when given), oldest first."""
        conds, params = [], []
        for col, v in (("dataset", dataset), ("pipeline", pipeline)):
            if v is not None:
                conds.append(f"{col} = ?")
                params.append(v)
        where = f"WHERE {' AND '.join(conds)}" if conds else ""
        with self._tx() as cur:
            return self._rows(cur, where, params)


def _fmt(x: dict | None) -> str:
    if not x:
        return "nothing (no budget declared)"
    parts = [f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in x.items()]
    return ", ".join(p for p in parts if not p.endswith("=None"))
