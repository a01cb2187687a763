"""Whether a differentially private mechanism has read the private records in this process.

A DP release's charge is reserved before its mechanism runs and stays whatever happens next,
because noise may have been drawn. Only a run that failed *before* any mechanism read the
records may give its charge back: the mechanism's one door to the records (the synthesis
family's ``Compositor``) calls ``opened()`` before the first read, and the release flow
compares ``count()`` before and after (``privfair.budget.admission``).

>>> before = count()
>>> opened()
>>> count() > before
True
"""

from __future__ import annotations

import threading

__all__ = ["opened", "count"]

_lock = threading.Lock()
_opened = 0


def opened() -> None:
    """Record that a DP mechanism is about to read the private records."""
    global _opened
    with _lock:
        _opened += 1


def count() -> int:
    """How many times a mechanism was opened on private records in this process."""
    return _opened
