"""A small real file system for tests of a full disk: a size-limited tmpfs.

Mounting needs root (the test machine runs tests as root); without it the tests
that need one are skipped, saying why. Writes of every kind hit it for real: the
JVM's (Spark's Parquet writers), SQLite's and Python's.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(directory: Path, size: str = "8m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``directory`` (created) while the block runs."""
    directory.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a {size} tmpfs on {directory} (needs root): {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        # Lazy: a JVM may still hold a file of a failed write open.
        subprocess.run(["umount", "--lazy", str(directory)], check=True)


def fill(directory: Path) -> Path:
    """Take every free block of ``directory``'s file system with one file, which is
    returned: delete it to free the space again."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for chunk in (b"\0" * (1 << 20), b"\0" * 4096, b"\0"):
            try:
                while os.write(fd, chunk):
                    pass
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    finally:
        os.close(fd)
    return filler
