"""The windowed-counts demo's reference and input generator (:mod:`falkirk.demo.windowed`
holds the pipeline).

Event-time windows in plain Python (:class:`Windows`, :func:`reference`): the
independent computation the window operator's tests and the windowed-counts example
are checked against. Same semantics as :mod:`falkirk.graph.windows`, written the
obvious way: a dictionary of open windows, rows applied one at a time, the watermark
advanced at the end of every epoch, and a final epoch that closes everything.
:func:`write_input` generates input files and :func:`read_input` reads them back for
:func:`expected`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from falkirk.graph import Session, Sliding, Tumbling, WindowShape
from falkirk.graph.durations import micros

_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")


@dataclass(frozen=True)
class Expected:
    """What an uninterrupted ``windowed_counts`` run writes."""

    windows: list[tuple[int, int, str, int]]  # window_start, window_end, word, count
    invalid: int


def windows_of(ts: int, shape: WindowShape) -> list[tuple[int, int]]:
    """The fixed windows ``(start, end)`` a row at ``ts`` falls in."""
    if isinstance(shape, Tumbling):
        size = micros(shape.size)
        start = ts - ts % size
        return [(start, start + size)]
    assert isinstance(shape, Sliding)
    size, slide = micros(shape.size), micros(shape.slide)
    last = ts - ts % slide
    starts = range(last, ts - size, -slide)
    return sorted((s, s + size) for s in starts if s > ts - size)


class Windows:
    """Open windows per key with counts, closed by a watermark."""

    def __init__(self, shape: WindowShape, delay: int) -> None:
        self.shape, self.delay = shape, delay
        self.fixed: dict[tuple[str, int], list[int]] = {}  # (key, start) -> [end, count]
        self.sessions: dict[str, list[list[int]]] = {}  # key -> [[start, end, count], ...]
        self.watermark: int | None = None
        self.closed_at: int | None = None  # the watermark windows last closed at
        self.max_time: int | None = None
        self.late = 0
        #: The windows the last epoch's rows went into, with their counts after it
        #: (what update mode emits).
        self.updated: list[tuple[int, int, str, int]] = []

    def epoch(self, rows: list[tuple[int, str]], final: bool = False) -> list[tuple[int, int, str, int]]:
        """Apply one epoch's valid ``(ts, key)`` rows; the windows it closes."""
        wm, closed = self.watermark, self.closed_at
        if isinstance(self.shape, Session):
            touched = self._sessions(rows, closed)
        else:
            touched = set()
            for ts, key in rows:
                for start, end in windows_of(ts, self.shape):
                    if closed is not None and end <= closed:  # its window has closed
                        self.late += 1
                        continue
                    self.fixed.setdefault((key, start), [end, 0])[1] += 1
                    touched.add((key, start))
        if isinstance(self.shape, Session):
            now = [(s, e, k, c) for k, sessions in self.sessions.items() for s, e, c in sessions if (k, s) in touched]
        else:
            now = [(s, self.fixed[(k, s)][0], k, self.fixed[(k, s)][1]) for k, s in touched]
        self.updated = sorted(now)
        for ts, _ in rows:
            self.max_time = ts if self.max_time is None else max(self.max_time, ts)
        # Windows close at the watermark the epoch started with, after its rows
        # (Spark's order); the final epoch closes everything.
        self.closed_at = 2**63 - 1 if final else wm
        out = self._close(self.closed_at)
        if self.max_time is not None:
            candidate = self.max_time - self.delay
            self.watermark = candidate if wm is None else max(wm, candidate)
        if final:
            self.watermark = 2**63 - 1
        return out

    def _sessions(self, rows: list[tuple[int, str]], wm: int | None) -> set[tuple[str, int]]:
        """Merge the rows into their keys' sessions; the sessions they went into."""
        assert isinstance(self.shape, Session)
        new: dict[str, list[list[int]]] = {}
        touched: set[tuple[str, int]] = set()
        for ts, key in rows:
            if wm is not None and ts + micros(self.shape.gap) <= wm:
                self.late += 1
                continue
            new.setdefault(key, []).append([ts, ts + micros(self.shape.gap), 1])
        for key, intervals in new.items():
            merged: list[list[int]] = []
            fresh: list[bool] = []
            items: list[tuple[int, int, int, bool]] = [(s, e, c, False) for s, e, c in self.sessions.get(key, [])]
            items += [(s, e, c, True) for s, e, c in intervals]
            for start, end, count, is_new in sorted(items):
                if merged and start <= merged[-1][1]:  # at most gap apart: one session
                    merged[-1][1] = max(merged[-1][1], end)
                    merged[-1][2] += count
                    fresh[-1] = fresh[-1] or is_new
                else:
                    merged.append([start, end, count])
                    fresh.append(is_new)
            self.sessions[key] = merged
            touched |= {(key, m[0]) for m, f in zip(merged, fresh, strict=True) if f}
        return touched

    def _close(self, wm: int | None) -> list[tuple[int, int, str, int]]:
        if wm is None:
            return []
        out = [(start, end, key, count) for (key, start), (end, count) in self.fixed.items() if end <= wm]
        self.fixed = {k: v for k, v in self.fixed.items() if v[0] > wm}
        for key, sessions in list(self.sessions.items()):
            out += [(s, e, key, c) for s, e, c in sessions if e <= wm]
            left = [s for s in sessions if s[1] > wm]
            if left:
                self.sessions[key] = left
            else:
                del self.sessions[key]
        return out


def parse(ts: str | None, word: str | None) -> tuple[int, str] | None:
    """A valid ``(ts, word)`` row, or None (as ``falkirk.demo.windowed.words``).
    The lines are the generator's plain ones: no quoting (Spark's CSV reader would
    unquote ``"a,b"``, which this does not)."""
    if ts is None or not _INTEGER.fullmatch(ts.strip(" ")) or not word:  # Spark's trim: spaces only
        return None
    return int(ts.strip(" ")), word


def reference(epochs: Iterable[list[tuple[str | None, str | None]]], shape: WindowShape, delay: int) -> Expected:
    """Every window an uninterrupted ``windowed_counts`` run writes, and the number
    of invalid rows, for raw ``(ts, word)`` rows per epoch."""
    windows = Windows(shape, delay)
    out: list[tuple[int, int, str, int]] = []
    invalid = 0
    for raw in epochs:
        rows = [r for r in (parse(ts, word) for ts, word in raw) if r is not None]
        invalid += len(raw) - len(rows)
        out += windows.epoch(rows)
    out += windows.epoch([], final=True)
    return Expected(sorted(out), invalid)


#: Invalid lines the generator mixes in: each is dropped and counted.
BAD_LINES = ("x,apple", "12.5,pear", "7,", ",plum", "3,fig,extra", "99999999999999999999,kiwi")


def write_input(
    directory: str | Path, *, epochs: int, rows: int, seed: int, words: int = 6, spread: int = 40, step: int = 10
) -> None:
    """CSV files ``e00000.csv``... (header ``ts,word``), one per epoch, for tests and
    the bench: event times advance by about ``step`` per epoch and arrive up to
    ``spread`` out of order (so some rows are late), with a few invalid lines."""
    rng = random.Random(seed)
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    vocabulary = [f"w{i}" for i in range(words)]
    for e in range(epochs):
        lines = ["ts,word"]
        for _ in range(rows):
            ts = e * step + rng.randint(0, step) - rng.randint(0, spread)
            lines.append(f"{ts},{rng.choice(vocabulary)}")
        lines += rng.sample(BAD_LINES, 2)
        rng.shuffle(lines[1:])
        (root / f"e{e:05d}.csv").write_text("\n".join(lines) + "\n")


def read_input(directory: str | Path) -> list[list[tuple[str | None, str | None]]]:
    """Every file's rows as raw ``(ts, word)`` strings, in name order (a line
    without exactly two fields as ``(None, None)``), for :func:`expected`."""
    out = []
    for path in sorted(Path(directory).glob("*.csv")):
        rows: list[tuple[str | None, str | None]] = []
        for line in path.read_text().splitlines()[1:]:
            parts = line.split(",")
            rows.append((parts[0], parts[1] or None) if len(parts) == 2 else (None, None))
        out.append(rows)
    return out


def expected(epochs: Iterable[list[tuple[str | None, str | None]]], shape: WindowShape, watermark_delay: int) -> Expected:
    """The output of an uninterrupted run over ``epochs`` (raw ``(ts, word)`` strings
    per file), in plain Python, independent of Spark and of the engine."""
    return reference(epochs, shape, watermark_delay)
