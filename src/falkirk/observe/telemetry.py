"""What a running engine reports about itself: live per-processor figures, a timeline
of events, and Prometheus metrics (the dashboard serves all three).

Created by the engine when it runs with a dashboard (``Engine(ui=...)``); every
method is called by the engine and is thread-safe. Nothing here changes what the
engine computes or persists.

Metrics (one registry per engine, served at ``/metrics``):

* ``falkirk_epochs_committed_total``
* ``falkirk_records_total{processor}``: rows each processor emitted
* ``falkirk_rows_set_aside_total{processor}``: rows a processor could not process and
  set aside (its ``errors`` output or the quarantine table), per committed epoch
* ``falkirk_epoch_seconds`` (histogram): planning to commit of an epoch
* ``falkirk_checkpoint_seconds`` (histogram) and ``falkirk_checkpoint_bytes{processor}``
  (the last keyed-state checkpoint's size)
* ``falkirk_recovery_seconds`` (histogram): restarts and in-process rollbacks
* ``falkirk_garbage_collected_bytes_total``
* ``falkirk_end_to_end_latency_seconds`` (histogram): from the moment an epoch's
  input was planned to the moment every sink released its output (no recovery can
  take it back any more)

Row counts are per epoch: an epoch replayed after a rollback is not counted again.
A source's come from its offsets; the others are the rows Spark computed of each
output (exact, unless a consumer reads only part of it, e.g. a ``limit``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_SECONDS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
#: Events kept for the timeline.
TIMELINE = 500
#: Unreleased epochs whose planning time is kept (for the end-to-end latency).
_UNRELEASED = 10_000


@dataclass
class ProcessorView:
    """One processor as the dashboard shows it."""

    kind: str
    policy: str
    #: The last epoch this processor committed.
    epoch: int = 0
    #: Its latest committed rollback point (↓epoch), as the monitor knows it.
    frontier: int = 0
    last_checkpoint: int | None = None
    #: The monitor's low-watermark: nothing at or below it is needed by a recovery.
    low_watermark: int = 0
    #: Bytes of its last keyed-state checkpoint (None: it keeps no checkpoints).
    state_bytes: int | None = None
    records: int = 0
    records_per_second: float = 0.0
    #: Rows it set aside (``on_error="dead_letter"``) in the epochs this run committed.
    set_aside: int = 0


class Telemetry:
    """Live figures, timeline and metrics of one engine (see the module docstring)."""

    def __init__(
        self, pipeline: str, processors: dict[str, tuple[str, str]], edges: list[tuple[str, str]], sinks: list[str]
    ) -> None:
        """``processors``: name -> (kind, policy); ``edges``: (src, dst) pairs;
        ``sinks``: the processors whose release makes an epoch's output final."""
        self.pipeline = pipeline
        self.edges = edges
        self.sinks = sinks
        #: (processor, epoch) already counted: a replay is not counted twice.
        self._counted: set[tuple[str, int]] = set()
        #: When each epoch not yet released everywhere was planned (time.time()).
        self._planned: dict[int, float] = {}
        self._released: dict[str, int] = {s: 0 for s in sinks}
        self._lock = threading.Lock()
        self.processors = {n: ProcessorView(kind, policy) for n, (kind, policy) in processors.items()}
        self.epoch = 0
        self.started = time.time()
        self.events: deque[dict[str, Any]] = deque(maxlen=TIMELINE)
        self.last_recovery: dict[str, Any] | None = None
        #: None while a run runs; then how the last run ended (see :meth:`ended`).
        self.run_ended: str | None = None
        self.registry = CollectorRegistry()
        self.epochs_committed = Counter("falkirk_epochs_committed", "Epochs committed", registry=self.registry)
        self.records = Counter("falkirk_records", "Rows each processor emitted", ["processor"], registry=self.registry)
        self.rows_set_aside = Counter(
            "falkirk_rows_set_aside", "Rows a processor could not process and set aside", ["processor"], registry=self.registry
        )
        self.epoch_seconds = Histogram(
            "falkirk_epoch_seconds", "Seconds from an epoch's planning to its commit", buckets=_SECONDS, registry=self.registry
        )
        self.checkpoint_seconds = Histogram(
            "falkirk_checkpoint_seconds", "Seconds to write a keyed-state checkpoint", buckets=_SECONDS, registry=self.registry
        )
        self.checkpoint_bytes = Gauge(
            "falkirk_checkpoint_bytes", "Bytes of the last keyed-state checkpoint", ["processor"], registry=self.registry
        )
        self.recovery_seconds = Histogram(
            "falkirk_recovery_seconds", "Seconds a recovery took (restart or rollback)", buckets=_SECONDS, registry=self.registry
        )
        self.garbage_bytes = Counter(
            "falkirk_garbage_collected_bytes", "Bytes of logs and checkpoints deleted as garbage", registry=self.registry
        )
        self.latency = Histogram(
            "falkirk_end_to_end_latency_seconds",
            "Seconds from an epoch's input being planned to its output being committed",
            buckets=_SECONDS,
            registry=self.registry,
        )
        for name in processors:
            self.records.labels(name)

    def event(self, kind: str, detail: str, epoch: int | None = None, seconds: float | None = None) -> None:
        with self._lock:
            self.events.append({"time": time.time(), "kind": kind, "epoch": epoch, "detail": detail, "seconds": seconds})

    # -- called by the engine -----------------------------------------------------------

    def restored(self, epoch: int) -> None:
        """The run starts after a commit of ``epoch`` (0: a fresh root)."""
        with self._lock:
            self.epoch = epoch

    def committed(self, epoch: int, seconds: float, ran: list[str]) -> None:
        """Epoch ``epoch`` committed after ``seconds`` (planning to commit)."""
        self.epochs_committed.inc()
        self.epoch_seconds.observe(seconds)
        with self._lock:
            self.epoch = epoch
            for name in ran:
                self.processors[name].epoch = epoch
            self._planned.setdefault(epoch, time.time() - seconds)
            if len(self._planned) > _UNRELEASED:  # a sink that never releases: stay bounded
                del self._planned[min(self._planned)]
        self.event("epoch", f"epoch {epoch} committed", epoch, seconds)

    def counted(self, epoch: int, seconds: float, rows: dict[str, int]) -> None:
        """Rows each processor emitted in ``epoch`` (which took ``seconds``), as Spark
        reported them; an epoch counted before (a replay) is not counted again."""
        with self._lock:
            fresh = {n: k for n, k in rows.items() if (n, epoch) not in self._counted}
            self._counted |= {(n, epoch) for n in fresh}
            for name, n in fresh.items():
                view = self.processors[name]
                view.records += n
                view.records_per_second = n / seconds if seconds > 0 else 0.0
            if len(self._counted) > 100_000:  # bounded: replays reach back far less
                self._counted = {(n, e) for n, e in self._counted if e > epoch - 1000}
        for name, n in fresh.items():
            self.records.labels(name).inc(n)

    def released(self, sink: str, upto: int) -> None:
        """``sink`` released its output up to ``upto``: epochs every sink released are
        final, and their end-to-end latency is observed."""
        now = time.time()
        with self._lock:
            self._released[sink] = max(self._released.get(sink, 0), upto)
            final = min(self._released.values(), default=upto)
            done = sorted(e for e in self._planned if e <= final)
            latencies = [now - self._planned.pop(e) for e in done]
        for latency in latencies:
            self.latency.observe(latency)

    def frontiers(self, epochs: dict[str, int], points: dict[str, int], low_watermarks: dict[str, int]) -> None:
        """Per processor: the last epoch it committed, its latest rollback point and
        its low-watermark."""
        with self._lock:
            for name, e in epochs.items():
                self.processors[name].epoch = e
            for name, f in points.items():
                self.processors[name].frontier = f
            for name, w in low_watermarks.items():
                self.processors[name].low_watermark = w

    def checkpoint(self, processor: str, epoch: int, kind: str, seconds: float, size: int) -> None:
        self.checkpoint_seconds.observe(seconds)
        self.checkpoint_bytes.labels(processor).set(size)
        with self._lock:
            view = self.processors[processor]
            view.last_checkpoint = max(view.last_checkpoint or 0, epoch)
            view.state_bytes = size
        self.event("checkpoint", f"{processor}: {kind} checkpoint of epoch {epoch} ({size} bytes)", epoch, seconds)

    def collected(self, files: int, size: int) -> None:
        self.garbage_bytes.inc(size)
        self.event("gc", f"{files} files ({size} bytes) collected")

    def set_aside(self, processor: str, epoch: int, rows: int) -> None:
        """``processor`` set ``rows`` rows of ``epoch`` aside (committed)."""
        self.rows_set_aside.labels(processor).inc(rows)
        with self._lock:
            if processor in self.processors:
                self.processors[processor].set_aside += rows
        self.event("set_aside", f"{processor}: {rows} rows of epoch {epoch} set aside", epoch)

    def failed(self, processors: list[str], epoch: int) -> None:
        self.event("failure", f"{', '.join(sorted(processors))} failed after epoch {epoch}", epoch)

    def recovered(self, seconds: float, kind: str, frontiers: dict[str, int], why: dict[str, str]) -> None:
        """A recovery (``kind``: "restart" or "rollback") chose ``frontiers``; ``why``
        is the solver's explanation per processor (what bounded each)."""
        self.recovery_seconds.observe(seconds)
        with self._lock:
            self.last_recovery = {"kind": kind, "time": time.time(), "seconds": seconds, "frontiers": frontiers, "why": why}
        chosen = ", ".join(f"{p}→{e}" for p, e in sorted(frontiers.items()))
        self.event("recovery", f"{kind}: {chosen}", None, seconds)

    def began(self) -> None:
        """A run (again) under way."""
        with self._lock:
            self.run_ended = None

    def ended(self, how: str) -> None:
        """The run ended: ``how`` in words (``"finished"``, ``"stopped by SIGINT"``,
        ``"failed: ..."``). The dashboard stays up and says so."""
        with self._lock:
            self.run_ended = how
        self.event("end", f"run {how}", self.epoch)

    # -- read by the dashboard ----------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The ``/api/status`` document."""
        with self._lock:
            return {
                "pipeline": self.pipeline,
                "epoch": self.epoch,
                "started": self.started,
                "processors": {n: asdict(v) for n, v in self.processors.items()},
                "edges": [list(e) for e in self.edges],
                "last_recovery": self.last_recovery,
                "run_ended": self.run_ended,
                "timeline": list(self.events)[-100:],
            }
