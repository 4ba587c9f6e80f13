"""FullHistory: every input logged since epoch 1; the state is rebuilt by running
the processor again over all of it (so every epoch is a rollback point, with no
checkpoint)."""

from __future__ import annotations

import logging

from falkirk.execution.behaviours.base import Held, PolicyBehaviour
from falkirk.execution.exceptions import EpochInvariantError
from falkirk.execution.run_state import RunState
from falkirk.graph import FullHistory, Processor
from falkirk.operators import Step
from falkirk.time.ticks import Tick

logger = logging.getLogger(__name__)


class FullHistoryBehaviour(PolicyBehaviour):
    """How :class:`~falkirk.graph.FullHistory` runs (see the module)."""

    policy = FullHistory
    held = Held.INPUT_LOG

    def restore(self, state: RunState, p: Processor, at: Tick) -> None:
        """Rebuild ``p``'s state by re-running its logged inputs up to ``at``'s epoch."""
        upto = at.epochs_done
        operator = state.operators[p.name]
        operator.reset()
        logs = [state.store.logs(state.input_log(p, k)) for k in range(len(p.inputs))]
        schemas = [state.schemas[(i.src, i.port)] for i in p.inputs]
        for epoch in range(1, upto + 1):
            missing = [k for k, log in enumerate(logs) if Tick(epoch) not in log]
            if missing:
                raise EpochInvariantError(f"the input log of {p.name!r} lacks epoch {epoch} (inputs {missing})")
            inputs = [state.read(log[Tick(epoch)], schema) for log, schema in zip(logs, schemas, strict=True)]
            operator.step(Step(epoch, inputs))
        logger.info("recovery processor=%s replayed its input history up to epoch %d", p.name, upto)
