"""Crash points are declared once (:class:`CrashPoint`), every declared point is
reached somewhere in the engine, and a crash point the environment arms but that does
not exist is refused instead of silently never crashing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import falkirk
from falkirk.control import faults
from falkirk.control.faults import CrashPoint, UnknownCrashPointError, check_armed, crash_point

SOURCE = Path(falkirk.__file__).parent


def reached() -> set[str]:
    """The crash points the engine's code names (``CrashPoint.X`` anywhere outside faults.py)."""
    names = set()
    for path in SOURCE.rglob("*.py"):
        if path.name == "faults.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "CrashPoint":
                names.add(node.attr)
    return names


def test_every_declared_point_is_reached_and_every_reached_point_is_declared() -> None:
    assert reached() == {p.name for p in CrashPoint}


def test_the_groups_hold_every_point_once() -> None:
    groups = [faults.POINTS, faults.EDGE_POINTS, faults.BARRIER_POINTS, faults.LOOP_POINTS, faults.CHUNK_POINTS, faults.STATE_POINTS, faults.PAIR_POINTS, faults.QUARANTINE_POINTS, faults.UPGRADE_POINTS]
    listed = [p for g in groups for p in g]
    assert sorted(listed) == sorted(CrashPoint)
    assert "epoch.planned" in faults.POINTS  # names compare as the strings tests arm


@pytest.mark.parametrize("armed", ["epoch.planned:2", "commit.after", " sink.written:1 , gc.before:3", ""])
def test_known_points_are_accepted(monkeypatch: pytest.MonkeyPatch, armed: str) -> None:
    monkeypatch.setenv("FALKIRK_CRASH_AT", armed)
    check_armed()


@pytest.mark.parametrize(
    ("variable", "armed"),
    [
        ("FALKIRK_CRASH_AT", "epoch.plan:1"),
        ("FALKIRK_CRASH_AT", "commit.after:0"),
        ("FALKIRK_CRASH_AT", "commit.after:x"),
        ("FALKIRK_KILL_WORKER_AT", "epoch.computed:1,sink.writen:2"),
    ],
)
def test_an_unknown_point_is_refused_naming_the_known_ones(monkeypatch: pytest.MonkeyPatch, variable: str, armed: str) -> None:
    monkeypatch.setenv(variable, armed)
    with pytest.raises(UnknownCrashPointError, match=f"{variable}=.*the points are .*epoch.planned"):
        check_armed()
    with pytest.raises(UnknownCrashPointError):
        crash_point(CrashPoint.EPOCH_PLANNED)  # reaching any point refuses the arming


def test_a_point_that_is_not_declared_cannot_be_reached() -> None:
    with pytest.raises(TypeError, match="CrashPoint"):
        crash_point("epoch.planned")  # type: ignore[arg-type]


def test_a_point_armed_for_a_later_occurrence_does_not_fire_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FALKIRK_CRASH_AT", "pair.claimed:1000000")
    crash_point(CrashPoint.PAIR_CLAIMED)  # still alive: the millionth occurrence is far away
