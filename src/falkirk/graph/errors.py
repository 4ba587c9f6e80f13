"""What a processor does with rows it cannot process: ``on_error`` and its limit.

When a processor's step fails on an epoch's data - an ANSI cast or arithmetic error
in a JVM expression, an exception raised by the user's function, a row too large -
the engine finds the rows that cause it (:mod:`falkirk.execution.isolation`):

- ``on_error="dead_letter"`` (the default): those rows leave the epoch, with the
  error's text, the processor and the epoch, on the processor's ``errors`` output
  (:meth:`~falkirk.graph.Stream.errors`). Connect a sink to it to keep them where
  you want; left unconnected, they go to the quarantine table inside the storage
  root (``falkirk inspect ROOT quarantine``), counted by ``falkirk status`` and
  the metrics. Either way no row is silently dropped, and a replay of the epoch
  after a crash quarantines exactly the same rows: their identities are committed
  with the epoch.
- ``on_error="stop"``: the run stops with one line naming the processor, the epoch,
  its input and the failing value (the rows stay in the input; fix the function or
  the data, then run again).

The ``errors`` output exists on every processor that reads a stream (not on sources
or sinks), connected or not, so switching ``on_error`` between runs never changes
the graph's edges.

A row-wise processor (``map``, ``validate``, ``union``...) quarantines the failing
rows themselves. A keyed processor (``aggregate``, ``stateful``) fails on a key -
its rows of the epoch together with its state (a sum that overflows, the user's
function over the key's rows) - and quarantines **all of that key's rows of the
epoch**: the key's state stays as it was before the epoch.

:class:`ErrorLimit` bounds how many rows one processor may quarantine in one epoch;
past it the run stops with a clear error (a systematic error - a wrong column, a
changed input format - is not a poison row). Errors that are not the data's - a
lost executor, a connection, a full disk - are never quarantined.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from falkirk.graph.exceptions import GraphError

#: The output port of a processor's quarantined rows.
ERRORS_PORT = "errors"
#: Columns an ``errors`` row carries after the processor's input columns.
ERROR_COLUMNS = ("processor", "epoch", "reason")


class OnError(Enum):
    """What a processor does with rows it cannot process (see the module docstring)."""

    STOP = "stop"
    DEAD_LETTER = "dead_letter"

    @classmethod
    def of(cls, value: OnError | str, where: str) -> OnError:
        """``value`` as an :class:`OnError` (its name as a string is accepted)."""
        if isinstance(value, OnError):
            return value
        try:
            return cls(value)
        except ValueError:
            choices = " or ".join(repr(m.value) for m in cls)
            raise GraphError(f"{where}: on_error must be {choices}, got {value!r}") from None


@dataclass(frozen=True)
class ErrorLimit:
    """How many rows one processor may quarantine in one epoch before the run stops:
    more than ``rows`` *and* more than ``share`` of the rows it read in the epoch.
    The default lets through a few bad rows in any epoch and up to 5% of a large one."""

    rows: int = 100
    share: float = 0.05

    def __post_init__(self) -> None:
        if self.rows < 0 or not 0 <= self.share <= 1:
            raise GraphError(f"ErrorLimit(rows={self.rows}, share={self.share}): rows must be >= 0 and share within [0, 1]")

    def allows(self, bad: int, read: int) -> bool:
        """Whether ``bad`` quarantined rows out of ``read`` are within the limit."""
        return bad <= self.rows or bad <= self.share * read

    def __str__(self) -> str:
        return f"ErrorLimit(rows={self.rows}, share={self.share})"


#: The limit of a pipeline that sets none.
DEFAULT_ERROR_LIMIT = ErrorLimit()
