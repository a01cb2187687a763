"""The privacy-budget ledger: every release of a dataset, across runs, in one transactional table.

A ledger lives at a URL: ``sqlite:///PATH`` (stdlib ``sqlite3``, WAL) or
``postgresql://...`` (ADBC, the ``postgres`` extra). The default is the data owner's own
(``default_url``: ``$XDG_STATE_HOME/privfair/ledger.sqlite``, 0600), shared by every store,
spec and pipeline of this user; a team gives one URL (``$PRIVFAIR_LEDGER``, ``budget.ledger``).
``${VAR}`` in a URL is read from the environment; a URL is shown and recorded only with its
password redacted (``redact``).

One row (an *entry*) per release and block. An entry names its dataset by its identity's
atoms (``privfair.io.identity``): every rule below reads the entries of every dataset whose
atoms meet the release's, whatever pipeline, store or spelling recorded them.

- **Reserve before noise**: a differentially private release reserves its cost (its rho) in
  one transaction that also checks the budget (``Ledger.reserve``): SQLite ``BEGIN
  IMMEDIATE``, PostgreSQL ``pg_advisory_xact_lock`` on one key, so two runs that want the
  last of a budget serialise and only one gets it. A refusal is ``BudgetExceeded``.
- **A sticky cap**: the first budgeted release of a dataset records its cap and privacy unit
  (``per``); a later spec may declare less, never more (``privfair budget --set-cap`` changes
  it, recorded), and a DP release whose spec declares no budget is charged against it.
- **A charge stays**: every entry but a ``refused`` or ``released`` one counts, whether its
  release was then published, quarantined, failed, or killed while ``reserved``: the noise
  may have been drawn. ``released`` is only for a run that failed before drawing any.
- **Composition over rows** (``spent_on``): a release's cost is added to the most any one of
  its rows has spent: in parallel across disjoint blocks of one partitioning family (a day
  inside a released month carries both), sequentially against releases of every other
  partitioning and of the whole table; the sum is in zCDP, and an (epsilon, delta) budget
  holds while OpenDP's conversion of it at the budget's delta stays within epsilon
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

from privfair.io.urls import expand, redact  # one rule for ${VAR} and for what a URL shows
from privfair.schemas.errors import PrivfairError, SpecError, StoreError

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

SCHEMA_VERSION = 2
TABLE = "privfair_ledger"
META = "privfair_ledger_meta"
CAPS = "privfair_ledger_caps"
#: Every check-and-reserve takes this one lock: two datasets may share rows (their atoms).
GLOBAL_LOCK = "privfair-ledger"
#: Entry statuses whose charge counts: all but ``refused`` (nothing ran) and ``released``
#: (the run failed before any noise was drawn).
COUNTED = ("reserved", "published", "quarantined", "failed")
STATUSES = (*COUNTED, "refused", "released")
#: Relative slack for float sums (three releases of rho r fit a budget of 3 r).
_SLACK = 1e-9


class BudgetExceeded(PrivfairError):
    """A differentially private release would spend more than its dataset's declared budget:
    nothing ran, nothing is published (the CLI exits 2)."""


class RepublishRefused(PrivfairError):
    """A release would publish rows an earlier release of its pipeline published under another
    grouping, and the spec's ``republish`` policy does not allow it (the CLI exits 2)."""


# --- URLs ----------------------------------------------------------------------------------------
#: The per-owner default: one ledger for every store, spec and pipeline of this user.
ENV_STATE = "XDG_STATE_HOME"


def default_url() -> str:
    """The data owner's own ledger on this machine: ``$XDG_STATE_HOME/privfair/ledger.sqlite``,
    else ``~/.local/state/privfair/ledger.sqlite`` (not a store's: a release through another
    store is the same owner's release of the same people)."""
    state = os.environ.get(ENV_STATE) or str(Path.home() / ".local" / "state")
    return f"sqlite:///{Path(state).expanduser().resolve() / 'privfair' / 'ledger.sqlite'}"


# --- composition -----------------------------------------------------------------------------
def composed_epsilon(rho: float, delta: float) -> float:
    """epsilon of (epsilon, delta)-DP for a total of ``rho`` zCDP, by OpenDP's conversion."""
    from privfair.components.core.accounting import epsilon_of

    return epsilon_of(float(rho), float(delta))


def cap_rho(budget: dict) -> float:
    """A budget's cap in zCDP rho: ``rho``, or the largest rho OpenDP converts to within
    (epsilon, delta)."""
    if budget.get("rho") is not None:
        return float(budget["rho"])
    from privfair.components.core.accounting import rho_budget

    return rho_budget(float(budget["epsilon"]), float(budget["delta"]))


def compose(rhos: Iterable[float], budget: dict | None, cost: float = 0.0) -> dict:
    """The account of one block: its entries' ``rhos`` composed (zCDP: summed) plus ``cost``,
    against ``budget`` (``{"rho": R}`` or ``{"epsilon": E, "delta": D}``, None: no cap).

    Returns ``{"spent": {"rho", "epsilon"}, "remaining": {"rho", "epsilon"} | None,
    "fits": bool}``; under an (epsilon, delta) budget ``remaining.rho`` is the rho left before
    OpenDP's conversion at delta reaches epsilon (``accounting.rho_budget``).
    """
    return account_of(math.fsum([*rhos, cost]), budget)


def account_of(total: float, budget: dict | None) -> dict:
    """``compose``'s account of a spent ``total`` rho."""
    if budget is None:
        return {"spent": {"rho": total, "epsilon": None}, "remaining": None, "fits": True}
    if budget.get("rho") is not None:
        cap = float(budget["rho"])
        return {
            "spent": {"rho": total, "epsilon": None},
            "remaining": {"rho": max(0.0, cap - total), "epsilon": None},
            "fits": total <= cap * (1 + _SLACK),
        }
    eps, delta = float(budget["epsilon"]), float(budget["delta"])
    cap = cap_rho(budget)
    spent_eps = composed_epsilon(total, delta)
    return {
        "spent": {"rho": total, "epsilon": spent_eps},
        "remaining": {"rho": max(0.0, cap - total), "epsilon": max(0.0, eps - spent_eps)},
        "fits": spent_eps <= eps * (1 + _SLACK),
    }


# --- partitionings and blocks ----------------------------------------------------------------
WHOLE = "*"
_STEP = {"day": 1, "week": 7}


@dataclass(frozen=True)
class Partitioning:
    """How a release cut its dataset's rows into blocks: ``kind`` ``whole`` (one block
    ``*``), ``time`` (``column`` cut by ``granularity``: a block is the ISO date its period
    starts on) or ``keys`` (``column``'s values; ``dynamic`` when read off the data).

    Releases under partitionings of one *family* (time cuts of one column, whatever the
    granularity; keys of one column) know which of their blocks share rows: a day lies in
    its week and month. Across families nothing is known.

    >>> day = Partitioning("time", "t", "day")
    >>> day.interval("2026-11-05"), Partitioning("time", "t", "month").interval("2026-11-01")
    ((20762, 20763), (20758, 20788))
    """

    kind: str = "whole"
    column: str | None = None
    granularity: str | None = None
    dynamic: bool = False

    @classmethod
    def of(cls, part: Any) -> Partitioning:
        """From a spec's ``PartitionSpec`` (None: the whole table)."""
        if part is None:
            return cls()
        if part.granularity is not None:
            return cls("time", part.column, part.granularity)
        return cls("keys", part.column, None, part.keys == "dynamic")

    @classmethod
    def parse(cls, text: str | None) -> Partitioning | None:
        """From the ledger's column (None: an entry recorded before partitionings were)."""
        if not text:
            return None
        d = json.loads(text)
        return cls(d["kind"], d.get("column"), d.get("granularity"), bool(d.get("dynamic")))

    def dumps(self) -> str:
        return json.dumps(
            {
                "kind": self.kind,
                "column": self.column,
                "granularity": self.granularity,
                "dynamic": self.dynamic,
            },
            sort_keys=True,
        )

    @property
    def family(self) -> tuple[str, str | None]:
        return (self.kind, self.column)

    def interval(self, block: str) -> tuple[int, int]:
        """A time block's days as [first, end) day ordinals since 1970-01-01."""
        from datetime import date, timedelta

        d = date.fromisoformat(block)
        first = (d - date(1970, 1, 1)).days
        if self.granularity in _STEP:
            return first, first + _STEP[self.granularity]
        nxt = (d.replace(day=28) + timedelta(days=4)).replace(day=1)
        return first, (nxt - date(1970, 1, 1)).days

    def shares_rows(self, block: str, other: Partitioning | None, other_block: str) -> bool:
        """Whether ``block`` of this partitioning and ``other_block`` of ``other`` may hold
        the same rows (always, across families or for a whole-table block)."""
        if WHOLE in (block, other_block) or other is None or other.family != self.family:
            return True
        if self.kind == "time":
            a, b = self.interval(block), other.interval(other_block)
            return a[0] < b[1] and b[0] < a[1]
        return block == other_block


def _max_load(entries: Sequence[tuple[Partitioning, str, float]], within: Any) -> float:
    """The largest sum of rho one row can carry from ``entries`` (blocks of one family, each
    (partitioning, block, rho)), over the rows ``within`` selects: a time interval, a key, or
    None (any row)."""
    if not entries:
        return 0.0
    part = entries[0][0]
    if part.kind == "time":
        spans = [(p.interval(b), r) for p, b, r in entries]
        lo, hi = within if within is not None else (-(10**9), 10**9)
        points = {lo} | {s for (s, _), _ in spans if lo < s < hi}
        return max(math.fsum(r for (s, e), r in spans if s <= x < e) for x in points)
    sums: dict[str, list[float]] = {}
    for _, b, r in entries:
        sums.setdefault(b, []).append(r)
    if within is not None:
        return math.fsum(sums.get(within, []))
    return max(math.fsum(v) for v in sums.values())


def spent_on(
    entries: Sequence[Entry], part: Partitioning, block: str, per: str = "partition"
) -> float:
    """The most rho any one row of ``block`` (of ``part``) has been charged by ``entries``
    (counted entries of overlapping datasets): the composition the ledger enforces.

    - ``per: dataset`` (a privacy unit spanning rows): every release once, whatever it read;
    - an entry on every row (a whole-table release, or one recorded without its
      partitioning) charges every row;
    - entries of ``part``'s family (time cuts of its column, keys of its column) charge the
      rows of their blocks: the largest sum over the rows of ``block`` (parallel composition
      across disjoint blocks, sequential where a day lies in a month released too);
    - entries of any other family may hold any row of ``block``: each such family adds the
      largest sum it puts on one row (a row lies in one block of each family).
    """
    by_run: dict[str, tuple[Partitioning | None, list[str], float]] = {}
    for e in entries:
        if not e.counted:
            continue
        p, blocks, _ = by_run.get(e.run_id, (Partitioning.parse(e.partitioning), [], 0.0))
        by_run[e.run_id] = (p, [*blocks, e.block], float(e.rho))  # type: ignore[arg-type]
    if per == "dataset":
        return math.fsum(r for _, _, r in by_run.values())
    everywhere = 0.0
    families: dict[tuple, list[tuple[Partitioning, str, float]]] = {}
    for p, blocks, r in by_run.values():
        if p is None or p.kind == "whole" or WHOLE in blocks:
            everywhere += r
            continue
        for b in blocks:
            families.setdefault(p.family, []).append((p, b, r))
    total = everywhere
    for fam, items in families.items():
        mine = fam == part.family and block != WHOLE
        within = (part.interval(block) if part.kind == "time" else block) if mine else None
        total += _max_load(items, within)
    return total


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
    "atoms",
    "partitioning",
)
#: Columns schema version 1 did not have (added in place when a version-1 ledger is opened).
_ADDED_IN_2 = ("atoms", "partitioning")


@dataclass(frozen=True)
class Entry:
    """One row of the ledger: one release's charge (or record) on one block of its dataset.

    ``dataset`` is the name messages show; ``atoms`` (JSON) the dataset's identity
    (``privfair.io.identity``), which the ledger matches on; ``partitioning`` (JSON,
    ``Partitioning``) how the release cut the rows; ``digest`` the release's grouping (a
    digest of its published values, ``admission.grouping_of``)."""

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
    digest: str | None
    status: str
    note: str | None
    created_at: str
    updated_at: str
    atoms: str | None = None
    partitioning: str | None = None

    @property
    def counted(self) -> bool:
        return self.status in COUNTED and self.rho is not None

    @property
    def atom_set(self) -> frozenset[str]:
        return frozenset(json.loads(self.atoms)) if self.atoms else frozenset({self.dataset})

    @property
    def cut(self) -> Partitioning | None:
        return Partitioning.parse(self.partitioning)

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


@dataclass(frozen=True)
class Cap:
    """A dataset's recorded budget: set by its first budgeted release, changed only by
    ``privfair budget --set-cap`` (``Ledger.set_cap``)."""

    atom: str
    budget: dict  # {"rho"} or {"epsilon", "delta"}
    per: str
    set_by: str
    set_at: str


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _overlapping(entries: Sequence[Entry], atoms: Iterable[str]) -> list[Entry]:
    mine = set(atoms)
    return [e for e in entries if e.atom_set & mine]


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
        self.own = False  # the owner's default ledger (manifests name it without its path)

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
                    "a PostgreSQL ledger needs the 'postgres' extra (adbc-driver-postgresql): "
                    "pip install 'privfair[postgres]'",
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
            row = cur.execute(f"SELECT value FROM {META} WHERE key = ?", ("schema",)).fetchone()
            if row is not None and str(row[0]) not in ("1", str(SCHEMA_VERSION)):
                raise StoreError(
                    self.url,
                    f"ledger schema version {row[0]}, this privfair reads {SCHEMA_VERSION}",
                )
            cur.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} ({cols})")
            if row is not None and str(row[0]) == "1":  # entries keep their dataset as atom
                for c in _ADDED_IN_2:
                    cur.execute(f"ALTER TABLE {TABLE} ADD COLUMN {c} TEXT")
                cur.execute(
                    f"UPDATE {META} SET value = ? WHERE key = ?", (str(SCHEMA_VERSION), "schema")
                )
            cur.execute(f"CREATE INDEX IF NOT EXISTS {TABLE}_key ON {TABLE} (dataset, unit)")
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {CAPS} (id {self._b.id_type}, atom TEXT, "
                "budget TEXT, per TEXT, set_by TEXT, set_at TEXT)"
            )
            if row is None:
                cur.execute(
                    f"INSERT INTO {META} (key, value) VALUES (?, ?)",
                    ("schema", str(SCHEMA_VERSION)),
                )

    @staticmethod
    def _rows(cur: Any, where: str = "", params: Sequence[Any] = ()) -> list[Entry]:
        rows = cur.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM {TABLE} {where} ORDER BY id", params
        ).fetchall()
        return [Entry(*r) for r in rows]

    @staticmethod
    def _caps(cur: Any, atoms: Iterable[str]) -> list[Cap]:
        """The current cap of each of ``atoms`` that has one (its latest record)."""
        mine = set(atoms)
        latest: dict[str, Cap] = {}
        for atom, budget, per, by, at in cur.execute(
            f"SELECT atom, budget, per, set_by, set_at FROM {CAPS} ORDER BY id"
        ).fetchall():
            if atom in mine:
                latest[atom] = Cap(atom, json.loads(budget), per, by, at)
        return list(latest.values())

    # -- the API --
    def reserve(
        self,
        *,
        dataset: str,
        atoms: Sequence[str],
        partitioning: Partitioning,
        blocks: Sequence[str],
        pipeline: str,
        version: str,
        partition: str | None,
        family: str | None,
        cost: Any | None,
        budget: dict | None,
        per: str | None,
        policy: str | None,
        unit: str = "record",
        digest: str | None = None,
    ) -> Charge:
        """Check the budget and record this release on ``blocks`` in one transaction.

        ``cost`` (``descriptor.Cost`` or None for a release that is not DP) is charged on
        every block. The budget it is checked against is the dataset's recorded cap
        (``Cap``: the first budgeted release of any of ``atoms`` records the spec's
        ``budget`` and ``per``; a later spec may declare a lower budget, never a higher one:
        ``SpecError``), composed over every release of an overlapping dataset by
        ``spent_on``. When a block cannot afford it, the attempt is recorded as ``refused``
        (it counts nothing) and ``BudgetExceeded`` names the dataset, the blocks, what is
        spent and left, and the cost."""
        blocks = list(blocks) or [WHOLE]
        run_id = uuid.uuid4().hex
        rho = float(cost.rho) if cost is not None else None
        with self._tx(GLOBAL_LOCK) as cur:  # datasets overlap by atoms: one writer at a time
            cap, per = (budget, per or "partition")
            if cost is not None:
                cap, per = self._effective_cap(cur, atoms, budget, per, pipeline)
            if per == "dataset":
                blocks = [WHOLE] if partitioning.kind == "whole" else blocks
            earlier = _overlapping(self._rows(cur, "WHERE rho IS NOT NULL"), atoms)
            accounts = {
                b: account_of(spent_on(earlier, partitioning, b, per) + (rho or 0.0), cap)
                for b in blocks
            }
            worst = max(blocks, key=lambda b: accounts[b]["spent"]["rho"])
            acc = accounts[worst]
            fits = rho is None or all(a["fits"] for a in accounts.values())
            status = "reserved" if fits else "refused"
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
                        json.dumps(cap, sort_keys=True) if cap is not None else None,
                        per,
                        policy,
                        digest,
                        status,
                        None,
                        now,
                        now,
                        json.dumps(sorted(atoms)),
                        partitioning.dumps(),
                    ),
                ).fetchone()
                ids.append(int(row[0]))
        if status == "refused":
            left = account_of(acc["spent"]["rho"] - (rho or 0.0), cap)
            raise BudgetExceeded(
                f"privacy budget of '{dataset}' exhausted on block(s) "
                f"{', '.join(b for b in blocks)}: spent {_fmt(left['spent'])} of "
                f"{_fmt(cap)}, remaining {_fmt(left['remaining'])}; this release of "
                f"'{pipeline}' costs rho={rho:.6g} (epsilon={cost.epsilon:.6g} at "
                f"delta={cost.delta:g}); nothing ran (ledger {self.url}, entry {ids[0]})"
            )
        return Charge(
            run_id, ids[0], tuple(blocks), {"block": worst, "budget": cap, "per": per, **acc}
        )

    def _effective_cap(
        self, cur: Any, atoms: Sequence[str], declared: dict | None, per: str | None, by: str
    ) -> tuple[dict | None, str]:
        """(budget, per) a DP release of ``atoms`` is checked against: the recorded cap
        (the tightest of its atoms'), recorded from ``declared`` when none is; ``per: dataset``
        wins over ``partition`` (the larger privacy unit)."""
        caps = self._caps(cur, atoms)
        new = (
            {k: declared[k] for k in ("rho", "epsilon", "delta") if declared.get(k) is not None}
            if declared is not None
            else None
        )
        if new is not None:
            for c in caps:
                if cap_rho(new) > cap_rho(c.budget) * (1 + _SLACK):
                    raise SpecError(
                        "budget",
                        f"{_fmt(new)} is above the cap {_fmt(c.budget)} recorded for this "
                        f"dataset by {c.set_by} on {c.set_at[:10]}; a spec cannot raise it "
                        "(privfair budget --set-cap, recorded in the ledger)",
                    )
            recorded = {c.atom for c in caps}
            for atom in atoms:
                if atom not in recorded:
                    self._insert_cap(cur, atom, new, per or "partition", f"pipeline '{by}'")
            caps = self._caps(cur, atoms)
        if not caps:
            return None, per or "partition"
        tight = min(caps, key=lambda c: cap_rho(c.budget))
        budget = tight.budget
        if new is not None and cap_rho(new) < cap_rho(budget):
            budget = new
        unit = (
            "dataset" if any(c.per == "dataset" for c in caps) or per == "dataset" else "partition"
        )
        return budget, unit

    def _insert_cap(self, cur: Any, atom: str, budget: dict, per: str, by: str) -> None:
        cur.execute(
            f"INSERT INTO {CAPS} (atom, budget, per, set_by, set_at) VALUES (?, ?, ?, ?, ?)",
            (atom, json.dumps(budget, sort_keys=True), per, by, _now()),
        )

    def caps(self, atoms: Iterable[str] | None = None) -> list[Cap]:
        """The current caps (of ``atoms``; every atom's without)."""
        with self._tx() as cur:
            if atoms is None:
                atoms = [r[0] for r in cur.execute(f"SELECT DISTINCT atom FROM {CAPS}").fetchall()]
            return self._caps(cur, atoms)

    def set_cap(self, atoms: Sequence[str], budget: dict, per: str, by: str) -> None:
        """Record a new cap for each of ``atoms`` (``privfair budget --set-cap``): the only
        way a cap changes, kept with who set it and when."""
        with self._tx(GLOBAL_LOCK) as cur:
            for atom in atoms:
                self._insert_cap(cur, atom, budget, per, by)

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

    def entries(
        self,
        dataset: str | None = None,
        pipeline: str | None = None,
        atoms: Iterable[str] | None = None,
    ) -> list[Entry]:
        """Every entry (of ``dataset`` / ``pipeline`` when given; of a dataset overlapping
        ``atoms``), oldest first."""
        conds, params = [], []
        for col, v in (("dataset", dataset), ("pipeline", pipeline)):
            if v is not None:
                conds.append(f"{col} = ?")
                params.append(v)
        where = f"WHERE {' AND '.join(conds)}" if conds else ""
        with self._tx() as cur:
            rows = self._rows(cur, where, params)
        return rows if atoms is None else _overlapping(rows, atoms)


def _fmt(x: dict | None) -> str:
    if not x:
        return "nothing (no budget declared)"
    parts = [f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in x.items()]
    return ", ".join(p for p in parts if not p.endswith("=None"))
