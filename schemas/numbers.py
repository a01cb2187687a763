"""One rule for every number a spec gives: it is finite.

A budget of ``epsilon: .inf`` or a bound of ``t: nan`` is no setting a reader can check (an
infinite budget spins the noise calibration forever; NaN compares false with everything, so a
check against it can never fail). Parameter models (``privfair.components.core.descriptor.Params``) and
guarantee models (``privfair.schemas.contracts.Guarantee``) run every field through ``finite``.

>>> finite(1.5), finite([1, 2.0]), finite({"a": (3.0,)})
(1.5, [1, 2.0], {'a': (3.0,)})
>>> finite(float("inf"))
Traceback (most recent call last):
...
ValueError: must be a finite number, not inf
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["finite"]


def finite(value: Any) -> Any:
    """``value`` unchanged when every float in it (nested lists, tuples, mappings and models
    included) is finite; ``ValueError`` naming the first one that is not."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be a finite number, not {value}")
    if isinstance(value, Mapping):
        for v in value.values():
            finite(v)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            finite(v)
    elif hasattr(value, "model_dump"):
        finite(value.model_dump())
    return value
