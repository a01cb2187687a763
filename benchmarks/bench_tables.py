"""Tables in and out: reading from PostgreSQL and publishing to Iceberg, at 1M rows.

    PRIVFAIR_DATA_DIR=../shared/data uv run python benchmarks/bench_tables.py [--rows 1000000]

Starts a throw-away PostgreSQL server (``initdb`` + ``pg_ctl``, as the tests do), loads an
Adult-like table (``adult_like.py``: Adult's rows drawn with replacement, numeric QIs jittered)
of ``--rows`` rows, then times, in the same run and on the same table:

- **read**: ADBC's PostgreSQL driver into Arrow (``cursor.fetch_arrow_table``), privfair's
  ``read_source`` (ADBC + the value order and the content fingerprint), and
  ``pandas.read_sql`` through SQLAlchemy/psycopg2 (the usual route); the column types each
  gives back;
- **publish**: write-audit-publish of the same rows to an Iceberg table of a SQLite catalog
  (``privfair.release.targets``: write the audit branch, read it back and compare, fast-forward + tag)
  and a plain ``append`` to ``main`` for comparison.

Best of ``--repeats`` wall-clock times; the report goes to stdout and
``benchmarks/results/results_tables.md``.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from harness import postgres_server, result, spec_file


def best(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(result("results_tables.md")))
    args = ap.parse_args(argv)

    import adbc_driver_postgresql.dbapi as pg
    import pandas as pd
    import pyarrow as pa
    import sqlalchemy
    from adult_like import adult_like

    from privfair.io.connectors import read_source
    from privfair.release import targets
    from privfair.run.flow import ReleasePlan
    from privfair.schemas.spec import SourceSpec, TargetSpec
    from privfair.spec.catalogue import load_spec

    base = ReleasePlan.of(load_spec(spec_file("adult_mdav"))).ingest().table
    table = adult_like(base, args.rows, seed=0).replace_schema_metadata(None)
    table = pa.Table.from_arrays(
        table.columns, schema=pa.schema([f.remove_metadata() for f in table.schema])
    )
    lines = [
        "# Tables in and out: PostgreSQL -> Arrow, Arrow -> Iceberg",
        "",
        f"`uv run python benchmarks/bench_tables.py --rows {args.rows}`; "
        f"{table.num_rows:,} Adult-like rows, {table.num_columns} columns; best of "
        f"{args.repeats}; {platform.node()}, {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}.",
        "",
    ]
    with postgres_server() as url, tempfile.TemporaryDirectory() as tmp:
        with pg.connect(url) as conn:
            with conn.cursor() as cur:
                cur.adbc_ingest("adult", table, mode="create")
            conn.commit()

        def adbc():
            with pg.connect(url) as conn, conn.cursor() as cur:
                cur.execute('SELECT * FROM "adult"')
                return cur.fetch_arrow_table()

        src = SourceSpec(kind="sql", url=url, table="adult")
        engine = sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg2://"))

        def pandas_read():
            with engine.connect() as c:
                return pd.read_sql('SELECT * FROM "adult"', c)

        t_adbc, a = best(adbc, args.repeats)
        t_src, r = best(lambda: read_source(src), args.repeats)
        t_pd, df = best(pandas_read, args.repeats)
        engine.dispose()
        types_adbc = ", ".join(f"{f.name}: {f.type}" for f in list(a.schema)[:4])
        types_pd = ", ".join(f"{c}: {t}" for c, t in list(df.dtypes.items())[:4])
        lines += [
            "## Read",
            "",
            "| route | seconds | rows/s | vs pandas |",
            "|---|---|---|---|",
            f"| ADBC `fetch_arrow_table` | {t_adbc:.2f} | {a.num_rows / t_adbc:,.0f} | "
            f"{t_pd / t_adbc:.1f}x faster |",
            f"| privfair `read_source` (ADBC + value order + fingerprint) | {t_src:.2f} | "
            f"{r.table.num_rows / t_src:,.0f} | {t_pd / t_src:.1f}x faster |",
            f"| `pandas.read_sql` (SQLAlchemy, psycopg2) | {t_pd:.2f} | {len(df) / t_pd:,.0f} | 1 |",
            "",
            f"Types, first columns: ADBC `{types_adbc}`; pandas `{types_pd}`.",
            "",
        ]

        store = SimpleNamespace(local=True, path=lambda *p: str(Path(tmp, "store", *p)))
        spec = SimpleNamespace(target=TargetSpec(kind="iceberg"), spec_dir=Path(tmp), name="bench")
        out = {"data": table}
        n = [0]

        def wap():
            n[0] += 1
            plan = SimpleNamespace(
                spec=spec, name="bench", partition=None, open_store=lambda: store
            )
            cand = SimpleNamespace(read_table=lambda _: table)
            result = SimpleNamespace(outputs=out)
            rid = f"r{n[0]}"
            targets.write_and_audit(plan, cand, result, rid, lambda back: [])
            return targets.publish(plan, out, rid, [])

        t_wap, _ = best(wap, args.repeats)
        cat = targets.target_catalog(
            TargetSpec(kind="iceberg"),
            SimpleNamespace(spec=spec, name="bench", open_store=lambda: store),
        )
        plain = cat.create_table("privfair.plain", schema=table.schema)
        t_append, _ = best(lambda: plain.append(table), args.repeats)
        lines += [
            "## Publish to Iceberg (SQLite catalog, local warehouse)",
            "",
            "| route | seconds |",
            "|---|---|",
            f"| write-audit-publish (branch write, read back + compare, fast-forward + tag) | "
            f"{t_wap:.2f} |",
            f"| plain `append` to `main` | {t_append:.2f} |",
            "",
        ]
    report = "\n".join(lines)
    print(report)
    Path(args.out).write_text(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
