"""A restart's pipeline against the state its storage root holds.

A storage root holds each keyed processor's state as the pipeline that wrote it laid
it out (see :mod:`falkirk.graph.signatures`) and in the form its policy persists.
A restart whose pipeline changed a keyed processor would read that state as
something else and, often, run on silently with wrong results. So before anything
is read or written, :func:`check_unchanged` compares the restart with what the root
holds and refuses it with one line per changed processor:

* its **signature** (keys, functions and their input columns, state columns, the
  settings its rows depend on) against the one recorded with the pipeline's
  description at the last start (roots written before signatures were recorded:
  not compared). The description is replaced only by a start that passed this
  check, so with the same signatures: the recorded one is the one every
  checkpoint the root holds was written under;
* its **kind**, and keyed processors added or removed;
* its **policy** against what the root holds of its state (:class:`Held`, read from
  the committed records, not from the policy recorded last: an allowed move that
  committed nothing new, e.g. checkpoints to ``Stateless``, leaves the checkpoints
  behind it): a policy can only continue from what the root kept. The moves that
  keep the state exact -
  found by running each pair of policies over a restart and comparing every output
  row with an independent computation - are allowed:

  - from a policy that persists nothing (:class:`~falkirk.graph.Stateless`,
    :class:`~falkirk.graph.LogOutputs`) to any: the state is rebuilt from epoch 1,
    whose input the root keeps for it;
  - between checkpointing policies (:class:`~falkirk.graph.LazyCheckpoint`,
    :class:`~falkirk.graph.EagerCheckpoint`, global checkpoints'
    :class:`~falkirk.graph.AtBarriers`), with any parameters;
  - from checkpoints to a policy that persists nothing: the last checkpoint stays
    the state's restore point, and the input after it is kept.

  The others are refused: :class:`~falkirk.graph.FullHistory` rebuilds its state
  from a log of every input since epoch 1, which no other policy keeps, and its
  state is nothing but that log; a window's
  :class:`~falkirk.graph.ContinuousEventualCheckpoint` log is read by nothing else.

A root with nothing committed may change anything: it holds no state yet. What a
changed processor's state should become (a mapping from the old state to the new)
is not supported yet: until then, refusing is the safe answer.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from falkirk.control.domains import input_log_key
from falkirk.execution.behaviours import Held, behaviour_of
from falkirk.graph import Pipeline, Policy, Processor
from falkirk.graph.exceptions import GraphError, PipelineChangedError
from falkirk.graph.signatures import StateSignature
from falkirk.operators import Operator
from falkirk.recovery.chain import Cec, ChainKind
from falkirk.storage import MetaStore

logger = logging.getLogger(__name__)


def restores_from(policy: Policy) -> Held:
    """What ``policy`` restores a processor's state from after a restart."""
    return behaviour_of(policy).held


def held(store: MetaStore, processor: Processor) -> Held:
    """What the root holds of ``processor``'s state, as its committed records say."""
    kinds = {ChainKind.parse(kind) for _, kind, _ in store.state_files(processor.name)}
    if any(isinstance(kind, Cec) for kind in kinds):
        return Held.CEC_LOG
    if kinds:
        return Held.CHECKPOINTS
    if any(store.log_epochs(input_log_key(processor.name, k)) for k in range(len(processor.inputs))):
        return Held.INPUT_LOG
    return Held.NOTHING


def policy_change(holds: Held, recorded: str | None, policy: Policy) -> str | None:
    """Why ``policy`` cannot continue from what the root ``holds`` (``recorded``: the
    policy of the last start, for the message), or None if it can."""
    needs = restores_from(policy)
    if holds in (Held.NOTHING, needs) or (holds is Held.CHECKPOINTS and needs is Held.NOTHING):
        return None
    was = f"policy was {recorded}, is now {policy.name}" if recorded else f"policy is now {policy.name}"
    if holds is Held.INPUT_LOG:
        why = f"this root holds the state only as {holds.value}, which {policy.name} does not replay"
    elif holds is Held.CEC_LOG:
        why = f"this root holds the state only as {holds.value}, which {policy.name} does not read"
    elif needs is Held.INPUT_LOG:
        why = f"{policy.name} rebuilds the state by replaying every input since epoch 1, which this root did not keep (it holds {holds.value})"
    else:
        why = f"{policy.name} rebuilds the windows from its own log of control rows, which this root does not hold (it holds {holds.value})"
    return f"{was}: {why}"


def signatures(operators: Mapping[str, Operator]) -> dict[str, StateSignature]:
    """The state signature of every operator that has one (after set-up)."""
    found = {name: op.state_signature() for name, op in operators.items()}
    return {name: sig for name, sig in found.items() if sig is not None}


def check_unchanged(store: MetaStore, pipeline: Pipeline, current: Mapping[str, StateSignature]) -> None:
    """Refuse a restart whose keyed processors would read the root's state as
    something else (see the module docstring): a :class:`PipelineChangedError` with
    one line per changed processor. ``current``: the signatures of this run's
    operators (:func:`signatures`). Reads the root only; a root with nothing
    committed (planned offsets at most) passes."""
    if not store.has_commits(planned=False):
        return
    description = store.description() or {}
    recorded: dict[str, dict[str, Any]] = description.get("processors", {})
    lines = []
    for p in pipeline.processors.values():
        before = recorded.get(p.name)
        if before is None and recorded:  # a description without it: p is new
            new = "is new: the epochs this root committed never ran it, and it would start with an empty state"
            changes = [new] if p.stateful else []
        else:
            changes = _changes(store, p, before, current.get(p.name))
        if changes:
            lines.append(f"processor {p.name!r} ({p.kind}): {'; '.join(changes)}")
    for name, before in recorded.items():
        if name not in pipeline.processors and before.get("stateful"):
            lines.append(f"processor {name!r} ({before.get('kind')}): was removed: the epochs this root committed ran it")
    edges = _edges_changed(description, pipeline)
    if edges and not lines:
        lines.append(edges)
    if lines:
        committed = store.committed_epoch()
        at = f" (committed up to epoch {committed})" if committed is not None else ""
        listed = lines[0] if len(lines) == 1 else "\n  " + "\n  ".join(lines) + "\n"
        raise PipelineChangedError(
            f"pipeline {pipeline.name!r} changed since it last ran on this storage root{at}; its stored state would "
            f"be read as something else: {listed}. Run the pipeline as it was; or, to change it, run it as it was to "
            "a clean stop with a savepoint (Engine.run(savepoint=True)) and start the new version with "
            "Engine(..., upgrade=True) (see the upgrade guide)"
        )


def _edges_changed(description: Mapping[str, Any], pipeline: Pipeline) -> str | None:
    """A phrase when the pipeline's edges differ from the recorded ones (a processor
    added or removed, an input moved): its recorded rollback points name the old
    edges. None when they are the same (or none were recorded)."""
    recorded = description.get("topology", {}).get("edges")
    if not recorded:
        return None
    now = {str(e.name) for e in pipeline.edges()}
    added, removed = sorted(now - set(recorded)), sorted(set(recorded) - now)
    if not added and not removed:
        return None
    said = [f"edge{'s' if len(added) > 1 else ''} {', '.join(added)} added" if added else "", f"edge{'s' if len(removed) > 1 else ''} {', '.join(removed)} removed" if removed else ""]
    return f"the dataflow changed ({'; '.join(x for x in said if x)}), and the root's rollback points are those of the old one"


def _changes(store: MetaStore, p: Processor, before: dict[str, Any] | None, signature: StateSignature | None) -> list[str]:
    """What changed in processor ``p`` since the description ``before`` (None: a root
    written before descriptions), given its ``signature`` now."""
    if before is not None and before.get("kind") != p.kind and (p.stateful or before.get("stateful")):
        return [f"kind was {before.get('kind')}, is now {p.kind}"]
    if not p.stateful:
        return []
    changes = []
    recorded = before.get("state") if before is not None else None
    if recorded is not None and signature is not None:
        try:
            changes += signature.differences(StateSignature.from_json(recorded))
        except GraphError as exc:
            raise GraphError(f"processor {p.name!r}: {exc}") from exc
    policy = policy_change(held(store, p), before.get("policy") if before is not None else None, p.policy)
    if policy is not None:
        changes.append(policy)
    if changes:
        logger.info("pipeline change processor=%s changes=%s", p.name, changes)
    return changes


def record_signatures(description: dict[str, Any], current: Mapping[str, StateSignature]) -> None:
    """Add each keyed processor's signature to the pipeline's ``description`` (what
    the next start is checked against once this one is recorded)."""
    for name, signature in current.items():
        description["processors"][name]["state"] = signature.to_json()
