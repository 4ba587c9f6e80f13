"""Acting on the monitor's decisions at the pipeline's edges.

Once the commits behind them are durable, sinks that show committed epochs make them
visible (``publish_output``, crash point ``sink.publish``), sinks make released epochs
visible (``release_output``, crash point ``sink.release``) and sources acknowledge input no
recovery will read again (``acknowledge``, crash point ``source.ack``). Both are
idempotent and are redone from the committed metadata after a restart.

In a driver pair, each call first reports this driver's progress to the pair, and a
source acknowledges input only once the other live driver may no longer read it
either (a driver that is joining holds every acknowledgement back).
"""

from __future__ import annotations

from typing import Any

from falkirk.control.faults import CrashPoint, crash_point
from falkirk.execution.observer import Observer
from falkirk.execution.run_state import RunState
from falkirk.storage.pairs import PairStore


class EdgeActions:
    """What was released and acknowledged in this run, and the next actions."""

    def __init__(self, state: RunState, observer: Observer, pair: PairStore | None = None) -> None:
        self.state = state
        self.pair = pair
        self.observer = observer
        self.released: dict[str, int] = {}
        #: Per sink, the committed epoch it last published up to (its frontier then).
        self.published: dict[str, int] = {}
        self.acknowledged: dict[str, int] = {}
        #: Per source, (epoch, offsets) acknowledgeable here that the pair's other
        #: driver may still read (in order): acknowledged once it may not.
        self.held: dict[str, list[tuple[int, dict[str, Any]]]] = {}

    def act(self) -> None:
        """Publish what each sink committed (its frontier), and release and acknowledge
        whatever the monitor allows, since the last call."""
        ledger = self.state.ledger
        if self.pair is not None:
            committed = self.state.store.committed_epoch() or 0
            released = min((ledger.released.get(s, 0) for s in ledger.sinks), default=committed)
            self.pair.progress(committed, released, dict(ledger.acknowledgeable))
        for name in ledger.sinks:
            upto = self.state.frontier[name]
            if upto != self.published.get(name):
                crash_point(CrashPoint.SINK_PUBLISH)
            # Every time, not only when the frontier moved: after a rollback the
            # replay of an epoch published before writes it again, and the frontier
            # comes back to where it was (a publish with nothing pending is a listing).
            self.state.operators[name].publish_output(upto)
            self.published[name] = upto
        for name, upto in ledger.released.items():
            if upto > self.released.get(name, 0):
                crash_point(CrashPoint.SINK_RELEASE)
                self.state.operators[name].release_output(upto)
                self.released[name] = upto
                self.observer.released(name, upto)
        for name in ledger.sources:
            upto, offsets = ledger.to_acknowledge(name, self.acknowledged.get(name, 0))
            if upto > self.acknowledged.get(name, 0):
                self.held.setdefault(name, []).extend(offsets)
                self.acknowledged[name] = upto
            held = self.held.get(name, [])
            limit = self.pair.ack_limit(name) if self.pair is not None and held else None
            ready = [(e, o) for e, o in held if limit is None or e <= limit]
            if ready:
                crash_point(CrashPoint.SOURCE_ACK)
                self.state.operators[name].acknowledge([o for _, o in ready])
                self.held[name] = held[len(ready) :]
            if ledger.acknowledged is not None:  # what the ledger may now forget
                done = self.held[name][0][0] - 1 if self.held.get(name) else self.acknowledged.get(name, 0)
                ledger.acknowledged[name] = max(ledger.acknowledged.get(name, 0), done)
