"""A storage root's in-doubt external transactions: listed, resolved, and a root forked.

A :class:`~falkirk.io.postgres.PostgresSink` prepares each epoch's transaction
(``falkirk:<identity>:<sink>:<epoch>``, see :mod:`falkirk.storage.identity`) and a
later run of the root commits or rolls it back, deciding from the root's committed
metadata. Until then the transaction is *in doubt*: durable, invisible, and (in
upsert mode) holding its rows' locks.

* :func:`in_doubt` lists them per sink (``falkirk status``): the root's own, and those
  of the same pipeline and sink under other identities - left by a Falkirk that named
  transactions after the root's path, or by another root of the pipeline.
* :func:`resolve` (``falkirk resolve ROOT --identity OLD``) resolves those left under
  an old identity of this root exactly as this root's next run would resolve its own:
  an epoch at or below the sink's recovery frontier (what a restart keeps) is
  committed unless this root wrote it again under its own identity; the others are
  rolled back.
* :func:`fork` (``falkirk fork ROOT``) gives a copied root an identity of its own,
  refused while the old identity has in-doubt transactions or a running driver.

The sinks' databases are found from the root's pipeline description, which records
each sink's DSN without its password: the password comes from libpq's environment
(``PGPASSWORD``, ``~/.pgpass``), or the whole DSN from ``--dsn SINK=DSN``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from falkirk.control.domains import tick
from falkirk.recovery import solve
from falkirk.recovery.scenario import parse_scenario
from falkirk.redact import where_dsn
from falkirk.storage import MetaStore, RootLock, StorageError
from falkirk.storage.identity import (
    IdentityError,
    RootIdentity,
    lease_key,
    parse_transaction,
    recorded,
    transaction_prefix,
)
from falkirk.storage.identity import fork as fork_identity
from falkirk.storage.pg_tables import MARKS, present

#: How long a tool waits for a sink's database (s).
CONNECT_TIMEOUT = 5


@dataclass(frozen=True)
class Target:
    """A PostgreSQL sink of the root and how to reach its database."""

    sink: str
    dsn: str

    @property
    def where(self) -> str:
        return where_dsn(self.dsn)


@dataclass
class SinkDoubt:
    """The in-doubt transactions of one sink (``error``: its database could not be
    asked; the lists are then empty)."""

    sink: str
    where: str
    #: Epochs prepared under the root's own identity.
    mine: list[int] = field(default_factory=list)
    #: Per other identity of the same pipeline, the epochs it left prepared.
    others: dict[str, list[int]] = field(default_factory=dict)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"sink": self.sink, "where": self.where, "mine": self.mine, "others": self.others, "error": self.error}


@dataclass(frozen=True)
class Resolution:
    """What :func:`resolve` did with one transaction, and why."""

    sink: str
    name: str
    epoch: int
    verb: str
    why: str


def targets(description: dict[str, Any], dsns: dict[str, str] | None = None) -> list[Target]:
    """The PostgreSQL sinks the pipeline description records; ``dsns`` (sink ->
    DSN) replaces the recorded DSN (which has no password)."""
    dsns = dict(dsns or {})
    found = []
    for name, info in description["processors"].items():
        target = info.get("target") or {}
        if target.get("kind") == "postgresql":
            found.append(Target(name, dsns.pop(name, "") or target["dsn"]))
    if dsns:
        known = [t.sink for t in found]
        raise StorageError(f"--dsn names sinks {sorted(dsns)}, which are not PostgreSQL sinks of this root ({known or 'none'})")
    return found


@contextmanager
def _connected(target: Target) -> Iterator[Any]:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise StorageError("looking at PostgreSQL sinks needs psycopg 3: pip install 'falkirk[services]'") from exc
    try:
        conn = psycopg.connect(target.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
    except psycopg.Error as exc:
        raise StorageError(
            f"cannot connect to sink {target.sink!r}'s PostgreSQL at {target.where} ({str(exc).strip().splitlines()[0]}); "
            f"give its password in PGPASSWORD or ~/.pgpass, or its whole DSN with --dsn {target.sink}=DSN"
        ) from exc
    try:
        yield conn
    finally:
        conn.close()


def _prepared(conn: Any) -> list[tuple[str, str, int, str]]:
    """(identity, sink, epoch, name) of every Falkirk transaction prepared in the database."""
    rows = conn.execute(
        "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND starts_with(gid, 'falkirk:')"
    ).fetchall()
    return [(*parsed, gid) for (gid,) in rows if (parsed := parse_transaction(gid)) is not None]


def _pipeline_of(identity: str) -> str:
    return identity.rsplit(".", 1)[0]


def in_doubt(description: dict[str, Any], identity: RootIdentity, dsns: dict[str, str] | None = None) -> list[SinkDoubt]:
    """Per PostgreSQL sink, its in-doubt transactions (see the module docstring);
    a database that cannot be asked is reported in ``error``, not raised."""
    found = []
    for target in targets(description, dsns):
        doubt = SinkDoubt(target.sink, target.where)
        try:
            with _connected(target) as conn:
                for who, sink, epoch, _ in _prepared(conn):
                    if sink != target.sink:
                        continue
                    if who == identity.value:
                        doubt.mine.append(epoch)
                    elif _pipeline_of(who) == _pipeline_of(identity.value):
                        doubt.others.setdefault(who, []).append(epoch)
        except StorageError as exc:
            doubt.error = str(exc)
        doubt.mine.sort()
        for epochs in doubt.others.values():
            epochs.sort()
        found.append(doubt)
    return found


@contextmanager
def _held(storage: str, writable: bool = True) -> Iterator[MetaStore]:
    """The root's metadata, with its lock held (no driver runs meanwhile); not
    ``writable``: opened read-only (a dry run neither writes nor upgrades it)."""
    if "://" in storage and not storage.startswith("file://"):
        raise StorageError(f"{storage}: resolving and forking work on local storage roots only (copy the root to a local directory)")
    root = Path(storage.removeprefix("file://"))
    if not (root / "meta.sqlite").is_file():
        raise StorageError(f"{root} holds no metadata (meta.sqlite): no pipeline has run on this storage root")
    lock = RootLock(root)
    lock.acquire()
    try:
        store = MetaStore(root, read_only=not writable)
        try:
            yield store
        finally:
            store.close()
    finally:
        lock.release()


def sink_frontiers(store: MetaStore, description: dict[str, Any]) -> dict[str, int]:
    """Per sink, the last epoch a driver started now would keep (its recovery
    frontier; 0 when nothing is committed): later epochs are written again."""
    topology = parse_scenario(description["topology"]).topology
    stored = store.checkpoints(topology)
    sinks = [name for name, info in description["processors"].items() if info["sink"]]
    if not any(stored.values()):
        return dict.fromkeys(sinks, 0)
    plan = solve(topology, {p: [s.meta for s in ss] for p, ss in stored.items()})
    return {name: tick(plan.frontiers[name]).epochs_done for name in sinks}


def resolve(storage: str, old: str, dsns: dict[str, str] | None = None, *, dry_run: bool = False) -> list[Resolution]:
    """Commit or roll back the transactions this root left under its old identity
    ``old`` (see the module docstring), with the root's lock held. ``dry_run``: say
    what would be done, do nothing."""
    with _held(storage, writable=not dry_run) as store:
        description = store.description()
        identity = recorded(store)
        if description is None or identity is None:
            raise StorageError(f"{storage} has no recorded pipeline: run it once with this Falkirk first")
        if old == identity.value:
            raise StorageError(f"{old} is this root's own identity: its next run resolves those transactions itself")
        frontiers = sink_frontiers(store, description)
        done: list[Resolution] = []
        for target in targets(description, dsns):
            mine = transaction_prefix(identity.value, target.sink)
            table = str(description["processors"][target.sink]["target"]["table"])
            with _connected(target) as conn:
                _refuse_if_running(conn, old, target)
                for who, sink, epoch, name in _prepared(conn):
                    if who != old or sink != target.sink:
                        continue
                    _refuse_if_another_table(conn, name, table, target)
                    marks = "".join(f" UNION ALL SELECT 1 FROM {t} WHERE prefix = %s AND epoch = %s" for t in present(conn, MARKS))
                    again = conn.execute(
                        "SELECT 1 FROM pg_prepared_xacts WHERE gid = %s" + marks,  # names: regclass texts
                        (f"{mine}{epoch}", *[mine, epoch] * marks.count("UNION")),
                    ).fetchone()
                    kept = frontiers.get(target.sink, 0)
                    if again:
                        verb, why = "ROLLBACK PREPARED", f"this root wrote epoch {epoch} again as {identity}"
                    elif epoch <= kept:
                        verb, why = "COMMIT PREPARED", f"the root keeps epochs up to {kept} of this sink"
                    else:
                        verb, why = "ROLLBACK PREPARED", f"after epoch {kept}, where the root's next run resumes this sink"
                    if not dry_run:
                        from psycopg import sql

                        conn.execute(sql.SQL(verb + " {}").format(sql.Literal(name)))
                    done.append(Resolution(target.sink, name, epoch, verb, why))
        return done


def _refuse_if_running(conn: Any, identity: str, target: Target) -> None:
    """Refuse while a driver of ``identity`` runs against the sink's database (it
    holds its lease there): its transactions are its own to resolve."""
    key = lease_key(transaction_prefix(identity, target.sink))
    if not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
        raise IdentityError(
            f"a driver of identity {identity} is running against sink {target.sink!r} ({target.where}): its "
            "transactions are its own; nothing was resolved"
        )
    conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


def _refuse_if_another_table(conn: Any, name: str, table: str, target: Target) -> None:
    """Refuse a transaction that writes another table than this root's sink does:
    it belongs to another root of the same pipeline (the locks a prepared
    transaction holds name the tables it wrote)."""
    written = {
        (schema, relation)
        for schema, relation in conn.execute(
            "SELECT DISTINCT n.nspname, c.relname FROM pg_prepared_xacts p "
            "JOIN pg_locks x ON x.locktype = 'transactionid' AND x.transactionid = p.transaction AND x.pid IS NULL "
            "JOIN pg_locks l ON l.virtualtransaction = x.virtualtransaction AND l.locktype = 'relation' AND l.pid IS NULL "
            "JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE p.gid = %s AND p.database = current_database() AND c.relkind IN ('r', 'p') "
            "AND c.relname <> 'falkirk_sink_epochs' AND NOT (n.nspname = 'falkirk' AND c.relname = 'sink_epochs')",
            (name,),
        ).fetchall()
    }
    schema, _, relation = table.rpartition(".")
    current = str(conn.execute("SELECT current_schema()").fetchone()[0])
    if written != {(schema or current, relation)}:
        tables = ", ".join(sorted(f"{s}.{r}" for s, r in written)) or "no table"
        raise IdentityError(
            f"transaction {name} wrote {tables}, not sink {target.sink!r}'s table {table}: it belongs to another "
            "root of this pipeline, and that root's next run resolves it; nothing was resolved"
        )


def fork(storage: str, dsns: dict[str, str] | None = None) -> tuple[RootIdentity | None, RootIdentity]:
    """Give the (copied) root at ``storage`` an identity of its own: its external
    writes are then its own, not the original's. Refused while a driver of the old
    identity runs against a sink's database (its lease is held) or the old identity
    has in-doubt transactions there: the original must resolve them first (run it,
    or ``falkirk resolve``). Returns (old, new)."""
    with _held(storage) as store:
        description = store.description()
        if description is None:
            raise StorageError(f"{storage} has no recorded pipeline: run it once with this Falkirk first")
        identity = recorded(store)
        if identity is not None:
            for target in targets(description, dsns):
                with _connected(target) as conn:
                    prefix = transaction_prefix(identity.value, target.sink)
                    if not conn.execute("SELECT pg_try_advisory_lock(%s)", (lease_key(prefix),)).fetchone()[0]:
                        raise IdentityError(
                            f"a driver of identity {identity} is running against sink {target.sink!r} "
                            f"({target.where}): stop it before forking a copy of its root"
                        )
                    conn.execute("SELECT pg_advisory_unlock(%s)", (lease_key(prefix),))
                    epochs = sorted(e for who, sink, e, _ in _prepared(conn) if who == identity.value and sink == target.sink)
                    if epochs:
                        raise IdentityError(
                            f"identity {identity} has in-doubt transactions of sink {target.sink!r} at {target.where} "
                            f"(epochs {epochs}): a fork would leave them unresolved. Run the original root (or this "
                            "copy, as a restore) until they are released, then fork"
                        )
        old, new = fork_identity(store, str(description["pipeline"]))
        store.describe(str(description["pipeline"]), {**description, "identity": new.value})
        return old, new
