"""Running a pipeline's sequence-number regions: an epoch's records, chunk by chunk.

A region (:mod:`falkirk.graph.sequences`) runs on the engine's main thread, like a
loop, once the worker has computed and committed everything upstream of it - its
``number`` translator included, whose log holds the epoch's numbered records. For
region R and epoch e with records 1..K (numbers ``(e - 1) * SEQ_BLOCK + k``):

1. the chunks are ``(lo, hi]`` of ``chunk`` records each, from where the region's
   processors stand (after a crash, the first chunks are the ones committed before
   it, so a processor that holds them re-sends exactly its logged chunks);
2. for each chunk, every processor of R runs at tick ``(e, hi)`` in graph order on
   the chunk's rows - a processor that holds the chunk skips it and its rows come
   from its log - then what the policies persist (eager checkpoints' state deltas,
   logged outputs) is written (crash point ``chunk.written``) and committed with Ξ at
   ↓(seq, number of hi) of every processor that ran (``chunk.committed``): a
   record is applied, and its effects persisted, once;
3. after the last chunk every processor of R stands at ``(e, INF)``, and the
   ``regroup`` translator passes on the rows of all of epoch e's chunks as rows of
   epoch e.

Then the processors after the region run as in any epoch, and the engine commits the
epoch's rest.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from falkirk.execution.behaviours import behaviour_of
from falkirk.execution.epoch import EpochRunner
from falkirk.execution.exceptions import EpochInvariantError
from falkirk.execution.run_state import RunState
from falkirk.execution.work import EpochWork
from falkirk.graph import Processor, Sequenced
from falkirk.graph.specs import NumberSpec, RegroupSpec
from falkirk.operators.sequence import SEQ_COLUMN
from falkirk.recovery.chain import Delta
from falkirk.spark.frames import empty
from falkirk.time.ticks import SEQ_BLOCK, Tick

logger = logging.getLogger(__name__)

#: Commits one chunk's work: ``(work, ticks)`` with the tick of every processor that
#: ran in it.
ChunkCommit = Callable[[EpochWork, dict[str, Tick]], None]


class SequenceStage:
    """The main thread's part of each epoch for the regions of a pipeline (see the
    module docstring); ``commit`` commits a chunk."""

    def __init__(self, state: RunState, runner: EpochRunner, commit: ChunkCommit) -> None:
        self.state = state
        self.runner = runner
        self.commit = commit
        order = state.order
        self.number = {p.spec.sequence: p for p in order if isinstance(p.spec, NumberSpec)}
        self.members = {name: [p for p in order if p.sequence == name and not isinstance(p.spec, RegroupSpec)] for name in state.pipeline.sequences}
        self.regroups = {name: [p for p in order if p.sequence == name and isinstance(p.spec, RegroupSpec)] for name in state.pipeline.sequences}
        #: Chunks each region ran in the last epoch (for reports and tests).
        self.chunks: dict[str, int] = {}

    def run(self, region: Sequenced, work: EpochWork) -> None:
        """Region ``region``'s part of ``work``'s epoch, into ``work`` (whose batch the
        engine commits after)."""
        epoch, members = work.epoch, self.members[region.name]
        number = self.number[region.name]
        numbered = work.outputs.get((number.name, "out"))
        if numbered is None:
            raise EpochInvariantError(
                f"region {region.name!r} needs epoch {epoch}'s numbered records, which were neither "
                "computed nor logged; the rollback plan should have prevented this"
            )
        numbered = self.runner.keep(work, numbered)
        base = (epoch - 1) * SEQ_BLOCK
        count = self._count(number, numbered, epoch)
        exits = {(i.src, i.port) for q in self.regroups[region.name] for i in q.inputs}
        leaving: dict[tuple[str, str], list[DataFrame]] = {key: [] for key in exits}
        bounds = self._bounds(region, members, epoch, count)
        for lo, hi in bounds:
            rows = numbered.where((F.col(SEQ_COLUMN) > base + lo) & (F.col(SEQ_COLUMN) <= base + hi))
            current = self._chunk(members, work, Tick(epoch, hi), {(number.name, "out"): rows})
            for key in exits:
                leaving[key].append(self._required(current, key, epoch, hi))
        self.chunks[region.name] = len(bounds)
        self.state.report.chunks.append((region.name, epoch, len(bounds), count))
        logger.info("region=%s epoch=%d records=%d chunks=%d", region.name, epoch, count, len(bounds))
        self._finish(members, work)
        for q in self.regroups[region.name]:
            if self.state.holds(q, Tick.all_of(epoch)):
                continue  # it passed the epoch on before (its receivers hold it too)
            out = empty(self.state.spark, self.state.schemas[(q.inputs[0].src, q.inputs[0].port)])
            for part in leaving[(q.inputs[0].src, q.inputs[0].port)]:
                out = out.unionByName(part)
            self.state.resumed.pop(q.name, None)
            self.runner.run(q, work, [out], tick=Tick.all_of(epoch))

    def _count(self, number: Processor, numbered: DataFrame, epoch: int) -> int:
        """The records ``number`` numbered in ``epoch``: known if it numbered them in
        this run, else (re-sent from its log) counted."""
        known: dict[int, int] = getattr(self.state.operators[number.name], "counts", {})
        if epoch in known:
            return known.pop(epoch)
        top = numbered.agg(F.max(SEQ_COLUMN)).first()[0]  # type: ignore[index]
        return 0 if top is None else int(top) - (epoch - 1) * SEQ_BLOCK

    # -- chunks -----------------------------------------------------------------------

    def _bounds(self, region: Sequenced, members: list[Processor], epoch: int, count: int) -> list[tuple[int, int]]:
        """The epoch's chunks ``(lo, hi]``: from the first record some processor of
        the region has not processed, first along the chunks committed before (where
        the processors that hold them have their logs), then ``chunk`` records at a time."""
        at = [self._position(p, epoch, count) for p in members + self.regroups[region.name]]
        start, held = min(at), max(at)
        committed = sorted({k for p in members for k in self._committed(p, epoch) if start < k <= held} | {held})
        bounds, lo = [], start
        for k in committed:
            if k > lo:
                bounds.append((lo, k))
                lo = k
        while lo < count:
            hi = min(lo + region.chunk, count)
            bounds.append((lo, hi))
            lo = hi
        return bounds

    def _position(self, p: Processor, epoch: int, count: int) -> int:
        """The records of ``epoch`` processor ``p`` holds already."""
        if self.state.holds(p, Tick.all_of(epoch)):
            return count
        at = self.state.resumed.get(p.name)
        return int(at.step or 0) if at is not None and at.epoch == epoch else 0

    def _committed(self, p: Processor, epoch: int) -> set[int]:
        """The records of ``epoch`` after which ``p`` committed a chunk (its logs and
        checkpoints: the chunks a rollback may re-send)."""
        ticks = {t for port in p.ports for t in self.state.store.log_epochs(f"{p.name}.{port}")}
        ticks |= {t for t, _, _ in self.state.store.state_files(p.name)}
        return {int(t.step or 0) for t in ticks if t.epoch == epoch and not t.is_whole}

    def _chunk(
        self, members: list[Processor], work: EpochWork, at: Tick, numbered: dict[tuple[str, str], DataFrame]
    ) -> dict[tuple[str, str], DataFrame | None]:
        """Step 2 for the chunk ending at ``at``, whose ``numbered`` records the region's
        ``number`` sends: every output in the region for the chunk (None: held, and
        not logged)."""
        epoch = at.epoch
        sub = EpochWork(epoch, work.offsets, time.perf_counter())
        current: dict[tuple[str, str], DataFrame | None] = dict(numbered)
        ran: dict[str, Tick] = {}
        for p in members:
            if self.state.holds(p, at):
                for port in p.ports:
                    files = self.state.store.logs(f"{p.name}.{port}").get(at)
                    current[(p.name, port)] = None if files is None else self.state.read(files, self.state.schemas[(p.name, port)])
                continue
            inputs = [self._required(current, (i.src, i.port), at.epoch, int(at.step or 0)) for i in p.inputs]
            self.runner.run(p, sub, inputs, tick=at, checkpoint=p.spec.keyed)
            for port in p.ports:
                current[(p.name, port)] = sub.outputs[(p.name, port)]
            ran[p.name] = at
        work.absorb(sub)
        if ran:
            self.commit(sub, ran)
        return current

    def _finish(self, members: list[Processor], work: EpochWork) -> None:
        """Step 3: every processor of the region at ``(e, INF)``. An eager processor's
        state there is its last chunk's: recorded as an empty delta, nothing written."""
        epoch = work.epoch
        for p in members:
            self.state.resumed.pop(p.name, None)
            if epoch <= self.state.restored[p.name]:
                continue  # it held the whole epoch: its record exists
            if p.spec.keyed and behaviour_of(p.policy).checkpoints_each_part:
                work.batch.state.append((p.name, Tick.all_of(epoch), str(Delta()), []))
            work.ran.append(p.name)

    @staticmethod
    def _required(current: dict[tuple[str, str], DataFrame | None], key: tuple[str, str], epoch: int, hi: int) -> DataFrame:
        rows = current.get(key)
        if rows is None:
            raise EpochInvariantError(
                f"the rows {key[0]}.{key[1]} of epoch {epoch} up to record {hi} were neither computed "
                "nor logged; the rollback plan should have prevented this"
            )
        return rows
