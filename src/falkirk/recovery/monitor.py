"""The monitor: low-watermarks from persisted metadata, and what they let go of.

Sections 4.2-4.4 of the Falkirk Wheel paper. Each time storage acknowledges that a
checkpoint Ξ(p, f) (with its state and logs) is durable, the record is fed to
:meth:`Monitor.add`. The monitor keeps F*(p) for every processor and the
*low-watermark* of each: the frontier p would roll back to if every processor failed
now (the solver's answer with only persisted checkpoints available). Storage being
reliable, no failure can ever take p below its low-watermark, so:

* checkpoints of p strictly below its low-watermark may be deleted
  (:attr:`DecisionKind.COLLECT_CHECKPOINTS`);
* messages logged on an edge into p with times inside p's low-watermark will never be
  re-sent (:attr:`DecisionKind.COLLECT_LOG`);
* a source processor may acknowledge to its external service every input ingested at
  times inside its low-watermark (:attr:`DecisionKind.ACK_SOURCE`);
* a sink processor's output at times inside its low-watermark will never be produced
  again differently: it may be released downstream (:attr:`DecisionKind.RELEASE_SINK`).

Low-watermarks never decrease (adding an available frontier never lowers the
greatest consistent rollback), so every decision is final. On a failure,
:meth:`Monitor.recover` adds ⊤ for the processors that did not fail (section 4.4),
solves, and forgets the checkpoints the rollback invalidates.

Recomputation: each :meth:`add` runs the worklist fixed point from the new greatest
checkpoints. Processors already at their greatest checkpoint are examined once and
do not move; the work is proportional to the graph plus the checkpoints above the
low-watermarks, which garbage collection keeps short.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from falkirk.recovery.checkpoint import CheckpointMeta
from falkirk.recovery.exceptions import CheckpointError, RecoveryError
from falkirk.recovery.plan import RollbackPlan
from falkirk.recovery.solver import solve
from falkirk.recovery.topology import Topology
from falkirk.time import Frontier

logger = logging.getLogger(__name__)


class DecisionKind(enum.Enum):
    """What a low-watermark advance allows (see the module docstring)."""

    COLLECT_CHECKPOINTS = "collect_checkpoints"
    COLLECT_LOG = "collect_log"
    ACK_SOURCE = "ack_source"
    RELEASE_SINK = "release_sink"


@dataclass(frozen=True, slots=True)
class Decision:
    """One consequence of a low-watermark advance.

    * ``COLLECT_CHECKPOINTS``: delete Ξ, S and L of ``processor`` at ``frontiers``
      (all strictly below ``upto``, p's new low-watermark);
    * ``COLLECT_LOG``: delete messages logged on ``edge`` with times in ``upto``;
    * ``ACK_SOURCE``: acknowledge input of ``processor`` ingested at times in ``upto``;
    * ``RELEASE_SINK``: output of ``processor`` at times in ``upto`` is final.
    """

    kind: DecisionKind
    processor: str
    upto: Frontier
    edge: str | None = None
    frontiers: tuple[Frontier, ...] = ()


class Monitor:
    """Tracks F*(p) and the low-watermarks of a dataflow (see the module docstring).

    ``sources`` and ``sinks`` name the processors that read external input and write
    external output; they receive acknowledgement and release decisions.
    """

    def __init__(
        self,
        topology: Topology,
        *,
        sources: Iterable[str] = (),
        sinks: Iterable[str] = (),
    ) -> None:
        self.topology = topology
        self.sources = frozenset(sources)
        self.sinks = frozenset(sinks)
        for p in self.sources | self.sinks:
            topology.require(p)
        self._available: dict[str, list[CheckpointMeta]] = {p: [] for p in topology.processors}
        self._plan = solve(topology, self._available)

    # -- queries ----------------------------------------------------------------------

    def low_watermark(self, processor: str) -> Frontier:
        """The frontier ``processor`` would roll back to if everything failed now."""
        self.topology.require(processor)
        return self._plan.frontiers[processor]

    @property
    def low_watermarks(self) -> Mapping[str, Frontier]:
        return dict(self._plan.frontiers)

    @property
    def plan(self) -> RollbackPlan:
        """The rollback if every processor failed now (with its explanations)."""
        return self._plan

    def available(self, processor: str) -> tuple[CheckpointMeta, ...]:
        """F*(p) as the monitor knows it (∅ implied), in increasing order."""
        self.topology.require(processor)
        return tuple(self._available[processor])

    # -- updates ----------------------------------------------------------------------

    def add(self, meta: CheckpointMeta) -> list[Decision]:
        """Record that Ξ(p, f) (and the state and logs it names) is durable.

        F*(p) must stay a chain: f must be comparable with every checkpoint p already
        has, and new. Returns the decisions the new low-watermarks allow.
        """
        return self.add_many([meta])

    def add_many(self, metas: Iterable[CheckpointMeta]) -> list[Decision]:
        """:meth:`add` for several records at once, solving only once.

        All or nothing: if a record is refused, or the low-watermarks would fall (the
        metadata is not monotone), :class:`CheckpointError` is raised and the monitor
        is left exactly as it was."""
        available = {p: list(ms) for p, ms in self._available.items()}
        for meta in metas:
            _insert(available, meta, self.topology)
        plan = solve(self.topology, available)
        decisions = self._decisions(plan, available)
        self._available, self._plan = available, plan
        return decisions

    def recover(
        self,
        failed: Collection[str],
        current: Mapping[str, CheckpointMeta] | None = None,
    ) -> RollbackPlan:
        """The rollback after ``failed`` processors lost their state (section 4.4).

        Every other processor gets ⊤ added to F*(p), with metadata ``current[p]`` if
        given (for example a processor that logs its outputs) or the safe defaults of
        :meth:`CheckpointMeta.current`. Checkpoints above the chosen frontiers are
        forgotten (F*'(p) = {f' ∈ F*(p) : f' ⊆ f(p)}) and listed in the plan's
        ``invalidated`` for deletion.
        """
        failed = set(failed)
        for p in failed:
            self.topology.require(p)
        current = dict(current or {})
        for p, meta in current.items():
            if p in failed:
                raise CheckpointError(f"processor {p!r} failed: it has no current state to give")
            if not meta.frontier.is_top or meta.processor != p:
                raise CheckpointError(
                    f"current state of {p!r} must be Ξ({p}, ⊤), got {meta!r}"
                )
        options = {
            p: [*metas, current.get(p) or CheckpointMeta.current(self.topology, p)]
            if p not in failed
            else list(metas)
            for p, metas in self._available.items()
        }
        plan = solve(self.topology, options)
        fallen = {
            p: (lw, plan.frontiers[p])
            for p, lw in self._plan.frontiers.items()
            if not lw <= plan.frontiers[p]
        }
        if fallen:
            raise RecoveryError(
                "recovery would roll back below low-watermarks whose data may already be "
                f"collected: {fallen} (low-watermark, rollback). The live metadata given for "
                "the survivors is inconsistent with what they persisted; refusing to recover "
                "rather than lose data"
            )
        for p, f in plan.frontiers.items():
            self._available[p] = [m for m in self._available[p] if m.frontier <= f]
            logger.info(
                "recovery processor=%s failed=%s frontier=%r why=%s",
                p,
                p in failed,
                f,
                plan.explanations[p],
            )
        for e, times in plan.resend.items():
            if times:
                logger.info("recovery resend edge=%s count=%d", e, len(times))
        self._plan = solve(self.topology, self._available)
        return plan

    # -- internals --------------------------------------------------------------------

    def _decisions(
        self, plan: RollbackPlan, available: dict[str, list[CheckpointMeta]]
    ) -> list[Decision]:
        """What ``plan``'s low-watermarks allow; collects stale checkpoints from
        ``available`` (a working copy). Raises before touching anything if a
        low-watermark would fall."""
        old = self._plan.frontiers
        fallen = [p for p, lw in plan.frontiers.items() if not old[p] <= lw]
        if fallen:
            raise CheckpointError(
                "low-watermarks would go down ("
                + ", ".join(f"{p}: {old[p]!r} -> {plan.frontiers[p]!r}" for p in fallen)
                + "): the checkpoint metadata is not monotone (a projection or discarded "
                "frontier shrinks as the frontier grows); refused, nothing was changed"
            )
        decisions: list[Decision] = []
        for p, lw in plan.frontiers.items():
            if lw == old[p]:
                continue
            stale = tuple(m.frontier for m in available[p] if m.frontier < lw)
            if stale:
                available[p] = [m for m in available[p] if not m.frontier < lw]
                decisions.append(Decision(DecisionKind.COLLECT_CHECKPOINTS, p, lw, frontiers=stale))
            for d in self.topology.inputs(p):
                decisions.append(Decision(DecisionKind.COLLECT_LOG, p, lw, edge=d.name))
            if p in self.sources:
                decisions.append(Decision(DecisionKind.ACK_SOURCE, p, lw))
            if p in self.sinks:
                decisions.append(Decision(DecisionKind.RELEASE_SINK, p, lw))
            logger.debug("low-watermark processor=%s frontier=%r", p, lw)
        return decisions


def _insert(available: dict[str, list[CheckpointMeta]], meta: CheckpointMeta, topology: Topology) -> None:
    """Insert ``meta`` into its processor's chain, keeping it a chain."""
    p = meta.processor
    topology.require(p)
    if meta.frontier.is_top or meta.frontier.is_empty:
        raise CheckpointError(f"{meta!r}: a persisted checkpoint needs a frontier other than ⊤ and ∅")
    chain = available[p]
    position = 0
    for k, other in enumerate(chain):
        if other.frontier == meta.frontier:
            raise CheckpointError(f"{meta!r} was already added to the monitor")
        if other.frontier <= meta.frontier:
            position = k + 1
        elif not meta.frontier <= other.frontier:
            raise CheckpointError(
                f"{meta!r} is incomparable with {other!r}: F*({p}) must be a chain; "
                "checkpoint frontiers of a processor must grow"
            )
    if position < len(chain):
        logger.debug("checkpoint %r arrived out of order; inserted below newer ones", meta)
    chain.insert(position, meta)
