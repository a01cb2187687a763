"""Component name -> function. A spec's ``component.name`` is looked up here."""

from __future__ import annotations

from collections.abc import Callable

from components.fair_mdav import fair_mdav
from components.mdav import mdav

COMPONENTS: dict[str, Callable] = {"fair_mdav": fair_mdav, "mdav": mdav}
