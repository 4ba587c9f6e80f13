"""The ledger (the engine's control plane) over thousands of epochs: the metadata,
and the cost of planning and committing an epoch, stay flat however long a pipeline
runs (finding 6 of the data-loss review: offsets were never pruned, sink commits only
on rollback, and planning rebuilt the set of every file ever consumed)."""

from __future__ import annotations

import sqlite3
import statistics
import time
from pathlib import Path

from falkirk.control.domains import EPOCHS
from falkirk.control.ledger import Ledger
from falkirk.graph import EagerCheckpoint, LazyCheckpoint, LogOutputs, Pipeline
from falkirk.recovery import Topology
from falkirk.storage import CommitBatch, MetaStore, StoredFile
from falkirk.time.ticks import Tick
from tests.execution.fakes import CountingSource, NullSink


def pipeline() -> Pipeline:
    p = Pipeline("long")
    src = p.source("src", CountingSource(10**9))
    logged = src.map("parse", lambda df: df, policy=LogOutputs())
    keyed = logged.aggregate("agg", "k", {"n": ("count", None)}, policy=LazyCheckpoint(every=5, compact_every=3))
    keyed.aggregate("eager", "k", {"m": ("max", "n")}, policy=EagerCheckpoint(compact_every=4)).sink("out", NullSink())
    return p


def topology(p: Pipeline) -> Topology:
    edges = [(name, i.src, q.name, "identity") for name, i, q, _ in p.edges()]
    return Topology.build({name: EPOCHS for name in p.processors}, edges)


def computed(ledger: Ledger, epoch: int, tmp: Path) -> CommitBatch:
    """What the engine's workers would have written for ``epoch`` (files stand in,
    inside the storage root ``tmp``: the metastore refuses a file named outside it)."""
    def file(name: str) -> list[StoredFile]:
        return [StoredFile(str(tmp / f"{name}-e{epoch}.parquet"), 10, "0" * 64)]

    batch = CommitBatch(logs=[("parse.out", Tick(epoch), file("log")), ("eager.out", Tick(epoch), file("elog"))])
    batch.sink_commits.append(("out", epoch, file("sink")))
    if epoch % 5 == 0:
        batch.state.append(("agg", Tick(epoch), "base" if epoch % 15 == 5 else "delta", file("agg")))
    batch.state.append(("eager", Tick(epoch), "base" if epoch % 4 == 1 else "delta", file("eager")))
    return batch


def db_bytes(store: MetaStore) -> int:
    db = sqlite3.connect(store.path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages, free, size = (db.execute(f"PRAGMA {k}").fetchone()[0] for k in ("page_count", "freelist_count", "page_size"))
    db.close()
    return int((pages - free) * size)


def test_metadata_and_per_epoch_cost_stay_flat_over_thousands_of_epochs(tmp_path: Path) -> None:
    p = pipeline()
    store = MetaStore(tmp_path / "state")
    ledger = Ledger(p, topology(p), store)
    ledger.start_monitor()
    sizes: dict[int, int] = {}
    seconds: list[float] = []
    deleted = 0
    for epoch in range(1, 3001):
        started = time.perf_counter()
        planned = ledger.plan(epoch)
        assert planned == {"src": {"n": epoch}}
        deleted += len(ledger.commit(epoch, computed(ledger, epoch, tmp_path / "state"), list(p.processors)))
        seconds.append(time.perf_counter() - started)
        if epoch in (500, 1000, 3000):
            sizes[epoch] = db_bytes(store)
    # Bounded by what a recovery can need: a few epochs of records, not 3000.
    assert sizes[3000] <= sizes[500] * 1.25, sizes
    assert sizes[3000] < 100 * 1024, sizes  # 10 tables and their indexes, a few pages each (SQLite pages are 4 KB)
    assert len(store.offsets("src")) <= 6 and len(store.sink_commits("out")) <= 6
    assert len(store.log_epochs("parse.out")) <= 6
    assert deleted > 3 * 2900  # logs and checkpoints below the low-watermarks went
    early, late = statistics.median(seconds[100:600]), statistics.median(seconds[-500:])
    assert late < 2 * early + 0.002, (early, late)
    # A restart plans from the source's position: the same next epoch, nothing replayed.
    restarted = Ledger(p, topology(p), MetaStore(tmp_path / "state"))
    assert restarted.plan(3001) == {"src": {"n": 3001}}


def test_a_replayed_epoch_gets_its_first_offsets_even_after_pruning(tmp_path: Path) -> None:
    p = pipeline()
    ledger = Ledger(p, topology(p), MetaStore(tmp_path / "state"))
    ledger.start_monitor()
    for epoch in range(1, 13):
        ledger.plan(epoch)
        ledger.commit(epoch, computed(ledger, epoch, tmp_path / "state"), list(p.processors))
    # Epochs below the source's low-watermark are forgotten; a rollback never reads
    # them again, and an epoch planned before is never planned anew.
    assert min(ledger.offsets["src"]) > 1
    assert ledger.plan(3) == {}
    assert ledger.plan(12) == {"src": {"n": 12}}
    assert ledger.plan(13) == {"src": {"n": 13}}


def test_nothing_new_plans_nothing(tmp_path: Path) -> None:
    p = Pipeline("short")
    p.source("src", CountingSource(2)).sink("out", NullSink())
    ledger = Ledger(p, topology(p), MetaStore(tmp_path / "state"))
    assert ledger.plan(1) == {"src": {"n": 1}} and ledger.plan(2) == {"src": {"n": 2}}
    assert ledger.plan(3) is None
    assert MetaStore(tmp_path / "state").offsets("src") == {1: {"n": 1}, 2: {"n": 2}}


def test_a_multi_input_processor_records_every_input_edge(tmp_path: Path) -> None:
    p = Pipeline("multi")
    a, b = p.source("a", CountingSource(3)), p.source("b", CountingSource(2))
    a.join("j", b, "k", policy=EagerCheckpoint()).union("u", a, b).sink("out", NullSink())
    ledger = Ledger(p, topology(p), MetaStore(tmp_path / "state"))
    batch = CommitBatch(state=[("j", Tick(1), "base", [])])
    record = ledger.record(p.processors["j"], Tick(1), batch)
    assert record is not None and set(record.delivered) == {"a.out>j", "b.out>j"}
    union = ledger.record(p.processors["u"], Tick(1), batch)
    assert union is not None and set(union.delivered) == {"j.out>u", "a.out>u", "b.out>u"}
    assert set(record.discarded) == {"j.out>u"}  # j logs (eager): nothing but collected logs discarded
