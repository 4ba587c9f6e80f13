"""Ξ(p, f): the checkpoint metadata each processor records, built from what it persisted.

The solver (:mod:`falkirk.recovery`) reasons only about these records. In the engine
every frontier is ↓t for one tick t (an epoch, or ``(epoch, iteration)`` inside a
loop: :mod:`falkirk.time.ticks`), and a processor p can roll back to ↓t once a commit
holds what it needs to resume from there:

* nothing, for a processor without keyed state (it re-executes from its inputs);
* a keyed-state checkpoint at t, for a keyed processor (unless it replays its full
  input history);
* and for a processor that logs its outputs, the log: it discarded only the ticks
  whose logs were collected (D̄), and can re-send the logged ones (L).

D̄ is in the receiver's domain and is given explicitly: the latest message a
processor at tick t may have sent on an edge (:meth:`falkirk.time.Projection.latest_message`).
The paper's shortcut D̄ = φ(e)(f) would be wrong on a loop's exit edge: after
iterations 0..i of epoch e a processor has sent rows of epoch e, yet φ(↓(e, i)) holds
only the epochs before e.

A processor that has not failed offers ⊤, its live state (:func:`live`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from falkirk.control.domains import domain_of
from falkirk.graph import Processor
from falkirk.graph.edge_id import EdgeId
from falkirk.recovery import CheckpointMeta, Topology
from falkirk.time import Domain, Frontier, SeqDomain, Time
from falkirk.time.ticks import Tick

#: The ticks whose logs are kept for an output (``"processor.port"``).
KeptLogs = Callable[[str], Collection[Tick]]


def at_tick(
    topology: Topology, p: Processor, tick: Tick, *, checkpointed: bool, kept_logs: KeptLogs
) -> CheckpointMeta | None:
    """Ξ(p, ↓tick) if p can roll back to ``tick`` once the commit is durable;
    ``checkpointed``: the commit holds a keyed-state checkpoint of p at ``tick``."""
    if p.stateful and not p.policy.rebuilds_from_inputs and not checkpointed:
        return None  # keyed state without a checkpoint here: not a rollback point
    discarded, logged = log_metadata(topology, p, tick, kept_logs)
    frontier = tick.frontier_in(domain_of(p))
    # In a region every row keeps the number of the record it came from, whatever
    # the edge: p delivered exactly the numbers in its frontier on each input.
    delivered = {e.name: frontier for e in topology.inputs(p.name)} if isinstance(frontier.domain, SeqDomain) else None
    return CheckpointMeta.build(
        topology, p.name, frontier, delivered=delivered, discarded=discarded, logged=logged or None
    )


def live(topology: Topology, p: Processor, epoch: int, kept_logs: KeptLogs) -> CheckpointMeta:
    """Ξ(p, ⊤) of a processor that did not fail after ``epoch``: it delivered and was
    notified of everything up to ``epoch``; what it discarded depends on its log."""
    domain = domain_of(p)
    done = Tick.whole(epoch, domain).frontier_in(domain)
    discarded, logged = log_metadata(topology, p, Tick.whole(epoch, domain), kept_logs) if p.policy.logs_outputs else ({}, {})
    return CheckpointMeta.build(
        topology,
        p.name,
        Frontier.top(domain),
        notifications=done,
        delivered={e.name: done for e in topology.inputs(p.name)},
        discarded=discarded or None,
        logged=logged or None,
    )


def _before(first: Tick, domain: Domain) -> Tick | None:
    """The last tick whose messages a logging processor discarded, if ``first`` is
    its first kept log. In a region a log holds a whole chunk, which began after the
    previous chunk's end; the engine collects a region's logs an epoch at a time
    (:meth:`~falkirk.control.ledger.Ledger.forgettable`), so the first kept chunk
    begins an epoch (or a run) and all before that epoch may be gone."""
    if isinstance(domain, SeqDomain):
        return Tick.all_of(first.epoch - 1) if first.epoch > 1 else None
    return first.previous()


def log_metadata(
    topology: Topology, p: Processor, tick: Tick, kept_logs: KeptLogs
) -> tuple[dict[str, Frontier], dict[str, list[Time]]]:
    """D̄ and L for each output edge of p at ``tick``: a processor that logs its
    outputs discarded only the ticks whose logs were collected and can re-send the
    kept ones; any other discarded all it sent."""
    discarded: dict[str, Frontier] = {}
    logged: dict[str, list[Time]] = {}
    for e in topology.outputs(p.name):
        projection, target = e.projection, topology.domains[e.dst]
        if not p.policy.logs_outputs:
            discarded[e.name] = projection.latest_message(tick).frontier_in(target)
            continue
        kept = sorted(t for t in kept_logs(EdgeId.parse(e.name).output) if t <= tick)
        before = _before(kept[0], topology.domains[p.name]) if kept else tick
        discarded[e.name] = Frontier.empty(target) if before is None else projection.latest_message(before).frontier_in(target)
        logged[e.name] = sorted({projection.latest_message(t).time_in(target) for t in kept}, key=target.sort_key)
    return discarded, logged

