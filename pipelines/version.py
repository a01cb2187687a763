"""Code version: the package version plus a digest of the algorithm and schema sources, so a
change to any of them yields a new release version even without a version bump."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from pipelines import __version__

_ROOT = Path(__file__).resolve().parents[1]


@lru_cache(maxsize=1)
def code_version() -> str:
    h = hashlib.sha256()
    for pkg in ("schemas", "components"):
        for f in sorted((_ROOT / pkg).rglob("*.py")):
            h.update(f.relative_to(_ROOT).as_posix().encode())
            h.update(f.read_bytes())
    return f"{__version__}+{h.hexdigest()[:12]}"
