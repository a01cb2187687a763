"""Write a built-in dataset (as privfair prepares it) into a SQLite table, through ADBC.

    python -m privfair.examples [DATASET] [DATABASE]

defaults: ``german`` into ``pipelines/examples/<dataset>.db`` (table ``<dataset>``), read by
``pipelines/examples/german_sql_to_iceberg.yaml``. An existing table is replaced.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    import adbc_driver_sqlite.dbapi as driver

    from privfair.io.ingest import _load_builtin
    from privfair.schemas.errors import PrivfairError

    args = list(sys.argv[1:] if argv is None else argv)
    name = args[0] if args else "german"
    path = Path(args[1]) if len(args) > 1 else HERE / f"{name}.db"
    try:
        table, _, _ = _load_builtin(name, None)
    except PrivfairError as e:
        print(f"python -m privfair.examples: {e}", file=sys.stderr)
        return 2
    plain = table.replace_schema_metadata(None)
    path.parent.mkdir(parents=True, exist_ok=True)
    with driver.connect(str(path)) as conn:
        with conn.cursor() as cur:
            cur.execute(f'DROP TABLE IF EXISTS "{name}"')
            cur.adbc_ingest(name, plain, mode="create")
        conn.commit()
    print(f"wrote {plain.num_rows} rows of '{name}' into table {name} of {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
