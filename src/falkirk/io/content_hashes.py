"""A hash of each input file's bytes, so that a replay can accept a file put back.

A replay must read exactly the input its epoch was planned with. A file source checks
that by each file's size and modification time, which is cheap, but which a file put
back as it was (copied from a backup, restored after a mistaken deletion) does not
keep: its modification time is new. So while an epoch runs, one Spark job in the
background reads the epoch's files as bytes (``binaryFile``: no parsing) and takes
the SHA-256 of each; the hashes are committed with the epoch, beside its offsets. A
replay that meets a file with its size but a new modification time hashes that file
once more (one Spark job) and goes on only if the hash is the one committed.

What it guarantees: a file put back is accepted only if it is byte for byte the file
the epoch read (up to a SHA-256 collision). The hash is a property of the file, not of
how the pipeline read it: a processor that reads part of its input (a ``limit``, an
``isEmpty()`` in its function), a loop, a cache read by two jobs at once change
nothing. Never read in the driver: the job runs on the executors, and only one short
string per file comes back.

What it does not cover: an epoch that did not commit (a crash while it ran) has no
hashes - put its files back with their modification times (``touch -m -d``, which
the error prints); files over :data:`MAX_HASHED_BYTES` are not hashed (Spark reads a
``binaryFile`` into one value per file); a file whose hash job failed (unreadable:
its epoch says why) has none.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

#: The key of an epoch's offsets that holds its files' hashes: {name: "sha256:HEX"}.
CONTENT_KEY = "content"
#: Files larger than this are not hashed (a ``binaryFile`` value is at most 2 GiB).
MAX_HASHED_BYTES = 1 << 30
_ALGORITHM = "sha256"


def content_hashes(frames: list[DataFrame], names: list[str]) -> dict[str, str]:
    """The hash of each file of ``names`` that ``frames`` (``binaryFile`` reads of
    them) hold, by name, in one Spark job: ``{"a.csv": "sha256:..."}``."""
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
