"""Progress of a running pipeline for the person watching it.

On a terminal, a live display (rich) that keeps one status line up to date: what the
command is doing now, the last committed epoch, its records and rate, the last
checkpoint and the epochs in flight. Anywhere else (a pipe, a log file, CI), the same
facts as one plain line per epoch, so logs stay greppable.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import Progress as RichProgress
from rich.progress import SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from falkirk.runtime import RunReport


def epoch_line(epoch: int, seconds: float, report: RunReport) -> str:
    """One epoch's facts as a line."""
    last = report.checkpoints[-1] if report.checkpoints else None
    ckpt = f"{last[0]}@{last[1]} ({last[2]})" if last else "none yet"
    rate = report.last_records / seconds if seconds > 0 else 0.0
    return (
        f"epoch {epoch:4d} | {report.last_records:7d} records in {seconds:5.2f} s = {rate:8.0f} records/s "
        f"| last checkpoint {ckpt} | epochs in flight {report.in_flight}"
    )


class Progress:
    """``with Progress("clickstream") as progress: ... Engine(..., on_epoch=progress.on_epoch)``;
    ``progress.doing("recovering")`` says what the command does now. ``live``: force
    (True) or refuse (False) the live display; by default live only on a terminal."""

    def __init__(self, name: str, *, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.name = name
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.epochs = 0
        self._progress: RichProgress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> Progress:
        if self.live:
            self._progress = RichProgress(
                SpinnerColumn(),
                TextColumn("[bold]{task.description}"),
                TextColumn("{task.fields[detail]}"),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task(self.name, total=None, detail="starting")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._progress is not None:
            self.doing(f"done: {self.epochs} epoch{'' if self.epochs == 1 else 's'}" if kind is None else "stopped")
            self._progress.stop()

    def doing(self, what: str) -> None:
        """Say what the command is doing now."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, detail=what)
        else:
            print(f"{self.name}: {what}", file=self.stream, flush=True)

    def on_epoch(self, epoch: int, seconds: float, report: RunReport) -> None:
        """The engine's ``on_epoch`` callback."""
        self.epochs += 1
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, detail=epoch_line(epoch, seconds, report))
        else:
            print(epoch_line(epoch, seconds, report), file=self.stream, flush=True)
