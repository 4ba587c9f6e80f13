"""What a Spark task runs to write one epoch of a PostgreSQL sink: the epoch's rows in
one transaction, prepared under the epoch's name (see :mod:`falkirk.io.postgres`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pyspark.sql import Row

from falkirk.io.exceptions import SinkError
from falkirk.io.pg_connection import retrying
from falkirk.storage.pairs import keepalive_options
from falkirk.storage.pg_tables import MARKS

#: Rows per INSERT statement (one array per column).
BATCH = 5000


def partition_writer(
    dsn: str, prefix: str, epoch: int, statement: str, width: int, lock_timeout: float, table: str, retry_seconds: float
) -> Callable[[Iterator[Row]], None]:
    """The function a Spark task runs: the epoch's rows in one transaction, prepared
    as ``prefix + epoch`` (nothing if it is prepared already: a retried task, or a
    connection lost after the server prepared it; nothing either if it was committed
    before: its mark in ``falkirk.sink_epochs`` says so). A connection lost before the
    prepare loses the unprepared transaction on the server, so it is written again."""
    gid = f"{prefix}{epoch}"

    def write(rows: Iterator[Row]) -> None:
        import psycopg

        held = [tuple(row) for row in rows]
        retrying(psycopg, lambda: _write_prepared(psycopg, held), retry_seconds, f"PostgresSink({table!r}) epoch {epoch}")

    def _write_prepared(psycopg: Any, held: list[tuple[Any, ...]]) -> None:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10, **keepalive_options(dsn))
        try:
            if conn.execute("SELECT 1 FROM pg_prepared_xacts WHERE gid = %s AND database = current_database()", (gid,)).fetchone():
                return
            conn.autocommit = False
            conn.tpc_begin(gid)
            conn.execute(f"SET LOCAL lock_timeout = '{int(lock_timeout * 1000)}ms'")
            try:
                marked = conn.execute(
                    f"INSERT INTO {MARKS.qualified} (prefix, epoch) VALUES (%s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                    (prefix, epoch),
                ).fetchone()
            except psycopg.errors.LockNotAvailable as exc:
                conn.tpc_rollback()
                raise SinkError(
                    f"PostgresSink({table!r}) epoch {epoch}: another session is writing this epoch and did not "
                    f"finish within {lock_timeout:.0f} s (a writer whose host stopped answering is dropped by "
                    "the server within seconds; one that is alive but stuck holds it)"
                ) from exc
            if marked is None:  # committed before: a late write (its driver was killed)
                conn.tpc_rollback()
                return
            try:
                for start in range(0, len(held), BATCH):
                    _insert(conn, statement, held[start : start + BATCH], width)
                conn.tpc_prepare()
            except psycopg.errors.LockNotAvailable as exc:
                conn.tpc_rollback()
                raise SinkError(
                    f"PostgresSink({table!r}) epoch {epoch}: rows are locked by an earlier epoch's "
                    f"prepared transaction that was not released within {lock_timeout:.0f} s. An upserted "
                    "epoch is released only when no rollback can retract it; give every processor above "
                    "the sink a policy that lets it roll back to each epoch (EagerCheckpoint or "
                    "LogOutputs on the processor feeding the sink; GlobalCheckpoints(every=1)), or "
                    "write in mode='append'."
                ) from exc
            except psycopg.errors.CardinalityViolation as exc:
                conn.tpc_rollback()
                raise SinkError(
                    f"PostgresSink({table!r}) epoch {epoch}: a key appears twice in one epoch's rows; "
                    "an upsert sink needs one row per key per epoch (aggregate or deduplicate first)"
                ) from exc
        finally:
            conn.close()  # after tpc_prepare(): the transaction stays prepared

    return write


def _insert(conn: Any, statement: str, batch: list[tuple[Any, ...]], width: int) -> None:
    columns = [list(c) for c in zip(*batch)] if batch else [[] for _ in range(width)]
    conn.execute(statement, columns)
