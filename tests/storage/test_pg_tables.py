"""Falkirk's own PostgreSQL tables (:mod:`falkirk.storage.pg_tables`) against a real
server: in the schema ``falkirk``, refused when another user created the schema or a
table first, and the rows of an earlier Falkirk's unqualified tables moved in - an
append-mode sink's marks included, also those a prepared transaction of the old
version adds after the move. Each test has a database of its own and connects as an
ordinary user (a superuser is a member of every role, so it would pass any check)."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from falkirk.storage.exceptions import StorageError
from falkirk.storage.pairs import TABLES, PairStore
from falkirk.storage.pg_tables import MARKS, ensure, move_legacy, present
from falkirk.testing.services import PostgresServer

LEGACY_MARKS = "CREATE TABLE falkirk_sink_epochs (prefix text NOT NULL, epoch bigint NOT NULL, PRIMARY KEY (prefix, epoch))"


class Database:
    """A fresh database with two ordinary users: ``app`` (Falkirk's) and ``other``."""

    def __init__(self, server: PostgresServer) -> None:
        self.server, self.name = server, f"t{uuid.uuid4().hex[:10]}"
        self.passwords = {"app": secrets.token_hex(8), "other": secrets.token_hex(8)}
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {self.name}")
            for user, password in self.passwords.items():
                role = f"{user}_{self.name}"
                conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
                conn.execute(f"GRANT CREATE, CONNECT ON DATABASE {self.name} TO {role}")
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute("GRANT ALL ON SCHEMA public TO PUBLIC")  # a writable public, as before PostgreSQL 15

    def dsn(self, user: str) -> str:
        if user == "postgres":
            return self.server.dsn.rsplit("/", 1)[0] + f"/{self.name}"
        return f"postgresql://{user}_{self.name}:{self.passwords[user]}@127.0.0.1:{self.server.port}/{self.name}"

    def connect(self, user: str) -> Any:
        return psycopg.connect(self.dsn(user), autocommit=True)


@pytest.fixture
def db(postgres_server: PostgresServer) -> Iterator[Database]:
    database = Database(postgres_server)
    yield database
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        for gid, in conn.execute("SELECT gid FROM pg_prepared_xacts WHERE database = %s", (database.name,)).fetchall():
            with database.connect("postgres") as inside:
                inside.execute(f"ROLLBACK PREPARED '{gid}'")
        conn.execute(f"DROP DATABASE {database.name} WITH (FORCE)")
        for user in database.passwords:
            conn.execute(f"DROP ROLE {user}_{database.name}")


def test_the_tables_are_created_in_the_schema_falkirk_owned_by_the_user(db: Database) -> None:
    with db.connect("app") as conn:
        assert ensure(conn, [MARKS, *TABLES], "test", ("prefix", "p:")) is False
        owners = conn.execute(
            "SELECT c.relname, c.relowner::regrole::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'falkirk' AND c.relkind = 'r' ORDER BY 1"
        ).fetchall()
    assert owners == [(t, f"app_{db.name}") for t in sorted(["sink_epochs", "pairs", "pair_members", "pair_epochs", "pair_egress"])]


@pytest.mark.parametrize("planted", ["schema", "table"])
def test_a_schema_or_table_another_user_created_first_is_refused(db: Database, planted: str) -> None:
    with db.connect("other") as conn:
        conn.execute("CREATE SCHEMA falkirk")
        if planted == "table":
            conn.execute("GRANT ALL ON SCHEMA falkirk TO PUBLIC")
            conn.execute("CREATE TABLE falkirk.sink_epochs (prefix text, epoch bigint, PRIMARY KEY (prefix, epoch))")
            conn.execute("INSERT INTO falkirk.sink_epochs VALUES ('p:', 1), ('p:', 2)")  # would skip epochs 1 and 2
    if planted == "table":  # the schema is the app's; only the table was planted
        with db.connect("postgres") as conn:
            conn.execute(f"ALTER SCHEMA falkirk OWNER TO app_{db.name}")
    with db.connect("app") as conn, pytest.raises(StorageError, match=rf"{planted} falkirk(\.sink_epochs)? belongs to other_{db.name}, not to app_{db.name}"):
        ensure(conn, [MARKS], "test", ("prefix", "p:"))


def test_a_schema_and_table_of_a_group_role_the_user_shares_are_refused(db: Database) -> None:
    """A role both users are members of: ``other`` could plant marks through it."""
    group = f"group_{db.name}"
    with db.connect("postgres") as conn:
        conn.execute(f"CREATE ROLE {group}")
        conn.execute(f"GRANT {group} TO app_{db.name}, other_{db.name}")
        conn.execute(f"GRANT CREATE ON DATABASE {db.name} TO {group}")
    try:
        with db.connect("other") as conn:
            conn.execute(f"SET ROLE {group}")
            conn.execute("CREATE SCHEMA falkirk")
            conn.execute("CREATE TABLE falkirk.sink_epochs (prefix text, epoch bigint, PRIMARY KEY (prefix, epoch))")
            conn.execute("INSERT INTO falkirk.sink_epochs VALUES ('p:', 1)")
        with db.connect("app") as conn, pytest.raises(StorageError, match=rf"schema falkirk belongs to {group}, not to app_{db.name}"):
            ensure(conn, [MARKS], "test", ("prefix", "p:"))
        with db.connect("app") as conn, pytest.raises(StorageError, match=rf"belongs to {group}"):
            present(conn, MARKS)  # what falkirk resolve reads marks from
    finally:
        with db.connect("postgres") as conn:
            conn.execute("DROP SCHEMA IF EXISTS falkirk CASCADE")
            conn.execute(f"REVOKE ALL ON DATABASE {db.name} FROM {group}")
            conn.execute(f"DROP ROLE {group}")


def test_resolve_reads_marks_only_from_tables_of_its_own(db: Database) -> None:
    """``falkirk resolve`` reads marks (``present``) before any driver of this version
    ran: a planted legacy table, or a planted table in a schema of the user's, is
    refused, not read (a planted mark would roll back an epoch the root keeps)."""
    with db.connect("other") as conn:
        conn.execute(LEGACY_MARKS)  # in public, found by the search path
        conn.execute("INSERT INTO falkirk_sink_epochs VALUES ('a:', 5)")
        conn.execute(f"GRANT SELECT ON falkirk_sink_epochs TO app_{db.name}")
    with db.connect("app") as conn, pytest.raises(StorageError, match=rf"falkirk_sink_epochs belongs to other_{db.name}"):
        present(conn, MARKS)
    with db.connect("other") as conn:
        conn.execute("DROP TABLE falkirk_sink_epochs")
    with db.connect("app") as conn:
        assert present(conn, MARKS) == []
        ensure(conn, [MARKS], "test", ("prefix", "a:"))
        assert present(conn, MARKS) == ["falkirk.sink_epochs"]


def test_marks_of_an_earlier_falkirk_are_moved_per_sink_and_the_old_table_dropped_once_empty(db: Database) -> None:
    with db.connect("app") as conn:
        conn.execute(LEGACY_MARKS)
        conn.execute("INSERT INTO falkirk_sink_epochs VALUES ('a:', 1), ('a:', 2), ('b:', 7)")
        assert ensure(conn, [MARKS], "test", ("prefix", "a:")) is True
        assert conn.execute("SELECT * FROM falkirk.sink_epochs ORDER BY 1, 2").fetchall() == [("a:", 1), ("a:", 2)]
        assert conn.execute("SELECT * FROM public.falkirk_sink_epochs").fetchall() == [("b:", 7)]  # another sink's
        ensure(conn, [MARKS], "test", ("prefix", "b:"))
        assert conn.execute("SELECT * FROM falkirk.sink_epochs ORDER BY 1, 2").fetchall() == [("a:", 1), ("a:", 2), ("b:", 7)]
        assert conn.execute("SELECT to_regclass('public.falkirk_sink_epochs')").fetchone() == (None,)


def test_a_mark_an_old_prepared_transaction_adds_after_the_move_is_moved_too(db: Database) -> None:
    """Epoch 3 was prepared by the old version (its mark in the old table, invisible
    until committed, the table locked): the move keeps the table, and once the
    sink commits epoch 3 the next move takes its mark and drops the table."""
    with db.connect("app") as conn:
        conn.execute(LEGACY_MARKS)
        conn.execute("INSERT INTO falkirk_sink_epochs VALUES ('a:', 1), ('a:', 2)")
    old = psycopg.connect(db.dsn("app"))
    old.tpc_begin("falkirk:a:3")
    old.execute("INSERT INTO falkirk_sink_epochs VALUES ('a:', 3)")
    old.tpc_prepare()
    old.close()
    with db.connect("app") as conn:
        assert ensure(conn, [MARKS], "test", ("prefix", "a:")) is True
        assert conn.execute("SELECT to_regclass('public.falkirk_sink_epochs')").fetchone() == ("falkirk_sink_epochs",)
        conn.execute("COMMIT PREPARED 'falkirk:a:3'")
        with conn.transaction():
            assert move_legacy(conn, MARKS, ("prefix", "a:")) == 1
        assert conn.execute("SELECT epoch FROM falkirk.sink_epochs ORDER BY 1").fetchall() == [(1,), (2,), (3,)]
        assert conn.execute("SELECT to_regclass('public.falkirk_sink_epochs')").fetchone() == (None,)


def test_an_old_table_of_another_user_is_not_read(db: Database) -> None:
    with db.connect("other") as conn:
        conn.execute(LEGACY_MARKS)
        conn.execute("INSERT INTO falkirk_sink_epochs VALUES ('a:', 1)")
        conn.execute(f"GRANT ALL ON falkirk_sink_epochs TO app_{db.name}")
    with db.connect("app") as conn, pytest.raises(StorageError, match=rf"falkirk_sink_epochs .* belongs to other_{db.name}"):
        ensure(conn, [MARKS], "test", ("prefix", "a:"))
    with db.connect("app") as conn:
        assert conn.execute("SELECT to_regclass('falkirk.sink_epochs')").fetchone() == (None,)  # rolled back


def test_a_pair_moves_its_own_rows(db: Database) -> None:
    with db.connect("app") as conn:
        conn.execute("CREATE TABLE falkirk_pairs (pair text PRIMARY KEY, id text NOT NULL)")
        conn.execute("INSERT INTO falkirk_pairs VALUES ('mine', 'id-1'), ('theirs', 'id-2')")
    pair = PairStore(db.dsn("app"), "mine", "a")
    assert pair.pair_id() == "id-1"  # the id recorded before the move
    with db.connect("app") as conn:
        assert conn.execute("SELECT * FROM falkirk.pairs").fetchall() == [("mine", "id-1")]
        assert conn.execute("SELECT * FROM falkirk_pairs").fetchall() == [("theirs", "id-2")]
