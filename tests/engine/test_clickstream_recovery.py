"""Crash tests: SIGKILL the clickstream pipeline at every crash point and at random
moments, for several policy mixes; restart it; compare with one Spark batch job.

The contract checked: the WHOLE output - every row of the output table and of the
dead-letter table, as multisets - equals what one plain Spark batch job computes over
the same input (:func:`~falkirk.testing.clickstream.batch_output`, per user and epoch),
so no committed epoch may go missing, none may appear twice, and every invalid row
appears exactly once. (Comparing only each user's latest row once hid the loss of
every committed epoch of the output table.)
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from falkirk.control.faults import POINTS
from falkirk.demo.clickstream import build_pipeline
from falkirk.io import clickstream_generator
from falkirk.io.sinks import TABLE_LOCK
from falkirk.runtime import Engine
from falkirk.storage.lock import LOCK_NAME
from falkirk.testing.clickstream import (
    batch_output,
    batch_rejected,
    expected_rejections,
    write_input,
)
from falkirk.testing.verify import differences
from falkirk.testing.visibility import CommittedOnly
from tests.engine.clickstream_runner import policy
from tests.engine.examples import kill_at_a_random_moment, kill_at_each, run_example_here

RUNNER = Path(__file__).with_name("clickstream_runner.py")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "clickstream.py"
#: The reference: (whole output table, whole dead-letter table) of a batch job.
Expected = tuple[pd.DataFrame, pd.DataFrame]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def clicks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("clicks")
    write_input(directory, files=5, sessions_per_file=30, users=12, seed=7, bad_fraction=0.05)
    return directory


@pytest.fixture(scope="module")
def expected(spark, clicks: Path) -> tuple[pd.DataFrame, pd.DataFrame]:  # type: ignore[no-untyped-def]
    return batch_output(spark, str(clicks)), batch_rejected(spark, str(clicks))


def start(
    clicks: Path | str,
    work: Path,
    policies: tuple[str, str],
    crash: str | None = None,
    *,
    uri_cache: Path | None = None,
    vectorized: bool = False,
    standby: bool = False,
    env_extra: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Run the pipeline; with ``uri_cache`` the storage root and output tables are
    ``file://`` URIs (reached through Hadoop) and the driver's metadata working copy
    lives under ``uri_cache``."""
    env = dict(os.environ)
    env.pop("FALKIRK_CRASH_AT", None)
    if crash:
        env["FALKIRK_CRASH_AT"] = crash
    env.pop("FALKIRK_TEST_STANDBY", None)
    if standby:
        env["FALKIRK_TEST_STANDBY"] = "1"
    prefix = ""
    if uri_cache is not None:
        env["XDG_CACHE_HOME"] = str(uri_cache)
        prefix = "file://"
    args = [f"{prefix}{work / name}" for name in ("out", "state", "rej")]
    args = [str(clicks), *args, *policies, *(["vec"] if vectorized else [])]
    env.update(env_extra or {})
    out = subprocess.PIPE if standby else subprocess.DEVNULL
    return subprocess.Popen([sys.executable, str(RUNNER), *args], env=env, stdout=out, stderr=subprocess.PIPE)


def finish(proc: subprocess.Popen[bytes]) -> int:
    _, err = proc.communicate(timeout=600)
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(err.decode()[-3000:])
    return proc.returncode


def check(work: Path, clicks: Path, expected: Expected) -> None:
    """The whole output and dead-letter tables equal the batch job's, row for row."""
    want_out, want_rejected = expected
    out = pd.read_parquet(work / "out")
    assert list(out.columns) == ["user_id", "sessions", "max_duration", "avg_duration", "epoch"]
    assert str(out["sessions"].dtype) == "int64" and str(out["epoch"].dtype) == "int64"
    assert not out.duplicated(["user_id", "epoch"]).any(), "a (user_id, epoch) appears twice"
    assert differences(out, want_out, name="output") == []
    rejected = pd.read_parquet(work / "rej")
    assert differences(rejected, want_rejected, name="rejected") == []
    assert len(rejected) == expected_rejections(str(clicks))  # independent of Spark
    assert rejected["reason"].notna().all()


MIX = ("eager", "lazy:2")


def run_here(spark, clicks: Path, work: Path, policies: tuple[str, str], *, vectorized: bool = False, source=None, uri_cache: Path | None = None, lease: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    """What ``start`` runs, in this process (no second JVM start), to the end; with
    ``uri_cache``, as ``start``'s: ``file://`` URIs and a metadata working copy of
    its own (another machine's)."""
    prefix = "file://" if uri_cache is not None else ""
    pipeline = build_pipeline(
        str(clicks), f"{prefix}{work / 'out'}", f"{prefix}{work / 'rej'}", sessions_policy=policy(policies[0]),
        stats_policy=policy(policies[1]), source=source, vectorized=vectorized,
    )  # fmt: skip
    Engine(pipeline, f"{prefix}{work / 'state'}", spark=spark, metadata_dir=uri_cache, lease_timeout=lease).run()


#: Each run is killed at the next point (the n-th time that run reaches it, its
#: recovery included), so every generic crash point is recovered from - most by a run
#: that itself recovered - and the rest of the input then runs to the end. Each chain
#: runs its own mix of policies (sessions, user_stats), so every policy recovers from
#: several kills; the "recovery" chain ends with a kill at a random moment. (Each
#: killed run is a driver start on CI's clock: the mixes and the random kill ride on
#: the chains instead of runs of their own.)
CHAINS = {
    "planned-computed-written": ["epoch.planned:3", "epoch.computed:2", "sink.written:1"],
    "commit-gc": ["commit.before:3", "sink.publish:2", "gc.before:1"],
    "recovery": ["commit.after:3", "recovery.restored:1"],
}
MIXES = {
    "planned-computed-written": ("history", "log"),
    "commit-gc": ("eager", "stateless"),
    "recovery": ("lazy:2", "lazy:3"),
}


def test_the_chains_cover_every_generic_point_and_policy() -> None:
    covered = {point.split(":")[0] for chain in CHAINS.values() for point in chain}
    assert covered == set(POINTS) - {"meta.uploaded"}  # (killed at with a Hadoop URI root below)
    mixes = [*MIXES.values(), MIX]
    assert {policy(spec).__class__.__name__ for mix in mixes for spec in mix} == {
        "EagerCheckpoint", "LazyCheckpoint", "LogOutputs", "Stateless", "FullHistory",
    }  # fmt: skip


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_killed_at_each_crash_point(spark, chain: str, clicks: Path, expected: Expected, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    visible = CommittedOnly(tmp_path / "state")
    kill_at_each(lambda point: start(clicks, tmp_path, MIXES[chain], crash=point), CHAINS[chain], visible)
    if chain == "recovery":  # then a kill at a random moment, wherever the restart is
        kill_at_a_random_moment(start(clicks, tmp_path, MIXES[chain]), random.Random(1).uniform(6.0, 12.0), visible)
    run_here(spark, clicks, tmp_path, MIXES[chain])
    check(tmp_path, clicks, expected)


def test_hadoop_uri_root_recovers_on_another_machine(spark, clicks: Path, expected: Expected, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A ``file://`` root goes through the Hadoop filesystem code path. Every restart
    gets a fresh metadata working directory (as on another machine), so it can only
    recover from what was published to the root."""
    work = tmp_path / "work"
    work.mkdir()
    kills = ["meta.uploaded:4", "commit.after:2"]
    for n, crash in enumerate(kills):
        assert finish(start(clicks, work, MIX, crash=crash, uri_cache=tmp_path / f"cache{n}")) == -signal.SIGKILL
    last_start = time.time()
    run_here(spark, clicks, work, MIX, uri_cache=tmp_path / "cache-last")  # (a JVM start proves nothing more)
    check(work, clicks, expected)
    # Recovered from the published metadata, not recomputed from scratch: epoch 1 was
    # committed long before and is not written again.
    assert (work / "out" / "epoch-0000000001.parquet").stat().st_mtime < last_start
    published = sorted((work / "state" / "_meta").glob("meta-*.sqlite"))
    assert 1 <= len(published) <= 2, "older published copies are collected"
    assert not (work / "state" / "meta.sqlite").exists(), "a remote root holds only published copies"


GENERATOR = "gen:6,40,10,11"


def test_generator_source_recovers_exactly(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The in-Spark generator replays the same batches after SIGKILLs; the reference
    is a batch job over the same batches written as CSV files."""
    b, n, u, seed = (int(x) for x in GENERATOR.removeprefix("gen:").split(","))
    files = tmp_path / "as-files"
    clickstream_generator(batches=b, sessions_per_batch=n, users=u, seed=seed, bad_fraction=0.05).write_files(
        spark, str(files), format="csv"
    )
    # One kill (a driver start on CI's clock each): the crash chains cover the points.
    assert finish(start(GENERATOR, tmp_path, MIX, crash="sink.written:5")) == -signal.SIGKILL
    source = clickstream_generator(batches=b, sessions_per_batch=n, users=u, seed=seed, bad_fraction=0.05)
    run_here(spark, files, tmp_path, MIX, source=source)
    check(tmp_path, files, (batch_output(spark, str(files)), batch_rejected(spark, str(files))))


def test_vectorized_sessionizer_recovers_exactly(spark, clicks: Path, expected: Expected, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert finish(start(clicks, tmp_path, MIX, crash="commit.after:2", vectorized=True)) == -signal.SIGKILL
    run_here(spark, clicks, tmp_path, MIX, vectorized=True)
    check(tmp_path, clicks, expected)



def _wait_until_locked(root: Path, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    """Wait until ``proc`` holds the storage root's lock (its pid is in the lock
    file; probing with flock could make the primary itself fail to start)."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, "the primary exited before taking the lock"
        try:
            if json.loads((root / LOCK_NAME).read_text())["pid"] == proc.pid:
                return
        except (OSError, ValueError, KeyError):
            pass
        assert time.monotonic() < deadline, "the primary never took the lock"
        time.sleep(0.05)


def _wait_ready(standby: subprocess.Popen[bytes]) -> None:
    assert standby.stdout is not None
    line = standby.stdout.readline().decode().strip()
    assert line == "standby ready", f"the standby said {line!r}; stderr: {standby.stderr and standby.stderr.read().decode()[-2000:]}"


def test_warm_standby_takes_over_exactly(clicks: Path, expected: Expected, tmp_path: Path) -> None:
    """A standby started next to a live driver waits, warmed up, for its lock; when
    the driver is SIGKILLed (at a crash point: where the kill falls does not matter to
    the standby, which waits on the lock; the kills at random moments are the other
    tests') the standby recovers and finishes the input with exactly-once results."""
    primary = start(clicks, tmp_path, MIX, crash="commit.after:3")
    _wait_until_locked(tmp_path / "state", primary)
    standby = start(clicks, tmp_path, MIX, standby=True)
    _wait_ready(standby)
    assert standby.poll() is None, "the standby must wait while the primary runs"
    assert finish(primary) == -signal.SIGKILL
    assert finish(standby) == 0
    check(tmp_path, clicks, expected)


def test_example_rollback_keeps_every_committed_epoch(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Finding 1 of the data-loss review, as a user met it: the example over 8 files,
    SIGKILLed right after committing epoch 7, then run again. The restart rolls the
    lazily checkpointed per-user stats back to epoch 5, and the output sink with them;
    undoing the sink's epochs 6-7 deleted the whole output table (epochs 1-5 too)."""
    clicks = tmp_path / "in"
    write_input(clicks, files=8, sessions_per_file=25, users=10, seed=11, bad_fraction=0.05)
    args = [str(EXAMPLE), "--input", str(clicks), "--output", str(tmp_path / "out"),
            "--storage", str(tmp_path / "state"), "--rejected", str(tmp_path / "rej")]
    env = {**os.environ, "FALKIRK_CRASH_AT": "commit.after:7"}
    killed = subprocess.run([sys.executable, *args], env=env, capture_output=True, timeout=600, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    # Run again as the user did, with the same arguments: in this process (its
    # Spark session; a second driver start proves nothing the kill did not).
    assert run_example_here("clickstream", args[1:]) == 0
    check(tmp_path, clicks, (batch_output(spark, str(clicks)), batch_rejected(spark, str(clicks))))


def _wait_for(condition, what: str, proc: subprocess.Popen[bytes], timeout: float = 180) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the driver exited before {what}: {proc.stderr and proc.stderr.read().decode()[-2000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_second_driver_is_refused_whatever_the_roots_spelling(clicks: Path, expected: Expected, tmp_path: Path) -> None:
    """Finding 3 of the data-loss review: two drivers with different metadata
    directories on one URI root both committed epoch 1. A second driver is refused
    while the first is alive - naming the root as a URI with a metadata working copy
    of its own (another machine), and naming the same directory as a plain path."""
    meta = tmp_path / "state" / "_meta"
    first = start(clicks, tmp_path, MIX, uri_cache=tmp_path / "machine-1")
    _wait_for(lambda: (meta / "driver-000000000001.json").exists(), "the first driver held the root", first)
    for cache in (tmp_path / "machine-2", None):  # the URI spelling, then the path
        second = start(clicks, tmp_path, MIX, uri_cache=cache)
        _, err = second.communicate(timeout=600)
        assert second.returncode != 0 and b"StorageInUseError" in err and b"in use by" in err, (cache, err.decode()[-1500:])
    assert finish(first) == 0
    check(tmp_path, clicks, expected)


def test_a_paused_driver_loses_its_lease_and_can_never_commit_again(spark, clicks: Path, expected: Expected, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A driver on host A stalls (SIGSTOP: a long GC pause or a network partition)
    after committing some epochs; a driver on host B sees A's heartbeat stop, takes the
    root, claims it and finishes the input. When A wakes up, its next commit is refused:
    every commit B acknowledged stays, and the output is exact."""
    meta = tmp_path / "state" / "_meta"
    lease = {"FALKIRK_TEST_LEASE": "3"}
    host_a = start(clicks, tmp_path, MIX, uri_cache=tmp_path / "a", env_extra={**lease, "FALKIRK_HOST": "host-a"})
    _wait_for(lambda: len(list(meta.glob("meta-*.sqlite"))) >= 2 and (tmp_path / "out" / "epoch-0000000002.parquet").exists(),
              "host A committed two epochs", host_a)
    host_a.send_signal(signal.SIGSTOP)
    # Two machines on HDFS or S3 share no file lock: drop A's flocks on the root and
    # on its tables from the namespace (A keeps locks on files nobody can open), so
    # that only the lease stands between the drivers.
    (tmp_path / "state" / LOCK_NAME).unlink()
    for table in ("out", "rej"):
        (tmp_path / table / TABLE_LOCK).unlink()
    try:  # host B: this process (its Spark session; a JVM start proves nothing here)
        monkeypatch.setenv("FALKIRK_HOST", "host-b")
        run_here(spark, clicks, tmp_path, MIX, uri_cache=tmp_path / "b", lease=3.0)
    finally:
        host_a.send_signal(signal.SIGCONT)
    _, err = host_a.communicate(timeout=600)
    assert host_a.returncode != 0, "a driver whose lease was taken must not go on"
    assert b"StorageInUseError" in err or b"CorruptStorageError" in err or b"does not exist" in err, err.decode()[-2000:]
    check(tmp_path, clicks, expected)
    assert (meta / "driver-000000000002.json").exists()
