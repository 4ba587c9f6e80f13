"""File systems a storage root can live on: a local directory, or any Hadoop
filesystem URI Spark can write (``file:``, ``hdfs:``, ``s3a:``, ``abfs:``...).

Spark writes the data files either way; this module holds the few file operations
the driver itself needs - make durable, measure and checksum, list, delete, rename
without replacing, copy the metadata database in and out - behind one small
interface:

* :class:`LocalFileSystem` uses the OS directly: ``fsync`` of every file, of its
  directory and of every new directory above it, so a committed name survives a
  power loss as well as a crash;
* :class:`HadoopFileSystem` calls Hadoop's ``FileSystem``/``FileContext`` through
  the Spark driver's JVM, so it reaches every filesystem the cluster is configured
  for. ``file:`` URIs are local files and get the local treatment (Hadoop's local
  filesystem does not sync on close); on HDFS and object stores a closed file is
  what the filesystem itself makes durable.

Every committed file is recorded with its size and the SHA-256 of its bytes
(:class:`StoredFile`), computed when it is made durable, so that recovery detects a
damaged file - also a bit flip that keeps its size - before using it.

:func:`filesystem_for` picks one from the root's spelling: a path without a
``scheme://`` prefix is local.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from falkirk.storage.exceptions import CorruptStorageError, StorageError

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession


@dataclass(frozen=True, slots=True)
class StoredFile:
    """A committed data file, with the size and SHA-256 (hex) it had when committed
    (``sha256`` is None only for files committed without one)."""

    path: str
    size: int
    sha256: str | None = None


_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:/")


def is_uri(path: str | os.PathLike[str]) -> bool:
    """True for ``scheme://...`` (and Hadoop's ``file:/...``) spellings, handled by
    Hadoop; False for plain paths."""
    return bool(_URI.match(str(path)))


def local_path(uri: str) -> str | None:
    """The local path of a ``file:`` URI (``file:///tmp/x`` or ``file:/tmp/x``), None
    for any other spelling with a scheme."""
    if not uri.startswith("file:"):
        return None
    rest = uri[len("file:") :]
    if rest.startswith("//"):  # an authority, empty for local files
        rest = rest[2:]
        slash = rest.find("/")
        rest = rest[slash:] if slash >= 0 else "/"
    return rest


class OutsideRootError(ValueError):
    """A path to delete is not below the storage root it must be in."""


def within(fs: FileSystem, root: str, path: str) -> bool:
    """Whether ``path`` lies inside the storage root ``root`` (strictly below it).
    A local path is judged where it really is, symbolic links resolved (a link out
    of the root leads outside); a URI path by its normalised spelling (``..``
    never leads back in)."""
    if isinstance(fs, LocalFileSystem):
        return _really_within(root, path)
    local_root, local = local_path(root), local_path(path)
    if local_root is not None and local is not None:  # a file: URI: the same disk, the same links
        return _really_within(local_root, local)
    if ".." in path.split("/"):
        return False
    scheme, _, rest = path.partition("://") if "://" in path else ("", "", path)
    root_scheme, _, root_rest = root.partition("://") if "://" in root else ("", "", root)
    if scheme != root_scheme:
        return False
    return posixpath.normpath(rest).startswith(posixpath.normpath(root_rest).rstrip("/") + "/")


def _really_within(root: str, path: str) -> bool:
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    return real.startswith(real_root.rstrip("/") + "/")


def safe_relative(rel: str) -> bool:
    """Whether ``rel`` is a relative path that stays below where it is joined: not
    absolute, no ``..`` (and no empty) component."""
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and all(p not in ("", ".", "..") for p in parts)


class FileSystem(Protocol):
    """The driver-side file operations of a storage root. Paths are strings."""

    def join(self, base: str, *parts: str) -> str: ...

    def mkdirs(self, path: str) -> None:
        """Create ``path`` and its parents; the new directories are durable."""
        ...

    def size(self, path: str) -> int | None:
        """The file's size in bytes, or None if it does not exist."""
        ...

    def sha256(self, path: str) -> str:
        """The SHA-256 (hex) of the file's bytes."""
        ...

    def children(self, path: str) -> list[tuple[str, bool]]:
        """(full path, is a directory) of each entry of ``path``; [] if it is missing."""
        ...

    def make_durable(self, paths: Iterable[str]) -> list[StoredFile]:
        """Make the files durable and return them with their sizes and checksums;
        raises :class:`StorageError` if one is missing (it cannot be committed)."""
        ...

    def delete(self, path: str) -> None:
        """Delete a file or a whole directory; missing paths are ignored."""
        ...

    def delete_below(self, root: str, path: str) -> None:
        """Delete ``path`` (a file or a whole directory; missing: ignored) only if it
        lies strictly below ``root`` when it is deleted, reached without following
        a symbolic link (a link swapped in after a check cannot lead outside);
        raises :class:`OutsideRootError` otherwise."""
        ...

    def replace(self, src: str, dst: str) -> None:
        """Rename ``src`` to ``dst`` atomically, replacing ``dst`` if it exists."""
        ...

    def rename_new(self, src: str, dst: str) -> bool:
        """Rename ``src`` to ``dst`` only if ``dst`` does not exist, atomically (two
        drivers renaming to the same ``dst`` at once: exactly one succeeds). Returns
        False, leaving ``src`` in place, if ``dst`` exists."""
        ...

    def upload(self, local: str, dst: str) -> None:
        """Copy a local file to ``dst`` (not atomic: write to a temporary name, then
        :meth:`replace` or :meth:`rename_new`)."""
        ...

    def download(self, src: str, local: str) -> None: ...

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a small file durably (replacing it: not atomic)."""
        ...

    def read_bytes(self, path: str) -> bytes | None:
        """A small file's bytes, or None if it does not exist."""
        ...


class LocalFileSystem:
    """A storage root on a local (or locally mounted) directory."""

    def join(self, base: str, *parts: str) -> str:
        return str(Path(base, *parts))

    def mkdirs(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        sync_directory_entries(Path(path))

    def size(self, path: str) -> int | None:
        try:
            return os.stat(path).st_size
        except FileNotFoundError:
            return None

    def sha256(self, path: str) -> str:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()

    def children(self, path: str) -> list[tuple[str, bool]]:
        """(path, is a directory) of each entry; a symbolic link is never a directory
        here, whatever it points to (nothing walks out of the root through one)."""
        try:
            with os.scandir(path) as entries:
                return sorted((str(Path(path) / e.name), e.is_dir(follow_symlinks=False)) for e in entries)
        except (FileNotFoundError, NotADirectoryError):
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
                with os.fdopen(os.dup(fd), "rb") as f:
                    digest = hashlib.file_digest(f, "sha256").hexdigest()
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            stored.append(StoredFile(str(path), size, digest))
            dirs.add(path.parent)
        for d in dirs:  # the names too, or a crash may lose them
            sync_directory_entries(d, own=True)
        return stored

    def delete(self, path: str) -> None:
        """Delete a file, or a directory and what it holds; a symbolic link is
        removed itself, never what it points to (nor anything below a link inside a
        deleted directory)."""
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISDIR(mode):
            shutil.rmtree(path, ignore_errors=True)  # unlinks links inside; never follows them
        else:
            os.unlink(path)

    def delete_below(self, root: str, path: str) -> None:
        real_root = os.path.realpath(root)
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
        if not safe_relative(rel):
            raise OutsideRootError(f"{path} is not below the storage root {root}")
        *dirs, name = rel.split("/")
        fd = os.open(real_root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in dirs:  # each level opened from the one above, never through a link
                try:
                    below = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    return
                except OSError as exc:  # ELOOP / ENOTDIR: a link or a file where a folder should be
                    raise OutsideRootError(f"{path}: {part!r} is not a folder of the storage root {root} ({exc.strerror})") from None
                os.close(fd)
                fd = below
            try:
                mode = os.lstat(name, dir_fd=fd).st_mode
            except FileNotFoundError:
                return
            if stat.S_ISDIR(mode):
                shutil.rmtree(name, dir_fd=fd, ignore_errors=True)
            else:
                os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)

    def replace(self, src: str, dst: str) -> None:
        os.replace(src, dst)
        sync_directory_entries(Path(dst).parent, own=True)

    def rename_new(self, src: str, dst: str) -> bool:
        try:
            os.link(src, dst)  # fails if dst exists: atomic on POSIX filesystems and NFS
        except FileExistsError:
            return False
        os.unlink(src)
        sync_directory_entries(Path(dst).parent, own=True)
        return True

    def upload(self, local: str, dst: str) -> None:
        Path(dst).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, dst)
        self.make_durable([dst])

    def download(self, src: str, local: str) -> None:
        shutil.copyfile(src, local)

    def write_bytes(self, path: str, data: bytes) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(data)
        self.make_durable([path])

    def read_bytes(self, path: str) -> bytes | None:
        try:
            return Path(path).read_bytes()
        except FileNotFoundError:
            return None


#: Directories whose own entry in their parent directory is known to be durable.
_durable_entries: set[Path] = set()
_durable_lock = threading.Lock()


def sync_directory_entries(directory: Path, *, own: bool = False) -> None:
    """Make ``directory``'s entry in its parent durable, and so on upwards until a
    directory known to be durable (once per process); with ``own``, first the
    entries inside ``directory`` itself (the names of files just written)."""
    directory = directory.absolute()
    if own:
        _fsync_directory(directory)
    with _durable_lock:
        pending = []
        d = directory
        while d not in _durable_entries and d.parent != d:
            pending.append(d)
            d = d.parent
    for d in pending:
        _fsync_directory(d.parent)
        with _durable_lock:
            _durable_entries.add(d)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class HadoopFileSystem:
    """A storage root on any Hadoop filesystem, reached through Spark's JVM.

    Uses the Hadoop configuration of ``spark`` (``spark.hadoop.*`` settings), so
    credentials and endpoints are configured exactly as for Spark itself. ``file:``
    URIs are handled as the local files they are (see the module docstring)."""

    def __init__(self, spark: SparkSession | SparkContext) -> None:
        context: Any = getattr(spark, "sparkContext", spark)  # a session, or a context
        self._jvm: Any = context._jvm  # py4j: the documented way to reach Hadoop
        self._conf: Any = context._jsc.hadoopConfiguration()
        self._gateway: Any = context._gateway
        self._local = LocalFileSystem()

    @classmethod
    def of_active_context(cls) -> HadoopFileSystem:
        """The filesystem of the running SparkContext (from any thread)."""
        from pyspark import SparkContext as Context

        context = Context._active_spark_context
        if context is None:
            raise StorageError("a Hadoop URI is reached through Spark: start the SparkSession first")
        return cls(context)

    def status(self, path: str) -> Any:
        """Hadoop's ``FileStatus`` of ``path`` (raises FileNotFoundException if absent)."""
        return self._fs(path).getFileStatus(self._path(path))

    def file_names(self, directory: str) -> list[str]:
        """Names of the files (not directories) directly in ``directory``."""
        return [str(s.getPath().getName()) for s in self._fs(directory).listStatus(self._path(directory)) if s.isFile()]

    def _path(self, path: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(path)

    def _fs(self, path: str) -> Any:
        return self._path(path).getFileSystem(self._conf)

    def join(self, base: str, *parts: str) -> str:
        return "/".join([base.rstrip("/"), *parts])

    def spelling(self, path: str) -> str:
        """``path`` spelled as Hadoop lists it (``file:///x`` is ``file:/x``), so that
        paths built by :meth:`join` compare equal to those :meth:`children` returns."""
        return str(self._path(path).toString())

    def mkdirs(self, path: str) -> None:
        local = local_path(path)
        if local is not None:
            self._local.mkdirs(local)
            return
        self._fs(path).mkdirs(self._path(path))

    def size(self, path: str) -> int | None:
        fs = self._fs(path)
        p = self._path(path)
        if not fs.exists(p):
            return None
        return int(fs.getFileStatus(p).getLen())

    def sha256(self, path: str) -> str:
        local = local_path(path)
        if local is not None:
            return self._local.sha256(local)
        return self.jvm_sha256(path)

    def jvm_sha256(self, path: str) -> str:
        """The SHA-256 of any Hadoop path, computed in the JVM as it streams the file
        (the bytes never cross into Python): for HDFS and object stores."""
        stream = self._fs(path).open(self._path(path))
        try:
            return str(self._jvm.org.apache.commons.codec.digest.DigestUtils.sha256Hex(stream))
        finally:
            stream.close()

    def children(self, path: str) -> list[tuple[str, bool]]:
        fs = self._fs(path)
        p = self._path(path)
        if not fs.exists(p):
            return []
        return sorted((str(s.getPath().toString()), bool(s.isDirectory())) for s in fs.listStatus(p))

    def make_durable(self, paths: Iterable[str]) -> list[StoredFile]:
        stored: list[StoredFile] = []
        for path in paths:
            local = local_path(path)
            if local is not None:  # Hadoop's local filesystem does not sync on close
                (done,) = self._local.make_durable([local])
                stored.append(StoredFile(path, done.size, done.sha256))
                continue
            size = self.size(path)  # HDFS and object stores: durable once closed
            if size is None:
                raise StorageError(f"cannot commit {path}: the file does not exist")
            stored.append(StoredFile(path, size, self.sha256(path)))
        return stored

    def delete(self, path: str) -> None:
        self._fs(path).delete(self._path(path), True)

    def delete_below(self, root: str, path: str) -> None:
        local_root, local = local_path(root), local_path(path)
        if local_root is not None and local is not None:  # the local disk, its links: judged as there
            LocalFileSystem().delete_below(local_root, local)
            return
        if not within(self, root, path):
            raise OutsideRootError(f"{path} is not below the storage root {root}")
        self.delete(path)

    def _rename(self, src: str, dst: str, mode: str) -> None:
        jvm = self._jvm
        context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(self._path(dst).toUri(), self._conf)
        options = self._gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 1)
        options[0] = getattr(jvm.org.apache.hadoop.fs.Options.Rename, mode)
        context.rename(self._path(src), self._path(dst), options)

    def replace(self, src: str, dst: str) -> None:
        src_local, dst_local = local_path(src), local_path(dst)
        if src_local is not None and dst_local is not None:
            self._local.replace(src_local, dst_local)
            return
        self._rename(src, dst, "OVERWRITE")

    def rename_new(self, src: str, dst: str) -> bool:
        src_local, dst_local = local_path(src), local_path(dst)
        if src_local is not None and dst_local is not None:
            return self._local.rename_new(src_local, dst_local)
        # Atomic on HDFS (the NameNode refuses an existing destination). Object stores
        # without atomic rename cannot fence two drivers this way (docs/recovery.md).
        if self.size(dst) is not None:
            return False
        try:
            self._rename(src, dst, "NONE")
        except Exception as exc:  # py4j wraps FileAlreadyExistsException
            if "FileAlreadyExistsException" in str(exc) or self.size(dst) is not None:
                return False
            raise
        return True

    def upload(self, local: str, dst: str) -> None:
        dst_local = local_path(dst)
        if dst_local is not None:
            self._local.upload(local, dst_local)
            return
        self._fs(dst).copyFromLocalFile(False, True, self._path(os.path.abspath(local)), self._path(dst))

    def download(self, src: str, local: str) -> None:
        src_local = local_path(src)
        if src_local is not None:
            self._local.download(src_local, local)
            return
        # useRawLocalFileSystem=True: no .crc side file next to the local copy
        self._fs(src).copyToLocalFile(False, self._path(src), self._path(os.path.abspath(local)), True)

    def write_bytes(self, path: str, data: bytes) -> None:
        local = local_path(path)
        if local is not None:
            self._local.write_bytes(local, data)
            return
        with tempfile.NamedTemporaryFile(delete=False) as f:
            f.write(data)
        try:
            self.upload(f.name, path)
        finally:
            os.unlink(f.name)

    def read_bytes(self, path: str) -> bytes | None:
        local = local_path(path)
        if local is not None:
            return self._local.read_bytes(local)
        if self.size(path) is None:
            return None
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "copy")
            try:
                self.download(path, copy)
            except Exception:  # deleted meanwhile
                if self.size(path) is None:
                    return None
                raise
            return Path(copy).read_bytes()


def part_files(fs: FileSystem, directory: str) -> list[str]:
    """The Parquet part files Spark wrote into ``directory``, in name order."""
    return [
        path
        for path, is_dir in fs.children(directory)
        if not is_dir and path.rsplit("/", 1)[-1].startswith("part-") and path.endswith(".parquet")
    ]


def filesystem_for(root: str | os.PathLike[str], spark: SparkSession | None = None) -> tuple[FileSystem, str]:
    """The file system of ``root`` and its normalized spelling: an absolute path for
    local roots (Spark resolves relative paths against the JVM's directory, not
    ours), the URI without a trailing slash otherwise."""
    if not is_uri(root):
        return LocalFileSystem(), str(Path(root).absolute())
    if spark is None:
        raise StorageError(f"storage root {root}: a Hadoop URI needs a SparkSession to reach it")
    fs = HadoopFileSystem(spark)
    return fs, fs.spelling(str(root).rstrip("/"))


def verify_files(files: Iterable[StoredFile], fs: FileSystem | None = None, *, deep: bool = True) -> None:
    """Raise :class:`CorruptStorageError` naming the file unless every file exists
    with its committed size and, with ``deep``, its committed SHA-256 (reads it)."""
    fs = fs or LocalFileSystem()
    for f in files:
        size = fs.size(f.path)
        if size is None:
            raise CorruptStorageError(f"committed file {f.path} is missing")
        if size != f.size:
            raise CorruptStorageError(
                f"committed file {f.path} has {size} bytes, {f.size} were committed: it was "
                "damaged or truncated after the commit"
            )
        if deep and f.sha256 is not None:
            digest = fs.sha256(f.path)
            if digest != f.sha256:
                raise CorruptStorageError(
                    f"committed file {f.path} is damaged: its SHA-256 is {digest}, {f.sha256} was "
                    "committed (same size: a changed byte). It is not used; restore it from a "
                    "backup of the storage root, or start with a fresh storage root."
                )
