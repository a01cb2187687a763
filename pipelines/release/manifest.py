"""A release's manifest, read in one place: ``Manifest`` answers what every face asks of it
(its version, outputs, validation, ledger record...) instead of each re-parsing the JSON.

>>> m = Manifest.parse('{"version": "v1", "outputs": {"data": {"file": "shared/data.parquet"}}}')
>>> m.version, m.outputs
('v1', {'data': 'shared/data.parquet'})
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from privfair.schemas.contracts import SCHEMA_CHECK_ID

__all__ = ["MANIFEST", "Manifest", "ManifestError"]

MANIFEST = "manifest.json"


class ManifestError(ValueError):
    """A manifest that cannot be read or is not a JSON object (its message says which)."""


class _Readable(Protocol):
    def read_text(self, *parts: str) -> str: ...


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Manifest:
    """The parsed manifest of a release (the owner's, or a shareable copy's public one)."""

    data: Mapping[str, Any]

    # --- reading ---------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str | bytes, where: str = MANIFEST) -> Manifest:
        """``text`` as a manifest; ``ManifestError`` naming ``where`` when it is not JSON or
        not an object."""
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ManifestError(f"{where} cannot be read: {e}") from None
        if not isinstance(data, dict):
            raise ManifestError(f"{where} is not a JSON object")
        return cls(data)

    @classmethod
    def load(cls, path: str | Path) -> Manifest:
        """The manifest at ``path``: a ``manifest.json`` or the release folder holding one
        (``OSError`` when absent, ``ManifestError`` when unreadable)."""
        p = Path(path)
        if p.is_dir():
            p = p / MANIFEST
        return cls.parse(p.read_text(encoding="utf-8"), str(p))

    @classmethod
    def read(cls, store: _Readable, *folder: str) -> Manifest:
        """The manifest in ``folder`` of ``store`` (a ``privfair.release.store.Store``)."""
        return cls.parse(store.read_text(*folder, MANIFEST), "/".join((*folder, MANIFEST)))

    # --- what it says ----------------------------------------------------------------------
    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    @property
    def version(self) -> str | None:
        return self.data.get("version")

    @property
    def pipeline(self) -> str | None:
        return self.data.get("pipeline")

    @property
    def metrics(self) -> dict:
        return _mapping(self.data.get("metrics"))

    @property
    def warnings(self) -> list:
        return list(self.data.get("warnings") or [])

    @property
    def ledger(self) -> dict | None:
        led = self.data.get("ledger")
        return led if isinstance(led, dict) else None

    @property
    def input(self) -> dict:
        return _mapping(self.data.get("input"))

    @property
    def partition(self) -> str | None:
        return self.input.get("partition")

    @property
    def checksums(self) -> dict:
        return _mapping(self.data.get("checksums"))

    @property
    def validation(self) -> dict:
        return _mapping(self.data.get("validation"))

    @property
    def results(self) -> list[dict]:
        """Every validation result, the schema checks' included."""
        return [r for r in self.validation.get("results") or [] if isinstance(r, dict)]

    @property
    def verdicts(self) -> list[dict]:
        """The guarantees' results (the schema checks' left out)."""
        return [r for r in self.results if r.get("id") != SCHEMA_CHECK_ID]

    @property
    def schema_results(self) -> list[dict]:
        return [r for r in self.results if r.get("id") == SCHEMA_CHECK_ID]

    def files(self) -> tuple[dict[str, str], dict[str, str]]:
        """(outputs, sidecars) as name -> file inside the release (releases written before
        named outputs had ``data.parquet`` and ``lineage.parquet``)."""
        if "outputs" in self.data:
            return (
                {k: v["file"] for k, v in _mapping(self.data["outputs"]).items()},
                {k: v["file"] for k, v in _mapping(self.data.get("sidecars")).items()},
            )
        files = _mapping(self.data.get("files"))
        return {"data": files.get("data", "data.parquet")}, {
            "lineage": files.get("lineage", "lineage.parquet")
        }

    @property
    def outputs(self) -> dict[str, str]:
        return self.files()[0]

    @property
    def sidecars(self) -> dict[str, str]:
        return self.files()[1]
