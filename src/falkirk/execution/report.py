"""What a run did: :class:`RunReport`."""

from __future__ import annotations

from dataclasses import dataclass, field

from falkirk.time import Time


@dataclass
class RunReport:
    """What a run did, for people (the demo) and tests."""

    epochs: list[int] = field(default_factory=list)
    checkpoints: list[tuple[str, int, str]] = field(default_factory=list)
    #: The checkpoints a restart's recovery restored: (processor, epoch), the latest last.
    restored_checkpoints: list[tuple[str, int]] = field(default_factory=list)
    #: Bytes of keyed-state checkpoint files written.
    checkpoint_bytes: int = 0
    #: Per loop and epoch run: (loop, epoch, iterations, iterations computed - the
    #: others were held already after a rollback that resumed inside the epoch).
    iterations: list[tuple[str, int, int, int]] = field(default_factory=list)
    #: Per epoch that entered an interleaved loop while earlier ones iterated:
    #: (loop, epoch, the earlier epochs still iterating).
    interleaved: list[tuple[str, int, list[int]]] = field(default_factory=list)
    #: Per sequence-number region and epoch run: (region, epoch, chunks, records).
    chunks: list[tuple[str, int, int, int]] = field(default_factory=list)
    recovered: dict[str, int] | None = None
    #: Where a restart's recovery left each processor: its tick (an epoch, or
    #: (epoch, iteration) inside a loop: it resumed in the middle of an epoch).
    recovered_at: dict[str, Time] = field(default_factory=dict)
    recovery_reasons: dict[str, str] = field(default_factory=dict)
    #: A restart's recovery in plain words (:mod:`falkirk.coordinator.story`).
    recovery_story: str = ""
    #: Per edge, the times (in the receiver's domain: an epoch, or (epoch, iteration)
    #: inside a loop, ``("seq", n)`` in a region) a recovery re-sent from logs.
    resent: dict[str, list[Time]] = field(default_factory=dict)
    collected_files: int = 0
    #: Input records of the last committed epoch, as Spark observed them while it
    #: read them (0 when the run does not count: see ``Engine(progress=)``).
    last_records: int = 0
    #: Input records of every epoch this run committed (None: the run did not count).
    records: int | None = None
    #: Epochs being computed when the last one committed (itself included).
    in_flight: int = 1
    #: In-process failures: (failed processors, epoch, frontier per processor or None for ⊤).
    partial: list[tuple[frozenset[str], int, dict[str, int | None]]] = field(default_factory=list)
    #: The root of the driver pair's member this driver copied its state from when it
    #: joined behind it (catch-up), if it did.
    caught_up_from: str | None = None
    #: Recoveries from the committed metadata in this process, after an executor lost
    #: outside an epoch's computation (a commit, a loop's stage, a recovery).
    restarts_in_process: int = 0
    #: Rows set aside as they were found (:mod:`falkirk.graph.errors`): (processor,
    #: epoch, identities found), each followed by a re-run of the epoch.
    set_aside: list[tuple[str, int, int]] = field(default_factory=list)
    #: Epochs during which an executor was lost (each recovered in the same driver).
    executor_losses: list[int] = field(default_factory=list)
    #: Seconds each recovery took (choosing frontiers, undoing, restoring state): a
    #: restart's first, then one per in-process rollback.
    recovery_seconds: list[float] = field(default_factory=list)
    #: Input a recovery replayed into a restored state from a processor's own input
    #: log (continuous eventual checkpoints): (processor, epochs, bytes, seconds).
    caught_up: list[tuple[str, int, int, float]] = field(default_factory=list)
    #: Seconds each processor's step took per committed epoch, persisting included.
    #: Spark evaluates lazily: a step that materializes (a keyed operator, a sink)
    #: also pays for computing the stateless steps before it.
    step_seconds: dict[str, list[float]] = field(default_factory=dict)
    #: When each processor's step finished per committed epoch (``time.perf_counter()``).
    #: With epochs in flight a step's seconds include waiting for the previous epoch;
    #: the intervals between these instants are what a step costs per epoch.
    step_finished: dict[str, list[float]] = field(default_factory=dict)
    #: Seconds from planning each committed epoch to its commit (epochs overlap).
    epoch_seconds: list[float] = field(default_factory=list)
    #: What stopped the run cleanly (``"stop()"``, ``"SIGINT"``, ``"SIGTERM"``;
    #: None: it ran to its end): see :mod:`falkirk.runtime.stopping`.
    stopped: str | None = None
    #: Seconds the run took, from :meth:`~falkirk.runtime.Engine.run` to its return.
    seconds: float = 0.0
    #: Partitions of every keyed state in this run (:mod:`falkirk.runtime.parallelism`).
    partitions: int = 0
    #: The number of partitions the root held before, when this run rescaled it.
    rescaled_from: int | None = None
    #: The savepoint this run took as it ended (``run(savepoint=True)``), if it did.
    savepoint: str | None = None
    #: The savepoint this run upgraded the pipeline from, if it did.
    upgraded_from: str | None = None

    def last_checkpoint(self) -> str | None:
        """The latest checkpoint as ``name@epoch (kind)``: written by this run, else
        restored by its recovery (None: neither)."""
        if self.checkpoints:
            name, epoch, kind = self.checkpoints[-1]
            return f"{name}@{epoch} ({kind})"
        if self.restored_checkpoints:
            name, epoch = self.restored_checkpoints[-1]
            return f"{name}@{epoch} (restored)"
        return None

    def __str__(self) -> str:
        """A few lines for people: epochs, checkpoints, recovery, rows set aside, time.
        (``repr()`` has every field.)"""
        lines = [_epochs(self.epochs, self.seconds, self.records, self.stopped)]
        if self.checkpoints:
            last = self.checkpoints[-1]
            lines.append(
                f"checkpoints: {len(self.checkpoints)} written ({_size(self.checkpoint_bytes)}), the last {last[0]} at epoch {last[1]} ({last[2]})"
            )
        if self.recovered is not None:
            held = ", ".join(f"{name} at epoch {epoch}" for name, epoch in sorted(self.recovered.items()) if epoch)
            took = f" in {self.recovery_seconds[0]:.1f} s" if self.recovery_seconds else ""
            story = self.recovery_story or (f"resumed with {held}" if held else "nothing committed to resume from: started at the beginning")
            lines.append(f"recovered{took}: {story}")
        if self.set_aside:
            rows = sum(n for _, _, n in self.set_aside)
            found = sorted(self.set_aside, key=lambda x: (x[1], x[0]))
            where = ", ".join(f"{p} epoch {e}" for p, e, _ in found[:3]) + (" ..." if len(found) > 3 else "")
            lines.append(f"set aside: {rows} bad row(s) or file(s) ({where}); falkirk inspect STORAGE quarantine lists them")
        if self.upgraded_from is not None:
            lines.append(f"upgraded: started from savepoint {self.upgraded_from}")
        if self.savepoint is not None:
            lines.append(f"savepoint: {self.savepoint} (falkirk savepoints STORAGE lists them)")
        if self.rescaled_from is not None:
            lines.append(f"rescaled: the state went from {self.rescaled_from} to {self.partitions} partitions")
        if self.executor_losses:
            lines.append(f"executors lost: during epochs {', '.join(map(str, self.executor_losses))}, each recovered")
        return "\n".join(lines)


def _epochs(epochs: list[int], seconds: float, records: int | None, stopped: str | None) -> str:
    took = f" in {seconds:.1f} s" if seconds else ""
    if not epochs:
        return f"no epoch committed{took}" + (f"; stopped by {stopped}" if stopped else " (no new input)")
    span = f"epoch {epochs[0]}" if len(epochs) == 1 else f"epochs {min(epochs)}-{max(epochs)}"
    rows = f", {records:,} input rows" if records is not None else ""
    per_second = records / seconds if records and seconds else 0.0
    rate = f" ({per_second:,.0f} rows/s)" if per_second >= 10 else f" ({per_second:.1f} rows/s)" if per_second else ""
    line = f"{len(epochs)} epoch{'' if len(epochs) == 1 else 's'} committed ({span}){rows}{took}{rate}"
    return line + (f"; stopped by {stopped}" if stopped else "")


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    value = n / 1024
    for unit in ("KB", "MB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"
