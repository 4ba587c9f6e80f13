"""Checkpoint metadata round-trips through JSON and corrupt records are refused."""

from __future__ import annotations

import json

import pytest

from falkirk.recovery import (
    CheckpointError,
    CheckpointMeta,
    Topology,
    checkpoint_from_json,
    checkpoint_to_json,
)
from falkirk.time import Frontier
from tests.domains import E, L, S, down


@pytest.fixture
def topo() -> Topology:
    return Topology.build(
        {"p": E, "h": L, "s": S},
        [("in", "s", "p", "recorded"), ("loop", "p", "h", "loop_entry")],
    )


def test_round_trip_keeps_every_field(topo: Topology) -> None:
    meta = CheckpointMeta.build(
        topo,
        "p",
        down(E, 4),
        notifications=down(E, 3),
        delivered={"in": down(E, 4)},
        discarded={"loop": Frontier.empty(L)},
        logged={"loop": [(4, 0), (3, 1)]},
    )
    doc = json.loads(json.dumps(checkpoint_to_json(meta)))
    back = checkpoint_from_json(topo, doc)
    for field in ("frontier", "notifications", "delivered", "projected", "discarded", "logged"):
        assert getattr(back, field) == getattr(meta, field), field
    assert back.projected["loop"] == down(L, [4, "inf"])


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda d: d.update(format=99), "format 1"),
        (lambda d: d.pop("frontier"), "malformed"),
        (lambda d: d.update(frontier=[-3]), "malformed"),
        (lambda d: d["delivered"].pop("in"), "pipeline changed"),
        (lambda d: d.update(processor="nope"), "unknown processor"),
    ],
)
def test_corrupt_records_are_refused(topo: Topology, corrupt, message: str) -> None:
    doc = checkpoint_to_json(CheckpointMeta.build(topo, "p", down(E, 2)))
    corrupt(doc)
    with pytest.raises(CheckpointError, match=message):
        checkpoint_from_json(topo, doc)
