"""The report's cost of protection, measured in a second process while the release is built.

The cost of protection (``pipelines.evaluate.cost_of_protection``) runs the algorithm again on
a 75 % hold-out and fits two classifiers: on Adult about as long as the release's own
protection. It depends only on the spec and the input, so a run starts it right after ingest
(:meth:`PendingCost.start`) in a fresh interpreter (``python -m pipelines.cost``, fed the
sampled input through a pipe) on the machine's second core, and collects it once validation has
passed (:meth:`PendingCost.result`); a candidate that fails validation never waits for it
(:meth:`PendingCost.close` kills it).

The record is the one the run would have measured itself: the same rows (sampled here, before
they are sent), the same code, the same seed; only the trade-off grid is looked up here, where
the caller's settings are. The second process is used only where it can gain: an algorithm
that is replayable, an input of at least ``BACKGROUND_ROWS`` rows, the in-process engine
(``local``: a Spark session is not started twice), and a machine with a second core. Anything
else, and a second process that cannot start or dies, measures in this process as before.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
from typing import Any

import pyarrow as pa

#: below this many input rows the hold-out costs less than a second interpreter's start
BACKGROUND_ROWS = 20_000


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class PendingCost:
    """The cost of protection of one run: measuring beside it, or to be measured on demand.

    Parameters
    ----------
    plan : pipelines.flow.ReleasePlan
    table : pyarrow.Table
        The ingested input.
    input_fingerprint : str
        The ingest's fingerprint (the grid of a matching ``privfair evaluate`` is shown).
    """

    def __init__(self, plan, table: pa.Table, input_fingerprint: str | None) -> None:
        self.plan = plan
        self.fingerprint = input_fingerprint
        self._table = table
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._reply: tuple[bytes, bytes] | None = None
        self._record: dict | None = None

    @classmethod
    def start(cls, plan, table: pa.Table, input_fingerprint: str | None) -> PendingCost:
        """A pending cost, its measurement started in a second process where that gains."""
        pending = cls(plan, table, input_fingerprint)
        if pending._worth_a_process():
            pending._spawn()
        return pending

    @property
    def background(self) -> bool:
        """Whether a second process measures it."""
        return self._proc is not None

    def _worth_a_process(self) -> bool:
        ex = self.plan.spec.execution
        return (
            self.plan.algo.replayable
            and self._table.num_rows >= BACKGROUND_ROWS
            and ex.engine == "local"
            and _cores() >= 2
        )

    def _spawn(self) -> None:
        from pipelines.evaluate import cost_sample

        sample_table, sample = cost_sample(self._table)
        ex = self.plan.spec.execution
        payload = pickle.dumps(
            (self.plan.spec, sample_table, sample, ex.workers),
            protocol=pickle.HIGHEST_PROTOCOL,
        )
        env = dict(os.environ)
        # the child imports this code from where this process found it, installed or not
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "pipelines.cost"],
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
                self._reply = proc.communicate(payload)
            except (OSError, ValueError):  # killed by close() while talking
                self._reply = None

        self._thread = threading.Thread(target=talk, name="privfair-cost", daemon=True)
        self._thread.start()

    def result(self) -> dict:
        """The manifest's ``cost_of_protection`` record (``evaluate.cost_of_protection``'s),
        waiting for the second process if one measures it."""
        if self._record is not None:
            return self._record
        from pipelines.evaluate import cost_sample, find_evaluation, holdout_cost

        out = self._collect() if self._proc is not None else None
        if out is None:  # no second process, or it died: measured here
            table, sample = cost_sample(self._table)
            out = holdout_cost(self.plan.spec, table, sample)
        out["grid"] = find_evaluation(self.plan.spec, self.fingerprint)
        self._record = out
        return out

    def _collect(self) -> dict | None:
        assert self._thread is not None and self._proc is not None
        self._thread.join()
        reply, self._proc = self._reply, None
        if reply is None or not reply[0]:
            return None
        ok, value = pickle.loads(reply[0])
        if not ok:
            raise value  # what the measurement would have raised here
        return value

    def close(self) -> None:
        """Stop a measurement still running (a run that failed or was quarantined)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> PendingCost:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _main() -> None:
    """The second process: read (spec, sampled input, sample record, workers) from stdin, write
    ``(True, record)`` or ``(False, exception)`` to stdout, both pickled."""
    payload = sys.stdin.buffer.read()
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # stdout carries the reply alone
    import pipelines  # noqa: F401  (its import hides pyspark's connect client, as in the parent)
    from components.core.engine import make_engine, using
    from pipelines.evaluate import holdout_cost

    spec, table, sample, workers = pickle.loads(payload)
    reply: tuple[bool, Any]
    try:
        engine = make_engine("local", None, workers)
        try:
            with using(engine):
                reply = (True, holdout_cost(spec, table, sample))
        finally:
            engine.close()
    except Exception as e:  # noqa: BLE001  (handed to the parent, which raises it)
        reply = (False, e)
    try:
        data = pickle.dumps(reply)
    except Exception as e:  # noqa: BLE001  (an exception that does not pickle)
        data = pickle.dumps((False, RuntimeError(f"{type(e).__name__}: {reply[1]}")))
    out.write(data)
    out.flush()


if __name__ == "__main__":
    _main()
