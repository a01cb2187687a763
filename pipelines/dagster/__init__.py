"""The Dagster face: definitions for a folder of specs (``privfair.dagster.definitions``).

Needs the ``dagster`` extra (``pip install 'privfair[dagster]'``); without it this import
raises an ``ImportError`` that says so.

``definitions`` builds ``defs`` (``build_defs``) from its parts, each in its own module:
``resources`` (the resources and run config), ``translator`` (a spec and a step's record as
Dagster metadata), ``partitions`` (a spec's partitions and its source's data versions),
``assets`` (one spec's assets and checks), ``jobs`` (its job and schedule) and ``sensors``
(its source sensor).
"""

from privfair.extras import require

require("dagster")
