"""The clickstream example on a real Spark standalone cluster on this machine (a
master and three workers of one core and 1 GB each, from the pip pyspark:
:mod:`falkirk.spark.standalone`), checked as on ``local[2]``: the whole output and
dead-letter table equal one plain Spark batch job over the same input.

* a worker and its executor SIGKILLed mid-run (a machine lost): the lost state is
  rolled back and recomputed in the same driver (and a second worker dies at a
  named moment of the run, then the driver is SIGKILLed at a crash point and a new
  one finishes): the exact output;
* only one processor paired (its policy's ``replicas=2``), a worker killed at a
  named moment: that processor is never rolled back for it.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from falkirk.demo.clickstream import build_pipeline
from falkirk.graph import EagerCheckpoint, GraphError
from falkirk.runtime import Engine
from falkirk.spark import standalone
from falkirk.testing.clickstream import batch_output, batch_rejected, write_input
from falkirk.testing.verify import differences
from tests.engine.examples import finish

pytestmark = [pytest.mark.slow, pytest.mark.cluster]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "clickstream.py"
LOST = "an executor was lost"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[standalone.Cluster]:
    """Three workers (1 core, 1 GB each) on a free port: each test its own, since
    some kill a worker. One cluster at a time on this machine (the xdist workers
    take turns): two would not fit a 2-core CI machine's memory and cores."""
    with open(Path(tempfile.gettempdir()) / "falkirk-test-cluster.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        running = standalone.start(3, cores=1, memory="1g", port=standalone._free_port(), directory=tmp_path / "cluster")
        try:
            yield running
        finally:
            running.stop()


@pytest.fixture(scope="module")
def clicks(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame, pd.DataFrame]:
    directory = tmp_path_factory.mktemp("cluster-clicks")
    write_input(directory, files=8, sessions_per_file=50, users=16, seed=17, bad_fraction=0.05)
    return directory, batch_output(spark, str(directory)), batch_rejected(spark, str(directory))


def start(
    clicks: Path, work: Path, cluster: standalone.Cluster, crash: str | None = None, kill_workers: str | None = None
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("FALKIRK_CRASH_AT", "FALKIRK_KILL_WORKER_AT")}
    env["FALKIRK_SPARK_MASTER"] = cluster.url
    if kill_workers:
        env["FALKIRK_KILL_WORKER_AT"] = kill_workers
        env["FALKIRK_CLUSTER_DIR"] = str(cluster.directory)
    if crash:
        env["FALKIRK_CRASH_AT"] = crash
    args = ["--input", str(clicks), "--output", str(work / "out"), "--storage", str(work / "state"), "--rejected", str(work / "rej")]
    return subprocess.Popen([sys.executable, str(EXAMPLE), *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def check(work: Path, want: tuple[Path, pd.DataFrame, pd.DataFrame]) -> None:
    out = pd.read_parquet(work / "out")
    assert not out.duplicated(["user_id", "epoch"]).any(), "a (user_id, epoch) appears twice"
    assert differences(out, want[1], name="output") == []
    assert differences(pd.read_parquet(work / "rej"), want[2], name="rejected") == []


def test_a_worker_killed_mid_run(cluster: standalone.Cluster, clicks, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Once two epochs are out, at a random moment, worker 1 and its executor are
    SIGKILLed; the driver goes on (one process): the loss is rolled back in place, a
    second worker dies at a named moment of the same run (``state.written:2``: a
    checkpoint written, not committed), and then the driver itself is SIGKILLed at a
    crash point (``sink.written:9``); a new driver recovers on the last worker and
    finishes with the exact result. A chain of kills: one driver run per mechanism
    would take twice as long on a cluster. (State kept in two copies, which loses
    nothing to a worker's loss, is ``test_one_processor_paired``'s: a processor's
    ``replicas=2`` and the example's ``--replicated``, ``Engine(replicas=2)``, place
    and re-create copies by the same code.)"""
    proc = start(clicks[0], tmp_path, cluster, kill_workers="state.written:2", crash="sink.written:9")
    deadline = time.monotonic() + 300
    while len(list((tmp_path / "out").glob("epoch-*.parquet"))) < 2:
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
        assert time.monotonic() < deadline, "no progress on the cluster"
        time.sleep(0.1)
    time.sleep(random.uniform(0, 2))
    assert cluster.kill_worker(1)
    _, err = proc.communicate(timeout=600)
    log = err.decode()
    assert proc.returncode == -signal.SIGKILL, log[-3000:]
    assert cluster.alive_workers() == 1
    assert log.count("worker fault point") == 1 and "no worker left" not in log, log[-3000:]
    assert LOST in log, log[-3000:]  # an epoch ran into the loss (the run had 6 epochs to go)
    assert finish(start(clicks[0], tmp_path, cluster)) == 0  # the driver killed after the losses: a new one finishes
    check(tmp_path, clicks)


def test_one_processor_paired(cluster: standalone.Cluster, clicks, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Only ``sessions`` keeps pairs (its policy's ``replicas=2``): its blocks have two
    copies, ``user_stats``' one. A worker dies once an epoch's file is in place and
    before the epoch commits (``sink.written:5``); the run
    goes on in the same driver with the exact output, and however the loss falls,
    ``sessions`` is never rolled back for it (its state lost no block; what the
    discarded epoch changed is taken back in memory), and at the end every block of
    its state is on two live executors again (the lost copies were re-created).

    The root starts on this machine alone (``local[2]``, 2 state partitions, 3
    epochs) and moves to the cluster with 6 (issue 34: rescale on restore): every
    state is re-partitioned as it is restored there, and the output is exact."""
    local = {k: v for k, v in os.environ.items() if k not in ("FALKIRK_CRASH_AT", "FALKIRK_SPARK_MASTER", "FALKIRK_KILL_WORKER_AT")}
    here = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "tests.cluster.paired", str(clicks[0]), str(tmp_path)]
    started = subprocess.run([*command, "3", "2"], env=local, capture_output=True, timeout=900, check=False, cwd=here)
    assert started.returncode == 0, started.stderr.decode()[-3000:]
    assert json.loads(started.stdout.decode().strip().splitlines()[-1])["partitions"] == 2
    env = {**local, "FALKIRK_SPARK_MASTER": cluster.url, "FALKIRK_KILL_WORKER_AT": "sink.written:5", "FALKIRK_CLUSTER_DIR": str(cluster.directory)}
    done = subprocess.run([*command, "0", "6"], env=env, capture_output=True, timeout=900, check=False, cwd=here)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    found = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert (found["partitions"], found["rescaled_from"], found["held_partitions"]) == (6, 2, [6]), found
    assert found["copies"] == {"sessions": [2], "user_stats": [1]}
    assert found["fewest"] == 2  # every block of sessions' state on two live executors again
    assert all("sessions" not in failed for failed in found["failed"]), found
    assert b"worker fault point sink.written:5" in done.stderr
    check(tmp_path, clicks)


def _placed(cluster: standalone.Cluster, placement: str) -> tuple[list[str], list[list[str]]]:
    """The executors of ``cluster`` and, per partition of a DataFrame kept with two
    copies, the executors holding its block (``FALKIRK_PLACEMENT=placement``)."""
    env = {**os.environ, "FALKIRK_SPARK_MASTER": cluster.url, "FALKIRK_PLACEMENT": placement}
    done = subprocess.run(
        [sys.executable, "-m", "tests.cluster.placement", "4"],
        env=env, capture_output=True, timeout=600, check=False, cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    found = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return found["executors"], found["blocks"]


def test_block_copies_are_placed_by_chained_declustering(tmp_path: Path) -> None:
    """With chained declustering (the default on a cluster on this machine) the copy
    of every block held by executor k is on k's successor in the ring of executors:
    the two holders of each block are neighbours. Spark's random placement puts some
    copies two steps away: with 16 blocks on 4 executors it passes this check with
    probability (2/3)^16 < 0.2% (``FALKIRK_PLACEMENT=random`` shows it fail)."""

    def neighbours(ring: list[str], ids: list[str]) -> bool:
        i, j = (ring.index(x) for x in ids)
        return (i - j) % len(ring) in (1, len(ring) - 1)

    with open(Path(tempfile.gettempdir()) / "falkirk-test-cluster.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        four = standalone.start(4, cores=1, memory="512m", port=standalone._free_port(), directory=tmp_path / "four")
        try:
            chained = _placed(four, os.environ.get("FALKIRK_PLACEMENT", "chained"))
        finally:
            four.stop()
    ring, blocks = chained
    assert len(ring) == 4 and all(len(ids) == 2 for ids in blocks), chained
    assert all(neighbours(ring, ids) for ids in blocks), chained


def test_replicas_need_a_cluster(spark: SparkSession, tmp_path: Path) -> None:
    pipeline = build_pipeline(str(tmp_path), str(tmp_path / "o"), str(tmp_path / "r"))
    with pytest.raises(GraphError, match="keeps copies on different executors"):
        Engine(pipeline, tmp_path / "state", spark=spark, replicas=2)
    with pytest.raises(GraphError, match="replicas must be 1 or 2"):
        Engine(pipeline, tmp_path / "state", spark=spark, replicas=3)
    paired = build_pipeline(str(tmp_path), str(tmp_path / "o"), str(tmp_path / "r"), sessions_policy=EagerCheckpoint(replicas=2))
    with pytest.raises(GraphError, match="replicas=2 in the policy of 'sessions' keeps copies on different executors"):
        Engine(paired, tmp_path / "state", spark=spark)


def test_the_cluster_script_starts_and_stops_every_process(tmp_path: Path) -> None:
    port = standalone._free_port()
    where = tmp_path / "c"
    run = [sys.executable, "-m", "falkirk.spark.standalone"]
    started = subprocess.run([*run, "start", "--workers", "2", "--port", str(port), "--dir", str(where)], capture_output=True, timeout=300, check=False)
    assert started.returncode == 0, started.stderr.decode()[-2000:]
    assert started.stdout.decode().strip() == f"spark://127.0.0.1:{port}"
    cluster = standalone.Cluster.load(where)
    assert cluster.alive_workers() == 2
    assert_authenticated(cluster)
    again = subprocess.run([*run, "start", "--port", str(port), "--dir", str(where)], capture_output=True, timeout=60, check=False)
    assert again.returncode == 2 and b"in use" in again.stderr
    pids = [cluster.master_pid, *cluster.worker_pids]
    stopped = subprocess.run([*run, "stop", "--port", str(port), "--dir", str(where)], capture_output=True, timeout=60, check=False)
    assert stopped.returncode == 0, stopped.stderr.decode()
    assert not any(standalone.alive(p) for p in pids)
    with pytest.raises(standalone.ClusterError, match="no cluster was started"):
        standalone.Cluster.load(where)
    assert standalone.secret_of(cluster.url) is None  # the secret goes with the cluster


def assert_authenticated(cluster: standalone.Cluster) -> None:
    """Every JVM of ``cluster`` asks for its secret, which is private and on no
    command line; a driver without it is refused by the master."""
    secret = standalone.secret_of(cluster.url)
    assert secret is not None and len(secret) == 64
    assert (standalone.home(cluster.port) / standalone.SECRET_FILE).stat().st_mode & 0o777 == 0o600
    for pid in [cluster.master_pid, *cluster.worker_pids]:
        assert b"-Dspark.authenticate=true" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert secret.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        assert f"_SPARK_AUTH_SECRET={secret}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    for log in cluster.directory.glob("*.log"):
        assert log.stat().st_mode & 0o077 == 0, log
    stranger = {**os.environ, "FALKIRK_SPARK_MASTER": cluster.url, "FALKIRK_CACHE": str(cluster.directory / "elsewhere")}
    code = "from falkirk.spark.session import spark_session; spark_session().range(3).count()"
    driver = subprocess.Popen([sys.executable, "-c", code], env=stranger, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while b"Expected SaslMessage" not in (cluster.directory / "master.log").read_bytes():
            assert driver.poll() is None and time.monotonic() < deadline, "the master never refused the driver"
            time.sleep(0.5)
        assert cluster.status()["activeapps"] == []
    finally:
        driver.kill()
        driver.wait()


def test_a_planted_cluster_folder_or_state_file_is_refused_and_kills_nothing(tmp_path: Path) -> None:
    """No JVM: a folder others may write is refused, a log planted as a link is not
    followed, and a state file naming other processes (here a ``sleep`` of this
    user's) leaves them alive on ``stop``."""
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    with pytest.raises(standalone.ClusterError, match="group- or world-writable"):
        standalone.start(1, port=standalone._free_port(), directory=open_folder)
    linked = tmp_path / "linked"
    linked.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (linked / "master.log").symlink_to(victim)
    with pytest.raises(standalone.ClusterError, match=r"master\.log"):
        standalone.start(1, port=standalone._free_port(), directory=linked)
    assert victim.read_text() == "keep me"
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        planted = tmp_path / "planted"
        planted.mkdir(mode=0o700)
        state = {"port": 1, "webui_port": 2, "master_pid": sleeper.pid, "worker_pids": [sleeper.pid, os.getpid()]}
        (planted / standalone.STATE_FILE).write_text(json.dumps(state))
        (planted / standalone.STATE_FILE).chmod(0o600)
        standalone.Cluster.load(planted).stop()
        assert sleeper.poll() is None and standalone.alive(sleeper.pid)
        (planted / standalone.STATE_FILE).write_text(json.dumps(state))
        (planted / standalone.STATE_FILE).chmod(0o666)
        with pytest.raises(standalone.ClusterError, match="not written by a cluster you started"):
            standalone.Cluster.load(planted)
    finally:
        sleeper.kill()
        sleeper.wait()
    secret = standalone.home(1) / standalone.SECRET_FILE
    secret.write_text("planted")
    secret.chmod(0o644)  # readable by others: not a secret, not used
    try:
        assert standalone.secret_of("spark://127.0.0.1:1") is None
        secret.chmod(0o600)
        assert standalone.secret_of("spark://127.0.0.1:1") == "planted"
        assert standalone.secret_of("spark://10.0.0.1:1") is None  # only clusters on this machine
    finally:
        secret.unlink()
