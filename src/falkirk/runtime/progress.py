"""Progress of a running pipeline for the person watching it (``Engine(progress=)``).

* ``progress=None`` (the default): when standard output is a terminal, one live line
  per pipeline, kept up to date - what the run is doing, the last committed epoch,
  its input rows and rate, the last checkpoint and the epochs in flight. Anywhere
  else (a service's log, a pipe, CI) nothing per epoch, so a log does not fill up.
* ``progress=True``: the live line on a terminal, else one plain line per epoch.
* ``progress=False``: nothing.

Whatever ``progress`` says, logging at INFO for ``falkirk.progress`` gives the plain
line per epoch through the log (when no display shows it).

The rows are counted by Spark as it reads them (an observation of each source's
output: :class:`~falkirk.execution.work.EpochCounts`), never by reading the input
again in the driver; a run with neither a display, ``on_epoch`` nor a dashboard does
not count.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import Progress as RichProgress
from rich.progress import SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Column

from falkirk.execution.report import RunReport

#: Logs the plain line per epoch at INFO (when no display shows it).
logger = logging.getLogger("falkirk.progress")


def epoch_line(epoch: int, seconds: float, report: RunReport) -> str:
    """One epoch's facts, compact enough for an 80-column terminal, e.g.
    ``epoch 3 · 50 rows in 1.2 s · 42 rows/s · ckpt per_user@3 · 2 in flight``."""
    rate = report.last_records / seconds if seconds > 0 else 0.0
    parts = [f"epoch {epoch}", f"{report.last_records:,} rows in {seconds:.1f} s", f"{rate:,.0f} rows/s" if rate >= 10 else f"{rate:.1f} rows/s"]
    if report.checkpoints:
        name, at, _ = report.checkpoints[-1]
        parts.append(f"ckpt {name}@{at}")
    elif report.restored_checkpoints:
        name, at = report.restored_checkpoints[-1]
        parts.append(f"ckpt {name}@{at} (restored)")
    if report.in_flight > 1:
        parts.append(f"{report.in_flight} in flight")
    return " · ".join(parts)


@contextmanager
def logs_above(stream: TextIO) -> Iterator[None]:
    """While a live display redraws its line, log handlers that write to the
    terminal write through ``stream`` (the display's, which prints above the line)
    instead of gluing their text onto it; put back afterwards."""
    originals = {id(sys.__stderr__), id(sys.__stdout__)}
    moved: list[tuple[logging.StreamHandler[TextIO], TextIO]] = []
    loggers = [logging.getLogger(), *(x for x in logging.Logger.manager.loggerDict.values() if isinstance(x, logging.Logger))]
    for log in loggers:
        for handler in log.handlers:
            if type(handler) is logging.StreamHandler and id(handler.stream) in originals:
                moved.append((handler, handler.stream))
                handler.setStream(stream)
    try:
        yield
    finally:
        for handler, before in moved:
            handler.setStream(before)


class Progress:
    """``with Progress("clickstream") as progress: ... progress.on_epoch(...)``;
    ``progress.doing("recovering")`` says what the run does now. ``live``: force
    (True) or refuse (False) the live display; by default live only on a terminal."""

    def __init__(self, name: str, *, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.name = name
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.epochs = 0
        self._progress: RichProgress | None = None
        self._task: TaskID | None = None
        self._logs: AbstractContextManager[None] | None = None

    def __enter__(self) -> Progress:
        if self.live:
            self._progress = RichProgress(
                SpinnerColumn(),
                TextColumn("[bold]{task.description}", table_column=Column(no_wrap=True, min_width=min(len(self.name), 24))),
                TextColumn("{task.fields[detail]}"),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
                transient=False,
            )
            self._progress.start()
            # The cursor stays shown: a run killed (SIGKILL) cannot show it again.
            self._progress.console.show_cursor(True)
            self._logs = logs_above(sys.stderr)  # (rich redirects sys.stderr above its line)
            self._logs.__enter__()
            self._task = self._progress.add_task(self.name, total=None, detail="starting")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._progress is not None:
            self.doing(f"done: {self.epochs} epoch{'' if self.epochs == 1 else 's'}" if kind is None else "ended early")
            if self._logs is not None:
                self._logs.__exit__(None, None, None)
                self._logs = None
            self._progress.stop()

    def doing(self, what: str) -> None:
        """Say what the run is doing now."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, detail=what)
        else:
            print(f"{self.name}: {what}", file=self.stream, flush=True)

    def on_epoch(self, epoch: int, seconds: float, report: RunReport) -> None:
        """An epoch committed (the engine calls it as it calls ``on_epoch``)."""
        self.epochs += 1
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, detail=epoch_line(epoch, seconds, report))
            self._progress.refresh()  # drawn now: an epoch shows even if the next comes within a refresh
        else:
            print(f"{self.name}: {epoch_line(epoch, seconds, report)}", file=self.stream, flush=True)


def display_for(name: str, progress: bool | None, stream: TextIO | None = None) -> Progress | None:
    """The display ``Engine(progress=progress)`` shows (see the module), None for none."""
    stream = stream or sys.stdout
    terminal = stream.isatty()
    if progress is False or (progress is None and not terminal):
        return None
    return Progress(name, stream=stream, live=terminal)


class EpochWatchers:
    """Who hears of a run's committed epochs - the display (``progress``), the log at
    INFO, the user's ``on_epoch`` - and so whether the run counts rows."""

    def __init__(self, name: str, progress: bool | None, on_epoch: Callable[[int, float, RunReport], None] | None) -> None:
        self.name = name
        self.progress = progress
        self.on_epoch = on_epoch
        #: The display of the run under way (None: none, or no run).
        self.display: Progress | None = None

    @contextmanager
    def watching(self, root: str) -> Iterator[None]:
        """While a run runs: its display, if ``progress`` asks for one."""
        self.display = display_for(self.name, self.progress)
        try:
            with self.display or nullcontext():
                if self.display is not None:
                    self.display.doing(f"starting on {root}")
                yield
        finally:
            self.display = None

    def counting(self, telemetry: bool) -> bool:
        """Whether epochs count their rows (for whom: see :class:`~falkirk.execution.work.EpochCounts`)."""
        watched = self.display is not None or self.on_epoch is not None or telemetry
        return watched or logger.isEnabledFor(logging.INFO)

    def committed(self, epoch: int, seconds: float, report: RunReport) -> None:
        """Epoch ``epoch`` committed ``seconds`` after it was planned."""
        if self.display is not None:
            self.display.on_epoch(epoch, seconds, report)
        elif logger.isEnabledFor(logging.INFO):
            logger.info("%s: %s", self.name, epoch_line(epoch, seconds, report))
        if self.on_epoch:
            self.on_epoch(epoch, seconds, report)
