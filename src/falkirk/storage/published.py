"""Metadata of a storage root on a remote (Hadoop) filesystem, and its fencing.

SQLite needs a local file with POSIX locks, which HDFS or S3 do not offer. For a
remote root the database therefore lives in a local working directory, and every
committed transaction is *published* to the root as a numbered, immutable copy
``<root>/_meta/meta-<seq>.sqlite`` (the SQLite bytes, then a trailer with their
SHA-256, so a damaged copy is detected, a flipped bit included):

1. copy the database (SQLite online backup) to a local temporary file;
2. check that this driver still holds the root's lease (no newer driver claimed it)
   and that no copy newer than its own was published;
3. upload it under a temporary name;
4. rename it to the next sequence number *without replacing*: if that name exists,
   another driver published first and this one is fenced (:class:`StorageInUseError`);
   the commit does not count;
5. check that the copy is the newest (a driver that stalled for several commits of
   another could otherwise reuse a collected name);
6. delete copies older than the previous one.

A commit counts once step 5 has passed: every published copy extends the one before,
so no acknowledged commit is ever lost to a second driver. On start the newest copy
is downloaded over the working copy: whatever the local disk holds (a commit that
was never published, or nothing at all on a fresh machine) the root is the truth,
and a driver on any machine can recover it.

**The lease.** A driver takes the root by creating ``_meta/driver-<n>.json`` for the
next generation n (a rename that cannot replace) after checking that the holder of
the newest generation is gone: it released the root, or its process is dead (same
host), or its heartbeat (``driver-<n>.beat``, rewritten every ``lease_interval``
seconds) has not changed for ``lease_timeout`` seconds (another host). A live holder
makes a second driver fail fast (:class:`StorageInUseError` naming it), or, as a
standby, wait. A driver checks its lease before every publish and stops if a newer
generation exists. Having taken the lease, a driver *claims* the root by publishing
what it downloaded (:meth:`PublishedMetadata.claim`): from then on an older driver
can never commit again (step 4 or 5 refuses it), so its uploads and uncommitted data
files are garbage, and only then are they deleted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from falkirk.storage.exceptions import CorruptStorageError, StorageInUseError
from falkirk.storage.filesystem import FileSystem
from falkirk.storage.permissions import cache_dir, private_dir

logger = logging.getLogger(__name__)

META_DIR = "_meta"
_NAME = re.compile(r"meta-(\d{12})\.sqlite$")
_DRIVER = re.compile(r"driver-(\d{12})\.json$")
_TMP = re.compile(r"_tmp-(\d{12})-")
#: The trailer of a published copy: a magic word, then the SHA-256 of the bytes before.
MAGIC = b"FALKIRK-META-1\n\x00"
TRAILER = len(MAGIC) + 32


def default_metadata_dir(root: str) -> Path:
    """Where a driver works on the metadata of remote ``root`` unless told otherwise:
    ``<Falkirk's cache>/<hash of the URI>`` (see :mod:`falkirk.storage.permissions`).
    Only a cache: the published copies in the root are the truth."""
    return cache_dir() / hashlib.sha256(root.encode()).hexdigest()[:16]


def host_name() -> str:
    """This machine's name in leases: ``$FALKIRK_HOST`` if set (containers that share
    a host name but not a process table must set it apart), else the host name."""
    return os.environ.get("FALKIRK_HOST") or socket.gethostname()


def process_start(pid: int) -> str | None:
    """A token that differs between two processes that had the same pid (its start
    time in clock ticks, from /proc), or None where /proc is not available."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def process_alive(pid: int, start: str | None) -> bool:
    """Whether process ``pid`` (started at ``start``, see :func:`process_start`) runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    return start is None or process_start(pid) in (None, start)


class PublishedMetadata:
    """The published copies of one remote root's metadata, and its lease (see the
    module docstring). ``before_publish`` runs between upload and rename (a crash
    point for tests)."""

    def __init__(
        self,
        fs: FileSystem,
        root: str,
        local_dir: str | Path,
        db_name: str,
        *,
        before_publish: Callable[[], None] = lambda: None,
        lease_interval: float = 2.0,
        lease_timeout: float = 10.0,
    ) -> None:
        if not 0 < lease_interval < lease_timeout:
            raise ValueError(f"need 0 < lease_interval ({lease_interval}) < lease_timeout ({lease_timeout})")
        self.fs = fs
        self.before_publish = before_publish
        self.directory = fs.join(root, META_DIR)
        self.local_dir = Path(local_dir)
        self.db_name = db_name
        self.lease_interval = lease_interval
        self.lease_timeout = lease_timeout
        self.seq = 0
        #: This driver's lease generation (0: not holding the root).
        self.generation = 0
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    # -- listing --------------------------------------------------------------------

    def _entries(self, pattern: re.Pattern[str]) -> dict[int, str]:
        found: dict[int, str] = {}
        for path, is_dir in self.fs.children(self.directory):
            match = pattern.search(path)
            if match and not is_dir:
                found[int(match.group(1))] = path
        return found

    def _published(self) -> dict[int, str]:
        return self._entries(_NAME)

    def _path(self, name: str) -> str:
        return self.fs.join(self.directory, name)

    # -- the lease ------------------------------------------------------------------

    def acquire(self, *, wait: bool = False, poll_interval: float = 0.2) -> None:
        """Take the root's lease (see the module docstring): raise
        :class:`StorageInUseError` naming the holder if a live driver holds it, or,
        with ``wait``, wait until it is gone."""
        self.fs.mkdirs(self.directory)
        while True:
            drivers = self._entries(_DRIVER)
            newest = max(drivers, default=0)
            holder = self._holder(newest) if newest else None
            if holder is not None:
                if wait:
                    time.sleep(poll_interval)
                    continue
                raise StorageInUseError(
                    f"storage root {self.directory.rsplit('/', 1)[0]} is in use by {holder}; stop that "
                    "driver first, give this one another storage root, or run it as a standby"
                )
            if self._take(newest + 1):
                break
        self._stop.clear()
        self._beat = threading.Thread(target=self._heartbeat, name="falkirk-lease", daemon=True)
        self._beat.start()
        for generation, path in drivers.items():  # keep the previous holder's, for people
            if generation < newest:
                for suffix in (".json", ".beat", ".released"):
                    self.fs.delete(path.removesuffix(".json") + suffix)

    def _holder(self, generation: int) -> str | None:
        """Who holds ``generation`` if it is still live, else None."""
        base = self._path(f"driver-{generation:012d}")
        if self.fs.size(f"{base}.released") is not None:
            return None
        raw = self._read(f"{base}.json") or b"{}"
        try:
            info = json.loads(raw)
        except ValueError:
            raise CorruptStorageError(
                f"lease file {base}.json is damaged ({raw[:60]!r}); if no driver runs on this storage "
                "root, delete it and start again"
            ) from None
        who = f"driver #{generation}: pid {info.get('pid')} on {info.get('host')}"
        if info.get("host") == host_name():
            return who if process_alive(int(info.get("pid", 0)), info.get("start")) else None
        seen = self._read(f"{base}.beat")
        deadline = time.monotonic() + self.lease_timeout
        while time.monotonic() < deadline:  # another host: is its heartbeat moving?
            time.sleep(min(self.lease_interval / 2, max(deadline - time.monotonic(), 0)))
            if self._read(f"{base}.beat") != seen:
                return who
        return None

    def _take(self, generation: int) -> bool:
        info = {
            "pid": os.getpid(),
            "start": process_start(os.getpid()),
            "host": host_name(),
            "since": time.time(),
            "interval": self.lease_interval,
        }
        staged = self._upload_bytes(json.dumps(info).encode(), generation)
        if not self.fs.rename_new(staged, self._path(f"driver-{generation:012d}.json")):
            self.fs.delete(staged)
            return False  # another driver took this generation first
        self.generation = generation
        self._write_beat(0)
        return True

    def _heartbeat(self) -> None:
        count = 0
        while not self._stop.wait(self.lease_interval):
            count += 1
            try:
                self._write_beat(count)
            except Exception:  # the next publish checks the lease anyway
                logger.warning("lease heartbeat failed generation=%d", self.generation, exc_info=True)

    def _write_beat(self, count: int) -> None:
        staged = self._upload_bytes(str(count).encode(), self.generation)
        self.fs.replace(staged, self._path(f"driver-{self.generation:012d}.beat"))

    def _check_lease(self) -> None:
        if not self.generation:
            raise StorageInUseError(f"{self.directory}: this driver does not hold the storage root; call acquire() first")
        newer = [g for g in self._entries(_DRIVER) if g > self.generation]
        if newer:
            raise StorageInUseError(
                f"{self.directory}: driver #{max(newer, default=0)} took this storage root from this "
                f"driver (#{self.generation}), which therefore stops: its last commit does not count. "
                "Let the other driver run, or stop it and restart this one."
            )

    def release(self) -> None:
        """Give the root up (a clean stop): the next driver need not wait."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
            self._beat = None
        if self.generation:
            staged = self._upload_bytes(b"released", self.generation)
            self.fs.replace(staged, self._path(f"driver-{self.generation:012d}.released"))
            self.generation = 0

    # -- copies ---------------------------------------------------------------------

    def fetch(self) -> None:
        """Replace the local working copy by the newest published copy (or remove it
        when nothing was published yet); a damaged copy raises
        :class:`CorruptStorageError`."""
        private_dir(self.local_dir)
        local = self.local_dir / self.db_name
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{local}{suffix}").unlink(missing_ok=True)
        published = self._published()
        self.seq = max(published, default=0)
        if not self.seq:
            return
        source = published[self.seq]
        self.fs.download(source, str(local))
        expected = self.fs.size(source)
        if local.stat().st_size != expected:
            raise CorruptStorageError(f"downloading {source} gave {local.stat().st_size} bytes, {expected} expected")
        _strip_trailer(local, source)
        try:
            with sqlite3.connect(local) as db:
                verdict = db.execute("PRAGMA integrity_check").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            verdict = str(exc)
        if verdict != "ok":
            raise CorruptStorageError(f"published metadata {source} is damaged ({verdict}); it is not used")

    def claim(self, db: sqlite3.Connection) -> None:
        """Publish what :meth:`fetch` gave as this driver's first copy, then delete
        uploads of older drivers: none of them can commit any more."""
        self.publish(db)
        for generation, path in self._entries(_TMP).items():
            if generation < self.generation:
                self.fs.delete(path)

    def publish(self, db: sqlite3.Connection) -> None:
        """Publish the committed state of ``db`` as the next copy (steps 1-6)."""
        # Step 1
        snapshot = self.local_dir / f"publish-{uuid.uuid4().hex[:12]}.sqlite"
        target = sqlite3.connect(snapshot)
        try:
            db.backup(target)
        finally:
            target.close()
        try:
            _add_trailer(snapshot)
            # Step 2
            self._check_lease()
            newer = [s for s in self._published() if s > self.seq]
            if newer:
                raise StorageInUseError(
                    f"{self.directory} holds metadata #{max(newer)} that this driver did not "
                    f"write (it is at #{self.seq}): another driver uses this storage root. "
                    "Stop one of them; the survivor must restart to recover."
                )
            # Step 3
            tmp = self._path(f"_tmp-{self.generation:012d}-{uuid.uuid4().hex[:12]}")
            self.fs.upload(str(snapshot), tmp)
            self.before_publish()
            # Step 4
            name = self._path(f"meta-{self.seq + 1:012d}.sqlite")
            try:
                renamed = self.fs.rename_new(tmp, name)
            except Exception as exc:
                if self.fs.size(tmp) is not None:
                    raise
                raise StorageInUseError(  # a driver that took the root over removed it
                    f"{self.directory}: this driver's upload of metadata #{self.seq + 1} was removed by "
                    "a driver that took this storage root over; this commit does not count."
                ) from exc
            if not renamed:
                self.fs.delete(tmp)
                raise StorageInUseError(
                    f"{self.directory}: another driver published metadata #{self.seq + 1} first; "
                    "this driver's commit does not count and it stops."
                )
            # Step 5
            newest = max(self._published())
            if newest != self.seq + 1:
                self.fs.delete(name)
                raise StorageInUseError(
                    f"{self.directory}: metadata #{newest} was published while this driver was at "
                    f"#{self.seq}: another driver uses this storage root; this commit does not count."
                )
            self.seq += 1
        finally:
            snapshot.unlink(missing_ok=True)
        # Step 6
        for seq, path in self._published().items():
            if seq < self.seq - 1:
                self.fs.delete(path)

    # -- small files ----------------------------------------------------------------

    def _upload_bytes(self, data: bytes, generation: int) -> str:
        """``data`` written under a fresh temporary name of ``generation`` (to be renamed)."""
        staged = self._path(f"_tmp-{generation:012d}-{uuid.uuid4().hex[:12]}")
        self.fs.write_bytes(staged, data)
        return staged

    def _read(self, path: str) -> bytes | None:
        try:
            return self.fs.read_bytes(path)
        except Exception:  # replaced meanwhile (a heartbeat): read it as missing
            return None


def _add_trailer(path: Path) -> None:
    with open(path, "rb+") as f:
        digest = hashlib.file_digest(f, "sha256").digest()
        f.seek(0, os.SEEK_END)
        f.write(MAGIC + digest)


def _strip_trailer(local: Path, source: str) -> None:
    """Check the trailer of a downloaded copy and cut it off (leaving the SQLite file)."""
    size = local.stat().st_size
    with open(local, "rb+") as f:
        if size < TRAILER:
            raise CorruptStorageError(f"published metadata {source} is damaged: {size} bytes, no trailer")
        f.seek(size - TRAILER)
        trailer = f.read(TRAILER)
        if trailer[: len(MAGIC)] != MAGIC:
            raise CorruptStorageError(
                f"published metadata {source} is damaged, or was written by a Falkirk older than "
                "schema 2 (no checksum trailer); it is not used"
            )
        f.truncate(size - TRAILER)
        f.seek(0)
        digest = hashlib.file_digest(f, "sha256").digest()
    if digest != trailer[len(MAGIC) :]:
        raise CorruptStorageError(
            f"published metadata {source} is damaged: its SHA-256 does not match its trailer "
            "(same size: a changed byte); it is not used"
        )
