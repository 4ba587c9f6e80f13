"""What an epoch's computation does with rows and files a step cannot process
(:mod:`falkirk.graph.errors`): after a failure, find them and raise
:class:`~falkirk.execution.isolation.PoisonRows` (the engine runs the epoch again
without them), or say why they cannot be set aside; on the run that follows, take them
out of the processor's input, hand them to its ``errors`` output and record them for
the epoch's commit (written to the quarantine table when no sink reads them).
:class:`SetAside` is the part of :class:`~falkirk.execution.epoch.EpochRunner` that
does this.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from pyspark.sql import DataFrame

from falkirk.control.faults import CrashPoint, crash_point
from falkirk.execution.diagnosis import failing_above
from falkirk.execution.isolation import (
    CannotIsolate,
    InputFails,
    isolate,
    unreadable_files,
)
from falkirk.execution.quarantine import file_identity
from falkirk.execution.run_state import RunState
from falkirk.execution.work import EpochWork
from falkirk.graph import Processor
from falkirk.graph.errors import ERRORS_PORT, OnError
from falkirk.io.exceptions import SourceError
from falkirk.spark.errors import first_line
from falkirk.spark.files import write_parquet
from falkirk.spark.frames import empty
from falkirk.storage import CommitBatch, QuarantineRecord, QuarantineUnit
from falkirk.time.ticks import Tick


class SetAside:
    """Rows and files set aside during one run's epochs (see the module docstring)."""

    def __init__(
        self, state: RunState, ahead: list[Processor], write_later: Callable[..., None], lock: threading.Lock
    ) -> None:
        """``ahead``: the processors a worker computes; ``write_later(work, label, fn,
        *args)`` runs a write in the background; ``lock`` guards the commit batch."""
        self.state = state
        self.ahead = ahead
        self._write_later = write_later
        self._lock = lock

    def after_failure(self, culprit: Processor, work: EpochWork, tick: Tick | None) -> str:
        """After ``culprit``'s step failed on the epoch's data: with ``on_error=
        "dead_letter"``, find the rows and raise :class:`PoisonRows` (the engine runs
        the epoch again without them). Returns why they cannot be set aside ("" for
        ``on_error="stop"``), for the error that stops the run."""
        if self.state.pipeline.on_error_of(culprit) is not OnError.DEAD_LETTER:
            return ""
        while True:
            if tick is not None:
                return "Its rows were not set aside: the error surfaced inside a loop's iteration, where rows are not set aside"
            if culprit not in self.ahead or culprit.name not in work.inputs_used:
                return f"Its rows were not set aside: processor {culprit.name!r} runs after a loop"
            try:
                raise isolate(self.state, culprit, work, work.inputs_used[culprit.name], self.state.pipeline.error_limit)
            except CannotIsolate as why:
                return f"Its rows were not set aside: {why.why}"
            except InputFails as failed:  # the rows are a processor's above it (a column the plan had pruned)
                above = failing_above(self.state, culprit, work)
                if above is None or self.state.pipeline.on_error_of(above) is not OnError.DEAD_LETTER:
                    return f"Its rows were not set aside: its input fails alone ({first_line(failed.error)})"
                culprit = above

    def split(self, p: Processor, work: EpochWork, inputs: list[DataFrame]) -> tuple[list[DataFrame], DataFrame | None]:
        """``p``'s inputs of the epoch without the rows it sets aside there, and those
        rows (None: none); what it read is kept for a search."""
        inputs, errors = self.state.quarantine.split(self.state.spark, p, work.epoch, inputs)
        work.inputs_used[p.name] = inputs
        return inputs, errors

    def errors_output(self, p: Processor, work: EpochWork, errors: DataFrame | None) -> DataFrame:
        """``p``'s ``errors`` output of the epoch (empty: nothing set aside), recorded
        for the epoch's commit."""
        if errors is None:
            return empty(self.state.spark, self.state.schemas[(p.name, ERRORS_PORT)])
        self._record(p, work, errors)
        return errors

    def _record(self, p: Processor, work: EpochWork, errors: DataFrame) -> None:
        """The epoch's commit records the rows ``p`` set aside when they were found in
        this run: counted, and written to the quarantine table when no sink reads
        ``p``'s ``errors`` (a committed record is the replay's: nothing to add)."""
        record = self.state.quarantine.pending_record(p.name, work.epoch)
        if record is None:
            return
        to_table = not self.state.pipeline.consumers(p.name, ERRORS_PORT)
        self._write_later(work, f"{p.name}/quarantine e{work.epoch}", self._write, errors, record, to_table, work.batch)

    def record_files(self, p: Processor, work: EpochWork) -> None:
        """The epoch's commit records the files source ``p`` left unread - late ones
        (``FileSource(late="set_aside")``) and unreadable ones found in this run
        (``unreadable="set_aside"``) - unless it did already (a replay)."""
        if self.state.quarantine.is_committed(p.name, work.epoch):
            return
        offsets = work.offsets.get(p.name)
        late = offsets.get("set_aside", []) if isinstance(offsets, dict) else []
        found = self.state.quarantine.pending_record(p.name, work.epoch)
        reasons = {**(found.reasons if found is not None else {}), **{file_identity(name): f"{name}: {reason}" for name, reason in late}}
        if reasons:
            with self._lock:
                work.batch.quarantine.append(QuarantineRecord(p.name, work.epoch, QuarantineUnit.FILE, reasons, rows=len(reasons)))

    def unreadable(self, work: EpochWork) -> None:
        """After a step of the epoch failed: find the files of the epoch's file sources
        that Spark cannot read, each tried alone
        (:func:`falkirk.execution.isolation.unreadable_files`), and raise
        :class:`PoisonRows` setting them aside (``FileSource(unreadable="set_aside")``)
        or a :class:`SourceError` naming them; nothing if every file reads."""
        for s in self.state.order:
            choice = getattr(getattr(s.spec, "reader", None), "unreadable", None)
            if choice is None or s.name not in work.offsets:
                continue
            offsets = self.state.quarantine.files_read(s.name, work.epoch, work.offsets[s.name])
            found = unreadable_files(self.state, s, work.epoch, offsets)
            if found is None:
                continue
            if choice == "set_aside":
                raise found
            raise SourceError(
                f"source {s.name!r} cannot read input file(s) of epoch {work.epoch}: {'; '.join(found.record.reasons.values())}. "
                "Fix or replace the file (the same name, size and modification time, or a fresh storage root), or let "
                "FileSource(..., unreadable='set_aside') leave such files out of their epoch"
            )

    def _write(self, errors: DataFrame, record: QuarantineRecord, to_table: bool, batch: CommitBatch) -> None:
        kept = errors.persist()
        try:
            rows = kept.count()
            files = write_parquet(kept, self.state.area("quarantine", record.processor), f"e{record.epoch}", self.state.fs) if to_table else []
        finally:
            kept.unpersist()
        crash_point(CrashPoint.QUARANTINE_WRITTEN)  # the rows set aside are written, not yet committed
        with self._lock:
            batch.quarantine.append(replace(record, rows=rows, files=tuple(files)))
