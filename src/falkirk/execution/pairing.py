"""The engine's side of a driver pair: joining it (and catching up from the other
member's root when behind it), and the shared store (:mod:`falkirk.storage.pairs`)
with crash points at the egress's two moments, for the crash tests.

``pair.claimed`` (this driver claimed an epoch of a sink and writes it; nothing
written yet) and ``pair.written`` (the epoch is written, the other driver not yet
told: a death here leaves an unfinished claim the other driver takes over and writes
again, replacing the file with the same rows).
"""

from __future__ import annotations

import socket
from pathlib import Path

from pyspark.sql import SparkSession

from falkirk.control.faults import CrashPoint, crash_point
from falkirk.execution.checks import recorded_facts
from falkirk.graph import GraphError
from falkirk.storage import MetaStore, StoredFile
from falkirk.storage.catchup import copy_root
from falkirk.storage.filesystem import FileSystem, filesystem_for, is_uri
from falkirk.storage.identity import IDENTITY, PAIR_MEMBER, IdentityError, RootIdentity
from falkirk.storage.pairs import PairStore
from falkirk.storage.schema import DB_NAME


class Pair(PairStore):
    """A :class:`PairStore` whose egress passes the pair's crash points."""

    def claim(self, sink: str, epoch: int) -> list[StoredFile] | None:
        theirs = super().claim(sink, epoch)
        if theirs is None:
            crash_point(CrashPoint.PAIR_CLAIMED)
        return theirs

    def written(self, sink: str, epoch: int, files: list[StoredFile]) -> None:
        crash_point(CrashPoint.PAIR_WRITTEN)
        super().written(sink, epoch, files)


def join_pair(pair: PairStore, meta_dir: Path, fs: FileSystem, root: str, spark: SparkSession) -> str | None:
    """Join the driver pair. A driver whose root has nothing committed (a new member,
    or one whose root was lost) first copies the committed state of the member that
    got furthest (catch-up by state movement), to recover from it as a restarted
    driver would: the input of the pair's first epochs may be gone. A driver with a
    root of its own recovers from it: the pair kept what its recovery reads (a dead
    member still counts, see :mod:`falkirk.storage.pairs`). Returns the root copied
    from, if any."""
    pair.join(root)
    if (meta_dir / DB_NAME).exists():
        store = MetaStore(meta_dir, fs=fs, root=root, read_only=True)
        try:
            if store.committed_epoch():
                return None
        finally:
            store.close()
    others = [m for m in pair.members() if m.name != pair.member and m.committed]
    best = max(others, key=lambda m: m.committed or 0, default=None)
    if best is None:
        return None
    if not is_uri(best.root) and best.host != socket.gethostname():
        raise GraphError(
            f"this driver must catch up from member {best.root!r} of the pair, a local directory on "
            f"host {best.host}: give the pair's members Hadoop URI roots (or one shared filesystem)"
        )
    src_fs, src_root = filesystem_for(best.root, spark)
    copy_root(src_fs, src_root, fs, root, meta_dir)
    return best.root


def join_member(
    dsn: str, name: str, pipeline: str, meta_dir: Path, fs: FileSystem, root: str, spark: SparkSession
) -> tuple[Pair, RootIdentity, str | None]:
    """Join driver pair ``name`` in the database ``dsn`` as the member whose root is
    ``root`` (catching up from the other member's root if this one has nothing
    committed, :func:`join_pair`): the pair, the identity its members share, and the
    root copied from, if any. The member keeps the name it first joined under,
    recorded in its root, however the root is reached now. A root written under
    another identity is refused before joining, leaving no trace."""
    facts = recorded_facts(meta_dir, fs, root)
    pair = Pair(dsn, name, facts.get(PAIR_MEMBER) or root)
    identity = RootIdentity.of_pair(pipeline, pair.pair_id())
    known = facts.get(IDENTITY)
    if known is not None and known != identity.value:
        raise IdentityError(
            f"this storage root was written under identity {known}, not {identity}: a driver pair's "
            "members need roots of their own pair (start a member on a fresh root: it catches up from the "
            "other), and a lone driver a root no pair used"
        )
    try:
        copied = join_pair(pair, meta_dir, fs, root, spark)
    except BaseException:
        pair.leave()  # a failed catch-up gives up the lease it took
        raise
    return pair, identity, copied
