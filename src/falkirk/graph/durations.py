"""Durations of event time: window sizes, slides, gaps and watermark delays over a
``timestamp`` or ``timestamp_ntz`` column.

Over an integer event-time column a size is an integer in the column's own unit.
Over a timestamp column it is a :class:`Duration`, given as Spark writes intervals
(``"10 minutes"``, ``"1 hour 30 minutes"``, ``"500 milliseconds"``) or as a
:class:`datetime.timedelta`; the window operator then works in microseconds since
1970-01-01 00:00:00 UTC (windows aligned there, as Spark's ``window()``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from falkirk.graph.exceptions import GraphError

#: Microseconds per unit, by the names Spark's interval strings use (and short forms).
_UNITS = {
    "microsecond": 1, "us": 1,
    "millisecond": 1_000, "ms": 1_000,
    "second": 1_000_000, "sec": 1_000_000, "s": 1_000_000,
    "minute": 60_000_000, "min": 60_000_000, "m": 60_000_000,
    "hour": 3_600_000_000, "h": 3_600_000_000,
    "day": 86_400_000_000, "d": 86_400_000_000,
    "week": 604_800_000_000, "w": 604_800_000_000,
}  # fmt: skip
_WHOLE = re.compile(r"(\s*\d+\s*[a-z]+)+\s*")
_PART = re.compile(r"(\d+)\s*([a-z]+)")


@dataclass(frozen=True)
class Duration:
    """A span of event time over a timestamp column, in microseconds."""

    micros: int
    #: How the user wrote it (for messages and the state's signature).
    text: str

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Duration({self.text!r})"


def duration(value: str | timedelta, what: str, *, minimum: int = 1) -> Duration:
    """``value`` as a :class:`Duration` of at least ``minimum`` microseconds
    (``what`` names it in errors)."""
    if isinstance(value, timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        text = str(value)
    else:
        text = value.strip()
        spoken = text.lower().removeprefix("interval")
        micros = 0
        understood = _WHOLE.fullmatch(spoken) is not None
        for number, unit in _PART.findall(spoken) if understood else []:
            factor = _UNITS.get(unit, _UNITS.get(unit.removesuffix("s")))
            if factor is None:
                understood = False
                break
            micros += int(number) * factor
        if not understood:
            raise GraphError(
                f"{what}: {value!r} is not a duration; write it as Spark writes intervals, e.g. '10 minutes', "
                "'1 hour 30 minutes', '500 milliseconds', or give a datetime.timedelta"
            )
    if micros < minimum:
        raise GraphError(f"{what}: the duration {text!r} must be {'positive' if minimum == 1 else f'at least {minimum} microseconds'}")
    return Duration(micros, text)


def span(value: int | str | timedelta | Duration, what: str, *, minimum: int = 1) -> int | Duration:
    """A size given as an integer (an integer column's unit, >= ``minimum``) or as a
    duration (a timestamp column's): the integer, or a :class:`Duration`."""
    if isinstance(value, Duration):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, str, timedelta)):
        raise GraphError(f"{what}: give an integer (the event-time column's unit) or a duration ('10 minutes', a timedelta), got {value!r}")
    if isinstance(value, int):
        if value < minimum:
            raise GraphError(f"{what}: must be an integer >= {minimum}, got {value!r}")
        return value
    return duration(value, what, minimum=minimum)


def micros(value: int | Duration) -> int:
    """The microseconds of a duration (an integer passes: already in the column's unit)."""
    return value.micros if isinstance(value, Duration) else value
