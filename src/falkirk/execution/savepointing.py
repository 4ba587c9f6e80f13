"""Taking a savepoint at the end of a run (see :mod:`falkirk.upgrades.savepoints`).

With nothing in flight and every epoch read committed (a clean end: the input done,
``stop()``, a signal's first stop), every keyed processor's state as of the last
committed epoch is written - a base of its live rows, whatever its policy, outside
its checkpoint chain (the chain and what garbage collection keeps of it do not
change) - then the manifest, last. Crash point ``savepoint.written``: the state
files written, the manifest not yet.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from falkirk.control.faults import CrashPoint, crash_point
from falkirk.execution.epoch import whole_tick
from falkirk.execution.run_state import RunState
from falkirk.recovery.chain import Cec
from falkirk.spark.files import write_parquet
from falkirk.upgrades.savepoints import (
    SavedState,
    Savepoint,
    SavepointError,
    make_room,
    new_name,
    publish,
)

logger = logging.getLogger(__name__)


def take_savepoint(state: RunState, description: dict[str, Any], identity: str | None, partitions: int, name: str | None) -> Savepoint:
    """Write a savepoint of the run's state at its last committed epoch (see the
    module docstring) and return it. ``description``: the pipeline's, as recorded."""
    epoch = state.store.committed_epoch()
    if epoch is None:
        raise SavepointError("no epoch has committed on this storage root yet: there is no state to save")
    name = name if name is not None else new_name(epoch)
    where = make_room(state.fs, state.root, name)
    states: dict[str, SavedState] = {}
    for p in state.keyed:
        operator = state.operators[p.name]
        tick = whole_tick(p, epoch)
        if isinstance(operator.chain_kind(tick.ordinal, True), Cec):
            raise SavepointError(
                f"processor {p.name!r} keeps its windows under ContinuousEventualCheckpoint, whose state a savepoint "
                "cannot hold yet: a savepoint needs every keyed processor's state (use EagerCheckpoint or "
                "LazyCheckpoint for it)"
            )
        rows = operator.checkpoint(tick.ordinal, True)  # the run ends: the state's chain goes on from its own checkpoints
        files = write_parquet(rows, state.fs.join(where, "state", p.name), f"e{epoch}-base", state.fs)
        states[p.name] = SavedState(tick.ordinal, tuple(_relative(f, where) for f in files))
    crash_point(CrashPoint.SAVEPOINT_WRITTEN)
    sources = {p.name: state.store.position(p.name) for p in state.pipeline.processors.values() if p.spec.source}
    savepoint = Savepoint(
        name=name,
        pipeline=state.pipeline.name,
        epoch=epoch,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        identity=identity,
        partitions=partitions,
        description=description,
        states=states,
        sources=sources,
        history=tuple(description.get("history", ())),
    )
    publish(state.fs, state.root, savepoint)
    state.report.savepoint = name
    logger.info("%s: savepoint %r taken at epoch %d (%d keyed processors)", state.pipeline.name, name, epoch, len(states))
    return savepoint


def _relative(f: Any, where: str) -> Any:
    prefix = where.rstrip("/") + "/"
    if not f.path.startswith(prefix):
        raise SavepointError(f"a savepoint file {f.path!r} was written outside its directory {where!r}")
    return type(f)(f.path[len(prefix) :], f.size, f.sha256)
