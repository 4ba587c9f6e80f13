"""Upgrading an older metadata schema in place (:mod:`falkirk.storage.schema`).

Schemas 2 and 3 keyed message logs and state files by epoch alone; schema 4's state
files allowed no ``cec:T`` kind (continuous eventual checkpoints). Opening such a
database for writing rebuilds those tables with the current definition, in one
transaction: every old row is read and checked against its old CRC first (a damaged
row stops the upgrade, nothing changed), then written with a new one. A crash
during the upgrade leaves the old database as it was.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from falkirk.storage.schema import _COLUMNS, _SCHEMA, with_crc

#: Reads every row of a table, checked against its CRC; ``legacy``: the table has no
#: ``iteration`` column yet (schemas 2-3).
ReadTable = Callable[[str, bool], list[dict[str, Any]]]


def has_column(db: sqlite3.Connection, table: str, column: str) -> bool:
    """``table`` has ``column`` (or does not exist yet: it will be created whole)."""
    rows = db.execute(f"PRAGMA table_info({table})").fetchall()  # constant names
    return not rows or any(r[1] == column for r in rows)


def _allows_cec(db: sqlite3.Connection) -> bool:
    row = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'state_files'").fetchone()
    return row is None or "cec:" in row[0]


def outdated_tables(db: sqlite3.Connection) -> list[str]:
    """The tables an older schema defined differently."""
    old = [t for t in ("message_logs", "state_files") if not has_column(db, t, "iteration")]
    if "state_files" not in old and not _allows_cec(db):
        old.append("state_files")  # schema 4: no 'cec:T' kinds yet
    return old


def upgrade(db: sqlite3.Connection, read: ReadTable) -> None:
    """Rebuild every outdated table with its current definition (see the module
    docstring); nothing to do for a current database."""
    old = outdated_tables(db)
    if not old:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        for table in old:
            rows = read(table, not has_column(db, table, "iteration"))
            db.execute(f"DROP TABLE {table}")
            ddl = _SCHEMA.split("CREATE TABLE IF NOT EXISTS ")
            create = next(d for d in ddl if d.startswith(f"{table} ("))
            db.execute("CREATE TABLE " + create.rstrip().rstrip(";"))
            columns = _COLUMNS[table]
            marks = ", ".join("?" * (len(columns) + 1))
            db.executemany(f"INSERT INTO {table} VALUES ({marks})", [with_crc(*(r[c] for c in columns)) for r in rows])
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def backfill_sink_ranges(db: sqlite3.Connection, read: Callable[[str], list[dict[str, Any]]]) -> None:
    """Schema 6: each sink's committed range, from the per-epoch sink records an
    older database still holds (the epochs it pruned before are not known: the range
    starts at the oldest it kept). Nothing to do once ranges are recorded."""
    if db.execute("SELECT 1 FROM sink_ranges LIMIT 1").fetchone() is not None:
        return
    ranges: dict[str, tuple[int, int]] = {}
    for row in read("sink_commits"):
        first, last = ranges.get(row["sink"], (row["epoch"], row["epoch"]))
        ranges[row["sink"]] = (min(first, row["epoch"]), max(last, row["epoch"]))
    if not ranges:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        db.executemany("INSERT INTO sink_ranges VALUES (?, ?, ?, ?)", [with_crc(s, first, last) for s, (first, last) in ranges.items()])
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
