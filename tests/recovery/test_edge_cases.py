"""Edge cases the random generator rarely produces, checked against the brute force.

Self-loops, cycles through feedback edges, nested loops in depth-3 product domains
(both orders), sequence-number processors with several inputs, explicit "top" and
"inf" metadata, survivors with explicit metadata, logged times in and out of the
receiver's frontier, non-chain F*(p), unsorted and redundant times, larger graphs.

Several cases reproduce problems a review found, now fixed: duplicate or misordered
frontiers, the branch limit on non-chain F*(p), non-monotone explicit projections,
epoch "inf", unsafe survivor defaults on recorded edges, and the monitor changing
state before refusing a record.
"""

from __future__ import annotations

import copy
import json
from itertools import combinations
from typing import Any

import pytest

from falkirk.recovery import (
    CheckpointError,
    CheckpointMeta,
    Monitor,
    ScenarioError,
    Topology,
    parse_scenario,
    solve,
    violations,
)
from falkirk.recovery.plan import RollbackPlan
from falkirk.time import EpochDomain, Frontier, SeqDomain
from tests.reference.brute_force import check, solve_all

E = EpochDomain()
S = SeqDomain()
LEX2 = {"kind": "product", "order": "lexicographic", "depth": 2}
LEX3 = {"kind": "product", "order": "lexicographic", "depth": 3}
PROD2 = {"kind": "product", "order": "product", "depth": 2}


def plan_of(doc: dict[str, Any]) -> RollbackPlan:
    scenario = parse_scenario(doc)
    return solve(scenario.topology, scenario.available)


def output(plan: RollbackPlan) -> dict[str, Any]:
    """The plan as `falkirk solve --json` prints it, read back."""
    return json.loads(json.dumps(plan.to_json()))


def assert_agrees(doc: dict[str, Any]) -> dict[str, Any]:
    """The solver's output is the brute force's unique maximum, without warnings."""
    plan = plan_of(doc)
    out = output(plan)
    reference = solve_all(doc)
    assert check(doc, out, result=reference) == []
    assert reference.unique
    assert out == reference.output
    assert not plan.ambiguous
    assert plan.warnings == ()
    return out


def frontiers(out: dict[str, Any]) -> dict[str, Any]:
    return out["frontiers"]


# -- agreement on shapes the generator rarely builds -----------------------------------

SELF_LOOP_FEEDBACK = {
    # A failed lexicographic processor that feeds itself and logs its feedback messages:
    # the logged times outside its own frontier are re-sent to itself.
    "processors": {"p": {"domain": LEX2}},
    "edges": {"loop": {"src": "p", "dst": "p", "projection": "feedback"}},
    "checkpoints": {
        "p": [
            {"frontier": [[0, 2]], "discarded": {"loop": []},
             "logged": {"loop": [[0, 1], [0, 3], [0, 2], [0, 3]]}}
        ]
    },
}

SELF_LOOPS_EPOCH = {
    "processors": {"p": {"domain": "epoch"}, "q": {"domain": "epoch"}},
    "edges": {
        "e0": {"src": "p", "dst": "p", "projection": "identity"},
        "e1": {"src": "p", "dst": "q", "projection": "identity"},
        "e2": {"src": "q", "dst": "q", "projection": "identity"},
    },
    "checkpoints": {
        "p": [
            {"frontier": [0, 0], "discarded": {"e0": [0]}, "logged": {"e0": []}},
            {"frontier": [2], "delivered": {"e0": [2]}, "discarded": {"e0": [], "e1": [2]},
             "logged": {"e1": []}},
        ],
        "q": [
            {"frontier": [0], "delivered": {"e1": [0, 0], "e2": [0]}, "logged": {"e2": [2]}},
            {"frontier": [3], "notifications": [1], "delivered": {"e1": "top", "e2": [3]},
             "discarded": {"e2": [3]}},
            {"frontier": [4], "delivered": {"e1": [4], "e2": [4, 4]}, "discarded": {"e2": [0]},
             "logged": {"e2": [3, 3]}},
            {"frontier": "top", "discarded": {"e2": [2]}, "notifications": "top"},
        ],
    },
}

SEQ_SELF_LOOP = {
    "processors": {"p": {"domain": "seq"}},
    "edges": {"e": {"src": "p", "dst": "p", "projection": "recorded"}},
    "checkpoints": {
        "p": [
            {"frontier": [["e", 2]], "projected": {"e": [["e", 3]]}, "discarded": {"e": []},
             "logged": {"e": [["e", 3], ["e", 1]]}}
        ]
    },
}

SEQ_INF_AND_TOP = {
    # Explicit "top" and "inf" metadata on a survivor with two recorded outputs.
    "processors": {"u": {"domain": "seq"}, "x": {"domain": "seq"}},
    "edges": {
        "e": {"src": "u", "dst": "x", "projection": "recorded"},
        "f": {"src": "u", "dst": "x", "projection": "recorded"},
    },
    "checkpoints": {
        "u": [
            {"frontier": [["in", 3]], "projected": {"e": [["e", 3]], "f": [["f", "inf"]]}},
            {"frontier": "top", "notifications": "top", "delivered": {"in": "top"},
             "projected": {"e": "top", "f": [["f", "inf"]]},
             "discarded": {"e": [["e", 5]], "f": []}},
        ],
        "x": [{"frontier": [["e", 2], ["f", 7]]}, {"frontier": [["e", 5], ["f", 100]]}],
    },
}

SEQ_MULTI_INPUT = {
    "processors": {"u": {"domain": "seq"}, "v": {"domain": "seq"}, "x": {"domain": "seq"},
                   "w": {"domain": "seq"}},
    "edges": {
        "e0": {"src": "u", "dst": "x", "projection": "recorded"},
        "e1": {"src": "v", "dst": "x", "projection": "recorded"},
        "e2": {"src": "u", "dst": "x", "projection": "recorded"},
        "e3": {"src": "x", "dst": "w", "projection": "recorded"},
    },
    "checkpoints": {
        "u": [
            {"frontier": [["in_u", 0], ["in_u", 1]], "projected": {"e2": []},
             "discarded": {"e2": []}, "logged": {"e2": [["e2", 1], ["e2", 1]]}},
            {"frontier": [["in_u", 3]], "discarded": {"e0": [], "e2": []},
             "logged": {"e0": [["e0", 3]], "e2": [["e2", 4], ["e2", 2], ["e2", 3]]}},
        ],
        "v": [
            {"frontier": [["in_v", 4]], "notifications": [["in_v", 2]]},
            {"frontier": "top", "projected": {"e1": [["e1", 1]]}, "notifications": "top"},
        ],
        "x": [{"frontier": [["e1", 1]], "notifications": "top", "delivered": {"e1": [["e1", 1]]},
               "projected": {"e3": [["e3", 2]]}}],
        "w": [{"frontier": [["e3", 3]]}],
    },
}

NESTED_DEPTH3_PRODUCT = {
    # epoch -> depth 2 -> depth 3 (with a self-loop) -> back to depth 2 -> epoch,
    # product order, with redundant and unsorted times everywhere.
    "processors": {"src": {"domain": "epoch"}, "a": {"domain": {"kind": "product", "order": "product", "depth": 2}},
                   "b": {"domain": {"kind": "product", "order": "product", "depth": 3}},
                   "c": {"domain": {"kind": "product", "order": "product", "depth": 3}},
                   "d": {"domain": {"kind": "product", "order": "product", "depth": 2}},
                   "snk": {"domain": "epoch"}},
    "edges": {"e0": {"src": "src", "dst": "a", "projection": "loop_entry"},
              "e1": {"src": "a", "dst": "b", "projection": "loop_entry"},
              "e2": {"src": "c", "dst": "b", "projection": "feedback"},
              "e3": {"src": "c", "dst": "d", "projection": "loop_exit"},
              "e4": {"src": "d", "dst": "a", "projection": "feedback"},
              "e5": {"src": "d", "dst": "snk", "projection": "loop_exit"},
              "e6": {"src": "b", "dst": "b", "projection": "feedback"},
              "e7": {"src": "b", "dst": "c"}},
    "checkpoints": {
        "src": [{"frontier": "top", "logged": {"e0": [[4, 3], [1, 2], [3, 1]]}, "notifications": "top"}],
        "a": [{"frontier": [["inf", 3]], "discarded": {"e1": [[2, 3, 0]]},
               "logged": {"e1": [[4, 4, 4], [1, 1, 0], [2, 4, 3]]}},
              {"frontier": [[2, "inf"], ["inf", 3]], "delivered": {"e4": [[2, "inf"], ["inf", 3]]}},
              {"frontier": [["inf", 3], [3, 4], [2, "inf"]], "logged": {"e1": [[0, 2, 3]]}},
              {"frontier": "top", "delivered": {"e0": [["inf", 4]]}, "discarded": {"e1": "top"},
               "notifications": "top"}],
        "b": [{"frontier": [[3, 4, 4], [0, 0, 0]], "notifications": [[0, 4, 3], [3, 2, 3]],
               "delivered": {"e1": [[1, 4, 0]], "e2": "top", "e6": [[3, 4, 0]]}, "discarded": {"e6": []},
               "logged": {"e6": [], "e7": [[1, 0, 4], [0, 2, 0], [4, 2, 3]]}},
              {"frontier": [[0, 2, "inf"], ["inf", 3, 2], [3, 4, 4]], "notifications": [[4, 1, 1], [3, 4, 3]],
               "delivered": {"e6": []}, "discarded": {"e6": [[3, 1, 3], [4, 3, 1], [3, 4, 1]], "e7": []},
               "logged": {"e6": [[4, 0, 2]]}},
              {"frontier": "top", "delivered": {"e1": [[3, "inf", 4]], "e2": "top"}, "notifications": "top"}],
        "c": [{"frontier": [[4, 4, 3]], "notifications": [[3, 3, 3], [4, 4, 2]], "discarded": {"e3": []},
               "logged": {"e2": [[0, 3, 4]]}},
              {"frontier": "top", "discarded": {"e2": [], "e3": [[1, 4]]}}],
        "d": [{"frontier": [[3, 4]], "notifications": [], "discarded": {"e4": [[3, 5]], "e5": []},
               "logged": {"e4": [], "e5": []}},
              {"frontier": [[4, 2], [3, "inf"]], "discarded": {"e4": [], "e5": []},
               "logged": {"e4": [[1, 0], [2, 1]]}},
              {"frontier": [[4, 4], [3, "inf"]], "notifications": [[4, 3]], "delivered": {"e3": [[0, "inf"]]},
               "logged": {"e5": []}},
              {"frontier": "top", "notifications": [[1, 2]], "discarded": {"e4": [], "e5": [1]},
               "logged": {"e5": [2]}}],
        "snk": [{"frontier": [0, 0], "notifications": []},
                {"frontier": [3], "notifications": [2], "delivered": {"e5": "top"}},
                {"frontier": [3, 4], "delivered": {"e5": [4]}}],
    },
}

RING_DEPTH3_LEXICOGRAPHIC = {
    # A loop of three depth-3 processors closed by a feedback edge, entered from and
    # exited to depth 2.
    "processors": {"src": {"domain": {"kind": "product", "order": "lexicographic", "depth": 2}},
                   "h0": {"domain": LEX3}, "h1": {"domain": LEX3}, "h2": {"domain": LEX3},
                   "out": {"domain": {"kind": "product", "order": "lexicographic", "depth": 2}}},
    "edges": {"e0": {"src": "src", "dst": "h0", "projection": "loop_entry"},
              "e1": {"src": "h0", "dst": "h1", "projection": "identity"},
              "e2": {"src": "h1", "dst": "h2"},
              "e3": {"src": "h2", "dst": "h0", "projection": "feedback"},
              "e4": {"src": "h1", "dst": "out", "projection": "loop_exit"}},
    "checkpoints": {
        "src": [{"frontier": [[0, 1]], "logged": {"e0": [[3, 3, 3]]}}, {"frontier": [[0, 4]], "logged": {"e0": []}},
                {"frontier": "top", "notifications": [[3, 0]], "discarded": {"e0": "top"}}],
        "h0": [{"frontier": "top", "notifications": [[0, 2, 2]],
                "delivered": {"e0": [[4, "inf", "inf"]], "e3": [[1, 3, 1]]}, "discarded": {"e1": [[4, 4, "inf"]]}}],
        "h1": [{"frontier": [[3, 0, 3]], "discarded": {"e4": [[2, "inf"], [2, "inf"]]}},
               {"frontier": [[4, 0, 3]], "notifications": [[4, 0, 3]], "delivered": {"e1": [[3, 0, 4]]},
                "discarded": {"e2": []}, "logged": {"e2": [[3, 2, 4]], "e4": [[1, 0], [4, 3]]}},
               {"frontier": [[0, 0, 0], [4, 1, 3]]},
               {"frontier": "top", "discarded": {"e2": "top", "e4": [[2, 2], [2, 2]]},
                "logged": {"e4": [[2, 4], [3, 0], [2, 3]]}}],
        "h2": [{"frontier": [[2, 3, "inf"]], "notifications": "top", "discarded": {"e3": [[2, 3, "inf"]]}},
               {"frontier": [[4, 3, 3]], "notifications": [[1, 0, 0]], "delivered": {"e2": "top"},
                "discarded": {"e3": []}},
               {"frontier": "top", "discarded": {"e3": [[3, 4, "inf"]]}, "logged": {"e3": [[4, 1, 4]]}}],
        "out": [{"frontier": [[2, 3]], "delivered": {"e4": [[1, 3]]}}, {"frontier": [[4, 3]]}],
    },
}

LARGE_NINE = {
    "processors": {f"p{i}": {"domain": "epoch"} for i in range(9)},
    "edges": {"e0": {"src": "p0", "dst": "p5"}, "e1": {"src": "p0", "dst": "p7", "projection": "recorded"},
              "e2": {"src": "p2", "dst": "p4"}, "e3": {"src": "p4", "dst": "p6", "projection": "recorded"},
              "e4": {"src": "p4", "dst": "p8"}, "e5": {"src": "p5", "dst": "p6", "projection": "identity"},
              "e6": {"src": "p6", "dst": "p8"}},
    "checkpoints": {
        "p0": [{"frontier": [0], "notifications": [0], "discarded": {"e0": [], "e1": []}},
               {"frontier": "top", "delivered": {"in_p0": [3]}, "projected": {"e1": [0]},
                "discarded": {"e0": [], "e1": []}, "logged": {"e1": [3, 4]}}],
        "p1": [{"frontier": [2]}],
        "p2": [{"frontier": [3], "notifications": [3], "discarded": {"e2": [0]}, "logged": {"e2": []}},
               {"frontier": [4], "discarded": {"e2": [1]}, "logged": {"e2": [4, 1, 4]}},
               {"frontier": "top", "notifications": [4], "delivered": {"in_p2": "top"}, "logged": {"e2": [2, 3]}}],
        "p3": [{"frontier": [1], "delivered": {"in_p3": []}}],
        "p4": [],
        "p5": [{"frontier": [1], "delivered": {"e0": [1]}, "discarded": {"e5": []}},
               {"frontier": [4], "notifications": [0], "delivered": {"e0": [4]}, "logged": {"e5": [2, 1]}}],
        "p7": [{"frontier": [3]}, {"frontier": [4], "notifications": [1], "delivered": {"e1": [3]}}],
        "p8": [{"frontier": [4], "notifications": [4], "delivered": {"e4": [2], "e6": []}}],
    },
}

NON_CHAIN_RECORDED_UNION = {
    # f_n(p) is not a checkpoint of p and contains two incomparable ones: the recorded
    # projection is the union of their values, which q's notifications need.
    "processors": {"x": {"domain": PROD2}, "p": {"domain": PROD2}, "q": {"domain": "seq"}},
    "edges": {"xp": {"src": "x", "dst": "p"},
              "e": {"src": "p", "dst": "q", "projection": "recorded"}},
    "checkpoints": {
        "x": [{"frontier": [[1, 2], [0, 3]]}],
        "p": [{"frontier": [[0, 2]], "projected": {"e": [["e", 5]]}},
              {"frontier": [[1, 0]], "projected": {"e": [["e", 2], ["ext", 4]]}},
              {"frontier": "top", "notifications": [], "delivered": {"xp": [[0, 3], [1, 2]]},
               "projected": {"e": "top"}, "discarded": {"e": []}}],
        "q": [{"frontier": [["e", 5], ["ext", 4]], "notifications": [["ext", 4], ["e", 5]]}],
    },
}

LOGGED_IN_AND_OUT = {
    # Logged times inside the receiver's frontier (including under an unbounded
    # coordinate) are not re-sent; the others are, sorted and without repeats.
    "processors": {"s": {"domain": PROD2}, "r": {"domain": PROD2}},
    "edges": {"e": {"src": "s", "dst": "r"}},
    "checkpoints": {
        "s": [{"frontier": "top", "discarded": {"e": []},
               "logged": {"e": [[6, 0], [5, 3], [3, 7], [4, 0], [5, 2], [5, 3], [0, 0], [3, 1000]]}}],
        "r": [{"frontier": [[5, 2], [3, "inf"]]}],
    },
}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        pytest.param(SELF_LOOP_FEEDBACK, {"p": [[0, 2]]}, id="self-loop-feedback-lexicographic"),
        pytest.param(SELF_LOOPS_EPOCH, {"p": [0], "q": [0]}, id="self-loops-epoch"),
        pytest.param(SEQ_SELF_LOOP, {"p": [["e", 2]]}, id="self-loop-seq-recorded"),
        pytest.param(SEQ_INF_AND_TOP, {"u": "top", "x": [["e", 5], ["f", 100]]}, id="seq-inf-and-top"),
        pytest.param(
            SEQ_MULTI_INPUT,
            {"u": [["in_u", 3]], "v": [["in_v", 4]], "x": [], "w": []},
            id="seq-several-inputs",
        ),
        pytest.param(
            NESTED_DEPTH3_PRODUCT,
            {"src": "top", "a": "top", "b": "top", "c": "top", "d": "top", "snk": [4]},
            id="nested-depth3-product",
        ),
        pytest.param(
            RING_DEPTH3_LEXICOGRAPHIC,
            {"src": "top", "h0": "top", "h1": "top", "h2": "top", "out": [[4, 3]]},
            id="feedback-ring-depth3-lexicographic",
        ),
        pytest.param(
            LARGE_NINE,
            {"p0": "top", "p1": [2], "p2": [], "p3": [1], "p4": [], "p5": [1], "p6": [], "p7": [],
             "p8": []},
            id="nine-processors",
        ),
        pytest.param(
            NON_CHAIN_RECORDED_UNION,
            {"x": [[0, 3], [1, 2]], "p": "top", "q": [["e", 5], ["ext", 4]]},
            id="non-chain-recorded-union",
        ),
        pytest.param(LOGGED_IN_AND_OUT, {"s": "top", "r": [[3, float("inf")], [5, 2]]},
                     id="logged-in-and-out"),
    ],
)
def test_solver_agrees_with_the_brute_force(doc: dict[str, Any], expected: dict[str, Any]) -> None:
    assert frontiers(assert_agrees(doc)) == expected


def test_resend_is_logged_minus_receiver_frontier() -> None:
    assert output(plan_of(SELF_LOOP_FEEDBACK))["resend"] == {"loop": [[0, 3]]}
    assert output(plan_of(SEQ_SELF_LOOP))["resend"] == {"e": [["e", 3]]}
    assert output(plan_of(LOGGED_IN_AND_OUT))["resend"] == {"e": [[5, 3], [6, 0]]}
    assert output(plan_of(LARGE_NINE))["resend"]["e1"] == [3, 4]


def test_redundant_and_unsorted_times_read_like_the_canonical_ones() -> None:
    canonical = copy.deepcopy(NON_CHAIN_RECORDED_UNION)
    noisy = copy.deepcopy(NON_CHAIN_RECORDED_UNION)
    noisy["checkpoints"]["x"][0]["frontier"] = [[0, 1], [0, 3], [1, 2], [1, 2], [0, 0], [1, 1]]
    noisy["checkpoints"]["p"][0]["frontier"] = [[0, 0], [0, 2], [0, 1]]
    noisy["checkpoints"]["q"][0]["frontier"] = [["ext", 4], ["e", 1], ["e", 5], ["ext", 0]]
    assert output(plan_of(noisy)) == output(plan_of(canonical)) == assert_agrees(noisy)


def test_a_consistent_answer_for_a_self_loop_survivor_keeps_top() -> None:
    doc = {
        "processors": {"p": {"domain": "epoch"}},
        "edges": {"e": {"src": "p", "dst": "p"}},
        "checkpoints": {"p": [{"frontier": [2]}, {"frontier": "top"}]},
    }
    assert frontiers(assert_agrees(doc)) == {"p": "top"}


# -- duplicate frontiers ---------------------------------------------------------------

DUPLICATES = {
    "identical": [{"frontier": [3]}, {"frontier": [3]}],
    "redundant-time": [{"frontier": [3]}, {"frontier": [2, 3]}],
}


@pytest.mark.parametrize("entries", DUPLICATES.values(), ids=DUPLICATES.keys())
def test_a_frontier_listed_twice_is_refused(entries: list[dict[str, Any]]) -> None:
    doc = {"processors": {"p": {"domain": "epoch"}}, "checkpoints": {"p": entries}}
    with pytest.raises((ScenarioError, CheckpointError)):
        plan_of(doc)


def test_duplicates_with_different_metadata_are_refused() -> None:
    doc = {
        "processors": {"p": {"domain": "epoch"}, "q": {"domain": "epoch"}},
        "edges": {"e": {"src": "p", "dst": "q"}},
        "checkpoints": {
            "p": [{"frontier": [3], "projected": {"e": [1]}, "discarded": {"e": [1]}}, {"frontier": [3]}],
            "q": [{"frontier": [3], "delivered": {"e": [1]}}],
        },
    }
    with pytest.raises((ScenarioError, CheckpointError)):
        plan_of(doc)


# -- the branch limit ------------------------------------------------------------------


def _independent(n: int) -> dict[str, Any]:
    """n unconnected product-order processors, each with two incomparable checkpoints,
    of which the later-listed one can never be used (N̄ ⊄ f)."""
    return {
        "processors": {f"p{i}": {"domain": "product"} for i in range(n)},
        "checkpoints": {
            f"p{i}": [{"frontier": [[0, 1]]}, {"frontier": [[1, 0]], "notifications": [[2, 2]]}]
            for i in range(n)
        },
    }


def test_eight_independent_non_chains_are_solved_exactly() -> None:
    plan = plan_of(_independent(8))
    assert not plan.ambiguous
    assert set(map(json.dumps, frontiers(output(plan)).values())) == {"[[0, 1]]"}


def test_nine_independent_non_chains_are_solved_exactly() -> None:
    plan = plan_of(_independent(9))
    assert set(map(json.dumps, frontiers(output(plan)).values())) == {"[[0, 1]]"}
    assert not plan.ambiguous


# -- explicit projections below the edge's function --------------------------------------

EXPLICIT_BELOW_FUNCTION = {
    # a's checkpoint ↓3 records φ(ab) = ↓1, below identity's ↓3, while f_n(a) = ↓2 is
    # not a checkpoint, so φ(ab)(↓2) = ↓2 ⊄ φ(ab)(↓3) = ↓1: φ is not monotone.
    "processors": {"x": {"domain": "epoch"}, "a": {"domain": "epoch"}, "b": {"domain": "epoch"}},
    "edges": {"xa": {"src": "x", "dst": "a"}, "ab": {"src": "a", "dst": "b"}},
    "checkpoints": {
        "x": [{"frontier": [2]}],
        "a": [{"frontier": [3], "notifications": [], "delivered": {"xa": [2]},
               "projected": {"ab": [1]}, "discarded": {"ab": []}}],
        "b": [{"frontier": [3], "notifications": [2], "delivered": {"ab": [1]}}],
    },
}


def _reordered(doc: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out["processors"] = dict(reversed(list(doc["processors"].items())))
    return out


def test_explicit_projection_below_function_answer_is_consistent() -> None:
    scenario = parse_scenario(EXPLICIT_BELOW_FUNCTION)
    plan = solve(scenario.topology, scenario.available)
    assert frontiers(output(plan)) == {"x": [2], "a": [3], "b": [3]}
    full = {
        p: [CheckpointMeta.initial(scenario.topology, p), *scenario.available.get(p, ())]
        for p in scenario.topology.processors
    }
    assert violations(scenario.topology, full, plan.checkpoints, plan.notification_frontiers) == []


def test_explicit_projection_below_function_is_order_independent_or_warned() -> None:
    first, second = plan_of(EXPLICIT_BELOW_FUNCTION), plan_of(_reordered(EXPLICIT_BELOW_FUNCTION))
    assert frontiers(output(first)) == frontiers(output(second)) or (first.warnings and second.warnings)


def test_reference_accepts_the_consistent_answer_for_a_non_monotone_projection() -> None:
    assert check(EXPLICIT_BELOW_FUNCTION, output(plan_of(EXPLICIT_BELOW_FUNCTION))) == []


# -- malformed input ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "checkpoint",
    [{"frontier": ["inf"]}, {"frontier": [3], "discarded": {"e": []}, "logged": {"e": [1, "inf"]}}],
    ids=["frontier", "logged"],
)
def test_epoch_inf_is_refused(checkpoint: dict[str, Any]) -> None:
    doc = {
        "processors": {"p": {"domain": "epoch"}, "q": {"domain": "epoch"}},
        "edges": {"e": {"src": "p", "dst": "q"}},
        "checkpoints": {"p": [checkpoint]},
    }
    with pytest.raises(ScenarioError):
        plan_of(doc)


def test_non_string_edge_endpoint_is_a_scenario_error() -> None:
    doc = {"processors": {"p": {"domain": "epoch"}}, "edges": {"e": {"src": ["p"], "dst": "p"}}}
    with pytest.raises(ScenarioError):
        plan_of(doc)


def test_reference_reads_the_lexicographic_shorthand() -> None:
    doc = copy.deepcopy(SELF_LOOP_FEEDBACK)
    doc["processors"]["p"]["domain"] = "lexicographic"
    assert solve_all(doc).output == output(plan_of(doc))


# -- survivors of sequence-number graphs (section 4.4) -------------------------------------

SEQ_SURVIVOR_DEFAULTS = {
    # u has not failed and lists ⊤ with defaults: φ(e)(⊤) = ⊤ (every projection maps ⊤
    # to ⊤) and D̄(e, ⊤) = φ = ⊤: u logged nothing, so a receiver that rolled back
    # needs u to roll back too.
    "processors": {"u": {"domain": "seq"}, "x": {"domain": "seq"}},
    "edges": {"e": {"src": "u", "dst": "x", "projection": "recorded"}},
    "checkpoints": {
        "u": [{"frontier": [["in", 3]], "projected": {"e": [["e", 3]]}}, {"frontier": "top"}],
        "x": [{"frontier": [["e", 3]]}],
    },
}


def test_seq_survivor_defaults_do_not_lose_messages() -> None:
    # x failed at ↓{e:3}; u keeps ⊤ only if x keeps everything u sent, which it cannot:
    # u goes back to ↓{in:3}, which sent exactly e:0..3, and x keeps ↓{e:3}. (With the
    # old default φ(⊤) = ∅ the format answered u = ⊤, x = ∅ and re-sent nothing: the
    # messages e:0..3 were lost.)
    plan = plan_of(SEQ_SURVIVOR_DEFAULTS)
    out = output(plan)
    assert check(SEQ_SURVIVOR_DEFAULTS, out) == []
    assert frontiers(out) == {"u": [["in", 3]], "x": [["e", 3]]}
    assert not plan.warnings


def test_seq_survivor_api_defaults_agree_with_the_format() -> None:
    scenario = parse_scenario(SEQ_SURVIVOR_DEFAULTS)
    topo = scenario.topology
    available = {
        "u": [scenario.available["u"][0], CheckpointMeta.current(topo, "u")],
        "x": list(scenario.available["x"]),
    }
    plan = solve(topo, available)
    assert frontiers(output(plan)) == {"u": [["in", 3]], "x": [["e", 3]]}


def test_live_sequence_number_chain_is_not_rolled_back() -> None:
    # Finding 7 of the data-loss review: src (epoch) -> s1 (seq) -> s2 (seq), both edges
    # recorded, every processor alive ("top" last) and no values stored at ⊤. Nothing
    # failed, so nothing may roll back; the answer used to be ∅ everywhere.
    doc = {
        "processors": {"src": {"domain": "epoch"}, "s1": {"domain": "seq"}, "s2": {"domain": "seq"}},
        "edges": {"a": {"src": "src", "dst": "s1", "projection": "recorded"},
                  "b": {"src": "s1", "dst": "s2", "projection": "recorded"}},
        "checkpoints": {
            "src": [{"frontier": [2], "projected": {"a": [["a", 5]]}}, {"frontier": "top"}],
            "s1": [{"frontier": [["a", 5]], "projected": {"b": [["b", 3]]}}, {"frontier": "top"}],
            "s2": [{"frontier": [["b", 3]]}, {"frontier": "top"}],
        },
    }
    plan = plan_of(doc)
    assert frontiers(output(plan)) == {"src": "top", "s1": "top", "s2": "top"}
    assert not plan.warnings  # monotone: no exhaustive search
    assert check(doc, output(plan)) == []
    # only s2 failed: it keeps its checkpoint; its senders log nothing, so each rolls
    # back to the checkpoint that sent exactly what its receiver kept
    doc["checkpoints"]["s2"].pop()
    out = output(plan_of(doc))
    assert check(doc, out) == []
    assert frontiers(out) == {"src": [2], "s1": [["a", 5]], "s2": [["b", 3]]}


# -- the monitor -------------------------------------------------------------------------


def _down(domain: Any, *times: object) -> Frontier:
    return Frontier.down(domain, list(times))


def test_monitor_recovery_never_goes_below_the_low_watermarks_in_an_epoch_pipeline() -> None:
    topo = Topology.build(
        {"source": E, "agg": E, "sink": E},
        [("e1", "source", "agg", "identity"), ("e2", "agg", "sink", "identity")],
    )
    logs = {"e2": Frontier.empty(E)}
    for failed in [set(c) for k in range(1, 4) for c in combinations(topo.processors, k)]:
        mon = Monitor(topo, sources=["source"], sinks=["sink"])
        mon.add_many([CheckpointMeta.build(topo, "source", _down(E, t)) for t in (1, 2, 3)])
        mon.add_many([CheckpointMeta.build(topo, "agg", _down(E, t), discarded=logs) for t in (1, 2, 4)])
        mon.add_many([CheckpointMeta.build(topo, "sink", _down(E, t)) for t in (1, 3)])
        before = mon.low_watermarks
        plan = mon.recover(failed)
        assert all(before[p] <= plan.frontiers[p] for p in topo.processors), failed
        # What was collected is not needed: the chosen checkpoints are still available.
        for p, f in plan.frontiers.items():
            assert f.is_top or f.is_empty or any(m.frontier == f for m in mon.available(p))


def test_monitor_recovery_of_a_seq_pipeline_respects_the_low_watermark() -> None:
    topo = Topology.build({"u": S, "x": S}, [("e", "u", "x", "recorded")])
    mon = Monitor(topo)
    mon.add(CheckpointMeta.build(topo, "u", _down(S, ["in", 3]), projected={"e": _down(S, ["e", 3])}))
    mon.add(CheckpointMeta.build(topo, "x", _down(S, ["e", 3])))
    before = mon.low_watermarks
    assert before["x"] == _down(S, ["e", 3])
    plan = mon.recover(["x"])
    assert before["x"] <= plan.frontiers["x"]


def test_monitor_refusal_leaves_the_monitor_unchanged() -> None:
    topo = Topology.build({"z": E, "u": E, "x": E}, [("e", "u", "x", "identity")])
    mon = Monitor(topo)
    mon.add_many([CheckpointMeta.build(topo, p, _down(E, 1)) for p in ("z", "u", "x")])
    before = mon.low_watermarks
    bad = CheckpointMeta.build(
        topo, "u", _down(E, 2), projected={"e": Frontier.empty(E)}, discarded={"e": Frontier.empty(E)}
    )
    with pytest.raises(CheckpointError):
        mon.add_many([CheckpointMeta.build(topo, "z", _down(E, 2)), bad])
    assert mon.low_watermarks == before
    assert [m.frontier for m in mon.available("u")][:1] == [_down(E, 1)]
    assert [m.frontier for m in mon.available("z")][:1] == [_down(E, 1)]
