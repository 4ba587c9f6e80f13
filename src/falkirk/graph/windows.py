"""Event-time windows: their shapes and the ``window`` processor's spec.

A window operator groups rows per key into windows over an event-time column: an
integer (seconds, milliseconds: any unit; sizes are integers in the same unit) or a
``timestamp``/``timestamp_ntz`` (sizes are durations, ``"10 minutes"`` or a
``timedelta``; see :mod:`falkirk.operators.event_time`):

* :class:`Tumbling` ``(size)``: windows ``[k*size, (k+1)*size)``;
* :class:`Sliding` ``(size, slide)``: windows ``[k*slide, k*slide + size)``, each row in
  every window that covers it (overlapping windows are separate windows);
* :class:`Session` ``(gap)``: per key, rows at most ``gap`` apart form one window
  ``[first, last + gap)`` (as in Spark's ``session_window``); a row bridging two
  sessions merges them.

The watermark is the greatest event time seen minus ``watermark_delay``, advanced at
the end of every epoch (never backwards). An epoch first merges its rows into their
windows, then closes (and emits) the windows whose end is at or below the watermark
it started with. A row whose window closed in an earlier epoch - its end (a session
row: its ``ts + gap``) at or below the watermark that epoch closed windows at - is
*late*: it is never merged into anything; it goes to the operator's ``late`` output
with a reason (and is counted), for a dead-letter sink or to be dropped. This is
Spark Structured Streaming's order (its late-event and eviction watermarks), so both
give the same windows over the same epochs. The epoch that ends the input
(``Engine.run(finish=True)``) closes every window.

A key whose windows stay open while nothing happens to them (long windows, a
watermark held back) can be made to leave with ``ttl=``: ``N`` epochs without a row
or a window closed, or :class:`EventTimeTtl` (a duration on event time: no row newer
than the watermark minus it). Its open windows go, with their values so far, to the
``expired()`` output, never to ``out``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar

from falkirk.graph.durations import Duration, micros, span
from falkirk.graph.exceptions import GraphError
from falkirk.graph.policies import (
    ContinuousEventualCheckpoint,
    EagerCheckpoint,
    FullHistory,
    LazyCheckpoint,
    LogOutputs,
    Policy,
    Stateless,
)
from falkirk.graph.specs import EXPIRED_PORT, OperatorSpec, check_ttl

#: Aggregates a window keeps as partials (algebraic: merged without the rows).
WINDOW_AGGREGATES = ("count", "sum", "min", "max", "avg")
#: Output modes: a window's row once, when it closes; or every epoch that changes it.
MODES = ("append", "update")


@dataclass(frozen=True)
class EventTimeTtl:
    """A window's time-to-live on event time: a key none of whose rows is newer
    than the watermark minus ``span`` leaves the state, at the first epoch whose
    starting watermark (the one windows close at) is at least ``span`` past the
    key's latest row. ``span`` is an integer in an integer event-time column's unit,
    or a duration (``"2 hours"``, a ``timedelta``) over a timestamp column;
    ``window(..., ttl="2 hours")`` means ``EventTimeTtl("2 hours")``."""

    span: int | str | timedelta | Duration

    def __post_init__(self) -> None:
        object.__setattr__(self, "span", span(self.span, f"EventTimeTtl({self.span!r})", minimum=1))

    def __str__(self) -> str:
        return f"event time {self.span}"


@dataclass(frozen=True)
class WindowShape:
    """Base of the window shapes. Sizes are integers in an integer event-time
    column's unit, or durations (``"10 minutes"``, a ``timedelta``: see
    :mod:`falkirk.graph.durations`) over a timestamp column - one or the other."""

    def describe(self) -> str:
        raise NotImplementedError

    def spans(self) -> tuple[int | Duration, ...]:
        """The shape's sizes, as given (normalised)."""
        raise NotImplementedError

    def in_micros(self) -> WindowShape:
        """The same shape with every duration in microseconds (what the operator
        computes with over a timestamp column)."""
        raise NotImplementedError

    @property
    def timed(self) -> bool:
        """Whether the sizes are durations (for a timestamp column)."""
        return any(isinstance(v, Duration) for v in self.spans())

    def _check_one_kind(self) -> None:
        kinds = {isinstance(v, Duration) for v in self.spans()}
        if len(kinds) > 1:
            raise GraphError(f"{self!r}: give every size as an integer (an integer column) or every one as a duration (a timestamp column)")


@dataclass(frozen=True, init=False)
class Tumbling(WindowShape):
    """Windows ``[k*size, (k+1)*size)``, one per row."""

    size: int | Duration

    def __init__(self, size: int | str | timedelta | Duration) -> None:
        object.__setattr__(self, "size", span(size, f"Tumbling(size={size!r})"))

    def describe(self) -> str:
        return f"tumbling windows of {self.size}"

    def spans(self) -> tuple[int | Duration, ...]:
        return (self.size,)

    def in_micros(self) -> Tumbling:
        return Tumbling(micros(self.size))


@dataclass(frozen=True, init=False)
class Sliding(WindowShape):
    """Windows ``[k*slide, k*slide + size)``: ``ceil(size / slide)`` per row."""

    size: int | Duration
    slide: int | Duration

    def __init__(self, size: int | str | timedelta | Duration, slide: int | str | timedelta | Duration) -> None:
        what = f"Sliding(size={size!r}, slide={slide!r})"
        object.__setattr__(self, "size", span(size, what))
        object.__setattr__(self, "slide", span(slide, what))
        self._check_one_kind()
        size, slide = micros(self.size), micros(self.slide)
        if not 1 <= slide <= size:
            raise GraphError(f"{what}: need 1 <= slide <= size")
        if size // slide > 1000:
            raise GraphError(f"{what}: more than 1000 windows per row; use a larger slide")

    @property
    def windows_per_row(self) -> int:
        return -(-micros(self.size) // micros(self.slide))

    def describe(self) -> str:
        return f"sliding windows of {self.size} every {self.slide}"

    def spans(self) -> tuple[int | Duration, ...]:
        return (self.size, self.slide)

    def in_micros(self) -> Sliding:
        return Sliding(micros(self.size), micros(self.slide))


@dataclass(frozen=True, init=False)
class Session(WindowShape):
    """Per key, rows at most ``gap`` apart form a window ``[first, last + gap)``."""

    gap: int | Duration

    def __init__(self, gap: int | str | timedelta | Duration) -> None:
        object.__setattr__(self, "gap", span(gap, f"Session(gap={gap!r})"))

    def describe(self) -> str:
        return f"sessions with a gap of {self.gap}"

    def spans(self) -> tuple[int | Duration, ...]:
        return (self.gap,)

    def in_micros(self) -> Session:
        return Session(micros(self.gap))


WINDOW_POLICIES: tuple[type[Policy], ...] = (
    Stateless,
    LogOutputs,
    LazyCheckpoint,
    EagerCheckpoint,
    FullHistory,
    ContinuousEventualCheckpoint,
)


@dataclass(frozen=True)
class WindowSpec(OperatorSpec):
    """Windowed aggregates per key over event time (see the module docstring)."""

    kind: ClassVar[str] = "window"
    ports: ClassVar[tuple[str, ...]] = ("out", "late")
    policies: ClassVar[tuple[type[Policy], ...]] = WINDOW_POLICIES
    keyed: ClassVar[bool] = True
    key: tuple[str, ...] = ()
    time: str = ""
    shape: WindowShape = field(default=None)  # type: ignore[assignment]
    aggregates: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)
    watermark_delay: int | Duration = 0
    mode: str = "append"
    #: ``fn(key, window_start, window_end, rows) -> pandas.DataFrame`` of
    #: ``output_schema``, instead of ``aggregates``: the window keeps its rows.
    fn: Callable[..., Any] | None = None
    output_schema: str = ""
    optional_ports: ClassVar[tuple[str, ...]] = ("late", EXPIRED_PORT)
    #: Time to live: ``N`` epochs in which no row arrived and no window closed, or an
    #: :class:`EventTimeTtl` (a duration given alone means one); the key leaves with
    #: its open windows (see the module docstring).
    ttl: int | str | timedelta | EventTimeTtl | None = None

    @property
    def output_ports(self) -> tuple[str, ...]:
        return (*self.ports, EXPIRED_PORT) if self.ttl is not None else self.ports

    def __post_init__(self) -> None:
        if not isinstance(self.shape, WindowShape):
            raise GraphError(f"window: shape must be Tumbling(...), Sliding(...) or Session(...), got {self.shape!r}")
        if not self.time:
            raise GraphError("window: name the event-time column (time=...)")
        if not self.key:
            raise GraphError("window: give at least one key column")
        delay = self.watermark_delay
        if delay != 0 or self.shape.timed:  # 0: no delay, in any unit
            delay = span(delay, f"window: watermark_delay={delay!r}", minimum=0)
            if isinstance(delay, Duration) != self.shape.timed and delay != 0:
                raise GraphError(
                    f"window: watermark_delay={self.watermark_delay!r} and {self.shape!r}: give both as integers "
                    "(an integer event-time column) or both as durations (a timestamp column)"
                )
            object.__setattr__(self, "watermark_delay", delay)
        if self.mode not in MODES:
            raise GraphError(f"window: mode must be one of {MODES}, got {self.mode!r}")
        if self.fn is not None:
            if self.aggregates or not callable(self.fn) or not self.output_schema:
                raise GraphError(
                    "window: give either aggregates, or fn=f(key, window_start, window_end, rows) -> DataFrame "
                    "with output_schema='...' (a function of the window's rows), not both"
                )
        elif not self.aggregates:
            raise GraphError("window: give at least one aggregate, e.g. {'count': ('count', None)}, or fn= and output_schema=")
        reserved = {"window_start", "window_end", *self.key}
        for out, agg in self.aggregates.items():
            if not isinstance(agg, tuple) or len(agg) != 2 or agg[0] not in WINDOW_AGGREGATES:
                raise GraphError(f"window aggregate {out!r} must be (func, column) with func in {WINDOW_AGGREGATES}, got {agg!r}")
            if agg[0] != "count" and agg[1] is None:
                raise GraphError(f"window aggregate {out!r} ({agg[0]}) needs a column")
            if out in reserved:
                raise GraphError(f"window aggregate {out!r}: the name is taken by a key or window column; rename it")
        if isinstance(self.ttl, (str, timedelta, Duration)):
            object.__setattr__(self, "ttl", EventTimeTtl(self.ttl))
        if not isinstance(self.ttl, EventTimeTtl):
            check_ttl(self.ttl)
        elif isinstance(self.ttl.span, Duration) != self.shape.timed:
            raise GraphError(
                f"window: ttl={self.ttl.span!r} and {self.shape!r}: give both as integers (an integer event-time "
                "column) or both as durations (a timestamp column)"
            )
