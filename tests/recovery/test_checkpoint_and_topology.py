"""Ξ(p, f) defaults (section 3.4) and topology validation."""

from __future__ import annotations

import pytest

from falkirk.recovery import CheckpointError, CheckpointMeta, Topology, TopologyError
from falkirk.time import Frontier, Identity
from tests.domains import E, L, S, down


def test_epoch_defaults_are_the_frontier() -> None:
    topo = Topology.build({"a": E, "b": E, "c": L}, [("in", "a", "b", "identity"), ("out", "b", "c", "loop_entry")])
    meta = CheckpointMeta.build(topo, "b", down(E, 3))
    assert meta.notifications == down(E, 3)
    assert meta.delivered == {"in": down(E, 3)}
    assert meta.projected == {"out": down(L, [3, "inf"])}
    assert meta.discarded == meta.projected
    assert meta.logged == {"out": ()}


def test_sequence_number_defaults() -> None:
    topo = Topology.build(
        {"u": S, "v": S, "x": S}, [("e1", "u", "x", "recorded"), ("e2", "v", "x", "recorded")]
    )
    meta = CheckpointMeta.build(topo, "x", down(S, ["e1", 4], ["e2", 7]))
    assert meta.notifications.is_empty
    assert meta.delivered == {"e1": down(S, ["e1", 4]), "e2": down(S, ["e2", 7])}
    sender = CheckpointMeta.build(topo, "u", down(S, ["src", 2]))
    assert sender.projected == {"e1": Frontier.empty(S)}  # recorded: nothing stored
    assert CheckpointMeta.current(topo, "x").delivered["e1"] == down(S, ["e1", "inf"])


def test_logged_times_are_sorted_and_unique() -> None:
    topo = Topology.build({"a": E, "b": E}, [("e", "a", "b", "identity")])
    meta = CheckpointMeta.build(topo, "a", down(E, 3), logged={"e": [3, 1, 3, 2]})
    assert meta.logged == {"e": (1, 2, 3)}


def test_initial_checkpoint_is_all_empty() -> None:
    topo = Topology.build({"a": E, "b": E}, [("e", "a", "b", "identity")])
    meta = CheckpointMeta.initial(topo, "a")
    assert meta.frontier.is_empty and meta.discarded["e"].is_empty and meta.logged["e"] == ()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"delivered": {"nope": Frontier.empty(E)}}, "not input edges"),
        ({"discarded": {"nope": Frontier.empty(E)}}, "not output edges"),
        ({"projected": {"e": Frontier.empty(L)}}, "expected epoch"),
        ({"notifications": Frontier.empty(L)}, "notifications"),
    ],
)
def test_bad_metadata_names_processor_and_field(fields: dict, message: str) -> None:
    topo = Topology.build({"a": E, "b": E}, [("e", "a", "b", "identity")])
    with pytest.raises(CheckpointError, match=message) as info:
        CheckpointMeta.build(topo, "a", down(E, 1), **fields)
    assert "'a'" in str(info.value)


def test_topology_validation() -> None:
    with pytest.raises(TopologyError, match="not a processor"):
        Topology.build({"a": E}, [("e", "a", "zz", "identity")])
    with pytest.raises(TopologyError, match="same domain"):
        Topology.build({"a": E, "b": L}, [("e", "a", "b", "identity")])
    with pytest.raises(TopologyError, match="defined twice"):
        Topology.build({"a": E, "b": E}, [("e", "a", "b", "identity"), ("e", "b", "a", "identity")])
    with pytest.raises(TopologyError, match="domains are"):
        Topology.build({"a": E, "b": L}, [("e", "a", "b", Identity(E))])
    with pytest.raises(TopologyError, match="unknown processor"):
        Topology.build({"a": E}, []).require("b")
