"""A PostgreSQL table as a sink, exactly once, with two-phase commit (psycopg 3).

Each epoch's rows are written in one transaction, from one Spark task (the rows
never pass through the driver), and that transaction is *prepared*
(``PREPARE TRANSACTION``) while the epoch is computed: durable in PostgreSQL, not
visible to anyone. Its id names the storage root's identity (recorded in the root,
the same however the root is reached or wherever it is copied; see
:mod:`falkirk.storage.identity`), the sink and the epoch
(``falkirk:<identity>:<sink>:<epoch>``). When the monitor releases the epoch (no
rollback can retract it any more) the engine commits it (``COMMIT PREPARED``); a
rollback, and a restart for whatever its committed metadata does not keep, rolls it
back (``ROLLBACK PREPARED``). So readers of the table never see an epoch twice, an
epoch a recovery took back, or part of an epoch.

Modes: ``upsert`` (rows replace the row with the same ``key``; a key may appear once
per epoch) or ``append``. Every connection asks the server for TCP keepalives, so
the session (and the open transaction) of a writer whose host died is dropped
within seconds rather than the operating system's two hours. The table is created if absent, with the input's columns
(and ``epoch``), primary key ``key`` in upsert mode.

An upserted row stays locked from its epoch's ``PREPARE`` to its release, so the next
epoch's write of the same key waits for that release: keep the sink's input
releasable at each commit (every processor above it checkpointed eagerly or logging
its output, or stateless), or the next epoch fails after ``lock_timeout`` seconds
with an error that says so. Append mode waits only for another writer of the same
epoch (a pair's other driver, or a task retried after its host stopped answering:
dropped by the server within seconds, see below).

A lost connection (a PostgreSQL restart or fail-over, a network blip) is retried
with backoff for ``retry_seconds`` (default 60) before the pipeline stops with an
error: an epoch's write starts its transaction again (the server rolled back the
unprepared one; one already prepared is found by its id and kept), and committing
or rolling back prepared epochs lists them again. Prepared transactions survive a
server restart, so no released epoch is lost and none is written twice. The
writing task holds the epoch's rows in memory to be able to write them again.

**Written once, also against a late write.** Each epoch's transaction also inserts
its id into ``falkirk.sink_epochs`` (created on first use, in the sink's database, in
a schema owned by the sink's user: :mod:`falkirk.storage.pg_tables`, which also moves
the marks an earlier Falkirk kept in an unqualified ``falkirk_sink_epochs``). A
write of an epoch that was committed before - a Spark task of a killed driver that
runs on after another driver (a restart, a pair's other member) wrote the epoch -
finds the id there and writes nothing. Ids of the last :data:`KEPT_EPOCHS` epochs
of a sink are kept, also across a rollback: a root restored from an older backup
replays epochs its original committed later, and their marks keep it from writing
them twice (a new root has an identity of its own, so no marks).

**One driver per root.** While it runs, a driver holds a lease on the sink's database
keyed by the root's identity (a session-level advisory lock, dropped by the server
when the driver's connection ends), so a copy of the root started next to the
original is refused before it commits or rolls back anything. A driver pair's two
members share the identity by design and take none.

The PostgreSQL server must allow prepared transactions: ``max_prepared_transactions``
> 0 (it is 0 by default); the sink says so at start otherwise. The Spark executors
need ``psycopg`` installed (``pip install 'falkirk[services]'``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from falkirk.io.exceptions import SinkError
from falkirk.io.pg_connection import connect, psycopg_module, retrying
from falkirk.io.pg_writer import partition_writer
from falkirk.redact import check_dsn, redact_dsn, where_dsn
from falkirk.storage import StoredFile
from falkirk.storage.identity import lease_key, transaction_prefix
from falkirk.storage.pairs import keepalive_options
from falkirk.storage.pg_tables import MARKS, ensure, move_legacy

MODES = ("upsert", "append")
_PG_TYPES: dict[type[T.DataType], str] = {
    T.StringType: "text",
    T.LongType: "bigint",
    T.IntegerType: "integer",
    T.ShortType: "smallint",
    T.ByteType: "smallint",
    T.DoubleType: "double precision",
    T.FloatType: "real",
    T.BooleanType: "boolean",
    T.DateType: "date",
    T.TimestampType: "timestamptz",
    T.TimestampNTZType: "timestamp",
    T.DecimalType: "numeric",
    T.BinaryType: "bytea",
}
#: Epochs of a sink whose "written" mark is kept after their commit (a late write of
#: an older epoch than this is not expected: it would come from a task that ran on
#: for that many epochs after its driver died).
KEPT_EPOCHS = 1000

@dataclass
class PostgresSink:
    """Rows of each epoch into PostgreSQL table ``table`` (``name`` or
    ``schema.name``) at ``dsn``, in ``mode`` ``"upsert"`` (by ``key``) or
    ``"append"``; ``epoch_column`` (if set) adds the epoch as a ``bigint`` column.
    ``not_null``: create every column ``NOT NULL`` (key columns always are).
    ``retry_seconds``: how long a lost connection is retried before the pipeline
    stops with an error. See the module docstring for the guarantees."""

    dsn: str
    table: str
    key: tuple[str, ...] = ()
    mode: str = "upsert"
    epoch_column: str | None = "epoch"
    not_null: bool = False
    lock_timeout: float = 120.0
    retry_seconds: float = 60.0
    _prefix: str = field(default="", init=False, repr=False)
    #: Marks of this sink may still come into the legacy mark table (see commit_upto).
    _legacy_marks: bool = field(default=False, init=False, repr=False)
    #: The connection holding the root's lease while a run lasts (see take_lease).
    _lease: Any = field(default=None, init=False, repr=False, compare=False)
    #: An upserted epoch's rows stay locked until released: the engine refuses
    #: pipelines that release epochs only every few commits (global checkpoints).
    needs_prompt_release: bool = field(default=False, init=False, repr=False)

    def __repr__(self) -> str:
        return (
            f"PostgresSink(dsn={redact_dsn(self.dsn)!r}, table={self.table!r}, key={self.key!r}, mode={self.mode!r}, "
            f"epoch_column={self.epoch_column!r})"
        )

    def __post_init__(self) -> None:
        self.key = (self.key,) if isinstance(self.key, str) else tuple(self.key)
        if self.mode not in MODES:
            raise SinkError(f"PostgresSink({self.table!r}): mode must be one of {MODES}, got {self.mode!r}")
        if self.mode == "upsert" and not self.key:
            raise SinkError(f"PostgresSink({self.table!r}): upsert needs key=(column, ...); or use mode='append'")
        self.needs_prompt_release = self.mode == "upsert"
        if not 1 <= len(self.table.split(".")) <= 2 or not all(self.table.split(".")):
            raise SinkError(f"PostgresSink: table must be 'name' or 'schema.name', got {self.table!r}")
        try:
            check_dsn(self.dsn, f"PostgresSink({self.table!r})")
        except ValueError as exc:
            raise SinkError(str(exc)) from None

    # -- the TransactionalSink protocol ---------------------------------------------------

    def bind(self, pipeline: str, processor: str) -> None:
        self._prefix = transaction_prefix(pipeline, processor)  # pipeline: the storage root's identity
        if len(self._prefix) > 180:
            raise SinkError(f"PostgresSink({self.table!r}): pipeline and sink names are too long for a transaction id")

    def describe(self) -> dict[str, Any]:
        """What the storage root records of this sink (no password): where tools
        such as ``falkirk status`` look for its in-doubt transactions."""
        return {"kind": "postgresql", "dsn": redact_dsn(self.dsn), "table": self.table, "mode": self.mode}

    def take_lease(self, *, shared: bool) -> None:
        """Hold the storage root's lease on this sink's database for the run: a
        session-level advisory lock keyed by the root's identity and the sink, so
        that a second driver of the same root (a copy started side by side with the
        original) is refused before it commits or rolls back anything. The server
        drops the lease when the driver's connection ends (killed, or its host gone:
        keepalives). ``shared``: a driver pair's members share the identity by
        design (their egress decides who writes) and take none."""
        if shared or self._lease is not None:
            return
        psycopg = psycopg_module()
        conn = connect(psycopg, self.dsn, autocommit=True, retry_seconds=self.retry_seconds)
        if not conn.execute("SELECT pg_try_advisory_lock(%s)", (lease_key(self._prefix),)).fetchone()[0]:
            conn.close()
            raise SinkError(
                f"PostgresSink({self.table!r}): another driver is running storage root identity "
                f"{self._prefix.split(':')[1]} against PostgreSQL at {where_dsn(self.dsn)} (it holds the root's "
                "lease there). A copy of a storage root is a restore, not a fork: run one copy at a time, or "
                "give the copy an identity of its own with `falkirk fork ROOT` (its sinks still write to the "
                "same tables)."
            )
        self._lease = conn

    def drop_lease(self) -> None:
        """Let the lease go (the run ended)."""
        conn, self._lease = self._lease, None
        if conn is not None:
            conn.close()

    def _check_lease(self) -> None:
        """Before committing or rolling back epochs: the lease is still held (a lost
        connection lost it; it is taken again unless another driver has it now)."""
        if self._lease is None:
            return
        psycopg = psycopg_module()
        try:
            self._lease.execute("SELECT 1")
            return
        except psycopg.Error:
            self.drop_lease()
        self.take_lease(shared=False)

    def prepare(self, empty: DataFrame) -> None:
        """Check the server allows prepared transactions; create the table if absent
        (else check it has the input's columns)."""
        psycopg = psycopg_module()
        schema = self._stamp(empty, 0).schema
        columns = [(f.name, _pg_type(f, self.table)) for f in schema.fields]
        missing = [k for k in self.key if k not in schema.fieldNames()]
        if missing:
            raise SinkError(f"PostgresSink({self.table!r}): key columns {missing} are not in the input {schema.fieldNames()}")
        with connect(psycopg, self.dsn, autocommit=True, retry_seconds=self.retry_seconds) as conn:
            allowed = int(conn.execute("SHOW max_prepared_transactions").fetchone()[0])
            if allowed <= 0:
                raise SinkError(
                    f"PostgreSQL at {where_dsn(self.dsn)} has max_prepared_transactions = 0, so it cannot "
                    "prepare an epoch's transaction (two-phase commit). Set max_prepared_transactions "
                    "to at least 2 x the number of PostgresSinks writing to it (e.g. 64) in "
                    "postgresql.conf and restart the server."
                )
            with conn.transaction():  # two drivers of a pair may create them at once
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('falkirk-sink-tables', 0))")
                self._legacy_marks = ensure(conn, [MARKS], "falkirk-sink-tables", ("prefix", self._prefix))
                self._create_table(psycopg, conn, columns)

    def _create_table(self, psycopg: Any, conn: Any, columns: list[tuple[str, str]]) -> None:
        """Create the table if absent (else check it has the input's columns)."""
        sql = psycopg.sql
        found = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = "
            "coalesce(%s, current_schema()) AND table_name = %s",
            (self._schema_name(), self._table_name()),
        ).fetchall()
        if not found:
            defs = [
                sql.SQL("{} {}{}").format(
                    sql.Identifier(name),
                    sql.SQL(pg_type),
                    sql.SQL(" NOT NULL" if self.not_null or name in self.key else ""),
                )
                for name, pg_type in columns
            ]
            if self.mode == "upsert":
                defs.append(sql.SQL("PRIMARY KEY ({})").format(sql.SQL(", ").join(map(sql.Identifier, self.key))))
            conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(self._ident(psycopg), sql.SQL(", ").join(defs)))
        else:
            absent = sorted({name for name, _ in columns} - {r[0] for r in found})
            if absent:
                raise SinkError(
                    f"PostgresSink: table {self.table!r} exists without columns {absent} of the "
                    "input; add them (ALTER TABLE) or write to another table"
                )

    def pre_commit(self, df: DataFrame, epoch: int) -> list[StoredFile]:
        """Write the epoch in one prepared transaction (one Spark task)."""
        if not self._prefix:
            raise SinkError("internal: PostgresSink.pre_commit before bind()")
        stamped = self._stamp(df, epoch)
        psycopg = psycopg_module()
        statement = self._insert(psycopg, stamped.schema).as_string(None)
        write = partition_writer(
            self.dsn, self._prefix, epoch, statement, len(stamped.columns), self.lock_timeout, self.table, self.retry_seconds
        )
        stamped.coalesce(1).foreachPartition(write)
        return []

    def commit_upto(self, epoch: int) -> None:
        """``COMMIT PREPARED`` every prepared epoch up to ``epoch``, in order; forget
        the marks of epochs :data:`KEPT_EPOCHS` before it."""
        self._check_lease()
        self._finish(lambda e: e <= epoch, "COMMIT PREPARED", vanished_ok=False)
        if self._legacy_marks:  # prepared by an earlier Falkirk: their marks went to its table
            self._move_legacy_marks()
        self._forget_marks("epoch < %s", epoch - KEPT_EPOCHS)

    def abort_after(self, epoch: int) -> None:
        """``ROLLBACK PREPARED`` every prepared epoch after ``epoch`` (their marks go
        with them). Marks of committed epochs stay: an epoch committed under this
        identity after ``epoch`` (a root restored from an older backup replays what
        its original committed since) is never written again."""
        self._check_lease()
        self._finish(lambda e: e > epoch, "ROLLBACK PREPARED", vanished_ok=True)

    def _move_legacy_marks(self) -> None:
        psycopg = psycopg_module()

        def move() -> None:
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10, **keepalive_options(self.dsn)) as conn, conn.transaction():
                move_legacy(conn, MARKS, ("prefix", self._prefix))
            self._legacy_marks = False

        retrying(psycopg, move, self.retry_seconds, f"PostgresSink({self.table!r}): moving written marks")

    def _forget_marks(self, condition: str, epoch: int) -> None:
        psycopg = psycopg_module()

        def forget() -> None:
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10, **keepalive_options(self.dsn)) as conn:
                conn.execute(f"DELETE FROM {MARKS.qualified} WHERE prefix = %s AND {condition}", (self._prefix, epoch))

        retrying(psycopg, forget, self.retry_seconds, f"PostgresSink({self.table!r}): forgetting written marks")

    def prepared(self) -> list[int]:
        """The epochs of this sink prepared and not yet committed or rolled back."""
        psycopg = psycopg_module()

        def listed() -> list[int]:
            with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10, **keepalive_options(self.dsn)) as conn:
                return sorted(self._epochs(conn))

        return retrying(psycopg, listed, self.retry_seconds, f"PostgresSink({self.table!r}): listing prepared epochs")

    # -- details ---------------------------------------------------------------------

    def _finish(self, chosen: Callable[[int], bool], verb: str, *, vanished_ok: bool) -> None:
        """``verb`` every prepared epoch ``chosen`` picks; after a lost connection,
        listed again (an epoch finished before the loss is no longer prepared)."""
        psycopg = psycopg_module()
        retrying(
            psycopg,
            lambda: self._finish_once(psycopg, chosen, verb, vanished_ok=vanished_ok),
            self.retry_seconds,
            f"PostgresSink({self.table!r}): {verb}",
        )

    def _finish_once(self, psycopg: Any, chosen: Callable[[int], bool], verb: str, *, vanished_ok: bool) -> None:
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10, **keepalive_options(self.dsn)) as conn:
            for e in sorted(e for e in self._epochs(conn) if chosen(e)):
                try:
                    conn.execute(psycopg.sql.SQL(verb + " {}").format(psycopg.sql.Literal(f"{self._prefix}{e}")))
                except psycopg.errors.UndefinedObject as exc:
                    if vanished_ok:
                        continue
                    raise SinkError(
                        f"PostgresSink({self.table!r}): epoch {e}'s prepared transaction {self._prefix}{e} "
                        "vanished between listing and COMMIT PREPARED: something else finished it. Its rows "
                        "may be lost; check the table, and never resolve Falkirk's prepared transactions by hand."
                    ) from exc

    def _epochs(self, conn: Any) -> Iterable[int]:
        rows = conn.execute(
            "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND starts_with(gid, %s)",
            (self._prefix,),
        ).fetchall()
        for (gid,) in rows:
            tail = gid[len(self._prefix):]
            if tail.isdigit():
                yield int(tail)

    def _stamp(self, df: DataFrame, epoch: int) -> DataFrame:
        if self.epoch_column is None:
            return df
        return df.withColumn(self.epoch_column, F.lit(epoch).cast("long"))

    def _schema_name(self) -> str | None:
        parts = self.table.split(".")
        return parts[0] if len(parts) == 2 else None

    def _table_name(self) -> str:
        return self.table.split(".")[-1]

    def _ident(self, psycopg: Any) -> Any:
        return psycopg.sql.Identifier(*self.table.split("."))

    def _insert(self, psycopg: Any, schema: T.StructType) -> Any:
        """The epoch's INSERT (or upsert), with one ``%s`` parameter per column. A
        ``%`` in a name is doubled: the statement is run with parameters, and the
        driver reads ``%`` as the start of one (a column named ``a%sb`` would be)."""
        sql = psycopg.sql

        def ident(*names: str) -> Any:
            return sql.Identifier(*(n.replace("%", "%%") for n in names))

        names = [f.name for f in schema.fields]
        arrays = sql.SQL(", ").join(sql.SQL("%s::{}[]").format(sql.SQL(_pg_type(f, self.table))) for f in schema.fields)
        insert = sql.SQL("INSERT INTO {} ({}) SELECT * FROM unnest({})").format(
            ident(*self.table.split(".")), sql.SQL(", ").join(ident(n) for n in names), arrays
        )
        if self.mode == "append":
            return insert
        updates = [n for n in names if n not in self.key]
        action = (
            sql.SQL("DO UPDATE SET {}").format(
                sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(ident(n)) for n in updates)
            )
            if updates
            else sql.SQL("DO NOTHING")
        )
        return sql.SQL("{} ON CONFLICT ({}) {}").format(insert, sql.SQL(", ").join(ident(k) for k in self.key), action)


def _pg_type(f: T.StructField, table: str) -> str:
    for spark_type, pg in _PG_TYPES.items():
        if isinstance(f.dataType, spark_type):
            return pg
    raise SinkError(f"PostgresSink({table!r}): column {f.name!r} has type {f.dataType.simpleString()}, which it cannot write; cast it")


