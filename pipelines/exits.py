"""How a privfair process ends: its exit codes, and ``leave``.

=====  =====================================================================
code   meaning
=====  =====================================================================
0      done (published, or nothing to do)
1      a guarantee failed: nothing was published, the candidate is quarantined
2      bad input, spec, store or environment (a missing extra included)
3      an internal error: one line naming the phase and the log (``crashlog``)
=====  =====================================================================
"""

from __future__ import annotations

import sys
from typing import NoReturn

__all__ = ["DONE", "GUARANTEE_FAILED", "BAD_INPUT", "INTERNAL_ERROR", "leave"]

DONE, GUARANTEE_FAILED, BAD_INPUT, INTERNAL_ERROR = 0, 1, 2, 3


def leave(code: int | None) -> NoReturn:
    """End the ``privfair`` process with ``code``, skipping the interpreter's last garbage
    collections.

    At exit CPython collects cyclic garbage again and again while it clears the modules. With
    Great Expectations, SciPy and pandas loaded that costs ~0.9 s of one core (of the 2 s a run
    may spend beyond its algorithm on Adult), spent on objects the operating system takes back
    anyway. ``gc.freeze`` moves every object out of the collector's sight first: the exit
    handlers still run (temporary folders, worker pools, a Spark gateway) and objects
    outside cycles are still freed, but nothing is left for the collector to do. Every file a
    command writes is closed before it returns: a release is published by a rename."""
    import gc

    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()
    sys.exit(code)
