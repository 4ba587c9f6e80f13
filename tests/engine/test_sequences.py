"""Sequence-number regions in the engine (section 2.1's per-record eager scheme inside
an epoch pipeline, through section 3.2's translators): numbering, a commit per chunk,
SIGKILLs at every step of a chunk and at random moments, a restart in the middle of an
epoch that re-sends only logged chunks, a partial failure, and what the graph refuses.
Every run's whole output is compared with a plain-Python computation."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from falkirk.control.domains import topology
from falkirk.graph import EagerCheckpoint, GlobalCheckpoints, GraphError, LazyCheckpoint, Pipeline
from falkirk.io import FileSource, MemorySink
from falkirk.recovery import solve
from falkirk.runtime import Engine
from falkirk.storage import MetaStore
from falkirk.testing.verify import differences
from falkirk.time import INF, Frontier, SeqDomain
from falkirk.time.ticks import SEQ_BLOCK, Tick
from tests.engine.sequence_pipeline import build, expected, write

RUNNER = Path(__file__).with_name("sequence_pipeline.py")
EPOCHS = [[(1, 5), (2, 3), (1, -2), (3, 7), (1, 1)], [(2, 4), (2, 1), (4, 9)], [], [(1, 10), (3, -7), (5, 1), (5, 2)]]


@pytest.fixture()
def rows(tmp_path: Path) -> Path:
    write(tmp_path / "in", EPOCHS)
    return tmp_path / "in"


pytestmark = pytest.mark.slow


def output(work: Path) -> pd.DataFrame:
    got = pd.read_parquet(work / "out")[["user", "seq", "amount", "balance", "epoch"]].astype("int64")
    assert not got.duplicated("seq").any(), "a record was applied twice"
    return got


def _crash(rows: Path, work: Path, point: str, chunk: int = 2) -> None:
    env = {**os.environ, "FALKIRK_CRASH_AT": point}
    args = [str(rows), str(work / "out"), str(work / "state"), str(chunk)]
    proc = subprocess.run([sys.executable, str(RUNNER), *args], env=env, capture_output=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]


def test_a_region_numbers_records_and_commits_every_chunk(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = Engine(build(str(rows), str(tmp_path / "out"), 2), tmp_path / "state", spark=spark).run()
    assert report.chunks == [("ledger", 1, 3, 5), ("ledger", 2, 2, 3), ("ledger", 3, 0, 0), ("ledger", 4, 2, 4)]
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []
    meta = MetaStore(tmp_path / "state", read_only=True)
    stored = meta.checkpoints(topology(build("x", "y", 2)))
    # balance's rollback points are sequence numbers (after each chunk and each epoch;
    # the monitor keeps only the last: all of epoch 4)
    assert [s.meta.frontier for s in stored["balance"]] == [Frontier.down(SeqDomain(), [["seq", 4 * SEQ_BLOCK]])]
    ticks = [t for t, _, _ in meta.state_files("balance")]
    assert ticks[-3:] == [Tick(4, 2), Tick(4, 4), Tick(4, INF)]
    meta.close()
    # falkirk status reads the root (the translators are in the recorded description)
    import json

    from falkirk.ops.status import status

    report = status(str(tmp_path / "state"))
    json.loads(json.dumps(report, allow_nan=False))
    assert report["processors"]["balance"]["rollback_points"][-1] == [4, "inf"]
    assert report["processors"]["regroup"]["frontier"] == 4


def test_the_translators_project_epochs_and_numbers(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Recovery sees the region's domains and section 3.2's translators: ↓e into the
    region is every number of epochs 1..e; out of it only whole epochs count."""
    topo = topology(build("x", "y", 2))
    assert topo.domains["balance"] == SeqDomain() and topo.domains["regroup"] == SeqDomain()
    into = topo.edges["number.out>balance"].projection
    out = topo.edges["regroup.out>out"].projection
    seq = SeqDomain()
    assert into(Frontier.down(topo.domains["number"], [2])) == Frontier.down(seq, [["seq", 2 * SEQ_BLOCK]])
    assert out(Frontier.down(seq, [["seq", SEQ_BLOCK + 3]])) == Frontier.down(topo.domains["out"], [1])
    assert out(Frontier.down(seq, [["seq", 2 * SEQ_BLOCK]])) == Frontier.down(topo.domains["out"], [2])
    assert solve(topo, {}).frontiers["balance"].is_empty


def test_a_crash_mid_epoch_resumes_after_the_last_committed_chunk(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Killed once epoch 1's second chunk committed: balance resumes at record 4 of
    epoch 1 (it never applies records 1-4 again); regroup, which holds epochs back,
    starts epoch 1 again and gets the first chunks from balance's log."""
    _crash(rows, tmp_path, "chunk.committed:2")
    report = Engine(build(str(rows), str(tmp_path / "out"), 2), tmp_path / "state", spark=spark).run()
    at = report.recovered_at
    assert at["balance"] == (1, 4) and at["number"] == 1 and at["regroup"] == (0, INF), at
    assert report.resent["balance.out>regroup"] == [("seq", 2), ("seq", 4)]
    assert report.chunks[0] == ("ledger", 1, 3, 5)  # two chunks from the log, one computed
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []


#: Each run is killed at the next point (the n-th time that run reaches it, its
#: recovery included), so each recovers from the previous kill: a chunk written and
#: not committed, its logs collected - and the rest runs to the end. (A committed
#: chunk: the two tests above; the loop's and the sink's generic points are killed at
#: in the loop and example chains; each killed run is a driver start on CI's clock.)
CHUNK_CHAIN = ["chunk.written:1", "gc.before:1"]


def test_crashes_at_every_step_of_a_chunk(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for point in CHUNK_CHAIN:
        _crash(rows, tmp_path, point)
    report = Engine(build(str(rows), str(tmp_path / "out"), 2), tmp_path / "state", spark=spark).run()
    assert report.recovered is not None
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []


def test_a_restart_with_another_chunk_size_replays_the_committed_chunks(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _crash(rows, tmp_path, "chunk.committed:2", chunk=2)
    Engine(build(str(rows), str(tmp_path / "out"), 3), tmp_path / "state", spark=spark).run()
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []


def test_kills_at_random_moments(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A SIGKILL at a random moment (after the JVM started), then a run to the end."""
    rng = random.Random(16)
    args = [str(rows), str(tmp_path / "out"), str(tmp_path / "state"), "1"]
    for _ in range(1):
        proc = subprocess.Popen([sys.executable, str(RUNNER), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(9.0, 16.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    Engine(build(str(rows), str(tmp_path / "out"), 1), tmp_path / "state", spark=spark).run()
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []


def test_a_failed_region_processor_rolls_back_only_what_it_must(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    engine = Engine(build(str(rows), str(tmp_path / "out"), 2), tmp_path / "state", spark=spark, max_in_flight=1)
    failed: list[int] = []

    def fail_once(epoch: int, *_: object) -> None:
        if epoch == 2 and not failed:
            failed.append(epoch)
            engine.fail("balance")

    engine.on_epoch = fail_once
    report = engine.run()
    lost, epoch, chosen = report.partial[0]
    assert lost == frozenset({"balance"}) and epoch == 2
    # balance restores its eager checkpoint of all of epoch 2 (nothing to redo); every
    # other processor keeps its live state
    assert chosen["balance"] == 2 and all(v is None for k, v in chosen.items() if k != "balance"), chosen
    assert differences(output(tmp_path), expected(EPOCHS), name="output") == []


def test_regions_are_checked_when_built(tmp_path: Path) -> None:
    p = Pipeline("x")
    src = p.source("src", FileSource(str(tmp_path), "csv", "k long, n long"))
    region = p.sequenced("r", chunk=10)
    inside = region.enter("number", src)
    with pytest.raises(GraphError, match="EagerCheckpoint"):
        inside.aggregate("lazy", "k", {"n": ("count", None)}, policy=LazyCheckpoint(every=2))
    with pytest.raises(GraphError, match="EagerCheckpoint"):
        inside.aggregate("none", "k", {"n": ("count", None)})
    with pytest.raises(GraphError, match="cannot be inside sequence-number region"):
        inside.sink("s", MemorySink())
    with pytest.raises(GraphError, match="cannot be inside sequence-number region"):
        inside.join("j", inside, "k")
    with pytest.raises(GraphError, match="no notifications"):
        inside.stateful(
            "notified", "k", lambda *a: a, state_schema="n long", output_schema="k long", policy=EagerCheckpoint(), on_epoch_end=lambda *a: a
        )
    with pytest.raises(GraphError, match="must read a stream of region"):
        region.leave("from_outside", src)
    with pytest.raises(GraphError, match="must read a stream of the epochs"):
        region.enter("twice", inside)
    inside.map("m", lambda df: df).map("n", lambda df: df)
    with pytest.raises(GraphError, match=r"no regroup|goes nowhere"):
        p.check()
    with pytest.raises(GraphError, match="chunk"):
        p.sequenced("r2", chunk=0)
    with pytest.raises(GraphError, match="name"):
        p.sequenced("r")
    with pytest.raises(GraphError, match="global checkpoints"):
        Pipeline("y", checkpoints=GlobalCheckpoints(every=2)).sequenced("r")


def test_a_column_named_like_the_numbers_is_refused(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("_seq,n\n1,2\n")
    p = Pipeline("x")
    src = p.source("src", FileSource(str(tmp_path / "in"), "csv", "_seq long, n long", options={"header": "true"}))
    region = p.sequenced("r")
    region.leave("out", region.enter("number", src)).sink("s", MemorySink())
    with pytest.raises(GraphError, match="_seq"):
        Engine(p, tmp_path / "state", spark=spark).run()


def test_a_region_with_two_enters_is_refused(tmp_path: Path) -> None:
    p = Pipeline("x")
    src = p.source("src", FileSource(str(tmp_path), "csv", "k long, n long"))
    region = p.sequenced("r")
    both = region.enter("one", src.map("a", lambda df: df)).union("u", region.enter("two", src.map("b", lambda df: df)))
    region.leave("out", both).sink("s", MemorySink())
    with pytest.raises(GraphError, match="2 enters"):
        p.check()


def test_a_leave_may_read_the_numbered_records_directly(spark, rows: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Numbering and regrouping alone: each valid record once, with its number."""
    from falkirk.io import ParquetTableSink

    p = Pipeline("numbers")
    src = p.source("rows", FileSource(str(rows), "csv", "user long, amount long", options={"header": "true"}))
    region = p.sequenced("r", chunk=2)
    region.leave("out", region.enter("number", src)).sink("sink", ParquetTableSink(str(tmp_path / "out")))
    Engine(p, tmp_path / "state", spark=spark).run()
    got = pd.read_parquet(tmp_path / "out")[["user", "amount", "_seq", "epoch"]].astype("int64")
    want = expected(EPOCHS).rename(columns={"seq": "_seq"})[["user", "amount", "_seq", "epoch"]]
    assert differences(got, want, name="numbered") == []
