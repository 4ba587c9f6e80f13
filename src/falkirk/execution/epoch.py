"""Computing one epoch: every processor's step, the logs and checkpoints its policy
asks for, and what the commit of the epoch will record.

:class:`EpochRunner` runs an epoch in a worker thread (several epochs may be in flight
at once; their Spark jobs run concurrently), on the operators of a
:class:`~falkirk.execution.run_state.RunState`:

1. a processor that holds the epoch already (after a rollback) skips it, and the
   receivers that need its output read the log instead (the re-send, Q'(e));
2. a :class:`~falkirk.graph.FullHistory` processor logs its inputs;
3. the operator's step runs; a keyed one merges into its state only once its
   processor's previous epoch has (a :class:`Gate` per processor and epoch), and gives
   up if that epoch failed (:class:`EpochAborted`);
4. outputs read by several processors, or logged, are computed once and kept;
   logged outputs and keyed-state checkpoints are written in the background (the
   epoch is computed once they are durable); a sink writes the epoch
   (``sink.written``).

Nothing here touches the metadata store: the engine commits (in epoch order).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from falkirk.control.domains import projection_of
from falkirk.control.faults import CrashPoint, crash_point
from falkirk.control.ledger import Offsets
from falkirk.exceptions import FalkirkError
from falkirk.execution.behaviours import behaviour_of
from falkirk.execution.diagnosis import cause_of, culprit_of, diagnose
from falkirk.execution.exceptions import EpochInvariantError
from falkirk.execution.isolation import (
    transient,
)
from falkirk.execution.run_state import RunState
from falkirk.execution.setting_aside import SetAside
from falkirk.execution.work import EpochWork
from falkirk.graph import GraphError, Pipeline, Processor
from falkirk.graph.errors import ERRORS_PORT, OnError
from falkirk.io.content_hashes import CONTENT_KEY
from falkirk.operators import Step
from falkirk.spark.blocks import free
from falkirk.spark.errors import as_storage_error, first_line, is_executor_loss
from falkirk.spark.files import write_parquet
from falkirk.spark.materialise import materialise, replicated
from falkirk.storage import CommitBatch
from falkirk.storage.full import no_space
from falkirk.time.ticks import Tick

logger = logging.getLogger(__name__)


class EpochAborted(GraphError):
    """A keyed step gave up because its processor's previous epoch failed: applying
    this epoch to a state that lacks the previous one would produce wrong rows."""


@dataclass
class Gate:
    """Opened when a processor is done with one epoch, so the processor's next epoch
    may merge into its state; ``failed`` when the epoch failed instead."""

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


class EpochRunner:
    """Computes epochs on ``state`` (see the module docstring); ``writers`` runs the
    background writes."""

    def __init__(self, state: RunState, writers: ThreadPoolExecutor, checkpoints: dict[str, int]) -> None:
        self.state = state
        self.writers = writers
        #: Keyed-state checkpoints taken so far per processor (the policy's cadence).
        self.checkpoints = checkpoints
        self.gates: dict[tuple[str, int], Gate] = {}
        self._lock = threading.Lock()
        #: Processors a worker computes: all but those in or after a loop, which the
        #: main thread runs (:mod:`falkirk.execution.loop_stage`).
        later = after_loops(state.pipeline)
        self.ahead = [p for p in state.order if p.name not in later]
        #: Outputs a loop or region reads that are computed in the worker: see :func:`sets_aside_before_loops`.
        self.computed_here = sets_aside_before_loops(state.pipeline, self.ahead)
        #: What it does with rows and files a step cannot process (setting_aside.py).
        self.aside = SetAside(state, self.ahead, self._write_later, self._lock)

    # -- main thread ----------------------------------------------------------------

    def prepare(self, epoch: int, offsets: dict[str, Offsets], barrier: bool = False) -> EpochWork:
        """What the epoch's worker needs from the store (main thread); ``barrier``: a
        global checkpoint's barrier follows the epoch."""
        state = self.state
        work = EpochWork(epoch, offsets, time.perf_counter(), barrier=barrier, final=epoch == state.ledger.end_of_input)
        if barrier:
            crash_point(CrashPoint.BARRIER_INJECTED)  # the barrier is decided; no snapshot written yet
        if state.counting:
            for name, o in offsets.items():
                count = getattr(state.pipeline.processors[name].spec.reader, "count_records", None)  # type: ignore[attr-defined]
                if o is not None and count is not None and epoch > state.restored[name]:
                    work.counts.given[name] = int(count(o))
        for p in self.ahead:
            self.gates[(p.name, epoch)] = Gate()
        for p in state.order:
            if epoch > state.restored[p.name] or p.region is not None:  # their logs: runtime/loop.py, sequence.py
                continue
            for port in p.ports:  # p holds the epoch already: feed receivers that do not
                if any(
                    not state.holds(q, projection_of(p, q).latest_message(Tick(epoch)))
                    for q in state.pipeline.consumers(p.name, port)
                ):
                    files = state.store.logs(f"{p.name}.{port}").get(Tick(epoch))
                    if files is None:
                        raise EpochInvariantError(
                            f"processor {p.name!r} has no log of epoch {epoch} for a "
                            "consumer that rolled back; the rollback plan should have prevented this"
                        )
                    work.logged[(p.name, port)] = tuple(state.verified(files))
        return work

    def finish(self, work: EpochWork) -> None:
        """After the epoch committed: free what it kept."""
        for df in work.cached:
            df.unpersist()
        for df in work.cut:
            free(df)
        for p in self.state.keyed:
            self.state.operators[p.name].release(whole_tick(p, work.epoch).ordinal)
        for p in self.ahead:
            self.gates.pop((p.name, work.epoch - 1), None)

    # -- worker thread --------------------------------------------------------------

    def compute(self, work: EpochWork) -> None:
        """Run every step of one epoch (a worker thread; no metadata access)."""
        epoch = work.epoch
        try:
            for p in self.ahead:
                self.step(p, work)
                self.gates[(p.name, epoch)].open()
            for write in work.writes:
                write.result()
        finally:
            for p in self.ahead:  # never leave a later epoch waiting on a failed one
                gate = self.gates.get((p.name, epoch))
                if gate is not None:
                    gate.open(failed=True)  # a no-op for steps that finished

    def step(self, p: Processor, work: EpochWork) -> None:
        """Processor ``p``'s step of the epoch (an epoch processor): run, or, when
        it holds the epoch already, its logged outputs for the receivers that need
        them. A Spark error is translated into one that names ``p`` and the epoch."""
        epoch, outputs = work.epoch, work.outputs
        if epoch <= self.state.restored[p.name]:  # p holds the epoch already
            for (name, port), logged in work.logged.items():
                if name == p.name:
                    outputs[(name, port)] = self.state.read(logged, self.state.schemas[(name, port)])
            return
        self.run(p, work, [outputs[(i.src, i.port)] for i in p.inputs])

    def run(
        self, p: Processor, work: EpochWork, inputs: list[DataFrame], *, tick: Tick | None = None, checkpoint: bool | None = None
    ) -> None:
        """Run ``p``'s operator at ``tick`` (default: the epoch) on ``inputs`` into
        ``work.outputs``, with the logs and checkpoint (``checkpoint``, default: as
        its policy says for the epoch) its policy asks for."""
        try:
            with replicated(p.policy.replicas):
                self._run(p, work, inputs, work.outputs, Tick(work.epoch) if tick is None else tick, checkpoint)
        except Exception as exc:
            if no_space(exc) is None and not is_executor_loss(exc) and not isinstance(exc, FalkirkError):
                self.aside.unreadable(work)  # FileSource(unreadable="set_aside"): a file Spark cannot read
            if as_storage_error(exc) is not None or no_space(exc) is not None or is_executor_loss(exc):
                raise  # a damaged file, a full disk: the engine names it; a lost executor: it recovers
            if isinstance(exc, FalkirkError):
                raise  # Falkirk's own, already saying what is wrong
            cause = cause_of(exc)
            if cause is None:
                raise
            found = culprit_of(self.state, p, work, exc, cause)
            note = self.aside.after_failure(found[0], work, tick) if not transient(cause) else ""
            raise diagnose(self.state, p, work, exc, cause, found=found, note=note) from exc

    def _run(
        self,
        p: Processor,
        work: EpochWork,
        inputs: list[DataFrame],
        outputs: dict[tuple[str, str], DataFrame],
        tick: Tick,
        checkpoint: bool | None,
    ) -> None:
        """One step of ``p`` at ``tick``: its input logged, the operator run (in epoch
        order where its state needs it), each output kept, observed and logged as
        its policy asks, what it emits recorded for the commit, its checkpoint taken."""
        errors: DataFrame | None = None
        if p.has_errors:  # the rows set aside in this epoch leave the input here (and its log)
            inputs, errors = self.aside.split(p, work, inputs)
        if p.policy.logs_inputs:
            self._log_inputs(p, work, inputs)
        started = time.perf_counter()
        self.label(f"{p.name} {tick.label}")
        step, waited = self._step(p, work, inputs, tick)
        operator = self.state.operators[p.name]
        produced = operator.step(step)
        if p.has_errors:
            produced = {**produced, ERRORS_PORT: self.aside.errors_output(p, work, errors)}
        _check_merged_in_order(p, operator, work.epoch, waited)
        for port, df in produced.items():
            outputs[(p.name, port)], logged = self._route(p, port, df, work)
            if logged:
                key = f"{p.name}.{port}"
                self._write_later(work, f"{key} {tick.label}", self._write_log, outputs[(p.name, port)], key, tick, work.batch)
        if p.spec.source:
            self.aside.record_files(p, work)
            self._hash_content(p, work)
        emitted = operator.emit(step)
        if emitted is not None:
            crash_point(CrashPoint.SINK_WRITTEN)
            work.batch.sink_commits.append((p.name, work.epoch, emitted))
        if p.spec.keyed and (self._checkpoints_now(p, work) if checkpoint is None else checkpoint):
            if p.spec.selective:
                # Its epochs arrive in any order, but its checkpoints are taken in
                # epoch order: once the previous epoch's is, every part up to this
                # epoch is there (a later epoch's part may be too: left out).
                step.wait_previous()
            self.checkpoint(p, tick, work)
        work.times.record(p.name, started)
        work.ran.append(p.name)

    def _log_inputs(self, p: Processor, work: EpochWork, inputs: list[DataFrame]) -> None:
        """The inputs of a processor whose policy logs them (written now, committed with the epoch)."""
        state, epoch = self.state, work.epoch
        for k, df in enumerate(inputs):
            key = state.input_log(p, k)
            files = write_parquet(df, state.area("logs", key), f"e{epoch}", state.fs)
            work.batch.logs.append((key, Tick(epoch), files))

    def _step(self, p: Processor, work: EpochWork, inputs: list[DataFrame], tick: Tick) -> tuple[Step, list[bool]]:
        """The :class:`Step` ``p``'s operator runs, and the list its
        ``wait_previous`` appends to once called (section 3.3: a keyed operator that
        merges epochs in order touches its state only once the previous epoch is
        through; the others may from the start)."""
        epoch = work.epoch
        if not (p.spec.keyed and not p.spec.selective):
            work.touched.add(p.name)  # its state may hold this epoch from now on
        previous = self.gates.get((p.name, epoch - 1))
        waited: list[bool] = []

        def wait_previous() -> None:
            if previous is not None:
                previous.wait(p.name, epoch)
            waited.append(True)
            work.touched.add(p.name)

        if p.spec.source and p.name not in work.offsets:
            raise EpochInvariantError(
                f"source {p.name!r} re-reads epoch {epoch}, whose offsets were "
                "forgotten below its low-watermark; the rollback plan should have prevented this"
            )
        step = Step(
            epoch,
            inputs,
            offsets=self.state.quarantine.files_read(p.name, epoch, work.offsets.get(p.name)) if p.spec.source else None,
            wait_previous=wait_previous,
            cache=lambda df: self.keep(work, df),
            time=tick.as_time,
            version=tick.ordinal,
            final=work.final,
        )
        return step, waited

    def _route(self, p: Processor, port: str, df: DataFrame, work: EpochWork) -> tuple[DataFrame, bool]:
        """Output ``port`` of ``p`` as its consumers read it (kept when read more
        than once or logged, observed for telemetry), and whether its policy logs it."""
        state = self.state
        consumers = state.pipeline.consumers(p.name, port)
        # A port nobody reads (an optional one left unconnected) is neither kept
        # nor logged: no recovery would re-send it, so its log would never go.
        logged = p.policy.logs_outputs and bool(consumers)
        if len(consumers) > 1 or logged:
            df = self.keep(work, df)
        if (p.name, port) in self.computed_here and p.region is None:
            df = self.keep(work, df)
            df.count()  # a bad row fails here, where it can be set aside, not in the loop's iteration
        # Loop processors' rows are not counted (an observation per iteration would
        # need a count per tick). The errors output is not counted (its rows are
        # counted as they are set aside).
        if state.counting and p.region is None and port != ERRORS_PORT and p.name not in work.counts.given:
            # Observed above the cache, not inside it: every job reading the output
            # counts all of it, whichever of two concurrent jobs (a log write and a
            # consumer) computed which cached partitions.
            observation = Observation(f"{p.name}.{port} e{work.epoch}")
            df = df.observe(observation, F.count(F.lit(1)).alias("rows"))
            work.counts.observe(p.name, port, observation, source=p.spec.source)
        return df, logged

    def _checkpoints_now(self, p: Processor, work: EpochWork) -> bool:
        return behaviour_of(p.policy).checkpoints_after(p.policy, work.epoch, self.checkpoints[p.name], barrier=work.barrier)

    def snapshot(self, epoch: int) -> EpochWork:
        """A global checkpoint of the state after ``epoch``, which has committed and
        was no barrier (a clean stop or an idle service): every keyed processor's
        checkpoint, written now. Nothing may be in flight."""
        work = EpochWork(epoch, {}, time.perf_counter(), barrier=True)
        crash_point(CrashPoint.BARRIER_INJECTED)
        for p in self.state.keyed:
            self.checkpoint(p, Tick(epoch), work)
        for write in work.writes:
            write.result()
        work.ran = [p.name for p in self.state.order]
        return work

    def keep(self, work: EpochWork, df: DataFrame) -> DataFrame:
        """``df`` persisted until ``work``'s epoch has committed."""
        kept = df.persist()
        with self._lock:
            work.cached.append(kept)
        return kept

    def cut(self, work: EpochWork, df: DataFrame, replicas: int = 1) -> DataFrame:
        """``df`` computed now and kept, its lineage cut (:func:`materialise`, with
        ``replicas`` copies of each block), until ``work``'s epoch has committed, then
        freed: what a loop sends back every few iterations, so that iteration n's plan
        does not hold the n iterations before it (Spark overflows its stack
        serialising a task's lineage after about 20 iterations otherwise). Nothing
        reads it once the epoch has committed: what the loop's processors keep is
        materialised, and what left the loop was written."""
        with replicated(replicas):
            kept = materialise(df)
        with self._lock:
            work.cut.append(kept)
        return kept

    def checkpoint(self, p: Processor, tick: Tick, work: EpochWork) -> None:
        """A keyed processor's checkpoint at ``tick``: its rows are fixed now, before
        the processor's next step may change the state, and written in the background."""
        self.label(f"{p.name}/checkpoint {tick.label}")
        base = p.policy.compacts(self.checkpoints[p.name])
        operator = self.state.operators[p.name]
        with replicated(p.policy.replicas):  # a base checkpoint compacts the state
            rows = operator.checkpoint(tick.ordinal, base)
        kind = str(operator.chain_kind(tick.ordinal, base))  # as persisted: in the metadata and the files' names
        self._write_later(
            work, f"{p.name}/checkpoint {tick.label}", self._write_checkpoint, rows, p.name, tick, kind, work.batch, work.barrier
        )
        self.checkpoints[p.name] += 1
        self.state.report.checkpoints.append((p.name, work.epoch, kind))

    def _write_later(self, work: EpochWork, label: str, write: Callable[..., None], *args: Any) -> None:
        """Run ``write(*args)`` in the writers' pool, its Spark jobs named ``label``."""

        def labelled() -> None:
            self.label(label)
            write(*args)

        work.writes.append(self.writers.submit(labelled))

    def _hash_content(self, p: Processor, work: EpochWork) -> None:
        """The hashes of the files source ``p`` read for the epoch, taken in the
        background and committed with it, if its reader keeps them and the epoch has
        none yet (:mod:`falkirk.io.content_hashes`)."""
        reader = p.spec.reader  # type: ignore[attr-defined]
        offsets = work.offsets.get(p.name)  # every file planned, those set aside too: a replay checks them all
        if getattr(reader, "hashes_content", False) and offsets and offsets.get("files") and CONTENT_KEY not in offsets:
            files = offsets["files"]
            self._write_later(work, f"{p.name}/hash {work.epoch}", self._hash_files, p, work.epoch, files, work.batch)

    def _hash_files(self, p: Processor, epoch: int, files: list[list[Any]], batch: CommitBatch) -> None:
        try:
            hashes = p.spec.reader.content_hashes(self.state.spark, files)  # type: ignore[attr-defined]
        except Exception as exc:  # the epoch's own read says what is wrong with a file; a put-back one is refused
            logger.warning("source %r: the files of epoch %d could not be hashed (%s); one put back will be refused", p.name, epoch, first_line(exc))
            return
        if hashes:
            batch.offsets_added.append((p.name, epoch, {CONTENT_KEY: hashes}))

    def _write_log(self, df: DataFrame, key: str, tick: Tick, batch: CommitBatch) -> None:
        files = write_parquet(df, self.state.area("logs", key), tick.label, self.state.fs)
        batch.logs.append((key, tick, files))

    def _write_checkpoint(self, rows: DataFrame, name: str, tick: Tick, kind: str, batch: CommitBatch, barrier: bool) -> None:
        started = time.perf_counter()
        files = write_parquet(rows, self.state.area("checkpoints", name), f"{tick.label}-{kind}", self.state.fs)
        if self.state.telemetry is not None:
            self.state.telemetry.checkpoint(name, tick.epoch, kind, time.perf_counter() - started, sum(f.size for f in files))
        crash_point(CrashPoint.STATE_WRITTEN)  # a checkpoint (or a CEC log entry) written, not yet committed
        if barrier:
            crash_point(CrashPoint.SNAPSHOT_WRITTEN)  # a barrier snapshot written, not yet committed
        with self._lock:
            self.state.report.checkpoint_bytes += sum(f.size for f in files)
        batch.state.append((name, tick, kind, files))

    def label(self, description: str) -> None:
        """Name the Spark jobs this thread starts next (Spark UI, event log,
        ``bench/timings.py``): ``processor eN``."""
        self.state.spark.sparkContext.setLocalProperty("spark.job.description", description)


def _check_merged_in_order(p: Processor, operator: object, epoch: int, waited: list[bool]) -> None:
    """Section 3.3: only an operator whose state is partitioned by time (a selective
    spec) may take a later epoch before an earlier one; the others merge in order."""
    if p.spec.keyed and not p.spec.selective and not waited:
        raise GraphError(
            f"operator {type(operator).__name__} of processor {p.name!r} merged epoch {epoch} without "
            "waiting for the previous one (Step.wait_previous): its state would hold a later epoch "
            "before an earlier one. Call step.wait_previous() before touching the state, or declare "
            "the spec selective if its state is partitioned by time"
        )


def sets_aside_before_loops(pipeline: Pipeline, ahead: list[Processor]) -> set[tuple[str, str]]:
    """The outputs of processors before the loops and regions (``ahead``) that a loop
    or region reads, when a processor at or above them sets rows aside: computed in
    the epoch's worker (kept, then read by the loop), so that a bad row fails there,
    where the engine can find it and run the epoch again without it, rather than in
    a loop's iteration, where it cannot."""
    names = {p.name for p in ahead}
    above: dict[str, set[str]] = {}
    for p in ahead:  # graph order: every input before its receiver
        above[p.name] = {p.name}.union(*(above.get(i.src, set()) for i in p.inputs))
    sets_aside = {p.name for p in ahead if pipeline.on_error_of(p) is OnError.DEAD_LETTER}
    return {
        (p.name, port)
        for p in ahead
        for port in p.ports
        if port != ERRORS_PORT
        and above[p.name] & sets_aside
        and any(q.name not in names for q in pipeline.consumers(p.name, port))
    }


def whole_tick(p: Processor, epoch: int) -> Tick:
    """The tick of ``p`` once it has processed all of ``epoch``."""
    return Tick.all_of(epoch) if p.region is not None else Tick(epoch)


def after_loops(pipeline: Pipeline) -> set[str]:
    """The processors in a loop or a sequence-number region, or downstream of one."""
    later = {p.name for p in pipeline.processors.values() if p.region is not None}
    grown = True
    while grown:
        grown = False
        for p in pipeline.processors.values():
            if p.name not in later and any(i.src in later for i in p.inputs):
                later.add(p.name)
                grown = True
    return later
