"""Spark's errors about damaged files, as Falkirk's own.

Falkirk checks every committed file's size and SHA-256 before it reads it, and the
session verifies Parquet page checksums while reading, so a file damaged between
the check and the read still fails. Spark reports that as a Java exception deep in a
task failure; :func:`as_storage_error` turns it into a
:class:`~falkirk.storage.CorruptStorageError` that names the file.
"""

from __future__ import annotations

import re

from falkirk.exceptions import FalkirkError, error_text
from falkirk.storage import CorruptStorageError

#: Phrases of the JVM's messages that mean a file's bytes are not what was written.
_DAMAGE = (
    "ChecksumException",
    "could not verify page integrity",
    "CRC checksum verification failed",
    "is not a Parquet file",
    "Can not read value at",
)
_PATH = re.compile(r"(?:reading file|file|File) ((?:file|hdfs|s3a|abfss?|gs)?:?/[^\s,;)\]]+)")


def as_storage_error(exc: BaseException) -> CorruptStorageError | None:
    """A :class:`CorruptStorageError` naming the file if ``exc`` (or an exception it
    was raised from) says a file is damaged, else None."""
    seen: BaseException | None = exc
    while seen is not None:
        text = error_text(seen)
        if any(phrase in text for phrase in _DAMAGE):
            match = _PATH.search(text)
            where = match.group(1).rstrip(".") if match else "a file Spark read"
            first = next(line for line in text.splitlines() if any(p in line for p in _DAMAGE))
            return CorruptStorageError(
                f"{where} is damaged (Spark: {first.strip()[:300]}); it is not used. Restore it "
                "from a backup, or start with a fresh storage root."
            )
        seen = seen.__cause__ or seen.__context__
    return None


class DataError(FalkirkError):
    """A processor's computation failed on the data itself (an overflow, a division by
    zero, a malformed value) or in the user's code: replaying the epoch would fail the
    same way (:class:`falkirk.execution.diagnosis.StepError` says where)."""


#: Phrases of Spark's errors that mean an executor (and the blocks and shuffle
#: output it held) was lost while an epoch ran: the epoch can be re-run once the
#: state that lived there is restored.
_EXECUTOR_LOSS = (
    "CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND",
    "Checkpoint block rdd_",
    "ExecutorLostFailure",
    "FetchFailedException",
    "worker lost",
)


def is_executor_loss(exc: BaseException) -> bool:
    """``exc`` (or an exception it was raised from) says an executor was lost with
    blocks or shuffle output an epoch needed."""
    seen: BaseException | None = exc
    while seen is not None:
        if any(phrase in error_text(seen) for phrase in _EXECUTOR_LOSS):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


#: The exception a failed Spark task raised, in a Py4J error's text.
_TASK_FAILURE = re.compile(r"most recent failure: Lost task [^:]*\): ([^\n]+)")
_CAUSED_BY = re.compile(r"^Caused by: ([^\n]+)", re.MULTILINE)


def first_line(exc: BaseException | str) -> str:
    """What ``exc`` (an error, or its message) says, in one line, for a log or a
    message: the innermost cause a Java error names (the failed task's exception),
    else its own first line (its type's name if it has none)."""
    text = exc if isinstance(exc, str) else error_text(exc)
    causes = _CAUSED_BY.findall(text) or _TASK_FAILURE.findall(text)
    if causes:
        return str(causes[-1]).strip()[:500]
    return (text.strip().splitlines() or ["" if isinstance(exc, str) else type(exc).__name__])[0][:500]
