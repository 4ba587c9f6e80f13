"""Redis Streams: a source read through a consumer group, and a dead-letter sink.

:class:`RedisStreamSource` reads a stream through a consumer group that belongs to
the pipeline. Planning an epoch delivers the next entries to the group (``XREADGROUP``,
at most ``max_entries``; entries delivered before a crash and never committed are
taken first, from the group's pending list) and records their id range
``[first, last]`` in the epoch's offsets, committed before the epoch runs. The
entries themselves are read by Spark tasks (``XRANGE`` over slices of the range), on
the first run and on every replay alike, so a replay reads exactly the same entries.
Entries stay pending in the group until no recovery can read them again; then
the engine acknowledges them (``XACK``) and, with ``trim=True``, removes them from
the stream (``XTRIM MINID``).

Rows: ``id`` (the entry id), ``fields`` (a map of field to value; a name given
twice in one entry maps to its first value), ``undecodable`` (names of fields whose
name or value is not UTF-8; such text is decoded with U+FFFD in its place, so a
validation step can reject the entry), ``raw`` (every field as the stream holds it:
``(name, value)`` pairs of exact bytes, in order, repeats included, so that a dead
letter keeps the entry exactly) and ``repeated`` (names given more than once).

:class:`RedisStreamSink` appends rows ``id, fields, reason`` (and, optionally,
``raw``) to a stream (a dead-letter stream ``<stream>:dead``), each entry under its
original id with the original fields (exactly, in order, when ``raw`` is given) plus
``id`` and ``reason``. An original field that is itself named ``id`` or ``reason``,
or whose name starts with ``original.``, is kept under ``original.<its name>``, so
nothing of the entry is overwritten. An entry written once is never written again
(ids only grow in a stream), so the dead letters are exactly once across replays.

Needs redis-py (``pip install 'falkirk[services]'``), also on the Spark executors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from falkirk.graph.exceptions import GraphError
from falkirk.io.exceptions import InputChangedError, SinkError, SourceError
from falkirk.redact import check_url, redact_url
from falkirk.storage import StoredFile

SCHEMA = T.StructType(
    [
        T.StructField("id", T.StringType(), False),
        T.StructField("fields", T.MapType(T.StringType(), T.StringType()), False),
        T.StructField("undecodable", T.ArrayType(T.StringType()), False),
        T.StructField(
            "raw",
            T.ArrayType(T.StructType([T.StructField("name", T.BinaryType()), T.StructField("value", T.BinaryType())])),
            True,
        ),
        T.StructField("repeated", T.ArrayType(T.StringType()), False),
    ]
)
#: Prefix that keeps an original field whose name a dead letter's own fields use.
ORIGINAL = b"original."
#: Entries per XRANGE/XPENDING call.
PAGE = 5000
#: Entries per Spark task when reading an epoch.
PER_TASK = 20_000


def _redis(url: str) -> Any:
    try:
        import redis
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise SourceError("the Redis source and sink need redis-py: pip install 'falkirk[services]'") from exc
    return redis.Redis.from_url(url, socket_timeout=30, socket_connect_timeout=10)


def parse_id(entry_id: str) -> tuple[int, int]:
    """An entry id ``ms-seq`` as a pair that sorts like the stream does."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


@dataclass(frozen=True)
class RedisStreamSource:
    """Entries of ``stream`` at ``url``, read through consumer group ``group``
    (created at ``start``: ``"0"`` the whole stream, ``"$"`` only entries added
    later) as consumer ``consumer``, at most ``max_entries`` per epoch. The group
    must be this pipeline's alone. See the module docstring for the guarantees."""

    url: str
    stream: str
    group: str
    consumer: str = "falkirk"
    max_entries: int = 10_000
    start: str = "0"
    trim: bool = False

    def __post_init__(self) -> None:
        if self.max_entries < 1:
            raise GraphError(f"RedisStreamSource({self.stream!r}): max_entries must be >= 1")
        try:
            check_url(self.url, f"RedisStreamSource({self.stream!r})")
        except ValueError as exc:
            raise GraphError(str(exc)) from None

    def __repr__(self) -> str:
        return (
            f"RedisStreamSource(url={redact_url(self.url)!r}, stream={self.stream!r}, group={self.group!r}, "
            f"consumer={self.consumer!r}, max_entries={self.max_entries}, start={self.start!r}, trim={self.trim})"
        )

    def struct(self, spark: SparkSession) -> T.StructType:
        return SCHEMA

    def _client(self, *, create: bool) -> Any:
        """A connection; the group is created only before the first epoch (``create``)
        and must exist afterwards: a group created again would deliver the whole
        stream again."""
        r = _redis(self.url)
        if create:
            try:
                r.xgroup_create(self.stream, self.group, id=self.start, mkstream=True)
            except Exception as exc:
                if "BUSYGROUP" not in str(exc):
                    raise SourceError(f"RedisStreamSource({self.stream!r}) at {redact_url(self.url)}: cannot create group {self.group!r}: {exc}") from exc
        else:
            try:
                groups = {_text(g["name"]) for g in r.xinfo_groups(self.stream)}
            except Exception:  # the stream itself is gone
                groups = set()
            if self.group not in groups:
                raise SourceError(
                    f"consumer group {self.group!r} of Redis stream {self.stream!r} was deleted after the "
                    "pipeline started reading through it; its pending entries (the input of epochs not yet "
                    "acknowledged) are lost with it. Start with a fresh storage root and a new group "
                    "(start='$' to skip entries already processed), and delete the old output."
                )
        return r

    # -- planning -------------------------------------------------------------------

    def next_offsets(self, previous: dict[str, Any] | None) -> dict[str, Any] | None:
        """Deliver the next entries after ``previous`` to the group; their id range."""
        r = self._client(create=previous is None)
        after = previous["last"] if previous else "0-0"
        pending = r.xpending_range(self.stream, self.group, min=f"({after}", max="+", count=self.max_entries)
        ids = [_text(p["message_id"]) for p in pending]
        if len(ids) < self.max_entries:
            new = r.xreadgroup(self.group, self.consumer, {self.stream: ">"}, count=self.max_entries - len(ids))
            for _, entries in new or []:
                ids += [_text(i) for i, _ in entries]
        if not ids:
            return None
        if previous is not None and parse_id(ids[0]) <= parse_id(after):
            raise SourceError(
                f"consumer group {self.group!r} of Redis stream {self.stream!r} delivered entry {ids[0]}, "
                f"at or before {after}, the last one the pipeline read: the group's position was moved "
                "back (XGROUP SETID or a recreated group). The group must be this pipeline's alone."
            )
        return {"first": ids[0], "last": ids[-1], "count": len(ids)}

    def count_records(self, offsets: dict[str, Any]) -> int:
        """The records of these offsets (no read: for progress displays)."""
        return int(offsets["count"])

    def check(self, offsets: dict[str, Any]) -> None:
        """Raise :class:`InputChangedError` if the range's first or last entry is gone
        from the stream (trimmed or deleted before the epoch committed)."""
        r = _redis(self.url)
        for end in ("first", "last"):
            if not r.xrange(self.stream, offsets[end], offsets[end]):
                raise InputChangedError(
                    f"entry {offsets[end]} of Redis stream {self.stream!r} was deleted or trimmed after an "
                    f"epoch was planned to read it (entries {offsets['first']}..{offsets['last']}). Falkirk "
                    "replays an epoch from exactly the entries it was planned with; do not trim entries "
                    "the pipeline has not acknowledged (XPENDING shows them), or start with a fresh "
                    "storage root and consumer group."
                )

    # -- reading --------------------------------------------------------------------

    def read(self, spark: SparkSession, offsets: dict[str, Any]) -> DataFrame:
        """The entries of ``[first, last]``, read by Spark tasks over slices of the
        range (never through the driver)."""
        self.check(offsets)
        tasks = max(1, min(spark.sparkContext.defaultParallelism, math.ceil(int(offsets["count"]) / PER_TASK)))
        slices = _slices(offsets["first"], offsets["last"], tasks)
        rdd = spark.sparkContext.parallelize(slices, len(slices)).flatMap(_slice_reader(self.url, self.stream))
        return spark.createDataFrame(rdd, SCHEMA, verifySchema=False)

    # -- acknowledging --------------------------------------------------------------

    def acknowledge(self, offsets: list[dict[str, Any]]) -> None:
        """XACK every pending entry of these ranges; with ``trim``, XTRIM the stream
        below the last one. Idempotent."""
        if not offsets:
            return
        r = self._client(create=False)
        for o in offsets:
            low = o["first"]
            while True:
                page = r.xpending_range(self.stream, self.group, min=low, max=o["last"], count=PAGE)
                ids = [_text(p["message_id"]) for p in page]
                if not ids:
                    break
                r.xack(self.stream, self.group, *ids)
                low = f"({ids[-1]}"
        if self.trim:
            ms, seq = parse_id(offsets[-1]["last"])
            r.xtrim(self.stream, minid=f"{ms}-{seq + 1}", approximate=False)


def _slices(first: str, last: str, n: int) -> list[tuple[str, str]]:
    """``n`` consecutive, disjoint id ranges covering ``[first, last]``."""
    (a, _), (b, _) = parse_id(first), parse_id(last)
    cuts = sorted({a + (b - a) * i // n for i in range(1, n)} - {a})
    starts = [first, *[f"{c}-0" for c in cuts]]
    ends = [*[f"{c - 1}-18446744073709551615" for c in cuts], last]
    return list(zip(starts, ends, strict=True))


def _slice_reader(url: str, stream: str) -> Callable[[tuple[str, str]], Iterator[tuple[Any, ...]]]:
    def read(bounds: tuple[str, str]) -> Iterator[tuple[Any, ...]]:
        import redis

        r: Any = redis.Redis.from_url(url, socket_timeout=60, socket_connect_timeout=10)
        # The reply as Redis sends it: an entry's fields as a flat list, in order and
        # with repeated names (redis-py's default parses them into a dict).
        r.set_response_callback("XRANGE", lambda response, **_: response)
        low, high = bounds
        while True:
            page = r.xrange(stream, low, high, count=PAGE)
            for entry_id, flat in page:
                pairs = [(bytes(flat[i]), bytes(flat[i + 1])) for i in range(0, len(flat), 2)]
                fields: dict[str, str] = {}
                bad: list[str] = []
                repeated: list[str] = []
                for k, v in pairs:
                    name = _decode(k, bad, None)
                    value = _decode(v, bad, name)
                    if name in fields:
                        if name not in repeated:
                            repeated.append(name)
                        continue  # the first occurrence stands in ``fields``; ``raw`` has all
                    fields[name] = value
                yield (_text(entry_id), fields, bad, pairs, repeated)
            if len(page) < PAGE:
                return
            low = f"({_text(page[-1][0])}"

    return read


def _decode(raw: bytes, bad: list[str], field: str | None) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        bad.append(field if field is not None else text)
        return text


@dataclass(frozen=True)
class RedisStreamSink:
    """Rows ``id, fields, reason`` appended to ``stream`` at ``url`` under their
    original ids (see the module docstring): exactly once, in epoch order."""

    url: str
    stream: str
    #: Epochs are written in order (the engine waits for the previous epoch's write).
    ordered = True

    def __repr__(self) -> str:
        return f"RedisStreamSink(url={redact_url(self.url)!r}, stream={self.stream!r})"

    def prepare(self, empty: DataFrame) -> None:
        missing = [c for c in ("id", "fields", "reason") if c not in empty.columns]
        if missing:
            raise SinkError(f"RedisStreamSink({self.stream!r}): the input lacks columns {missing} (has {empty.columns})")
        _redis(self.url).ping()

    def write(self, df: DataFrame, epoch: int) -> list[StoredFile]:
        ms = F.split("id", "-").getItem(0).cast("long")
        seq = F.split("id", "-").getItem(1).cast("long")
        raw = F.col("raw") if "raw" in df.columns else F.lit(None).cast(SCHEMA["raw"].dataType)
        ordered = df.select("id", "fields", "reason", raw.alias("raw")).coalesce(1).sortWithinPartitions(ms, seq)
        ordered.foreachPartition(_dead_writer(self.url, self.stream))
        return []


def _dead_writer(url: str, stream: str) -> Callable[[Iterator[Row]], None]:
    def write(rows: Iterator[Row]) -> None:
        import redis

        r: Any = redis.Redis.from_url(url, socket_timeout=60, socket_connect_timeout=10)
        try:
            top = parse_id(_text(r.xinfo_stream(stream)["last-generated-id"]))
        except redis.ResponseError:  # no such stream yet
            top = (0, 0)
        pipe = r.pipeline(transaction=False)
        for row in rows:
            if parse_id(row["id"]) <= top:
                mine = r.xrange(stream, row["id"], row["id"])
                if mine and _text(mine[0][1].get(b"id", b"")) == row["id"]:
                    continue  # written by an earlier attempt of this epoch
                raise SinkError(
                    f"dead-letter stream {stream!r} has entries after {row['id']} that Falkirk did not "
                    "write, so this entry cannot be written under its own id (what makes dead letters "
                    "exactly once). The stream must be this pipeline's alone: remove the other "
                    "entries (XDEL) or write them elsewhere, then start the pipeline again."
                )
            flat = [part for pair in dead_letter(row) for part in pair]
            pipe.execute_command("XADD", stream, row["id"], *flat)  # repeated names kept
            if len(pipe) >= 1000:
                pipe.execute()
        pipe.execute()

    return write


def dead_letter(row: Row) -> list[tuple[bytes, bytes]]:
    """The fields of ``row``'s dead-letter entry, in order: the original fields
    (exactly as the stream held them when the row has ``raw``: bytes, order, repeats),
    each that clashes with ``id``, ``reason`` or the ``original.`` prefix renamed
    ``original.<name>``, then ``id`` and ``reason``."""
    if row["raw"] is not None:
        original = [(bytes(k), bytes(v)) for k, v in row["raw"]]
    else:
        original = [(k.encode(), v.encode()) for k, v in (row["fields"] or {}).items() if v is not None]
    fields = [(ORIGINAL + k if k in (b"id", b"reason") or k.startswith(ORIGINAL) else k, v) for k, v in original]
    return [*fields, (b"id", row["id"].encode()), (b"reason", (row["reason"] or "").encode())]
