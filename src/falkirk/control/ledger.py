"""The ledger: what a running pipeline has committed, and what it may forget.

The control plane of the epoch loop, without Spark (so it is tested over thousands
of epochs in seconds): it plans each epoch's input from the sources' positions,
commits a computed epoch with the Ξ records of every processor that can now roll
back to it, feeds those records to the monitor, and turns the monitor's decisions
into records to forget.

Everything it keeps is bounded by what a recovery can still need, not by how long
the pipeline has run: offsets, logs, checkpoints and sink commits below the
low-watermarks are forgotten, each source plans from its latest position only, and
what one commit lets go is forgotten in the same transaction as the next commit (one
metadata write, and one publish on a remote root, per commit instead of two).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

from falkirk.control import xi
from falkirk.control.domains import domain_of, epoch_of, input_log_key, projection_of, tick
from falkirk.control.exceptions import ControlInvariantError
from falkirk.control.faults import CrashPoint, crash_point
from falkirk.graph import Pipeline, Processor, Source
from falkirk.graph.edge_id import EdgeId
from falkirk.graph.specs import SourceSpec
from falkirk.recovery import CheckpointMeta, Decision, DecisionKind, Monitor, Topology
from falkirk.recovery.chain import Base, Cec, ChainKind
from falkirk.storage import CommitBatch, Forget, MetaStore, StoredFile
from falkirk.time.ticks import SEQ, Tick

logger = logging.getLogger(__name__)

#: A source's offsets for one epoch: its JSON object, or None (nothing new).
Offsets = dict[str, Any] | None


class Ingress(Protocol):
    """Where a driver pair records each epoch's input once (see
    :class:`falkirk.storage.pairs.PairStore`): ``{"offsets": {source: Offsets},
    "end": bool}``."""

    def assigned(self, epoch: int) -> dict[str, Any] | None: ...

    def assign(self, epoch: int, plan: dict[str, Any]) -> dict[str, Any]: ...


class Ledger:
    """The committed metadata of one run of a pipeline (see the module docstring)."""

    def __init__(self, pipeline: Pipeline, topology: Topology, store: MetaStore, ingress: Ingress | None = None) -> None:
        self.pipeline = pipeline
        #: A driver pair's shared assignment of epochs to input (None: a lone driver).
        self.ingress = ingress
        self.topology = topology
        self.store = store
        self.sources: dict[str, Source] = {
            p.name: p.spec.reader for p in pipeline.processors.values() if isinstance(p.spec, SourceSpec)
        }
        self.sinks = [p.name for p in pipeline.processors.values() if p.spec.sink]
        #: Committed offsets per source and epoch, for epochs a recovery may replay.
        self.offsets: dict[str, dict[int, Offsets]] = {s: store.offsets(s) for s in self.sources}
        #: Each source's latest non-empty offsets: the next epoch is planned from it.
        self.position: dict[str, Offsets] = {s: store.position(s) for s in self.sources}
        #: The last epoch ever planned: epochs up to it are replays, never planned anew.
        #: The epoch that ended the input (``Engine.run(finish=True)``), if one did.
        self.end_of_input = store.end_of_input()
        self.planned_upto = max([*(e for c in self.offsets.values() for e in c), self.end_of_input or 0])
        #: What the last commit's decisions let go: forgotten with the next commit.
        self.pending = Forget()
        #: Per sink, the last epoch the monitor released (no rollback can retract it).
        self.released: dict[str, int] = {}
        #: Per source, the last epoch whose input the monitor let acknowledge.
        self.acknowledgeable: dict[str, int] = {}
        #: In a driver pair, per source, the last epoch actually acknowledged (the
        #: pair may hold acknowledgements back): offsets after it are kept, so that
        #: a restart - or a member catching up from this root - acknowledges them.
        self.acknowledged: dict[str, int] | None = {} if ingress is not None else None
        self.monitor = Monitor(topology, sources=list(self.sources), sinks=self.sinks)

    def start_monitor(self) -> None:
        """Feed the monitor every retained checkpoint (after a recovery settled)."""
        self.monitor = Monitor(self.topology, sources=list(self.sources), sinks=self.sinks)
        retained = self.store.checkpoints(self.topology)
        self.pending.merge(self.forgettable(self.monitor.add_many(s.meta for ss in retained.values() for s in ss)))

    # -- planning -------------------------------------------------------------------

    def plan(self, epoch: int, finish: bool = False) -> dict[str, Offsets] | None:
        """The input of ``epoch`` per source: the committed offsets when the epoch
        was planned before (a replay reads exactly the same input; a source whose
        offsets of the epoch were forgotten is not in the result, as it never reads
        that epoch again), else the next offsets of every source, committed before
        they are returned; None when no source has new input. With ``finish``, the
        first time no source has new input an epoch without input that ends the
        input is planned instead (:attr:`end_of_input`)."""
        if epoch <= self.planned_upto:
            return {s: committed[epoch] for s, committed in self.offsets.items() if epoch in committed}
        shared = self.ingress.assigned(epoch) if self.ingress is not None else None
        if shared is None:
            planned = {s: source.next_offsets(self.position[s]) for s, source in self.sources.items()}
            ends = all(o is None for o in planned.values())
            if ends and (not finish or self.end_of_input is not None):
                return None
            if self.ingress is not None:  # the pair's other driver may have planned it meanwhile
                shared = self.ingress.assign(epoch, {"offsets": planned, "end": ends})
        if shared is not None:
            planned = {s: shared["offsets"].get(s) for s in self.sources}
            ends = bool(shared["end"])
        end = None
        if ends:
            end = self.end_of_input = epoch
        self.store.commit(CommitBatch(offsets=[(s, epoch, o) for s, o in planned.items()], end_of_input=end))
        for s, o in planned.items():
            self.offsets[s][epoch] = o
            if o is not None:
                self.position[s] = o
        self.planned_upto = epoch
        crash_point(CrashPoint.EPOCH_PLANNED)
        return planned

    def check_input(self, epoch: int, read_by: Iterable[str]) -> None:
        """Raise if the input of ``epoch`` of a source in ``read_by`` (those that read
        it: a source that holds the epoch already does not) changed since it was
        planned (called right before the epoch commits)."""
        for s in set(read_by) & set(self.sources):
            source = self.sources[s]
            offsets = self.offsets[s].get(epoch)
            if offsets is not None:
                source.check(offsets)

    # -- commit ---------------------------------------------------------------------

    def kept_logs(self, key: str, batch: CommitBatch | None = None) -> set[Tick]:
        """The ticks of output ``key`` (``processor.port``) whose log is kept."""
        kept = set(self.store.log_epochs(key))
        if batch is not None:
            kept |= {t for k, t, _ in batch.logs if k == key}
        return kept

    def record(self, p: Processor, at: Tick, batch: CommitBatch) -> CheckpointMeta | None:
        """Ξ(p, ↓at) if p can roll back to tick ``at`` once ``batch`` commits."""
        checkpointed = any(s[0] == p.name and s[1] == at for s in batch.state)
        return xi.at_tick(
            self.topology, p, at, checkpointed=checkpointed, kept_logs=lambda key: self.kept_logs(key, batch)
        )

    def live(self, p: Processor, epoch: int) -> CheckpointMeta:
        """Ξ(p, ⊤) of a processor that did not fail after ``epoch``."""
        return xi.live(self.topology, p, epoch, self.kept_logs)

    def commit(
        self,
        epoch: int,
        batch: CommitBatch,
        ran: Iterable[str],
        *,
        barrier: bool = False,
        complete: bool = True,
        ticks: dict[str, Tick] | None = None,
    ) -> list[StoredFile]:
        """Commit computed work of ``epoch``: ``batch`` (its logs, checkpoints and sink
        files) with Ξ of every processor in ``ran`` that can roll back to where it
        stands - all of the epoch, or its tick in ``ticks`` (an iteration of a loop) - and the
        records the previous commit let go. Returns the files those records named:
        delete them now. ``complete``: this commit ends the epoch (several commits
        make up an epoch of a pipeline with loops). With global checkpoints, only a
        ``barrier`` epoch records Ξ, of every processor at once: the global checkpoint."""
        procs = self.pipeline.processors
        at = {n: (ticks or {}).get(n, Tick.whole(epoch, domain_of(procs[n]))) for n in ran}
        records = [m for m in (self.record(procs[n], t, batch) for n, t in at.items()) if m is not None]
        if self.pipeline.checkpoints is not None:
            if not barrier:
                records = []
            elif len(records) != len(self.pipeline.processors):
                missing = sorted(set(self.pipeline.processors) - {m.processor for m in records})
                raise ControlInvariantError(f"the global checkpoint at epoch {epoch} lacks processors {missing}")
            else:
                logger.info("global checkpoint committed epoch=%d processors=%d", epoch, len(records))
        batch.checkpoints = [(m, []) for m in records]
        batch.epoch = epoch if complete else None
        batch.forget, self.pending = self.pending, Forget()
        crash_point(CrashPoint.COMMIT_BEFORE)
        deletable = self.store.commit(batch)
        crash_point(CrashPoint.COMMIT_AFTER)
        self._added(batch)
        self._forgotten(batch.forget)
        self.pending = self.forgettable(self.monitor.add_many(records))
        return deletable

    def forget(self, undone: Forget) -> list[StoredFile]:
        """Forget ``undone`` (a rollback's) and what is pending, in one transaction
        of their own; returns the files to delete."""
        undone.merge(self.pending)
        self.pending = Forget()
        files = self.store.forget(undone)
        self._forgotten(undone)
        return files

    def _added(self, batch: CommitBatch) -> None:
        """``batch``'s keys added to committed offsets, in the offsets kept here."""
        for s, epoch, keys in batch.offsets_added:
            offsets = self.offsets.get(s, {}).get(epoch)
            if offsets is not None:
                offsets.update(keys)

    def flush(self) -> list[StoredFile]:
        """Forget what is pending now (at a clean stop); returns the files to delete."""
        return self.forget(Forget()) if self.pending else []

    def to_acknowledge(self, source: str, after: int) -> tuple[int, list[tuple[int, dict[str, Any]]]]:
        """The acknowledgeable epoch of ``source`` and its epochs in (``after``, that
        epoch] with their offsets (still retained: they are forgotten with the next
        commit, and acknowledged before it)."""
        upto = self.acknowledgeable.get(source, 0)
        kept = self.offsets[source]
        return upto, [(e, o) for e, o in sorted(kept.items()) if after < e <= upto and o is not None]

    def _forgotten(self, forget: Forget) -> None:
        for s, upto in forget.offsets_upto.items():
            self.offsets[s] = {e: o for e, o in self.offsets[s].items() if e > upto}

    # -- garbage --------------------------------------------------------------------

    def forgettable(self, decisions: Iterable[Decision]) -> Forget:
        """The records the monitor's decisions let go: checkpoints and logs below the
        low-watermarks (state files only below the newest base checkpoint at or below
        the low-watermark: a delta is useless without its base), offsets of epochs no
        recovery will replay, and sink commits that are final."""
        marks = self.monitor.low_watermarks
        procs = self.pipeline.processors
        forget = Forget()
        for d in decisions:
            if d.kind is DecisionKind.COLLECT_CHECKPOINTS:
                forget.checkpoints += [(d.processor, f) for f in d.frontiers]
                chain = self.store.state_files(d.processor)
                mark = marks[d.processor]
                starts = [chain_start(t, kind) for t, kind, _ in chain if mark.is_top or t <= tick(mark)]
                needed = max((t for t in starts if t is not None), default=None)
                if needed is not None:
                    forget.state += [(d.processor, t) for t, _, _ in chain if t < needed]
                    if procs[d.processor].policy.logs_inputs:
                        # input after the oldest footprint is replayed by recovery; before it, never
                        ins = [input_log_key(d.processor, k) for k in range(len(procs[d.processor].inputs))]
                        forget.logs += [(key, t) for key in ins for t in self.store.log_epochs(key) if t <= needed]
            elif d.kind is DecisionKind.COLLECT_LOG and d.edge is not None:
                # A log of the sender's tick t goes once every consumer's low-watermark
                # holds the time of t's messages in the consumer's own domain.
                # A region's logs go an epoch at a time (see xi.log_metadata).
                edge = EdgeId.parse(d.edge)
                key, src, port = edge.output, edge.src, edge.port
                readers = [(marks[q.name], projection_of(procs[src], q)) for q in self.pipeline.consumers(src, port)]
                whole_epochs = procs[src].sequence is not None
                forget.logs += [
                    (key, t)
                    for t in self.store.log_epochs(key)
                    if all(
                        mark.contains(projection.latest_message(Tick.whole(t.epoch, SEQ) if whole_epochs else t).time_in(mark.domain))
                        for mark, projection in readers
                    )
                ]
            elif d.kind is DecisionKind.ACK_SOURCE:
                upto = epoch_of(d.upto)
                if self.acknowledged is not None:
                    upto = min(upto, self.acknowledged.get(d.processor, 0))
                forget.offsets_upto[d.processor] = upto
                self.acknowledgeable[d.processor] = max(epoch_of(d.upto), self.acknowledgeable.get(d.processor, 0))
            elif d.kind is DecisionKind.RELEASE_SINK:
                upto = epoch_of(d.upto)
                self.released[d.processor] = max(upto, self.released.get(d.processor, 0))
                forget.sinks += [(d.processor, t) for t in self.store.sink_commits(d.processor) if t <= upto]
        forget.logs = sorted(set(forget.logs))
        return forget


def chain_start(t: Tick, kind: str) -> Tick | None:
    """The oldest chain entry (and, for a CEC log, the last input epoch) that
    restoring entry ``t`` of ``kind`` needs: itself for a base, T for ``cec:T``,
    None for a delta (it needs the base before it). Raises
    :class:`~falkirk.recovery.exceptions.ChainError` for a kind Falkirk does not write."""
    parsed = ChainKind.parse(kind)
    if isinstance(parsed, Base):
        return t
    if isinstance(parsed, Cec):
        return Tick(parsed.start)
    return None

