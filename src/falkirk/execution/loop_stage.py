"""Running a pipeline's loops: the iterations of an epoch, each a logical time (e, i).

The part of an epoch that lies in or after a loop (:mod:`falkirk.graph.loops`) runs
on the engine's main thread (:class:`LoopStage`), once everything upstream of it has
been computed by a worker thread and committed. Workers compute the next epochs'
upstream parts meanwhile: later epochs enter while earlier ones still iterate.

For loop L and epoch e, iteration i = 0, 1, ... (step numbers match the comments):

1. every processor of L runs at (e, i), in graph order: ``enter`` passes epoch e's
   rows at i = 0 (nothing later); a ``feedback`` passes what its input sent at
   (e, i - 1) - that is its own event's time; every other processor its operator's
   step on the rows of (e, i). A processor that holds the time already (a rollback
   resumed it further on) skips it, and its rows come from its log of that time;
2. what the policies persist at (e, i) - eager checkpoints, logged outputs - is
   written (crash point ``iteration.written``) and committed with Ξ at ↓(e, i) of
   every processor that ran (``iteration.committed``): a crash then resumes from
   this iteration instead of the epoch's start;
3. the iterations end at the first one whose rows sent back are empty (a fixed
   point), or after ``max_iterations``; every processor of L then stands at (e, ∞):
   lazy checkpoints are taken now, and each ``leave`` gets the rows of all iterations.

Then the processors after the loop run as in any epoch, and the engine commits the
epoch's rest.

An interleaved loop (``iterate(interleave=True)``) runs those steps for several epochs
at once. While epoch e iterates, the engine hands over (``admit``) every later epoch
in flight whose part before the loops its worker has computed, once that part is
committed; each round then runs step 1 for the next iteration of every epoch inside
the loop, side by side in the ``rounds`` threads, oldest epoch first in the log. An
epoch at its fixed point waits inside the loop, done, until the engine commits it: step
3 and what follows the loop run epoch by epoch, in order, so its lazy checkpoints are
taken at (e, ∞) with later epochs' times in the state already - selectively (a
buffer's checkpoint holds the parts up to (e, ∞) only). Nothing is committed per
iteration (:func:`~falkirk.graph.scopes.check_interleaved` refuses the policies that
would), so every loop processor's frontier stays a single tick of the lexicographic
order, and a crash rolls each back to "all of e, none of e + 1".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field

from pyspark.sql import DataFrame

from falkirk.execution.behaviours import behaviour_of
from falkirk.execution.epoch import EpochRunner, whole_tick
from falkirk.execution.exceptions import EpochInvariantError
from falkirk.execution.run_state import RunState
from falkirk.execution.sequence_stage import SequenceStage
from falkirk.execution.work import EpochWork
from falkirk.graph import GraphError, Loop, Processor
from falkirk.graph.specs import EnterSpec, FeedbackSpec, LeaveSpec
from falkirk.recovery.chain import Delta
from falkirk.spark.blocks import free
from falkirk.spark.frames import empty
from falkirk.time.ticks import Tick

logger = logging.getLogger(__name__)

#: Commits one iteration's work: ``(work, ticks)`` with the tick of every processor
#: that ran in it.
IterationCommit = Callable[[EpochWork, dict[str, Tick]], None]

#: Rows of one output at one time; None when neither computed nor logged (a receiver
#: that needs them means the rollback plan was wrong).
Rows = DataFrame | None

#: What a loop sends back is materialised (its lineage cut) every this many
#: iterations, and otherwise only cached: lineage grows for at most this many.
CUT_EVERY = 8

#: The next epochs in flight ready to enter an interleaved loop (see :meth:`LoopStage.run`).
Admit = Callable[[], list[EpochWork]]


@dataclass
class _Flight:
    """One epoch's way through one loop: where it is and what it has sent."""

    work: EpochWork
    #: The rows of every iteration so far of each output read by a ``leave``.
    leaving: dict[tuple[str, str], list[Rows]]
    iteration: int = 0
    #: The previous iteration's rows into each feedback.
    sent: dict[tuple[str, str], Rows] = field(default_factory=dict)
    #: Iterations in which some processor ran (rather than held the time).
    computed: int = 0
    done: bool = False
    #: What failed in one of its iterations while an earlier epoch was being
    #: committed: raised when the engine commits this epoch, in order.
    error: BaseException | None = None


class LoopStage:
    """The main thread's part of each epoch of a pipeline with loops (see the module
    docstring); ``commit`` commits an iteration."""

    def __init__(
        self,
        state: RunState,
        runner: EpochRunner,
        commit: IterationCommit,
        sequences: SequenceStage,
        rounds: Executor | None = None,
    ) -> None:
        self.state = state
        #: Runs the iterations of one round of an interleaved loop side by side (one
        #: thread per epoch inside; Spark runs their jobs at once). None: one by one.
        self.rounds = rounds
        self.runner = runner
        self.commit = commit
        #: Runs the sequence-number regions, which also wait for their upstream here.
        self.sequences = sequences
        ahead = {p.name for p in runner.ahead}
        self.later = [p for p in state.order if p.name not in ahead]
        self.members = {name: [p for p in state.order if p.loop == name] for name in state.pipeline.loops}
        #: Iterations each loop ran in the last epoch (for reports and tests).
        self.iterations: dict[str, int] = {}
        #: Per interleaved loop, the epochs inside it by epoch (see :meth:`run`).
        self.flights: dict[str, dict[int, _Flight]] = {}

    @property
    def active(self) -> bool:
        """Whether the pipeline has loops or regions (and so this stage has work)."""
        return bool(self.later)

    def run(self, work: EpochWork, admit: Admit = lambda: []) -> None:
        """The epoch's loops and what follows them, into ``work`` (whose batch the
        engine commits after). ``admit``: the next epochs in flight whose part before
        the loops is computed and committed now, in epoch order; an interleaved loop
        takes them in while ``work``'s epoch iterates."""
        done: set[str] = set()
        for p in self.later:
            if p.region is None:
                self.runner.step(p, work)
            elif p.region in done:
                continue
            elif p.loop is not None:
                done.add(p.loop)
                loop = self.state.pipeline.loops[p.loop]
                if loop.interleave:
                    self._interleaved(loop, work, admit)
                else:
                    flight = self._flight(loop, work)
                    while not flight.done:
                        self._advance(loop, flight)
                    self._leave(loop, flight)
            elif p.sequence is not None:
                done.add(p.sequence)
                self.sequences.run(self.state.pipeline.sequences[p.sequence], work)

    # -- one loop ---------------------------------------------------------------------

    def _interleaved(self, loop: Loop, work: EpochWork, admit: Admit) -> None:
        """Round after round, the next iteration of every epoch inside ``loop``
        (oldest first), taking in the epochs ``admit`` hands over, until ``work``'s
        epoch is at its fixed point; then its rows leave. The later epochs stay
        inside, where they are, for the engine's next call."""
        flights = self.flights.setdefault(loop.name, {})
        if work.epoch not in flights:
            flights[work.epoch] = self._flight(loop, work)
        mine = flights[work.epoch]
        while not mine.done:  # a failed iteration ends its epoch's flight too
            for later in admit():
                flights[later.epoch] = self._flight(loop, later)
                inside = [e for e, f in flights.items() if e < later.epoch and not f.done]
                self.state.report.interleaved.append((loop.name, later.epoch, inside))
                logger.info("loop=%s epoch=%d entered while epochs %s iterate", loop.name, later.epoch, inside)
            self._round(loop, [flights[e] for e in sorted(flights) if not flights[e].done])
        del flights[work.epoch]
        if mine.error is not None:
            raise mine.error
        self._leave(loop, mine)

    def _round(self, loop: Loop, flights: list[_Flight]) -> None:
        """The next iteration of each of ``flights`` (oldest epoch first), side by
        side when there are several: their times are independent (that is what
        :func:`~falkirk.graph.scopes.check_interleaved` checked), and small Spark jobs
        leave cores idle that another epoch's jobs can use. An iteration that fails
        fails its own epoch only, when the engine commits that epoch: the earlier
        epochs still commit first."""
        members = self.members[loop.name]
        holding = any(p.name in self.state.resumed or f.work.epoch <= self.state.restored[p.name] for p in members for f in flights)
        if self.rounds is None or len(flights) == 1 or holding:  # a held time reads the metadata: this thread
            outcomes = [_attempt(self._advance, loop, flight) for flight in flights]
        else:
            running = [self.rounds.submit(self._advance, loop, flight) for flight in flights]
            outcomes = [f.exception() for f in running]  # waits for all: none is left running
        for flight, failure in zip(flights, outcomes, strict=True):
            if failure is not None:
                flight.error, flight.done = failure, True
                logger.warning("loop=%s epoch=%d failed in an iteration (%s): raised when it commits", loop.name, flight.work.epoch, failure)

    def close(self) -> None:
        """Free what the epochs still inside a loop kept (a failure ended the run
        with them there; a new run starts from the last commit)."""
        for flights in self.flights.values():
            for flight in flights.values():
                for df in flight.work.cached:
                    df.unpersist()
                for df in flight.work.cut:
                    free(df)
        self.flights.clear()

    def _flight(self, loop: Loop, work: EpochWork) -> _Flight:
        exits = {(i.src, i.port) for q in self.later if isinstance(q.spec, LeaveSpec) for i in q.inputs}
        return _Flight(work, leaving={key: [] for key in exits})

    def _advance(self, loop: Loop, flight: _Flight) -> None:
        """One iteration of ``flight``'s epoch (steps 1 and 2); marks it done at its
        fixed point or at the iteration limit."""
        work, members, epoch, iteration = flight.work, self.members[loop.name], flight.work.epoch, flight.iteration
        current, ran = self._iteration(loop, work, members, Tick(epoch, iteration), flight.sent)
        flight.computed += ran
        for key, parts in flight.leaving.items():
            parts.append(current.get(key))
        flight.sent = {(fb.inputs[0].src, fb.inputs[0].port): current.get((fb.inputs[0].src, fb.inputs[0].port)) for fb in self._feedbacks(members)}
        if not self._continues(loop, members, epoch, iteration, flight.sent):
            flight.done = True
        elif iteration + 1 >= loop.max_iterations:
            self._limit(loop, epoch)
            flight.done = True
        else:
            flight.iteration += 1

    def _leave(self, loop: Loop, flight: _Flight) -> None:
        """Step 3 for ``flight``'s epoch, done iterating: what leaves the loop."""
        work, epoch, count = flight.work, flight.work.epoch, flight.iteration + 1
        self.iterations[loop.name] = count
        self.state.report.iterations.append((loop.name, epoch, count, flight.computed))
        logger.info("loop=%s epoch=%d iterations=%d", loop.name, epoch, count)
        self._finish(self.members[loop.name], work)
        for key, parts in flight.leaving.items():
            work.outputs[key] = self._all(key, parts, epoch)

    def _iteration(
        self, loop: Loop, work: EpochWork, members: list[Processor], at: Tick, sent: dict[tuple[str, str], Rows]
    ) -> tuple[dict[tuple[str, str], Rows], bool]:
        """Step 1 and 2 for iteration ``at``: the rows of every output of the loop's
        processors at this time, and whether any processor ran (rather than held it)."""
        epoch, iteration = at.epoch, int(at.step or 0)
        sub = EpochWork(epoch, work.offsets, time.perf_counter())
        sub.outputs.update(work.outputs)  # what came before the loop, for a diagnosis of an error it raises here
        current: dict[tuple[str, str], Rows] = {}
        ran: dict[str, Tick] = {}
        for p in members:
            own = Tick(epoch, iteration - 1) if isinstance(p.spec, FeedbackSpec) and iteration > 0 else at
            if isinstance(p.spec, FeedbackSpec) and iteration == 0:
                for port in p.ports:  # nothing was sent back before the first iteration
                    current[(p.name, port)] = empty(self.state.spark, self.state.schemas[(p.name, port)])
                continue
            if self._holds(p, own):
                for port in p.ports:
                    current[(p.name, port)] = self._logged(p, port, own)
                continue
            inputs = [self._input(p, k, at, current, sent, work) for k in range(len(p.inputs))]
            eager = behaviour_of(p.policy).checkpoints_each_part
            self.runner.run(p, sub, inputs, tick=own, checkpoint=eager and p.spec.keyed)
            for port in p.ports:
                current[(p.name, port)] = sub.outputs[(p.name, port)]
            ran[p.name] = own
        for fb in self._feedbacks(members):  # kept: tested for emptiness, then read again
            key = (fb.inputs[0].src, fb.inputs[0].port)
            rows = current.get(key)
            if rows is None:
                continue
            if (iteration + 1) % CUT_EVERY == 0:  # the lineage so far is cut, every few iterations
                current[key] = self.runner.cut(work, rows, max(m.policy.replicas for m in members))
            else:
                current[key] = self.runner.keep(work, rows)
        work.absorb(sub)
        if sub.batch.logs or sub.batch.state:  # something persisted at this time: commit it
            if loop.interleave:  # check_interleaved refuses the policies that do
                raise EpochInvariantError(f"interleaved loop {loop.name!r} persisted something at {at}")
            self.commit(sub, ran)
        return current, bool(ran)

    def _input(
        self,
        p: Processor,
        k: int,
        at: Tick,
        current: dict[tuple[str, str], Rows],
        sent: dict[tuple[str, str], Rows],
        work: EpochWork,
    ) -> DataFrame:
        """Input ``k`` of loop processor ``p`` at ``at``."""
        i = p.inputs[k]
        key = (i.src, i.port)
        if isinstance(p.spec, EnterSpec):
            rows: Rows = work.outputs[key] if at.step == 0 else empty(self.state.spark, self.state.schemas[key])
        elif isinstance(p.spec, FeedbackSpec):
            rows = sent.get(key)
        else:
            rows = current.get(key)
        if rows is None:
            raise EpochInvariantError(
                f"processor {p.name!r} needs the rows of {i.key} at {at}, which were neither "
                "computed nor logged; the rollback plan should have prevented this"
            )
        return rows

    def _continues(self, loop: Loop, members: list[Processor], epoch: int, iteration: int, sent: dict[tuple[str, str], Rows]) -> bool:
        """Whether epoch ``epoch`` has an iteration after ``iteration``: some rows
        were sent back, or (after a rollback) a processor resumed inside the epoch
        holds that iteration. (One that holds the whole epoch says nothing of how
        many iterations it took.)"""
        inside = [p for p in members if p.name in self.state.resumed]
        if any(self._holds(p, Tick(epoch, iteration + 1)) for p in inside):
            return True
        for fb in self._feedbacks(inside):
            if self._holds(fb, Tick(epoch, iteration)):
                return True  # it passed those rows on before: the next iteration ran
        for key, rows in sent.items():
            if rows is None:
                raise EpochInvariantError(
                    f"loop {loop.name!r} cannot tell whether epoch {epoch} goes on after iteration "
                    f"{iteration}: the rows {key[0]}.{key[1]} sent back were neither computed nor logged"
                )
            if not rows.isEmpty():
                return True
        return False

    def _limit(self, loop: Loop, epoch: int) -> None:
        """Epoch ``epoch`` reached the loop's ``max_iterations`` with rows still sent
        back: warn and stop there, or fail (``on_limit``)."""
        what = (
            f"loop {loop.name!r} reached max_iterations={loop.max_iterations} in epoch {epoch} with rows "
            "still sent back"
        )
        if loop.on_limit == "fail":
            raise GraphError(f"{what}: its result would be wrong. Raise max_iterations (Pipeline.iterate) and run again")
        logger.warning("%s: the epoch's iterations stop here and those rows are dropped (on_limit='stop')", what)

    def _finish(self, members: list[Processor], work: EpochWork) -> None:
        """Step 3: every processor of the loop at (e, ∞); lazy checkpoints now. An
        eager processor's state at (e, ∞) is its last iteration's: recorded as an
        empty delta, nothing written."""
        epoch = work.epoch
        for p in members:
            self.state.resumed.pop(p.name, None)
            if epoch <= self.state.restored[p.name]:
                continue  # it held the whole epoch: its record exists
            if p.spec.keyed:
                end = whole_tick(p, epoch)
                if behaviour_of(p.policy).checkpoints_each_part:
                    work.batch.state.append((p.name, end, str(Delta()), []))
                elif p.policy.checkpoints_at(epoch, self.runner.checkpoints[p.name]):
                    self.runner.checkpoint(p, end, work)
            work.ran.append(p.name)

    def _all(self, key: tuple[str, str], parts: list[Rows], epoch: int) -> DataFrame:
        """The rows an output of the loop sent in every iteration of ``epoch``."""
        if any(part is None for part in parts):
            missing = [i for i, part in enumerate(parts) if part is None]
            raise EpochInvariantError(
                f"the rows {key[0]}.{key[1]} of epoch {epoch}, iterations {missing}, were neither "
                "computed nor logged; the rollback plan should have prevented this"
            )
        out = empty(self.state.spark, self.state.schemas[key])
        for part in parts:
            out = out.unionByName(part)  # type: ignore[arg-type]
        return out

    # -- where a processor stands -------------------------------------------------------

    def _holds(self, p: Processor, t: Tick) -> bool:
        return self.state.holds(p, t)

    def _logged(self, p: Processor, port: str, t: Tick) -> Rows:
        """``p``'s logged rows of ``port`` at ``t``, or None without a log."""
        files = self.state.store.logs(f"{p.name}.{port}").get(t)
        return None if files is None else self.state.read(files, self.state.schemas[(p.name, port)])

    @staticmethod
    def _feedbacks(members: list[Processor]) -> list[Processor]:
        return [p for p in members if isinstance(p.spec, FeedbackSpec)]


def _attempt(run: Callable[..., None], *args: object) -> BaseException | None:
    """``run(*args)``; what it raised, or None."""
    try:
        run(*args)
    except Exception as exc:  # handed to the epoch's flight; raised at its commit
        return exc
    return None
