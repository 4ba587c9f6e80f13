"""The bundled paper scenarios give the outcomes the paper states (Figures 5 and 7)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from falkirk.recovery import parse_scenario, solve

SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "scenarios"


def load(name: str) -> dict[str, Any]:
    return json.loads((SCENARIOS / f"{name}.json").read_text())


def run(doc: dict[str, Any]) -> dict[str, Any]:
    scenario = parse_scenario(doc)
    return solve(scenario.topology, scenario.available).to_json()


def test_figure5_notification_frontier_forces_x_back() -> None:
    out = run(load("figure5_notification_frontiers"))
    assert out["frontiers"] == {"p": [1], "q": [], "r": [1], "x": []}
    assert out["notification_frontiers"] == {"p": [1], "q": [], "r": [], "x": []}


def test_figure5_without_the_notification_x_keeps_epoch_1() -> None:
    # The same history, except x was never notified: then nothing forces it back,
    # which shows that the notification constraint is what moved x in the test above.
    doc = load("figure5_notification_frontiers")
    doc = copy.deepcopy(doc)
    doc["checkpoints"]["x"][0]["notifications"] = []
    out = run(doc)
    assert out["frontiers"] == {"p": [1], "q": [], "r": [1], "x": [1]}


def test_figure7a_sequence_numbers_with_all_outputs_logged() -> None:
    out = run(load("figure7a_sequence_numbers"))
    assert out["frontiers"] == {
        "u": "top",
        "v": "top",
        "x": [["e1", 6], ["e2", 5]],
        "w": [["e3", 5]],
    }
    # Senders re-send what the failed receiver had consumed after its checkpoint.
    assert out["resend"] == {
        "e1": [["e1", n] for n in range(7, 11)],
        "e2": [["e2", n] for n in range(6, 9)],
        "e3": [["e3", 6], ["e3", 7]],
    }


def test_figure7b_logged_processor_is_a_firewall() -> None:
    out = run(load("figure7b_rdd_firewall"))
    assert out["frontiers"] == {"q": "top", "r": "top", "p": "top", "x": [], "y": []}
    assert out["resend"]["e3"] == [1, 2, 3]


def test_figure7b_without_the_log_everything_upstream_rolls_back() -> None:
    doc = copy.deepcopy(load("figure7b_rdd_firewall"))
    doc["checkpoints"]["p"] = [{"frontier": "top"}]
    out = run(doc)
    assert out["frontiers"] == {"q": [], "r": [], "p": [], "x": [], "y": []}


def test_figure7c_feedback_keeps_q_one_iteration_ahead() -> None:
    out = run(load("figure7c_loop_feedback"))
    assert out["frontiers"] == {
        "p": "top",
        "x": [[1, 3]],
        "y": [[1, 3]],
        "q": [[1, 4]],
        "r": "top",
    }
    assert out["resend"]["e4"] == [[1, 4]]
    assert all(not times for edge, times in out["resend"].items() if edge != "e4")


def test_explanations_name_the_constraint_and_neighbour() -> None:
    scenario = parse_scenario(load("figure7c_loop_feedback"))
    plan = solve(scenario.topology, scenario.available)
    x = plan.explanations["x"]
    assert [(b.constraint, b.edge, b.neighbour) for b in x.bounds] == [("discarded", "e6", "y")]
    q = plan.explanations["q"]
    assert ("delivered", "e5", "y") in [(b.constraint, b.edge, b.neighbour) for b in q.bounds]
    assert "receiver y rolls back to ↓{(1, 3)}" in str(x)
    assert str(plan.explanations["p"]) == "not failed: keeps its current state"
    assert str(plan.explanations["y"]) == "its latest checkpoint"
