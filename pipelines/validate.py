"""Validation of a candidate release: every declared guarantee recomputed from the files that
will be published (and the input, for guarantees relative to it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from components.audit import build_audit
from components.checks import CheckResult, check_contract


@dataclass
class Validation:
    results: list[CheckResult]
    artefacts: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)

    @property
    def failed(self) -> list[str]:
        return [f"{r.id} {r.kind}".strip() for r in self.results if not r.passed]

    def summary(self) -> dict:
        return {
            "status": "passed" if self.passed else "failed",
            "checked": len(self.results),
            "failed": self.failed,
            "results": [r.to_dict() for r in self.results],
            "artefacts": self.artefacts,
        }


def validate_release(
    input_table: pa.Table,
    published: pa.Table,
    lineage: pa.Table,
    contract: list,
    scaling: str = "minmax",
    out_dir: Path | None = None,
) -> Validation:
    """Check ``contract`` against ``published`` (as read back from disk) and its lineage."""
    audit = build_audit(input_table, published, lineage)
    results = check_contract(contract, published.to_pandas(), audit, scaling=scaling)
    return Validation(results)
