"""Committing a digest of the rows each epoch read from a file source
(:mod:`falkirk.io.digests`), so that a replay can accept an input file put back with a
new modification time.

The digest is a Spark observation on the source's output, placed above the output's
cache (every job reading it sees all of it) and reported by the first job that
computes it. Spark reports observations asynchronously, just after the job: an
epoch's commit waits briefly for its digests (they are normally there: the jobs that
read the input are done by then), one that comes later goes into a later commit,
and those of the run's last epochs into the commit the run ends with. A
digest that never arrives (the run stopped first; no consumer read all of the
output) is not recorded: a replay of that epoch then accepts its files only with
their planned modification times.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, Observation

from falkirk.graph import Processor
from falkirk.io.digests import DIGEST_KEY, arrived, observe
from falkirk.storage import CommitBatch

#: Epochs after which a digest Spark never reported is given up (no consumer
#: computed all of the source's output).
GIVE_UP_AFTER = 16


@dataclass(frozen=True)
class _Pending:
    source: str
    epoch: int
    files: list[str]
    observation: Observation


class InputDigests:
    """The digests of a run's epochs, from observation to commit (see the module docstring)."""

    def __init__(self) -> None:
        self._pending: list[_Pending] = []
        #: Sources whose digest once came after its epoch's commit: not waited for again.
        self._late: set[str] = set()
        self._lock = threading.Lock()

    def observe(self, p: Processor, df: DataFrame, epoch: int, offsets: dict[str, Any] | None) -> DataFrame:
        """``df``, source ``p``'s output of ``epoch`` read from ``offsets`` (the files it
        read), with its digest observed if the source records digests and the epoch
        has none yet."""
        reader = p.spec.reader  # type: ignore[attr-defined]
        if not getattr(reader, "records_digests", False) or not offsets or not offsets.get("files") or DIGEST_KEY in offsets:
            return df
        observed, observation = observe(df, f"{p.name} e{epoch} digest")
        with self._lock:
            self._pending.append(_Pending(p.name, epoch, [f[0] for f in offsets["files"]], observation))
        return observed

    def add_arrived(self, batch: CommitBatch, epoch: int, wait: float = 0.0) -> None:
        """Put every digest Spark has reported into ``batch``, a commit of ``epoch``,
        waiting up to ``wait`` seconds for those of epochs up to ``epoch`` (Spark
        reports them just after the jobs that read the input, which are done by the
        commit). A source whose digest does not come in time is not waited for again
        in this run (its output is computed later or in part); digests of epochs
        long committed that never came are given up."""
        deadline = time.monotonic() + wait
        with self._lock:
            while True:
                waiting = []
                for d in self._pending:
                    digest = arrived(d.observation, d.files)
                    if digest is not None:
                        batch.offsets_added.append((d.source, d.epoch, {DIGEST_KEY: digest.to_json()}))
                    elif d.epoch > epoch - GIVE_UP_AFTER:
                        waiting.append(d)
                self._pending = waiting
                due = [d for d in waiting if d.epoch <= epoch and d.source not in self._late]
                if not due or time.monotonic() >= deadline:
                    break
                time.sleep(0.005)
            self._late |= {d.source for d in due}

    def last(self, wait: float) -> CommitBatch | None:
        """A batch of the digests still to come, waiting up to ``wait`` seconds for
        them (the run ends); None when there are none."""
        batch = CommitBatch()
        self._late.clear()
        self.add_arrived(batch, epoch=1 << 62, wait=wait)
        self._pending = []
        return batch if batch.offsets_added else None
