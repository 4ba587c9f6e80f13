"""Rolling a running pipeline back: after a restart and after in-process failures.

Kept apart from the epoch loop (:mod:`falkirk.runtime.engine`): everything here runs
while no epoch is in flight. The solver chooses the frontiers; this module undoes the
committed work above them, restores or replays keyed state, and records what it chose
and why (INFO log and :class:`~falkirk.runtime.report.RunReport`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from falkirk.graph import FullHistory, GraphError, Processor
from falkirk.recovery import CheckpointMeta, solve
from falkirk.runtime.epochs import epoch_of
from falkirk.runtime.faults import crash_point
from falkirk.storage import Forget
from falkirk.time import Frontier

if TYPE_CHECKING:
    from falkirk.runtime.engine import Engine

logger = logging.getLogger(__name__)


def settle(engine: Engine) -> None:
    """Nothing is in flight: epochs at or below ``restored`` are skipped by each
    processor, and state versions replaced by the rollback can be freed."""
    engine.restored = dict(engine.frontier)
    for state in engine.states.values():
        state.release(max(engine.frontier.values(), default=0) + 1)


def recover(engine: Engine, available: dict[str, list[CheckpointMeta]]) -> None:
    plan = solve(engine.topology, available)
    engine.report.recovered = {}
    undone = Forget()
    for p in engine.order:
        f = plan.frontiers[p.name]
        e = epoch_of(f)
        engine.frontier[p.name] = e
        engine.report.recovered[p.name] = e
        engine.report.recovery_reasons[p.name] = str(plan.explanations[p.name])
        logger.info("recovery processor=%s epoch=%d why=%s", p.name, e, plan.explanations[p.name])
        _undo_after(engine, p, e, plan.invalidated[p.name], undone)
    for edge, times in plan.resend.items():
        if times:
            engine.report.resent[edge] = [int(t) for t in times]  # type: ignore[arg-type]
            logger.info("recovery resend edge=%s epochs=%s", edge, list(times))
    engine._delete(engine.ledger.forget(undone))
    for name in engine.states:
        restore(engine, engine.pipeline.processors[name], engine.frontier[name])
    crash_point("recovery.restored")


def recover_partial(engine: Engine, epoch: int) -> None:
    """Roll back after in-process failures: survivors offer ⊤ (their live state)."""
    failed = frozenset(engine._failed)
    engine._failed = set()
    current = {
        q: engine.ledger.live(engine.pipeline.processors[q], epoch)
        for q in engine.pipeline.processors
        if q not in failed
    }
    plan = engine.ledger.monitor.recover(failed, current)
    chosen: dict[str, int | None] = {}
    undone = Forget()
    for p in engine.order:
        f = plan.frontiers[p.name]
        e = epoch if f.is_top else epoch_of(f)
        chosen[p.name] = None if f.is_top else e
        logger.info(
            "partial recovery failed=%s processor=%s frontier=%r why=%s",
            sorted(failed),
            p.name,
            f,
            plan.explanations[p.name],
        )
        if e < epoch:
            _undo_after(engine, p, e, plan.invalidated[p.name], undone)
        if p.name in engine.states and (p.name in failed or e < epoch):
            restore(engine, p, e)
        engine.frontier[p.name] = e
    engine._delete(engine.ledger.forget(undone))
    engine.report.partial.append((failed, epoch, chosen))
    settle(engine)


def _undo_after(
    engine: Engine, p: Processor, epoch: int, invalidated: tuple[Frontier, ...], undone: Forget
) -> None:
    """Collect p's committed work above ``epoch`` (a rollback undoes it)."""
    undone.checkpoints += [(p.name, g) for g in invalidated]
    undone.state += [(p.name, t) for t, _, _ in engine.store.state_files(p.name) if t > epoch]
    for port in (*p.ports, "in"):
        key = f"{p.name}.{port}"
        undone.logs += [(key, t) for t in engine.store.logs(key) if t > epoch]
    if p.kind == "sink":
        undone.sinks += [(p.name, t) for t in engine.store.sink_commits(p.name) if t > epoch]


def restore(engine: Engine, p: Processor, epoch: int) -> None:
    state = engine.states[p.name]
    if isinstance(p.policy, FullHistory):
        _replay_history(engine, p, epoch)
    elif epoch > 0:
        chain = engine.store.state_files(p.name)
        for _, _, files in chain:  # damaged or partial files are found before any use
            engine.verified(files)
        state.restore(chain, epoch)
    else:
        state.reset()


def _replay_history(engine: Engine, p: Processor, upto: int) -> None:
    """Rebuild a FullHistory processor's state by re-running its logged inputs."""
    engine.states[p.name].reset()
    logged = engine.store.logs(f"{p.name}.in")
    schema = engine.out_schemas[(p.inputs[0].src, p.inputs[0].port)]
    from falkirk.runtime.engine import _EpochWork  # (engine imports this module)

    for epoch in range(1, upto + 1):
        if epoch not in logged:
            raise GraphError(f"internal: the input log of {p.name!r} lacks epoch {epoch}")
        files = engine.verified(logged[epoch])
        engine._step(p, epoch, [engine._read(files, schema)], _EpochWork(epoch, {}, 0.0))
    logger.info("recovery processor=%s replayed its input history up to epoch %d", p.name, upto)
