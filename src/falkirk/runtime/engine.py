"""The engine: runs a pipeline epoch by epoch and recovers it after any crash.

One epoch, step by step (the crash points of :mod:`falkirk.runtime.faults` are named):

1. Plan: each source picks the epoch's input (its offsets) from its position and the
   plan is committed before any work, so a replay reads exactly the same input
   (``epoch.planned``); see :mod:`falkirk.runtime.ledger`.
2. Compute: every processor runs its step as Spark jobs, in graph order; processors
   that already hold the epoch (after a rollback) skip it, and receivers that need
   their output read it from the log (the rollback's re-send, Q'(e)).
3. Persist: logged outputs and keyed-state checkpoints are written as Parquet under
   fresh names (``epoch.computed``); sinks write their epoch file
   (``sink.written``).
4. Commit: once the sources confirm the epoch's input is unchanged, one metadata
   transaction records the logs, the checkpoint files, the Ξ(p, ↓e) of every
   processor that can now roll back to the epoch (:mod:`falkirk.runtime.xi`), and
   forgets what the previous commit's low-watermarks let go (``commit.before`` /
   ``commit.after``).
5. Collect: the files of the forgotten records are deleted (``gc.before``); the new
   low-watermarks say what the next commit forgets.

Recovery: on start, if the storage root holds an earlier run, every processor is
failed; the solver picks a consistent frontier for each from the committed Ξ records
(logged at INFO with the reason), keyed state is restored from its checkpoints (each
file checked against its committed size and SHA-256 first), and the loop resumes
from the earliest frontier.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from falkirk.graph import FullHistory, GraphError, Pipeline, Processor
from falkirk.recovery import Topology
from falkirk.runtime import garbage, rollback, schemas
from falkirk.runtime.epochs import EPOCHS
from falkirk.runtime.faults import armed_failures, crash_point
from falkirk.runtime.ledger import Ledger, Offsets
from falkirk.runtime.report import RunReport
from falkirk.spark.errors import as_storage_error
from falkirk.spark.files import write_parquet
from falkirk.spark.frames import empty
from falkirk.spark.operators import (
    aggregate_merge,
    aggregate_prepare,
    stateful_merge,
    stateful_prepare,
)
from falkirk.spark.session import spark_session
from falkirk.spark.state import KeyedState
from falkirk.storage import CommitBatch, MetaStore, RootLock, StoredFile, verify_files
from falkirk.storage.filesystem import filesystem_for, is_uri
from falkirk.storage.metastore import DB_NAME
from falkirk.storage.published import PublishedMetadata, default_metadata_dir

logger = logging.getLogger(__name__)


@dataclass
class _EpochWork:
    """One epoch on its way: computed by a worker, committed by the main thread."""

    epoch: int
    offsets: dict[str, Offsets]
    started: float
    records: int = 0
    logged: dict[tuple[str, str], tuple[StoredFile, ...]] = field(default_factory=dict)
    batch: CommitBatch = field(default_factory=CommitBatch)
    ran: list[str] = field(default_factory=list)
    cached: list[DataFrame] = field(default_factory=list)
    step_seconds: dict[str, float] = field(default_factory=dict)
    step_finished: dict[str, float] = field(default_factory=dict)
    #: Log and checkpoint writes under way; the epoch is computed once they are done.
    writes: list[Future[None]] = field(default_factory=list)


class EpochAborted(GraphError):
    """A keyed step gave up because its processor's previous epoch failed: applying
    this epoch to a state that lacks the previous one would produce wrong rows."""


@dataclass
class _Gate:
    """Opened when a keyed step of one epoch is done, so the processor's next epoch
    may merge into the state; ``failed`` when the epoch failed instead."""

    event: threading.Event = field(default_factory=threading.Event)
    failed: bool = False

    def open(self, *, failed: bool = False) -> None:
        if not self.event.is_set():
            self.failed = failed
            self.event.set()

    def wait(self, processor: str, epoch: int) -> None:
        """Wait for the previous epoch; raise :class:`EpochAborted` if it failed."""
        self.event.wait()
        if self.failed:
            raise EpochAborted(f"processor {processor!r} skips epoch {epoch}: epoch {epoch - 1} failed")


def edge_name(src: str, port: str, dst: str) -> str:
    return f"{src}.{port}>{dst}"


class Engine:
    """Runs ``pipeline`` with its state and metadata under ``storage``: a local
    directory, or any Hadoop filesystem URI Spark can write (``hdfs://...``,
    ``s3a://...``, ``file:///...``). Only one engine may use a storage root at a
    time (fencing).

    For a URI root the metadata database is worked on in ``metadata_dir`` (a local
    directory; by default one under ``~/.cache/falkirk`` derived from the URI) and
    published to the root after every commit, so a driver on any machine recovers
    it (:mod:`falkirk.storage.published`). ``metadata_dir`` is ignored for local roots,
    whose database lives in the root itself. On a URI root drivers on different
    machines are fenced by a lease in the root: a driver on another host whose
    heartbeat has not moved for ``lease_timeout`` seconds is taken to be dead (a dead
    driver on the same host is seen at once); whatever the timing, a driver whose
    lease was taken can never commit again."""

    def __init__(
        self,
        pipeline: Pipeline,
        storage: str | Path,
        *,
        spark: SparkSession | None = None,
        metadata_dir: str | Path | None = None,
        on_epoch: Callable[[int, float, RunReport], None] | None = None,
        max_in_flight: int = 2,
        lease_timeout: float = 10.0,
    ) -> None:
        pipeline.check()
        if max_in_flight < 1:
            raise GraphError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self.pipeline = pipeline
        self.spark = spark or spark_session()
        self.fs, self.root = filesystem_for(storage, self.spark)
        self.published: PublishedMetadata | None = None
        if is_uri(self.root):
            self.meta_dir = Path(metadata_dir or default_metadata_dir(self.root)).absolute()
            self.published = PublishedMetadata(
                self.fs,
                self.root,
                self.meta_dir,
                DB_NAME,
                before_publish=lambda: crash_point("meta.uploaded"),
                lease_interval=lease_timeout / 5,
                lease_timeout=lease_timeout,
            )
        else:
            self.meta_dir = Path(self.root)
        self.on_epoch = on_epoch
        self.order = list(pipeline.processors.values())
        edges = [
            (edge_name(i.src, i.port, q.name), i.src, q.name, "identity")
            for q in self.order
            for i in q.inputs
        ]
        self.topology = Topology.build({p.name: EPOCHS for p in self.order}, edges)
        self.report = RunReport()
        self._failed: set[str] = set()
        self._idle = (0.0, 0.1)  # run(): idle_timeout, poll_interval
        # (processor, epoch) -> set when that stateful step is done (epochs in flight)
        self._done: dict[tuple[str, int], _Gate] = {}
        # Each processor skips the epochs at or below its frontier of the last rollback.
        self.restored: dict[str, int] = {}
        self._set_up_done = False

    def fail(self, processor: str) -> None:
        """Make ``processor`` lose its in-memory state after the current epoch (as if
        its executor died). Only what the rollback constraints require rolls back: the
        other processors keep their state (section 4.4). Also reachable as the fault
        point ``FALKIRK_FAIL_AT="processor:epoch"``."""
        if processor not in self.pipeline.processors:
            raise GraphError(f"cannot fail {processor!r}: no such processor ({sorted(self.pipeline.processors)})")
        self._failed.add(processor)

    # -- public -----------------------------------------------------------------------

    def run(
        self,
        *,
        max_epochs: int | None = None,
        idle_timeout: float = 0.0,
        poll_interval: float = 0.1,
        standby: bool = False,
        on_standby: Callable[[], None] | None = None,
    ) -> RunReport:
        """Process epochs until no source has new input (or ``max_epochs`` epochs).

        With ``idle_timeout`` > 0 the engine keeps running as a service: when no
        input is there it polls the sources every ``poll_interval`` seconds and stops
        only after ``idle_timeout`` seconds without new input (``math.inf``: never).

        Up to ``max_in_flight`` epochs are computed at once (their Spark jobs run
        concurrently; a stateful processor still applies epochs in order); epochs
        commit strictly in order.

        ``standby=True`` runs this engine as a warm standby of the driver that holds
        the storage root: it starts its Spark session, checks the pipeline's schemas
        and sets up its state (calling ``on_standby`` when that is done), then waits
        for the root's lock. When the active driver stops or dies, the standby takes
        the lock and recovers from the committed metadata exactly as a restarted
        driver would - it reads nothing before it holds the lock - but without the
        JVM start and set-up. Without ``standby``, a held root raises
        :class:`~falkirk.storage.StorageInUseError`."""
        if idle_timeout < 0 or poll_interval <= 0:
            raise GraphError(f"run(idle_timeout={idle_timeout}, poll_interval={poll_interval}): need idle_timeout >= 0 and poll_interval > 0")
        self._idle = (idle_timeout, poll_interval)
        lock = RootLock(self.meta_dir)
        if standby:
            self._set_up()
            if on_standby is not None:
                on_standby()
        lock.acquire(wait=standby)
        try:
            if self.published is not None:
                self.published.acquire(wait=standby)
            try:
                self._run(max_epochs)
            finally:
                if self.published is not None:
                    self.published.release()
        finally:
            lock.release()
        return self.report

    def _run(self, max_epochs: int | None) -> None:
        """Run while holding the storage root (see :meth:`run`)."""
        if self.published is not None:
            self.published.fetch()
        self.store = MetaStore(
            self.meta_dir,
            fs=self.fs,
            on_commit=self.published.publish if self.published is not None else None,
        )
        pool = ThreadPoolExecutor(self.max_in_flight, thread_name_prefix="falkirk-epoch")
        self._writers = ThreadPoolExecutor(2 * self.max_in_flight, thread_name_prefix="falkirk-write")
        try:
            if self.published is not None:  # before anything is deleted: see published.py
                self.published.claim(self.store.connection)
            self.ledger = Ledger(self.pipeline, self.topology, self.store)
            self._verified: set[str] = set()
            self._start()
            self._loop(pool, max_epochs)
            self._delete(self.ledger.flush())
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            self._writers.shutdown(wait=True, cancel_futures=True)
            self.store.close()

    def _loop(self, pool: ThreadPoolExecutor, max_epochs: int | None) -> None:
        epoch = min(self.frontier.values()) + 1
        planned = 0
        inflight: deque[tuple[_EpochWork, Future[None]]] = deque()
        idle_timeout, poll_interval = self._idle
        idle_since: float | None = None
        while True:
            while (
                len(inflight) < self.max_in_flight
                and not self._failed
                and (max_epochs is None or planned < max_epochs)
            ):
                offsets = self.ledger.plan(epoch)
                if offsets is None:
                    break
                work = self._prepare(epoch, offsets)
                inflight.append((work, pool.submit(self._compute, work)))
                epoch += 1
                planned += 1
            if not inflight:
                done = self._failed or (max_epochs is not None and planned >= max_epochs)
                now = time.monotonic()
                idle_since = now if idle_since is None else idle_since
                if done or now - idle_since >= idle_timeout:
                    return
                time.sleep(poll_interval)  # wait for input to arrive
                continue
            idle_since = None
            work, future = inflight.popleft()
            try:
                future.result()
            except Exception as exc:  # a damaged file Spark found reading it: say which
                damaged = as_storage_error(exc)
                if damaged is None:
                    raise
                raise damaged from exc
            self.report.in_flight = len(inflight) + 1
            self._commit(work)
            self._failed |= armed_failures(work.epoch)
            if self._failed and not inflight:  # failures take effect between epochs
                rollback.recover_partial(self, work.epoch)
                epoch = min(self.frontier.values()) + 1

    # -- start and recovery -------------------------------------------------------------

    def _set_up(self) -> None:
        """What needs no storage: the schemas and the (empty) state of every stateful
        processor. Done once per engine (a standby does it before taking the lock)."""
        if self._set_up_done:
            return
        self.out_schemas, state_schemas = schemas.infer(self.spark, self.pipeline)
        self.states = {
            name: KeyedState(
                self.spark,
                self.pipeline.processors[name].params["key"],
                schema,
                keep_tombstones=self.pipeline.processors[name].policy.writes_checkpoints,
            )
            for name, schema in state_schemas.items()
        }
        self._set_up_done = True

    def _start(self) -> None:
        self._set_up()
        self._set_up_done = False  # a later run() of this engine sets up afresh
        for p in self.order:
            if p.kind == "sink":
                src = p.inputs[0]
                p.params["sink"].prepare(empty(self.spark, self.out_schemas[(src.src, src.port)]))
        stored = self.store.checkpoints(self.topology)
        self.frontier = {p.name: 0 for p in self.order}
        if any(stored.values()):
            rollback.recover(self, {p: [s.meta for s in ss] for p, ss in stored.items()})
        self._sweep_garbage()
        self.checkpoint_count = {p: len(self.store.state_files(p)) for p in self.states}
        self.ledger.start_monitor()
        rollback.settle(self)

    # -- one epoch ------------------------------------------------------------------------

    def _prepare(self, epoch: int, offsets: dict[str, Offsets]) -> _EpochWork:
        """Main-thread preparation of an epoch: what its worker needs from the store."""
        work = _EpochWork(epoch, offsets, time.perf_counter())
        if self.on_epoch is not None:  # counting reads the input again: only for display
            work.records = sum(
                self.pipeline.processors[name].params["source"].count_records(o)
                for name, o in offsets.items()
                if o is not None
            )
        for p in self.order:
            if p.name in self.states:
                self._done[(p.name, epoch)] = _Gate()
            if epoch > self.restored[p.name]:
                continue
            for port in p.ports:  # p already holds the epoch: feed receivers that do not
                if any(epoch > self.restored[q.name] for q in self.pipeline.consumers(p.name, port)):
                    files = self.store.logs(f"{p.name}.{port}").get(epoch)
                    if files is None:
                        raise GraphError(
                            f"internal: processor {p.name!r} has no log of epoch {epoch} for a "
                            "consumer that rolled back; the rollback plan should have prevented this"
                        )
                    work.logged[(p.name, port)] = self.verified(files)
        return work

    def verified(self, files: tuple[StoredFile, ...]) -> tuple[StoredFile, ...]:
        """``files``, checked against their committed sizes and checksums before their
        first use in this run (:class:`~falkirk.storage.CorruptStorageError` names a
        damaged one)."""
        fresh = [f for f in files if f.path not in self._verified]
        verify_files(fresh, self.fs)
        self._verified.update(f.path for f in fresh)
        return files

    def _compute(self, work: _EpochWork) -> None:
        """Run every step of one epoch (a worker thread; no metadata access)."""
        epoch = work.epoch
        outputs: dict[tuple[str, str], DataFrame] = {}
        try:
            for p in self.order:
                if epoch <= self.restored[p.name]:  # p holds the epoch already
                    for (name, port), logged in work.logged.items():
                        if name == p.name:
                            outputs[(name, port)] = self._read(logged, self.out_schemas[(name, port)])
                    skipped = self._done.get((p.name, epoch))
                    if skipped is not None:
                        skipped.open()
                    continue
                inputs = [outputs[(i.src, i.port)] for i in p.inputs]
                if isinstance(p.policy, FullHistory):
                    files = write_parquet(inputs[0], self._area("logs", f"{p.name}.in"), f"e{epoch}", self.fs)
                    work.batch.logs.append((f"{p.name}.in", epoch, files))
                step_started = time.perf_counter()
                self._label(f"{p.name} e{epoch}")
                previous = self._done.get((p.name, epoch - 1))
                for port, df in self._step(p, epoch, inputs, work, previous).items():
                    if len(self.pipeline.consumers(p.name, port)) > 1 or p.policy.logs_outputs:
                        df = df.persist()
                        work.cached.append(df)
                    outputs[(p.name, port)] = df
                    if p.policy.logs_outputs:
                        self._write_later(work, f"{p.name}.{port} e{epoch}", self._write_log, df, f"{p.name}.{port}", epoch, work.batch)
                self._persist(p, epoch, inputs, work)
                work.step_finished[p.name] = time.perf_counter()
                work.step_seconds[p.name] = work.step_finished[p.name] - step_started
                work.ran.append(p.name)
                done = self._done.get((p.name, epoch))
                if done is not None:
                    done.open()
            for write in work.writes:
                write.result()
        finally:
            for p in self.order:  # never leave a later epoch waiting on a failed one
                done = self._done.get((p.name, epoch))
                if done is not None:
                    done.open(failed=True)  # a no-op for steps that finished

    def _commit(self, work: _EpochWork) -> None:
        """Commit one computed epoch (main thread, in epoch order), then collect garbage."""
        epoch = work.epoch
        crash_point("epoch.computed")
        self.ledger.check_input(epoch)  # input changed while the epoch read it: not committed
        garbage_files = self.ledger.commit(epoch, work.batch, work.ran)
        if garbage_files:
            crash_point("gc.before")  # their records are forgotten durably; files still there
            self._delete(garbage_files)
        for name in work.ran:
            self.frontier[name] = epoch
        for df in work.cached:
            df.unpersist()
        for state in self.states.values():
            state.release(epoch)
        for p in self.order:
            self._done.pop((p.name, epoch - 1), None)
        self.report.epochs.append(epoch)
        self.report.epoch_seconds.append(time.perf_counter() - work.started)
        for name, seconds in work.step_seconds.items():
            self.report.step_seconds.setdefault(name, []).append(seconds)
            self.report.step_finished.setdefault(name, []).append(work.step_finished[name])
        self.report.last_records = work.records
        if self.on_epoch:
            self.on_epoch(epoch, time.perf_counter() - work.started, self.report)

    def _step(
        self,
        p: Processor,
        epoch: int,
        inputs: list[DataFrame],
        work: _EpochWork,
        previous: _Gate | None = None,
    ) -> dict[str, DataFrame]:
        """Run ``p``'s step of ``epoch``. A keyed step runs in two halves: the first
        needs nothing of the state (it reads, shuffles and materialises the epoch's
        input), then, once ``previous`` (the processor's previous epoch) is done,
        the second merges it into the state: epochs apply to keyed state in order,
        but reading one overlaps merging the one before."""
        kind = p.kind
        if kind == "source":
            if p.name not in work.offsets:
                raise GraphError(
                    f"internal: source {p.name!r} re-reads epoch {epoch}, whose offsets were "
                    "forgotten below its low-watermark; the rollback plan should have prevented this"
                )
            files = work.offsets[p.name]
            if not files:  # nothing new from this source in this epoch
                return {"out": empty(self.spark, self.out_schemas[(p.name, "out")])}
            return {"out": p.params["source"].read(self.spark, files)}
        if kind == "map":
            return {"out": schemas.call_map(p.params["fn"], inputs[0], epoch)}
        if kind == "validate":
            # Both outputs read the checked rows: compute them once (freed at commit).
            checked = schemas.call_map(p.params["fn"], inputs[0], epoch).persist()
            work.cached.append(checked)
            valid = checked.filter(F.col(schemas.REASON).isNull()).drop(schemas.REASON)
            return {"valid": valid, "rejected": checked.filter(F.col(schemas.REASON).isNotNull())}
        if kind == "exchange":
            return {"out": inputs[0].repartition(*p.params["key"])}
        if kind == "aggregate":
            state, aggregates = self.states[p.name], p.params["aggregates"]
            partials = aggregate_prepare(state, inputs[0], aggregates, epoch)
            if previous is not None:
                previous.wait(p.name, epoch)
            return {"out": aggregate_merge(state, partials, aggregates, epoch)}
        if kind == "stateful":
            state = self.states[p.name]
            rows = stateful_prepare(state, inputs[0], epoch)
            if previous is not None:
                previous.wait(p.name, epoch)
            return {"out": stateful_merge(
                state,
                rows,
                p.params["fn"],
                self.out_schemas[(p.name, "out")],
                epoch,
                p.params["on_epoch_end"],
                p.params["vectorized"],
            )}
        return {}  # sink: written in _persist

    def _persist(self, p: Processor, epoch: int, inputs: list[DataFrame], work: _EpochWork) -> None:
        """A sink's write (done here), and a keyed processor's checkpoint: its rows
        are fixed now, before the processor's next epoch may change the state, and
        written in the background (the epoch commits once they are durable)."""
        if p.kind == "sink":
            files = p.params["sink"].write(inputs[0], epoch)
            crash_point("sink.written")
            work.batch.sink_commits.append((p.name, epoch, files))
        if p.name in self.states and p.policy.checkpoints_at(epoch, self.checkpoint_count[p.name]):
            self._label(f"{p.name}/checkpoint e{epoch}")
            base = p.policy.compacts(self.checkpoint_count[p.name])
            rows = self.states[p.name].checkpoint(epoch, base)
            kind = "base" if base else "delta"
            self._write_later(work, f"{p.name}/checkpoint e{epoch}", self._write_checkpoint, rows, p.name, epoch, kind, work.batch)
            self.checkpoint_count[p.name] += 1
            self.report.checkpoints.append((p.name, epoch, kind))

    def _write_later(self, work: _EpochWork, label: str, write: Callable[..., None], *args: Any) -> None:
        """Run ``write(*args)`` in the writers' pool, its Spark jobs named ``label``."""

        def labelled() -> None:
            self._label(label)
            write(*args)

        work.writes.append(self._writers.submit(labelled))

    def _write_log(self, df: DataFrame, key: str, epoch: int, batch: CommitBatch) -> None:
        files = write_parquet(df, self._area("logs", key), f"e{epoch}", self.fs)
        batch.logs.append((key, epoch, files))

    def _write_checkpoint(self, rows: DataFrame, name: str, epoch: int, kind: str, batch: CommitBatch) -> None:
        files = write_parquet(rows, self._area("checkpoints", name), f"e{epoch}-{kind}", self.fs)
        batch.state.append((name, epoch, kind, files))

    def _label(self, description: str) -> None:
        """Name the Spark jobs this thread starts next (Spark UI, event log,
        ``bench/timings.py``): ``processor eN``."""
        self.spark.sparkContext.setLocalProperty("spark.job.description", description)

    def _read(self, files: tuple[StoredFile, ...], schema: Any) -> DataFrame:
        if not files:
            return empty(self.spark, schema)
        return self.spark.read.schema(schema).parquet(*[f.path for f in files])

    # -- garbage ----------------------------------------------------------------------------

    def _area(self, area: str, owner: str) -> str:
        """The directory of one log or checkpoint series under the root."""
        return self.fs.join(self.root, area, owner)

    def _delete(self, files: list[StoredFile]) -> None:
        """Delete files whose records a durable commit forgot."""
        if files:
            garbage.delete(self.fs, self.root, files)
            self.report.collected_files += len(files)

    def _sweep_garbage(self) -> None:
        """Delete data directories no commit names (work of a crashed attempt)."""
        garbage.sweep(self.fs, self.root, self.store)
