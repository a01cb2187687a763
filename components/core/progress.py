"""Progress of a long command on stderr: phase names with their elapsed time, and a bar for
loops over groups, blocks, marginals or folds.

Library code reports unconditionally (``phase``, ``bar``); nothing is written unless a
``Reporter`` is active (``reporting``), which the CLI starts only when stderr is a terminal (or
with ``--progress``; ``--quiet`` or ``PRIVFAIR_PROGRESS=0`` silence it). Without one, ``phase``
and ``bar`` cost a context-variable lookup, so a loop may report every iteration. Progress is
never written to stdout: scripts parse what the commands print there.

On a terminal the current phase is one line rewritten in place (its bar, count and elapsed
time, at most ten times a second) and every finished phase leaves a line ``✓ name  1.2 s``
(``✗`` when it failed); elsewhere (``--progress`` into a log) each phase prints one plain line
when it ends and a bar one line per tenth.

>>> import io
>>> out = io.StringIO()
>>> with reporting(out, enabled=True, ansi=False, clock=iter(range(100)).__next__):
...     with phase("protect") as p:
...         with bar(4, "groups") as b:
...             for _ in range(4):
...                 b.advance()
...         p.note("4 groups")
>>> print(out.getvalue(), end="")
  protect: groups 1/4 (25%)
  protect: groups 2/4 (50%)
  protect: groups 3/4 (75%)
  protect: groups 4/4 (100%)
  ✓ protect  5.0 s  4 groups
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import IO, TypeVar

T = TypeVar("T")

ENV = "PRIVFAIR_PROGRESS"  # "0": never; "1": also when stderr is not a terminal
BAR_WIDTH = 24
REFRESH_S = 0.1  # a terminal line is rewritten at most this often
TICK_S = 0.5  # ... and at least this often (the elapsed time runs in a phase with no loop)

_active: ContextVar[Reporter | None] = ContextVar("privfair_progress", default=None)


def _seconds(s: float) -> str:
    """``1.2 s`` under a minute, ``1 min 05 s`` above.

    >>> _seconds(1.234), _seconds(65.2)
    ('1.2 s', '1 min 05 s')
    """
    if s < 60:
        return f"{s:.1f} s"
    return f"{int(s // 60)} min {int(s % 60):02d} s"


class Phase:
    """One named step; ``note`` adds a detail to its closing line (``1000 rows``)."""

    def __init__(self, name: str, started: float, depth: int) -> None:
        self.name, self.started, self.depth = name, started, depth
        self.detail = ""
        self.live = ""  # the bar text while a loop runs
        self.opened = False  # a line was written for it (it has sub-phases)

    def note(self, detail: str) -> None:
        self.detail = detail


class _NoPhase(Phase):
    def __init__(self) -> None:
        super().__init__("", 0.0, 0)


class Bar:
    """Progress of a loop of ``total`` steps in the current phase; ``update`` (steps done) or
    ``advance`` (one more). Renders at most every ``REFRESH_S`` on a terminal."""

    def __init__(self, reporter: Reporter | None, total: int, unit: str) -> None:
        self.reporter, self.total, self.unit = reporter, max(int(total), 0), unit
        self.done = 0
        self._last = -1.0
        self._tenth = 0  # a plain log gets a line per tenth done, none for 0 %

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n)

    def update(self, done: int) -> None:
        self.done = min(int(done), self.total) if self.total else int(done)
        r = self.reporter
        if r is None:
            return
        now = r.clock()
        if r.ansi:
            if now - self._last >= REFRESH_S or self.done == self.total:
                self._last = now
                r._draw(self.text(now))
        elif self.total:
            tenth = 10 * self.done // self.total
            if tenth > self._tenth:
                self._tenth = tenth
                r._line(f"{r._path()}: {self.text(now, plain=True)}")

    def text(self, now: float, plain: bool = False) -> str:
        pct = self.done / self.total if self.total else 0.0
        count = f"{self.done}/{self.total}" if self.total else str(self.done)
        if plain:
            return f"{self.unit} {count} ({pct:.0%})"
        full = int(round(pct * BAR_WIDTH))
        bar = "█" * full + "░" * (BAR_WIDTH - full)
        return f"[{bar}] {pct:4.0%}  {count} {self.unit}"

    def close(self) -> None:
        """The loop is over: the live line goes back to the phase alone."""
        if self.reporter is not None and self.reporter.ansi:
            self.reporter._draw("…")

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Reporter:
    """Writes phases and bars to ``stream`` (stderr); ``ansi`` rewrites the live line in
    place (a terminal), else plain lines. ``clock`` is injectable for tests."""

    def __init__(
        self, stream: IO[str], ansi: bool = True, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stream, self.ansi, self.clock = stream, ansi, clock
        self.stack: list[Phase] = []
        self._live = False
        self._bar_text = "…"
        # the ticker thread and the reporting thread both write: one line at a time
        self._lock = threading.RLock()
        self._stop = threading.Event()

    def _path(self) -> str:
        return "  " + " › ".join(p.name for p in self.stack)

    def _write(self, text: str) -> None:
        with self._lock:
            try:
                self.stream.write(text)
                self.stream.flush()
            except (OSError, ValueError):  # a closed or broken stderr never fails a release
                pass

    def _tick(self) -> None:
        """Redraw the live line every ``TICK_S`` so its elapsed time runs (terminal only)."""
        while not self._stop.wait(TICK_S):
            with self._lock:
                if self.stack:
                    self._draw(self._bar_text)

    def _line(self, text: str) -> None:
        """A permanent line (clearing the live one first on a terminal)."""
        self._write(("\r\x1b[K" if self.ansi and self._live else "") + text + "\n")
        self._live = False

    def _draw(self, bar_text: str) -> None:
        """Rewrite the live line: the current phase path, its bar, its elapsed time."""
        with self._lock:
            self._bar_text = bar_text
            if not self.stack:
                return
            top = self.stack[-1]
            self._draw_locked(top, bar_text)

    def _draw_locked(self, top: Phase, bar_text: str) -> None:
        elapsed = _seconds(self.clock() - top.started)
        text = f"\x1b[1m▸\x1b[0m{self._path()[1:]}  {bar_text}  \x1b[2m{elapsed}\x1b[0m"
        self._write("\r\x1b[K" + text)
        self._live = True

    def begin(self, name: str) -> Phase:
        with self._lock:
            if self.stack and not self.stack[-1].opened and self.ansi:
                parent = self.stack[-1]  # its sub-phases are listed below its name
                parent.opened = True
                self._line("  " * parent.depth + f"  {parent.name}")
            ph = Phase(name, self.clock(), len(self.stack))
            self.stack.append(ph)
            if self.ansi:
                self._draw("…")
            return ph

    def end(self, ph: Phase, failed: bool) -> None:
        with self._lock:
            elapsed = _seconds(self.clock() - ph.started)
            mark = "✗" if failed else "✓"
            if self.ansi:
                colour = "\x1b[31m" if failed else "\x1b[32m"
                mark = f"{colour}{mark}\x1b[0m"
                elapsed = f"\x1b[2m{elapsed}\x1b[0m"
            detail = f"  {ph.detail}" if ph.detail else ""
            self._line("  " * ph.depth + f"  {mark} {ph.name}  {elapsed}{detail}")
            self.stack.remove(ph)
            if self.ansi and self.stack:
                self._draw("…")


@contextlib.contextmanager
def phase(name: str) -> Iterator[Phase]:
    """A named step of the current command (``ingest``, ``protect``, ``validate``...), timed
    and shown while it runs; a no-op without an active reporter."""
    r = _active.get()
    if r is None:
        yield _NoPhase()
        return
    ph = r.begin(name)
    failed = True
    try:
        yield ph
        failed = False
    finally:
        r.end(ph, failed)


def bar(total: int, unit: str) -> Bar:
    """A bar for a loop of ``total`` steps of ``unit`` (groups, rows, marginals, folds)."""
    return Bar(_active.get(), total, unit)


def track(items: Iterable[T], total: int, unit: str) -> Iterator[T]:
    """``items`` unchanged, advancing a bar of ``total`` ``unit`` per item."""
    with bar(total, unit) as b:
        for item in items:
            yield item
            b.advance()


def wanted(stream: IO[str], flag: bool | None = None) -> bool:
    """Whether to show progress on ``stream``: ``flag`` (``--progress`` True, ``--quiet``
    False) first, then ``PRIVFAIR_PROGRESS`` (``0``/``1``), else only on a terminal.

    >>> import io
    >>> wanted(io.StringIO()), wanted(io.StringIO(), True)
    (False, True)
    """
    if flag is not None:
        return flag
    env = os.environ.get(ENV, "").strip()
    if env in ("0", "1"):
        return env == "1"
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@contextlib.contextmanager
def reporting(
    stream: IO[str] | None = None,
    enabled: bool | None = None,
    ansi: bool | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Reporter | None]:
    """Show progress on ``stream`` (stderr) while the block runs, if ``wanted``; ``ansi``
    defaults to whether the stream is a terminal (a line rewritten in place)."""
    stream = stream if stream is not None else sys.stderr
    if not wanted(stream, enabled):
        yield None
        return
    if ansi is None:
        isatty = getattr(stream, "isatty", None)
        ansi = bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"
    r = Reporter(stream, ansi, clock)
    token = _active.set(r)
    ticker = threading.Thread(target=r._tick, name="privfair-progress", daemon=True)
    if ansi:
        ticker.start()
    try:
        yield r
    finally:
        _active.reset(token)
        r._stop.set()
        if ansi:
            ticker.join()
        if r._live:
            r._write("\r\x1b[K")
