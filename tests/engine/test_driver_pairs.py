"""Driver pairs (Flux's dataflow pairs): two drivers run the clickstream pipeline at
once on their own storage roots, sharing their input assignment, their output tables
and a PostgreSQL database. Each is SIGKILLed in turn: one in the middle of the
egress (an epoch written, the other driver not yet told), replaced by a new driver
that catches up from the other's state while it runs; then the other, at a random
moment, while the new one goes on alone; restarted, it recovers from its own root
(the pair kept what it needs). Input files arrive one by one, as the pair commits
them, while the drivers run as services; the first survivor never ends on its own
(it is killed), so however slow the machine it still runs when the new driver
joins. The whole output and dead-letter tables must equal one batch job's over the
input that arrived."""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from falkirk.storage.pairs import PairError, PairStore
from falkirk.testing.clickstream import batch_output, batch_rejected, write_input
from tests.engine.test_clickstream_recovery import MIX, RUNNER, check

pytestmark = pytest.mark.slow


#: Seconds a driver waits for new input before it ends (the first ``b``: for ever).
IDLE = 5.0
#: Input files not yet committed by either driver that the feeder lets wait.
AHEAD = 2


class Run:
    """The pair's subprocesses, their logs in files, all killed at the end of the
    test whatever happens."""

    def __init__(self, clicks: Path, work: Path, dsn: str, name: str) -> None:
        self.clicks, self.work, self.dsn, self.name = clicks, work, dsn, name
        self.procs: list[subprocess.Popen[bytes]] = []

    def member(self, root: str, crash: str | None = None, idle: float = IDLE) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if k != "FALKIRK_CRASH_AT"}
        env.update(FALKIRK_TEST_PAIR=self.dsn, FALKIRK_TEST_PAIR_NAME=self.name, FALKIRK_TEST_IDLE=str(idle))
        if crash:
            env["FALKIRK_CRASH_AT"] = crash
        args = [str(self.clicks), str(self.work / "out"), str(self.work / root), str(self.work / "rej"), *MIX]
        logs = self.work / f"{root}-{len(self.procs)}"
        with open(f"{logs}.out", "wb") as out, open(f"{logs}.err", "wb") as err:
            proc = subprocess.Popen([sys.executable, str(RUNNER), *args], env=env, stdout=out, stderr=err)
        proc.logs = logs  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def said(proc: subprocess.Popen[bytes]) -> str:
    """What ``proc`` printed, once it ended (exit 0 or SIGKILL, else its stderr is
    the error)."""
    proc.wait(timeout=600)
    logs: Path = proc.logs  # type: ignore[attr-defined]
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(Path(f"{logs}.err").read_text()[-3000:])
    return Path(f"{logs}.out").read_text()


class Feeder(threading.Thread):
    """Moves the staged input files into the input directory (a rename: a file is
    never seen half written) one by one, as the pair commits them: at most AHEAD
    files wait, so the drivers never fall far behind and stay close to each other
    (each claims some epochs first). Runs until stopped; a failed look at the pair's
    progress is retried."""

    def __init__(self, staged: Path, clicks: Path, progress: PairStore) -> None:
        super().__init__(daemon=True)
        self.files = sorted(staged.iterdir())
        self.clicks, self.progress, self.stopped = clicks, progress, threading.Event()
        self.moved = 0
        clicks.mkdir()
        for _ in range(AHEAD + 2):
            self.move_one()

    def move_one(self) -> None:
        f = self.files.pop(0)
        f.rename(self.clicks / f.name)
        self.moved += 1

    def run(self) -> None:
        while self.files and not self.stopped.wait(0.5):
            try:
                furthest = max((m.committed or 0 for m in self.progress.members()), default=0)
            except PairError:
                continue
            if self.moved - furthest < AHEAD:
                self.move_one()


def committed(operator: PairStore, root: Path) -> int | None:
    """``root``'s committed epoch as the pair records it once it recovered (None
    before, or while it is not running)."""
    found = [m for m in operator.members() if m.name == str(root) and m.alive and not m.joining]
    return found[0].committed if found else None


def takeovers(dsn: str, name: str) -> int:
    """Claims of the egress taken over from a dead writer (rows of a dead member's
    unreleased epochs are kept)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT coalesce(max(takeovers), 0) FROM falkirk.pair_egress WHERE pair = %s", (name,)).fetchone()
    return int(row[0]) if row else 0


def wait_for(what: str, ready: Callable[[], bool], *alive: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 180
    while not ready():
        assert time.monotonic() < deadline and all(p.poll() is None for p in alive), what
        time.sleep(0.2)


def test_either_driver_of_a_pair_dies_and_a_restarted_one_catches_up(spark, postgres_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    clicks, staged = tmp_path / "clicks", tmp_path / "staged"
    write_input(staged, files=80, sessions_per_file=30, users=12, seed=17, bad_fraction=0.05)
    dsn, name = postgres_server.dsn, f"pair-{uuid.uuid4().hex[:8]}"
    operator = PairStore(dsn, name, "operator")
    feeder = Feeder(staged, clicks, operator)
    run = Run(clicks, tmp_path, dsn, name)
    try:
        feeder.start()
        a = run.member("a", crash="pair.written:3")
        b = run.member("b", idle=math.inf)  # killed below: never ends on its own
        said(a)
        assert a.returncode == -signal.SIGKILL, "a dies in the egress"
        # b takes a's written, unannounced epoch over, and goes past a's epochs (so
        # that the new driver copies b's root, not the dead a's)
        wait_for("b takes a's claim over", lambda: takeovers(dsn, name) >= 1, b)
        a_committed = next((m.committed or 0) for m in operator.members() if m.name == str(tmp_path / "a"))
        wait_for("b goes on alone", lambda: (committed(operator, tmp_path / "b") or 0) > a_committed, b)
        a = run.member("a2")  # a new driver (a's host is gone) while b runs
        wait_for("a2 joins the pair", lambda: committed(operator, tmp_path / "a2") is not None, a, b)
        copied = committed(operator, tmp_path / "a2") or 0
        operator.remove(str(tmp_path / "a"))  # it will not come back
        wait_for("a2 commits epochs of its own", lambda: (committed(operator, tmp_path / "a2") or 0) > copied, a, b)
        time.sleep(random.Random(3).uniform(0.0, 2.0))  # both run as a pair again
        assert b.poll() is None, "b still runs"
        b.send_signal(signal.SIGKILL)
        feeder.stopped.set()
        feeder.join()
        a_said = said(a)
        said(b)
        assert a.returncode == 0
        assert f"caught up from {tmp_path / 'b'}" in a_said, "the new driver copies the live one's state"
        b = run.member("b")
        b_said = said(b)
        assert b.returncode == 0
        assert "caught up" not in b_said, "b recovers from its own root: the pair kept what it reads"
    finally:
        feeder.stopped.set()
        run.kill_all()
    check(tmp_path, clicks, (batch_output(spark, str(clicks)), batch_rejected(spark, str(clicks))))
