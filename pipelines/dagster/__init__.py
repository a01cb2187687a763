"""The Dagster face: a privfair release inside the user's own project, and privfair's own code
location for a folder of specs.

Needs the ``dagster`` extra (``pip install 'privfair[dagster]'``); without it this import
raises an ``ImportError`` that says so. Importing it builds no definition.

In a user's project (README, "In your Dagster project"):

* ``release_assets`` (``factory``): one spec's release as an asset downstream of the user's
  asset, one blocking check per guarantee, resources under the one key ``privfair``
  (``PrivfairResource``), mergeable with the project's ``Definitions``;
* ``PrivfairTranslator`` (``translator``): the release asset's key, group, owners, tags, kinds
  and metadata, overridable as ``dagster-dbt``'s translator is;
* ``build_privfair_checks`` (``checks``): privfair's guarantees as blocking checks on an asset
  produced elsewhere;
* ``PrivfairRelease`` (``component``): the same release as a component type in a ``dg``
  project (``dg scaffold defs privfair.dagster.PrivfairRelease NAME``).

privfair's own code location (``privfair.dagster.definitions``: ``build_defs`` over a specs
folder; not a name of this room: ``dg`` imports every name a registry module shows) is built
from ``resources``, ``translator``, ``partitions``, ``assets``, ``jobs`` and ``sensors``.
"""

from privfair.extras import require

require("dagster")

from privfair import lazy_names  # noqa: E402  (after the extra's check: its message first)

# each public name and the module that holds it, imported on first use (``lazy_names``)
_WHERE = {
    "release_assets": "factory",
    "upstream_key": "factory",
    "build_privfair_checks": "checks",
    "PrivfairResource": "resources",
    "PrivfairTranslator": "translator",
    "PrivfairRelease": "component",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
