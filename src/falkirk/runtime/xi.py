"""Ξ(p, f): the checkpoint metadata each processor records, built from what it persisted.

The solver (:mod:`falkirk.recovery`) reasons only about these records. In the epoch
engine every frontier is ↓e for an epoch e, and a processor p can roll back to ↓e
once the commit of epoch e holds what it needs to resume from there:

* nothing, for a processor without keyed state (it re-executes from its inputs);
* a keyed-state checkpoint of epoch e, for a keyed processor (unless it replays its
  full input history);
* and for a processor that logs its outputs, the log: it discarded only the epochs
  whose logs were collected (D̄), and can re-send the logged ones (L).

A processor that has not failed offers ⊤, its live state (:func:`live`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from falkirk.graph import FullHistory, Processor
from falkirk.recovery import CheckpointMeta, Topology
from falkirk.runtime.epochs import EPOCHS, down
from falkirk.time import Frontier

#: The epochs whose logs are kept for an output (``"processor.port"``).
KeptLogs = Callable[[str], Collection[int]]


def at_epoch(
    topology: Topology, p: Processor, epoch: int, *, checkpointed: bool, kept_logs: KeptLogs
) -> CheckpointMeta | None:
    """Ξ(p, ↓epoch) if p can roll back to ``epoch`` once the epoch's commit is
    durable; ``checkpointed``: the commit holds a keyed-state checkpoint of p."""
    if p.stateful and not isinstance(p.policy, FullHistory) and not checkpointed:
        return None  # keyed state without a checkpoint here: not a rollback point
    discarded, logged = log_metadata(topology, p, epoch, kept_logs)
    return CheckpointMeta.build(topology, p.name, down(epoch), discarded=discarded or None, logged=logged or None)


def live(topology: Topology, p: Processor, epoch: int, kept_logs: KeptLogs) -> CheckpointMeta:
    """Ξ(p, ⊤) of a processor that did not fail after ``epoch``: it delivered and was
    notified of everything up to ``epoch``; what it discarded depends on its log."""
    done = down(epoch)
    discarded, logged = log_metadata(topology, p, epoch, kept_logs)
    return CheckpointMeta.build(
        topology,
        p.name,
        Frontier.top(EPOCHS),
        notifications=done,
        delivered={e.name: done for e in topology.inputs(p.name)},
        discarded=discarded or None,
        logged=logged or None,
    )


def log_metadata(
    topology: Topology, p: Processor, epoch: int, kept_logs: KeptLogs
) -> tuple[dict[str, Frontier], dict[str, list[int]]]:
    """D̄ and L for each output edge of a logging processor (empty otherwise):
    everything up to ``epoch`` is logged except epochs whose logs were collected."""
    discarded: dict[str, Frontier] = {}
    logged: dict[str, list[int]] = {}
    if p.policy.logs_outputs:
        for e in topology.outputs(p.name):
            kept = sorted(kept_logs(e.name.split(">")[0]))
            first = kept[0] if kept else epoch + 1
            discarded[e.name] = down(first - 1)
            logged[e.name] = [t for t in kept if t <= epoch]
    return discarded, logged
