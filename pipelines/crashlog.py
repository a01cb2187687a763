"""What ``privfair`` does with an error it did not raise on purpose (exit 3), and with an
optional package that is not installed (exit 2).

An exception that is not a ``PrivfairError`` is a bug or a broken environment, never a verdict:
the command prints one line naming the phase it happened in (``ingest``, ``protect (mdav)``,
``stage › validate``, ``publish``..., the phases of ``privfair.components.core.progress``) and the log
file that holds the full traceback, and exits 3. The log is the data owner's, beside the
ledger: ``$XDG_STATE_HOME/privfair/logs/<UTC time>-<pid>.log`` (else
``~/.local/state/privfair/logs``; a temporary file when that cannot be written), mode 0600 in
a 0700 folder, never inside a store or a shareable copy. A release flow that meets one removes
its staging candidate (``privfair.run.flow.stage``, ``publish``): nothing is published or
quarantined.

An optional package that is missing (``ModuleNotFoundError`` of an ADBC driver, pyiceberg,
deltalake, pyspark) is the environment, not a bug: exit 2 naming the ``pip install
'privfair[EXTRA]'`` that installs it (``privfair.extras.missing_extra``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import sys
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path

#: the optional packages a spec may need, by top-level module: (the extra that installs it,
#: what it serves); the extras are pyproject.toml's [project.optional-dependencies]
SEP = " › "  # between a phase and its sub-phase, as the progress lines show them


# --- the phase an error happened in ---------------------------------------------------------
_ATTR = "_privfair_phase"


class _Discard:
    """A stream that keeps nothing: the reporter of a command whose progress is not shown,
    which only tracks the phases."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


class Trail:
    """Which phase an error left (``phase_of``): each ``privfair.components.core.progress`` phase an
    exception passes through writes its path on the exception, the innermost first; ``last``
    is the path of the last phase begun (for an error between phases)."""

    def __init__(self) -> None:
        self.last: str | None = None
        self.began: list[str] = []

    @contextlib.contextmanager
    def watching(self, reporter) -> Iterator[None]:
        """Track the phases of ``reporter`` (the command's, or None when progress is not
        shown: then a reporter writing nowhere is active while the block runs)."""
        from privfair.components.core import progress

        with contextlib.ExitStack() as stack:
            if reporter is None:
                reporter = stack.enter_context(
                    progress.reporting(_Discard(), enabled=True, ansi=False)
                )
            self._hook(reporter)
            yield

    def _hook(self, r) -> None:
        begin, end = r.begin, r.end

        def began(name: str):
            ph = begin(name)
            self.last = SEP.join(p.name for p in r.stack)
            self.began.append(ph.name)
            return ph

        def ended(ph, failed: bool) -> None:
            if failed:
                exc = sys.exc_info()[1]
                if exc is not None and getattr(exc, _ATTR, None) is None:
                    with contextlib.suppress(AttributeError, TypeError):
                        setattr(exc, _ATTR, SEP.join(p.name for p in r.stack))
            end(ph, failed)

        r.begin, r.end = began, ended

    def phase_of(self, e: BaseException) -> str | None:
        """The phase ``e`` (or the error it was raised from) left, else None."""
        seen: set[int] = set()
        while e is not None and id(e) not in seen:
            seen.add(id(e))
            where = getattr(e, _ATTR, None)
            if where:
                return where
            e = e.__cause__ or e.__context__  # type: ignore[assignment]
        return None

    def where(self, e: BaseException, command: str) -> str:
        """``phase 'protect (mdav)'`` or, outside any phase, where the command was."""
        phase = self.phase_of(e)
        if phase is not None:
            return f"phase '{phase}' of privfair {command}"
        if self.last is not None:
            return f"privfair {command}, after phase '{self.last}'"
        return f"privfair {command}, before its first phase"


# --- the log ---------------------------------------------------------------------------------
def log_dir() -> Path:
    """``$XDG_STATE_HOME/privfair/logs`` (else ``~/.local/state/privfair/logs``): the data
    owner's, beside the ledger (``privfair.budget.ledger.default_url``), in no store."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state).expanduser() / "privfair" / "logs"


def _open_new(folder: Path, stem: str):
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for i in range(1000):
        path = folder / (f"{stem}.log" if i == 0 else f"{stem}-{i}.log")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        return path, fd
    raise FileExistsError(str(folder / f"{stem}.log"))


def _redacted(argv: list[str]) -> list[str]:
    from privfair.io.urls import redact

    return [redact(a) if "://" in a else a for a in argv]


def write_log(e: BaseException, where: str, argv: list[str]) -> Path | None:
    """Write the full traceback of ``e`` to a new log file (mode 0600); its path, or None when
    no file can be written."""
    from privfair import __version__

    now = dt.datetime.now(dt.UTC)
    text = (
        f"privfair {__version__}: internal error in {where}\n"
        f"time: {now.isoformat(timespec='seconds')}\n"
        f"command: privfair {' '.join(_redacted(argv))}\n"
        f"python: {sys.version.split()[0]} on {platform.platform()}\n\n"
        + "".join(traceback.format_exception(e))
    )
    stem = f"{now:%Y%m%dT%H%M%SZ}-{os.getpid()}"
    for folder in (log_dir(), Path(tempfile.gettempdir()) / f"privfair-logs-{os.getuid()}"):
        try:
            path, fd = _open_new(folder, stem)
        except OSError:
            continue
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError:
            continue
        return path
    return None


def _summary(e: BaseException, limit: int = 240) -> str:
    text = " ".join(str(e).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def report(e: BaseException, trail: Trail, command: str, argv: list[str]) -> str:
    """The one line ``privfair`` prints for an internal error ``e`` (its log written)."""
    where = trail.where(e, command)
    log = write_log(e, where, argv)
    if command == "run":
        outcome = (
            "nothing was published or quarantined"
            if "publish" not in trail.began
            else "the release may have been published: see privfair releases"
        )
    else:
        outcome = "nothing was changed" if command in ("validate", "verify") else ""
    tail = f"; {outcome}" if outcome else ""
    if log is None:
        traceback.print_exception(e, file=sys.stderr)
        return f"privfair: internal error in {where}: {_summary(e)}{tail}; no log could be written"
    return f"privfair: internal error in {where}: {_summary(e)}{tail}; traceback in {log}"
