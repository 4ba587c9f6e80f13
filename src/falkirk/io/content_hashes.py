"""A hash of each input file's bytes, so that a replay can accept a file put back.

A replay must read exactly the input its epoch was planned with. A file source checks
that by each file's size and modification time, which is cheap, but which a file put
back as it was (copied from a backup, restored after a mistaken deletion) does not
keep: its modification time is new. So while an epoch runs, one Spark job in the
background takes the SHA-256 of each file the epoch was planned with, on the
executors; the hashes are committed with the epoch, beside its offsets. A replay that
meets a file with its size but a new modification time hashes that file once more
(one Spark job) and goes on only if the hash is the one committed.

What it guarantees: a file put back is accepted only if it is byte for byte the file
the epoch was planned with (up to a SHA-256 collision). The hash is a property of the
file, not of how the pipeline read it: a processor that reads part of its input (a
``limit``, an ``isEmpty()`` in its function), a loop, a cache read by two jobs at once
change nothing. Never read in the driver: each task reads its file in chunks of 1 MiB
(constant memory, whatever the file's size) and only one short string per file comes
back.

Where the hashing runs: a local file (a path, or a ``file:`` URI) is read by a
Python task with :mod:`hashlib` (about 0.6-1 GB/s a core here); a file on another
filesystem (``hdfs://``, ``s3a://``) by Spark's ``binaryFile`` reader, which holds a
whole file in memory: such files over :data:`MAX_URI_HASHED_BYTES` are not hashed.

What it does not cover: an epoch that did not commit (a crash while it ran) has no
hashes - put its files back with their modification times (the error says how); a
file that could not be hashed when its epoch ran (unreadable then) has none.
"""

from __future__ import annotations

import hashlib

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

#: The key of an epoch's offsets that holds its files' hashes: {name: "sha256:HEX"}.
CONTENT_KEY = "content"
#: Files on a filesystem other than the local one larger than this are not hashed
#: (Spark's ``binaryFile`` reader holds a whole file, and copies it, in memory).
MAX_URI_HASHED_BYTES = 128 << 20
_ALGORITHM = "sha256"
_CHUNK = 1 << 20


def hash_local_files(spark: SparkSession, paths: dict[str, str]) -> dict[str, str]:
    """``{name: local path}`` -> ``{name: "sha256:HEX"}`` for each file that could be
    read, in one Spark job whose tasks read the files in chunks (on a cluster the
    executors must see the paths, as they must to read the input at all)."""
    if not paths:
        return {}
    items = sorted(paths.items())
    slices = min(len(items), max(1, spark.sparkContext.defaultParallelism))
    found = spark.sparkContext.parallelize(items, slices).map(_hash_local).collect()
    return {name: digest for name, digest in found if digest is not None}


def _hash_local(item: tuple[str, str]) -> tuple[str, str | None]:
    """(name, its hash), or (name, None) if it cannot be read as a regular file."""
    name, path = item
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
    except OSError:
        return name, None
    return name, f"{_ALGORITHM}:{digest.hexdigest()}"


def hash_binary_files(frames: list[DataFrame], names: list[str]) -> dict[str, str]:
    """The hash of each file of ``names`` that ``frames`` (``binaryFile`` reads of
    exactly those files, each at most :data:`MAX_URI_HASHED_BYTES`) hold, by name, in
    one Spark job."""
    rows = frames[0]
    for frame in frames[1:]:
        rows = rows.unionByName(frame)
    wanted = set(names)
    hashes: dict[str, str] = {}
    for row in rows.select("path", F.sha2(F.col("content"), 256).alias("hash")).collect():
        name = str(row["path"]).rsplit("/", 1)[-1]
        if name in wanted:
            hashes[name] = f"{_ALGORITHM}:{row['hash']}"
    return hashes
