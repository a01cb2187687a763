"""Component name -> function, and -> the function declaring its contract from its params."""

from __future__ import annotations

from collections.abc import Callable

from components import fair_mdav as _fair_mdav
from components import mdav as _mdav

COMPONENTS: dict[str, Callable] = {"fair_mdav": _fair_mdav.fair_mdav, "mdav": _mdav.mdav}
CONTRACTS: dict[str, Callable[..., list]] = {
    "fair_mdav": _fair_mdav.declared_contract,
    "mdav": _mdav.declared_contract,
}
