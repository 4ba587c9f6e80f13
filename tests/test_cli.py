"""The falkirk command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from falkirk.cli import main

SCENARIOS = Path(__file__).resolve().parents[1] / "examples" / "scenarios"


def test_solve_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", "--json", str(SCENARIOS / "figure7c_loop_feedback.json")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"frontiers", "notification_frontiers", "resend"}
    assert out["frontiers"]["q"] == [[1, 4]]
    assert out["resend"]["e4"] == [[1, 4]]


def test_solve_table_explains(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", str(SCENARIOS / "figure7b_rdd_firewall.json")]) == 0
    out = capsys.readouterr().out
    assert "rolls back to" in out and "receiver y rolls back to ∅" in out
    assert "re-send on e3: 1, 2, 3" in out


def test_bad_scenario_exits_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({"processors": {"p": {"domain": "clock"}}}))
    assert main(["solve", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("falkirk: error:") and "unknown time domain 'clock'" in err


def test_ambiguity_is_said_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {
        "processors": {"a": {"domain": "seq"}},
        "checkpoints": {"a": [{"frontier": [["i", 4], ["j", 1]]}, {"frontier": [["i", 1], ["j", 4]]}]},
    }
    path = tmp_path / "tie.json"
    path.write_text(json.dumps(doc))
    assert main(["solve", "--json", str(path)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["frontiers"]["a"] in ([["i", 4], ["j", 1]], [["i", 1], ["j", 4]])
    assert "several maximal consistent rollbacks" in captured.err


def test_scenarios_solves_every_bundled_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out
    for path in SCENARIOS.glob("*.json"):
        assert f"== {path.stem} ==" in out


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).with_name("falkirk")
    result = subprocess.run(
        [str(exe), "solve", "--json", str(SCENARIOS / "figure5_notification_frontiers.json")],
        capture_output=True, text=True, check=True,
    )
    assert json.loads(result.stdout)["frontiers"]["x"] == []


def test_help_is_plain_text_that_says_where_to_start(capsys: pytest.CaptureFixture[str]) -> None:
    # Newcomer finding: the help began with the module docstring's reST (``falkirk``).
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "``" not in text and ":mod:" not in text
    assert "storage root" in text and "falkirk demo" in text and "falkirk COMMAND --help" in text
