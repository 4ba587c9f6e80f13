"""File systems a storage root can live on: a local directory, or any Hadoop
filesystem URI Spark can write (``file:``, ``hdfs:``, ``s3a:``, ``abfs:``...).

Spark writes the data files either way; this module holds the few file operations
the driver itself needs - make durable and measure, list, delete, atomically
replace, copy the metadata database in and out - behind one small interface:

* :class:`LocalFileSystem` uses the OS directly (``fsync`` for durability);
* :class:`HadoopFileSystem` calls Hadoop's ``FileSystem``/``FileContext`` through
  the Spark driver's JVM, so it reaches every filesystem the cluster is configured
  for. A file Hadoop has closed is durable on that filesystem.

:func:`filesystem_for` picks one from the root's spelling: a path without a
``scheme://`` prefix is local.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from falkirk.storage.exceptions import StorageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

@dataclass(frozen=True, slots=True)
class StoredFile:
    """A committed data file and the size it had when committed."""

    path: str
    size: int


_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_uri(path: str | os.PathLike[str]) -> bool:
    """True for ``scheme://...`` spellings (handled by Hadoop), False for plain paths."""
    return bool(_URI.match(str(path)))


class FileSystem(Protocol):
    """The driver-side file operations of a storage root. Paths are strings."""

    def join(self, base: str, *parts: str) -> str: ...

    def mkdirs(self, path: str) -> None: ...

    def size(self, path: str) -> int | None:
        """The file's size in bytes, or None if it does not exist."""
        ...

    def children(self, path: str) -> list[tuple[str, bool]]:
        """(full path, is a directory) of each entry of ``path``; [] if it is missing."""
        ...

    def make_durable(self, paths: Iterable[str]) -> list[StoredFile]:
        """Make the files durable and return them with their sizes; raises
        :class:`StorageError` if one is missing (it cannot be committed)."""
        ...

    def delete(self, path: str) -> None:
        """Delete a file or a whole directory; missing paths are ignored."""
        ...

    def replace(self, src: str, dst: str) -> None:
        """Rename ``src`` to ``dst`` atomically, replacing ``dst`` if it exists."""
        ...

    def upload(self, local: str, dst: str) -> None:
        """Copy a local file to ``dst`` (not atomic: write to a temporary name, then
        :meth:`replace`)."""
        ...

    def download(self, src: str, local: str) -> None: ...


class LocalFileSystem:
    """A storage root on a local (or locally mounted) directory."""

    def join(self, base: str, *parts: str) -> str:
        return str(Path(base, *parts))

    def mkdirs(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)

    def size(self, path: str) -> int | None:
        try:
            return os.stat(path).st_size
        except FileNotFoundError:
            return None

    def children(self, path: str) -> list[tuple[str, bool]]:
        try:
            return sorted((str(p), p.is_dir()) for p in Path(path).iterdir())
        except FileNotFoundError:
            return []

    def make_durable(self, paths: Iterable[str]) -> list[StoredFile]:
        stored: list[StoredFile] = []
        dirs: set[Path] = set()
        for raw in paths:
            path = Path(raw)
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                raise StorageError(f"cannot commit {path}: the file does not exist") from None
            try:
                os.fsync(fd)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            stored.append(StoredFile(str(path), size))
            dirs.add(path.parent)
        for d in dirs:  # the directory entries too, or a crash may lose the names
            fd = os.open(d, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        return stored

    def delete(self, path: str) -> None:
        p = Path(path)
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)

    def replace(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def upload(self, local: str, dst: str) -> None:
        Path(dst).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, dst)
        self.make_durable([dst])

    def download(self, src: str, local: str) -> None:
        shutil.copyfile(src, local)


class HadoopFileSystem:
    """A storage root on any Hadoop filesystem, reached through Spark's JVM.

    Uses the Hadoop configuration of ``spark`` (``spark.hadoop.*`` settings), so
    credentials and endpoints are configured exactly as for Spark itself."""

    def __init__(self, spark: SparkSession) -> None:
        self._jvm: Any = spark._jvm  # py4j: the documented way to reach Hadoop
        self._conf: Any = spark._jsc.hadoopConfiguration()
        self._gateway: Any = spark.sparkContext._gateway

    def _path(self, path: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(path)

    def _fs(self, path: str) -> Any:
        return self._path(path).getFileSystem(self._conf)

    def join(self, base: str, *parts: str) -> str:
        return "/".join([base.rstrip("/"), *parts])

    def mkdirs(self, path: str) -> None:
        self._fs(path).mkdirs(self._path(path))

    def size(self, path: str) -> int | None:
        fs = self._fs(path)
        p = self._path(path)
        if not fs.exists(p):
            return None
        return int(fs.getFileStatus(p).getLen())

    def children(self, path: str) -> list[tuple[str, bool]]:
        fs = self._fs(path)
        p = self._path(path)
        if not fs.exists(p):
            return []
        return sorted((str(s.getPath().toString()), bool(s.isDirectory())) for s in fs.listStatus(p))

    def make_durable(self, paths: Iterable[str]) -> list[StoredFile]:
        stored: list[StoredFile] = []
        for path in paths:  # Hadoop output streams are durable once closed
            size = self.size(path)
            if size is None:
                raise StorageError(f"cannot commit {path}: the file does not exist")
            stored.append(StoredFile(path, size))
        return stored

    def delete(self, path: str) -> None:
        self._fs(path).delete(self._path(path), True)

    def replace(self, src: str, dst: str) -> None:
        jvm = self._jvm
        context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(self._path(dst).toUri(), self._conf)
        options = self._gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 1)
        options[0] = jvm.org.apache.hadoop.fs.Options.Rename.OVERWRITE
        context.rename(self._path(src), self._path(dst), options)

    def upload(self, local: str, dst: str) -> None:
        self._fs(dst).copyFromLocalFile(False, True, self._path(os.path.abspath(local)), self._path(dst))

    def download(self, src: str, local: str) -> None:
        # useRawLocalFileSystem=True: no .crc side file next to the local copy
        self._fs(src).copyToLocalFile(False, self._path(src), self._path(os.path.abspath(local)), True)


def filesystem_for(root: str | os.PathLike[str], spark: SparkSession | None = None) -> tuple[FileSystem, str]:
    """The file system of ``root`` and its normalized spelling: an absolute path for
    local roots (Spark resolves relative paths against the JVM's directory, not
    ours), the URI without a trailing slash otherwise."""
    if not is_uri(root):
        return LocalFileSystem(), str(Path(root).absolute())
    if spark is None:
        raise StorageError(f"storage root {root}: a Hadoop URI needs a SparkSession to reach it")
    return HadoopFileSystem(spark), str(root).rstrip("/")
