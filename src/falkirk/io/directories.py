"""Input directories a :class:`~falkirk.io.FileSource` reads: a local directory, or a
directory on any Hadoop filesystem (``hdfs:``, ``s3a:``, ``abfs:``, ``file:``...)
reached through the Spark driver's JVM with the session's Hadoop configuration.

A source needs only a few operations on its directory, all by file *name* (the
directory's own spelling is fixed): list the names, the size and modification time
of one file, when a name was *placed* in the directory (for late-arrival checks),
and delete or archive a file once acknowledged.

"Placed" is the inode change time (``ctime``) on local files: a file created, copied,
renamed or moved in has a new ctime even if its content and modification time are
old. Hadoop filesystems keep no such time, so a Hadoop directory uses the
modification time, which HDFS and object stores set when a file is written but not
when it is renamed: a file *renamed* into an HDFS input directory with a name that
sorts before one already consumed is reported as late only if the number of files
at or before the last consumed name grew as well. A consumed file deleted at the
same moment could hide it, which is why a source on such a directory must keep its
consumed files (``acknowledged="keep"``). ``file:`` URIs are local files and keep
ctime.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from falkirk.graph.exceptions import GraphError
from falkirk.storage.filesystem import HadoopFileSystem, is_uri, local_path


@dataclass(frozen=True, slots=True)
class FileStat:
    """What a source records of a file when it plans an epoch."""

    size: int
    modified_ns: int
    #: A regular file (not a directory, a device...), symlinks followed.
    regular: bool = True


class InputDirectory(Protocol):
    """The operations a file source needs on its input directory."""

    @property
    def path(self) -> str:
        """The directory as given, normalised (absolute path, or URI without a trailing slash)."""
        ...

    def names(self) -> list[str]:
        """Names of the regular files in the directory (hidden ``.``/``_`` ones included)."""
        ...

    def stat(self, name: str) -> FileStat | None:
        """Size and modification time of ``name``, None if it is not there."""
        ...

    def placed_ns(self, name: str) -> int:
        """When ``name`` was placed in the directory (see the module docstring); 0 if gone."""
        ...

    def location(self, name: str) -> str:
        """The path or URI Spark reads ``name`` from."""
        ...

    def local(self, name: str) -> str | None:
        """A local path of ``name`` if it is a local file, else None."""
        ...

    def delete(self, name: str) -> None:
        """Delete ``name`` (no error if it is gone)."""
        ...

    def move(self, name: str, archive: str) -> None:
        """Move ``name`` into the directory ``archive`` (same filesystem), replacing a
        file of that name there."""
        ...


def normalise(path: str) -> str:
    """An absolute local path (Spark resolves relative paths against the JVM's
    directory, not ours), or a URI without a trailing slash."""
    if is_uri(path):
        return path.rstrip("/") if path.rstrip("/").count("/") > 2 else path
    return os.path.abspath(path)


def input_directory(path: str) -> InputDirectory:
    """The directory of ``path``: local for plain paths, Hadoop for URIs."""
    return HadoopDirectory(path) if is_uri(path) else LocalDirectory(path)


@dataclass(frozen=True)
class LocalDirectory:
    """A local input directory, read with the OS."""

    path: str

    def names(self) -> list[str]:
        try:
            with os.scandir(self.path) as entries:
                return [e.name for e in entries if e.is_file()]
        except FileNotFoundError:
            raise GraphError(f"FileSource: input directory {self.path!r} does not exist") from None
        except NotADirectoryError:
            raise GraphError(f"FileSource: {self.path!r} is not a directory") from None

    def stat(self, name: str) -> FileStat | None:
        try:
            st = os.stat(Path(self.path) / name)
        except FileNotFoundError:
            return None
        except OSError as exc:  # a link loop, a name too long, no permission
            raise GraphError(
                f"FileSource: input file {str(Path(self.path) / name)!r} cannot be examined ({exc.strerror}): make it a "
                "readable regular file, or move it out of the input directory"
            ) from None
        return FileStat(st.st_size, st.st_mtime_ns, stat.S_ISREG(st.st_mode))

    def placed_ns(self, name: str) -> int:
        return _changed_ns(self.location(name))

    def location(self, name: str) -> str:
        return str(Path(self.path) / name)

    def local(self, name: str) -> str | None:
        return self.location(name)

    def delete(self, name: str) -> None:
        (Path(self.path) / name).unlink(missing_ok=True)

    def move(self, name: str, archive: str) -> None:
        Path(archive).mkdir(parents=True, exist_ok=True)
        os.replace(Path(self.path) / name, Path(archive) / name)


class HadoopDirectory:
    """An input directory on a Hadoop filesystem, reached through the JVM of the
    active SparkContext (created on first use: a source is built before the engine
    starts Spark)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fs: HadoopFileSystem | None = None

    def _hadoop(self) -> HadoopFileSystem:
        if self._fs is None:
            self._fs = HadoopFileSystem.of_active_context()
        return self._fs

    def _status(self, name: str) -> Any | None:
        fs = self._hadoop()
        try:
            return fs.status(self.location(name))
        except Exception as exc:  # py4j wraps FileNotFoundException
            if "FileNotFoundException" in str(exc):
                return None
            raise

    def names(self) -> list[str]:
        fs = self._hadoop()
        try:
            if not fs.status(self.path).isDirectory():
                raise GraphError(f"FileSource: {self.path!r} is not a directory")
            return fs.file_names(self.path)
        except GraphError:
            raise
        except Exception as exc:
            if "FileNotFoundException" in str(exc):
                raise GraphError(f"FileSource: input directory {self.path!r} does not exist") from None
            raise

    def stat(self, name: str) -> FileStat | None:
        status = self._status(name)
        if status is None:
            return None
        return FileStat(int(status.getLen()), int(status.getModificationTime()) * 1_000_000, bool(status.isFile()))

    def placed_ns(self, name: str) -> int:
        local = self.local(name)
        if local is not None:
            return _changed_ns(local)
        status = self._status(name)
        return 0 if status is None else int(status.getModificationTime()) * 1_000_000

    def location(self, name: str) -> str:
        return f"{self.path}/{name}"

    def local(self, name: str) -> str | None:
        return local_path(self.location(name))

    def delete(self, name: str) -> None:
        self._hadoop().delete(self.location(name))

    def move(self, name: str, archive: str) -> None:
        fs = self._hadoop()
        fs.mkdirs(archive)
        fs.replace(self.location(name), f"{archive.rstrip('/')}/{name}")


def _changed_ns(path: str) -> int:
    """When the local file ``path``'s inode last changed (created, renamed, copied
    in); 0 if it is gone."""
    try:
        return os.stat(path).st_ctime_ns
    except FileNotFoundError:
        return 0
