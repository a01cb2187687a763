"""Example specs that read from a database and publish to a lakehouse table (README, "Tables in
and out"), and ``python -m privfair.examples``, which writes a built-in dataset into a SQLite
table for them to read.

These specs are not in ``pipelines/specs``: the orchestrators and ``make demo`` do not pick them
up (they need the database this module writes first).
"""
