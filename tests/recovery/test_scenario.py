"""Scenario files: parsing, defaults and error messages (docs/scenarios.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from falkirk.recovery import ScenarioError, load_scenario, parse_scenario, solve
from falkirk.time import INF


def base() -> dict:
    return {
        "processors": {"p": {"domain": "epoch"}, "h": {"domain": {"kind": "product", "order": "lexicographic"}}},
        "edges": {"e1": {"src": "p", "dst": "h", "projection": "loop_entry"}},
        "checkpoints": {"p": [{"frontier": [3]}, {"frontier": "top"}], "h": [{"frontier": [[2, "inf"]]}]},
    }


def test_issue_example_parses_and_solves() -> None:
    doc = {
        "processors": {
            "p": {"domain": "epoch"},
            "h": {"domain": {"kind": "product", "order": "lexicographic"}},
            "s": {"domain": "seq"},
        },
        "edges": {"e1": {"src": "p", "dst": "h", "projection": "loop_entry"}},
        "checkpoints": {
            "p": [
                {"frontier": [3], "notifications": [3], "discarded": {"e1": [[2, "inf"]]},
                 "projected": {"e1": [[3, "inf"]]}, "logged": {"e1": [[3, 1]]}},
                {"frontier": "top", "discarded": {"e1": [[5, "inf"]]}},
            ]
        },
    }
    scenario = parse_scenario(doc)
    out = solve(scenario.topology, scenario.available).to_json()
    assert out["frontiers"] == {"p": [], "h": [], "s": []}  # h failed with nothing: all restart
    assert set(out["resend"]) == {"e1"}


def test_loop_entry_notification_frontier_is_unbounded() -> None:
    doc = base()
    doc["checkpoints"]["h"] = [{"frontier": "top", "delivered": {"e1": [[3, "inf"]]}, "notifications": [[3, 0]]}]
    doc["checkpoints"]["p"] = [{"frontier": [3]}]
    scenario = parse_scenario(doc)
    out = solve(scenario.topology, scenario.available).to_json()
    assert out["frontiers"] == {"p": [3], "h": "top"}
    assert out["notification_frontiers"]["h"] == [[3, INF]]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["processors"].__setitem__("x", {"domain": "weird"}), "processor 'x'"),
        (lambda d: d["edges"]["e1"].__setitem__("dst", "nope"), "not a processor"),
        (lambda d: d["edges"]["e1"].pop("src"), "needs 'src' and 'dst' naming processors"),
        (lambda d: d["checkpoints"].__setitem__("zz", []), "unknown processor 'zz'"),
        (lambda d: d["checkpoints"]["p"][0].pop("frontier"), "'frontier' is required"),
        (lambda d: d["checkpoints"]["p"][0].__setitem__("frontier", [-1]), "checkpoint #0 of processor 'p'"),
        (lambda d: d["checkpoints"]["p"][0].__setitem__("delivered", {"e1": [1]}), "not an input edge"),
        (lambda d: d["checkpoints"]["p"][0].__setitem__("delivered", {"ext": [-1]}), "delivered\\['ext'\\]"),
        (lambda d: d["checkpoints"]["p"][0].__setitem__("logged", {"e1": [5]}), "logged"),
        (lambda d: d["checkpoints"].__setitem__("p", {"frontier": [1]}), "expected a list"),
    ],
)
def test_errors_name_what_is_wrong(mutate, message: str) -> None:
    doc = base()
    mutate(doc)
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(doc)


def test_unknown_keys_are_warned_about_not_refused(caplog: pytest.LogCaptureFixture) -> None:
    doc = base()
    doc["description"] = "a note"
    doc["checkpoints"]["p"][0]["comment"] = "why"
    with caplog.at_level("WARNING"):
        scenario = parse_scenario(doc)
    assert set(scenario.topology.processors) == {"p", "h"}
    assert "ignoring unknown keys ['description']" in caplog.text
    assert "ignoring unknown keys ['comment']" in caplog.text


def test_load_reports_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ScenarioError, match=r"bad\.json: not valid JSON"):
        load_scenario(bad)
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "missing.json")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(base()))
    assert set(load_scenario(good).topology.processors) == {"p", "h"}
