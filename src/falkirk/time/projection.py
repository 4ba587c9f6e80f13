"""Edge projections φ(e): carrying a frontier across an edge into the receiver's domain.

For an edge e from p to q, φ(e)(f) is a conservative estimate of the times on e that
are *fixed* once p has processed exactly the events in f: p is guaranteed not to
produce any message on e with a time in φ(e)(f) by processing an event outside f
(section 3.2). Rolling q back to φ(e)(f) is therefore safe while p rolls back to at
least f. Larger projections preserve more work; ∅ is always safe.

Every projection is monotone (f ⊆ g implies φ(f) ⊆ φ(g)), maps ∅ to ∅ and maps ⊤ to ⊤:
⊤ is the live state of a processor that has not failed, which keeps everything it sent,
so its receivers may keep everything they received (section 4.4). No projection's value
at ⊤ is a default that could make it non-monotone.

| class | use |
|---|---|
| :class:`Identity` | same domain at both ends (epochs never sent back in time) |
| :class:`LoopEntry` | into a loop: epoch t becomes every iteration (t, c) |
| :class:`LoopExit` | out of a loop: only epochs all of whose iterations are done |
| :class:`Feedback` | the back edge of a loop: the iteration counter is incremented |
| :class:`Recorded` | values stored explicitly with each checkpoint (sequence numbers) |
| :class:`Empty` | nothing is ever fixed |
| :class:`EpochToSeq`, :class:`SeqToEpoch` | translators between epochs and sequence numbers |
"""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from falkirk.time.domains import (
    INF,
    Domain,
    EpochDomain,
    ProductDomain,
    SeqDomain,
    Time,
    epoch_like_depth,
)
from falkirk.time.exceptions import DomainMismatchError, TimeError
from falkirk.time.frontier import Frontier
from falkirk.time.ticks import SEQ_BLOCK, SEQ_LABEL, Tick


class Projection(ABC):
    """φ(e): maps frontiers of ``source`` to frontiers of ``target``."""

    #: True when the projection's real values are stored per checkpoint; applying
    #: the object itself then gives the safe default ∅.
    recorded: bool = False

    @property
    @abstractmethod
    def source(self) -> Domain: ...

    @property
    @abstractmethod
    def target(self) -> Domain: ...

    @property
    @abstractmethod
    def kind(self) -> str:
        """The scenario-format name of this projection."""

    def __call__(self, f: Frontier) -> Frontier:
        """φ(f). Raises :class:`DomainMismatchError` if f is not in ``source``."""
        if f.domain is not self.source and f.domain != self.source:
            raise DomainMismatchError(
                f"{self.kind} projection expects a frontier in {self.source!r}, "
                f"got {f!r} in {f.domain!r}"
            )
        if f.maxima is None:
            return Frontier.top(self.target)
        if not f.maxima:
            return Frontier.empty(self.target)
        return self._apply(f.maxima)

    @abstractmethod
    def _apply(self, maxima: tuple[Time, ...]) -> Frontier:
        """φ of a non-empty, non-⊤ frontier given by its maxima."""

    def latest_message(self, t: Tick) -> Tick:
        """The tick, in the receiver's domain, of the latest message a sender at tick
        ``t`` may have sent on an edge with this projection (the engine's edges
        override this; a projection without one refuses)."""
        return self._refuse(t)

    def _refuse(self, t: Tick) -> Tick:
        raise TimeError(f"no message time for a {self.kind} edge from tick {t}")

    def _result(self, times: list[Time]) -> Frontier:
        maxima = self.target.maxima(times)
        if self.target.is_everything(maxima):
            return Frontier.top(self.target)
        return Frontier(self.target, maxima)


@dataclass(frozen=True, slots=True)
class Identity(Projection):
    """φ(f) = f: the receiver uses the sender's times unchanged."""

    domain: Domain

    @property
    def source(self) -> Domain:
        return self.domain

    @property
    def target(self) -> Domain:
        return self.domain

    @property
    def kind(self) -> str:
        return "identity"

    def latest_message(self, t: Tick) -> Tick:
        """The sender's own tick: the receiver shares its times."""
        return t

    def _apply(self, maxima: tuple[Time, ...]) -> Frontier:
        return Frontier(self.domain, maxima)


@dataclass(frozen=True, slots=True)
class Empty(Projection):
    """φ(f) = ∅ for every finite f (and ⊤ for ⊤, like every projection): the
    always-safe, least useful projection."""

    src: Domain
    dst: Domain

    @property
    def source(self) -> Domain:
        return self.src

    @property
    def target(self) -> Domain:
        return self.dst

    @property
    def kind(self) -> str:
        return "empty"

    def _apply(self, maxima: tuple[Time, ...]) -> Frontier:
        return Frontier.empty(self.dst)


@dataclass(frozen=True, slots=True)
class Recorded(Projection):
    """Values recorded explicitly with each checkpoint (section 3.2, sequence numbers).

    The object alone knows no values: applied to a finite frontier it returns ∅, the
    safe default for a checkpoint that stored none, and ⊤ for ⊤ (a live processor keeps
    everything it sent). The recovery layer looks up the stored value instead."""

    src: Domain
    dst: Domain
    recorded = True

    @property
    def source(self) -> Domain:
        return self.src

    @property
    def target(self) -> Domain:
        return self.dst

    @property
    def kind(self) -> str:
        return "recorded"

    def _apply(self, maxima: tuple[Time, ...]) -> Frontier:
        return Frontier.empty(self.dst)


def _check_loop_orders(src: Domain, dst: Domain, what: str) -> None:
    orders = {d.order for d in (src, dst) if isinstance(d, ProductDomain)}
    if len(orders) > 1:
        raise TimeError(
            f"{what} between {src!r} and {dst!r}: both product domains must use the "
            "same order (an epoch domain may meet either)"
        )


@dataclass(frozen=True, slots=True)
class LoopEntry(Projection):
    """Into a loop: a time t becomes every iteration ``(*t, c)``; φ(↓3) = ↓(3, ∞)."""

    src: Domain
    dst: ProductDomain

    def __post_init__(self) -> None:
        if (
            not isinstance(self.dst, ProductDomain)
            or epoch_like_depth(self.src) + 1 != self.dst.depth
        ):
            raise TimeError(
                f"loop_entry must go from depth k to a product domain of depth k+1, got "
                f"{self.src!r} -> {self.dst!r}"
            )
        _check_loop_orders(self.src, self.dst, "loop_entry")

    @property
    def source(self) -> Domain:
        return self.src

    @property
    def target(self) -> Domain:
        return self.dst

    @property
    def kind(self) -> str:
        return "loop_entry"

    def latest_message(self, t: Tick) -> Tick:
        """Into a loop, epoch e becomes its first iteration ``(e, 0)``."""
        return Tick(t.epoch, 0)

    def _apply(self, maxima: tuple[Time, ...]) -> Frontier:
        return self._result([(*_as_tuple(m), INF) for m in maxima])


@dataclass(frozen=True, slots=True)
class LoopExit(Projection):
    """Out of a loop: keeps the times t all of whose iterations ``(*t, c)`` are in f.

    Lexicographic ↓(3, 5) → ↓2 (epoch 3 still has iterations to run); ↓(3, ∞) → ↓3;
    product-order ↓(3, 5) → ∅ (no epoch has all of its iterations)."""

    src: ProductDomain
    dst: Domain

    def __post_init__(self) -> None:
        if (
            not isinstance(self.src, ProductDomain)
            or epoch_like_depth(self.dst) + 1 != self.src.depth
        ):
            raise TimeError(
                f"loop_exit must go from a product domain of depth k+1 to depth k, got "
                f"{self.src!r} -> {self.dst!r}"
            )
        _check_loop_orders(self.src, self.dst, "loop_exit")

    @property
    def source(self) -> Domain:
        return self.src

    @property
    def target(self) -> Domain:
        return self.dst

    @property
    def kind(self) -> str:
        return "loop_exit"

    def latest_message(self, t: Tick) -> Tick:
        """Out of a loop, ``(e, i)`` becomes epoch e (its iterations so far may have
        sent rows of e)."""
        return Tick(t.epoch) if t.stepped else self._refuse(t)

    def _apply(self, maxima: tuple[Time, ...]) -> Frontier:
        out: list[tuple[Any, ...]] = []
        for m in maxima:
            prefix = _as_tuple(m)[:-1]
            if _as_tuple(m)[-1] == INF:
                out.append(prefix)
            elif self.src.order == "lexicographic":
                before = _lex_predecessor(prefix)
                if before is not None:
                    out.append(before)
        return self._result([_unwrap(t, self.dst) for t in out])


@dataclass(frozen=True, slots=True)
class Feedback(Projection):
    """The back edge of a loop: the last coordinate is incremented; ↓(1, 3) → ↓(1, 4)."""

    domain: ProductDomain

    def __post_init__(self) -> None:
        if not isinstance(self.domain, ProductDomain):
            raise TimeError(f"feedback needs a product domain, got {self.domain!r}")

    @property
    def source(self) -> Domain:
        return self.domain

    @property
    def target(self) -> Domain:
        return self.domain

    @property
    def kind(self) -> str:
        return "feedback"

    def latest_message(self, t: Tick) -> Tick:
        """The back edge adds one iteration; a whole epoch stays whole."""
        if not t.stepped:
            return self._refuse(t)
        return t if t.is_whole else Tick(t.epoch, int(t.step or 0) + 1)

    def _apply(self, maxima: tuple[Any, ...]) -> Frontier:
        return self._result([(*m[:-1], m[-1] + 1) for m in maxima])


@dataclass(frozen=True)
class EpochToSeq(Projection):
    """Translator from epochs to sequence numbers on one edge (section 3.2).

    ``sent_through[t]`` is how many messages the sender had sent on ``edge`` once it
    finished epoch t (it sends all of epoch t before any of epoch t+1), so
    φ(↓t) = ↓(edge, sent_through[t'] ) for the greatest recorded t' <= t.

    With ``block`` > 0 the numbers need no recording: epoch t's messages are numbered
    within ``((t - 1) * block, t * block)``, so φ(↓t) = ↓(edge, t * block) (the
    engine's regions, :mod:`falkirk.time.ticks`)."""

    edge: str
    sent_through: Mapping[int, int] = field(default_factory=dict)
    src: Domain = field(default_factory=EpochDomain)
    dst: Domain = field(default_factory=SeqDomain)
    block: int = 0

    def __post_init__(self) -> None:
        _non_decreasing(
            self.sent_through, f"EpochToSeq({self.edge!r}): counts must not decrease with the epoch"
        )

    @property
    def source(self) -> Domain:
        return self.src

    @property
    def target(self) -> Domain:
        return self.dst

    @property
    def kind(self) -> str:
        return "epoch_to_seq"

    def latest_message(self, t: Tick) -> Tick:
        """Into a sequence-number region, epoch e becomes ``(e, INF)``: all its numbers."""
        return self._refuse(t) if t.stepped else Tick.all_of(t.epoch)

    def _apply(self, maxima: tuple[Time, ...]) -> Frontier:
        if self.block > 0:
            return Frontier(self.dst, ((self.edge, int(maxima[0]) * self.block),))  # type: ignore[arg-type]
        epochs = sorted(self.sent_through)
        i = bisect.bisect_right(epochs, maxima[0])
        if i == 0:
            return Frontier.empty(self.dst)
        return Frontier(self.dst, ((self.edge, self.sent_through[epochs[i - 1]]),))


@dataclass(frozen=True)
class SeqToEpoch(Projection):
    """Translator from sequence numbers on ``edge`` to epochs (windows of messages).

    ``last_seq[t]`` is the sequence number of the last message of epoch t on ``edge``;
    φ(f) = ↓t for the greatest t whose whole window is in f.

    With ``block`` > 0 epoch t's window is ``((t - 1) * block, t * block]`` and
    φ(↓(edge, n)) = ↓(n // block): only whole blocks count (the engine's regions)."""

    edge: str
    last_seq: Mapping[int, int] = field(default_factory=dict)
    src: Domain = field(default_factory=SeqDomain)
    dst: Domain = field(default_factory=EpochDomain)
    block: int = 0

    def __post_init__(self) -> None:
        _non_decreasing(
            self.last_seq,
            f"SeqToEpoch({self.edge!r}): windows must not end earlier for a later epoch",
        )

    @property
    def source(self) -> Domain:
        return self.src

    @property
    def target(self) -> Domain:
        return self.dst

    @property
    def kind(self) -> str:
        return "seq_to_epoch"

    def latest_message(self, t: Tick) -> Tick:
        """Out of a region, ``(e, k)`` becomes e - 1 (the translator holds epoch e back
        until it has every record of e) and ``(e, INF)`` becomes e."""
        return Tick(t.epochs_done) if t.stepped else self._refuse(t)

    def _apply(self, maxima: tuple[Any, ...]) -> Frontier:
        seen = max((t[1] for t in maxima if t[0] == self.edge), default=None)
        if seen is None:
            return Frontier.empty(self.dst)
        if self.block > 0:
            whole = int(seen) // self.block
            return Frontier(self.dst, (whole,)) if whole > 0 else Frontier.empty(self.dst)
        done = None
        for t in sorted(self.last_seq):  # only a gap-free run of finished epochs counts
            if self.last_seq[t] > seen:
                break
            done = t
        return Frontier(self.dst, (done,)) if done is not None else Frontier.empty(self.dst)


def _non_decreasing(by_epoch: Mapping[int, int], problem: str) -> None:
    """Raise ``TimeError(problem)`` unless the values grow (weakly) with the epoch."""
    values = [by_epoch[t] for t in sorted(by_epoch)]
    if any(a > b for a, b in pairwise(values)):
        raise TimeError(f"{problem}, got {dict(sorted(by_epoch.items()))}")


def _as_tuple(t: Time) -> tuple[Any, ...]:
    return t if isinstance(t, tuple) else (t,)


def _unwrap(t: tuple[Any, ...], domain: Domain) -> Time:
    """A depth-1 tuple is an epoch in an epoch domain."""
    return t[0] if isinstance(domain, EpochDomain) else t


def _lex_predecessor(t: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The greatest time strictly below finite ``t`` in lexicographic order, written
    with unbounded trailing coordinates: (3, 0) -> (2, ∞); (0, 0) -> None."""
    for i in range(len(t) - 1, -1, -1):
        if t[i] > 0:
            return (*t[:i], t[i] - 1, *([INF] * (len(t) - 1 - i)))
    return None


def projection_for(kind: str, source: Domain, target: Domain) -> Projection:
    """Build the projection named ``kind`` (the scenario-format names) between two
    domains, checking that the domains fit it."""
    if kind == "identity":
        if source != target:
            raise TimeError(
                f"identity projection needs the same domain at both ends, got "
                f"{source!r} -> {target!r}; use loop_entry, loop_exit or recorded"
            )
        return Identity(source)
    if kind == "loop_entry":
        if not isinstance(target, ProductDomain):
            raise TimeError(
                f"loop_entry must go from depth k to a product domain of depth k+1, got {source!r} -> {target!r}"
            )
        return LoopEntry(source, target)
    if kind == "loop_exit":
        if not isinstance(source, ProductDomain):
            raise TimeError(
                f"loop_exit must go from a product domain of depth k+1 to depth k, got {source!r} -> {target!r}"
            )
        return LoopExit(source, target)
    if kind == "feedback":
        if source != target or not isinstance(source, ProductDomain):
            raise TimeError(
                f"feedback needs the same product domain at both ends, got {source!r} -> {target!r}"
            )
        return Feedback(source)
    if kind in ("epoch_to_seq", "seq_to_epoch"):
        # The engine's translators: epoch e owns the numbers ((e-1)·SEQ_BLOCK, e·SEQ_BLOCK]
        # of edge label SEQ_LABEL (falkirk.time.ticks).
        want = (EpochDomain, SeqDomain) if kind == "epoch_to_seq" else (SeqDomain, EpochDomain)
        if not (isinstance(source, want[0]) and isinstance(target, want[1])):
            raise TimeError(f"{kind} must go from {want[0]()!r} to {want[1]()!r}, got {source!r} -> {target!r}")
        if kind == "epoch_to_seq":
            return EpochToSeq(SEQ_LABEL, src=source, dst=target, block=SEQ_BLOCK)
        return SeqToEpoch(SEQ_LABEL, src=source, dst=target, block=SEQ_BLOCK)
    if kind == "recorded":
        return Recorded(source, target)
    if kind == "empty":
        return Empty(source, target)
    raise TimeError(
        f"unknown projection {kind!r}: expected identity, loop_entry, loop_exit, "
        "feedback, epoch_to_seq, seq_to_epoch, recorded or empty"
    )
