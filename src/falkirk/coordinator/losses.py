"""Executor losses while epochs are in flight: what is discarded, which processors
failed, and when recovery stops treating an error as a lost executor (paths 3 and 4
of :mod:`falkirk.coordinator.coordinator`)."""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from concurrent.futures import Future

from pyspark.sql import SparkSession

from falkirk.control import garbage
from falkirk.execution.run_state import RunState
from falkirk.execution.work import EpochPhase, EpochWork
from falkirk.graph import GraphError, Processor
from falkirk.spark.blocks import cached_partitions, free, lost_blocks
from falkirk.spark.errors import first_line

logger = logging.getLogger(__name__)

#: Executor losses recovered in a row with no commit between them before the
#: engine gives up (the error is then not a lost executor, or recurs every time).
MAX_LOSSES = 3


def give_up_after(losses: int, epoch: int, exc: BaseException) -> None:
    """Raise (chaining ``exc``) once more than :data:`MAX_LOSSES` losses came in a row."""
    if losses > MAX_LOSSES:
        raise GraphError(
            f"epoch {epoch} failed {losses} times in a row with errors that look like lost executors "
            "and no epoch committed in between; giving up (the last error is chained below)"
        ) from exc


def discard(work: EpochWork, inflight: deque[tuple[EpochWork, Future[None]]]) -> int:
    """Drop ``work`` (its epoch failed) and every epoch in flight after it: each
    computation and background write is waited for (so that nothing is written
    after the garbage sweep that follows) and its cached frames are freed. Returns
    how many epochs were discarded."""
    for _, later in inflight:  # they fail too, or finish work that is discarded
        with contextlib.suppress(Exception):
            later.result()
    discarded = [work, *(w for w, _ in inflight)]
    for lost in discarded:
        lost.advance(EpochPhase.DISCARDED)
        for write in lost.writes:
            with contextlib.suppress(Exception):
                write.result()
        for df in lost.cached:
            df.unpersist()
        for df in lost.cut:
            free(df)
    inflight.clear()
    return len(discarded)


def prepare_rollback(
    state: RunState,
    spark: SparkSession,
    work: EpochWork,
    inflight: deque[tuple[EpochWork, Future[None]]],
    failed: set[str],
    exc: BaseException,
    *,
    why: str | None = None,
) -> tuple[frozenset[str], int, int]:
    """An executor died while ``work``'s epoch ran, taking blocks of keyed state (and
    shuffle output) with it. The epochs in flight are discarded (none committed;
    their background writes are awaited, then swept) and each sink's output past its
    last commit is aborted. The keyed processors that failed are those whose state
    lost a block (:func:`lost_blocks`) and those whose step began in a discarded
    epoch (their state may have moved past the last commit), with ``failed`` (the
    failures injected already); every other processor survives at ⊤ (with global
    checkpoints every processor fails). Returns (the failed processors, the last
    committed epoch, how many epochs were discarded), for the rollback. With
    ``replicas=2`` a lost executor loses no block and only the touched processors
    that cannot take back their step fail. The same holds when rows were set aside
    (``why`` says so, for the log): the epochs in flight are discarded and run again."""
    works = [work, *(w for w, _ in inflight)]
    discarded = discard(work, inflight)  # waits for them: their steps have all begun or never will
    touched = set().union(*(w.touched for w in works))
    last = work.epoch - 1  # epochs commit in order: every earlier one has
    # A survivor of an earlier rollback may stand past ``last`` (it skipped the
    # epochs being re-run): what it holds up to its own frontier is committed.
    own = {name: max(last, at) for name, at in state.frontier.items()}
    failed = failed_after_loss(state, spark, touched, own) | failed
    if state.pipeline.checkpoints is not None:  # global checkpoints: a global rollback
        failed = set(state.pipeline.processors)
    if why is None:
        logger.warning("an executor was lost during epoch %d; rolling back %s in this driver (%s)", work.epoch, sorted(failed), first_line(exc))
    else:
        logger.info("%s; epochs %d to %d run again%s", why, work.epoch, work.epoch + discarded - 1, f", {sorted(failed)} restored" if failed else "")
    garbage.sweep(state.fs, state.root, state.store)  # what the discarded epochs wrote
    for p in state.pipeline.processors.values():
        if p.spec.sink:
            state.operators[p.name].abort_output(own[p.name])
    return frozenset(failed), last, discarded


def failed_after_loss(state: RunState, spark: SparkSession, touched: set[str], own: dict[str, int]) -> set[str]:
    """The keyed processors to hand to the solver as failed after an executor loss:
    those whose state lost a block (or cannot say), and those that ran a step of a
    discarded epoch (``touched``) and cannot take it back in memory. ``own``: each
    processor's last committed epoch (a survivor of an earlier rollback may stand
    past the failed epoch's predecessor)."""
    cached = cached_partitions(spark)  # one call to the block manager master for all
    return {p.name for p in state.keyed if _lost_state(state, spark, p, cached) or (p.name in touched and not _revert(state, p, own[p.name]))}


def _revert(state: RunState, p: Processor, last: int) -> bool:
    """Take back in memory what discarded epochs changed in ``p``'s state (whole:
    no block lost), so that it survives at ⊤ as of its ``last`` committed epoch;
    False if it cannot."""
    if p.region is not None:  # loop and region processors stand at ticks inside epochs
        return False
    checkpoints = [t.epoch for t, _, _ in state.store.state_files(p.name) if not t.stepped]
    return state.operators[p.name].revert(last, max(checkpoints, default=0))


def _lost_state(state: RunState, spark: SparkSession, p: Processor, cached: dict[int, int]) -> bool:
    """Whether ``p``'s state lost a block (or cannot be checked)."""
    try:
        held = state.operators[p.name].held()
    except Exception:  # e.g. a state load in the background failed: restore it
        return True
    return held is None or lost_blocks(spark, held, cached)
