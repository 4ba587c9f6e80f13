"""Ticks: where a processor of the engine stands, as one totally ordered time.

Section 4.1 of the Falkirk Wheel paper imposes the lexicographic (total) order on the
times of each processor for checkpointing, so a rollback frontier of one processor is
``↓t`` for a single time t - a *tick*:

* an epoch processor's tick is its epoch ``e`` (an int; 0: nothing processed);
* a processor inside a loop has ``(epoch, iteration)`` times (a
  :class:`~falkirk.time.ProductDomain` of depth 2, lexicographic order); its tick is
  ``(e, i)`` - every iteration of the epochs before e and iterations 0..i of e - or
  ``(e, INF)``: all of epoch e, however many iterations it took. ``(0, INF)`` is
  nothing processed (epochs start at 1);
* a processor of a sequence-number region (:mod:`falkirk.graph.sequences`) has times
  ``(SEQ_LABEL, n)`` in a :class:`~falkirk.time.SeqDomain`: the region numbers its
  records once, as they enter, epoch e's k-th record getting
  ``n = (e - 1) * SEQ_BLOCK + k``, and every row derived from a record keeps its
  number. Its tick is ``(e, k)`` - records up to the k-th of epoch e processed - or
  ``(e, INF)``: all of epoch e, which is ``↓(SEQ_LABEL, e * SEQ_BLOCK)``. The numbers
  leave gaps between epochs, which the order on ``(edge, n)`` does not mind; section
  3.2's 73-message epoch 1 is numbered 1..73 and epoch 2 starts at SEQ_BLOCK + 1.

A :class:`Tick` is a value: it converts to and from frontiers, gives its ``ordinal``
(an int that grows with the tick, used to version keyed state - its ``_epoch``
column - and to order a checkpoint chain) and compares only with ticks of the same
shape. Pure Python: the metadata store and the engine share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from falkirk.time.domains import INF, Domain, EpochDomain, ProductDomain, SeqDomain, Time
from falkirk.time.exceptions import TimeError
from falkirk.time.frontier import Frontier

#: The time domain of the processors inside a loop.
LOOP = ProductDomain(2, "lexicographic")
#: Iterations of one epoch a loop may run (ordinals leave room for this many).
ITERATION_LIMIT = 1 << 20
#: The time domain of the processors of a sequence-number region.
SEQ = SeqDomain()
#: The edge label of a region's sequence numbers (each region numbers its records
#: once, at its entry; regions never exchange numbered rows, so one label serves all).
SEQ_LABEL = "seq"
#: Sequence numbers each epoch owns: at most ``SEQ_BLOCK - 2`` records of one epoch
#: may enter a region (the tick's ordinal must stay below the next epoch's).
SEQ_BLOCK = ITERATION_LIMIT


def _stepped(domain: Domain) -> bool:
    return isinstance(domain, (ProductDomain, SeqDomain))


@dataclass(frozen=True, slots=True, eq=False)
class Tick:
    """Where a processor stands: ``Tick(e)`` - all of epoch e, for a processor whose
    times are epochs - or ``Tick(e, step)`` inside a loop or a region: iterations (or
    records) up to ``step`` of epoch e, every one of them for ``step=INF``.

    Ticks are immutable, hashable and totally ordered among ticks of one shape;
    comparing a tick with an int, a tuple or a tick of the other shape raises
    :class:`TypeError` (such a comparison would be a bug that decides what is kept)."""

    epoch: int
    step: int | float | None = None

    def __post_init__(self) -> None:
        if type(self.epoch) is not int or self.epoch < 0:
            raise TimeError(f"a tick's epoch is an int >= 0, got {self.epoch!r}")
        if self.step is not None and self.step != INF and (type(self.step) is not int or self.step < 0):
            raise TimeError(f"a tick's step is an int >= 0 or INF, got {self.step!r}")

    # -- construction ---------------------------------------------------------------

    @classmethod
    def all_of(cls, epoch: int) -> Tick:
        """``(epoch, INF)``: every iteration (or record) of ``epoch``."""
        return cls(int(epoch), INF)

    @classmethod
    def start(cls, domain: Domain) -> Tick:
        """The tick of a processor of ``domain`` that has processed nothing."""
        return cls(0, INF) if _stepped(domain) else cls(0)

    @classmethod
    def whole(cls, epoch: int, domain: Domain) -> Tick:
        """The tick of a processor of ``domain`` that has processed all of ``epoch``."""
        return cls(int(epoch), INF) if _stepped(domain) else cls(int(epoch))

    @classmethod
    def of_seq_number(cls, n: int) -> Tick:
        """The tick of sequence number ``n`` (see :attr:`seq_number`); a number that
        ends an epoch's block is that whole epoch."""
        epoch, k = divmod(int(n), SEQ_BLOCK)
        return cls(epoch, INF) if k == 0 else cls(epoch + 1, k)

    @classmethod
    def of_frontier(cls, f: Frontier) -> Tick:
        """t for the frontier ↓t (a start tick for ∅). ⊤ and frontiers with several
        maxima are refused: a persisted frontier of the engine is finite and totally
        ordered."""
        if f.maxima is None:
            raise TimeError("a persisted frontier cannot be ⊤")
        if len(f.maxima) > 1:
            raise TimeError(f"an engine frontier has one maximal time, got {f!r}")
        if not f.maxima:
            return cls.start(f.domain)
        m = f.maxima[0]
        if isinstance(f.domain, SeqDomain):
            if not isinstance(m, tuple) or m[0] != SEQ_LABEL or m[1] == INF:
                raise TimeError(f"a region's frontier is ↓({SEQ_LABEL!r}, n) for a finite n, got {f!r}")
            return cls.of_seq_number(int(m[1]))
        if isinstance(f.domain, ProductDomain):
            if not isinstance(m, tuple) or len(m) != 2:
                raise TimeError(f"a loop frontier's maximum is (epoch, iteration), got {m!r}")
            return cls(int(m[0]), INF if m[1] == INF else int(m[1]))
        return cls(int(m))  # type: ignore[arg-type]

    @classmethod
    def of_time(cls, t: Time) -> Tick:
        """The tick whose :attr:`as_time` is ``t``: an epoch ``e`` or ``(e, step)``."""
        if isinstance(t, tuple):
            if len(t) != 2:
                raise TimeError(f"a tick's time is an epoch or (epoch, step), got {t!r}")
            return cls(int(t[0]), INF if t[1] == INF else int(t[1]))
        return cls(int(t))

    @classmethod
    def from_json(cls, value: Any) -> Tick:
        """The inverse of :meth:`to_json`."""
        if isinstance(value, list) and len(value) == 2:
            return cls(int(value[0]), INF if value[1] == "inf" else int(value[1]))
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(value)
        raise TimeError(f"a tick as JSON is an int or [epoch, iteration], got {value!r}")

    # -- reading ----------------------------------------------------------------------

    @property
    def stepped(self) -> bool:
        """True for a tick of a loop or a region (``(e, step)``)."""
        return self.step is not None

    @property
    def is_whole(self) -> bool:
        """True when the tick holds all of its epoch."""
        return self.step is None or self.step == INF

    @property
    def epochs_done(self) -> int:
        """The last epoch a processor at this tick has wholly processed: e for ``e``
        and ``(e, INF)``, e - 1 for ``(e, i)`` (epoch e still iterates)."""
        return self.epoch if self.is_whole else self.epoch - 1

    @property
    def ordinal(self) -> int:
        """An int that orders ticks of one processor: 0 for the start tick, then
        growing with the tick (epoch ticks map to themselves)."""
        if self.step is None:
            return self.epoch
        if self.step == INF:
            return self.epoch * ITERATION_LIMIT
        if not self.step < ITERATION_LIMIT - 1:
            raise TimeError(f"iteration {self.step!r} is outside 0..{ITERATION_LIMIT - 2}")
        return (self.epoch - 1) * ITERATION_LIMIT + int(self.step) + 1

    @property
    def seq_number(self) -> int:
        """The sequence number of a region's tick: ``(e, k)`` is record
        ``(e - 1) * SEQ_BLOCK + k``, ``(e, INF)`` is ``e * SEQ_BLOCK`` (all of epoch e)."""
        if self.step is None:
            raise TimeError(f"a sequence-number region has (epoch, count) ticks, got {self}")
        if self.step == INF:
            return self.epoch * SEQ_BLOCK
        if not self.step < SEQ_BLOCK - 1:
            raise TimeError(f"record {self.step!r} of epoch {self.epoch} is outside 0..{SEQ_BLOCK - 2}")
        return (self.epoch - 1) * SEQ_BLOCK + int(self.step)

    @property
    def as_time(self) -> Time:
        """The tick as a time of a loop or an epoch domain: ``e`` or ``(e, step)``."""
        return self.epoch if self.step is None else (self.epoch, self.step)

    @property
    def label(self) -> str:
        """The tick in job descriptions and file names: ``e3``, ``e3i5``, ``e3iall``."""
        if self.step is None:
            return f"e{self.epoch}"
        return f"e{self.epoch}i{'all' if self.step == INF else int(self.step)}"

    def previous(self) -> Tick | None:
        """The tick just before this one at which a processor may have sent something:
        ``(e, i - 1)``, or for ``(e, 0)`` all of epoch e - 1; ``e - 1`` for an epoch.
        None before the first. ``(e, INF)`` has no predecessor tick of its own."""
        if self.step is None:
            return Tick(self.epoch - 1) if self.epoch > 1 else None
        if self.step == INF:
            raise TimeError(f"{self} has no previous tick: it is a whole epoch")
        if self.step > 0:
            return Tick(self.epoch, int(self.step) - 1)
        return Tick(self.epoch - 1, INF) if self.epoch > 1 else None

    def time_in(self, domain: Domain) -> Time:
        """This tick as a time of ``domain``: a sequence-number tick becomes
        ``(SEQ_LABEL, n)``; other ticks are times already."""
        if isinstance(domain, SeqDomain):
            return (SEQ_LABEL, self.seq_number)
        return self.as_time

    def frontier_in(self, domain: Domain) -> Frontier:
        """↓t in ``domain`` (∅ for a start tick)."""
        if isinstance(domain, SeqDomain):
            n = self.seq_number
            return Frontier.down(domain, [[SEQ_LABEL, n]]) if n > 0 else Frontier.empty(domain)
        if isinstance(domain, ProductDomain):
            if self.step is None:
                raise TimeError(f"a processor in a loop has (epoch, iteration) ticks, got {self}")
            if self.epoch == 0:
                return Frontier.empty(domain)
            return Frontier.down(domain, [[self.epoch, self.step]])
        if not isinstance(domain, EpochDomain) or self.step is not None:
            raise TimeError(f"an epoch processor has int ticks in the epoch domain, got {self} in {domain!r}")
        return Frontier.down(domain, [self.epoch]) if self.epoch > 0 else Frontier.empty(domain)

    def to_json(self) -> int | list[int | str]:
        """The tick as JSON: an epoch as an int, ``(e, i)`` as ``[e, i]`` (``"inf"`` for ∞)."""
        if self.step is None:
            return self.epoch
        return [self.epoch, "inf" if self.step == INF else int(self.step)]

    # -- value semantics --------------------------------------------------------------

    def _key(self, other: object) -> tuple[tuple[int, float], tuple[int, float]]:
        if not isinstance(other, Tick):
            raise TypeError(f"a tick compares only with a tick, got {other!r} against {self!r}")
        if self.stepped != other.stepped:
            raise TypeError(f"{self!r} and {other!r} are ticks of different domains")
        return (self.epoch, self.step or 0), (other.epoch, other.step or 0)

    def __eq__(self, other: object) -> bool:
        a, b = self._key(other)
        return a == b

    def __ne__(self, other: object) -> bool:
        a, b = self._key(other)
        return a != b

    def __lt__(self, other: Tick) -> bool:
        a, b = self._key(other)
        return a < b

    def __le__(self, other: Tick) -> bool:
        a, b = self._key(other)
        return a <= b

    def __gt__(self, other: Tick) -> bool:
        a, b = self._key(other)
        return a > b

    def __ge__(self, other: Tick) -> bool:
        a, b = self._key(other)
        return a >= b

    def __hash__(self) -> int:
        # The raw form's hash: looking a tick up by an int or a tuple by mistake
        # reaches __eq__, which raises, instead of silently finding nothing.
        return hash(self.as_time)

    def __str__(self) -> str:
        return str(self.as_time)

    def __repr__(self) -> str:
        return f"Tick({self.epoch})" if self.step is None else f"Tick({self.epoch}, {self.step})"
