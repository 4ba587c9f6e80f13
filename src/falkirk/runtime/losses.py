"""Executor losses while epochs are in flight: what is discarded, and when the engine
stops treating an error as a lost executor (:meth:`Engine._recover_from_executor_loss
<falkirk.runtime.engine.Engine>`)."""

from __future__ import annotations

import contextlib
from collections import deque
from concurrent.futures import Future

from falkirk.graph import GraphError
from falkirk.runtime.epoch import EpochWork

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
        for write in lost.writes:
            with contextlib.suppress(Exception):
                write.result()
        for df in lost.cached:
            df.unpersist()
    inflight.clear()
    return len(discarded)


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its type's name if it has none), for a log."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
