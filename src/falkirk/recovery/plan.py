"""The result of choosing consistent rollback frontiers, and why each was chosen."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from falkirk.recovery.checkpoint import CheckpointMeta
from falkirk.time import Frontier, Time, frontier_to_json
from falkirk.time.codec import time_to_json
from falkirk.time.frontier import show_time

ConstraintName = Literal["discarded", "delivered", "notifications"]


@dataclass(frozen=True, slots=True)
class Bound:
    """One constraint of section 3.5 that a higher frontier of a processor violates.

    * ``discarded``: the processor discarded messages on ``edge`` (``needed`` =
      D̄(e, g)) that the receiver ``neighbour`` would need again: its frontier
      ``allowed`` does not contain them.
    * ``delivered``: the processor delivered messages on ``edge`` (``needed`` =
      M̄(d, g)) outside what the sender ``neighbour``'s rollback fixes (``allowed`` =
      φ(d)(f(src))).
    * ``notifications``: the processor received notifications (``needed`` = N̄(p, g))
      that the notification frontier upstream cannot promise (``allowed``); the
      neighbour is the upstream processor, or the processor itself when N̄(p, g) ⊄ g.
    """

    constraint: ConstraintName
    edge: str | None
    neighbour: str
    needed: Frontier
    allowed: Frontier

    def describe(self, processor: str) -> str:
        if self.constraint == "discarded":
            return (
                f"it discarded messages on {self.edge} up to {self.needed!r} but receiver "
                f"{self.neighbour} rolls back to {self.allowed!r}"
            )
        if self.constraint == "delivered":
            return (
                f"it delivered messages on {self.edge} up to {self.needed!r} but sender "
                f"{self.neighbour}'s rollback fixes only {self.allowed!r}"
            )
        via = f" via {self.edge}" if self.edge else ""
        return (
            f"it processed notifications up to {self.needed!r} but the notification "
            f"frontier of {self.neighbour}{via} allows only {self.allowed!r}"
        )


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why ``processor`` rolls back to ``frontier``: the next available frontier
    above it (``next_frontier``, None when there is none) and the constraints that
    frontier violates given the other processors' choices."""

    processor: str
    frontier: Frontier
    next_frontier: Frontier | None
    bounds: tuple[Bound, ...]

    def __str__(self) -> str:
        if self.next_frontier is None:
            if self.frontier.is_top:
                return "not failed: keeps its current state"
            if self.frontier.is_empty:
                return "no checkpoint available: restarts from its initial state"
            return "its latest checkpoint"
        if not self.bounds:
            return f"{self.next_frontier!r} is held back by the joint choice of its neighbours"
        reasons = "; ".join(b.describe(self.processor) for b in self.bounds)
        return f"not {self.next_frontier!r}: {reasons}"


@dataclass(frozen=True, eq=False)
class RollbackPlan:
    """Consistent rollback frontiers for every processor (sections 3.5-3.6).

    * ``frontiers[p]`` = f(p) ∈ F*(p); ``checkpoints[p]`` is its metadata Ξ(p, f(p)),
      whose state S(p, f(p)) must be restored;
    * ``notification_frontiers[p]`` = f_n(p), the greatest notification frontier for
      these f;
    * ``resend[e]`` = Q'(e) = L(e, f(src)) \\ f(dst): logged times edge e must re-send;
    * ``invalidated[p]``: available frontiers above f(p), no longer valid after the
      rollback (F*'(p) keeps only f' ⊆ f(p));
    * ``ambiguous``: several maximal consistent rollbacks exist (only when some F*(p)
      is not a chain); this is one of them;
    * ``warnings``: inputs that break the solver's preconditions, in words.
    """

    frontiers: Mapping[str, Frontier]
    notification_frontiers: Mapping[str, Frontier]
    resend: Mapping[str, tuple[Time, ...]]
    checkpoints: Mapping[str, CheckpointMeta]
    invalidated: Mapping[str, tuple[Frontier, ...]]
    explanations: Mapping[str, Explanation]
    ambiguous: bool = False
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``{"frontiers", "notification_frontiers", "resend"}`` as in docs/scenarios.md."""
        return {
            "frontiers": {p: frontier_to_json(f) for p, f in self.frontiers.items()},
            "notification_frontiers": {
                p: frontier_to_json(f) for p, f in self.notification_frontiers.items()
            },
            "resend": {e: [time_to_json(t) for t in ts] for e, ts in self.resend.items()},
        }

    def table(self) -> str:
        """A readable table: processor, f(p), f_n(p) and why, then the re-sends."""
        rows = [("processor", "rolls back to", "notifications", "why")]
        for p, f in self.frontiers.items():
            rows.append((p, repr(f), repr(self.notification_frontiers[p]), str(self.explanations[p])))
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        lines = [
            "  ".join(cell.ljust(w) for cell, w in zip(r[:3], widths)) + "  " + r[3]
            for r in rows
        ]
        lines.insert(1, "  ".join("-" * w for w in widths) + "  " + "-" * 3)
        resends = [(e, ts) for e, ts in self.resend.items() if ts]
        if resends:
            lines.append("")
            for e, ts in resends:
                lines.append(f"re-send on {e}: " + ", ".join(show_time(t) for t in ts))
        else:
            lines.append("\nno logged messages to re-send")
        if self.ambiguous:
            lines.append(
                "\nnote: several maximal consistent rollbacks exist (some F*(p) is not a "
                "chain); this is one of them"
            )
        lines.extend(f"\nwarning: {w}" for w in self.warnings)
        return "\n".join(lines)

