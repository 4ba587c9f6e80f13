"""One epoch's work on its way through the engine, and the phases of its life.

An epoch is **planned** (its input chosen and the plan committed: crash point
``epoch.planned``), **computed** by a worker (every step ran, its logs and
checkpoints written, its input checked unchanged: ``epoch.computed``),
**committed** by the main thread in epoch order (one metadata transaction:
``commit.before`` / ``commit.after``), and **finished** (the garbage its commit let
go collected, the edges acted on, the epoch counted in the report). An executor loss
may **discard** it before its commit. :meth:`EpochWork.advance` allows only these
transitions.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum

from pyspark.sql import DataFrame, Observation

from falkirk.control.ledger import Offsets
from falkirk.execution.exceptions import EpochInvariantError
from falkirk.graph import Pipeline
from falkirk.storage import CommitBatch, StoredFile


class EpochPhase(Enum):
    """Where an epoch is in its life (see the module)."""

    PLANNED = "planned"
    COMPUTED = "computed"
    COMMITTED = "committed"
    FINISHED = "finished"
    DISCARDED = "discarded"


#: The phases each phase may move to.
TRANSITIONS: dict[EpochPhase, frozenset[EpochPhase]] = {
    EpochPhase.PLANNED: frozenset({EpochPhase.COMPUTED, EpochPhase.DISCARDED}),
    EpochPhase.COMPUTED: frozenset({EpochPhase.COMMITTED, EpochPhase.DISCARDED}),
    EpochPhase.COMMITTED: frozenset({EpochPhase.FINISHED}),
    EpochPhase.FINISHED: frozenset(),
    EpochPhase.DISCARDED: frozenset(),
}


@dataclass
class EpochCounts:
    """Rows an epoch read and emitted, as Spark observed them while it computed them
    (only when the run counts: a progress display, ``on_epoch``, telemetry); no Spark
    job and no read of the input of their own. A source whose offsets say how many
    records they hold (``count_records``: a generator, a Redis stream's range) is
    counted from them.

    Spark reports an observation after the job that computed the rows, on its
    listener thread: usually by the time the epoch commits, sometimes after; counts
    are taken as they arrive. An output that every consumer read only part of (a
    ``limit``, an ``isEmpty()``) counts what Spark computed of it."""

    #: Input records of the sources whose offsets say how many (``count_records``).
    given: dict[str, int] = field(default_factory=dict)
    #: Sources whose output is observed (their rows are the epoch's input records).
    sources: set[str] = field(default_factory=set)
    #: Observations of outputs whose counts have not arrived yet.
    observed: dict[tuple[str, str], Observation] = field(default_factory=dict)
    #: Counts of observations that have arrived, and processors already counted.
    arrived: dict[tuple[str, str], int] = field(default_factory=dict)
    counted: set[str] = field(default_factory=set)

    def observe(self, processor: str, port: str, observation: Observation, *, source: bool) -> None:
        self.observed[(processor, port)] = observation
        if source:
            self.sources.add(processor)

    def poll(self) -> None:
        """Take the counts Spark has reported since the last call."""
        for output, o in list(self.observed.items()):
            if o._jo is not None and o._jo.future().isCompleted():
                # One call for the one metric (``Observation.get`` iterates the map
                # through py4j, ending on a Java exception: ~30 ms each).
                rows = o._jo.getAsJava().get("rows")
                self.arrived[output] = int(rows) if rows is not None else 0
                del self.observed[output]

    @property
    def records(self) -> int:
        """Input records of the epoch (all sources) that have arrived so far."""
        return sum(self.given.values()) + sum(n for (name, _), n in self.arrived.items() if name in self.sources)

    def wait_for_input(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every source's count; whether all arrived."""
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            if not any(name in self.sources for name, _ in self.observed):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)

    def new_rows(self, pipeline: Pipeline) -> dict[str, int]:
        """Rows each processor emitted (a sink: received) in this epoch, for the
        processors whose counts have all arrived since the last call."""
        self.poll()
        waiting = {name for name, _ in self.observed}
        rows: dict[str, int] = {n: k for n, k in self.given.items() if n not in self.counted}
        for (name, _), n in self.arrived.items():
            if name not in waiting and name not in self.counted:
                rows[name] = rows.get(name, 0) + n
        known = {**self.arrived, **{(name, "out"): n for name, n in self.given.items()}}
        for p in pipeline.processors.values():
            inputs = [(i.src, i.port) for i in p.inputs]
            if p.spec.sink and p.name not in self.counted and inputs and all(i in known for i in inputs):
                rows[p.name] = sum(known[i] for i in inputs)
        self.counted |= set(rows)
        return rows

    @property
    def waiting(self) -> bool:
        """Whether some of this epoch's counts have not arrived yet."""
        return bool(self.observed)


@dataclass
class StepTimes:
    """How long each processor's steps took in an epoch (an epoch with loops or
    regions runs a processor many times: the sum) and when its last step finished."""

    seconds: dict[str, float] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)

    def record(self, processor: str, started: float) -> None:
        """A step of ``processor`` that began at ``started`` (``time.perf_counter``) ended now."""
        self.finished[processor] = time.perf_counter()
        self.seconds[processor] = self.finished[processor] - started

    def absorb(self, part: StepTimes) -> None:
        """Add the times of a part of the epoch (an iteration, a chunk)."""
        for name, seconds in part.seconds.items():
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds
            self.finished[name] = part.finished[name]


@dataclass
class EpochWork:
    """One epoch on its way: planned, computed by a worker, committed by the main
    thread (or discarded); :attr:`phase` says where it is, and only the transitions
    of :data:`TRANSITIONS` are allowed (:meth:`advance`)."""

    epoch: int
    offsets: dict[str, Offsets]
    started: float
    #: Where the epoch is in its life (see :class:`EpochPhase`).
    phase: EpochPhase = EpochPhase.PLANNED
    #: Rows counted as Spark computes them (when the run counts: RunState.counting).
    counts: EpochCounts = field(default_factory=lambda: EpochCounts())
    #: Logged outputs that receivers which rolled back read instead of recomputing.
    logged: dict[tuple[str, str], tuple[StoredFile, ...]] = field(default_factory=dict)
    batch: CommitBatch = field(default_factory=CommitBatch)
    ran: list[str] = field(default_factory=list)
    #: Processors whose step began in this epoch: their state may have moved past
    #: the last commit (an executor loss rolls them back if the epoch is discarded).
    touched: set[str] = field(default_factory=set)
    cached: list[DataFrame] = field(default_factory=list)
    #: Kept with their lineage cut (:meth:`EpochRunner.cut`): freed block by block.
    cut: list[DataFrame] = field(default_factory=list)
    #: How long each processor's steps took, and when the last one finished.
    times: StepTimes = field(default_factory=lambda: StepTimes())
    #: Log and checkpoint writes under way; the epoch is computed once they are done.
    writes: list[Future[None]] = field(default_factory=list)
    #: A global checkpoint's barrier follows this epoch (GlobalCheckpoints).
    barrier: bool = False
    #: The epoch ends the input (:attr:`falkirk.operators.Step.final`).
    final: bool = False
    #: Seconds from planning to commit (set at the commit).
    seconds: float = 0.0
    #: Every output computed so far (what the loop stage reads after the worker).
    outputs: dict[tuple[str, str], DataFrame] = field(default_factory=dict)
    #: What each processor with an ``errors`` output read, without the rows it set
    #: aside (where a search for more bad rows starts: :mod:`falkirk.execution.isolation`).
    inputs_used: dict[str, list[DataFrame]] = field(default_factory=dict)

    def absorb(self, part: EpochWork) -> None:
        """Take in ``part``, the work of one time inside this epoch (an iteration of a
        loop, a chunk of a region), once its writes are done: its kept DataFrames (freed
        when the epoch commits) and its steps' times."""
        for write in part.writes:
            write.result()
        self.cached += part.cached
        self.cut += part.cut
        self.times.absorb(part.times)

    def advance(self, to: EpochPhase) -> None:
        """Move the epoch to phase ``to``; any transition :data:`TRANSITIONS` does
        not allow (committing an epoch twice, or one not computed, or computing a
        discarded one) is a bug in the engine and raises."""
        if to not in TRANSITIONS[self.phase]:
            raise EpochInvariantError(f"epoch {self.epoch} cannot go from {self.phase.value} to {to.value}")
        self.phase = to

