"""Spark's errors about damaged files, as Falkirk's own.

Falkirk checks every committed file's size and SHA-256 before it reads it, and the
session verifies Parquet page checksums while reading, so a file damaged between
the check and the read still fails. Spark reports that as a Java exception deep in a
task failure; :func:`as_storage_error` turns it into a
:class:`~falkirk.storage.CorruptStorageError` that names the file.
"""

from __future__ import annotations

import re

from falkirk.exceptions import FalkirkError
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
        text = str(seen)
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


#: Spark's ANSI errors for a value that does not fit its type.
_OVERFLOW = ("ARITHMETIC_OVERFLOW", "CAST_OVERFLOW", "NUMERIC_VALUE_OUT_OF_RANGE", "DIVIDE_BY_ZERO")


class DataError(FalkirkError):
    """A processor's computation failed on the data itself (an overflow, a division by
    zero): replaying the epoch would fail the same way."""


def as_data_error(exc: BaseException, processor: str, epoch: int) -> DataError | None:
    """A :class:`DataError` naming the processor and epoch if ``exc`` is one of Spark's
    arithmetic errors, else None."""
    text = str(exc)
    kind = next((k for k in _OVERFLOW if k in text), None)
    if kind is None:
        return None
    first = next((line for line in text.splitlines() if kind in line), kind)
    return DataError(
        f"processor {processor!r} failed on epoch {epoch}'s data (Spark: {first.strip()[:300]}). "
        "A replay would fail the same way: widen the column's type (e.g. cast to decimal(38,0)) "
        "or reject such rows in a validate step before it, then start again."
    )


class TaskError(FalkirkError):
    """A Python exception raised inside a Spark task of a processor (a sink's write,
    a user function): its type and message, without the JVM's wrapping."""


def as_task_error(exc: BaseException, processor: str, epoch: int) -> TaskError | None:
    """A :class:`TaskError` naming the processor, the epoch and the Python exception
    raised in a Spark task, if ``exc`` carries one (a ``PythonException``, also
    inside a ``Py4JJavaError``), else None."""
    text = str(exc)
    start = text.rfind("Traceback (most recent call last):")
    if start < 0:
        return None
    for line in text[start:].splitlines()[1:]:
        if line and not line[0].isspace():  # the exception's own line, after its frames
            raised = line.strip()
            break
    else:
        return None
    return TaskError(f"processor {processor!r} failed in a Spark task on epoch {epoch}: {raised[:1500]}")


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
        if any(phrase in str(seen) for phrase in _EXECUTOR_LOSS):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
