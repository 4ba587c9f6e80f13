"""The monitor: low-watermarks, garbage collection, acknowledgements (sections 4.2-4.4)."""

from __future__ import annotations

import pytest

from falkirk.recovery import CheckpointError, CheckpointMeta, DecisionKind, Monitor, Topology
from falkirk.time import EpochDomain, Frontier

E = EpochDomain()


def down(t: int) -> Frontier:
    return Frontier.down(E, [t])


@pytest.fixture
def pipeline() -> Topology:
    """source -> agg -> sink; agg logs its outputs (a firewall)."""
    return Topology.build(
        {"source": E, "agg": E, "sink": E},
        [("e1", "source", "agg", "identity"), ("e2", "agg", "sink", "identity")],
    )


def ckpt(topo: Topology, p: str, t: int, **kw) -> CheckpointMeta:
    return CheckpointMeta.build(topo, p, down(t), **kw)


def kinds(decisions) -> set[tuple[DecisionKind, str]]:
    return {(d.kind, d.processor) for d in decisions}


def test_low_watermarks_follow_the_slowest_constraint(pipeline: Topology) -> None:
    mon = Monitor(pipeline, sources=["source"], sinks=["sink"])
    assert all(f.is_empty for f in mon.low_watermarks.values())
    # The source is stateless: re-reading input restores it to any epoch it recorded.
    assert mon.add(ckpt(pipeline, "source", 1)) == []  # agg still at ∅: source must re-send
    decisions = mon.add(ckpt(pipeline, "agg", 1, discarded={"e2": Frontier.empty(E)}))
    assert mon.low_watermark("agg") == down(1) and mon.low_watermark("source") == down(1)
    assert (DecisionKind.ACK_SOURCE, "source") in kinds(decisions)
    assert (DecisionKind.COLLECT_LOG, "agg") in kinds(decisions)
    assert mon.low_watermark("sink").is_empty
    decisions = mon.add(ckpt(pipeline, "sink", 1))
    assert kinds(decisions) == {(DecisionKind.RELEASE_SINK, "sink"), (DecisionKind.COLLECT_LOG, "sink")}
    log = next(d for d in decisions if d.kind is DecisionKind.COLLECT_LOG)
    assert log.edge == "e2" and log.upto == down(1)


def test_old_checkpoints_are_collected_below_the_watermark(pipeline: Topology) -> None:
    mon = Monitor(pipeline)
    logged = {"e2": Frontier.empty(E)}
    mon.add_many([ckpt(pipeline, "agg", t, discarded=logged) for t in (1, 2, 3)])
    decisions = mon.add_many([ckpt(pipeline, "source", t) for t in (1, 2, 3)])
    collect = [d for d in decisions if d.kind is DecisionKind.COLLECT_CHECKPOINTS]
    assert {(d.processor, d.frontiers) for d in collect} == {
        ("agg", (down(1), down(2))),
        ("source", (down(1), down(2))),
    }
    assert [m.frontier for m in mon.available("agg")] == [down(3)]


def test_checkpoints_must_form_a_chain_and_arrive_once(pipeline: Topology) -> None:
    mon = Monitor(pipeline)
    mon.add(ckpt(pipeline, "agg", 2))
    with pytest.raises(CheckpointError, match="already added"):
        mon.add(ckpt(pipeline, "agg", 2))
    with pytest.raises(CheckpointError, match="other than ⊤ and ∅"):
        mon.add(CheckpointMeta.current(pipeline, "agg"))
    mon.add(ckpt(pipeline, "agg", 1))  # out of order but comparable: inserted below
    assert [m.frontier for m in mon.available("agg")] == [down(1), down(2)]


def test_recover_keeps_survivors_at_top_behind_a_logged_edge(pipeline: Topology) -> None:
    mon = Monitor(pipeline)
    logged = {"e2": Frontier.empty(E)}
    mon.add_many([ckpt(pipeline, "source", 3), ckpt(pipeline, "agg", 3, discarded=logged)])
    live_agg = CheckpointMeta.build(pipeline, "agg", Frontier.top(E), discarded=logged, logged={"e2": [4, 5]})
    plan = mon.recover({"sink"}, current={"agg": live_agg})
    assert plan.frontiers["source"].is_top and plan.frontiers["agg"].is_top
    assert plan.frontiers["sink"].is_empty
    assert plan.resend["e2"] == (4, 5)


def test_recover_of_a_stateful_processor_rolls_back_only_what_it_must(pipeline: Topology) -> None:
    mon = Monitor(pipeline)
    mon.add_many(
        [ckpt(pipeline, "source", t) for t in (1, 2)]
        + [ckpt(pipeline, "agg", 1), ckpt(pipeline, "agg", 2)]
        + [ckpt(pipeline, "sink", 1)]
    )
    plan = mon.recover({"agg"})
    # The sink survived, but its live state (default Ξ(sink, ⊤): it delivered messages
    # at every time) holds agg output that agg, restored to ↓2 at best, may produce
    # differently, so the sink rolls back to its checkpoint ↓1. agg discarded its epoch-2
    # output, which the sink now needs again, so agg goes to ↓1; the source (no log)
    # follows agg.
    assert plan.frontiers == {"source": down(1), "agg": down(1), "sink": down(1)}
    assert plan.invalidated == {"source": (down(2),), "agg": (down(2),), "sink": ()}
    assert [m.frontier for m in mon.available("agg")] == [down(1)]
    why = plan.explanations["agg"].bounds[0]
    assert (why.constraint, why.neighbour) == ("discarded", "sink")


def test_recover_with_a_surviving_sink_that_consumed_little(pipeline: Topology) -> None:
    mon = Monitor(pipeline)
    mon.add_many([ckpt(pipeline, "source", t) for t in (1, 2)] + [ckpt(pipeline, "agg", 2)])
    live_sink = CheckpointMeta.build(pipeline, "sink", Frontier.top(E), delivered={"e2": down(2)}, notifications=down(2))
    plan = mon.recover({"agg"}, current={"sink": live_sink})
    assert plan.frontiers == {"source": down(2), "agg": down(2), "sink": Frontier.top(E)}


def test_recover_forgets_invalidated_checkpoints(pipeline: Topology) -> None:
    mon = Monitor(pipeline)
    mon.add_many([ckpt(pipeline, "agg", t) for t in (1, 2, 3)] + [ckpt(pipeline, "sink", 1)])
    plan = mon.recover({"agg", "sink", "source"})
    assert plan.frontiers["agg"].is_empty  # the source has nothing persisted
    assert plan.invalidated["agg"] == (down(1), down(2), down(3))
    assert mon.available("agg") == ()


def test_recover_validates_its_arguments(pipeline: Topology) -> None:
    mon = Monitor(pipeline)
    with pytest.raises(CheckpointError, match="failed"):
        mon.recover({"agg"}, current={"agg": CheckpointMeta.current(pipeline, "agg")})
    with pytest.raises(CheckpointError, match="must be"):
        mon.recover(set(), current={"agg": ckpt(pipeline, "agg", 1)})
