"""How privfair imports the large packages its validation and measurements load.

Importing Great Expectations or scikit-learn makes millions of objects (classes, pydantic
models, registries) that live as long as the process. Their allocations trigger collections,
and each older-generation collection walks every one of them again, finding almost nothing to
free. With the collector paused during the import (``collector_paused``), measured after
pandas, NumPy and pyarrow are loaded: Great Expectations and ``privfair.validation.expectations`` in
~2.0 s instead of ~2.7 s, scikit-learn's classifiers in ~0.7 s instead of ~0.85 s. The few
cycles an import leaves behind are collected after it, by the next collection the process
makes.

Two more ways to keep an import short, for the packages' callers to apply
(``privfair.validation.gx_import`` does, for Great Expectations): ``unimportable`` keeps optional
integrations a package probes for out of its import, and ``defer`` binds a module at once and
runs it at its first read.

Only for imports: work that makes garbage must run with the collector on.

>>> import gc
>>> with collector_paused():
...     import json
...     gc.isenabled()
False
>>> gc.isenabled()
True
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import sys
from collections.abc import Iterable, Iterator

__all__ = ["collector_paused", "defer", "unimportable"]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off while the block runs, then as it was (a caller that had turned
    it off keeps it off)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextlib.contextmanager
def unimportable(names: Iterable[str]) -> Iterator[None]:
    """While the block runs, ``import name`` (and of its submodules) raises ``ImportError`` for
    each of ``names`` not imported yet, as if it were not installed; afterwards it imports as
    usual. A module already in ``sys.modules`` is left alone.

    >>> with unimportable(["a_module_nobody_has_imported"]):
    ...     try:
    ...         import a_module_nobody_has_imported
    ...     except ImportError:
    ...         print("hidden")
    hidden
    >>> "a_module_nobody_has_imported" in sys.modules
    False
    """
    hidden = [name for name in names if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # the import system's "absent"
    try:
        yield
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def defer(names: Iterable[str]) -> None:
    """Register each of ``names`` that is installed and not imported yet as a lazy module
    (``importlib.util.LazyLoader``): ``import name`` returns it at once, and its code runs
    when one of its attributes is first read, which an import that only binds the name never
    does. A submodule is also bound on its package, as an import would. Python 3.11's loader
    takes no lock for that first read (later versions do): only for a process whose threads
    do not import.

    >>> defer(["json.tool"])
    >>> import json.tool
    >>> callable(json.tool.main)  # the first read runs the module
    True
    """
    for name in names:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)  # imports the packages above it
        if spec is None or spec.loader is None:
            continue
        spec.loader = importlib.util.LazyLoader(spec.loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
