"""Falkirk's own tables in a PostgreSQL database: in a schema of their own, owned by
the user Falkirk connects as.

A ``PostgresSink`` keeps its idempotence marks (``falkirk.sink_epochs``) and a
driver pair its plans, members and egress (``falkirk.pairs``, ``falkirk.pair_*``)
next to the user's data. Created unqualified, they would land in the first schema
of the search path, often ``public``, where any user of the database may create a
table first: a planted mark table could make a sink skip epochs as "already
written", a planted members table point a catch-up at another root. So
:func:`ensure`, in one transaction:

* creates the schema ``falkirk`` and the tables in it (``IF NOT EXISTS``) and
  refuses to go on (:class:`~falkirk.storage.exceptions.StorageError`, naming the
  owner and what to do) unless the schema and every table belong to the connecting
  user itself (not to a group role it is a member of: every other member of that
  role could plant rows);
* moves the rows of a table an earlier Falkirk created unqualified (found by the
  search path, e.g. ``public.falkirk_sink_epochs``) into the new one, then drops it:
  an append-mode sink keeps its marks across the change, and a mark the old table
  held cannot come back once the sink deleted it. An old table of another owner is
  refused, not read.

The connecting user needs ``CREATE`` on the database the first time (or the schema
made for it: ``CREATE SCHEMA falkirk AUTHORIZATION <user>``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from falkirk.storage.exceptions import StorageError

logger = logging.getLogger(__name__)

#: The schema of Falkirk's own tables.
SCHEMA = "falkirk"
#: PostgreSQL's error code for a lock not granted within ``lock_timeout``.
LOCK_NOT_AVAILABLE = "55P03"


@dataclass(frozen=True)
class OwnTable:
    """One of Falkirk's tables: ``name`` in :data:`SCHEMA`, its column definitions,
    and the unqualified name earlier versions created it under."""

    name: str
    columns: str
    legacy: str

    @property
    def qualified(self) -> str:
        return f"{SCHEMA}.{self.name}"


#: The written marks of every PostgresSink epoch (:mod:`falkirk.io.postgres`).
MARKS = OwnTable("sink_epochs", "prefix text NOT NULL, epoch bigint NOT NULL, PRIMARY KEY (prefix, epoch)", "falkirk_sink_epochs")


def ensure(conn: Any, tables: Sequence[OwnTable], lock: str, mine: tuple[str, str]) -> bool:
    """Create, check and migrate ``tables`` (see the module docstring) on the psycopg
    connection ``conn`` (autocommit), serialised with other drivers by the advisory
    lock named ``lock``. ``mine``: the column and value of the caller's rows (a
    sink's transaction prefix, a pair's name): only those are moved from a legacy
    table, which other pipelines of an older Falkirk may still use. Returns whether
    a legacy table was found (and may stay, in use)."""
    legacy = False
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (lock,))
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")  # a constant name
        _check_owner(conn, "schema", SCHEMA, "SELECT nspowner FROM pg_namespace WHERE nspname = %s", (SCHEMA,))
        for table in tables:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {table.qualified} ({table.columns})")  # constants
            _check_owner(conn, "table", table.qualified, "SELECT relowner FROM pg_class WHERE oid = to_regclass(%s)", (table.qualified,))
            legacy = move_legacy(conn, table, mine) is not None or legacy
    return legacy


def present(conn: Any, table: OwnTable) -> list[str]:
    """Where ``table``'s rows may be: the table and a legacy one, those that exist
    (as PostgreSQL quotes their names), for tools that read before any driver of this
    version ran (``falkirk resolve``). Read-only, with the owner checks of
    :func:`ensure`: a table (or the schema) another user planted raises
    :class:`StorageError` instead of being read (a planted mark would make
    ``falkirk resolve`` roll back an epoch the root keeps)."""
    found: list[str] = []
    for name in (table.qualified, table.legacy):
        row = conn.execute("SELECT to_regclass(%s)::text", (name,)).fetchone()
        if row is None or row[0] is None:
            continue
        if name == table.qualified:
            _check_owner(conn, "schema", SCHEMA, "SELECT nspowner FROM pg_namespace WHERE nspname = %s", (SCHEMA,))
        _check_owner(conn, "table", row[0], "SELECT relowner FROM pg_class WHERE oid = to_regclass(%s)", (name,))
        found.append(row[0])
    return found


#: SQL: whether the role oid ``owner`` is the connecting user itself.
_IS_ME = "owner = (SELECT oid FROM pg_roles WHERE rolname = current_user)"


def _check_owner(conn: Any, kind: str, name: str, query: str, args: tuple[str, ...]) -> None:
    row = conn.execute(
        f"SELECT {_IS_ME}, owner::regrole::text, current_user FROM ({query}) AS o(owner)",
        args,
    ).fetchone()
    if row is None or not row[0]:
        owner, user = (row[1], row[2]) if row is not None else ("?", "?")
        raise StorageError(
            f"PostgreSQL {kind} {name} belongs to {owner}, not to {user} (Falkirk connects as {user}): another user "
            f"created it, and Falkirk does not trust what it holds. If {owner} is you, run "
            f"ALTER {kind.upper()} {name} OWNER TO {user}; otherwise drop it (or connect as its owner)"
        )


def move_legacy(conn: Any, table: OwnTable, mine: tuple[str, str]) -> int | None:
    """Move the caller's rows (``mine``: column, value) of ``table.legacy``, if the
    search path finds one, into ``table`` (in the caller's transaction); drop the
    legacy table once it is empty and nobody holds it. Returns the rows moved (None:
    no legacy table). Rows a
    prepared transaction of an older Falkirk adds later are moved by the next call
    (a ``PostgresSink`` calls it again after it commits such transactions)."""
    row = conn.execute(
        "SELECT c.oid::regclass::text, c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user), "
        "c.relowner::regrole::text FROM pg_class c WHERE c.oid = to_regclass(%s)",
        (table.legacy,),
    ).fetchone()
    if row is None:
        return None
    old, ours, owner = row
    if not ours:
        raise StorageError(
            f"PostgreSQL table {old} (where earlier versions of Falkirk kept {table.qualified}'s rows) belongs to "
            f"{owner}, not to the user Falkirk connects as: it was not written by Falkirk for you and is not read. "
            f"Drop it, or if its rows are yours have {owner} give it to you (ALTER TABLE {old} OWNER TO ...)"
        )
    column, value = mine
    # old: a regclass's text, quoted by PostgreSQL; column: a constant of the caller's
    moved = conn.execute(f"INSERT INTO {table.qualified} SELECT * FROM {old} WHERE {column} = %s ON CONFLICT DO NOTHING", (value,)).rowcount
    conn.execute(f"DELETE FROM {old} WHERE {column} = %s", (value,))
    if moved:
        logger.info("moved %d rows of PostgreSQL table %s to %s", moved, old, table.qualified)
    try:
        with conn.transaction():  # a savepoint: a table in use stays, for the next call
            conn.execute("SET LOCAL lock_timeout = '200ms'")
            if conn.execute(f"SELECT NOT EXISTS (SELECT 1 FROM {old})").fetchone()[0]:
                conn.execute(f"DROP TABLE {old}")
            conn.execute("SET LOCAL lock_timeout = DEFAULT")
    except Exception as exc:
        if getattr(exc, "sqlstate", None) != LOCK_NOT_AVAILABLE:
            raise
        logger.info("PostgreSQL table %s is still in use, kept for now (%s)", old, str(exc).strip())
    return int(moved)
