"""Discovery of algorithm families: nothing here names one.

A family is found in two ways, and both end in the same ``FAMILY`` object
(``privfair.components.core.descriptor.Family``):

- a sub-package of ``components`` (other than ``core``) that exports ``FAMILY``: adding a folder
  is enough for privfair's own families;
- an entry point in the group ``privfair.families`` (``name = "package.module:FAMILY"``): how a
  user's own component plugs in, from any installed distribution.

Discovering a family registers its guarantee kinds (``privfair.schemas.contracts.register_kind``), so
specs and manifests can name them.

>>> {"mdav", "fair_mdav"} <= {a.name for a in algorithms()}
True
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path

from privfair.components.core.descriptor import Algorithm, Family, KindCheck
from privfair.components.core.kinds import SHARED_KINDS
from privfair.schemas.contracts import register_kind
from privfair.schemas.errors import PrivfairError

__all__ = ["ENTRY_POINT_GROUP", "families", "algorithms", "algorithm", "kind_check", "kind_checks"]

ENTRY_POINT_GROUP = "privfair.families"
_COMPONENTS = Path(__file__).resolve().parents[1]


def _own_packages() -> list[str]:
    return sorted(
        f"privfair.components.{m.name}"
        for m in pkgutil.iter_modules([str(_COMPONENTS)])
        if m.ispkg and m.name != "core" and not m.name.startswith("_")
    )


def _load(ref: str, where: str) -> Family:
    module, _, attr = ref.partition(":")
    fam = getattr(importlib.import_module(module), attr or "FAMILY", None)
    if not isinstance(fam, Family):
        raise PrivfairError(
            f"{where}: {ref} does not export a privfair.components.core Family as FAMILY"
        )
    return fam


@lru_cache(maxsize=1)
def families() -> tuple[Family, ...]:
    """Every discovered family, privfair's own first (by package name), then entry points."""
    found: dict[str, Family] = {}
    refs = [(f"{p}:FAMILY", "components") for p in _own_packages()]
    refs += [(ep.value, f"entry point {ep.name}") for ep in entry_points(group=ENTRY_POINT_GROUP)]
    for ref, where in refs:
        module = ref.partition(":")[0]
        if where == "components" and not hasattr(importlib.import_module(module), "FAMILY"):
            continue  # a helper package, not a family
        fam = _load(ref, where)
        if fam.name in found and found[fam.name] is not fam:
            raise PrivfairError(f"two families are called '{fam.name}' ({where})")
        found[fam.name] = fam

    seen_algos: dict[str, str] = {}
    seen_kinds = {k.kind: "core" for k in SHARED_KINDS}
    for fam in found.values():
        for a in fam.algorithms:
            if a.name in seen_algos:
                raise PrivfairError(
                    f"algorithm '{a.name}' is defined by families {seen_algos[a.name]} and {fam.name}"
                )
            seen_algos[a.name] = fam.name
        for k in fam.kinds:
            if k.kind in seen_kinds:
                raise PrivfairError(
                    f"guarantee kind '{k.kind}' is defined by {seen_kinds[k.kind]} and {fam.name}"
                )
            seen_kinds[k.kind] = fam.name
            register_kind(k.model)
    if not found:
        raise PrivfairError("no privfair algorithm family found (is the package installed?)")
    return tuple(found.values())


def algorithms() -> list[Algorithm]:
    """Every algorithm of every family, each with its ``family`` set."""
    out = []
    for fam in families():
        for a in fam.algorithms:
            out.append(a if a.family == fam.name else _with_family(a, fam.name))
    return out


def _with_family(a: Algorithm, family: str) -> Algorithm:
    from dataclasses import replace

    return replace(a, family=family)


def algorithm(name: str) -> Algorithm:
    """The algorithm called ``name``; ``KeyError`` listing the known ones otherwise."""
    for a in algorithms():
        if a.name == name:
            return a
    raise KeyError(f"unknown component '{name}'; known: {', '.join(sorted(known_names()))}")


def known_names() -> list[str]:
    return [a.name for a in algorithms()]


def family_of(algo: Algorithm) -> Family:
    return next(f for f in families() if f.name == algo.family)


def kind_checks() -> dict[str, KindCheck]:
    """Every guarantee kind with a checker: the shared ones and each family's."""
    out = {k.kind: k for k in SHARED_KINDS}
    for fam in families():
        out.update({k.kind: k for k in fam.kinds})
    return out


def kind_check(kind: str) -> KindCheck | None:
    return kind_checks().get(kind)
