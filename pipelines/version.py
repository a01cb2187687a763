"""Code version of a release: the package version plus a digest of the sources the release
depends on, the shared core (``schemas``, ``components/core``) and the algorithm's own family
package, so a change to one family republishes that family's releases and no other."""

from __future__ import annotations

import hashlib
import importlib
from functools import cache
from pathlib import Path

from pipelines import __version__

_ROOT = Path(__file__).resolve().parents[1]
SHARED = (_ROOT / "schemas", _ROOT / "components" / "core")


def _package_dir(package: str) -> Path:
    return Path(importlib.import_module(package).__file__).resolve().parent  # type: ignore[arg-type]


@cache
def code_version(package: str) -> str:
    """``<version>+<digest>`` over the shared core and the family ``package``'s sources."""
    h = hashlib.sha256()
    for folder in (*SHARED, _package_dir(package)):
        for f in sorted(folder.rglob("*.py")):
            rel = (
                f.relative_to(_ROOT)
                if f.is_relative_to(_ROOT)
                else Path(folder.name) / f.relative_to(folder)
            )
            h.update(rel.as_posix().encode())
            h.update(f.read_bytes())
    return f"{__version__}+{h.hexdigest()[:12]}"
