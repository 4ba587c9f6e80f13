"""Per-user totals from a Redis stream into PostgreSQL (``examples/redis_to_postgres.py``).

Entries of a Redis stream carry ``user_id`` (a non-empty string) and ``amount`` (an
integer, possibly negative, written as plain decimal digits with an optional leading
``-``); other fields are ignored (whatever their bytes). Per user the PostgreSQL
table keeps the sum of the valid amounts and the number of valid entries; every
invalid entry goes to the dead-letter stream ``<stream>:dead`` with its fields
(exactly: bytes, order and repeated names), its ``id`` and a ``reason`` (an original
field named ``id`` or ``reason`` is kept as ``original.id`` / ``original.reason``).
Invalid besides a missing, empty or non-integer field: a ``user_id`` or ``amount``
that is not UTF-8 or is given twice in the entry (which one would count?), and a
``user_id`` that PostgreSQL cannot store as a key (a NUL character, or longer than
:data:`MAX_USER_BYTES` bytes) - rather than stopping the pipeline at the sink.

A user's total is a 64-bit integer (``bigint``), as the table's contract says. If a
user's valid amounts ever sum beyond that range, the pipeline stops with an error
naming the overflow (Spark's ANSI arithmetic) rather than writing a wrapped total;
nothing is committed for that epoch, and the entries stay pending in the group.

The dataflow and its policies, and why::

    entries (RedisStreamSource, acknowledged) ── check ──┬── valid ── totals ── table (PostgresSink, 2PC upsert)
                                                         └── rejected ── dead letters (RedisStreamSink)

* ``entries``: the consumer group's pending entries are the source's log; an epoch's
  id range is committed before it runs, and entries are acknowledged (XACK) only
  once no recovery can read them again;
* ``check``: stateless (cheap to recompute from the entries);
* ``totals``: ``EagerCheckpoint`` - the per-user state is small and written every
  epoch, so every epoch is released at its commit: the table's prepared
  transaction of an epoch holds its rows' locks until released, and the next
  epoch's upsert of the same users waits for that release;
* ``table``: one prepared transaction per epoch, committed when released;
* dead letters: written under the entries' own ids, so exactly once.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from falkirk.demo.moved import forward
from falkirk.graph import EagerCheckpoint, Pipeline
from falkirk.io.postgres import PostgresSink
from falkirk.io.redis_streams import RedisStreamSink, RedisStreamSource

TABLE_COLUMNS = ("user_id", "total", "events", "epoch")
#: The longest user_id the table's primary key index holds (PostgreSQL's B-tree limit
#: is ~2,700 bytes per entry; kept well under it).
MAX_USER_BYTES = 2000
_INTEGER = r"^-?[0-9]+\z"


def check(df: DataFrame) -> DataFrame:
    """The entries with a ``reason`` (null for valid ones) and, for valid ones,
    ``user_id`` and ``amount`` (bigint)."""
    user, amount = F.col("fields")["user_id"], F.col("fields")["amount"]
    parsed = F.expr("try_cast(fields['amount'] AS BIGINT)")
    needed = F.array(F.lit("amount"), F.lit("user_id"))
    undecodable = F.array_intersect("undecodable", needed)
    repeated = F.array_intersect("repeated", needed)
    reason = (
        F.when(F.size(undecodable) > 0, F.concat(F.lit("not UTF-8: "), F.array_join(F.array_sort(undecodable), ", ")))
        .when(F.size(repeated) > 0, F.concat(F.lit("given more than once: "), F.array_join(F.array_sort(repeated), ", ")))
        .when(user.isNull(), F.lit("missing user_id"))
        .when(user == "", F.lit("empty user_id"))
        .when(F.instr(user, "\u0000") > 0, F.lit("user_id contains a NUL character (PostgreSQL text cannot hold it)"))
        .when(F.octet_length(user) > MAX_USER_BYTES, F.lit(f"user_id is longer than {MAX_USER_BYTES} bytes (PostgreSQL cannot index it)"))
        .when(amount.isNull(), F.lit("missing amount"))
        .when(amount == "", F.lit("empty amount"))
        .when(~amount.rlike(_INTEGER), F.lit("amount is not an integer"))
        .when(parsed.isNull(), F.lit("amount is out of range (64-bit integers)"))
    )
    return df.select("id", "fields", "raw", user.alias("user_id"), parsed.alias("amount"), reason.alias("reason"))


def build_pipeline(
    redis_url: str, stream: str, group: str, dsn: str, table: str, max_entries: int = 10_000, retry_seconds: float = 60.0
) -> Pipeline:
    """The dataflow above; an epoch reads at most ``max_entries`` entries; PostgreSQL
    unreachable for ``retry_seconds`` stops the pipeline."""
    p = Pipeline(f"redis_to_postgres.{stream}")
    source = RedisStreamSource(redis_url, stream, group, max_entries=max_entries)
    valid, rejected = p.source("entries", source).validate("check", check)
    (
        valid.map("amounts", lambda df: df.select("user_id", "amount"))
        .aggregate("totals", "user_id", {"total": ("sum", "amount"), "events": ("count", None)}, policy=EagerCheckpoint())
        .sink("table", PostgresSink(dsn, table, key=("user_id",), not_null=True, retry_seconds=retry_seconds))
    )
    rejected.map("dead_rows", lambda df: df.select("id", "fields", "raw", "reason")).sink("dead", RedisStreamSink(redis_url, f"{stream}:dead"))
    return p


#: What moved to :mod:`falkirk.testing.redis_postgres` (see :mod:`falkirk.demo.moved`).
_MOVED = frozenset(['Expected', 'expected'])


def __getattr__(name: str) -> object:
    return forward(__name__, name, "falkirk.testing.redis_postgres", _MOVED)
