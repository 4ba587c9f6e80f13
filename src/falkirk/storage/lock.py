"""Fencing: one live driver per storage root.

A driver holds an exclusive ``flock`` on ``<root>/falkirk.lock`` for as long as it
runs. The kernel releases the lock when the process dies - also on SIGKILL - so a
restarted driver takes over at once, while a second driver started next to a live
one is refused with :class:`StorageInUseError` naming the holder - or, as a standby,
waits for the holder to die and then takes the lock.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import time
from pathlib import Path
from types import TracebackType

from falkirk.storage.exceptions import StorageError, StorageInUseError
from falkirk.storage.permissions import file_mode, private_dir

LOCK_NAME = "falkirk.lock"


class RootLock:
    """The exclusive lock of one storage root; use as a context manager."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.path = Path(root) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self, *, wait: bool = False, poll_interval: float = 0.02) -> None:
        """Take the lock. If another process holds it: with ``wait``, poll every
        ``poll_interval`` seconds until it is released (the holder stopped or died);
        otherwise raise :class:`StorageInUseError` saying who holds it."""
        if self._fd is not None:
            raise StorageInUseError(f"this process already holds the lock on {self.path.parent}")
        private_dir(self.path.parent)
        try:  # never through a symbolic link: the lock file is truncated and written below
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, file_mode())
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise StorageError(f"{self.path} is a symbolic link: the lock file must be a regular file of the root; remove the link") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise StorageError(f"{self.path} is not a regular file: the lock file must be one; remove it")
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if wait:
                    time.sleep(poll_interval)
                    continue
                holder = self._holder(fd)
                os.close(fd)
                raise StorageInUseError(
                    f"storage root {self.path.parent} is in use by {holder}; stop that driver "
                    "first, give this one another storage root, or run it as a standby"
                ) from None
            except BaseException:  # interrupted while waiting
                os.close(fd)
                raise
        owner = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(owner).encode(), 0)
        except OSError as exc:  # a full disk: let go, or this process would refuse itself the root
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise OSError(exc.errno, f"cannot record who holds the lock: {exc.strerror}", str(self.path)) from exc
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> RootLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    @staticmethod
    def _holder(fd: int) -> str:
        return RootLock.describe_owner(os.pread(fd, 4096, 0))

    @staticmethod
    def describe_owner(recorded: bytes) -> str:
        """The driver a lock file's contents name: ``pid N on HOST (since ...)``."""
        try:
            owner = json.loads(recorded or b"{}")
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner["since"]))
            return f"pid {owner['pid']} on {owner['host']} (since {since})"
        except (ValueError, KeyError, TypeError):
            return "another driver"
