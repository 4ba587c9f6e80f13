"""Choosing consistent rollback frontiers: the fixed point of Figure 6.

Given every processor's available frontiers F*(p) with their metadata Ξ(p, f), the
solver returns the greatest consistent rollback (:mod:`falkirk.recovery.constraints`)
together with the messages to re-send, the checkpoints invalidated, and for every
processor the constraint and the neighbour that kept it from its next frontier.

How it works (Figure 6, sections 3.5-3.6). Start every processor at its greatest
available frontier with f_n(p) = f(p), then repeat until nothing changes: lower f(p)
to the greatest g ∈ F*(p) below it that satisfies constraints 1, 2 and 4 against the
current choices of its neighbours, and lower f_n(p) to
f(p) ∩ f_n(p) ∩ ⋂_d φ(d)(f_n(src(d))). Only the neighbours of a processor that moved
are re-examined (a worklist), so each processor is examined O(1 + moves of its
neighbours) times.

Guarantees:

* Termination: values only decrease, F*(p) is finite and frontiers satisfy the
  descending chain condition.
* The answer is consistent: it is re-checked with
  :func:`~falkirk.recovery.constraints.violations` and a violation raises
  :class:`SolverError` rather than risk a wrong rollback (a data-loss bug).
* Maximality: when every F*(p) is a chain (the paper's f_1 ⊂ ... ⊂ f_n) and the
  projections are monotone, every consistent rollback stays below the current values
  at every step (induction on the steps), so the result is the *greatest* consistent
  rollback - unique, because the join of two consistent rollbacks is consistent - and
  f_n is the greatest notification frontier for it. Adding an available frontier
  therefore never lowers any processor's result (section 3.6).
* When some F*(p) is not a chain the search branches on every tie between maximal
  candidates (up to ``max_branches``) and returns a maximal rollback; if several
  exist the plan is marked ``ambiguous``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from falkirk.recovery import exhaustive
from falkirk.recovery.checkpoint import CheckpointMeta
from falkirk.recovery.constraints import project, violations
from falkirk.recovery.exceptions import CheckpointError, RecoveryError
from falkirk.recovery.plan import Bound, Explanation, RollbackPlan
from falkirk.recovery.topology import Edge, Topology
from falkirk.time import Frontier

logger = logging.getLogger(__name__)


VIRTUAL = -1  # state.f value of a non-chain processor not yet examined


def _join(frontiers: Iterable[Frontier]) -> Frontier:
    result: Frontier | None = None
    for f in frontiers:
        result = f if result is None else result | f
    if result is None:
        raise RecoveryError("internal: join of no frontiers")
    return result


class SolverError(RecoveryError):
    """The solver produced an inconsistent rollback: a bug; please report it."""


@dataclass(slots=True)
class _State:
    f: dict[str, int]  # index into the candidate list of each processor
    fn: dict[str, Frontier]

    def copy(self) -> _State:
        return _State(dict(self.f), dict(self.fn))


def solve(
    topology: Topology,
    available: Mapping[str, Sequence[CheckpointMeta]],
    *,
    max_branches: int = 256,
) -> RollbackPlan:
    """The greatest consistent rollback given F*(p) for every processor.

    ``available[p]`` lists Ξ(p, f) for the frontiers p can roll back to, in
    increasing order; ∅ is always added (a listed ∅ is ignored). A processor that
    has not failed lists its current state last with frontier ⊤. Processors absent
    from ``available`` can roll back only to ∅. See the module docstring for what is
    guaranteed. Raises :class:`CheckpointError` for malformed inputs.
    """
    return _Solver(topology, available, max_branches).run()


class _Solver:
    def __init__(
        self,
        topology: Topology,
        available: Mapping[str, Sequence[CheckpointMeta]],
        max_branches: int,
    ) -> None:
        self.topology = topology
        self.max_branches = max_branches
        self.branches = 0
        self.truncated = False
        self.monotone = True
        self.warnings: list[str] = []
        unknown = sorted(set(available) - set(topology.domains))
        if unknown:
            raise CheckpointError(
                f"checkpoints given for unknown processors {unknown}; known processors: "
                f"{sorted(topology.domains)}"
            )
        self.cands: dict[str, list[CheckpointMeta]] = {}
        self.index: dict[str, dict[Frontier, int]] = {}
        self.chain: dict[str, bool] = {}
        self.below: dict[str, list[list[int]]] = {}
        # A non-chain F*(p) has no greatest element: such a processor starts at the
        # join of its candidates (VIRTUAL), an upper bound of every consistent choice.
        self.upper: dict[str, Frontier] = {}
        self.upper_projected: dict[str, dict[str, Frontier]] = {}
        for p in topology.processors:
            cands = self._candidates(p, available.get(p, ()))
            self.cands[p] = cands
            self.index[p] = {}
            for i, c in enumerate(cands):
                self.index[p].setdefault(c.frontier, i)
            self.chain[p] = all(a.frontier < b.frontier for a, b in pairwise(cands))
            if not self.chain[p]:
                self.below[p] = [
                    [j for j in range(len(cands) - 1, -1, -1) if cands[j].frontier <= c.frontier]
                    for c in cands
                ]
                self.below[p].append(list(range(len(cands) - 1, -1, -1)))  # under VIRTUAL
                self.upper[p] = _join(c.frontier for c in cands)
                self.upper_projected[p] = {
                    e.name: _join(c.projected[e.name] for c in cands) for e in topology.outputs(p)
                }
        self._check_monotone_projections()

    def _candidates(self, p: str, listed: Sequence[CheckpointMeta]) -> list[CheckpointMeta]:
        domain = self.topology.domains[p]
        cands = [CheckpointMeta.initial(self.topology, p)]
        for k, meta in enumerate(listed):
            if meta.processor != p:
                raise CheckpointError(
                    f"checkpoint {meta!r} is listed under processor {p!r}; list it under "
                    f"{meta.processor!r}"
                )
            if meta.frontier.domain != domain:
                raise CheckpointError(
                    f"checkpoint {meta!r}: frontier is in {meta.frontier.domain!r}, processor "
                    f"{p!r} uses {domain!r}"
                )
            if meta.frontier.is_top and k != len(listed) - 1:
                raise CheckpointError(
                    f"processor {p!r}: the ⊤ entry (its current state) must be listed last"
                )
            if meta.frontier.is_empty:
                if any(meta.logged.values()):
                    raise CheckpointError(
                        f"processor {p!r}: ∅ is always available with nothing logged and is "
                        "never listed; remove the listed ∅ checkpoint"
                    )
                continue
            previous = cands[-1].frontier
            # Along a chain the previous entry is enough (transitivity); compare with
            # every earlier entry only when the list stops being a chain.
            earlier_ones = cands[-1:] if previous < meta.frontier else cands[1:]
            for earlier in earlier_ones:
                if earlier.frontier == meta.frontier:
                    raise CheckpointError(
                        f"processor {p!r}: checkpoint {meta.frontier!r} is listed twice; "
                        "list every available frontier once"
                    )
                if meta.frontier < earlier.frontier:
                    raise CheckpointError(
                        f"processor {p!r}: checkpoint {meta.frontier!r} is listed after "
                        f"{earlier.frontier!r}, which contains it; list F*(p) in increasing order"
                    )
            cands.append(meta)
        return cands

    def _check_monotone_projections(self) -> None:
        """Warn about stored projections that may not be monotone (then the fixed
        point is not guaranteed to be the greatest rollback)."""
        for edge in self.topology.edges.values():
            cands = self.cands[edge.src]
            if self.chain[edge.src]:  # along a chain, consecutive pairs suffice
                pairs = list(pairwise(cands))
            else:
                pairs = [(a, b) for a in cands for b in cands if a.frontier < b.frontier]
            for a, b in pairs:
                if not a.projected[edge.name] <= b.projected[edge.name]:
                    self.monotone = False
                    self.warnings.append(
                        f"projection on {edge.name} is not monotone: φ({a.frontier!r}) = "
                        f"{a.projected[edge.name]!r} ⊄ φ({b.frontier!r}) = "
                        f"{b.projected[edge.name]!r}"
                    )
                    break
            for c in cands:
                if edge.name in c.overridden:
                    self.monotone = False
                    self.warnings.append(
                        f"projection on {edge.name} at {c.frontier!r} is given as "
                        f"{c.projected[edge.name]!r}, not the {edge.projection.kind} projection's "
                        f"{edge.projection(c.frontier)!r}: φ may not be monotone"
                    )
                    break

    # -- the fixed point ----------------------------------------------------------

    def run(self) -> RollbackPlan:
        if not self.monotone and exhaustive.count(self.cands) <= exhaustive.LIMIT:
            return self._run_exhaustive()
        pending: list[tuple[_State, deque[str]]] = [
            (self._initial_state(), deque(self.topology.processors))
        ]
        finals: list[_State] = []
        while pending:
            state, queue = pending.pop()
            finals.append(self._settle(state, queue, pending))
        best, ambiguous = self._pick(finals)
        if self.truncated:
            self.warnings.append(
                f"the search stopped after {self.max_branches} branches: the rollback is "
                "consistent but may not be maximal"
            )
        elif not self.monotone:
            self.warnings.append(
                "too large for an exhaustive search: the rollback is consistent but may not "
                "be the greatest"
            )
        return self._plan(best, ambiguous)

    def _run_exhaustive(self) -> RollbackPlan:
        """Exact answer when projections may not be monotone (small inputs only)."""
        found = exhaustive.maximal(exhaustive.consistent_rollbacks(self.topology, self.cands))
        chosen, fn = found[0]
        index = {
            p: next(i for i, c in enumerate(self.cands[p]) if c is chosen[p])
            for p in self.topology.processors
        }
        self.warnings.append("solved by exhaustive search over every assignment")
        return self._plan(_State(index, fn), len(found) > 1)

    def _initial_state(self) -> _State:
        f: dict[str, int] = {}
        fn: dict[str, Frontier] = {}
        for p, cands in self.cands.items():
            if self.chain[p]:
                f[p], fn[p] = len(cands) - 1, cands[-1].frontier
            else:
                f[p], fn[p] = VIRTUAL, self.upper[p]
        return _State(f, fn)

    def _settle(
        self, state: _State, queue: deque[str], pending: list[tuple[_State, deque[str]]]
    ) -> _State:
        queued = set(queue)
        while queue:
            p = queue.popleft()
            queued.discard(p)
            limit = self._limit(p, state)
            choices = self._choose(p, state, limit)
            for extra in choices[1:]:
                if self.branches >= self.max_branches:
                    self.truncated = True
                    break
                self.branches += 1
                alt, alt_queue = state.copy(), deque(queue)
                self._move(p, extra, limit, alt, alt_queue, set(alt_queue))
                pending.append((alt, alt_queue))
            self._move(p, choices[0], limit, state, queue, queued)
        return state

    def _limit(self, p: str, state: _State) -> Frontier:
        """f_n(p) ∩ ⋂_d φ(d)(f_n(src(d))): an upper bound of every consistent f_n(p)."""
        limit = state.fn[p]
        for d in self.topology.inputs(p):
            limit = limit & self._phi(d, state.fn[d.src], state)
        return limit

    def _frontier(self, p: str, state: _State) -> Frontier:
        i = state.f[p]
        return self.cands[p][i].frontier if i != VIRTUAL else self.upper[p]

    def _projected(self, p: str, edge: str, state: _State) -> Frontier:
        i = state.f[p]
        return self.cands[p][i].projected[edge] if i != VIRTUAL else self.upper_projected[p][edge]

    def _phi(self, edge: Edge, frontier: Frontier, state: _State) -> Frontier:
        src_cands = self.cands[edge.src]
        if frontier == self._frontier(edge.src, state):
            return self._projected(edge.src, edge.name, state)
        j = self.index[edge.src].get(frontier)
        if j is not None:
            return src_cands[j].projected[edge.name]
        return project(edge, frontier, src_cands)

    def _choose(self, p: str, state: _State, limit: Frontier) -> list[int]:
        """The greatest candidates below f(p) satisfying constraints 1, 2 and 4."""
        cands = self.cands[p]
        i = state.f[p]
        if self.chain[p]:
            while i > 0 and self._blocked(p, cands[i], state, limit):
                i -= 1
            return [i]
        # below[p][VIRTUAL] (the last list) holds every candidate.
        ok = [j for j in self.below[p][i] if not self._blocked(p, cands[j], state, limit)]
        return [
            j for j in ok if not any(cands[j].frontier < cands[k].frontier for k in ok)
        ] or [0]

    def _blocked(self, p: str, c: CheckpointMeta, state: _State, limit: Frontier) -> bool:
        for e in self.topology.outputs(p):
            receiver = c.frontier if e.dst == p else self._frontier(e.dst, state)
            if not c.discarded[e.name] <= receiver:
                return True
        for d in self.topology.inputs(p):
            fixed = c.projected[d.name] if d.src == p else self._projected(d.src, d.name, state)
            if not c.delivered[d.name] <= fixed:
                return True
        return not (c.notifications <= c.frontier and c.notifications <= limit)

    def _move(
        self,
        p: str,
        i: int,
        limit: Frontier,
        state: _State,
        queue: deque[str],
        queued: set[str],
    ) -> None:
        fn = self.cands[p][i].frontier & limit
        moved = i != state.f[p]
        narrowed = fn != state.fn[p]
        state.f[p] = i
        state.fn[p] = fn
        if not (moved or narrowed):
            return
        touched = [e.dst for e in self.topology.outputs(p)]
        if moved:
            touched += [e.src for e in self.topology.inputs(p)]
        for q in touched:
            if q not in queued:
                queued.add(q)
                queue.append(q)

    # -- choosing among branches and reporting ---------------------------------------

    def _pick(self, finals: list[_State]) -> tuple[_State, bool]:
        def frontiers(s: _State) -> dict[str, Frontier]:
            return {p: self.cands[p][i].frontier for p, i in s.f.items()}

        distinct: list[_State] = []
        for s in finals:
            if all(s.f != t.f for t in distinct):
                distinct.append(s)
        maximal = [
            s
            for s in distinct
            if not any(
                t is not s and all(a <= frontiers(t)[p] for p, a in frontiers(s).items())
                for t in distinct
            )
        ]
        return maximal[0], len(maximal) > 1

    def _plan(self, state: _State, ambiguous: bool) -> RollbackPlan:
        if VIRTUAL in state.f.values():
            raise SolverError("internal: a processor was never examined; please report this")
        chosen = {p: self.cands[p][i] for p, i in state.f.items()}
        problems = violations(self.topology, self.cands, chosen, state.fn)
        if problems:
            raise SolverError(
                "the solver produced an inconsistent rollback; this is a bug, please report "
                "it with the scenario. Violations: " + "; ".join(problems)
            )
        frontiers = {p: c.frontier for p, c in chosen.items()}
        resend = {
            name: tuple(
                t for t in chosen[e.src].logged[name] if not frontiers[e.dst].contains(t)
            )
            for name, e in self.topology.edges.items()
        }
        invalidated = {
            p: tuple(
                c.frontier
                for c in self.cands[p]
                if not c.frontier.is_top and not c.frontier <= frontiers[p]
            )
            for p in self.topology.processors
        }
        explanations = {p: self._explain(p, state) for p in self.topology.processors}
        for p, why in explanations.items():
            logger.debug("rollback processor=%s frontier=%r why=%s", p, frontiers[p], why)
        return RollbackPlan(
            frontiers=frontiers,
            notification_frontiers=dict(state.fn),
            resend=resend,
            checkpoints=chosen,
            invalidated=invalidated,
            explanations=explanations,
            ambiguous=ambiguous,
            warnings=tuple(self.warnings),
        )

    def _explain(self, p: str, state: _State) -> Explanation:
        cands = self.cands[p]
        i = state.f[p]
        here = cands[i]
        if self.chain[p]:
            nexts = cands[i + 1 : i + 2]
        else:
            above = [c for c in cands if here.frontier < c.frontier]
            nexts = [c for c in above if not any(d.frontier < c.frontier for d in above)]
        if not nexts:
            return Explanation(p, here.frontier, None, ())
        nxt = nexts[0]
        return Explanation(p, here.frontier, nxt.frontier, tuple(self._bounds(p, nxt, state)))

    def _bounds(self, p: str, c: CheckpointMeta, state: _State) -> list[Bound]:
        """The constraints candidate ``c`` of ``p`` violates against ``state``."""
        bounds: list[Bound] = []
        for e in self.topology.outputs(p):
            receiver = c.frontier if e.dst == p else self.cands[e.dst][state.f[e.dst]].frontier
            if not c.discarded[e.name] <= receiver:
                bounds.append(Bound("discarded", e.name, e.dst, c.discarded[e.name], receiver))
        for d in self.topology.inputs(p):
            sender = c if d.src == p else self.cands[d.src][state.f[d.src]]
            if not c.delivered[d.name] <= sender.projected[d.name]:
                bounds.append(
                    Bound("delivered", d.name, d.src, c.delivered[d.name], sender.projected[d.name])
                )
        if not c.notifications <= c.frontier:
            bounds.append(Bound("notifications", None, p, c.notifications, c.frontier))
        for d in self.topology.inputs(p):
            upstream = self._phi(d, state.fn[d.src], state)
            if not c.notifications <= upstream:
                bounds.append(Bound("notifications", d.name, d.src, c.notifications, upstream))
        return bounds
