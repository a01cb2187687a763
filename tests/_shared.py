"""Constants shared by several test modules (imported as ``_shared``: tests/ is on sys.path)."""

from __future__ import annotations

import base64
from pathlib import Path

# Debian's chromium, with the flags this machine's closed network needs (no background calls).
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# A spec whose contract cannot hold: k = 10 fairlets cannot be 500-anonymous.
BROKEN_SPEC = """\
name: german_broken
description: German Credit through Fair-MDAV at k = 10, demanding 500-anonymity (cannot hold).
dataset: {name: german}
component:
  name: fair_mdav
  params: {k: 10, tau: 1.0}
guarantees:
  - {kind: k_anonymity, k: 500}
schedule: "@weekly"
# German's rows, grouped as the shipped german_fair_mdav does not: allowed like the shipped
# specs, so that validation (not the ledger) is what stops it
republish: allow
"""

# The column roles of the small CSVs several pipeline tests write (x, c, PA, y).
TOY_COLUMNS = {
    "x": {"role": "quasi_identifier", "kind": "numeric"},
    "c": {"role": "quasi_identifier", "kind": "nominal"},
    "PA": {"role": "protected", "kind": "binary", "favoured": 1},
    "y": {"role": "label", "kind": "binary", "positive": 1},
}


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``privfair ARGV`` in-process: (exit code, stdout, stderr)."""
    from privfair.cli import main

    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


PIXELS_PROBE = """
async (url) => {
  const img = new Image();
  img.src = url;
  await img.decode();
  const canvas = document.createElement('canvas');
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  const ctx = canvas.getContext('2d');
  ctx.drawImage(img, 0, 0);
  const d = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
  const counts = new Map();
  for (let i = 0; i < d.length; i += 4) {
    const rgb = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];
    counts.set(rgb, (counts.get(rgb) || 0) + 1);
  }
  const top = Math.max(...counts.values());
  return {width: canvas.width, height: canvas.height, colours: counts.size,
          background_share: top / (d.length / 4)};
}
"""


def pixel_stats(browser, png: bytes) -> dict:
    """Width, height, number of distinct colours and the share of the most common colour (the
    background) of a PNG, decoded by the browser's own canvas (no image library needed)."""
    page = browser.new_page()
    try:
        url = "data:image/png;base64," + base64.b64encode(png).decode()
        return page.evaluate(PIXELS_PROBE, url)
    finally:
        page.close()


def columns_of(table) -> dict:
    """The spec ``columns`` that give ``table`` (an example with roles attached) its roles."""
    from privfair.schemas.roles import read_roles

    out = {}
    for c in read_roles(table):
        spec: dict = {"role": c.role.value, "kind": c.kind.value}
        for name in ("favoured", "unfavoured", "positive"):
            v = getattr(c, name)
            if v is not None:
                spec[name] = list(v)
        if c.domain is not None:
            spec["domain"] = list(c.domain)
        out[c.name] = spec
    return out


def read_latest(pipeline_folder: Path) -> str:
    """The version ``<pipeline_folder>/latest`` names: the target of the symlink a local store
    writes, or the text of an older store's pointer file."""
    p = Path(pipeline_folder) / "latest"
    return p.readlink().name if p.is_symlink() else p.read_text().strip()


def published_versions(store: Path, pipeline: str) -> list[str]:
    """The versions of ``pipeline`` the store at ``store`` has published (a folder with a
    manifest; not the ``latest`` link, not a hidden candidate), sorted."""
    folder = store / pipeline
    if not folder.is_dir():
        return []
    return sorted(
        p.name
        for p in folder.iterdir()
        if not p.is_symlink() and not p.name.startswith(".") and (p / "manifest.json").is_file()
    )


def task_states(airflow_home: Path, dag_id: str) -> dict[str, str]:
    """task id -> state of the task instances of ``dag_id`` in the SQLite metadata database of
    ``airflow_home``."""
    import sqlite3

    with sqlite3.connect(Path(airflow_home) / "airflow.db") as db:
        rows = db.execute(
            "select task_id, state from task_instance where dag_id = ?", (dag_id,)
        ).fetchall()
    return dict(rows)
