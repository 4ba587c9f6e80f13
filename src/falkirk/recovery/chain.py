"""A keyed processor's checkpoint chain: the kinds of its entries, and which entries
restoring a version reads.

Every committed checkpoint of a keyed processor is one chain entry ``(version,
kind, files)``, oldest first (a version is the epoch outside loops, the ordinal of
a tick inside one). The kind says what restoring from the entry needs:

* :class:`Base` (``"base"``) - restorable alone;
* :class:`Delta` (``"delta"``) - needs the last base before it and every delta
  between the two;
* :class:`Cec` (``"cec:T"``) - an entry of a continuous eventual checkpoint's log
  (:mod:`falkirk.operators.cec`): needs the entries, and the input, from epoch T on.

The kinds are persisted as those strings, in the metadata database and in the names
of checkpoint files: :meth:`ChainKind.parse` and ``str()`` convert between the two,
and ``str(ChainKind.parse(s)) == s`` for every string Falkirk has written.
:func:`entries_to_restore` is the one walk of a chain that every restore uses.

Pure Python (no pyspark): a file is whatever the caller stores in its entries.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from falkirk.recovery.exceptions import ChainError

#: A chain entry's files: ``falkirk.storage.StoredFile`` in the engine.
F = TypeVar("F")

#: The persisted form of a CEC entry's kind: the epoch T in plain decimal digits, as
#: ``str(int)`` writes it (no sign, no leading zero), so that parsing and writing
#: back gives the same string.
_CEC = re.compile(r"cec:(0|[1-9][0-9]*)")


@dataclass(frozen=True)
class ChainKind:
    """The kind of a chain entry: one of :class:`Base`, :class:`Delta`, :class:`Cec`.

    Kinds are values: equal when they are the same kind (and, for :class:`Cec`, the
    same T), hashable, and ``str(kind)`` is the string persisted for it."""

    @staticmethod
    def parse(text: str) -> ChainKind:
        """The kind persisted as ``text`` (``"base"``, ``"delta"`` or ``"cec:T"``,
        exactly as ``str()`` writes them). Raises :class:`ChainError` for any other
        string: Falkirk writes no other, so the metadata is damaged or was written
        by something else."""
        if text == "base":
            return Base()
        if text == "delta":
            return Delta()
        match = _CEC.fullmatch(text)
        if match is not None:
            return Cec(int(match.group(1)))
        raise ChainError(
            f"a checkpoint chain entry has kind {text!r}; Falkirk writes only 'base', 'delta' and 'cec:<epoch>' "
            "(the metadata is damaged or was written by another program): restart from a new storage root or an older copy"
        )

    def __str__(self) -> str:
        raise NotImplementedError("ChainKind is abstract: use Base, Delta or Cec")


@dataclass(frozen=True)
class Base(ChainKind):
    """A full checkpoint: restoring it needs no other entry."""

    def __str__(self) -> str:
        return "base"


@dataclass(frozen=True)
class Delta(ChainKind):
    """What changed since the previous entry: restoring it needs the last base
    before it and the deltas between the two."""

    def __str__(self) -> str:
        return "delta"


@dataclass(frozen=True)
class Cec(ChainKind):
    """An entry of a CEC log: restoring it needs the entries (and the input) from
    epoch ``start`` (T) on."""

    start: int

    def __str__(self) -> str:
        return f"cec:{self.start}"


@dataclass(frozen=True)
class ChainEntry(Generic[F]):
    """One committed chain entry, its kind parsed."""

    version: int
    kind: ChainKind
    files: Sequence[F]

    @classmethod
    def parse(cls, entry: tuple[int, str, Sequence[F]]) -> ChainEntry[F]:
        """``(version, kind as persisted, files)`` as an entry; raises
        :class:`ChainError` for an unknown kind (see :meth:`ChainKind.parse`)."""
        version, kind, files = entry
        return cls(version, ChainKind.parse(kind), files)


def entries_to_restore(chain: Iterable[tuple[int, str, Sequence[F]]], version: int) -> list[ChainEntry[F]]:
    """The entries of ``chain`` (``(version, kind, files)``, oldest first, as
    committed) that restoring ``version`` reads, oldest first. Entries after
    ``version`` are never read.

    * If the last entry at or before ``version`` is a CEC entry ``cec:T``, it must be
      the entry of ``version`` itself (a CEC log has one for every epoch), and the
      entries from T to ``version`` are returned - all of them CEC entries.
    * Otherwise the last base at or before ``version`` and the deltas after it up to
      ``version`` are returned (a version between two entries is restored as of the
      entry before it). The first entry returned is that base; it is the only one
      when no delta follows it.

    The result is never empty. Raises :class:`ChainError` when the chain cannot
    restore ``version``: a kind that is not one Falkirk writes anywhere in the
    chain, no entry at or before ``version`` (an empty chain included), no base
    before the deltas, no CEC entry at ``version``, or CEC and base/delta entries
    mixed in what would be read."""
    entries = [ChainEntry.parse(entry) for entry in chain]
    usable = [e for e in entries if e.version <= version]
    if usable and isinstance(usable[-1].kind, Cec):
        return _cec_entries(usable, version, usable[-1].kind)
    bases = [i for i, e in enumerate(usable) if isinstance(e.kind, Base)]
    if not bases:
        raise ChainError(
            f"no base checkpoint at or before epoch {version} in the chain {_describe(entries)}: "
            "the metadata has lost it (restart from a new storage root or an older copy)"
        )
    read = usable[bases[-1] :]
    wrong = [e for e in read[1:] if not isinstance(e.kind, Delta)]
    if wrong:
        raise ChainError(
            f"the checkpoints after the base of epoch {read[0].version} include {_describe(wrong)}, not deltas: "
            "the chain mixes policies (restart with the policy that wrote it, or from a new storage root)"
        )
    return read


def _cec_entries(usable: list[ChainEntry[F]], version: int, last: Cec) -> list[ChainEntry[F]]:
    """The CEC entries from ``last.start`` to ``version`` (see :func:`entries_to_restore`)."""
    if usable[-1].version != version:
        raise ChainError(
            f"no CEC log entry for epoch {version} in the chain {_describe(usable)} (a CEC log has one for every epoch): "
            "the metadata has lost it (restart from a new storage root or an older copy)"
        )
    read = [e for e in usable if last.start <= e.version]
    wrong = [e for e in read if not isinstance(e.kind, Cec)]
    if wrong:
        raise ChainError(
            f"the CEC log of epochs {last.start}..{version} includes {_describe(wrong)}: "
            "the chain mixes policies (restart with the policy that wrote it, or from a new storage root)"
        )
    return read


def _describe(entries: Sequence[ChainEntry[F]]) -> str:
    """``[(version, 'kind'), ...]`` for a message."""
    return str([(e.version, str(e.kind)) for e in entries])
