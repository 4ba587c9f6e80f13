"""Acting on the monitor's decisions at the pipeline's edges.

Once the commits behind them are durable, sinks make released epochs visible
(``release_output``, crash point ``sink.release``) and sources acknowledge input no
recovery will read again (``acknowledge``, crash point ``source.ack``). Both are
idempotent and are redone from the committed metadata after a restart.
"""

from __future__ import annotations

from falkirk.runtime.faults import crash_point
from falkirk.runtime.observer import Observer
from falkirk.runtime.state import RunState


class EdgeActions:
    """What was released and acknowledged in this run, and the next actions."""

    def __init__(self, state: RunState, observer: Observer) -> None:
        self.state = state
        self.observer = observer
        self.released: dict[str, int] = {}
        self.acknowledged: dict[str, int] = {}

    def act(self) -> None:
        """Release and acknowledge whatever the monitor allows since the last call."""
        ledger = self.state.ledger
        for name, upto in ledger.released.items():
            if upto > self.released.get(name, 0):
                crash_point("sink.release")
                self.state.operators[name].release_output(upto)
                self.released[name] = upto
                self.observer.released(name, upto)
        for name in ledger.sources:
            upto, offsets = ledger.to_acknowledge(name, self.acknowledged.get(name, 0))
            if upto > self.acknowledged.get(name, 0):
                if offsets:
                    crash_point("source.ack")
                    self.state.operators[name].acknowledge(offsets)
                self.acknowledged[name] = upto
