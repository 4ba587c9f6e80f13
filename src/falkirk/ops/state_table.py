"""A keyed processor's state as a table: :func:`read_state` and ``falkirk state``.

    from falkirk import read_state
    totals = read_state(spark, "/data/state", "totals")           # as a restart would restore it
    read_state(spark, "/data/state", "totals", at=40)              # its checkpoint of epoch 40
    read_state(spark, "/data/state", "totals", at="before-v2")     # a savepoint's

    falkirk state STORAGE PROCESSOR [--at EPOCH|SAVEPOINT] [--output DIR]

What is read, and when (the solver's frontier, a checkpoint, a savepoint), is
:class:`StateAt`. Each kind of keyed processor is shown with the columns its user
declared, never the engine's own:

* ``aggregate``: the key columns and each aggregate's value (an average is its sum
  over its count, as the processor emits it);
* ``stateful`` and ``lookup``: the key columns and the state's columns;
* ``window``: one row per open window: the key columns, ``window_start``,
  ``window_end`` (timestamps when the event time is one) and each aggregate;
* ``join``: one row per stored row: the key columns, ``side`` (``left`` or
  ``right``), ``epoch`` (when it arrived) and that side's columns (a column both
  sides have with different types is named ``left_x`` and ``right_x``);
* ``buffer``: the rows kept (with ``retain=N``, the last N epochs'), with ``epoch``
  (when each arrived).

Guarantees:

* ``at=None`` reads the state a restart would restore now: the recovery solver's
  frontier for the processor over the committed metadata, the same frontier
  ``falkirk status`` shows (a lazily checkpointed processor's is its last
  checkpoint, not the last committed epoch). Two processors read at the same
  explicit ``at`` (an epoch both checkpointed, e.g. a global checkpoint's, or a
  savepoint) are states of one consistent cut, as the solver would restore them
  together.
* Only committed files are read, each checked against its committed size and hash
  first; the root is opened read-only, so a pipeline running on it is neither
  blocked nor changed. The rows are materialised before :func:`read_state`
  returns: a garbage collection of the running pipeline afterwards cannot take
  them away (one that removes a file while it is being read is met by reading
  again, at the new frontier for ``at=None``).
* A processor that is not keyed, an epoch without a checkpoint (the error names
  the nearest ones), an unknown savepoint and a state kept as a continuous eventual
  checkpoint log (CEC: it has no whole state at an epoch; read it at a savepoint of
  the windows under another policy) are refused with a :class:`StateReadError`.

Local roots (a path or ``file://``); ``falkirk state`` writes Parquet.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from falkirk.control.domains import tick
from falkirk.exceptions import FalkirkError, error_text
from falkirk.graph.signatures import StateSignature
from falkirk.operators.event_time import TimeKind, outside_sql
from falkirk.ops.status import open_root
from falkirk.recovery import parse_scenario, solve
from falkirk.recovery.chain import Cec, ChainKind, entries_to_restore
from falkirk.storage import MetaStore, StoredFile, verify_files
from falkirk.storage.filesystem import LocalFileSystem, is_uri, local_path
from falkirk.time.ticks import Tick
from falkirk.upgrades import savepoints

#: The kinds of keyed processor :func:`read_state` shows, and how.
KINDS = ("aggregate", "stateful", "lookup", "window", "join", "buffer")
#: The engine's own columns of a keyed state's checkpoint files.
_EPOCH, _DELETED, _META = "_epoch", "_deleted", "_meta"


class StateReadError(FalkirkError):
    """The state asked for cannot be read; the message says why and what can be."""


@dataclass(frozen=True)
class StateAt:
    """Where a state was read from: processor ``processor`` after ``epoch`` (0: it
    has processed nothing), from ``savepoint`` if one was named, and whether the
    recovery solver chose the epoch (``at=None``)."""

    processor: str
    epoch: int
    savepoint: str | None = None
    solver: bool = False

    def describe(self) -> str:
        where = f"savepoint {self.savepoint!r}" if self.savepoint else "the solver's frontier" if self.solver else "its checkpoint"
        return f"{self.processor!r} after epoch {self.epoch} ({where})"


def read_state(spark: SparkSession, storage: str, processor: str, at: int | str | None = None) -> DataFrame:
    """Keyed processor ``processor``'s state in storage root ``storage`` as a
    DataFrame (see the module docstring): ``at`` None (what a restart would
    restore), an epoch with a checkpoint, or a savepoint's name."""
    return read_state_at(spark, storage, processor, at)[0]


def read_state_at(spark: SparkSession, storage: str, processor: str, at: int | str | None = None) -> tuple[DataFrame, StateAt]:
    """:func:`read_state`, and where the state was read from."""
    if at is not None and (isinstance(at, bool) or not isinstance(at, (int, str)) or (isinstance(at, int) and at < 0)):
        raise StateReadError(
            f"at={at!r}: give an epoch (an integer; 0: the empty state before epoch 1), a savepoint's name, or None (what a restart would restore)"
        )
    committed = None if isinstance(at, str) and not at.isdigit() else _committed_epoch(storage)
    for attempt in (1, 2):
        try:
            where, signature, files, ordinal = _locate(storage, processor, at)
            rows = _table(spark, signature, [f.path for f in files], ordinal)
            return rows.localCheckpoint(eager=True), where
        except Exception as exc:  # a running pipeline committed or collected meanwhile: read again
            if not _moved(exc) or committed is None:  # (a savepoint is never collected: a missing file is damage)
                raise
            if attempt == 2 and not isinstance(exc, _Moved) and _committed_epoch(storage) == committed:
                raise  # the same root, unchanged, misses a committed file: damaged, as the error says
            if attempt == 2:
                raise StateReadError(
                    f"the state of {processor!r} changed twice while it was read (a pipeline running on {storage} "
                    f"commits and collects its checkpoints): ask again, or pass at= an epoch or a savepoint ({exc})"
                ) from None
    raise AssertionError("unreachable")


def _committed_epoch(storage: str) -> int:
    """The root's last committed epoch (0: none), to tell a running pipeline's
    collection from damage."""
    store = open_root(storage if storage.startswith("file:") else _root(storage))
    try:
        return store.committed_epoch() or 0
    finally:
        store.close()


class _Moved(Exception):
    """The root changed between two reads of its metadata (a running pipeline)."""


def _moved(exc: BaseException) -> bool:
    """Whether ``exc`` says the running pipeline moved on under the read: a new
    commit between two reads, or a file its garbage collection removed."""
    if isinstance(exc, (_Moved, FileNotFoundError)):
        return True
    text = error_text(exc)
    return any(sign in text for sign in ("FileNotFound", "does not exist", "is missing", "No such file"))


def write_state(spark: SparkSession, storage: str, processor: str, output: str, at: int | str | None = None) -> StateAt:
    """``falkirk state``: :func:`read_state` written as Parquet to ``output`` (which
    must not exist yet); where the state was read from."""
    if Path(output).exists():
        raise StateReadError(f"{output} exists: give a new directory (nothing is overwritten)")
    rows, where = read_state_at(spark, storage, processor, at)
    rows.write.parquet(output)
    return where


# -- which files ------------------------------------------------------------------------


def _root(storage: str) -> str:
    path = local_path(storage) if is_uri(storage) else storage
    if path is None:
        raise StateReadError(f"{storage}: the state is read from a local storage root (a path or file://)")
    return path


def _locate(storage: str, processor: str, at: int | str | None) -> tuple[StateAt, StateSignature, list[StoredFile], int]:
    """Where, what and which committed files (checked) hold ``processor``'s state."""
    root = _root(storage)
    if isinstance(at, str) and not at.isdigit():  # a savepoint: its own description says what it holds
        return _from_savepoint(root, processor, at)
    store = open_root(storage if storage.startswith("file:") else root)
    try:
        description = store.description()
        if description is None:
            raise StateReadError(f"{storage} has no pipeline description: run the pipeline once with this version of Falkirk")
        signature = _signature(description, processor, f"pipeline {description['pipeline']!r} of {storage}")
        if at is None:
            t = _solver_tick(store, description, processor)
            where = StateAt(processor, t.epochs_done, solver=True)
            chain = list(store.state_files(processor))  # read after solving: it holds the frontier's entry
        else:
            chain = list(store.state_files(processor))
            t = _checkpoint_tick(chain, processor, int(at), store.committed_epoch() or 0)
            where = StateAt(processor, t.epochs_done)
    finally:
        store.close()
    if t.ordinal == 0:
        return where, signature, [], 0
    entries = [(c.ordinal, kind, files) for c, kind, files in chain]
    if not entries:
        policy = description["processors"][processor].get("policy", "its policy")
        raise StateReadError(
            f"processor {processor!r} writes no checkpoint files: under {policy} its state is rebuilt from logged "
            "input, and read_state reads checkpoints. Give it a checkpointing policy (EagerCheckpoint, LazyCheckpoint)"
        )
    if not any(o == t.ordinal for o, _, _ in entries):
        raise _Moved(f"no checkpoint of {processor!r} at tick {t} in the chain read")
    if any(isinstance(ChainKind.parse(kind), Cec) for o, kind, _ in entries if o == t.ordinal):
        raise StateReadError(
            f"processor {processor!r} keeps its state as a continuous eventual checkpoint log (CEC), which holds no "
            "whole state at an epoch: read_state cannot show it. Its windows' results are its output table's"
        )
    files = [_local(f) for entry in entries_to_restore(entries, t.ordinal) for f in entry.files]
    verify_files(files, LocalFileSystem())
    return where, signature, files, t.ordinal


def _local(f: StoredFile) -> StoredFile:
    """A committed file of a root run under a ``file:`` URI, as a local path."""
    path = local_path(f.path) if f.path.startswith("file:") else None
    return StoredFile(path, f.size, f.sha256) if path is not None else f


def _signature(description: Mapping[str, Any], processor: str, where: str) -> StateSignature:
    """``processor``'s state signature in ``description`` (``where``: whose, for messages)."""
    processors = description["processors"]
    keyed = sorted(name for name, info in processors.items() if "state" in info)
    if processor not in processors:
        raise StateReadError(f"no processor {processor!r} in {where}; its keyed processors: {keyed}")
    if "state" not in processors[processor]:
        raise StateReadError(
            f"processor {processor!r} ({processors[processor]['kind']}) keeps no keyed state; the keyed processors of "
            f"{description['pipeline']!r}: {keyed or 'none'}"
        )
    signature = StateSignature.from_json(processors[processor]["state"])
    if signature.kind not in KINDS:
        raise StateReadError(f"processor {processor!r} is a {signature.kind}, whose state read_state does not show (it shows {', '.join(KINDS)})")
    return signature


def _solver_tick(store: MetaStore, description: Mapping[str, Any], processor: str) -> Tick:
    """The tick the recovery solver would restore ``processor`` to now."""
    topology = parse_scenario(description["topology"]).topology
    stored = store.checkpoints(topology)
    if not any(stored.values()):
        return Tick(0)
    plan = solve(topology, {p: [s.meta for s in ss] for p, ss in stored.items()})
    frontier = plan.frontiers[processor]
    return tick(frontier)


def _checkpoint_tick(chain: Sequence[tuple[Tick, str, Any]], processor: str, epoch: int, committed: int) -> Tick:
    if epoch == 0:
        return Tick(0)
    whole = sorted({t.epochs_done for t, _, _ in chain if t.is_whole})
    found = [t for t, _, _ in chain if t.is_whole and t.epochs_done == epoch]
    if epoch <= committed and found:
        return max(found)
    below = [e for e in whole if e < epoch]
    above = [e for e in whole if e > epoch]
    nearest = ", ".join(f"epoch {e}" for e in ([below[-1]] if below else []) + ([above[0]] if above else []))
    if epoch > committed:
        why = f"epoch {epoch} is not committed (the last committed epoch is {committed})"
    else:
        why = f"processor {processor!r} has no checkpoint of epoch {epoch} kept"
    hint = f"the nearest with one: {nearest}" if nearest else "it has no checkpoint kept"
    raise StateReadError(f"{why}; {hint}, or at=None for the state a restart would restore (falkirk status lists them)")


def _from_savepoint(root: str, processor: str, name: str) -> tuple[StateAt, StateSignature, list[StoredFile], int]:
    """A savepoint's state of ``processor``, as the version that took it described it
    (it may have been renamed or dropped since)."""
    fs = LocalFileSystem()
    savepoint = savepoints.read(fs, root, name)
    signature = _signature(savepoint.description, processor, f"savepoint {name!r}")
    saved = savepoint.states.get(processor)
    if saved is None:
        raise StateReadError(f"savepoint {name!r} holds no state of {processor!r}; it holds {sorted(savepoint.states)}")
    files = savepoints.absolute(fs, root, savepoint, saved.files)
    verify_files(files, fs)
    return StateAt(processor, savepoint.epoch, savepoint=name), signature, files, saved.ordinal


# -- what the rows show -----------------------------------------------------------------


def _table(spark: SparkSession, signature: StateSignature, paths: list[str], ordinal: int) -> DataFrame:
    kind = signature.kind
    if kind == "join":
        return _join(spark, signature, paths, ordinal)
    if kind == "buffer":
        return _buffer(spark, signature, paths, ordinal)
    rows = _latest(spark, signature, paths)
    keys = [F.col(k) for k in signature.keys]
    if kind == "aggregate":
        return rows.select(*keys, *[_final(f.output, f.function, F.col) for f in signature.functions])
    if kind == "window":
        return _windows(rows, signature)
    values = [F.col(n) for n, _ in signature.columns if n not in signature.keys]
    return rows.select(*keys, *values)


def _schema(signature: StateSignature, extra: Sequence[str] = ()) -> str:
    return ", ".join([f"`{n}` {t}" for n, t in signature.columns] + list(extra))


def _latest(spark: SparkSession, signature: StateSignature, paths: list[str]) -> DataFrame:
    """One row per key, the newest (a base and the deltas after it), no tombstones."""
    if not paths and signature.kind == "window":  # no window open: the stored layout, empty
        keys = [f"`{n}` {t}" for n, t in signature.columns if n in signature.keys]
        partials = "".join(f", `{n}`: {t}" for n, t in signature.columns if n not in signature.keys)
        return spark.createDataFrame([], ", ".join([*keys, f"windows array<struct<start: bigint, end: bigint, last: bigint, fp: bigint{partials}>>"]))
    if not paths:
        return spark.createDataFrame([], _schema(signature))
    rows = spark.read.parquet(*paths)
    if _META in rows.columns:  # a window's record of its watermark
        rows = rows.filter(F.col(_META).isNull() | ~F.col(_META))
    if len(paths) > 1 and _EPOCH in rows.columns:
        newest = Window.partitionBy(*signature.keys).orderBy(F.col(_EPOCH).desc())
        rows = rows.withColumn("_rank", F.row_number().over(newest)).filter("_rank = 1")
    return rows.filter(~F.col(_DELETED)) if _DELETED in rows.columns else rows


def _final(out: str, function: str, col: Callable[[str], Column]) -> Column:
    """An aggregate's value from its partials (``col``: how a partial is reached)."""
    if function == "count":
        return F.coalesce(col(f"{out}__count"), F.lit(0)).alias(out)
    if function == "avg":
        return (col(f"{out}__sum") / col(f"{out}__count")).cast("double").alias(out)
    if function == "sum":
        return col(f"{out}__sum").alias(out)
    return col(f"{out}__{function}").alias(out)


def _windows(rows: DataFrame, signature: StateSignature) -> DataFrame:
    settings = dict(signature.settings)
    shape, time = settings.get("shape", ""), settings.get("time")
    kind = next((k for k in (TimeKind.TIMESTAMP_NTZ, TimeKind.TIMESTAMP) if shape.endswith(f"of a {k.value}")), TimeKind.INTEGER)
    keys = [F.col(k) for k in signature.keys]
    open_windows = rows.select(*keys, F.explode("windows").alias("w"))
    timed = {f.output for f in signature.functions if f.column == time and f.function in ("min", "max", "first", "last")}

    def bound(name: str) -> Column:
        return F.expr(outside_sql(kind, f"w.`{name}`")).alias(f"window_{name}")

    def partial(name: str) -> Column:
        column = F.col(f"w.{name}")
        return F.expr(outside_sql(kind, f"w.`{name}`")) if name.split("__")[0] in timed else column

    return open_windows.select(*keys, bound("start"), bound("end"), *[_final(f.output, f.function, partial) for f in signature.functions])


def _join(spark: SparkSession, signature: StateSignature, paths: list[str], ordinal: int) -> DataFrame:
    sides = {
        side: [(n.removeprefix(f"{side}."), t) for n, t in signature.columns if n.startswith(f"{side}.") and n != f"{side}._none"]
        for side in ("left", "right")
    }  # (a side with only key columns stores a placeholder, "_none")
    types: dict[str, set[str]] = {}
    for cols in sides.values():
        for n, t in cols:
            types.setdefault(n, set()).add(t)
    keys = list(signature.keys)
    key_types = dict(signature.columns)

    def name(side: str, column: str) -> str:
        return f"{side}_{column}" if len(types[column]) > 1 else column

    columns = [c for side in ("left", "right") for c in (name(side, n) for n, _ in sides[side])]
    columns = list(dict.fromkeys(c for c in columns if c not in keys))
    if not paths:
        schema = ", ".join([f"`{k}` {key_types[k]}" for k in keys] + ["side string", "epoch bigint"]
                           + [f"`{name(s, n)}` {t}" for s in ("left", "right") for n, t in sides[s] if n not in keys])  # fmt: skip
        return spark.createDataFrame([], schema).select(*keys, "side", "epoch", *columns)
    rows = spark.read.parquet(*paths)
    retain = dict(signature.settings).get("retain", "None")
    if retain.isdigit():  # the rows still waiting for a match after the epoch read, as the join holds them
        rows = rows.filter(F.col("_a") >= F.lit(ordinal - int(retain) + 2))
    rows = rows.filter(F.col("_a") <= ordinal)
    out = None
    for side, short in (("left", "l"), ("right", "r")):
        mine = rows.filter(F.col("_side") == short).select(
            *keys, F.lit(side).alias("side"), F.col("_a").alias("epoch"),
            *[F.col(f"{short}.{n}").alias(name(side, n)) for n, _ in sides[side] if n not in keys],
        )  # fmt: skip
        out = mine if out is None else out.unionByName(mine, allowMissingColumns=True)
    assert out is not None
    return out.select(*keys, "side", "epoch", *columns)


def _buffer(spark: SparkSession, signature: StateSignature, paths: list[str], ordinal: int) -> DataFrame:
    columns = [n for n, _ in signature.columns]
    if not paths:
        return spark.createDataFrame([], _schema(signature, ["epoch bigint"]))
    rows = spark.read.parquet(*paths).filter(F.col("_time") <= ordinal)
    retain = dict(signature.settings).get("retain", "None")
    if retain.isdigit():  # the last N epochs' rows, as the buffer holds them
        rows = rows.filter(F.col("_time") > ordinal - int(retain))
    return rows.select(*columns, F.col("_time").alias("epoch"))
