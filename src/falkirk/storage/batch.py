"""What one commit of the metadata store records, and what it forgets.

A :class:`CommitBatch` is everything one atomic commit of
:class:`~falkirk.storage.MetaStore` records: checkpoint metadata Ξ with its files,
source offsets, sink commits, logs and keyed-state checkpoints, and the records a
:class:`Forget` lets go in the same transaction. Pure values: nothing here touches
the database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from falkirk.recovery import CheckpointMeta
from falkirk.storage.filesystem import StoredFile
from falkirk.time import Frontier
from falkirk.time.ticks import Tick


@dataclass(frozen=True, eq=False)
class StoredCheckpoint:
    """A committed checkpoint: its metadata and the files holding S(p, f) and L(e, f)."""

    meta: CheckpointMeta
    files: tuple[StoredFile, ...]


class QuarantineUnit(Enum):
    """What a quarantine identity names: one row's content (a row-wise processor's
    failing rows), one key (all of a keyed processor's rows of that key in the
    epoch), or one input file a source left unread (a late file)."""

    ROW = "row"
    KEY = "key"
    FILE = "file"


@dataclass(frozen=True)
class QuarantineRecord:
    """The rows one processor quarantined in one epoch (:mod:`falkirk.graph.errors`),
    committed with the epoch so that a replay sets aside exactly the same rows.

    An identity is a 64-bit hash (``xxhash64``) of a row's columns or of its key's,
    which no repartitioning changes; equal rows share it (they fail alike)."""

    processor: str
    epoch: int
    unit: QuarantineUnit
    #: identity -> the error's text (stable: no query context).
    reasons: dict[int, str]
    #: Rows set aside (after the epoch ran: -1 while unknown).
    rows: int = -1
    #: The quarantine table's files of these rows (none when a sink took them).
    files: tuple[StoredFile, ...] = ()

    def merged(self, other: QuarantineRecord) -> QuarantineRecord:
        """These identities and ``other``'s (a re-run of the epoch found more)."""
        return QuarantineRecord(self.processor, self.epoch, self.unit, {**self.reasons, **other.reasons})


@dataclass
class Forget:
    """Records to forget in one transaction: garbage below the low-watermarks, or
    work a rollback undoes. Forgetting a log or checkpoint returns its files, to be
    deleted once the transaction is durable; a sink commit's files belong to the
    sink's table and stay."""

    #: (edge, tick) of logs and (processor, tick) of state files.
    logs: list[tuple[str, Tick]] = field(default_factory=list)
    state: list[tuple[str, Tick]] = field(default_factory=list)
    checkpoints: list[tuple[str, Frontier]] = field(default_factory=list)
    sinks: list[tuple[str, int]] = field(default_factory=list)
    #: source -> epoch: offsets of epochs up to it, except the source's latest
    #: non-empty offsets (its position, from which the next epoch is planned).
    offsets_upto: dict[str, int] = field(default_factory=dict)
    #: sink -> epoch: a rollback took the sink's committed epochs after it back (its
    #: committed range ends there; pruning ``sinks`` below a low-watermark does not
    #: shorten the range).
    sink_rollbacks: dict[str, int] = field(default_factory=dict)
    #: Forget every rollback point, state file and log the root holds: an upgrade
    #: starts the pipeline's next version from one cut (:mod:`falkirk.upgrades.upgrade`).
    everything: bool = False

    def __bool__(self) -> bool:
        return bool(
            self.logs or self.state or self.checkpoints or self.sinks or self.offsets_upto or self.sink_rollbacks
            or self.everything
        )  # fmt: skip

    def merge(self, other: Forget) -> None:
        """Add ``other``'s records to these."""
        self.logs += [k for k in other.logs if k not in self.logs]
        self.state += [k for k in other.state if k not in self.state]
        self.checkpoints += [k for k in other.checkpoints if k not in self.checkpoints]
        self.sinks += [k for k in other.sinks if k not in self.sinks]
        for source, upto in other.offsets_upto.items():
            self.offsets_upto[source] = max(upto, self.offsets_upto.get(source, upto))
        for sink, epoch in other.sink_rollbacks.items():
            self.sink_rollbacks[sink] = min(epoch, self.sink_rollbacks.get(sink, epoch))
        self.everything = self.everything or other.everything


@dataclass
class CommitBatch:
    """Everything one atomic commit records (all lists may be empty)."""

    checkpoints: list[tuple[CheckpointMeta, Sequence[StoredFile]]] = field(default_factory=list)
    #: (source, epoch, offsets): the source's JSON object, or None when the source
    #: had nothing new for the epoch.
    offsets: list[tuple[str, int, Any]] = field(default_factory=list)
    #: (source, epoch, keys): keys added to offsets committed before, such as the
    #: hashes of the files the epoch read (:mod:`falkirk.io.content_hashes`); nothing
    #: for offsets forgotten meanwhile.
    offsets_added: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    sink_commits: list[tuple[str, int, Sequence[StoredFile]]] = field(default_factory=list)
    #: (edge, tick, files) of logged messages (the sender's tick: an epoch, or
    #: ``(epoch, iteration)`` in a loop).
    logs: list[tuple[str, Tick, Sequence[StoredFile]]] = field(default_factory=list)
    #: (processor, tick, kind, files) of keyed-state checkpoints; the kind as persisted,
    #: ``str()`` of a :class:`falkirk.recovery.chain.ChainKind` (``"base"``,
    #: ``"delta"`` or ``"cec:T"``).
    state: list[tuple[str, Tick, str, Sequence[StoredFile]]] = field(default_factory=list)
    #: Records forgotten in the same transaction.
    forget: Forget = field(default_factory=Forget)
    #: The epoch this commit completes (None: a commit of records only, e.g. a rollback's).
    epoch: int | None = None
    #: Rows processors quarantined in the epoch (recorded or replaced).
    quarantine: list[QuarantineRecord] = field(default_factory=list)
    #: The epoch that ends the input (planned by ``Engine.run(finish=True)``): recorded
    #: once, never forgotten, so a replay of that epoch is final again.
    end_of_input: int | None = None
    #: The pipeline's description (name, JSON), replacing the recorded one in the
    #: same transaction (an upgrade: the new version's records and its description).
    description: tuple[str, dict[str, Any]] | None = None
