"""Deterministic fault injection: named crash points.

``FALKIRK_CRASH_AT="point:n"`` kills the process with SIGKILL the n-th time it reaches
``point`` (1-based); several may be given separated by commas. Crash tests use it to
stop the engine at every step of every protocol, not only at random moments.

Points: ``epoch.planned`` (offsets committed), ``epoch.computed`` (logs and
checkpoints written, nothing committed), ``sink.written`` (a sink file is in place),
``commit.before``, ``commit.after``, ``gc.before``, ``sink.publish`` (an epoch is
committed, and a sink that shows committed epochs has not moved it into view yet:
reached by every pipeline with a sink), ``recovery.restored``, and for
a remote storage root ``meta.uploaded`` (a commit is in the local working copy and
uploaded, not yet published: it does not count). At the edges (:data:`EDGE_POINTS`,
reached only by pipelines with acknowledged sources or transactional sinks):
``sink.release`` (an epoch is committed and released by the monitor; its sink output
not yet made visible) and ``source.ack`` (input may be acknowledged; not yet done).
With global checkpoints (:data:`BARRIER_POINTS`): ``barrier.injected`` (a barrier is
decided, no snapshot written) and ``snapshot.written`` (a barrier snapshot is written,
not yet committed). With loops (:data:`LOOP_POINTS`): ``iteration.written``,
``iteration.committed`` and ``loop.computed``; with sequence-number regions
(:data:`CHUNK_POINTS`): ``chunk.written`` and ``chunk.committed`` (and
``loop.computed``: the stage that runs loops runs regions too). With keyed state
(:data:`STATE_POINTS`): ``state.written`` (a checkpoint, or a CEC log entry, is
written, not committed); and in a recovery that replays a processor's own input log
(continuous eventual checkpoints): ``catch_up.started`` (the eventual checkpoint is
loaded, nothing replayed) and ``catch_up.epoch`` (one more input epoch replayed).
In a driver pair (:data:`PAIR_POINTS`): ``pair.claimed`` and ``pair.written`` (see
:mod:`falkirk.execution.pairing`). When a processor sets rows aside
(:data:`QUARANTINE_POINTS`): ``quarantine.found`` (the failing rows found; the
epochs in flight not yet discarded) and ``quarantine.written`` (the rows set aside
written or counted, not committed). When the state is changed on purpose
(:data:`UPGRADE_POINTS`): ``savepoint.written`` (a savepoint's state files
written, its manifest not yet), ``upgrade.mapped`` (the old state mapped onto the
new pipeline and written, not committed) and ``rescale.restored`` (a new number of
state partitions recorded and the state restored under it, nothing committed yet).

``FALKIRK_KILL_WORKER_AT="point:n"`` (with ``FALKIRK_CLUSTER_DIR`` naming a cluster
started by :mod:`falkirk.spark.standalone`) instead SIGKILLs a worker of that
cluster and every executor it runs - the next worker still alive, one per armed
item - when the driver reaches that occurrence of ``point``, and lets the driver go
on: an executor lost at a chosen moment (a partial failure, recovered in the same
driver: see :meth:`falkirk.runtime.Engine.run`). The worker's death is waited for,
so Spark's next task on it fails.

``FALKIRK_FAIL_AT="processor:epoch"`` instead makes one processor lose its in-memory
state after that epoch, without killing the process (a partial failure, recovered in
place: see :meth:`falkirk.runtime.Engine.fail`).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections import Counter
from enum import StrEnum
from pathlib import Path

from falkirk.exceptions import FalkirkError

logger = logging.getLogger(__name__)

class CrashPoint(StrEnum):
    """Every named crash point, declared once: its value is the name
    ``FALKIRK_CRASH_AT`` and ``FALKIRK_KILL_WORKER_AT`` use (see the module's
    docstring for where each is reached)."""

    EPOCH_PLANNED = "epoch.planned"
    EPOCH_COMPUTED = "epoch.computed"
    SINK_WRITTEN = "sink.written"
    COMMIT_BEFORE = "commit.before"
    COMMIT_AFTER = "commit.after"
    GC_BEFORE = "gc.before"
    RECOVERY_RESTORED = "recovery.restored"
    META_UPLOADED = "meta.uploaded"
    SINK_RELEASE = "sink.release"
    SINK_PUBLISH = "sink.publish"
    SOURCE_ACK = "source.ack"
    BARRIER_INJECTED = "barrier.injected"
    SNAPSHOT_WRITTEN = "snapshot.written"
    ITERATION_WRITTEN = "iteration.written"
    ITERATION_COMMITTED = "iteration.committed"
    LOOP_COMPUTED = "loop.computed"
    CHUNK_WRITTEN = "chunk.written"
    CHUNK_COMMITTED = "chunk.committed"
    STATE_WRITTEN = "state.written"
    CATCH_UP_STARTED = "catch_up.started"
    CATCH_UP_EPOCH = "catch_up.epoch"
    PAIR_CLAIMED = "pair.claimed"
    PAIR_WRITTEN = "pair.written"
    QUARANTINE_FOUND = "quarantine.found"
    QUARANTINE_WRITTEN = "quarantine.written"
    RESCALE_RESTORED = "rescale.restored"
    SAVEPOINT_WRITTEN = "savepoint.written"
    UPGRADE_MAPPED = "upgrade.mapped"


#: Reached by every pipeline (``meta.uploaded`` only with a URI storage root).
POINTS = (
    CrashPoint.EPOCH_PLANNED,
    CrashPoint.EPOCH_COMPUTED,
    CrashPoint.SINK_WRITTEN,
    CrashPoint.COMMIT_BEFORE,
    CrashPoint.COMMIT_AFTER,
    CrashPoint.GC_BEFORE,
    CrashPoint.SINK_PUBLISH,
    CrashPoint.RECOVERY_RESTORED,
    CrashPoint.META_UPLOADED,
)
#: Reached only by pipelines with acknowledged sources or transactional sinks.
EDGE_POINTS = (CrashPoint.SINK_RELEASE, CrashPoint.SOURCE_ACK)
#: Reached only by pipelines with global checkpoints: a barrier decided before any
#: snapshot is written, and a barrier snapshot written but not committed.
BARRIER_POINTS = (CrashPoint.BARRIER_INJECTED, CrashPoint.SNAPSHOT_WRITTEN)
#: Reached only by pipelines with loops: an iteration's eager checkpoints and logs
#: written but not committed, and committed; the epoch's loops (and what follows
#: them) computed, not committed.
LOOP_POINTS = (CrashPoint.ITERATION_WRITTEN, CrashPoint.ITERATION_COMMITTED, CrashPoint.LOOP_COMPUTED)
#: Reached only by pipelines with sequence-number regions: a chunk's eager checkpoints
#: and logs written but not committed, and committed.
CHUNK_POINTS = (CrashPoint.CHUNK_WRITTEN, CrashPoint.CHUNK_COMMITTED)
#: Reached by pipelines with keyed state; the last two only by a recovery that
#: replays an input log into a restored state (ContinuousEventualCheckpoint).
STATE_POINTS = (CrashPoint.STATE_WRITTEN, CrashPoint.CATCH_UP_STARTED, CrashPoint.CATCH_UP_EPOCH)
#: Reached only by a driver of a driver pair (:mod:`falkirk.execution.pairing`).
PAIR_POINTS = (CrashPoint.PAIR_CLAIMED, CrashPoint.PAIR_WRITTEN)
#: Reached only when a processor sets rows aside (:mod:`falkirk.graph.errors`): the
#: failing rows found, the epochs in flight about to be discarded; and the rows set
#: aside written (to the quarantine table or counted), not yet committed.
QUARANTINE_POINTS = (CrashPoint.QUARANTINE_FOUND, CrashPoint.QUARANTINE_WRITTEN)
#: Reached only by a run that takes a savepoint or changes the pipeline's state on
#: purpose: a savepoint's state files written, its manifest not yet
#: (:mod:`falkirk.execution.savepointing`); an upgrade's mapped state written, not
#: committed (:mod:`falkirk.upgrades.upgrade`); a rescale recorded and its state
#: restored under the new number of partitions, nothing committed under it yet
#: (:mod:`falkirk.runtime.parallelism`).
UPGRADE_POINTS = (CrashPoint.SAVEPOINT_WRITTEN, CrashPoint.UPGRADE_MAPPED, CrashPoint.RESCALE_RESTORED)
#: The environment variables that arm crash points.
ARMING = ("FALKIRK_CRASH_AT", "FALKIRK_KILL_WORKER_AT")


class UnknownCrashPointError(FalkirkError, ValueError):
    """``FALKIRK_CRASH_AT`` or ``FALKIRK_KILL_WORKER_AT`` names a point that does not
    exist, or one of its items is not ``point[:n]``: the process would never crash
    there, so the run is refused instead."""


def check_armed() -> None:
    """Raise :class:`UnknownCrashPointError` if an arming variable names an unknown
    crash point or a count that is not a positive integer."""
    known = {p.value for p in CrashPoint}
    for variable in ARMING:
        for item in _items(variable):
            point, _, count = item.partition(":")
            if point not in known or not (count or "1").isdigit() or int(count or 1) < 1:
                raise UnknownCrashPointError(
                    f"{variable}={os.environ[variable]!r}: {item!r} is not point[:n] with a known point and n >= 1; "
                    f"the points are {', '.join(sorted(known))}"
                )


def _items(variable: str) -> list[str]:
    return list(filter(None, (x.strip() for x in os.environ.get(variable, "").split(","))))


_seen: Counter[str] = Counter()
_checked: list[tuple[str, ...]] = [("",) * len(ARMING)]  # the arming last checked
_lock = threading.Lock()


_fired: set[str] = set()


def armed_failures(epoch: int) -> set[str]:
    """Processors that ``FALKIRK_FAIL_AT="processor:epoch[,...]"`` fails after ``epoch``
    (each item once: a replay of the epoch after the rollback does not fail again)."""
    failed = set()
    for item in filter(None, (x.strip() for x in os.environ.get("FALKIRK_FAIL_AT", "").split(","))):
        name, _, at = item.rpartition(":")
        if name and at.isdigit() and int(at) == epoch and item not in _fired:
            _fired.add(item)
            failed.add(name)
    return failed


def _armed(variable: str, name: str, seen: int) -> bool:
    """Whether the list in ``variable`` names occurrence ``seen`` of point ``name``."""
    for item in _items(variable):
        point, _, count = item.partition(":")
        if point == name and seen == int(count or 1):
            return True
    return False


def crash_point(point: CrashPoint) -> None:
    """SIGKILL this process if ``FALKIRK_CRASH_AT`` names this occurrence of ``point``,
    or a cluster worker if ``FALKIRK_KILL_WORKER_AT`` does."""
    if not isinstance(point, CrashPoint):
        raise TypeError(f"crash_point({point!r}): crash points are declared in CrashPoint")
    name = point.value
    with _lock:  # epochs in flight reach points from several threads
        arming = tuple(os.environ.get(v, "") for v in ARMING)
        if arming != _checked[0]:  # a typo would never crash: refuse it (once per setting)
            check_armed()
            _checked[0] = arming
        _seen[name] += 1
        seen = _seen[name]
    if _armed("FALKIRK_KILL_WORKER_AT", name, seen):
        _kill_a_worker(f"{name}:{seen}")
    if _armed("FALKIRK_CRASH_AT", name, seen):
        logger.warning("crash point %s:%d reached: killing the process", name, seen)
        os.kill(os.getpid(), signal.SIGKILL)


def _kill_a_worker(where: str) -> None:
    """SIGKILL the first worker still alive of the cluster in ``FALKIRK_CLUSTER_DIR``."""
    from falkirk.spark.standalone import Cluster, alive

    directory = os.environ.get("FALKIRK_CLUSTER_DIR")
    if not directory:
        raise RuntimeError("FALKIRK_KILL_WORKER_AT needs FALKIRK_CLUSTER_DIR: the directory of a falkirk.spark.standalone cluster")
    cluster = Cluster.load(Path(directory))
    for index, pid in enumerate(cluster.worker_pids):
        if alive(pid):
            killed = cluster.kill_worker(index)
            for p in killed:
                while alive(p):
                    time.sleep(0.01)
            logger.warning("worker fault point %s reached: worker %d and its executors killed (pids %s)", where, index, killed)
            return
    logger.warning("worker fault point %s reached: no worker left alive to kill", where)

