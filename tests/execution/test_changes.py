"""What a restart may change on a root that holds state, without Spark: state
signatures compared (:mod:`falkirk.graph.signatures`) and the policy moves allowed
from what a root holds (:mod:`falkirk.execution.changes`). The engine's refusals are
in tests/engine/test_pipeline_changes.py."""

from __future__ import annotations

import pytest

from falkirk.execution.changes import Held, policy_change, restores_from
from falkirk.graph import (
    AtBarriers,
    ContinuousEventualCheckpoint,
    EagerCheckpoint,
    FullHistory,
    GraphError,
    LazyCheckpoint,
    LogOutputs,
    Policy,
    Stateless,
)
from falkirk.graph.signatures import StateSignature

STATS = StateSignature.of(
    "aggregate",
    keys=["k"],
    aggregates={"n": ("count", None), "sx": ("sum", "x")},
    columns=[("k", "string"), ("n__count", "bigint"), ("sx__sum", "bigint")],
)


def stats(**change: object) -> StateSignature:
    parts: dict[str, object] = {
        "keys": ["k"],
        "aggregates": {"n": ("count", None), "sx": ("sum", "x")},
        "columns": [("k", "string"), ("n__count", "bigint"), ("sx__sum", "bigint")],
    } | change
    return StateSignature.of("aggregate", **parts)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("now", "phrases"),
    [
        (stats(), []),
        (stats(columns=[("sx__sum", "bigint"), ("n__count", "bigint"), ("k", "string")]), []),  # read by name
        (stats(aggregates={"n": ("count", None), "sx": ("sum", "y")}), ["aggregate 'sx' was sum of 'x', is now sum of 'y'"]),
        (
            stats(aggregates={"n": ("count", None), "sx": ("max", "x")}, columns=[("k", "string"), ("n__count", "bigint"), ("sx__max", "bigint")]),
            ["aggregate 'sx' was sum of 'x', is now max of 'x'"],  # the columns follow: not repeated
        ),
        (stats(aggregates={"n": ("count", None)}), ["aggregate 'sx' (sum of 'x') was removed"]),
        (stats(aggregates={"n": ("count", None), "sx": ("sum", "x"), "sy": ("sum", "y")}), ["aggregate 'sy' (sum of 'y') is new"]),
        (stats(keys=["k", "j"]), ["key columns were ['k'], are now ['k', 'j']"]),
        (stats(columns=[("k", "string"), ("n__count", "bigint"), ("sx__sum", "double")]), ["state column 'sx__sum' was bigint, is now double"]),
        (StateSignature.of("stateful", keys=["k"]), ["kind was aggregate, is now stateful"]),
    ],
)
def test_differences_name_each_change(now: StateSignature, phrases: list[str]) -> None:
    assert now.differences(STATS) == phrases


def test_settings_and_state_columns() -> None:
    old = StateSignature.of("join", keys=["k"], columns=[("k", "string"), ("left.x", "bigint")], settings={"how": "inner", "retain": None})
    new = StateSignature.of("join", keys=["k"], columns=[("k", "string"), ("left.x", "bigint"), ("left.z", "string")], settings={"how": "inner", "retain": 3})
    assert new.differences(old) == ["setting 'retain' was None, is now 3"]
    wider = StateSignature.of("join", keys=["k"], columns=[("k", "string"), ("left.x", "bigint"), ("left.z", "string")], settings={"how": "inner", "retain": None})
    assert wider.differences(old) == ["state column 'left.z' (string) is new"]


def test_a_signature_is_recorded_as_json() -> None:
    assert StateSignature.from_json(STATS.to_json()) == STATS
    with pytest.raises(GraphError, match="cannot be read"):
        StateSignature.from_json({**STATS.to_json(), "format": 99})
    with pytest.raises(GraphError, match="cannot be read"):
        StateSignature.from_json({"format": 1, "kind": "aggregate"})
    with pytest.raises(GraphError, match="repeat a name"):
        StateSignature.of("stateful", columns=[("a", "bigint"), ("a", "string")])


CHECKPOINTING: list[Policy] = [LazyCheckpoint(every=2), EagerCheckpoint(), AtBarriers()]
NOTHING_KEPT: list[Policy] = [Stateless(), LogOutputs()]


@pytest.mark.parametrize("policy", [*CHECKPOINTING, *NOTHING_KEPT, FullHistory(), ContinuousEventualCheckpoint()], ids=repr)
def test_a_root_that_holds_nothing_of_the_state_takes_any_policy(policy: Policy) -> None:
    assert policy_change(Held.NOTHING, "Stateless", policy) is None


@pytest.mark.parametrize("policy", [*CHECKPOINTING, *NOTHING_KEPT], ids=repr)
def test_checkpoints_continue_under_checkpoints_or_nothing_kept(policy: Policy) -> None:
    assert policy_change(Held.CHECKPOINTS, "LazyCheckpoint", policy) is None


@pytest.mark.parametrize(
    ("holds", "policy", "why"),
    [
        (Held.CHECKPOINTS, FullHistory(), "FullHistory rebuilds the state by replaying every input since epoch 1"),
        (Held.CHECKPOINTS, ContinuousEventualCheckpoint(), "rebuilds the windows from its own log"),
        *[(Held.INPUT_LOG, p, "only as a log of every input since epoch 1") for p in [*CHECKPOINTING, *NOTHING_KEPT, ContinuousEventualCheckpoint()]],
        *[(Held.CEC_LOG, p, "only as a log of the windows' control rows") for p in [*CHECKPOINTING, *NOTHING_KEPT, FullHistory()]],
    ],
    ids=str,
)
def test_other_moves_are_refused_saying_why(holds: Held, policy: Policy, why: str) -> None:
    said = policy_change(holds, "Before", policy)
    assert said is not None and said.startswith(f"policy was Before, is now {policy.name}: ") and why in said


def test_each_policy_restores_from_its_own_kind_of_record() -> None:
    assert {type(p).__name__: restores_from(p) for p in [*CHECKPOINTING, *NOTHING_KEPT, FullHistory(), ContinuousEventualCheckpoint()]} == {
        "LazyCheckpoint": Held.CHECKPOINTS,
        "EagerCheckpoint": Held.CHECKPOINTS,
        "AtBarriers": Held.CHECKPOINTS,
        "Stateless": Held.NOTHING,
        "LogOutputs": Held.NOTHING,
        "FullHistory": Held.INPUT_LOG,
        "ContinuousEventualCheckpoint": Held.CEC_LOG,
    }
    assert policy_change(Held.CEC_LOG, None, ContinuousEventualCheckpoint(replay_target=5)) is None
    assert policy_change(Held.INPUT_LOG, None, FullHistory()) is None
