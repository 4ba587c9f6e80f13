"""The engine's time domain: epochs, and frontiers ↓e of them."""

from __future__ import annotations

from falkirk.graph import GraphError
from falkirk.time import EpochDomain, Frontier

EPOCHS = EpochDomain()


def epoch_of(f: Frontier) -> int:
    """e for the frontier ↓e (0 for ∅). ⊤ is refused: persisted frontiers are finite."""
    if f.maxima is None:
        raise GraphError("internal: a persisted frontier cannot be ⊤")
    return int(f.maxima[0]) if f.maxima else 0  # type: ignore[arg-type]


def down(epoch: int) -> Frontier:
    """↓epoch, or ∅ for epoch 0 (nothing processed)."""
    return Frontier(EPOCHS, (epoch,)) if epoch > 0 else Frontier.empty(EPOCHS)
