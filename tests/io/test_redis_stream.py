"""RedisStreamSource and RedisStreamSink against a real Redis: planning delivers
through the consumer group and is repeatable after a crash, replays read exactly the
planned entries, acknowledgement XACKs (and trims), dead letters are exactly once;
FileSource's acknowledgement deletes or archives."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
import redis
from pyspark.sql import SparkSession

from falkirk.io import FileSource
from falkirk.io import redis_streams as rs
from falkirk.io.exceptions import InputChangedError, SourceError
from falkirk.io.redis_streams import RedisStreamSink, RedisStreamSource
from falkirk.testing.services import RedisServer


def fresh(server: RedisServer, n: int, **kw: object) -> tuple[redis.Redis, RedisStreamSource, list[str]]:
    r = redis.Redis.from_url(server.url)
    stream = f"s-{uuid.uuid4().hex[:8]}"
    ids = [r.xadd(stream, {"user_id": f"u{i % 3}", "amount": str(i)}).decode() for i in range(n)]
    return r, RedisStreamSource(server.url, stream, "g", **kw), ids  # type: ignore[arg-type]


def test_planning_is_repeatable_after_a_crash_and_continues_after_a_commit(redis_server: RedisServer) -> None:
    r, source, ids = fresh(redis_server, 25, max_entries=10)
    first = source.next_offsets(None)
    assert first == {"first": ids[0], "last": ids[9], "count": 10}
    assert source.next_offsets(None) == first  # planned again after a crash: the pending entries
    second = source.next_offsets(first)
    assert second == {"first": ids[10], "last": ids[19], "count": 10}
    assert r.xpending(source.stream, "g")["pending"] == 20
    third = source.next_offsets(second)
    assert third is not None and third["count"] == 5 and source.next_offsets(third) is None


def test_a_replay_reads_exactly_the_planned_entries_across_tasks(spark: SparkSession, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rs, "PER_TASK", 7)  # several Spark tasks, several slices of the id range
    monkeypatch.setattr(rs, "PAGE", 4)
    r, source, ids = fresh(redis_server, 40, max_entries=30)
    r.xadd(source.stream, {"user_id": b"\xff", "amount": "1"})
    offsets = source.next_offsets(None)
    assert offsets is not None
    for _ in range(2):  # the first run and a replay
        got = source.read(spark, offsets).collect()
        assert [row["id"] for row in got] == ids[:30]
        assert got[3]["fields"] == {"user_id": "u0", "amount": "3"} and got[3]["undecodable"] == []
        assert [(bytes(k), bytes(v)) for k, v in got[3]["raw"]] == [(b"user_id", b"u0"), (b"amount", b"3")]
    rest = source.next_offsets(offsets)
    assert rest is not None
    bad = source.read(spark, rest).collect()[-1]
    assert bad["undecodable"] == ["user_id"] and bad["fields"]["amount"] == "1"
    assert sorted((bytes(k), bytes(v)) for k, v in bad["raw"]) == [(b"amount", b"1"), (b"user_id", b"\xff")]


def test_acknowledge_xacks_idempotently_and_trims_when_asked(redis_server: RedisServer) -> None:
    r, source, ids = fresh(redis_server, 12, max_entries=5, trim=True)
    a = source.next_offsets(None)
    b = source.next_offsets(a)
    assert a is not None and b is not None
    source.acknowledge([a])
    source.acknowledge([a])
    assert r.xpending(source.stream, "g")["pending"] == 5
    source.acknowledge([a, b])
    assert r.xpending(source.stream, "g")["pending"] == 0
    assert [i.decode() for i, _ in r.xrange(source.stream)] == ids[10:]  # acknowledged entries trimmed


def test_trimming_unacknowledged_input_is_named(redis_server: RedisServer) -> None:
    r, source, ids = fresh(redis_server, 6)
    offsets = source.next_offsets(None)
    assert offsets is not None
    r.xtrim(source.stream, minid=ids[3], approximate=False)
    with pytest.raises(InputChangedError, match="deleted or trimmed"):
        source.check(offsets)


def dead_letters(server: RedisServer) -> tuple[redis.Redis, str, RedisStreamSink]:
    """A client, a fresh dead-letter stream's name, and a sink writing to it."""
    dead = f"d-{uuid.uuid4().hex[:8]}:dead"
    return redis.Redis.from_url(server.url), dead, RedisStreamSink(server.url, dead)


def test_dead_letters_are_written_once_under_their_ids(spark: SparkSession, redis_server: RedisServer) -> None:
    r, dead, sink = dead_letters(redis_server)
    df = spark.createDataFrame(
        [("10-1", {"a": "x"}, "bad a"), ("9-5", {"b": "y"}, "bad b"), ("10-0", {}, "empty")],
        "id string, fields map<string,string>, reason string",
    )
    sink.prepare(df.limit(0))
    sink.write(df, 1)
    sink.write(df, 1)  # a replay
    got = [(i.decode(), {k.decode(): v.decode() for k, v in f.items()}) for i, f in r.xrange(dead)]
    assert got == [
        ("9-5", {"b": "y", "id": "9-5", "reason": "bad b"}),
        ("10-0", {"id": "10-0", "reason": "empty"}),
        ("10-1", {"a": "x", "id": "10-1", "reason": "bad a"}),
    ]


def test_dead_letters_keep_every_original_field_byte_for_byte(spark: SparkSession, redis_server: RedisServer) -> None:
    """Exact bytes from ``raw`` (non-UTF-8 names and values), and fields named like the
    dead letter's own (``id``, ``reason``, ``original.*``) kept under ``original.``."""
    r, dead, sink = dead_letters(redis_server)
    raw_type = "array<struct<name:binary,value:binary>>"
    df = spark.createDataFrame(
        [
            ("5-0", {"a\ufffd": "\ufffd"}, "not UTF-8", [(b"a\xff", b"\xfe"), (b"reason", b"r")]),
            ("6-0", {"id": "x", "reason": "y", "original.id": "z", "k": "v"}, "bad", None),
        ],
        f"id string, fields map<string,string>, reason string, raw {raw_type}",
    )
    sink.prepare(df.limit(0))
    sink.write(df, 1)
    got = {i.decode(): f for i, f in r.xrange(dead)}
    assert got["5-0"] == {b"a\xff": b"\xfe", b"original.reason": b"r", b"id": b"5-0", b"reason": b"not UTF-8"}
    assert got["6-0"] == {
        b"original.id": b"x", b"original.reason": b"y", b"original.original.id": b"z", b"k": b"v",
        b"id": b"6-0", b"reason": b"bad",
    }


def test_entries_as_the_stream_holds_them_and_their_dead_letters(spark: SparkSession, redis_server: RedisServer) -> None:
    """Adversarial review: repeated field names were lost (redis-py parses an entry
    into a dict), field order was lost, and user ids PostgreSQL cannot store stopped
    the pipeline at its sink. Now ``raw`` keeps every entry exactly, ``repeated``
    names repeats, and the example's validation rejects what the table cannot hold."""
    from falkirk.demo.redis_postgres import check

    r = redis.Redis.from_url(redis_server.url)
    stream = f"s-{uuid.uuid4().hex[:8]}"
    given = {
        "valid": ["user_id", "a", "amount", "1", "note", b"\xfe", "note", "again"],
        "amount twice": ["user_id", "a", "amount", "1", "amount", "2"],
        "nul": ["user_id", "a\x00b", "amount", "1"],
        "long": ["user_id", "x" * 2500, "amount", "1"],
        "own names": ["id", "1", "reason", "r", "user_id", "", "amount", "3"],
    }
    ids = {name: r.execute_command("XADD", stream, "*", *flat).decode() for name, flat in given.items()}
    source = RedisStreamSource(redis_server.url, stream, "g")
    offsets = source.next_offsets(None)
    assert offsets is not None
    read = source.read(spark, offsets)
    got = {row["id"]: row for row in check(read).collect()}
    reasons = {name: got[i]["reason"] for name, i in ids.items()}
    assert reasons["valid"] is None and got[ids["valid"]]["amount"] == 1
    assert reasons["amount twice"] == "given more than once: amount"
    assert reasons["nul"].startswith("user_id contains a NUL") and reasons["long"].startswith("user_id is longer than 2000")
    assert reasons["own names"] == "empty user_id"
    dead = f"{stream}:dead"
    sink = RedisStreamSink(redis_server.url, dead)
    rejected = check(read).where("reason IS NOT NULL")
    sink.prepare(rejected.limit(0))
    sink.write(rejected, 1)
    raw = redis.Redis.from_url(redis_server.url)
    raw.set_response_callback("XRANGE", lambda response, **_: response)
    letters = {i.decode(): f for i, f in raw.xrange(dead)}
    assert set(letters) == {ids[n] for n in ("amount twice", "nul", "long", "own names")}
    as_bytes = lambda flat: [x if isinstance(x, bytes) else x.encode() for x in flat]  # noqa: E731
    assert letters[ids["amount twice"]] == as_bytes([*given["amount twice"], "id", ids["amount twice"], "reason", "given more than once: amount"])
    assert letters[ids["own names"]][:8] == as_bytes(["original.id", "1", "original.reason", "r", "user_id", "", "amount", "3"])


@pytest.mark.parametrize("mode", ["delete", "move"])
def test_file_source_acknowledgement_deletes_or_archives_only_the_files_read(tmp_path: Path, mode: str) -> None:
    inp = tmp_path / "in"
    inp.mkdir()
    for n in ("a.csv", "b.csv", "c.csv"):
        (inp / n).write_text("x\n1\n")
    archive = str(tmp_path / "done") if mode == "move" else None
    source = FileSource(str(inp), "csv", "x int", acknowledged=mode, archive=archive)
    first = source.next_offsets(None)
    second = source.next_offsets(first)
    assert first is not None and second is not None
    (inp / "b.csv").write_text("x\n2\n3\n")  # changed after it was read: not the file acknowledged
    os.utime(inp / "b.csv", ns=(1, 1))
    source.acknowledge([first, second])
    source.acknowledge([first, second])
    assert sorted(p.name for p in inp.iterdir()) == ["b.csv", "c.csv"]
    if mode == "move":
        assert sorted(p.name for p in (tmp_path / "done").iterdir()) == ["a.csv"]
    third = source.next_offsets(second)
    assert third is not None and [f[0] for f in third["files"]] == ["c.csv"]


def test_a_deleted_or_rewound_group_stops_the_source_with_an_error(redis_server: RedisServer) -> None:
    """Adversarial review: a group recreated by the source itself delivered the whole
    stream again (every entry counted twice)."""
    r, source, _ = fresh(redis_server, 6, max_entries=3)
    first = source.next_offsets(None)
    assert first is not None
    r.xgroup_destroy(source.stream, "g")
    with pytest.raises(SourceError, match="was deleted"):
        source.next_offsets(first)
    with pytest.raises(SourceError, match="was deleted"):
        source.acknowledge([first])
    r.xgroup_create(source.stream, "g", id="0")  # recreated by someone: delivers from the start
    with pytest.raises(SourceError, match="moved back"):
        source.next_offsets(first)


def test_a_foreign_entry_in_the_dead_letter_stream_is_an_error_not_a_loss(spark: SparkSession, redis_server: RedisServer) -> None:
    r, dead, sink = dead_letters(redis_server)
    schema = "id string, fields map<string,string>, reason string"
    sink.write(spark.createDataFrame([("5-0", {}, "bad")], schema), 1)
    r.xadd(dead, {"note": "someone else"}, id="9-0")
    with pytest.raises(Exception, match="did not write"):
        sink.write(spark.createDataFrame([("7-0", {}, "bad")], schema), 2)
    sink.write(spark.createDataFrame([("5-0", {}, "bad")], schema), 1)  # a replay of epoch 1 is fine
    assert [i for i, _ in r.xrange(dead)] == [b"5-0", b"9-0"]
