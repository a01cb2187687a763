"""The Dagster face: definitions for a folder of specs (``privfair.dagster.definitions``).

Needs the ``dagster`` extra (``pip install 'privfair[dagster]'``); without it this import
raises an ``ImportError`` that says so.
"""

from privfair.extras import require

require("dagster")
