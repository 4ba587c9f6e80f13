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
class EpochWork:
    """One epoch on its way: planned, computed by a worker, committed by the main
    thread (or discarded); :attr:`phase` says where it is, and only the transitions
    of :data:`TRANSITIONS` are allowed (:meth:`advance`)."""

    epoch: int
    offsets: dict[str, Offsets]
    started: float
    #: Where the epoch is in its life (see :class:`EpochPhase`).
    phase: EpochPhase = EpochPhase.PLANNED
    records: int = 0
    #: Input records per source (counted from the offsets, no Spark job), when asked.
    source_records: dict[str, int] = field(default_factory=dict)
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
    step_seconds: dict[str, float] = field(default_factory=dict)
    step_finished: dict[str, float] = field(default_factory=dict)
    #: Log and checkpoint writes under way; the epoch is computed once they are done.
    writes: list[Future[None]] = field(default_factory=list)
    #: A global checkpoint's barrier follows this epoch (GlobalCheckpoints).
    barrier: bool = False
    #: The epoch ends the input (:attr:`falkirk.operators.Step.final`).
    final: bool = False
    #: Row counts of each processor's outputs, observed as Spark computes them
    #: (only with telemetry: no extra Spark job). Spark reports an observation after
    #: its job, sometimes after the epoch commits: counts are taken as they arrive.
    #: Sources are counted from their offsets instead; an output a consumer reads
    #: only part of (a ``limit``) counts what Spark computed of it.
    observed: dict[tuple[str, str], Observation] = field(default_factory=dict)
    #: Counts of observations that have arrived, and processors already counted.
    arrived: dict[tuple[str, str], int] = field(default_factory=dict)
    counted: set[str] = field(default_factory=set)
    #: Seconds from planning to commit (set at the commit).
    seconds: float = 0.0
    #: Every output computed so far (what the loop stage reads after the worker).
    outputs: dict[tuple[str, str], DataFrame] = field(default_factory=dict)

    def new_rows(self, pipeline: Pipeline) -> dict[str, int]:
        """Rows each processor emitted (a sink: received) in this epoch, for the
        processors whose counts have all arrived since the last call."""
        for output, o in list(self.observed.items()):
            if o._jo is not None and o._jo.future().isCompleted():
                self.arrived[output] = int(o.get.get("rows", 0))
                del self.observed[output]
        waiting = {name for name, _ in self.observed}
        rows: dict[str, int] = {n: k for n, k in self.source_records.items() if n not in self.counted}
        for (name, _), n in self.arrived.items():
            if name not in waiting and name not in self.counted:
                rows[name] = rows.get(name, 0) + n
        known = {**self.arrived, **{(name, "out"): n for name, n in self.source_records.items()}}
        for p in pipeline.processors.values():
            inputs = [(i.src, i.port) for i in p.inputs]
            if p.spec.sink and p.name not in self.counted and inputs and all(i in known for i in inputs):
                rows[p.name] = sum(known[i] for i in inputs)
        self.counted |= set(rows)
        return rows

    def absorb(self, part: EpochWork) -> None:
        """Take in ``part``, the work of one time inside this epoch (an iteration of a
        loop, a chunk of a region), once its writes are done: its kept DataFrames (freed
        when the epoch commits) and its steps' times."""
        for write in part.writes:
            write.result()
        self.cached += part.cached
        self.cut += part.cut
        for name, seconds in part.step_seconds.items():
            self.step_seconds[name] = self.step_seconds.get(name, 0.0) + seconds
            self.step_finished[name] = part.step_finished[name]

    @property
    def counting(self) -> bool:
        """Whether some of this epoch's counts have not arrived yet."""
        return bool(self.observed)

    def advance(self, to: EpochPhase) -> None:
        """Move the epoch to phase ``to``; any transition :data:`TRANSITIONS` does
        not allow (committing an epoch twice, or one not computed, or computing a
        discarded one) is a bug in the engine and raises."""
        if to not in TRANSITIONS[self.phase]:
            raise EpochInvariantError(f"epoch {self.epoch} cannot go from {self.phase.value} to {to.value}")
        self.phase = to

