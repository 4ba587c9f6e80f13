"""Starting a changed pipeline from a savepoint: the upgrade.

``Engine(new_pipeline, storage, upgrade=True)`` (or ``upgrade=Upgrade(...)``, or
``from_savepoint=NAME``) compares the new pipeline with the one the storage root
recorded. Unchanged (the same processors, edges and state signatures; a stateless
function's code or a policy may differ), the run is a plain restart. Changed, it
starts from a savepoint at the root's last committed epoch ``S``:

1. **Checks** every change before anything is written (:mod:`falkirk.upgrades.compatibility`'s
   table), and refuses the upgrade with one line per processor that cannot be
   carried over, saying what to do. Keyed processors are matched by name (after
   ``renamed=``); a new one starts empty (or from ``initial_state=``); a removed one
   needs ``drop=``; a new source needs ``start_sources=`` (it reads from its
   beginning). The savepoint must be at the last committed epoch: a pipeline that
   crashed, or ran on after its savepoint, must first run to a clean stop with a
   savepoint (``run(savepoint=True)``, ``stop(savepoint=True)``).
2. **Maps** each keyed processor's saved state onto its new layout (columns added,
   widened, dropped; renamed) and writes it as a base checkpoint at ``S`` of the new
   pipeline. Crash point ``upgrade.mapped``: written, not committed (a restart does
   the upgrade again; what it wrote is swept).
3. **Commits** in one transaction: every rollback point, checkpoint and log of the
   old version forgotten (all processors stand at ``S``, nothing after it was
   committed, so nothing needs them), every processor of the new version recorded
   at ``S``, the new description with its version history.

The run then recovers as any restart: every processor from ``S``. Sinks keep the
epochs written before; a sink added at the upgrade starts at ``S + 1`` (nothing is
backfilled). A savepoint copied into another root's ``savepoints/`` directory
starts a new root the same way (``from_savepoint=NAME`` on a root with nothing
committed): its sources continue from the savepoint's positions.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from falkirk.control.domains import domain_of
from falkirk.control.faults import CrashPoint, crash_point
from falkirk.control.xi import at_tick
from falkirk.graph import Pipeline
from falkirk.graph.exceptions import PipelineChangedError
from falkirk.graph.signatures import StateSignature
from falkirk.io import ParquetTableSink
from falkirk.io.table_check import epochs_in
from falkirk.operators import Operator
from falkirk.recovery import Topology
from falkirk.spark.files import write_parquet
from falkirk.storage import CommitBatch, Forget, MetaStore, verify_files
from falkirk.storage.filesystem import FileSystem, LocalFileSystem, is_uri, local_path
from falkirk.storage.identity import IDENTITY
from falkirk.time.ticks import Tick
from falkirk.upgrades import savepoints
from falkirk.upgrades.compatibility import Refusal, StateMapping, map_state
from falkirk.upgrades.savepoints import Savepoint

logger = logging.getLogger(__name__)

#: Policies whose state an upgrade cannot start from a checkpoint (they rebuild it
#: from logs the upgrade does not keep).
_NOT_FROM_A_CHECKPOINT = {
    "FullHistory": "it rebuilds its state from a log of every input since epoch 1, which the upgrade does not keep",
    "ContinuousEventualCheckpoint": "its windows are rebuilt from its own log, which a savepoint cannot hold yet",
}


class UpgradeError(PipelineChangedError):
    """An upgrade cannot start the changed pipeline; the message says, per
    processor, why and what to do."""


@dataclass(frozen=True)
class Upgrade:
    """How to start a changed pipeline from a savepoint (see the module docstring).

    ``savepoint``: its name (None: the root's latest). ``renamed``: old processor
    name -> new. ``drop``: ``"processor"`` (a removed keyed processor) or
    ``"processor.column"`` (a removed aggregate or state column) whose state may be
    thrown away. ``defaults``: per processor, a value per new state column (or new
    aggregate) for the keys the savepoint holds (otherwise null). ``initial_state``:
    per new ``stateful`` processor, a DataFrame of its key and state columns to
    start from. ``start_sources``: new sources, which read from their beginning."""

    savepoint: str | None = None
    renamed: Mapping[str, str] = field(default_factory=dict)
    drop: Sequence[str] = ()
    defaults: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    initial_state: Mapping[str, DataFrame] = field(default_factory=dict)
    start_sources: Sequence[str] = ()


def upgrade_of(upgrade: bool | Upgrade | None, from_savepoint: str | None) -> Upgrade | None:
    """The engine's ``upgrade=`` and ``from_savepoint=`` as one :class:`Upgrade` (None: none asked)."""
    if isinstance(upgrade, Upgrade):
        if from_savepoint is not None and upgrade.savepoint not in (None, from_savepoint):
            raise UpgradeError(f"from_savepoint={from_savepoint!r} and Upgrade(savepoint={upgrade.savepoint!r}) disagree")
        return upgrade if from_savepoint is None else Upgrade(**{**upgrade.__dict__, "savepoint": from_savepoint})
    if upgrade or from_savepoint is not None:
        return Upgrade(savepoint=from_savepoint)
    return None


def changed(recorded: Mapping[str, Any] | None, description: Mapping[str, Any]) -> bool:
    """Whether ``description`` (the new pipeline's, with its state signatures)
    differs from the ``recorded`` one in what an upgrade carries over: its
    processors, their kinds, edges or state signatures."""
    if recorded is None:
        return True
    old, new = recorded.get("processors", {}), description.get("processors", {})
    if set(old) != set(new):
        return True
    for name, p in new.items():
        if old[name].get("kind") != p.get("kind") or old[name].get("state") != p.get("state"):
            return True
    edges = {k: (e.get("src"), e.get("dst")) for k, e in recorded.get("topology", {}).get("edges", {}).items()}
    return edges != {k: (e.get("src"), e.get("dst")) for k, e in description.get("topology", {}).get("edges", {}).items()}


@dataclass(frozen=True)
class _Plan:
    """What an upgrade writes: per keyed processor its mapping (or None: it starts
    empty, or from its initial state), and each source's position."""

    mappings: dict[str, StateMapping | None]
    positions: dict[str, Any]
    changes: list[str]


def upgrade_root(
    *,
    spark: SparkSession,
    fs: FileSystem,
    root: str,
    store: MetaStore,
    pipeline: Pipeline,
    topology: Topology,
    operators: Mapping[str, Operator],
    current: Mapping[str, StateSignature],
    description: dict[str, Any],
    options: Upgrade,
) -> Savepoint | None:
    """Upgrade the root to ``pipeline`` if it changed (see the module docstring):
    the savepoint it started from, or None (nothing to upgrade: a plain restart).
    ``description``: the new pipeline's (with its signatures); its history grows."""
    committed = store.committed_epoch()
    recorded = store.description()
    if committed is None and options.savepoint is None:
        return None  # a new root: nothing to carry over
    if committed is not None and not changed(recorded, description):
        description["history"] = list((recorded or {}).get("history", []))
        return None
    savepoint = _savepoint(fs, root, options.savepoint, committed, pipeline.name)
    own = store.fact(IDENTITY)
    if committed is not None and own is not None and savepoint.identity not in (None, own):
        raise UpgradeError(
            f"savepoint {savepoint.name!r} was taken on another storage root (identity {savepoint.identity}, this one is "
            f"{own}): its state would be mixed with this root's committed epochs and outputs; start a new storage root "
            "from it (from_savepoint= on a root with nothing committed), or upgrade from this root's own savepoint"
        )
    if committed is None:
        _check_tables_end_at(pipeline, savepoint)
    plan = _plan(savepoint, pipeline, current, options)
    batch = CommitBatch(epoch=savepoint.epoch, forget=Forget(everything=True))
    for p in pipeline.processors.values():
        tick = Tick.whole(savepoint.epoch, domain_of(p))
        if p.spec.keyed:
            rows = _state_rows(spark, fs, root, savepoint, p.name, operators[p.name], plan.mappings[p.name], tick, options)
            files = write_parquet(rows, fs.join(root, "checkpoints", p.name), f"{tick.label}-base", fs)
            batch.state.append((p.name, tick, "base", files))
        meta = at_tick(topology, p, tick, checkpointed=p.spec.keyed, kept_logs=lambda _: ())
        if meta is not None:
            batch.checkpoints.append((meta, []))
    if committed is None:  # a new root: the sources continue from the savepoint's positions
        batch.offsets = [(name, savepoint.epoch, position) for name, position in plan.positions.items() if position is not None]
    else:  # renamed sources continue from their old names' positions
        batch.offsets = [
            (name, savepoint.epoch, position) for name, position in plan.positions.items()
            if position is not None and store.position(name) is None
        ]  # fmt: skip
    history = [*savepoint.history, {
        "version": len(savepoint.history) + 2,
        "savepoint": savepoint.name,
        "epoch": savepoint.epoch,
        "upgraded": datetime.now(UTC).isoformat(timespec="seconds"),
        "changes": plan.changes,
    }]  # fmt: skip
    description["history"] = history
    batch.description = (pipeline.name, description)
    crash_point(CrashPoint.UPGRADE_MAPPED)
    forgotten = store.commit(batch)
    for f in forgotten:  # the old version's logs and checkpoints (swept at the next start otherwise)
        fs.delete(f.path)
    logger.warning(
        "%s: upgraded from savepoint %r at epoch %d: %s", pipeline.name, savepoint.name, savepoint.epoch,
        "; ".join(plan.changes) or "no state changed",
    )  # fmt: skip
    return savepoint


def _check_tables_end_at(pipeline: Pipeline, savepoint: Savepoint) -> None:
    """A new root started from a savepoint writes its sinks' tables from the epoch
    after it: refuse if a (local) Parquet table holds later epochs - the outputs of
    the root the savepoint was taken on, which this one would overwrite."""
    local = LocalFileSystem()
    for p in pipeline.processors.values():
        writer = getattr(p.spec, "writer", None)
        directory = None if not isinstance(writer, ParquetTableSink) else local_path(writer.path) if is_uri(writer.path) else writer.path
        if writer is None or directory is None:  # not a table, or one on a Hadoop filesystem
            continue
        later = [e for e in epochs_in(local, directory) if e > savepoint.epoch]
        if later:
            raise UpgradeError(
                f"sink {p.name!r}: its table {writer.path} holds epochs {later[0]}-{later[-1]}, after savepoint "
                f"{savepoint.name!r}'s epoch {savepoint.epoch}: the storage root the savepoint was taken on wrote them "
                "(committed, or left by a crash), and this new root would write those epochs again over them. Give this "
                f"root's sinks new tables, or, if that root is abandoned, remove the table's files of epochs after "
                f"{savepoint.epoch} (in the table and in its _pending folder) first"
            )


def _savepoint(fs: FileSystem, root: str, name: str | None, committed: int | None, pipeline: str) -> Savepoint:
    """The savepoint to start from, checked against the root."""
    advice = (
        "run the pipeline as it was to a clean stop with a savepoint (Engine.run(savepoint=True), "
        "Engine.stop(savepoint=True); examples: --savepoint), then start the new version"
    )
    if name is not None:
        savepoint = savepoints.read(fs, root, name)
    else:
        found = savepoints.listed(fs, root)
        if not found:
            raise UpgradeError(f"pipeline {pipeline!r} changed and this storage root has no savepoint to upgrade from: {advice}")
        savepoint = found[-1]
    if savepoint.pipeline != pipeline:
        raise UpgradeError(f"savepoint {savepoint.name!r} is of pipeline {savepoint.pipeline!r}, not {pipeline!r}")
    if committed is not None and committed != savepoint.epoch:
        raise UpgradeError(
            f"savepoint {savepoint.name!r} is at epoch {savepoint.epoch}, and this storage root committed up to epoch "
            f"{committed}: starting from it would lose or repeat epochs; {advice}"
        )
    return savepoint


def _plan(savepoint: Savepoint, pipeline: Pipeline, current: Mapping[str, StateSignature], options: Upgrade) -> _Plan:
    """Every keyed processor's mapping and every source's position, or an
    :class:`UpgradeError` listing every change that cannot be carried over."""
    old_of = {new: old for old, new in options.renamed.items()}
    saved = savepoint.signatures()
    old_kinds = {name: p.get("kind") for name, p in savepoint.description.get("processors", {}).items()}
    drop = frozenset(options.drop)
    refusals: list[str] = []
    mappings: dict[str, StateMapping | None] = {}
    changes: list[str] = []
    for old, new in options.renamed.items():
        if old not in old_kinds:
            refusals.append(f"renamed={{{old!r}: {new!r}}}: savepoint {savepoint.name!r} has no processor {old!r}")
        if new not in pipeline.processors:
            refusals.append(f"renamed={{{old!r}: {new!r}}}: the pipeline has no processor {new!r}")
    for p in pipeline.processors.values():
        old_name = old_of.get(p.name, p.name)
        if p.spec.source and old_name not in savepoint.sources:
            if p.name in options.start_sources:
                changes.append(f"source {p.name!r} added (from its beginning)")
            else:
                refusals.append(
                    f"source {p.name!r} is new: the savepoint has no position for it; start it from its beginning "
                    f"with Upgrade(start_sources=[{p.name!r}])"
                )
        if not p.spec.keyed:
            if old_name in saved and old_name not in drop:
                refusals.append(
                    f"processor {p.name!r} ({p.kind}): it was a {old_kinds.get(old_name)} with keyed state, which this "
                    f"{p.kind} would lose; give it another name, or say so with drop=[{old_name!r}]"
                )
            elif old_name not in old_kinds:
                changes.append(f"{p.kind} {p.name!r} added")
            continue
        why = _NOT_FROM_A_CHECKPOINT.get(p.policy.name)
        if why is not None:
            refusals.append(f"processor {p.name!r} ({p.kind}): its policy is {p.policy.name}: {why}; use EagerCheckpoint or LazyCheckpoint")
            continue
        if old_name not in saved:
            if old_name in old_kinds:
                refusals.append(f"processor {p.name!r} ({p.kind}): it was a {old_kinds[old_name]} without keyed state; give it another name")
                continue
            if p.name in options.initial_state and p.kind != "stateful":
                refusals.append(f"processor {p.name!r} ({p.kind}): initial_state= gives a stateful processor's state columns; a {p.kind} starts empty")
                continue
            mappings[p.name] = None
            changes.append(f"{p.kind} {p.name!r} added ({'from initial_state' if p.name in options.initial_state else 'empty'})")
            continue
        mapping = map_state(
            p.name, old_name, StateSignature.from_json(saved[old_name]), current[p.name],
            drop=drop, defaults=options.defaults.get(p.name),
        )  # fmt: skip
        if isinstance(mapping, Refusal):
            refusals.append(str(mapping))
            continue
        if (mapping.casts or mapping.added or mapping.dropped) and p.kind in ("join", "buffer"):
            refusals.append(f"processor {p.name!r} ({p.kind}): its columns cannot change at an upgrade yet; give it another name (it starts empty)")
            continue
        mappings[p.name] = mapping
        changes += [f"{p.kind} {p.name!r}: {c}" for c in mapping.describe()]
    mapped = {old_of.get(name, name) for name in mappings}
    present = {old_of.get(name, name) for name in pipeline.processors}
    for name in saved:
        if name in mapped:
            continue
        if name in drop:
            changes.append(f"processor {name!r} removed (its state dropped)")
        elif name not in present:  # (one still present was refused above, saying why)
            refusals.append(f"processor {name!r} ({old_kinds.get(name)}) was removed: its state would be lost; say so with drop=[{name!r}]")
    if refusals:
        raise UpgradeError(
            f"pipeline {pipeline.name!r} cannot start from savepoint {savepoint.name!r}: " + " | ".join(refusals)
        )
    positions = {
        p.name: savepoint.sources.get(old_of.get(p.name, p.name)) for p in pipeline.processors.values() if p.spec.source
    }
    return _Plan(mappings, positions, changes)


def _state_rows(
    spark: SparkSession,
    fs: FileSystem,
    root: str,
    savepoint: Savepoint,
    name: str,
    operator: Operator,
    mapping: StateMapping | None,
    tick: Tick,
    options: Upgrade,
) -> DataFrame:
    """The rows of processor ``name``'s base checkpoint at the upgrade, in its new
    layout: its old state mapped, or its initial state, or none."""
    if mapping is None:
        initial = options.initial_state.get(name)
        if initial is not None:
            operator.load_state(initial, tick.ordinal)
        return operator.checkpoint(tick.ordinal, True)  # (of an empty state, or of the initial one)
    saved = savepoint.states[mapping.old_name]
    if not saved.files:  # an empty state (Spark wrote no file)
        return operator.checkpoint(tick.ordinal, True)
    files = savepoints.absolute(fs, root, savepoint, saved.files)
    verify_files(files, fs)  # a damaged or missing file is named before any use
    rows = spark.read.parquet(*[f.path for f in files])
    columns = [
        F.col(c).cast(mapping.casts[c]).alias(c) if c in mapping.casts else F.col(c)
        for c in rows.columns if c not in mapping.dropped
    ]  # fmt: skip
    columns += [F.lit(c.default).cast(c.dtype).alias(c.name) for c in mapping.added]
    return operator.carry_over(rows.select(*columns))
