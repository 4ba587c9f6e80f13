"""Exhaustive search for the consistent rollbacks of a small scenario.

The fixed point of :mod:`falkirk.recovery.solver` is exact when projections are
monotone. Stored metadata can break that (a recorded projection that shrinks as the
frontier grows, an explicit ``projected`` that differs from the edge's function);
then no greatest rollback need exist, and the solver, for inputs small enough, asks
this module for every consistent rollback instead and keeps a maximal one.

For an assignment f(p) ∈ F*(p) the notification frontiers are computed by
:func:`notification_frontiers`, and the assignment is kept when the constraints of
section 3.5 hold (:func:`~falkirk.recovery.constraints.violations`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

from falkirk.recovery.checkpoint import CheckpointMeta
from falkirk.recovery.constraints import project, violations
from falkirk.recovery.exceptions import RecoveryError
from falkirk.recovery.topology import Topology
from falkirk.time import Frontier

#: Largest number of assignments searched.
LIMIT = 20_000

Rollback = tuple[dict[str, CheckpointMeta], dict[str, Frontier]]


def count(cands: Mapping[str, Sequence[CheckpointMeta]]) -> int:
    """How many assignments an exhaustive search would visit."""
    return math.prod(len(c) for c in cands.values())


def notification_frontiers(
    topology: Topology,
    cands: Mapping[str, Sequence[CheckpointMeta]],
    chosen: Mapping[str, CheckpointMeta],
) -> dict[str, Frontier]:
    """The notification frontiers reached from f_n = f (see the module docstring).

    f_n(p) = f(p) ∩ ⋂_d φ(d)(f_n(src(d))) is evaluated for all processors at once until
    it is stable; with a monotone φ this descends to the greatest fixed point. A
    non-monotone φ may oscillate: then each value is also intersected with the
    previous one, which must converge (frontiers have no infinite descending chains).
    """
    names = list(topology.processors)
    for keep_old in (False, True):
        fn = {p: chosen[p].frontier for p in names}
        rounds = 10 * len(names) + 10
        while keep_old or rounds > 0:
            rounds -= 1
            nxt = {}
            for p in names:
                value = fn[p] & chosen[p].frontier if keep_old else chosen[p].frontier
                for d in topology.inputs(p):
                    value = value & project(d, fn[d.src], cands[d.src])
                nxt[p] = value
            if nxt == fn:
                return fn
            fn = nxt
    raise RecoveryError("internal: notification frontiers did not converge; please report this")


def consistent_rollbacks(
    topology: Topology, cands: Mapping[str, Sequence[CheckpointMeta]]
) -> list[Rollback]:
    """Every consistent rollback, in enumeration order (later candidates first)."""
    names = list(topology.processors)
    found: list[Rollback] = []
    for combo in itertools.product(*(list(reversed(cands[p])) for p in names)):
        chosen = dict(zip(names, combo, strict=True))
        fn = notification_frontiers(topology, cands, chosen)
        if not violations(topology, cands, chosen, fn):
            found.append((chosen, fn))
    return found


def maximal(found: list[Rollback]) -> list[Rollback]:
    """The rollbacks of ``found`` that no other one contains pointwise."""

    def below(a: Rollback, b: Rollback) -> bool:
        return all(a[0][p].frontier <= b[0][p].frontier for p in a[0])

    return [
        r
        for r in found
        if not any(o is not r and below(r, o) and not below(o, r) for o in found)
    ]
