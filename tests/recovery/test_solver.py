"""Solver behaviour beyond the paper scenarios: cycles, ties, warnings, errors."""

from __future__ import annotations

import pytest

from falkirk.recovery import (
    CheckpointError,
    CheckpointMeta,
    Topology,
    solve,
    violations,
)
from falkirk.time import Frontier
from tests.domains import E, L, S, down


def chain(topo: Topology, p: str, *epochs: int, **fields) -> list[CheckpointMeta]:
    return [CheckpointMeta.build(topo, p, down(topo.domains[p], t), **fields) for t in epochs]


def test_no_checkpoints_means_everything_restarts() -> None:
    topo = Topology.build({"a": E, "b": E}, [("e", "a", "b", "identity")])
    plan = solve(topo, {})
    assert all(f.is_empty for f in plan.frontiers.values())
    assert str(plan.explanations["a"]) == "no checkpoint available: restarts from its initial state"


def test_downstream_failure_drags_a_non_logging_upstream_back() -> None:
    topo = Topology.build({"a": E, "b": E}, [("e", "a", "b", "identity")])
    available = {
        "a": [*chain(topo, "a", 2, 4, 6), CheckpointMeta.current(topo, "a")],
        "b": chain(topo, "b", 1, 4),
    }
    plan = solve(topo, available)
    assert plan.frontiers == {"a": down(E, 4), "b": down(E, 4)}
    assert plan.invalidated == {"a": (down(E, 6),), "b": ()}
    bound = plan.explanations["a"].bounds[0]
    assert (bound.constraint, bound.edge, bound.neighbour) == ("discarded", "e", "b")


def test_self_loop_uses_the_candidate_itself() -> None:
    # A processor that feeds itself (iteration in lexicographic time, feedback edge).
    topo = Topology.build({"it": L}, [("loop", "it", "it", "feedback")])
    available = {"it": [CheckpointMeta.build(topo, "it", down(L, [0, k])) for k in range(3)]}
    plan = solve(topo, available)
    # D̄(loop, ↓(0,k)) = φ(↓(0,k)) = ↓(0,k+1) ⊄ ↓(0,k): a processor that discards
    # its own feedback messages can only restart from scratch.
    assert plan.frontiers["it"].is_empty
    logged = {
        "it": [
            CheckpointMeta.build(topo, "it", down(L, [0, k]), discarded={"loop": Frontier.empty(L)})
            for k in range(3)
        ]
    }
    assert solve(topo, logged).frontiers["it"] == down(L, [0, 2])


def test_cycle_through_feedback_converges() -> None:
    topo = Topology.build(
        {"x": L, "q": L}, [("body", "x", "q", "identity"), ("back", "q", "x", "feedback")]
    )
    available = {
        "x": [CheckpointMeta.build(topo, "x", down(L, [1, k])) for k in range(1, 6)],
        "q": [
            CheckpointMeta.build(topo, "q", down(L, [1, k]), discarded={"back": Frontier.empty(L)})
            for k in range(1, 4)
        ],
    }
    plan = solve(topo, available)
    # x discards what it sends to q, so x <= q = (1, 3); q logs, so q keeps (1, 3).
    assert plan.frontiers == {"x": down(L, [1, 3]), "q": down(L, [1, 3])}


def test_incomparable_checkpoints_are_reported_as_ambiguous() -> None:
    topo = Topology.build({"a": S, "b": S}, [("e", "a", "b", "recorded")])
    logged = {"e": Frontier.empty(S)}
    a = [
        CheckpointMeta.build(topo, "a", down(S, ["in1", 4], ["in2", 1]), discarded=logged),
        CheckpointMeta.build(topo, "a", down(S, ["in1", 1], ["in2", 4]), discarded=logged),
    ]
    plan = solve(topo, {"a": a})
    assert plan.ambiguous
    assert plan.frontiers["a"] in (a[0].frontier, a[1].frontier)
    assert "several maximal" in plan.table()


def test_incomparable_checkpoints_with_one_consistent_choice_are_not_ambiguous() -> None:
    topo = Topology.build({"a": S, "b": S}, [("e", "a", "b", "recorded")])
    a = [
        CheckpointMeta.build(
            topo, "a", down(S, ["in1", 4], ["in2", 1]), discarded={"e": down(S, ["e", 9])}
        ),
        CheckpointMeta.build(topo, "a", down(S, ["in1", 1], ["in2", 4]), discarded={"e": Frontier.empty(S)}),
    ]
    plan = solve(topo, {"a": a})
    assert not plan.ambiguous
    assert plan.frontiers["a"] == a[1].frontier


def test_non_monotone_recorded_projection_is_warned_about() -> None:
    topo = Topology.build({"a": E, "b": S}, [("e", "a", "b", "recorded")])
    a = [
        CheckpointMeta.build(topo, "a", down(E, 1), projected={"e": down(S, ["e", 5])}),
        CheckpointMeta.build(topo, "a", down(E, 2), projected={"e": down(S, ["e", 3])}),
    ]
    plan = solve(topo, {"a": a})
    assert any("not monotone" in w for w in plan.warnings)


def test_result_satisfies_the_constraints() -> None:
    topo = Topology.build({"a": E, "b": E}, [("e", "a", "b", "identity")])
    available = {"a": chain(topo, "a", 1, 2, 3), "b": chain(topo, "b", 2)}
    plan = solve(topo, available)
    full = {p: [CheckpointMeta.initial(topo, p), *ms] for p, ms in available.items()}
    assert violations(topo, full, plan.checkpoints, plan.notification_frontiers) == []


def test_violations_reports_each_broken_constraint() -> None:
    topo = Topology.build({"a": E, "b": E}, [("e", "a", "b", "identity")])
    a3 = CheckpointMeta.build(topo, "a", down(E, 3))
    b1 = CheckpointMeta.build(topo, "b", down(E, 1))
    full = {"a": [CheckpointMeta.initial(topo, "a"), a3], "b": [CheckpointMeta.initial(topo, "b"), b1]}
    problems = violations(topo, full, {"a": a3, "b": b1}, {"a": down(E, 3), "b": down(E, 0)})
    assert any(p.startswith("(1) a") for p in problems)  # a discarded epochs 2-3 that b needs
    assert any(p.startswith("(4) b") for p in problems)  # b notified of 1, f_n(b) = ↓0


def test_top_must_be_last() -> None:
    topo = Topology.build({"a": E}, [])
    with pytest.raises(CheckpointError, match="listed last"):
        solve(topo, {"a": [CheckpointMeta.current(topo, "a"), *chain(topo, "a", 1)]})


def test_unknown_processor_is_refused() -> None:
    topo = Topology.build({"a": E}, [])
    with pytest.raises(CheckpointError, match="unknown processors"):
        solve(topo, {"zz": []})


def test_recorded_edge_without_stored_values_is_assumed_discarded() -> None:
    # Safe default of the API: nothing is known about what was sent on a recorded edge,
    # so a receiver at ∅ blocks every checkpoint of the sender but ∅.
    topo = Topology.build({"a": S, "b": S}, [("e", "a", "b", "recorded")])
    meta = CheckpointMeta.build(topo, "a", down(S, ["in", 2]))
    assert meta.discarded["e"].is_top
    assert solve(topo, {"a": [meta]}).frontiers["a"].is_empty


def test_listed_empty_frontier_is_ignored() -> None:
    topo = Topology.build({"a": E}, [])
    empty = CheckpointMeta.build(topo, "a", Frontier.empty(E))
    plan = solve(topo, {"a": [empty, *chain(topo, "a", 2)]})
    assert plan.frontiers["a"] == down(E, 2)
