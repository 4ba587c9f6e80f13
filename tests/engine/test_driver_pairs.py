"""Driver pairs (Flux's dataflow pairs): two drivers run the clickstream pipeline at
once on their own storage roots, sharing their input assignment, their output tables
and a PostgreSQL database. Each is SIGKILLed in turn: one in the middle of the
egress (an epoch written, the other driver not yet told), replaced by a new driver
that catches up from the other's state while it runs; then the other, at a random
moment, while the new one goes on alone; restarted, it recovers from its own root
(the pair kept what it needs). Input files arrive one by one, as the pair commits them, while the
drivers run as services, until the survivor has been killed: however slow the machine, the
survivor still runs when the new driver joins. The whole output and dead-letter
tables must equal one batch job's over the input that arrived."""

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

import pytest

from falkirk.demo.clickstream import batch_output, batch_rejected, write_input
from falkirk.storage.pairs import PairStore
from tests.engine.test_clickstream_recovery import MIX, RUNNER, check

pytestmark = pytest.mark.slow


def member(clicks: Path, work: Path, root: str, dsn: str, name: str, crash: str | None = None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "FALKIRK_CRASH_AT"}
    env.update(FALKIRK_TEST_PAIR=dsn, FALKIRK_TEST_PAIR_NAME=name, FALKIRK_TEST_IDLE=str(IDLE))
    if crash:
        env["FALKIRK_CRASH_AT"] = crash
    args = [str(clicks), str(work / "out"), str(work / root), str(work / "rej"), *MIX]
    return subprocess.Popen([sys.executable, str(RUNNER), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


#: Seconds a driver waits for new input before it ends.
IDLE = 5.0
#: Input files not yet committed by either driver that the feeder lets wait.
AHEAD = 2


class Feeder(threading.Thread):
    """Moves the staged input files into the input directory (a rename: a file is
    never seen half written) one by one, as the pair commits them: at most AHEAD
    files wait, so the drivers never idle and never fall far behind, however slow
    the machine. Runs until stopped."""

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
            furthest = max((m.committed or 0 for m in self.progress.members()), default=0)
            if self.moved - furthest < AHEAD:
                self.move_one()

    def stop(self) -> None:
        self.stopped.set()
        self.join()
        assert self.files, "the input ran out before the survivor was killed: stage more files"


def output(proc: subprocess.Popen[bytes]) -> str:
    out, err = proc.communicate(timeout=600)
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(err.decode()[-3000:])
    return out.decode()


def test_either_driver_of_a_pair_dies_and_a_restarted_one_catches_up(spark, postgres_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    clicks, staged = tmp_path / "clicks", tmp_path / "staged"
    write_input(staged, files=80, sessions_per_file=30, users=12, seed=17, bad_fraction=0.05)
    dsn, name = postgres_server.dsn, f"pair-{uuid.uuid4().hex[:8]}"
    operator = PairStore(dsn, name, "operator")
    feeder = Feeder(staged, clicks, operator)
    feeder.start()
    a = member(clicks, tmp_path, "a", dsn, name, crash="pair.written:3")
    b = member(clicks, tmp_path, "b", dsn, name)
    output(a)
    assert a.returncode == -signal.SIGKILL, "a dies in the egress"
    a = member(clicks, tmp_path, "a2", dsn, name)  # a new driver (a's host is gone) while b runs
    deadline = time.monotonic() + 150
    while not any(m.name == str(tmp_path / "a2") and m.alive and not m.joining for m in operator.members()):
        assert time.monotonic() < deadline and a.poll() is None, "a2 never joined the pair"
        time.sleep(0.2)
    operator.remove(str(tmp_path / "a"))  # it will not come back
    time.sleep(random.Random(3).uniform(0.5, 3.0))  # both run as a pair again
    assert b.poll() is None, "b still runs: input keeps arriving"
    b.send_signal(signal.SIGKILL)
    feeder.stop()
    a_said = output(a)
    output(b)
    assert a.returncode == 0
    assert f"caught up from {tmp_path / 'b'}" in a_said, "the new driver copies the live one's state"
    b = member(clicks, tmp_path, "b", dsn, name)
    b_said = output(b)
    assert b.returncode == 0
    assert "caught up" not in b_said, "b recovers from its own root: the pair kept what it reads"
    check(tmp_path, clicks, (batch_output(spark, str(clicks)), batch_rejected(spark, str(clicks))))
