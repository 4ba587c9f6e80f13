"""What the two drivers of a driver pair share, in PostgreSQL (Flux's dataflow pairs).

Two drivers run the same pipeline at once, each with its own storage root (its own
state and metadata). They agree through three tables of one PostgreSQL database,
all keyed by the pair's name, in the schema ``falkirk`` (:mod:`falkirk.storage.pg_tables`):

``falkirk.pair_members``
    one row per driver (a *member*, named by its storage root): where its root is
    and how far it got (committed epoch, released epoch, acknowledgeable epoch per
    source). The row outlives the driver, so a driver that starts later knows whose
    root is furthest ahead.
``falkirk.pair_epochs``
    the **ingress**: each epoch's input (every source's offsets), assigned once by
    whichever member plans the epoch first (``INSERT ... ON CONFLICT DO NOTHING``)
    and read by the other, so both process exactly the same input.
``falkirk.pair_egress``
    the **egress**: per sink and epoch, the member that writes it. The first member
    to reach an epoch's sink claims it and writes; the other waits until the write
    is done and takes its files instead of writing, or takes the claim over when
    the writer died before it was done. So one copy of each epoch reaches a sink.

**The lease.** A member holds a session-level advisory lock (``pg_advisory_lock``)
named after itself on its own connection for as long as it runs. PostgreSQL drops
the lock the moment that connection ends - the driver stopped, or its process was
killed (the kernel closes the socket), or, for a host that died or was cut off, once
the *server's* TCP keepalives and user timeout give up on the session (this store
sets them for its session: probes every second, dead after about 5-10 s) - so the
other member learns of a death without a timeout of its own. A member whose
connection is lost stops: every call raises :class:`PairError` (it never reconnects
under its old lease, which the other member may have taken over). So does a member
when the PostgreSQL server restarts or fails over: the pair's database must stay up.

**A dead member still counts.** Until it comes back (or is removed with
:meth:`PairStore.remove`), the other member acknowledges no input the dead one may
read again and keeps every row it may need: a member that returns always finds what
its own recovery replays.

The tables are created on first use. Rows of epochs every member has released
are deleted as members report progress (:meth:`PairStore.progress`), so they stay
few however long the pair runs.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from falkirk.redact import check_dsn, where_dsn
from falkirk.storage.exceptions import StorageError
from falkirk.storage.filesystem import StoredFile
from falkirk.storage.pg_tables import OwnTable, ensure

logger = logging.getLogger(__name__)

#: The pair's tables (:mod:`falkirk.storage.pg_tables`: schema ``falkirk``, owned by
#: the pair's user; rows of an earlier Falkirk's unqualified tables moved in).
TABLES = (
    OwnTable("pairs", "pair text PRIMARY KEY, id text NOT NULL", "falkirk_pairs"),
    OwnTable(
        "pair_members",
        "pair text NOT NULL, member text NOT NULL, root text NOT NULL, host text NOT NULL, "
        "pid integer NOT NULL, joining boolean NOT NULL DEFAULT true, committed bigint, released bigint, "
        "acknowledgeable jsonb NOT NULL DEFAULT '{}', updated timestamptz NOT NULL DEFAULT now(), "
        "PRIMARY KEY (pair, member)",
        "falkirk_pair_members",
    ),
    OwnTable(
        "pair_epochs",
        "pair text NOT NULL, epoch bigint NOT NULL, plan jsonb NOT NULL, planned_by text NOT NULL, PRIMARY KEY (pair, epoch)",
        "falkirk_pair_epochs",
    ),
    OwnTable(
        "pair_egress",
        "pair text NOT NULL, sink text NOT NULL, epoch bigint NOT NULL, member text NOT NULL, "
        "files jsonb, done boolean NOT NULL DEFAULT false, takeovers integer NOT NULL DEFAULT 0, "
        "PRIMARY KEY (pair, sink, epoch)",
        "falkirk_pair_egress",
    ),
)

#: How often a member waiting for the other's write of an epoch looks again (s).
POLL = 0.02
#: How long a member waits for a live member's write of one epoch before it stops
#: with an error (that member holds its lease but does not finish: hung).
MAX_WAIT = 1800.0


class PairError(StorageError):
    """The pair's database cannot be used (or this member lost its lease)."""


@dataclass(frozen=True)
class Member:
    """A member of the pair as recorded (``alive``: its lease is held now)."""

    name: str
    root: str
    host: str
    pid: int
    #: Joined and not yet recovered (it reported no progress since it joined).
    joining: bool
    committed: int | None
    released: int | None
    acknowledgeable: dict[str, int]
    alive: bool


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise PairError("driver pairs need psycopg 3: pip install 'falkirk[services]'") from exc
    return psycopg


class PairStore:
    """One member's view of the pair ``pair`` in the database ``dsn``; the member is
    named ``member`` (its storage root). :meth:`join` takes the lease; every other
    call needs it. Thread-safe (one connection, used under a lock)."""

    def __init__(self, dsn: str, pair: str, member: str) -> None:
        try:
            check_dsn(dsn, f"driver pair {pair!r}")
        except ValueError as exc:
            raise PairError(str(exc)) from None
        self.dsn = dsn
        self.pair = pair
        self.member = member
        self._lock = threading.Lock()
        self._conn: Any = None

    # -- the lease ----------------------------------------------------------------------

    def join(self, root: str, *, wait: float = 30.0) -> None:
        """Connect, take this member's lease and record the member as *joining*
        (no progress yet: the other member acknowledges no input until this one
        reports its own, see :meth:`ack_limit`). A live driver holding the same
        member's lease is waited for up to ``wait`` seconds, then refused."""
        self._conn = self._connect()
        with self._using() as conn:
            deadline = time.monotonic() + wait
            while not conn.execute("SELECT pg_try_advisory_lock(%s)", (self._key(self.member),)).fetchone()[0]:
                if time.monotonic() > deadline:
                    raise PairError(
                        f"member {self.member!r} of driver pair {self.pair!r} is already running (its lease in "
                        f"{_where(self.dsn)} is held); give this driver another storage root"
                    )
                time.sleep(0.1)
            conn.execute(
                "INSERT INTO falkirk.pair_members (pair, member, root, host, pid) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (pair, member) DO UPDATE SET root = excluded.root, host = excluded.host, "
                "pid = excluded.pid, joining = true, updated = now()",
                (self.pair, self.member, root, socket.gethostname(), os.getpid()),
            )

    def _connect(self) -> Any:
        """A connection with the server-side keepalives of :func:`keepalive_options`,
        the pair's tables created."""
        psycopg = _psycopg()
        try:
            conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=10, **keepalive_options(self.dsn))
        except psycopg.Error as exc:
            raise PairError(f"cannot connect to the driver pair's PostgreSQL ({_where(self.dsn)}): {exc}".strip()) from exc
        try:
            ensure(conn, TABLES, "falkirk-pair-tables", ("pair", self.pair))
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _briefly(self) -> Iterator[Any]:
        """A connection of its own, closed after use (no lease taken)."""
        conn = self._connect()
        try:
            yield conn
        finally:
            conn.close()

    def pair_id(self) -> str:
        """The pair's id in its database: random, made by the first member ever to
        connect, the same for every member however it spells the database's address.
        A pair started over under the same name after its rows were deleted gets a new
        one. (Names the pair's external writes.)"""
        with self._using() if self._conn is not None else self._briefly() as conn:
            conn.execute(
                "INSERT INTO falkirk.pairs (pair, id) VALUES (%s, %s) ON CONFLICT (pair) DO NOTHING",
                (self.pair, uuid.uuid4().hex[:16]),
            )
            return str(conn.execute("SELECT id FROM falkirk.pairs WHERE pair = %s", (self.pair,)).fetchone()[0])

    def leave(self) -> None:
        """Give up the lease (close the connection); the member's row stays."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextmanager
    def _using(self) -> Iterator[Any]:
        with self._lock:
            if self._conn is None:
                raise PairError(f"member {self.member!r} of driver pair {self.pair!r} has not joined (or left)")
            try:
                yield self._conn
            except _psycopg().OperationalError as exc:
                raise PairError(
                    f"lost the connection to the driver pair's PostgreSQL ({_where(self.dsn)}); this driver "
                    f"stops (its lease may have passed to the other member): {exc}".strip()
                ) from exc

    def _key(self, member: str) -> int:
        """The advisory-lock key of a member's lease (a stable 63-bit hash)."""
        import hashlib

        digest = hashlib.sha256(f"falkirk-pair:{self.pair}:{member}".encode()).digest()
        return int.from_bytes(digest[:8], "big") >> 1

    def _alive(self, conn: Any, member: str) -> bool:
        """Whether ``member``'s lease is held (this member: always)."""
        return member == self.member or self._held(conn, member)

    def _held(self, conn: Any, member: str) -> bool:
        """Whether ``member``'s lease is held by a session other than this one."""
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 "
            "AND ((classid::bigint << 32) | objid::bigint) = %s AND pid <> pg_backend_pid()",
            (self._key(member),),
        ).fetchone()
        return bool(row[0])

    # -- members --------------------------------------------------------------------------

    def members(self) -> list[Member]:
        """Every member recorded, this one included (also without :meth:`join`: an
        operator's view)."""
        with self._using() if self._conn is not None else self._briefly() as conn:
            rows = conn.execute(
                "SELECT member, root, host, pid, joining, committed, released, acknowledgeable FROM falkirk.pair_members "
                "WHERE pair = %s ORDER BY member",
                (self.pair,),
            ).fetchall()
            return [Member(m, r, h, p, j, c, rel, dict(a), self._alive(conn, m)) for m, r, h, p, j, c, rel, a in rows]

    def progress(self, committed: int, released: int, acknowledgeable: dict[str, int]) -> None:
        """Record this member's progress, and delete the pair's rows of epochs every
        member - live or dead - has released (no recovery of either reads them again)."""
        with self._using() as conn:
            conn.execute(
                "UPDATE falkirk.pair_members SET joining = false, committed = %s, released = %s, acknowledgeable = %s, "
                "updated = now() "
                "WHERE pair = %s AND member = %s",
                (committed, released, json.dumps(acknowledgeable), self.pair, self.member),
            )
        members = self.members()
        if all(m.released is not None and not m.joining for m in members):
            floor = min(m.released for m in members if m.released is not None)
            with self._using() as conn:
                conn.execute("DELETE FROM falkirk.pair_epochs WHERE pair = %s AND epoch <= %s", (self.pair, floor))
                conn.execute("DELETE FROM falkirk.pair_egress WHERE pair = %s AND epoch <= %s", (self.pair, floor))

    def remove(self, member: str) -> None:
        """Forget ``member`` for good (it will not come back: its root is gone), so
        that the pair acknowledges input and collects rows without waiting for it.
        Refused while it runs. Needs no :meth:`join`: an operator runs
        ``PairStore(dsn, pair, "operator").remove(dead_root)``."""
        if member == self.member and self._conn is not None:
            raise PairError(f"member {member!r} of driver pair {self.pair!r} cannot remove itself while it runs")
        with self._using() if self._conn is not None else self._briefly() as conn:
            if self._held(conn, member):
                raise PairError(f"member {member!r} of driver pair {self.pair!r} is running; stop it first")
            conn.execute("DELETE FROM falkirk.pair_members WHERE pair = %s AND member = %s", (self.pair, member))

    def ack_limit(self, source: str) -> int | None:
        """The last epoch of ``source`` the other members - live or dead - may no
        longer read: the least of their acknowledgeable epochs (0 while one is
        joining); None when there is no other member."""
        others = [m for m in self.members() if m.name != self.member]
        if not others:
            return None
        return min(0 if m.joining else m.acknowledgeable.get(source, 0) for m in others)

    # -- the ingress ------------------------------------------------------------------------

    def assigned(self, epoch: int) -> dict[str, Any] | None:
        """The plan of ``epoch`` a member recorded, if any."""
        with self._using() as conn:
            row = conn.execute(
                "SELECT plan FROM falkirk.pair_epochs WHERE pair = %s AND epoch = %s", (self.pair, epoch)
            ).fetchone()
            return None if row is None else dict(row[0])

    def assign(self, epoch: int, plan: dict[str, Any]) -> dict[str, Any]:
        """Record ``plan`` as ``epoch``'s input unless a member recorded one first;
        returns the plan that stands."""
        with self._using() as conn:
            conn.execute(
                "INSERT INTO falkirk.pair_epochs (pair, epoch, plan, planned_by) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (pair, epoch) DO NOTHING",
                (self.pair, epoch, json.dumps(plan), self.member),
            )
        stands = self.assigned(epoch)
        if stands is None:  # deleted by the other member's progress: the epoch is released everywhere
            raise PairError(f"epoch {epoch} of driver pair {self.pair!r} was released by the other member before this one planned it")
        return stands

    # -- the egress -------------------------------------------------------------------------

    def claim(self, sink: str, epoch: int) -> list[StoredFile] | None:
        """Whether this member writes ``epoch`` of ``sink``: None when it does (it
        claimed it, or took the claim of a member that died before finishing), else
        the files the other member wrote (waiting while a live member writes)."""
        started = time.monotonic()
        warned = started
        while True:
            with self._using() as conn:
                conn.execute(
                    "INSERT INTO falkirk.pair_egress (pair, sink, epoch, member) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (pair, sink, epoch) DO NOTHING",
                    (self.pair, sink, epoch, self.member),
                )
                owner, files, done = conn.execute(
                    "SELECT member, files, done FROM falkirk.pair_egress WHERE pair = %s AND sink = %s AND epoch = %s",
                    (self.pair, sink, epoch),
                ).fetchone()
                if done:
                    return [StoredFile(p, s, d) for p, s, d in files or []]
                if owner == self.member:
                    return None
                if not self._alive(conn, owner) and self._take_over(conn, sink, epoch, owner):
                    return None
            waited = time.monotonic() - started
            if waited > MAX_WAIT:
                raise PairError(
                    f"member {owner!r} of driver pair {self.pair!r} holds its lease but has not written {sink} "
                    f"epoch {epoch} in {waited:.0f} s: it is hung. Stop it (its lease ends with its connection)."
                )
            if time.monotonic() - warned > 30:
                warned = time.monotonic()
                logger.warning("waiting %.0f s for member %s of driver pair %s to write %s epoch %d", waited, owner, self.pair, sink, epoch)
            time.sleep(POLL)

    def _take_over(self, conn: Any, sink: str, epoch: int, owner: str) -> bool:
        """Take ``owner``'s unfinished claim, holding its lease meanwhile so that it
        cannot come back between the check and the update."""
        key = self._key(owner)
        if not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
            return False  # it came back
        try:
            taken = conn.execute(
                "UPDATE falkirk.pair_egress SET member = %s, takeovers = takeovers + 1 WHERE pair = %s AND sink = %s "
                "AND epoch = %s AND member = %s AND NOT done",
                (self.member, self.pair, sink, epoch, owner),
            ).rowcount
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        return bool(taken)

    def written(self, sink: str, epoch: int, files: list[StoredFile]) -> None:
        """This member's write of ``epoch`` of ``sink`` is done (durable): the other
        member takes ``files`` instead of writing."""
        with self._using() as conn:
            updated = conn.execute(
                "UPDATE falkirk.pair_egress SET done = true, files = %s WHERE pair = %s AND sink = %s AND epoch = %s "
                "AND member = %s",
                (json.dumps([[f.path, f.size, f.sha256] for f in files]), self.pair, sink, epoch, self.member),
            ).rowcount
        if not updated:  # it was taken over: this member's connection had been lost
            raise PairError(f"the claim on {sink} epoch {epoch} was taken over by the other member; this driver stops")

    @contextmanager
    def releasing(self, sink: str) -> Iterator[None]:
        """Hold the pair's release lock of ``sink`` (both members release the same
        prepared epochs: one at a time, so the second finds them done)."""
        key = self._key(f"release:{sink}")
        with self._using() as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        try:
            yield
        finally:
            with self._using() as conn:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def egress(self, sink: str) -> list[tuple[int, str, bool, int]]:
        """(epoch, member, done, takeovers) of every retained claim on ``sink``."""
        with self._using() as conn:
            return [
                (int(e), m, bool(d), int(t))
                for e, m, d, t in conn.execute(
                    "SELECT epoch, member, done, takeovers FROM falkirk.pair_egress WHERE pair = %s AND sink = %s "
                    "ORDER BY epoch",
                    (self.pair, sink),
                ).fetchall()
            ]


def _where(dsn: str) -> str:
    return where_dsn(dsn)


#: The server-side TCP settings of a session (``options``): the server drops the
#: session of a client whose host died or was cut off within about 5-10 s - its
#: advisory locks (a pair's lease) and open transactions go with it.
SERVER_KEEPALIVES = "-c tcp_keepalives_idle=1 -c tcp_keepalives_interval=1 -c tcp_keepalives_count=5 -c tcp_user_timeout=5000"


def keepalive_options(dsn: str) -> dict[str, Any]:
    """Connection keywords for ``dsn`` with keepalives on both sides (added to any
    ``options`` the DSN already has)."""
    from psycopg.conninfo import conninfo_to_dict

    options = str(conninfo_to_dict(dsn).get("options") or "")
    return {
        "keepalives": 1, "keepalives_idle": 1, "keepalives_interval": 1, "keepalives_count": 5,
        "tcp_user_timeout": 5000, "options": f"{options} {SERVER_KEEPALIVES}".strip(),
    }
