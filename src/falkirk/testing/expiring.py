"""Keys that expire (state time-to-live): the input generator and the rules in plain
Python that ``tests/operators/test_window_ttl.py`` and the kill chain of
``tests/engine/test_ttl_recovery.py`` check a window's and an aggregate's ``ttl``
against.

Rows of epoch e have event time ``10 e`` (an integer column) and fall in tumbling
windows of 200 (:data:`SIZE`), so windows close at epochs 21, 41, 61... Every
epoch brings two new keys (never seen again), an ``r`` key back every sixth epoch and
a ``q`` key every second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession

SIZE, STEP = 200, 10
#: r keys (r0..r5) back every 6th epoch, q keys (q0, q1) every 2nd.
R, Q = 6, 2
NEW = 2


def batch_rows(epoch: int) -> list[tuple[str, int, int]]:
    """Epoch ``epoch``'s rows (key, event time, value)."""
    b, t = epoch - 1, STEP * epoch
    return [*((f"n{b}_{i}", t, b + i) for i in range(NEW)), (f"r{b % R}", t, b + 7), (f"q{b % Q}", t, b + 8)]


def generate(spark: SparkSession, batch: int) -> DataFrame:
    return spark.range(NEW + 2).selectExpr(
        f"CASE WHEN id < {NEW} THEN concat('n{batch}_', id) WHEN id = {NEW} THEN 'r{batch % R}' ELSE 'q{batch % Q}' END AS k",
        f"CAST({STEP * (batch + 1)} AS bigint) AS t",
        f"CAST(CASE WHEN id < {NEW} THEN {batch} + id WHEN id = {NEW} THEN {batch} + 7 ELSE {batch} + 8 END AS bigint) AS v",
    )


@dataclass
class WindowReference:
    """The window and its ttl in plain Python. ``ttl``: epochs; ``span``: event time."""

    ttl: int | None = None
    span: int | None = None
    #: key -> window start -> [count, sum, latest time]
    windows: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    changed: dict[str, int] = field(default_factory=dict)
    out: list[tuple[Any, ...]] = field(default_factory=list)
    expired: list[tuple[Any, ...]] = field(default_factory=list)
    #: epoch -> the keys held at its end
    live: dict[int, int] = field(default_factory=dict)

    def run(self, epochs: int) -> WindowReference:
        watermark: int | None = None
        for e in range(1, epochs + 1):
            closing = watermark  # windows close at the watermark the epoch started with
            rows = batch_rows(e)
            for k, t, v in rows:
                w = self.windows.setdefault(k, {}).setdefault(t - t % SIZE, [0, 0, t])
                w[0], w[1], w[2] = w[0] + 1, w[1] + v, max(w[2], t)
            touched = {k for k, _, _ in rows}
            closed = set()
            for k, windows in self.windows.items():
                for start in sorted(windows):
                    if closing is not None and start + SIZE <= closing:
                        n, s, _ = windows.pop(start)
                        self.out.append((k, start, start + SIZE, n, s, e))
                        closed.add(k)
            for k in touched | closed:
                self.changed[k] = e
            for k in list(self.windows):
                if k in touched | closed:
                    continue
                if self.ttl is not None:
                    idle = self.changed[k] <= e - self.ttl
                else:
                    assert self.span is not None
                    idle = closing is not None and max(w[2] for w in self.windows[k].values()) <= closing - self.span
                if idle:
                    for start, (n, s, _) in sorted(self.windows[k].items()):
                        self.expired.append((k, start, start + SIZE, n, s, e))
                    del self.windows[k]
            self.windows = {k: w for k, w in self.windows.items() if w}
            self.live[e] = len(self.windows)
            watermark = max(t for _, t, _ in rows) if watermark is None else max(watermark, max(t for _, t, _ in rows))
        return self

    def open_windows(self) -> list[tuple[Any, ...]]:
        return sorted((k, start, start + SIZE, n, s) for k, ws in self.windows.items() for start, (n, s, _) in ws.items())




def aggregate_reference(epochs: int, ttl: int) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """An aggregate's (count and sum per key) output and expired rows, each
    (key, n, s, epoch), sorted: a key no epoch changed for ``ttl`` epochs leaves,
    its last values expired, unless it has a row in that epoch."""
    state: dict[str, tuple[int, int, int]] = {}
    out, expired = [], []
    for e in range(1, epochs + 1):
        rows = batch_rows(e)
        touched = {k for k, _, _ in rows}
        for k, (n, s, last) in sorted(state.items()):
            if last <= e - ttl and k not in touched:
                expired.append((k, n, s, e))
                del state[k]
        for k, _, v in rows:
            n, s, _ = state.get(k, (0, 0, 0))
            state[k] = (n + 1, s + v, e)
        out += [(k, *state[k][:2], e) for k in sorted(touched)]
    return sorted(out), sorted(expired)
