"""``examples/redis_to_postgres.py`` under SIGKILL, against real Redis and PostgreSQL:
killed at every crash point (between PREPARE and the metadata commit, between the
commit and COMMIT PREPARED, before acknowledging, ...) and at random moments while
entries keep arriving, then started again with the same arguments, it ends with
exactly the totals and dead letters a plain-Python computation over the stream gives,
nothing pending in the group and no prepared transaction left."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import redis

from falkirk.testing.redis_postgres import expected
from falkirk.testing.services import PostgresServer, RedisServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "redis_to_postgres.py"
pytestmark = pytest.mark.slow


class Case:
    def __init__(self, redis_server: RedisServer, postgres_server: PostgresServer, tmp_path: Path) -> None:
        tag = uuid.uuid4().hex[:8]
        self.stream, self.table, self.group = f"ev-{tag}", f"totals_{tag}", "falkirk"
        self.redis_url, self.dsn, self.storage = redis_server.url, postgres_server.dsn, tmp_path / "state"
        self.r = redis.Redis.from_url(self.redis_url)
        self.rng = random.Random(tag)
        self.n = 0

    def add(self, count: int) -> None:
        for _ in range(count):
            i = self.n
            self.n += 1
            fields: dict[str, str | bytes] = {"user_id": f"u{self.rng.randrange(9)}", "amount": str(self.rng.randint(-500, 1000))}
            bad = self.rng.random()
            if bad < 0.03:
                fields["amount"] = self.rng.choice(["12.50", "42USD", "", " 7", "99999999999999999999"])
            elif bad < 0.05:
                del fields[self.rng.choice(["user_id", "amount"])]
            elif bad < 0.06:
                fields["user_id"] = ""
            elif bad < 0.065:
                fields["user_id"] = b"\xff\xfe"
            elif bad < 0.075:  # a valid entry with an undecodable field it does not need
                fields["note"] = b"\xfe\xff caf\xc3\xa9"
            if bad < 0.01:  # invalid, with fields named like the dead letter's own
                fields["reason"], fields["id"] = "mine", "not-an-id"
            fields["seq"] = str(i)
            flat: list[str | bytes] = [part for pair in fields.items() for part in pair]
            odd = self.rng.random()
            if odd < 0.01:  # a repeated amount: ambiguous, rejected
                flat += ["amount", "5"]
            elif odd < 0.02:  # a repeated other field: ignored, kept in a dead letter
                flat += ["seq", "again"]
            elif odd < 0.025 and "user_id" in fields:  # user ids PostgreSQL cannot store as a key
                flat[flat.index("user_id") + 1] = self.rng.choice(["nul\x00inside", "x" * 2500])
            self.r.execute_command("XADD", self.stream, "*", *flat)

    def feed_in_background(self, batches: int, size: int, every: float) -> threading.Thread:
        def feed() -> None:
            for _ in range(batches):
                time.sleep(every)
                self.add(size)

        thread = threading.Thread(target=feed, daemon=True)
        thread.start()
        return thread

    def start(self, crash: str | None = None, max_entries: int = 10_000, member: str | None = None) -> subprocess.Popen[bytes]:
        """The example; ``member`` names a driver pair's member (its own storage root)."""
        env = {k: v for k, v in os.environ.items() if k != "FALKIRK_CRASH_AT"}
        if crash:
            env["FALKIRK_CRASH_AT"] = crash
        storage = self.storage if member is None else self.storage.with_name(f"state-{member}")
        pair = [] if member is None else ["--pair", self.dsn, "--pair-name", self.stream]
        args = ["--redis", self.redis_url, "--stream", self.stream, "--group", self.group, "--pg", self.dsn,
                "--table", self.table, "--storage", str(storage), "--idle-exit", "2",
                "--max-entries", str(max_entries), *pair]
        return subprocess.Popen([sys.executable, str(EXAMPLE), *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def entries(self, stream: str) -> list[tuple[str, list[tuple[bytes, bytes]]]]:
        """Every entry as Redis holds it: (id, [(name, value), ...]) in order, repeats kept."""
        raw = redis.Redis.from_url(self.redis_url)
        raw.set_response_callback("XRANGE", lambda response, **_: response)
        return [(i.decode(), [(f[k], f[k + 1]) for k in range(0, len(f), 2)]) for i, f in raw.xrange(stream)]

    def check(self) -> None:
        entries = self.entries(self.stream)
        want = expected(entries)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            got = conn.execute(f"SELECT user_id, total, events, epoch FROM {self.table} ORDER BY user_id").fetchall()
            left = conn.execute("SELECT gid FROM pg_prepared_xacts WHERE gid LIKE %s", (f"%{self.stream}%",)).fetchall()
        assert sorted((u, t, n) for u, t, n, _ in got) == sorted(want.totals.itertuples(index=False, name=None))
        assert all(e >= 1 for *_, e in got)
        assert left == [], f"prepared transactions left: {left}"
        dead = self.entries(f"{self.stream}:dead")
        assert [i for i, _ in dead] == sorted(want.dead["id"], key=lambda s: tuple(map(int, s.split("-"))))
        originals = dict(entries)
        for i, pairs in dead:  # every original field kept: bytes, order, repeats; none overwritten
            kept = [(b"original." + k if k in (b"id", b"reason") else k, v) for k, v in originals[i]]
            assert pairs[:-2] == kept
            assert pairs[-2] == (b"id", i.encode()) and pairs[-1][0] == b"reason" and pairs[-1][1]
        assert self.r.xpending(self.stream, self.group)["pending"] == 0


def finish(proc: subprocess.Popen[bytes], timeout: float = 600) -> int:
    _, err = proc.communicate(timeout=timeout)
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(err.decode()[-3000:])
    return proc.returncode


#: The points where Redis or PostgreSQL hold something in between: entries delivered
#: to the group and planned; an epoch's transaction prepared, not committed (what
#: ``commit.before`` also leaves); committed and not yet COMMIT PREPARED (``sink.release``:
#: what ``commit.after`` also leaves, a transactional sink publishing nothing at its
#: commit); released, not yet acknowledged. The generic points (``epoch.computed``,
#: ``commit.before``, ``commit.after``, ``gc.before``) are the clickstream chains'.
POINTS = ["epoch.planned", "sink.written", "sink.release", "source.ack"]


def test_killed_at_each_crash_point_while_entries_arrive(redis_server: RedisServer, postgres_server: PostgresServer, tmp_path: Path) -> None:
    """One chain (each killed run is a driver start on CI's clock): each run is
    killed the second time it reaches the next point, its recovery from the previous
    kill included, while entries keep arriving; then one at a random moment while
    more arrive; then a run ends once the stream is idle. 30 entries an epoch, and enough entries already there that every run has
    two epochs to plan however late it starts."""
    case = Case(redis_server, postgres_server, tmp_path)
    case.add(200)
    feeder = case.feed_in_background(batches=30, size=15, every=1.0)
    for point in POINTS:
        assert finish(case.start(crash=f"{point}:2", max_entries=30)) == -signal.SIGKILL, f"{point}:2 was not reached"
    feeder.join()
    feeder = case.feed_in_background(batches=20, size=20, every=0.5)  # and a kill at a random moment
    proc = case.start()
    time.sleep(random.Random(11).uniform(4, 12))  # a JVM start is ~5 s: the kill may land in recovery
    proc.send_signal(signal.SIGKILL)
    finish(proc)
    feeder.join()
    assert finish(case.start()) == 0
    case.check()


def test_a_postgres_restart_mid_run_is_ridden_out_without_stopping(redis_server: RedisServer, tmp_path: Path) -> None:
    """PostgreSQL stopped (fast shutdown: connections cut, prepared transactions kept)
    for a few seconds while entries arrive and epochs are written: the example retries,
    never stops, and ends with exactly the plain computation's totals."""
    with PostgresServer() as pg:
        case = Case(redis_server, pg, tmp_path)
        case.add(60)
        feeder = case.feed_in_background(batches=24, size=15, every=0.5)
        proc = case.start()
        deadline = time.monotonic() + 120
        while not _committed_rows(case) and time.monotonic() < deadline:  # the example is writing
            time.sleep(0.2)
        assert _committed_rows(case), "the example wrote nothing within two minutes"
        pg.restart(down_seconds=3)
        feeder.join()
        assert finish(proc) == 0
        case.check()


def _committed_rows(case: Case) -> int:
    try:
        with psycopg.connect(case.dsn, autocommit=True) as conn:
            return int(conn.execute(f"SELECT count(*) FROM {case.table}").fetchone()[0])  # type: ignore[index]
    except psycopg.errors.UndefinedTable:
        return 0


def test_a_driver_pair_loses_either_driver_while_entries_arrive(redis_server: RedisServer, postgres_server: PostgresServer, tmp_path: Path) -> None:
    """Two drivers of a driver pair (their own storage roots; one Redis group, one
    PostgreSQL table): one is killed between preparing an epoch's transaction and
    telling the other (which takes the epoch over: the transaction is found
    prepared, not written twice) and restarts; the other is killed at a random
    moment and restarts. Exactly the plain totals, every entry acknowledged once
    both are done, no prepared transaction left."""
    case = Case(redis_server, postgres_server, tmp_path)
    case.add(100)
    feeder = case.feed_in_background(batches=30, size=20, every=0.5)
    a = case.start(crash="pair.written:2", max_entries=30, member="a")
    b = case.start(max_entries=30, member="b")
    assert finish(a) == -signal.SIGKILL, "pair.written:2 was not reached"
    a = case.start(max_entries=30, member="a")
    time.sleep(random.Random(5).uniform(3, 8))
    b.send_signal(signal.SIGKILL)
    finish(b)
    feeder.join()
    assert finish(a) == 0
    assert finish(case.start(member="b")) == 0
    case.check()
