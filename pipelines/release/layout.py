"""The files of a release folder: where each output and sidecar lies, and how the manifest
and tables are written as bytes (one place for the layout every room reads and writes).
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from privfair.release import share
from privfair.release.manifest import Manifest

__all__ = ["SIDECAR_DIR", "dumps", "output_file", "parquet_bytes", "release_files", "sidecar_file"]

SIDECAR_DIR = "internal"


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, indent=2, sort_keys=True, default=_json_default).encode()


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


def output_file(name: str) -> str:
    """Where a public output lies in a release: in its shareable copy."""
    return share.shared_file(f"{name}.parquet")


def sidecar_file(name: str) -> str:
    return f"{SIDECAR_DIR}/{name}.parquet"


def release_files(man: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(outputs, sidecars) as name -> file inside the release, from its manifest
    (``Manifest.files``)."""
    return (man if isinstance(man, Manifest) else Manifest(man)).files()
