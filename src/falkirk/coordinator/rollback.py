"""Rolling a running pipeline back: after a restart and after in-process failures.

Everything here runs on a :class:`~falkirk.execution.run_state.RunState` while no epoch is
in flight. The solver chooses the frontiers; this module undoes the committed work
above them, restores or replays keyed state, and records what it chose and why (INFO
log and :class:`~falkirk.execution.report.RunReport`).
"""

from __future__ import annotations

import logging
import time

from falkirk.control.domains import tick
from falkirk.control.faults import CrashPoint, crash_point
from falkirk.coordinator.story import recovery_in_words
from falkirk.execution.behaviours import Held, behaviour_of
from falkirk.execution.run_state import RunState
from falkirk.graph import Processor
from falkirk.recovery import CheckpointMeta, solve
from falkirk.spark.materialise import replicated
from falkirk.storage import Forget
from falkirk.time import Frontier
from falkirk.time.ticks import Tick

logger = logging.getLogger(__name__)


def settle(state: RunState) -> None:
    """Nothing is in flight: epochs at or below ``restored`` are skipped by each
    processor, and state versions replaced by the rollback can be freed."""
    state.restored = dict(state.frontier)
    after = max(state.frontier.values(), default=0) + 1
    for p in state.keyed:
        state.operators[p.name].release((Tick.all_of(after) if p.region is not None else Tick(after)).ordinal)


def recover(state: RunState, available: dict[str, list[CheckpointMeta]]) -> None:
    """Recovery after a restart: every processor failed; roll each back to the
    frontier the solver picks from the committed Ξ records. Its time goes to the
    report's ``recovery_seconds``."""
    started = time.perf_counter()
    plan = solve(state.topology, available)
    state.report.recovered = {}
    undone = Forget()
    for p in state.order:
        at = tick(plan.frontiers[p.name])
        _stand(state, p, at)
        state.report.recovered[p.name] = state.frontier[p.name]
        state.report.recovered_at[p.name] = at.as_time
        state.report.recovery_reasons[p.name] = str(plan.explanations[p.name])
        # epoch: the last epoch it holds whole; tick: where exactly (inside a loop: an iteration)
        logger.info("recovery processor=%s epoch=%d tick=%s why=%s", p.name, state.frontier[p.name], at, plan.explanations[p.name])
        _undo_after(state, p, at, plan.invalidated[p.name], undone)
    for edge, times in plan.resend.items():
        if times:
            state.report.resent[edge] = [tuple(t) if isinstance(t, tuple) else int(t) for t in times]
            logger.info("recovery resend edge=%s epochs=%s", edge, list(times))
    committed = state.store.committed_epoch()
    latest = {p.name: max((t.epochs_done for t, _, _ in state.store.state_files(p.name)), default=0) for p in state.keyed}
    rebuilders = {p.name: p.policy.name for p in state.keyed if behaviour_of(p.policy).held is Held.NOTHING}
    state.report.recovery_story = recovery_in_words(
        state.frontier, {p.name for p in state.keyed}, committed, state.report.resent, checkpoints=latest, rebuilders=rebuilders
    )
    # Said by default (WARNING) when epochs are computed again; a restart after a
    # clean stop computes nothing again and says so only at INFO.
    again = committed is not None and any(f < committed for f in state.frontier.values())
    logger.log(logging.WARNING if again else logging.INFO, "recovered: %s", state.report.recovery_story)
    state.delete(state.ledger.forget(undone))
    for p in state.keyed:
        restore(state, p, _standing(state, p))
    restored = sorted((f, p.name) for p in state.keyed if (f := state.frontier[p.name]) > 0)
    state.report.restored_checkpoints = [(name, epoch) for epoch, name in restored]
    state.report.recovery_seconds.append(time.perf_counter() - started)
    crash_point(CrashPoint.RECOVERY_RESTORED)


def recover_partial(state: RunState, failed: frozenset[str], epoch: int) -> None:
    """Roll back after in-process failures of ``failed`` after ``epoch``: survivors
    offer ⊤ (their live state), so only what the constraints require goes back.
    Its time goes to the report's ``recovery_seconds``."""
    started = time.perf_counter()
    # A survivor may stand past ``epoch``: it held the epochs an earlier rollback
    # re-ran and skipped them. Its live state is as of its own frontier; pulling it
    # back to ``epoch`` would re-run (and re-emit) epochs it committed.
    own = {q.name: max(epoch, state.frontier[q.name]) for q in state.order}
    current = {q.name: state.ledger.live(q, own[q.name]) for q in state.order if q.name not in failed}
    plan = state.ledger.monitor.recover(failed, current)
    chosen: dict[str, int | None] = {}
    undone = Forget()
    for p in state.order:
        f = plan.frontiers[p.name]
        now = Tick.whole(own[p.name], state.topology.domains[p.name])
        at = now if f.is_top else tick(f)
        chosen[p.name] = None if f.is_top else at.epochs_done
        state.report.recovery_reasons[p.name] = str(plan.explanations[p.name])
        logger.info(
            "partial recovery failed=%s processor=%s frontier=%r why=%s",
            sorted(failed),
            p.name,
            f,
            plan.explanations[p.name],
        )
        if at < now:
            _undo_after(state, p, at, plan.invalidated[p.name], undone)
        if p.spec.keyed and (p.name in failed or at < now):
            restore(state, p, at)
        _stand(state, p, at)
    state.delete(state.ledger.forget(undone))
    state.report.partial.append((failed, epoch, chosen))
    settle(state)
    state.report.recovery_seconds.append(time.perf_counter() - started)


def _stand(state: RunState, p: Processor, at: Tick) -> None:
    """Record that ``p`` stands at tick ``at`` (a loop processor may stand inside an epoch)."""
    state.frontier[p.name] = at.epochs_done
    if not at.is_whole:
        state.resumed[p.name] = at
    else:
        state.resumed.pop(p.name, None)


def _standing(state: RunState, p: Processor) -> Tick:
    """The tick ``p`` stands at (see :func:`_stand`)."""
    return state.resumed.get(p.name, Tick.whole(state.frontier[p.name], state.topology.domains[p.name]))


def _undo_after(state: RunState, p: Processor, at: Tick, invalidated: tuple[Frontier, ...], undone: Forget) -> None:
    """Collect p's committed work after tick ``at`` (a rollback undoes it)."""
    store = state.store
    undone.checkpoints += [(p.name, g) for g in invalidated]
    undone.state += [(p.name, t) for t, _, _ in store.state_files(p.name) if t > at]
    keys = [f"{p.name}.{port}" for port in p.ports] + [state.input_log(p, k) for k in range(len(p.inputs))]
    for key in keys:
        undone.logs += [(key, t) for t in store.log_epochs(key) if t > at]
    if p.spec.sink:
        epoch = at.epochs_done
        undone.sinks += [(p.name, t) for t in store.sink_commits(p.name) if t > epoch]
        undone.sink_rollbacks[p.name] = min(epoch, undone.sink_rollbacks.get(p.name, epoch))
        state.operators[p.name].abort_output(epoch)  # before the metadata forgets them


def restore(state: RunState, p: Processor, at: Tick) -> None:
    """Give keyed processor ``p`` its state as of tick ``at`` (with the copies of
    each block its policy asks for)."""
    with replicated(p.policy.replicas):
        behaviour_of(p.policy).restore(state, p, at)
