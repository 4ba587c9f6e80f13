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

This module converts between ticks and frontiers and gives every tick an ``ordinal``:
an int that grows with the tick, used to version keyed state (its ``_epoch`` column)
and to order a checkpoint chain. Pure Python: the metadata store and the runtime
share it.
"""

from __future__ import annotations

from typing import Any

from falkirk.time.domains import INF, Domain, EpochDomain, ProductDomain, SeqDomain, Time
from falkirk.time.exceptions import TimeError
from falkirk.time.frontier import Frontier

Tick = int | tuple[int, Any]
"""An epoch, or ``(epoch, iteration)`` with an int iteration or ``INF``."""

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


def start_tick(domain: Domain) -> Tick:
    """The tick of a processor that has processed nothing."""
    return (0, INF) if isinstance(domain, (ProductDomain, SeqDomain)) else 0


def is_loop_tick(t: Tick) -> bool:
    return isinstance(t, tuple)


def epoch_of_tick(t: Tick) -> int:
    """The epoch a tick is in."""
    return int(t[0]) if isinstance(t, tuple) else int(t)


def epochs_done(t: Tick) -> int:
    """The last epoch a processor at tick ``t`` has wholly processed: e for ``e`` and
    ``(e, INF)``, e - 1 for ``(e, i)`` (epoch e still iterates)."""
    if isinstance(t, tuple):
        return int(t[0]) if t[1] == INF else int(t[0]) - 1
    return int(t)


def whole(epoch: int, domain: Domain) -> Tick:
    """The tick of a processor of ``domain`` that has processed all of ``epoch``."""
    return (epoch, INF) if isinstance(domain, (ProductDomain, SeqDomain)) else epoch


def seq_number(t: Tick) -> int:
    """The sequence number of a region's tick: ``(e, k)`` is record
    ``(e - 1) * SEQ_BLOCK + k``, ``(e, INF)`` is ``e * SEQ_BLOCK`` (all of epoch e)."""
    if not isinstance(t, tuple):
        raise TimeError(f"a sequence-number region has (epoch, count) ticks, got {t!r}")
    epoch, k = int(t[0]), t[1]
    if k == INF:
        return epoch * SEQ_BLOCK
    if not 0 <= k < SEQ_BLOCK - 1:
        raise TimeError(f"record {k!r} of epoch {epoch} is outside 0..{SEQ_BLOCK - 2}")
    return (epoch - 1) * SEQ_BLOCK + int(k)


def seq_tick(n: int) -> Tick:
    """The tick of sequence number ``n`` (see :func:`seq_number`); a number that
    ends an epoch's block is that whole epoch."""
    epoch, k = divmod(int(n), SEQ_BLOCK)
    return (epoch, INF) if k == 0 else (epoch + 1, k)


def tick_time(domain: Domain, t: Tick) -> Time:
    """Tick ``t`` as a time of ``domain``: a sequence-number tick becomes
    ``(SEQ_LABEL, n)``; other ticks are times already."""
    if isinstance(domain, SeqDomain):
        return (SEQ_LABEL, seq_number(t))
    return t


def tick_frontier(domain: Domain, t: Tick) -> Frontier:
    """↓t in ``domain`` (∅ for a start tick)."""
    if isinstance(domain, SeqDomain):
        n = seq_number(t)
        return Frontier.down(domain, [[SEQ_LABEL, n]]) if n > 0 else Frontier.empty(domain)
    if isinstance(domain, ProductDomain):
        if not isinstance(t, tuple):
            raise TimeError(f"a processor in a loop has (epoch, iteration) ticks, got {t!r}")
        if t[0] == 0:
            return Frontier.empty(domain)
        return Frontier.down(domain, [list(t)])
    if not isinstance(domain, EpochDomain) or isinstance(t, tuple):
        raise TimeError(f"an epoch processor has int ticks in the epoch domain, got {t!r} in {domain!r}")
    return Frontier.down(domain, [t]) if t > 0 else Frontier.empty(domain)


def tick_of(f: Frontier) -> Tick:
    """t for the frontier ↓t (a start tick for ∅). ⊤ and frontiers with several
    maxima are refused: a persisted frontier of the engine is finite and totally ordered."""
    if f.maxima is None:
        raise TimeError("a persisted frontier cannot be ⊤")
    if len(f.maxima) > 1:
        raise TimeError(f"an engine frontier has one maximal time, got {f!r}")
    if not f.maxima:
        return start_tick(f.domain)
    m = f.maxima[0]
    if isinstance(f.domain, SeqDomain):
        if not isinstance(m, tuple) or m[0] != SEQ_LABEL or m[1] == INF:
            raise TimeError(f"a region's frontier is ↓({SEQ_LABEL!r}, n) for a finite n, got {f!r}")
        return seq_tick(int(m[1]))
    if isinstance(f.domain, ProductDomain):
        if not isinstance(m, tuple) or len(m) != 2:
            raise TimeError(f"a loop frontier's maximum is (epoch, iteration), got {m!r}")
        return (int(m[0]), INF if m[1] == INF else int(m[1]))
    return int(m)  # type: ignore[arg-type]


def ordinal(t: Tick) -> int:
    """An int that orders ticks of one processor: 0 for the start tick, then growing
    with the tick (epoch ticks map to themselves)."""
    if not isinstance(t, tuple):
        return int(t)
    epoch, iteration = int(t[0]), t[1]
    if iteration == INF:
        return epoch * ITERATION_LIMIT
    if not 0 <= iteration < ITERATION_LIMIT - 1:
        raise TimeError(f"iteration {iteration!r} is outside 0..{ITERATION_LIMIT - 2}")
    return (epoch - 1) * ITERATION_LIMIT + int(iteration) + 1


def previous(t: Tick) -> Tick | None:
    """The tick just before ``t`` at which a processor may have sent something:
    ``(e, i - 1)``, or for ``(e, 0)`` all of epoch e - 1; ``e - 1`` for an epoch.
    None before the first. ``(e, INF)`` has no predecessor tick of its own."""
    if isinstance(t, tuple):
        epoch, iteration = int(t[0]), t[1]
        if iteration == INF:
            raise TimeError(f"{t!r} has no previous tick: it is a whole epoch")
        if iteration > 0:
            return (epoch, int(iteration) - 1)
        return (epoch - 1, INF) if epoch > 1 else None
    return t - 1 if t > 1 else None


def message_time(kind: str, t: Tick) -> Tick:
    """The time, in the receiver's domain, of the latest message a processor at
    tick ``t`` may have sent on an edge with projection ``kind``: into a loop epoch
    e becomes ``(e, 0)``; the feedback edge adds one iteration; out of a loop
    ``(e, i)`` becomes epoch e (its iterations so far may have sent rows of e); into
    a sequence-number region epoch e becomes ``(e, INF)`` (all its numbers); out of
    one, ``(e, k)`` becomes e - 1 (the translator holds epoch e back until it has
    every record of e) and ``(e, INF)`` becomes e."""
    if kind == "identity":
        return t
    if kind == "epoch_to_seq" and not isinstance(t, tuple):
        return (t, INF)
    if kind == "seq_to_epoch" and isinstance(t, tuple):
        return int(t[0]) if t[1] == INF else int(t[0]) - 1
    if kind == "loop_entry":
        return (epoch_of_tick(t), 0)
    if kind == "feedback" and isinstance(t, tuple):
        return t if t[1] == INF else (int(t[0]), int(t[1]) + 1)
    if kind == "loop_exit" and isinstance(t, tuple):
        return int(t[0])
    raise TimeError(f"no message time for a {kind} edge from tick {t!r}")


def tick_json(t: Tick) -> int | list[int | str]:
    """A tick as JSON: an epoch as an int, ``(e, i)`` as ``[e, i]`` (``"inf"`` for ∞)."""
    if isinstance(t, tuple):
        return [int(t[0]), "inf" if t[1] == INF else int(t[1])]
    return int(t)
