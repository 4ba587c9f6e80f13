"""PostgresSink against a real PostgreSQL: an epoch is one prepared transaction,
invisible until committed, gone when aborted; clear errors when PostgreSQL refuses."""

from __future__ import annotations

import base64
import random
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from falkirk.io.exceptions import SinkError
from falkirk.io.postgres import PostgresSink
from falkirk.testing.services import PostgresServer


def rows(dsn: str, table: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()


def prepared(dsn: str, prefix: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return sorted(r[0] for r in conn.execute("SELECT gid FROM pg_prepared_xacts WHERE starts_with(gid, %s)", (prefix,)))


def sink_for(server: PostgresServer, **kw: Any) -> tuple[PostgresSink, str]:
    table = f"t_{uuid.uuid4().hex[:8]}"
    sink = PostgresSink(server.dsn, table, **kw)
    sink.bind("p", table)
    return sink, table


def test_an_epoch_is_invisible_until_committed_and_gone_when_aborted(spark: SparkSession, postgres_server: PostgresServer) -> None:
    sink, table = sink_for(postgres_server, key=("k",), not_null=True)
    df = lambda data: spark.createDataFrame(data, "k string, v long")  # noqa: E731
    sink.prepare(df([]))
    sink.pre_commit(df([("a", 1), ("b", 2)]), 1)
    assert rows(postgres_server.dsn, table) == []
    assert prepared(postgres_server.dsn, f"falkirk:p:{table}:") == [f"falkirk:p:{table}:1"]
    sink.commit_upto(1)
    sink.commit_upto(1)  # idempotent
    assert rows(postgres_server.dsn, table) == [("a", 1, 1), ("b", 2, 1)]
    sink.pre_commit(df([("a", 5), ("c", 7)]), 2)
    sink.abort_after(1)
    sink.abort_after(1)
    assert rows(postgres_server.dsn, table) == [("a", 1, 1), ("b", 2, 1)]
    assert prepared(postgres_server.dsn, f"falkirk:p:{table}:") == []
    sink.pre_commit(df([("a", 5), ("c", 7)]), 2)  # the replay of epoch 2
    sink.commit_upto(2)
    assert rows(postgres_server.dsn, table) == [("a", 5, 2), ("b", 2, 1), ("c", 7, 2)]
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        cols = conn.execute(
            "SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
            (table,),
        ).fetchall()
    assert cols == [("k", "text", "NO"), ("v", "bigint", "NO"), ("epoch", "bigint", "NO")]


def test_append_mode_prepares_several_epochs_without_waiting(spark: SparkSession, postgres_server: PostgresServer) -> None:
    sink, table = sink_for(postgres_server, mode="append")
    df = lambda data: spark.createDataFrame(data, "k string, v long")  # noqa: E731
    sink.prepare(df([]))
    for e in (1, 2, 3):
        sink.pre_commit(df([("a", e)]), e)
    assert sink.prepared() == [1, 2, 3]
    sink.abort_after(2)
    sink.commit_upto(2)
    assert rows(postgres_server.dsn, table) == [("a", 1, 1), ("a", 2, 2)]


def test_a_retried_pre_commit_of_a_prepared_epoch_writes_nothing_twice(spark: SparkSession, postgres_server: PostgresServer) -> None:
    sink, table = sink_for(postgres_server, mode="append")
    df = spark.createDataFrame([("a", 1)], "k string, v long")
    sink.prepare(df.limit(0))
    sink.pre_commit(df, 1)
    sink.pre_commit(df, 1)
    sink.commit_upto(1)
    assert rows(postgres_server.dsn, table) == [("a", 1, 1)]


def test_a_late_write_of_a_committed_epoch_writes_nothing(spark: SparkSession, postgres_server: PostgresServer) -> None:
    """A Spark task of a killed driver that runs on after another driver wrote and
    committed its epoch (a restart; a driver pair's take-over) finds the epoch's mark
    and adds nothing; so does a rollback's replay of an epoch committed before (a root
    restored from an older backup: abort_after keeps committed marks). A fresh root
    has an identity of its own, whose marks are its own."""
    sink, table = sink_for(postgres_server, mode="append")
    df = spark.createDataFrame([("a", 1)], "k string, v long")
    sink.prepare(df.limit(0))
    sink.pre_commit(df, 1)
    sink.commit_upto(1)
    sink.pre_commit(df, 1)  # the late write
    assert sink.prepared() == []
    sink.commit_upto(1)
    assert rows(postgres_server.dsn, table) == [("a", 1, 1)]
    sink.abort_after(0)  # a restored older backup replays epoch 1: written already
    sink.pre_commit(df, 1)
    sink.commit_upto(1)
    assert rows(postgres_server.dsn, table) == [("a", 1, 1)]
    sink.bind("p.another-root", table)  # a new root (its own identity) writes its epoch 1
    sink.abort_after(0)
    sink.pre_commit(df, 1)
    sink.commit_upto(1)
    assert rows(postgres_server.dsn, table) == [("a", 1, 1), ("a", 1, 1)]


def test_a_key_twice_in_one_epoch_is_a_clear_error(spark: SparkSession, postgres_server: PostgresServer) -> None:
    sink, _ = sink_for(postgres_server, key=("k",))
    df = spark.createDataFrame([("a", 1), ("a", 2)], "k string, v long")
    sink.prepare(df.limit(0))
    with pytest.raises(Exception, match="appears twice in one epoch"):
        sink.pre_commit(df, 1)
    assert sink.prepared() == []


def test_an_error_the_write_would_meet_again_is_not_retried_and_reaches_the_user_clearly(spark: SparkSession, postgres_server: PostgresServer, tmp_path: Path) -> None:
    """Adversarial review: a key too long for PostgreSQL's index (SQLSTATE 54000) was
    retried for retry_seconds as if the connection were lost, then surfaced as a JVM
    traceback. Now: refused at once, and an error naming the processor and the epoch."""
    from falkirk.exceptions import FalkirkError
    from falkirk.graph import Pipeline
    from falkirk.io import GeneratorSource
    from falkirk.runtime import Engine

    table = f"t_{uuid.uuid4().hex[:8]}"
    p = Pipeline("long")
    key = base64.b64encode(random.Random(1).randbytes(6000)).decode()  # incompressible: too long for the index
    source = GeneratorSource("k string, v long", 1, lambda spark, b: spark.createDataFrame([(key, 1)], "k string, v long"), 1)
    p.source("src", source).sink("out", PostgresSink(postgres_server.dsn, table, key=("k",), retry_seconds=60))
    started = time.monotonic()
    with pytest.raises(FalkirkError, match=r"processor 'out' failed writing epoch 1: .*SQLSTATE 54000.*index row"):
        Engine(p, str(tmp_path / "state"), spark=spark).run()
    assert time.monotonic() - started < 50  # not retried for a minute
    assert rows(postgres_server.dsn, table) == []


def test_a_server_without_prepared_transactions_is_refused_at_start(spark: SparkSession) -> None:
    with PostgresServer(prepared=0) as server:
        sink = PostgresSink(server.dsn, "t", key=("k",))
        sink.bind("p", "out")
        with pytest.raises(SinkError, match="max_prepared_transactions = 0"):
            sink.prepare(spark.createDataFrame([], "k string"))


def test_bad_configurations_are_named() -> None:
    with pytest.raises(SinkError, match="upsert needs key"):
        PostgresSink("dsn", "t")
    with pytest.raises(SinkError, match="mode must be"):
        PostgresSink("dsn", "t", key=("k",), mode="merge")
    s = PostgresSink("postgresql://postgres@127.0.0.1:1/postgres", "t", key=("k",), retry_seconds=1)
    started = time.monotonic()
    with pytest.raises(SinkError, match=r"kept failing for 1 s.*Connection refused"):
        s.prepared()
    assert time.monotonic() - started >= 0.5  # retried with backoff, then gave up


def test_upserts_under_global_checkpoints_between_barriers_are_refused(spark: SparkSession, tmp_path: Path) -> None:
    """Adversarial review: the next epoch's upsert waited for locks that only a later
    barrier could free, so the pipeline could never progress."""
    from falkirk.graph import GlobalCheckpoints, GraphError, Pipeline
    from falkirk.io import keyed_generator
    from falkirk.runtime import Engine

    p = Pipeline("g", checkpoints=GlobalCheckpoints(every=3))
    (
        p.source("src", keyed_generator(batches=2, rows_per_batch=5, keys=2))
        .aggregate("agg", "key", {"n": ("count", None)})
        .sink("out", PostgresSink("postgresql://nobody@127.0.0.1:1/none", "t", key=("key",)))
    )
    with pytest.raises(GraphError, match="releases epochs only at barriers"):
        Engine(p, str(tmp_path / "state"), spark=spark).run()


def test_two_pipelines_of_one_name_on_two_roots_never_share_a_transaction(spark: SparkSession, tmp_path: Path) -> None:
    """Adversarial review: transactions were named after the pipeline's name only, so a
    second pipeline of that name rolled back the first one's in-doubt epochs."""
    from falkirk.graph import Pipeline
    from falkirk.io import MemorySink, keyed_generator
    from falkirk.runtime import Engine

    p = Pipeline("same")
    p.source("src", keyed_generator(batches=1, rows_per_batch=1, keys=1)).sink("out", MemorySink())
    a, b = Engine(p, str(tmp_path / "a"), spark=spark), Engine(p, str(tmp_path / "b"), spark=spark)
    a.run()
    b.run()
    assert a.identity is not None and b.identity is not None
    assert a.identity != b.identity and str(a.identity).startswith("same.")


def test_column_names_with_percent_signs_are_written(spark: SparkSession, postgres_server: PostgresServer) -> None:
    # Issue 30, finding 8: a column named like a parameter failed the insert with a raw ProgrammingError.
    sink, table = sink_for(postgres_server, key=("k%s",))
    df = spark.createDataFrame([("a", 1)], "`k%s` string, `v%%` long")
    sink.prepare(df.limit(0))
    sink.pre_commit(df, 1)
    sink.commit_upto(1)
    assert rows(postgres_server.dsn, f'"{table}"') == [("a", 1, 1)]
    sink.pre_commit(spark.createDataFrame([("a", 2)], "`k%s` string, `v%%` long"), 2)  # the upsert's update
    sink.commit_upto(2)
    assert rows(postgres_server.dsn, f'"{table}"') == [("a", 2, 2)]
