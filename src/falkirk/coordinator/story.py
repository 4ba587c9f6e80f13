"""A restart's recovery in plain words, for people (the log, ``print(report)``).

The solver explains each frontier in the paper's notation (``why=not ↓{6}: ...``,
logged at INFO - an example's ``-v`` - and shown by ``falkirk status``); this says what it means for the
run: which keyed processors restart from which checkpoint, which epochs are
computed again, and that nothing committed is written twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def recovery_in_words(
    frontier: Mapping[str, int],
    keyed: set[str],
    committed: int | None,
    resent: Mapping[str, Sequence[object]],
    *,
    checkpoints: Mapping[str, int] | None = None,
    rebuilders: Mapping[str, str] | None = None,
) -> str:
    """One sentence: ``frontier`` is where recovery left each processor (the last
    epoch it holds whole), ``keyed`` the processors with state, ``committed`` the last
    committed epoch, ``resent`` the edges a recovery re-sends from their logs,
    ``checkpoints`` each keyed processor's latest committed checkpoint (an epoch),
    ``rebuilders`` the keyed processors whose policy (the value) persists nothing, so
    that their state is rebuilt from every input since epoch 1."""
    if not committed:
        return "nothing was committed before: the pipeline starts at its first epoch"
    checkpoints, rebuilders = checkpoints or {}, rebuilders or {}
    behind = {p: f for p, f in frontier.items() if f < committed}
    if not behind:
        return f"every processor stands at the last committed epoch ({committed}): nothing is computed again"
    first = min(behind.values()) + 1
    again = f"epoch {committed} is" if first == committed else f"epochs {first}-{committed} are"
    replaying = sorted(p for p in rebuilders if behind.get(p) == 0)
    restarts = [_restart(p, f, checkpoints.get(p, 0), rebuilders, replaying) for p, f in sorted(behind.items()) if p in keyed]
    resume = "resumes" if len(behind) == 1 else "resume"
    said = "; ".join(restarts) if restarts else f"{', '.join(sorted(behind))} {resume} after epoch {first - 1}"
    logs = [edge for edge, times in sorted(resent.items()) if times]
    from_logs = f" ({', '.join(logs)} re-sent from {'its log' if len(logs) == 1 else 'their logs'})" if logs else ""
    return f"{said}, so {again} computed again{from_logs}; nothing committed is written twice"


def _restart(p: str, at: int, checkpoint: int, rebuilders: Mapping[str, str], replaying: list[str]) -> str:
    """How keyed processor ``p`` restarts, standing at epoch ``at`` with its latest
    checkpoint at ``checkpoint``."""
    if p in rebuilders:
        return f"{p} rebuilds its state from every input since epoch 1 ({rebuilders[p]} persists nothing)"
    start = f"{p} restarts from its checkpoint at epoch {at}" if at else f"{p} restarts from an empty state"
    if checkpoint <= at:
        return start if at else f"{start} (it had no checkpoint)"
    others = [q for q in replaying if q != p]
    if not at and others:
        because = f"{', '.join(others)} must read every input since epoch 1 again, and {p} reads the same input"
    else:
        because = "a consistent restart needs it there (falkirk status STORAGE says why)"
    return f"{start}: its checkpoint at epoch {checkpoint} cannot be used, because {because}"
