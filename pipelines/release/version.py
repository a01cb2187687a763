"""Code version of a release: the package version plus a digest of the sources the release
depends on, the shared core (``privfair.schemas``, ``privfair.components.core``) and the
algorithm's own family package, so a change to one family republishes that family's releases and no other."""

from __future__ import annotations

import hashlib
import importlib
from functools import cache
from pathlib import Path

from privfair import __version__

SHARED = ("privfair.schemas", "privfair.components.core")


def _package_dir(package: str) -> Path:
    return Path(importlib.import_module(package).__file__).resolve().parent  # type: ignore[arg-type]


@cache
def code_version(package: str) -> str:
    """``<version>+<digest>`` over the shared core and the family ``package``'s sources."""
    h = hashlib.sha256()
    # named by import path, not by file path: a wheel and a checkout give the same digest
    for name in (*SHARED, package):
        folder = _package_dir(name)
        for f in sorted(folder.rglob("*.py")):
            h.update(f"{name}/{f.relative_to(folder).as_posix()}".encode())
            h.update(f.read_bytes())
    return f"{__version__}+{h.hexdigest()[:12]}"
