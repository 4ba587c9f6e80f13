"""Committing a digest of the rows each epoch read from a file source
(:mod:`falkirk.io.digests`), so that a replay can accept an input file put back with a
new modification time.

The digest is a Spark observation on the source's output, placed above the output's
cache (every job reading it sees all of it). Spark completes an observation with the
metrics of the first query over it that *ends*, whether it succeeded or failed - a
failed query gives the rows it saw before failing (none, often). So a digest belongs
to one run of its epoch (its :class:`~falkirk.execution.work.EpochWork`) and is
committed only if that run computed the epoch without any failure: every query over
its rows then succeeded. A run that failed, or was discarded (rows set aside, an
executor lost, a stop), takes its digests with it; the epoch's next run observes
anew.

Spark takes a query's metrics of an observation below a kept (cached) DataFrame from
the cache's plan, where they hold only the partitions whose tasks have *finished*. Two
jobs filling a new cache at once (a log write in the background and the next step)
share its partitions: the one that ends first may report only the partitions whose
tasks had finished - the digest of part of the rows, and a file put back would be
refused. So a kept output below a digest not reported yet is computed at once, in one
job that fills the whole cache alone (:meth:`InputDigests.fill_alone`), before any
other job reads it; its report is the observation's first, and counts every row.

A query that reads only part of the rows (a ``limit`` in a processor's function)
reports the digest of that part. An output whose plan limits rows below a digest not
reported yet marks it partial (:meth:`InputDigests.read_partly`): it is not committed,
and a replay of that epoch accepts its files only with their planned modification
times. What the engine cannot see is not caught: a processor's function that runs an
action reading part of its input (``first()``, ``take()``, ``isEmpty()``) before the
engine's jobs may commit the digest of part of the rows, and files put back are then
refused (the message says how many rows each digest counts, and how to give the files
back their modification times).

Spark reports observations asynchronously, just after the query: an epoch's commit
waits briefly for its digests (they are normally there: the queries that read the
input are done by then); one that comes later goes into a later commit, and those of
the run's last epochs into the commit the run ends with. A digest that never comes
(no job read the output) is not recorded either.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, Observation

from falkirk.graph import Processor
from falkirk.io.digests import DIGEST_KEY, arrived, observe, reported
from falkirk.storage import CommitBatch

#: Commits after which a digest Spark never reported is given up (no job read the
#: source's output).
GIVE_UP_AFTER = 16
#: A node of a logical plan that stops reading its input early.
_LIMIT = re.compile(r"^[\s+|:-]*(?:Global|Local)Limit ", re.MULTILINE)


@dataclass(eq=False)
class PendingDigest:
    """A digest observed in one run of an epoch, not reported yet."""

    source: str
    epoch: int
    files: list[str]
    observation: Observation
    #: A job that computed all the rows alone has run: its report is the first.
    filled: bool = False
    #: An output below it limits the rows: its report may count only some (never committed).
    partial: bool = False

    def unreported(self) -> bool:
        """Neither partial nor filled, and Spark has reported nothing yet."""
        return not self.partial and not self.filled and not reported(self.observation)


def sources_above(order: list[Processor]) -> dict[str, frozenset[str]]:
    """The sources each processor of ``order`` (graph order) reads from, directly or not."""
    above: dict[str, frozenset[str]] = {}
    for p in order:
        own = frozenset({p.name}) if p.spec.source else frozenset()
        above[p.name] = own.union(*(above.get(i.src, frozenset()) for i in p.inputs))
    return above


class InputDigests:
    """The digests of a run's committed epochs on their way to a commit (see the
    module docstring); an epoch's own are in its ``EpochWork.digests`` until it commits."""

    def __init__(self) -> None:
        #: Digests of committed epochs that Spark had not reported by their commit.
        self._late: list[tuple[PendingDigest, int]] = []
        #: Sources whose digest once came after its epoch's commit: not waited for again.
        self._slow: set[str] = set()
        self._lock = threading.Lock()

    @staticmethod
    def observe(p: Processor, df: DataFrame, epoch: int, offsets: dict[str, Any] | None, pending: list[PendingDigest]) -> DataFrame:
        """``df``, source ``p``'s output of ``epoch`` read from ``offsets`` (the files it
        read), with its digest observed - added to ``pending``, the epoch run's - if the
        source records digests and the epoch has none yet."""
        reader = p.spec.reader  # type: ignore[attr-defined]
        if not getattr(reader, "records_digests", False) or not offsets or not offsets.get("files") or DIGEST_KEY in offsets:
            return df
        observed, observation = observe(df, f"{p.name} e{epoch} digest")
        pending.append(PendingDigest(p.name, epoch, [f[0] for f in offsets["files"]], observation))
        return observed

    @staticmethod
    def read_partly(output: DataFrame, pending: list[PendingDigest], sources: frozenset[str]) -> None:
        """Mark partial the digests of ``pending`` not reported yet from ``sources``
        (the sources above ``output``) whose observation ``output``'s plan reads through
        a limit: the first query over it may stop early (see the module docstring)."""
        waiting = [d for d in pending if d.source in sources and d.unreported()]
        if not waiting:
            return
        plan = output._jdf.queryExecution().analyzed().toString()
        if _LIMIT.search(plan):
            for d in waiting:
                if d.observation._name in plan:
                    d.partial = True

    @staticmethod
    def fill_alone(kept: DataFrame, pending: list[PendingDigest], sources: frozenset[str], *, always: bool = False) -> None:
        """Compute ``kept`` - a DataFrame just persisted, not read yet, below
        ``sources`` - now, in one job, if a digest of ``pending`` from those sources
        is not reported yet (or ``always``): see the module docstring."""
        waiting = [d for d in pending if d.source in sources and d.unreported()]
        if waiting or always:
            kept.count()
            for d in waiting:
                d.filled = True

    def add(self, batch: CommitBatch, committing: list[PendingDigest], wait: float = 0.0) -> None:
        """Put into ``batch`` the digests of the epoch run it commits (``committing``:
        computed without a failure), waiting up to ``wait`` seconds for them, and those
        of earlier commits that have come since."""
        deadline = time.monotonic() + wait
        with self._lock:
            self._late = [(d, age + 1) for d, age in self._late if age < GIVE_UP_AFTER]
            waiting = [*(d for d, _ in self._late), *committing]
            while True:
                waiting = [d for d in waiting if not self._added(batch, d)]
                due = [d for d in waiting if d in committing and d.source not in self._slow]
                if not due or time.monotonic() >= deadline:
                    break
                time.sleep(0.005)
            self._slow |= {d.source for d in due}
            ages = {id(d): age for d, age in self._late}
            self._late = [(d, ages.get(id(d), 0)) for d in waiting]

    def last(self, wait: float) -> CommitBatch | None:
        """A batch of the digests still to come, waiting up to ``wait`` seconds for
        them (the run ends); None when there are none."""
        batch = CommitBatch()
        with self._lock:
            late, self._late, self._slow = [d for d, _ in self._late], [], set()
        self.add(batch, late, wait)
        with self._lock:
            self._late = []
        return batch if batch.offsets_added else None

    @staticmethod
    def _added(batch: CommitBatch, d: PendingDigest) -> bool:
        if d.partial:
            return True  # never committed: done with
        digest = arrived(d.observation, d.files)
        if digest is None:
            return False
        batch.offsets_added.append((d.source, d.epoch, {DIGEST_KEY: digest.to_json()}))
        return True
