"""What the owner's report measures on the input alone, in a second process beside the release.

Two parts of the owner's report rerun the algorithm on the input: the cost of protection
(``privfair.evaluation.evaluate.cost_of_protection``: the algorithm on a 75 % hold-out and two
classifiers) and the algorithm's ``input_measures`` (the generalisation family's utility
against t: the algorithm at five values of t). On Adult each costs about as much as the
release's own protection. Both depend on the spec and the input only, so a run starts them
right after ingest (:meth:`Beside.start`) in a fresh interpreter (``python -m privfair.release.beside``,
fed the input's rerun sample through a pipe) on the machine's second core, and collects them
once validation has passed; a candidate that fails validation never waits for them
(:meth:`Beside.close` kills the process).

The records are the ones the run would have measured itself: the same rows (sampled here with
``privfair.components.core.inputs.RERUN_ROWS``, the one cap and seed of every rerun, before they are
sent), the same code, the same seeds; the trade-off grid is looked up here, where the caller's
settings are. A second process is used only where it can gain: something to measure (a
replayable algorithm, or one with ``input_measures``), an input of at least
``BACKGROUND_ROWS`` rows, the in-process engine (``local``: a Spark session is not started
twice) and a second core. Anything else, and a second process that cannot start or dies, is
measured in this process as before.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
from typing import Any

import pyarrow as pa

#: below this many input rows the reruns cost less than a second interpreter's start
BACKGROUND_ROWS = 20_000


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _measure(plan_spec, algo, table: pa.Table, sample: dict | None, what: str):
    """One record, measured on the rerun rows ``table``: ``cost`` (the cost of protection
    without its grid) or ``input`` (the algorithm's ``input_measures``)."""
    if what == "cost":
        from privfair.evaluation.evaluate import holdout_cost

        return holdout_cost(plan_spec, table, sample)
    return algo.measure_input(plan_spec.params, table)


def failed_measurement(e: BaseException) -> dict:
    """The record of a side measurement that raised: ``status: failed``, the ``error`` (its type
    and first line) and the ``reason`` the report shows.

    >>> failed_measurement(ValueError("bad\\nvalue"))["error"]
    'ValueError: bad'
    """
    lines = str(e).strip().splitlines()
    error = f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__
    return {
        "status": "failed",
        "error": error,
        "reason": f"the measurement failed ({error}); the release does not depend on it",
    }


class Beside:
    """The input-only measurements of one run: measuring in a second process, or to be
    measured here on demand.

    Parameters
    ----------
    plan : privfair.run.flow.ReleasePlan
    table : pyarrow.Table
        The ingested input.
    input_fingerprint : str
        The ingest's fingerprint (the grid of a matching ``privfair evaluate`` is shown).

    Examples
    --------
    >>> from privfair.spec.catalogue import load_spec
    >>> from privfair.run.flow import ReleasePlan, ingest
    >>> from privfair.spec.settings import DEFAULT_SPECS_DIR
    >>> spec = load_spec(DEFAULT_SPECS_DIR / "german_dmondrian.yaml")
    >>> ing = ingest(spec)
    >>> with Beside.start(ReleasePlan.of(spec, "/tmp/store"), ing.table, "") as b:
    ...     sorted(b.input_measures()), b.cost_of_protection()["status"]
    (['utility_against_t'], 'measured')
    """

    def __init__(self, plan, table: pa.Table, input_fingerprint: str | None) -> None:
        self.plan = plan
        self.fingerprint = input_fingerprint
        self._table = table
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._reply: bytes | None = None
        self._records: dict[str, Any] | None = None  # what the second process sent
        self._done: dict[str, Any] = {}
        self._rows: tuple[pa.Table, dict | None] | None = None

    @property
    def _what(self) -> tuple[str, ...]:
        algo = self.plan.algo
        return (("cost",) if algo.replayable else ()) + (
            ("input",) if algo.input_measures is not None else ()
        )

    @classmethod
    def start(cls, plan, table: pa.Table, input_fingerprint: str | None) -> Beside:
        """Its measurements, started in a second process where that gains."""
        beside = cls(plan, table, input_fingerprint)
        if beside._worth_a_process():
            beside._spawn()
        return beside

    @property
    def background(self) -> bool:
        """Whether a second process is measuring (or measured) them."""
        return self._proc is not None or self._records is not None

    def _worth_a_process(self) -> bool:
        return (
            bool(self._what)
            and self._table.num_rows >= BACKGROUND_ROWS
            and self.plan.spec.execution.engine == "local"
            and _cores() >= 2
        )

    def _rerun_rows(self) -> tuple[pa.Table, dict | None]:
        """The rows every rerun reads and the record of their sample (drawn once)."""
        if self._rows is None:
            from privfair.evaluation.evaluate import cost_sample, measures_cost

            # a report's cost reads no row: none is drawn (its rows may stay on a cluster)
            draw = measures_cost(self.plan.algo) or "input" in self._what
            self._rows = cost_sample(self._table, draw=draw)
        return self._rows

    def _spawn(self) -> None:
        table, sample = self._rerun_rows()
        payload = pickle.dumps(
            (self.plan.spec, table, sample, self._what), protocol=pickle.HIGHEST_PROTOCOL
        )
        env = dict(os.environ)
        # the child imports this code from where this process found it, installed or not
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "privfair.release.beside"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
        except OSError:
            return  # measured here when asked
        self._proc = proc

        def talk() -> None:
            try:
                self._reply = proc.communicate(payload)[0]
            except (OSError, ValueError):  # killed by close() while talking
                self._reply = None

        self._thread = threading.Thread(target=talk, name="privfair-beside", daemon=True)
        self._thread.start()

    def _record(self, what: str):
        if what in self._done:
            return self._done[what]
        if self._proc is not None:
            self._records = self._collect()
        ok, value = (self._records or {}).get(what, (False, None))
        if not ok:
            # no second process, or it died or failed: measured here, so that what the run
            # records or raises is what it did before (a failure the second process alone
            # meets, such as a family it cannot import, costs a second measurement, no more)
            table, sample = self._rerun_rows()
            value = _measure(self.plan.spec, self.plan.algo, table, sample, what)
        self._done[what] = value
        return value

    def cost_of_protection(self) -> dict:
        """The manifest's ``cost_of_protection`` record (``evaluate.cost_of_protection``'s) of a
        replayable algorithm. A measurement beside the release, never a condition of it: one
        that fails (here or in the second process) is recorded as ``status: failed`` with the
        ``error``, and the release goes on."""
        from privfair.evaluation.evaluate import find_evaluation

        try:
            out = dict(self._record("cost"))
        except Exception as e:  # noqa: BLE001  (a side measurement never fails the release)
            self._done["cost"] = out = failed_measurement(e)
        try:
            out["grid"] = find_evaluation(self.plan.spec, self.fingerprint)
        except Exception:  # noqa: BLE001  (an unreadable evaluation: no trade-off plot)
            out["grid"] = None
        return out

    def input_measures(self) -> dict | None:
        """The algorithm's ``input_measures`` (None where it has none, or where measuring them
        fails: the report's figure then measures them itself and says why it could not, as
        before)."""
        if self.plan.algo.input_measures is None:
            return None
        try:
            return self._record("input")
        except Exception:  # noqa: BLE001  (the report's figure measures it and says why not)
            return None

    def _collect(self) -> dict | None:
        assert self._thread is not None and self._proc is not None
        self._thread.join()
        reply, self._proc = self._reply, None
        if not reply:
            return None
        return pickle.loads(reply)

    def close(self) -> None:
        """Stop measurements still running (a run that failed or was quarantined)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Beside:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _main() -> None:
    """The second process: read (spec, rerun rows, sample record, what) from stdin, write
    ``{what: (True, record) or (False, exception)}`` to stdout, both pickled (the parent
    measures a failed one again itself)."""
    payload = sys.stdin.buffer.read()
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # stdout carries the reply alone
    import privfair  # noqa: F401  (its import hides pyspark's connect client, as in the parent)
    from privfair.components.core.engine import make_engine, using
    from privfair.spec.catalogue import algorithm_of

    spec, table, sample, what = pickle.loads(payload)
    algo = algorithm_of(spec)
    engine = make_engine("local", None, spec.execution.workers)
    replies: dict[str, tuple[bool, Any]] = {}
    try:
        with using(engine):
            for w in what:
                try:
                    replies[w] = (True, _measure(spec, algo, table, sample, w))
                except Exception as e:  # noqa: BLE001  (the parent measures it again)
                    replies[w] = (False, e)
    finally:
        engine.close()
    for w, reply in replies.items():
        try:
            pickle.dumps(reply)
        except Exception:  # noqa: BLE001  (an exception that does not pickle)
            replies[w] = (False, RuntimeError(f"{type(reply[1]).__name__}: {reply[1]}"))
    out.write(pickle.dumps(replies))
    out.flush()


if __name__ == "__main__":
    from privfair.exits import leave

    _main()
    leave(0)  # the parent waits for this exit: no last collections
